"""fsspec implementations of the hpcbridge backends: ``hpcbridge+<scheme>://...`` URLs.

fsspec already owns ``file://`` and ``hdfs://``; the ``hpcbridge+`` prefix routes a URL
through the hpcbridge backend of that scheme instead (its layout, readahead, error messages and
semantics), for every fsspec user: ``fsspec.open``, pandas, ``dask.bag.read_text``, and pyarrow
through :func:`hpcbridge.arrow.filesystem`. The protocols are registered with fsspec through
the ``fsspec.specs`` entry points of the hpcbridge package.

>>> import fsspec
>>> fs = fsspec.filesystem("hpcbridge+file")
>>> fs.backend.scheme
'file'
"""

from __future__ import annotations

import datetime
import errno
import io
import os
import posixpath
import shutil
import sys

from fsspec.spec import AbstractFileSystem
from fsspec.utils import stringify_path

from ..errors import InvalidURLError
from .base import FileSystem
from .native_exit import wait_at_exit
from .registry import backend_class
from .transfer import copy_file
from .types import FileInfo
from .url import normalize_path

__all__ = ["HpcbridgeFSSpec", "FileFSSpec", "MemoryFSSpec", "HdfsFSSpec", "fsspec_class"]

PREFIX = "hpcbridge+"


