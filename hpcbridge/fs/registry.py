"""The backend registry: URL scheme -> FileSystem class, imported on first use.

Three sources, looked up in this order:

1. backends registered at run time with :func:`register_backend`;
2. the ``hpcbridge.backends`` entry-point group (how a backend in this or another package
   registers itself when installed);
3. the table of in-tree backends below, so a source checkout works without installation.

Nothing is imported until a scheme is asked for, so ``import hpcbridge`` stays cheap and an
optional dependency of one backend (hdfs-native, pyarrow) never breaks the others. A composite
scheme ``wrapper+inner`` is served by the backend registered for ``wrapper+inner`` if there is
one, else by the one registered for ``wrapper``.
"""

from __future__ import annotations

import importlib
import threading
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from ..errors import MissingDependencyError, UnknownSchemeError

if TYPE_CHECKING:  # pragma: no cover
    from .base import FileSystem

__all__ = ["register_backend", "backend_class", "known_schemes"]

ENTRY_POINT_GROUP = "hpcbridge.backends"

#: In-tree backends: scheme -> (dotted "module:Class", install hint for its optional dependency).
_IN_TREE: dict[str, tuple[str, str | None]] = {
    "file": ("hpcbridge.fs.posix:PosixFileSystem", None),
    "memory": ("hpcbridge.fs.memory:MemoryFileSystem", None),
    "hdfs": ("hpcbridge.fs.hdfs:HdfsFileSystem", "pip install 'hpcbridge[hdfs]'"),
    "plfs": ("hpcbridge.plfs.fs:PlfsFileSystem", None),
}

_lock = threading.Lock()
_registered: dict[str, "type[FileSystem] | str"] = {}
_entry_points: dict[str, str] | None = None
_loaded: dict[str, "type[FileSystem]"] = {}


def register_backend(scheme: str, backend: "type[FileSystem] | str", *, clobber: bool = False) -> None:
    """Register ``backend`` (a class or a ``"module:Class"`` string) for URL ``scheme``.

    Raises
    ------
    ValueError
        If ``scheme`` is already registered at run time and ``clobber`` is false.
    """
    scheme = scheme.lower()
    with _lock:
        if scheme in _registered and not clobber:
            raise ValueError(f"a backend is already registered for scheme {scheme!r}; pass clobber=True")
        _registered[scheme] = backend
        _loaded.pop(scheme, None)


def _entry_point_table() -> dict[str, str]:
    global _entry_points
    if _entry_points is None:
        _entry_points = {ep.name.lower(): ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return _entry_points


def known_schemes() -> list[str]:
    """All schemes a backend is known for (registered, installed or in-tree)."""
    return sorted(set(_registered) | set(_entry_point_table()) | set(_IN_TREE))


def _target_for(scheme: str) -> "tuple[type[FileSystem] | str, str | None] | None":
    if scheme in _registered:
        return _registered[scheme], None
    hint = _IN_TREE.get(scheme, (None, None))[1]
    if scheme in _entry_point_table():
        return _entry_point_table()[scheme], hint
    if scheme in _IN_TREE:
        return _IN_TREE[scheme]
    return None


def _import(target: str, scheme: str, hint: str | None) -> "type[FileSystem]":
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        advice = f"; install it with: {hint}" if hint else ""
        raise MissingDependencyError(
            f"the backend for {scheme}:// URLs needs {exc.name or module_name!r}, which is not "
            f"installed{advice}"
        ) from exc
    return getattr(module, attr)


def backend_class(scheme: str) -> "type[FileSystem]":
    """Return the FileSystem class serving URL ``scheme``, importing it on first use.

    Raises
    ------
    UnknownSchemeError
        If no backend is known for the scheme.
    MissingDependencyError
        If the backend's optional dependency is not installed.
    """
    scheme = scheme.lower()
    if scheme in _loaded:
        return _loaded[scheme]
    found = _target_for(scheme)
    if found is None and "+" in scheme:
        found = _target_for(scheme.split("+", 1)[0])
    if found is None:
        raise UnknownSchemeError(
            f"no hpcbridge backend for scheme {scheme!r}; known schemes: {', '.join(known_schemes())}"
        )
    target, hint = found
    cls = _import(target, scheme, hint) if isinstance(target, str) else target
    with _lock:
        _loaded[scheme] = cls
    return cls
