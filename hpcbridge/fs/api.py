"""Entry points of the file API: :func:`connect`, :func:`open` and :func:`url_to_fs`."""

from __future__ import annotations

from .base import FileSystem
from .registry import backend_class
from .url import parse_url

__all__ = ["connect", "open", "url_to_fs"]


def connect(url, **options) -> FileSystem:
    """Return the file system serving ``url``.

    Parameters
    ----------
    url:
        An absolute path, ``file:///path``, or ``scheme://host:port/path`` of any registered
        backend. Only the scheme and authority select the file system; the path is checked but
        not kept.
    **options:
        Backend options (e.g. ``block_size=`` for POSIX, ``user=`` for HDFS).

    Raises
    ------
    hpcbridge.errors.UnknownSchemeError
        If no backend serves the URL's scheme.
    hpcbridge.errors.InvalidURLError
        For a relative path or a malformed URL.

    Examples
    --------
    >>> import hpcbridge
    >>> fs = hpcbridge.connect("file:///")
    >>> fs.capabilities.positional_write
    True
    """
    parsed = parse_url(url)
    return backend_class(parsed.scheme).from_url(parsed, **options)


def url_to_fs(url, **options) -> tuple[FileSystem, str]:
    """Return ``(file_system, path)`` for ``url``."""
    parsed = parse_url(url)
    return backend_class(parsed.scheme).from_url(parsed, **options), parsed.path


def open(url, mode: str = "rb", buffering: int = -1, encoding=None, errors=None, newline=None, **options):
    """Open the file at ``url``; see :meth:`FileSystem.open`.

    Backend options (as for :func:`connect`) may be passed as keywords.

    Examples
    --------
    >>> import hpcbridge, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
    >>> with hpcbridge.open(path, "wb") as f:
    ...     f.write(b"hello")
    5
    >>> with hpcbridge.open("file://" + path) as f:
    ...     f.pread(4, 1)
    b'ello'
    """
    fs, path = url_to_fs(url, **options)
    return fs.open(path, mode, buffering=buffering, encoding=encoding, errors=errors, newline=newline)