class HpcbridgeFSSpec(AbstractFileSystem):
    """An fsspec ``AbstractFileSystem`` over one hpcbridge backend (``scheme``).

    Parameters
    ----------
    netloc:
        ``host:port`` of the service (taken from the URL by fsspec); empty for local backends.
    auto_mkdir:
        Create missing parent directories when writing a file (default True), as fsspec users
        (dask, pandas, object-store habits) expect; the hpcbridge API itself keeps POSIX rules.
    **options:
        Options of the hpcbridge backend (as for :func:`hpcbridge.connect`).
    """

    #: The hpcbridge scheme served; set by each subclass.
    scheme = ""
    root_marker = "/"

    def __init__(self, netloc: str = "", auto_mkdir: bool = True, **options):
        super().__init__(netloc=netloc, auto_mkdir=auto_mkdir, **options)
        self.auto_mkdir = auto_mkdir
        #: The hpcbridge file system doing the work.
        self.backend: FileSystem = backend_class(self.scheme)(netloc, **options)

    # -- URL handling -------------------------------------------------------------------------
    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = raw = stringify_path(path)
        for prefix in (f"{PREFIX}{cls.scheme}://", f"{cls.scheme}://"):
            if path.startswith(prefix):
                rest = path[len(prefix):]
                netloc, path = (rest[:rest.find("/")], rest[rest.find("/"):]) if "/" in rest else (rest, "/")
                if cls.scheme == "file" and netloc not in ("", "localhost"):
                    # fsspec's local file system reads file://data/x as the relative path
                    # data/x; taking "/x" instead (the host dropped) reached another file.
                    raise InvalidURLError(f"{raw!r}: file:// URLs address this machine only "
                                          f"(host {netloc!r} given); use {prefix}/absolute/path")
                break
        if path == "":
            path = cls.root_marker  # fsspec's own name for the root (ls(""))
        # A relative path is refused, as the hpcbridge API refuses it (docs/file-api.md): it
        # was taken from the root ("x.txt" was "/x.txt", not the working directory's).
        return normalize_path(path, raw)

    @staticmethod
    def _get_kwargs_from_urls(path):
        rest = stringify_path(path).split("://", 1)
        if len(rest) == 2 and rest[1] and not rest[1].startswith("/"):
            return {"netloc": rest[1].split("/", 1)[0]}
        return {}

    def unstrip_protocol(self, name: str) -> str:
        return f"{PREFIX}{self.scheme}://{self.backend.netloc}{self._strip_protocol(name)}"

    # -- metadata -----------------------------------------------------------------------------
    @staticmethod
    def _entry(info: FileInfo) -> dict:
        return {
            "name": info.path,
            "size": info.size,
            "type": info.type,
            "mtime": info.mtime,
            "mode": info.mode,
            "owner": info.owner,
            "group": info.group,
            "replication": info.replication,
            "block_size": info.block_size,
        }

    def ls(self, path, detail=True, **kwargs):
        entries = self.backend.ls(self._strip_protocol(path), detail=True)
        return [self._entry(e) for e in entries] if detail else [e.path for e in entries]

    def info(self, path, **kwargs):
        return self._entry(self.backend.info(self._strip_protocol(path)))

    def walk(self, path, maxdepth=None, topdown=True, on_error="omit", **kwargs):
        """As fsspec's, but a symbolic link to a directory is listed, not descended into (as
        ``os.walk(followlinks=False)`` and fsspec's local file system): following links made
        ``find``, ``du`` and ``rm`` repeat files, or loop. ``path`` itself is walked even if a
        link. fsspec's walk recurses through this method, with the marker keyword it passes on."""
        if kwargs.pop("_hpcbridge_below", False) and self.backend.islink(self._strip_protocol(path)):
            return
        yield from super().walk(path, maxdepth=maxdepth, topdown=topdown, on_error=on_error,
                                _hpcbridge_below=True, **kwargs)

    def modified(self, path):
        return datetime.datetime.fromtimestamp(self.backend.info(self._strip_protocol(path)).mtime,
                                               tz=datetime.timezone.utc)

    # -- files --------------------------------------------------------------------------------
    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        if not autocommit:
            raise io.UnsupportedOperation(
                f"fsspec transactions are not supported by {PREFIX}{self.scheme}; "
                "hpcbridge writes are made atomic with hpcbridge.fs.transfer.copy_file instead"
            )
        buffering = block_size if isinstance(block_size, int) and block_size > 0 else -1
        path = self._strip_protocol(path)
        if "pyarrow" in sys.modules:  # pandas, Dask or hpcbridge.arrow reading through Arrow
            wait_at_exit()  # Arrow's threads may release what it read after exit began
        if "r" not in mode:
            self._make_parent(path)
        return self.backend.open(path, mode, buffering=buffering)

    def _make_parent(self, path: str) -> None:
        if self.auto_mkdir:
            try:
                self.backend.mkdir(posixpath.dirname(path), parents=True, exist_ok=True)
            except FileExistsError:  # the "parent" is a file: what open(2) of the path says
                raise NotADirectoryError(errno.ENOTDIR, "Not a directory", self.backend.url(path)) from None

    def cat_file(self, path, start=None, end=None, **kwargs):
        path = self._strip_protocol(path)
        if start is None and end is None:
            return self.backend.read_bytes(path)
        size = None
        if (start is not None and start < 0) or (end is not None and end < 0) or end is None:
            size = self.backend.info(path).size
        start = 0 if start is None else (max(0, size + start) if start < 0 else start)
        end = size if end is None else (max(0, size + end) if end < 0 else end)
        return self.backend.pread(path, offset=start, length=max(0, end - start))

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        with self.open(path, "xb" if mode == "create" else "wb") as f:
            f.write(value)

    def touch(self, path, truncate=True, **kwargs):
        path = self._strip_protocol(path)
        if truncate or not self.backend.exists(path):
            self._make_parent(path)
            self.backend.write_bytes(path, b"")
        else:
            os.utime(self.backend.local_path(path))

    # -- transfers with the local file system ---------------------------------------------------
    def get_file(self, rpath, lpath, *args, **kwargs):
        """Copy one file to the local path ``lpath`` (a file onto itself: ``shutil.SameFileError``)."""
        self._refuse_same_file(rpath, lpath)
        return super().get_file(rpath, lpath, *args, **kwargs)

    def put_file(self, lpath, rpath, *args, **kwargs):
        """Copy the local file ``lpath`` to ``rpath`` (a file onto itself: ``shutil.SameFileError``)."""
        self._refuse_same_file(rpath, lpath)
        return super().put_file(lpath, rpath, *args, **kwargs)

    def _refuse_same_file(self, rpath, lpath) -> None:
        """Refuse a transfer between a local path and the same file of a locally mounted backend,
        as fsspec's local file system does: fsspec's generic get_file/put_file open the target
        for writing first, so the file was truncated (get) or the copy never ended (put)."""
        if not isinstance(lpath, (str, os.PathLike)):
            return  # a file object
        try:
            local = self.backend.local_path(self._strip_protocol(rpath))
        except io.UnsupportedOperation:
            return  # not a local mount: no local path is the same file
        try:
            same = os.path.samefile(local, lpath) and not os.path.isdir(local)
        except OSError:  # one of them missing
            return
        if same:
            raise shutil.SameFileError(f"{self.backend.url(local)!r} and {os.fspath(lpath)!r} are the same file")

    # -- namespace ----------------------------------------------------------------------------
    def mkdir(self, path, create_parents=True, **kwargs):
        self.backend.mkdir(self._strip_protocol(path), parents=create_parents)

    def makedirs(self, path, exist_ok=False):
        self.backend.mkdir(self._strip_protocol(path), parents=True, exist_ok=exist_ok)

    def rmdir(self, path):
        self.backend.rmdir(self._strip_protocol(path))

    def rm_file(self, path):
        """Remove one file (a directory is refused, as ``os.remove`` refuses it)."""
        path = self._strip_protocol(path)
        if self.backend.isdir(path) and not self.backend.islink(path):  # os.remove unlinks a link
            raise IsADirectoryError(errno.EISDIR, "Is a directory", self.backend.url(path))
        self.backend.rm(path)

    def rm(self, path, recursive=False, maxdepth=None):
        """Remove files, and directories with ``recursive``. As fsspec's local file system: a
        directory without ``recursive`` is a ValueError; unlike it, globs are expanded (as
        fsspec's other file systems expand them)."""
        if maxdepth is not None:  # deepest first, directories emptied by then
            # A link named (or matched by a glob) is removed itself: expanding it listed, and
            # then removed, the files of the directory it points to.
            targets = set()
            for p in self.expand_path(path, recursive=False):
                if self.backend.islink(p):
                    targets.add(p)
                else:
                    targets.update(self.expand_path(p, recursive=recursive, maxdepth=maxdepth))
            for p in sorted(targets, reverse=True):
                if self.backend.isdir(p) and not self.backend.islink(p):
                    self.backend.rmdir(p)
                else:
                    self.backend.rm(p)
            return
        removed: list[str] = []
        for p in self.expand_path(path, recursive=False):
            if any(p.startswith(r.rstrip("/") + "/") for r in removed):
                continue  # inside a directory this call removed already
            if not recursive and self.backend.isdir(p) and not self.backend.islink(p):
                raise ValueError(f"Cannot delete directory, set recursive=True: {self.backend.url(p)}")
            self.backend.rm(p, recursive=recursive)  # a missing path raises, as os.remove does
            removed.append(p)

    def cp_file(self, path1, path2, **kwargs):
        """Copy one file (atomically, see :func:`hpcbridge.fs.transfer.copy_file`)."""
        src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
        if self.backend.isdir(src):
            self.backend.mkdir(dst, parents=True, exist_ok=True)
        else:
            self._make_parent(dst)
            copy_file(self.backend, src, self.backend, dst, sync=False)

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        """Move as fsspec's local file system moves (``shutil.move``): into an existing
        directory under the source's name (an entry of that name there is an error), else a
        rename (parents made with ``auto_mkdir``); a directory never into itself. Globs and
        lists of paths are fsspec's generic copy and remove."""
        if not (isinstance(path1, str) and isinstance(path2, str)) or any(c in path1 for c in "*?["):
            return super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)
        src = posixpath.normpath(self._strip_protocol(path1))
        dst = posixpath.normpath(self._strip_protocol(path2))
        source = self.backend.info(src)  # a missing source: FileNotFoundError naming it
        if self.backend.isdir(dst):
            if dst == src:
                return  # onto itself
            dst = posixpath.join(dst, posixpath.basename(src))
            if self.backend.exists(dst):
                raise FileExistsError(errno.EEXIST, f"moving {self.backend.url(src)}: destination already exists",
                                      self.backend.url(dst))
        if source.is_dir and (dst == src or dst.startswith(src.rstrip("/") + "/")):
            raise OSError(errno.EINVAL, f"cannot move a directory into itself ({self.backend.url(src)})",
                          self.backend.url(dst))
        self._make_parent(dst)
        self.backend.rename(src, dst)


_classes: dict[str, type[HpcbridgeFSSpec]] = {}


def fsspec_class(scheme: str) -> type[HpcbridgeFSSpec]:
    """The fsspec class (protocol ``hpcbridge+<scheme>``) for an hpcbridge backend scheme."""
    if scheme not in _classes:
        name = "".join(part.capitalize() for part in scheme.replace("+", "_").split("_")) + "FSSpec"
        _classes[scheme] = type(name, (HpcbridgeFSSpec,), {
            "scheme": scheme,
            "protocol": (PREFIX + scheme,),
            "__doc__": f"fsspec protocol ``{PREFIX}{scheme}``: the hpcbridge {scheme}:// backend.",
            "__module__": __name__,
        })
        # Reachable by name, so pickle (Dask, multiprocessing) stores a reference, not the class.
        globals()[name] = _classes[scheme]
    return _classes[scheme]


FileFSSpec = fsspec_class("file")
MemoryFSSpec = fsspec_class("memory")
HdfsFSSpec = fsspec_class("hdfs")
