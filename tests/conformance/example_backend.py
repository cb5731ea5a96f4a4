"""A whole backend in one page: files kept in a local directory, through plain os calls.

What a backend must write is this much: open a raw file (positional read, positional write,
size), stat, list, mkdir, remove, rename, and name the URL in its errors. The base classes do the
rest (buffering, text mode, bounds and argument checks, walk/find/ls, block locations as one
block without hosts). docs/file-api.md shows this file; tests/conformance/test_example_backend.py
runs the conformance suite on it.
"""

from __future__ import annotations

import contextlib
import os
import stat

from hpcbridge.fs.base import FileSystem
from hpcbridge.fs.file import RawFile, readable_bytes, writable_bytes
from hpcbridge.fs.types import Capabilities, FileInfo, FileType


class DirectoryRawFile(RawFile):
    """An open file: positional I/O on an OS descriptor."""

    def __init__(self, url, mode, fd: int):
        super().__init__(url, mode)
        self.fd = fd

    def preadinto(self, buffer, offset: int) -> int:
        view = writable_bytes(buffer, self.url)
        self._check_access(offset, len(view))
        return os.preadv(self.fd, [view], offset)

    def pwrite(self, data, offset: int) -> int:
        view = readable_bytes(data, self.url)
        self._check_access(offset, len(view))
        return os.pwrite(self.fd, view, offset)

    def size(self) -> int:
        self._check_open()
        return os.fstat(self.fd).st_size

    def close(self) -> None:
        if not self.closed:
            os.close(self.fd)
        super().close()


class DirectoryFileSystem(FileSystem):
    """``exampledir://`` paths are files under the directory ``root``."""

    scheme = "exampledir"
    backend_name = "exampledir"
    capabilities = Capabilities(block_locations=False, truncate=False, permissions=False)

    def __init__(self, netloc: str = "", *, root: str):
        super().__init__(netloc, root=root)
        self.root = root

    def _os(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    @contextlib.contextmanager
    def _named(self, path: str):
        """OS errors name the URL, not the local path."""
        try:
            yield
        except OSError as exc:
            raise self._error(exc.errno, path) from None

    def _open_raw(self, path, mode):
        flags = (os.O_RDWR if mode.readable and mode.writable else os.O_WRONLY if mode.writable else os.O_RDONLY)
        flags |= (os.O_CREAT if mode.create else 0) | (os.O_TRUNC if mode.truncate else 0)
        flags |= (os.O_EXCL if mode.exclusive else 0) | os.O_CLOEXEC
        with self._named(path):
            if os.path.isdir(self._os(path)):
                raise IsADirectoryError(21, "is a directory")
            return DirectoryRawFile(self.url(path), mode, os.open(self._os(path), flags, 0o644))

    def _info(self, path):
        with self._named(path):
            st = os.stat(self._os(path))
        kind = FileType.DIRECTORY if stat.S_ISDIR(st.st_mode) else FileType.FILE
        return FileInfo(path, self.url(path), kind, 0 if kind is FileType.DIRECTORY else st.st_size,
                        st.st_mtime, st.st_mode, block_size=st.st_blksize)

    def _iterdir(self, path):
        with self._named(path):
            names = os.listdir(self._os(path))
        return (self._info(os.path.join(path, name)) for name in names)

    def _mkdir(self, path, parents, exist_ok):
        with self._named(path):
            if parents:
                os.makedirs(self._os(path), exist_ok=exist_ok)
            elif not (exist_ok and os.path.isdir(self._os(path))):
                os.mkdir(self._os(path))

    def _rm_file(self, path):
        with self._named(path):
            os.unlink(self._os(path))

    def _rmdir(self, path):
        with self._named(path):
            os.rmdir(self._os(path))

    def _rename(self, src, dst):
        with self._named(src):
            os.rename(self._os(src), self._os(dst))
