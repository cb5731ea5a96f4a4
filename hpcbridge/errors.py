"""Exceptions of hpcbridge.

hpcbridge raises the standard exceptions wherever one fits (``FileNotFoundError``,
``FileExistsError``, ``IsADirectoryError``, ``NotADirectoryError``, ``PermissionError``,
``io.UnsupportedOperation``, ``ValueError``), always with a message that names the URL and the
backend. The classes here cover what the standard ones do not; each still inherits the nearest
builtin so ``except ValueError`` / ``except ConnectionError`` keeps working.
"""

from __future__ import annotations

import os

__all__ = [
    "HpcbridgeError",
    "InvalidURLError",
    "UnknownSchemeError",
    "MissingDependencyError",
    "BackendUnavailable",
    "ForkSafetyError",
    "os_error",
]


class HpcbridgeError(Exception):
    """Base class of the exceptions defined by hpcbridge (not of the builtin ones it raises)."""


class InvalidURLError(HpcbridgeError, ValueError):
    """A URL or path that hpcbridge cannot address (relative path, malformed URL, foreign host)."""


class UnknownSchemeError(InvalidURLError):
    """The URL's scheme has no registered backend."""


class MissingDependencyError(HpcbridgeError, ImportError):
    """A backend or feature needs an optional package that is not installed."""


class BackendUnavailable(HpcbridgeError, ConnectionError):
    """The storage service behind a backend cannot be reached (down, refused, timed out)."""


class ForkSafetyError(HpcbridgeError, RuntimeError):
    """An HDFS client that does not survive ``fork()`` (the JVM of ``driver="libhdfs"``, the runtime
    of ``driver="native"``) was used in a child forked after the parent's first call; the message
    says how to start the child instead."""


def os_error(code: int, url: str, backend: str, detail: str | None = None) -> OSError:
    """Build the builtin ``OSError`` subclass for ``code`` with a message naming ``url``.

    ``OSError(errno, strerror, filename)`` picks the subclass from the errno (ENOENT gives
    FileNotFoundError, EISDIR IsADirectoryError, ...), so callers can ``except`` the standard types.

    Parameters
    ----------
    code:
        An ``errno`` value.
    url:
        The URL the operation was about; it becomes the exception's ``filename``.
    backend:
        Name of the backend, e.g. ``"posix"``; it appears in the message.
    detail:
        Optional extra explanation appended to the standard error text.
    """
    text = os.strerror(code) if code else "error"
    if detail:
        text = f"{text} ({detail})"
    return OSError(code, f"{text} [{backend} backend]", url)
