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

import ipaddress
import os
import posixpath
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from ..errors import InvalidURLError

__all__ = ["URL", "parse_url", "normalize_path", "split_netloc", "hidden_sibling", "NAME_MAX"]

#: The longest name (in bytes) of one path component on Linux file systems and HDFS's default.
NAME_MAX = 255

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
# A host name (RFC 1123 labels; underscores as some clusters use them) or an IPv4 address.
_HOST = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_\-]{0,61}[A-Za-z0-9_])?"
                   r"(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_\-]{0,61}[A-Za-z0-9_])?)*\.?$")
_USER = re.compile(r"^[A-Za-z0-9._\-$]+$")
_COMPOSITE_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9.\-]*\+")
_VOLUME_URL = re.compile(r",\s*[A-Za-z][A-Za-z0-9+.\-]*:")


def split_netloc(netloc: str, url: str = "") -> tuple[str, str, int | None]:
    """``[user@]host[:port]`` -> ``(user, host, port)``, validated: a host name, an IPv4
    address or an IPv6 address in brackets (``[::1]``), a port in 1..65535.

    Raises
    ------
    InvalidURLError
        Naming ``url`` (or the netloc) and what is wrong with it.
    """
    shown = url or netloc
    user, at, hostport = netloc.rpartition("@")
    if at and not _USER.match(user):
        raise InvalidURLError(f"{shown!r}: invalid user name {user!r} before '@'")
    if hostport.startswith("["):  # IPv6: [addr] or [addr]:port
        end = hostport.find("]")
        if end < 0:
            raise InvalidURLError(f"{shown!r}: IPv6 address without its closing ']'")
        host, rest = hostport[1:end], hostport[end + 1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise InvalidURLError(f"{shown!r}: {host!r} is not an IPv6 address") from None
        if rest and not rest.startswith(":"):
            raise InvalidURLError(f"{shown!r}: unexpected {rest!r} after the IPv6 address")
        port_text = rest[1:] if rest else None
        host = f"[{host}]"
    else:
        host, colon, port_text = hostport.partition(":")
        if not colon:
            port_text = None
        if not _HOST.match(host):
            raise InvalidURLError(f"{shown!r}: invalid host name {host!r} (letters, digits, '-', '.', or an "
                                  "IPv6 address in brackets; no spaces)")
    port = None
    if port_text is not None:
        if not port_text.isdigit() or not port_text.isascii():
            raise InvalidURLError(f"{shown!r}: invalid port {port_text!r} (a number 1-65535)")
        port = int(port_text)
        if not 1 <= port <= 65535:
            raise InvalidURLError(f"{shown!r}: port {port} is out of range (1-65535)")
    return user, host, port


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


#: A character of a path that ``format_url`` must percent-encode (``quote``'s safe set and ours).
_NEEDS_QUOTING = re.compile(r"[^A-Za-z0-9_.~/,:@+=!$&*;-]")


def format_url(scheme: str, netloc: str, path: str) -> str:
    """Compose ``scheme://netloc/path``; the path is percent-encoded where needed."""
    if _NEEDS_QUOTING.search(path) is None:  # most paths: no ``quote`` (1.5 us; every listed entry has a URL)
        return f"{scheme}://{netloc}{path}"
    # File names that are not UTF-8 reach Python with surrogate escapes (os.fsdecode): their
    # bytes are quoted as they are, and parse_url unquotes them back the same way.
    return f"{scheme}://{netloc}{quote(path, safe='/,:@+=~!$&*;', errors='surrogateescape')}"


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
        if _COMPOSITE_PREFIX.match(url):
            raise InvalidURLError(f"{url!r}: a composite scheme needs '://' and a path, e.g. plfs+file:///path "
                                  "or plfs+hdfs://namenode:port/path")
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
    if "+" in scheme and _VOLUME_URL.search(path):
        raise InvalidURLError(f"{url!r}: in a list of volumes, the volumes after the first are paths on the same "
                              f"backing store (e.g. {scheme}://{netloc}/a/ckpt,/b/ckpt), not URLs")
    path = normalize_path(unquote(path, errors="surrogateescape"), url)
    if scheme == "file":
        if netloc not in ("", "localhost"):
            raise InvalidURLError(
                f"{url!r}: file:// URLs address this machine only (host {netloc!r} given); "
                "use file:///path"
            )
        netloc = ""
    elif "+" in scheme and not scheme.split("+", 1)[1]:
        raise InvalidURLError(f"{url!r}: composite scheme {scheme!r} lacks its inner scheme")
    elif netloc:
        split_netloc(netloc, url)
    return URL(scheme, netloc, path, url)


def hidden_sibling(path: str, tag: str) -> str:
    """The hidden name ``DIR/.NAME.TAG`` beside ``path`` (a temporary copy, a part being
    removed), with NAME cut short where the whole would pass :data:`NAME_MAX` bytes: a file
    with a name of 255 bytes must still be creatable, removable and truncatable (ENAMETOOLONG
    otherwise). ``tag`` should make the name unique (a random part)."""
    head, _, name = path.rpartition("/")
    suffix = f".{tag}"
    room = NAME_MAX - 1 - len(suffix.encode("utf-8", "surrogateescape"))
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) > room:
        name = name[:room]  # whole characters (at least one byte each), then the bytes
        while len(name.encode("utf-8", "surrogateescape")) > room:
            name = name[:-1]
    return f"{head}/.{name}{suffix}"
