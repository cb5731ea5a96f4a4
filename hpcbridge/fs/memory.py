"""In-memory backend (``memory://name/path``): a real backend without a kernel file descriptor.

It serves three purposes: a scratch store for users' tests, the proof that the file API works
for backends whose files are not OS descriptors (as HDFS and PLFS files are not), and a second
member of the conformance suite so the suite itself is checked against two implementations.

Each ``memory://<name>`` is one store shared by every ``MemoryFileSystem`` of that name in the
process (so a pickled copy in the same process sees the same files); other processes start
empty.
"""

from __future__ import annotations

import errno
import io
import stat
import threading
import time
from collections.abc import Iterator

from .base import FileSystem
from .file import OpenMode, RawFile, check_offset, readable_bytes, writable_bytes
from .types import BlockLocation, Capabilities, FileInfo, FileType

__all__ = ["MemoryFileSystem"]

_DEFAULT_BLOCK_SIZE = 4 << 20


class _Store:
    """The files and directories of one memory:// name, guarded by one lock."""

    def __init__(self):
        self.lock = threading.RLock()
        self.files: dict[str, bytearray] = {}
        self.mtimes: dict[str, float] = {}
        self.dirs: dict[str, float] = {"/": time.time()}


_stores: dict[str, _Store] = {}
_stores_lock = threading.Lock()


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class _MemoryRawFile(RawFile):
    """An open memory file. It holds the file's bytearray itself, as a descriptor holds an inode:
    renaming or removing the file while it is open leaves the handle reading and writing the
    same bytes (under its new name, or nameless until closed), as on POSIX."""

    def __init__(self, fs: "MemoryFileSystem", path: str, mode: OpenMode):
        super().__init__(fs.url(path), mode)
        self._fs = fs
        self._path = path
        self._bytes = fs._store.files[path]

    def _touch(self) -> None:
        """Set the mtime of the file this handle writes, under whatever name it has now (none
        if it was removed); the caller holds the store's lock."""
        store = self._fs._store
        if self._path is not None and store.files.get(self._path) is not self._bytes:  # renamed or removed
            self._path = next((p for p, b in store.files.items() if b is self._bytes), None)
        if self._path is not None:
            store.mtimes[self._path] = time.time()

    def preadinto(self, buffer, offset: int) -> int:
        view = writable_bytes(buffer, self.url)
        self._check_access(offset, len(view))
        with self._fs._store.lock:
            data = self._bytes
            chunk = data[offset:offset + len(view)]
            view[: len(chunk)] = chunk
            return len(chunk)

    def pwrite(self, data, offset: int) -> int:
        view = readable_bytes(data, self.url)
        self._check_access(offset, len(view))
        store = self._fs._store
        with store.lock:
            target = self._bytes
            if not view:  # as pwrite(2): writing nothing does not extend the file
                return 0
            end = offset + len(view)
            if end > len(target):
                target.extend(bytes(end - len(target)))
            target[offset:end] = view
            self._touch()
        return len(view)

    def size(self) -> int:
        self._check_open()
        with self._fs._store.lock:
            return len(self._bytes)

    def truncate(self, size: int | None = None) -> int:
        """Cut or zero-extend the file to ``size`` bytes (default: the current position)."""
        self._check_open()
        if not self.writable():
            raise io.UnsupportedOperation(f"truncate: {self.url} is open read-only")
        size = self._pos if size is None else size
        check_offset(size, self.url, "size")
        store = self._fs._store
        with store.lock:
            data = self._bytes
            if size < len(data):
                del data[size:]
            else:
                data.extend(bytes(size - len(data)))
            self._touch()
        return size


