"""MPI-IO for every backend: an mpi4py-like ``File`` with two-phase collective aggregation.

>>> from mpi4py import MPI                                                 # doctest: +SKIP
>>> from hpcbridge.mpi import File                                          # doctest: +SKIP
>>> with File.open(MPI.COMM_WORLD, "plfs+hdfs://nn:9820/ckpt", "w") as f:   # doctest: +SKIP
...     f.write_at_all(MPI.COMM_WORLD.rank * len(block), block)

Importing this package does not import mpi4py; :meth:`File.open` does. Design and hints:
docs/collective-io.md.
"""

__all__ = ["File", "Hints", "FileView", "parse_hints"]


def __getattr__(name):
    # Lazy: ``import hpcbridge.mpi`` must not initialise MPI (mpi4py calls MPI_Init on import).
    if name == "File":
        from .file import File

        return File
    if name in ("Hints", "parse_hints"):
        from . import hints

        return getattr(hints, name)
    if name == "FileView":
        from .view import FileView

        return FileView
    raise AttributeError(f"module 'hpcbridge.mpi' has no attribute {name!r}")
