"""Parsing and validating hpcbridge URLs.

Accepted forms:

* ``/abs/path`` — a plain absolute path, meaning ``file:///abs/path``;
* ``file:///abs/path`` (and ``file://localhost/abs/path``, ``file:/abs/path``);
* ``<scheme>://<netloc>/<path>`` for any registered backend, e.g. ``hdfs://nn:9820/data``;
* composite schemes ``<wrapper>+<inner>://...`` (``plfs+file:///ckpt``) for backends layered
  over another backend.

Relative paths are refused: a relative path means something different on every MPI rank and
Dask worker (each has its own working directory), so hpcbridge asks for an absolute one.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from ..errors import InvalidURLError

__all__ = ["URL", "parse_url", "normalize_path"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")


@dataclass(frozen=True)
class URL:
    """A parsed hpcbridge URL.

    Attributes
    ----------
    scheme:
        Lower-case scheme, possibly composite (``"plfs+file"``).
    netloc:
        ``host:port`` or ``user@host:port``; empty for local schemes.
    path:
        Absolute, normalised path (percent-decoded); always starts with ``/``.
    raw:
        The text the URL was parsed from, for error messages.
    """

    scheme: str
    netloc: str
    path: str
    raw: str

    @property
    def base_scheme(self) -> str:
        """The outer scheme of a composite one: ``"plfs"`` for ``"plfs+file"``."""
        return self.scheme.split("+", 1)[0]

    @property
    def inner_url(self) -> str:
        """For a composite scheme, the URL of the layer below (``file:///x`` for ``plfs+file:///x``)."""
        if "+" not in self.scheme:
            raise InvalidURLError(f"URL {self.raw!r} has no inner scheme")
        inner = self.scheme.split("+", 1)[1]
        return f"{inner}://{self.netloc}{quote(self.path)}"

    def with_path(self, path: str) -> str:
        """The URL of another path on the same file system."""
        return format_url(self.scheme, self.netloc, path)

    def __str__(self) -> str:
        return format_url(self.scheme, self.netloc, self.path)


def format_url(scheme: str, netloc: str, path: str) -> str:
    """Compose ``scheme://netloc/path``; the path is percent-encoded where needed."""
    return f"{scheme}://{netloc}{quote(path, safe='/,:@+=~!$&*;')}"


def normalize_path(path: str, raw: str | None = None) -> str:
    """Normalise an absolute path lexically: collapse ``//``, ``.`` and ``..``, drop a trailing ``/``.

    Raises
    ------
    InvalidURLError
        If ``path`` is relative or contains a NUL byte.
    """
    shown = raw if raw is not None else path
    if "\0" in path:
        raise InvalidURLError(f"path in {shown!r} contains a NUL byte")
    if not path.startswith("/"):
        raise InvalidURLError(
            f"{shown!r} is a relative path; hpcbridge needs an absolute path or a URL "
            f"(relative paths differ between MPI ranks and Dask workers: use os.path.abspath)"
        )
    # posixpath.normpath keeps a leading "//" (POSIX leaves its meaning open); we do not.
    normalized = posixpath.normpath("/" + path.lstrip("/"))
    return normalized


def parse_url(url: str | os.PathLike) -> URL:
    """Parse ``url`` into a :class:`URL`, refusing what hpcbridge cannot address.

    Parameters
    ----------
    url:
        An absolute path, a ``file://`` URL or a ``scheme://netloc/path`` URL.

    Raises
    ------
    TypeError
        If ``url`` is not a string or path-like object.
    InvalidURLError
        If it is empty, relative, malformed, or a ``file://`` URL naming another host.
    """
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if isinstance(url, bytes):
        url = os.fsdecode(url)
    if not isinstance(url, str):
        raise TypeError(f"expected a URL or path string, got {type(url).__name__}: {url!r}")
    if not url:
        raise InvalidURLError("empty URL: expected an absolute path or scheme://host/path")
    match = _SCHEME.match(url)
    # A single letter before ':' would be a Windows drive; hpcbridge is POSIX-only, so treat
    # anything without a scheme of two or more letters as a path.
    if not match or len(match.group(1)) < 2:
        return URL("file", "", normalize_path(url), url)
    scheme = match.group(1).lower()
    rest = url[match.end():]
    if rest.startswith("//"):
        netloc, slash, path = rest[2:].partition("/")
        path = slash + path
    else:
        netloc, path = "", rest
    if not path:
        path = "/"
    path = normalize_path(unquote(path), url)
    if scheme == "file":
        if netloc not in ("", "localhost"):
            raise InvalidURLError(
                f"{url!r}: file:// URLs address this machine only (host {netloc!r} given); "
                "use file:///path"
            )
        netloc = ""
    elif "+" in scheme and not scheme.split("+", 1)[1]:
        raise InvalidURLError(f"{url!r}: composite scheme {scheme!r} lacks its inner scheme")
    return URL(scheme, netloc, path, url)