class MemoryFileSystem(FileSystem):
    """Files held in this process's memory, addressed as ``memory://<name>/path``.

    Parameters
    ----------
    block_size:
        Block size used to cut ``block_locations`` (default 4 MiB); hosts are ``("localhost",)``.
    """

    scheme = "memory"
    backend_name = "memory"
    capabilities = Capabilities(block_locations=False, permissions=False, shared_between_processes=False)

    def __init__(self, netloc: str = "", *, block_size: int = _DEFAULT_BLOCK_SIZE):
        if not isinstance(block_size, int) or block_size <= 0:
            raise ValueError(f"block_size must be a positive int, got {block_size!r}")
        super().__init__(netloc, block_size=block_size)
        self.block_size = block_size
        with _stores_lock:
            self._store = _stores.setdefault(netloc, _Store())

    def clear(self) -> None:
        """Remove every file and directory of this store."""
        with self._store.lock:
            self._store.files.clear()
            self._store.mtimes.clear()
            self._store.dirs.clear()
            self._store.dirs["/"] = time.time()

    # -- core -------------------------------------------------------------------------------
    def _open_raw(self, path: str, mode: OpenMode) -> _MemoryRawFile:
        store = self._store
        with store.lock:
            if path in store.dirs:
                # open(2): O_CREAT|O_EXCL on any existing name is EEXIST, a directory included
                raise self._error(errno.EEXIST if mode.exclusive else errno.EISDIR, path)
            exists = path in store.files
            if exists and mode.exclusive:
                raise self._error(errno.EEXIST, path)
            if not exists:
                if not mode.create:  # as open(2): ENOTDIR where a parent is a file
                    code = errno.ENOTDIR if self._is_under_file(_parent(path)) else errno.ENOENT
                    raise self._error(code, path)
                self._check_parent(path)
                store.files[path] = bytearray()
                store.mtimes[path] = time.time()
            elif mode.truncate:
                del store.files[path][:]
                store.mtimes[path] = time.time()
            # Under the lock: the handle takes the file's bytes, which a concurrent rm would
            # otherwise take out of the store first.
            return _MemoryRawFile(self, path, mode)

    def _check_parent(self, path: str) -> None:
        parent = _parent(path)
        if parent not in self._store.dirs:
            code = errno.ENOTDIR if self._is_under_file(parent) else errno.ENOENT
            raise self._error(code, path)

    def _is_under_file(self, path: str) -> bool:
        while path != "/":
            if path in self._store.files:
                return True
            path = _parent(path)
        return False

    def _info(self, path: str) -> FileInfo:
        store = self._store
        with store.lock:
            if path in store.dirs:
                return FileInfo(path, self.url(path), FileType.DIRECTORY, 0, store.dirs[path],
                                stat.S_IFDIR | 0o755, block_size=self.block_size)
            if path in store.files:
                return FileInfo(path, self.url(path), FileType.FILE, len(store.files[path]),
                                store.mtimes[path], stat.S_IFREG | 0o644, block_size=self.block_size)
            code = errno.ENOTDIR if self._is_under_file(_parent(path)) else errno.ENOENT
            raise self._error(code, path)

    def _children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        store = self._store
        return [
            p for p in (*store.dirs, *store.files)
            if p != "/" and p.startswith(prefix) and "/" not in p[len(prefix):]
        ]

    def _iterdir(self, path: str) -> Iterator[FileInfo]:
        with self._store.lock:
            infos = [self._info(child) for child in self._children(path)]
        return iter(infos)

    def _mkdir(self, path: str, parents: bool, exist_ok: bool) -> None:
        store = self._store
        with store.lock:
            if path in store.dirs:
                if exist_ok:
                    return
                raise self._error(errno.EEXIST, path)
            if path in store.files:
                raise self._error(errno.EEXIST, path)
            if parents:
                missing = []
                current = path
                while current not in store.dirs:
                    if current in store.files:
                        raise self._error(errno.ENOTDIR, path)
                    missing.append(current)
                    current = _parent(current)
                for d in reversed(missing):
                    store.dirs[d] = time.time()
            else:
                self._check_parent(path)
                store.dirs[path] = time.time()

    def _rm_file(self, path: str) -> None:
        with self._store.lock:
            if path not in self._store.files:
                raise self._error(errno.ENOENT, path)
            del self._store.files[path]
            del self._store.mtimes[path]

    def _rmdir(self, path: str) -> None:
        with self._store.lock:
            if self._children(path):
                raise self._error(errno.ENOTEMPTY, path)
            del self._store.dirs[path]

    def _rename(self, src: str, dst: str) -> None:
        store = self._store
        with store.lock:
            src_info = self._info(src)
            self._check_parent(dst)
            if src_info.is_dir and (dst + "/").startswith(src.rstrip("/") + "/"):
                raise self._error(errno.EINVAL, dst, f"cannot move {self.url(src)} into itself")
            if dst in store.dirs:
                if not src_info.is_dir:
                    raise self._error(errno.EISDIR, dst)
                if self._children(dst):
                    raise self._error(errno.ENOTEMPTY, dst)
                del store.dirs[dst]
            elif dst in store.files and src_info.is_dir:
                raise self._error(errno.ENOTDIR, dst)
            if src_info.is_dir:
                prefix = src.rstrip("/") + "/"
                for table in (store.dirs, store.files, store.mtimes):
                    for key in [k for k in table if k == src or k.startswith(prefix)]:
                        table[dst + key[len(src):]] = table.pop(key)
            else:
                store.files[dst] = store.files.pop(src)
                store.mtimes[dst] = store.mtimes.pop(src)

    def _block_locations(self, path: str, info: FileInfo, start: int, length: int) -> list[BlockLocation]:
        from .layout import chunked_blocks

        return chunked_blocks(start, length, self.block_size, hosts=("localhost",))
