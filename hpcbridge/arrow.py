"""pyarrow file systems over any hpcbridge backend, for ``pyarrow.dataset`` and Parquet.

>>> import hpcbridge.arrow, pyarrow as pa, pyarrow.parquet as pq, tempfile
>>> fs, path = hpcbridge.arrow.filesystem_and_path("file://" + tempfile.mkdtemp())
>>> pq.write_table(pa.table({"x": [1, 2]}), path + "/t.parquet", filesystem=fs)
>>> pq.read_table(path + "/t.parquet", filesystem=fs).num_rows
2
"""

from __future__ import annotations

from .errors import MissingDependencyError
from .fs.fsspec_adapter import fsspec_class
from .fs.url import parse_url

__all__ = ["filesystem", "filesystem_and_path"]


def _pyarrow_fs():
    try:
        import pyarrow.fs as pafs
    except ImportError as exc:  # pragma: no cover - pyarrow is in the [arrow] extra
        raise MissingDependencyError(
            "hpcbridge.arrow needs pyarrow: pip install 'hpcbridge[arrow]'"
        ) from exc
    return pafs


def filesystem_and_path(url, **options):
    """Return ``(pyarrow.fs.FileSystem, path)`` for an hpcbridge URL.

    The file system is a ``PyFileSystem(FSSpecHandler(...))`` around the hpcbridge backend of
    the URL's scheme; ``path`` is the URL's path, as pyarrow expects it.
    """
    pafs = _pyarrow_fs()
    parsed = parse_url(url)
    spec = fsspec_class(parsed.scheme)(parsed.netloc, **options)
    return pafs.PyFileSystem(pafs.FSSpecHandler(spec)), parsed.path


def filesystem(url, **options):
    """A pyarrow file system over the hpcbridge backend serving ``url``."""
    return filesystem_and_path(url, **options)[0]
