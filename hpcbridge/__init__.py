"""hpcbridge: one file API over HPC storage and Hadoop storage.

HPC parallel file systems (through their POSIX mount, MPI-IO and parallel HDF5) and HDFS serve
each other's workloads through a thin shim: readahead, exposed block layout, PLFS-style log
containers, collective-I/O aggregation and locality-aware Dask scheduling.

>>> import hpcbridge
>>> fs = hpcbridge.connect("file:///")
>>> fs.scheme
'file'

Subpackages: :mod:`hpcbridge.fs` (API and backends), :mod:`hpcbridge.arrow` (pyarrow),
:mod:`hpcbridge.cli` (the ``hpcbridge`` command),
:mod:`hpcbridge.mount` (FUSE mounts of any backend: ``hpcbridge.mount(url, mountpoint)``),
:mod:`hpcbridge.testing` (conformance suite).
"""

from .errors import BackendUnavailable, ForkSafetyError, InvalidURLError, MissingDependencyError, UnknownSchemeError
from .fs import BlockLocation, Capabilities, FileInfo, FileSystem, connect, open, url_to_fs


def __getattr__(name):
    if name == "mount":  # hpcbridge.mount(url, mountpoint): the package is callable (imported on first use)
        import importlib

        return importlib.import_module(".mount", __name__)
    # The version comes from the installed metadata, read on first use rather than at import.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("hpcbridge")
        except PackageNotFoundError:  # a source tree that is not installed
            return "0+unknown"
    raise AttributeError(f"module 'hpcbridge' has no attribute {name!r}")


__all__ = [
    "connect",
    "open",
    "url_to_fs",
    "FileSystem",
    "FileInfo",
    "BlockLocation",
    "Capabilities",
    "BackendUnavailable",
    "ForkSafetyError",
    "InvalidURLError",
    "MissingDependencyError",
    "UnknownSchemeError",
    "__version__",
]
