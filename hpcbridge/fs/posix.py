"""POSIX backend: any mounted file system (local disks, OrangeFS, Lustre, GPFS, CephFS, NFS).

Data moves with ``os.preadv``/``os.pwrite`` on file descriptors straight between the kernel and
the caller's buffer; sequential I/O uses :class:`io.FileIO` under the io buffering classes, so a
read of a large block reaches ``read(2)`` with the caller's memory and no copy.

``block_locations`` reports the layout the mounted file system exposes (see
:mod:`hpcbridge.fs.layout` and docs/layout.md).
"""

from __future__ import annotations

import errno
import grp
import io
import mmap
import os
import pwd
import shutil
import stat
import sys
from collections.abc import Iterator
from functools import lru_cache

from ..errors import InvalidURLError, os_error
from .base import FileSystem
from .buffers import HUGE, bytes_of, empty_bytes, read_new_bytes
from .file import OpenMode, check_range, readable_bytes, writable_bytes
from .layout import DEFAULT_LOGICAL_BLOCK_SIZE, posix_block_locations
from .types import BlockLocation, Capabilities, FileInfo, FileType

__all__ = ["PosixFileSystem", "PosixRawFile"]

BACKEND = "posix"

# Linux moves at most 0x7ffff000 bytes per read/write call: larger transfers loop.
_MAX_IO = 0x7FFFF000
#: The limit on buffers per preadv/pwritev call (Linux: UIO_MAXIOV, 1024).
IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


@lru_cache(maxsize=256)
def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@lru_cache(maxsize=256)
def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


class _errors_named:
    """Re-raise OS errors with the URL and backend in the message, without the lower traceback.

    A class, not a ``contextmanager`` generator: every positional read and write enters it, and
    the generator's machinery cost ~3 us per call (a third of a 4 KiB ``pwrite``)."""

    __slots__ = ("url",)

    def __init__(self, url: str):
        self.url = url

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, traceback) -> bool:
        if kind is not None and issubclass(kind, OSError) and exc.errno is not None:
            raise os_error(exc.errno, self.url, BACKEND) from None
        return False


class PosixRawFile(io.FileIO):
    """An OS file descriptor as a raw hpcbridge file: FileIO plus zero-copy positional I/O."""

    def __init__(self, fd: int, mode: OpenMode, url: str, os_path: str):
        super().__init__(fd, _raw_mode_string(mode), closefd=True)
        self.url = url
        self.name = os_path

    def _check_access(self, offset: int, length: int) -> None:
        if self.closed:
            raise ValueError(f"I/O operation on closed file {self.url}")
        check_range(offset, length, self.url)

    def write(self, data) -> int:
        """As FileIO's; errors (ENOSPC, EIO, EDQUOT...) name the URL."""
        with _errors_named(self.url):
            return super().write(data)

    def readinto(self, buffer) -> int:
        """As FileIO's; errors name the URL."""
        with _errors_named(self.url):
            return super().readinto(buffer)

    def readall(self) -> bytes:
        """As FileIO's (``read()`` to the end; ``read_bytes``); a large rest of a regular file is
        read straight into one bytes object advised for huge pages (hpcbridge.fs.buffers:
        FileIO's own faulted its fresh 128 MiB page by page, 60 against 13 ms)."""
        with _errors_named(self.url):
            st = os.fstat(self.fileno())
            position = self.tell()
            if not stat.S_ISREG(st.st_mode) or st.st_size - position < HUGE:
                return super().readall()
            data, view = empty_bytes(st.st_size - position)
            filled = self.preadinto(view, position)
            self.seek(position + filled)
            rest = super().readall()  # what the file grew by since fstat
        return bytes_of(data, filled) + rest if rest else bytes_of(data, filled)

    def truncate(self, size: int | None = None) -> int:
        """As FileIO's; errors name the URL."""
        with _errors_named(self.url):
            return super().truncate(size)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """As FileIO's, with the errors of the other backends (ValueError naming the URL)."""
        if self.closed:
            raise ValueError(f"I/O operation on closed file {self.url}")
        try:
            return super().seek(offset, whence)
        except OverflowError:
            raise ValueError(f"seek position {offset} is past the largest file offset (2**63-1) "
                             f"for {self.url}") from None
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            if whence == io.SEEK_SET and offset >= 0:  # past what this file system allows (ext4: 16 TiB)
                raise ValueError(f"seek position {offset} is past the largest offset of this file system for "
                                 f"{self.url}") from None
            raise ValueError(f"negative seek position (offset {offset}, whence {whence}) for {self.url}") from None

    def preadinto(self, buffer, offset: int) -> int:
        """Read into ``buffer`` at ``offset`` until it is full or the file ends."""
        view = writable_bytes(buffer, self.url)
        self._check_access(offset, len(view))
        total = 0
        fd = self.fileno()
        with _errors_named(self.url):
            while total < len(view):
                n = os.preadv(fd, [view[total:total + _MAX_IO]], offset + total)
                if n == 0:
                    break
                total += n
        return total

    def preadvinto(self, buffers, offset: int) -> int:
        """Scatter read with ``os.preadv``: the consecutive bytes at ``offset`` straight into
        ``buffers`` in turn (no scratch copy); returns the count, short at end of file."""
        views = [writable_bytes(b, self.url) for b in buffers]
        want = sum(map(len, views))
        self._check_access(offset, want)
        fd = self.fileno()
        total = first = 0
        with _errors_named(self.url):
            while first < len(views):
                n = os.preadv(fd, views[first:first + IOV_MAX], offset + total)
                if n == 0:
                    break
                total += n
                if total == want:  # the common case: all of it at once, no buffer to walk past
                    break
                # Skip what was filled; a partly filled buffer continues where the read stopped.
                while first < len(views) and n >= len(views[first]):
                    n -= len(views[first])
                    first += 1
                if n:
                    views[first] = views[first][n:]
        return total

    def pread(self, size: int, offset: int) -> bytes:
        """Read up to ``size`` bytes at ``offset``."""
        self._check_access(offset, size)
        if size < HUGE:
            with _errors_named(self.url):
                data = os.pread(self.fileno(), size, offset)
            if len(data) == size or not data:
                return data
        # Large (or short: the rest): read straight into the bytes returned, its pages advised
        # huge (hpcbridge.fs.buffers: os.pread's fresh 64 MiB faulted page by page, 5x slower).
        return read_new_bytes(size, lambda view: self.preadinto(view, offset))

    def map_range(self, offset: int, length: int) -> memoryview:
        """The ``length`` bytes at ``offset`` mapped into memory: a writable view of a private,
        copy-on-write ``mmap`` of the file (no read, no copy: pages come from the page cache
        when first touched; writes to the view stay in this process, the file is unchanged).

        The mapping lives as long as the view or anything derived from it (a numpy array over
        it) and holds no file descriptor. It shows the file as it is when each page is first
        touched, and, as any mapping (``numpy.memmap``): if another program truncates the file,
        touching a page past the new end (one this process has not written to) raises
        ``SIGBUS``. Refused for ranges past the end of the file.
        """
        self._check_access(offset, length)
        if not self.readable():
            raise io.UnsupportedOperation(f"map_range: {self.url} is open write-only")
        size = self.size()
        if offset + length > size:
            raise ValueError(f"map_range: bytes {offset}..{offset + length} are past the end of {self.url} "
                             f"({size} bytes)")
        if length == 0:
            return memoryview(bytearray())
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        with _errors_named(self.url):
            return _map_private(self.fileno(), start, offset + length - start)[offset - start:]

    def pwrite(self, data, offset: int) -> int:
        """Write all of ``data`` at ``offset``."""
        view = readable_bytes(data, self.url)
        self._check_access(offset, len(view))
        fd = self.fileno()
        total = 0
        with _errors_named(self.url):
            while total < len(view):
                total += os.pwrite(fd, view[total:total + _MAX_IO], offset + total)
        return total

    def size(self) -> int:
        """Current size of the file."""
        return os.fstat(self.fileno()).st_size

    def sync(self) -> None:
        """``fsync`` the descriptor."""
        with _errors_named(self.url):
            os.fsync(self.fileno())


@lru_cache(maxsize=1)
def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64)
    libc.munmap.restype = ctypes.c_int
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    return libc


def _map_private(fd: int, offset: int, length: int) -> memoryview:
    """A writable view of a private (copy-on-write) mapping of ``length`` bytes of ``fd`` at
    ``offset`` (a multiple of the allocation granularity), unmapped when the last view goes.

    ``mmap(2)`` by ctypes, not :class:`mmap.mmap`: that one keeps a duplicate of the descriptor
    open for the mapping's life (before Python 3.13's ``trackfd``), so a process holding many
    mapped array blocks (a persisted Dask array) would run out of descriptors.
    """
    import ctypes
    import weakref

    libc = _libc()
    address = libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE, fd, offset)
    if address is None or address == ctypes.c_void_p(-1).value:  # MAP_FAILED
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    region = (ctypes.c_ubyte * length).from_address(address)
    weakref.finalize(region, libc.munmap, address, length)
    return memoryview(region).cast("B")


def _raw_mode_string(mode: OpenMode) -> str:
    """The FileIO mode for an already opened descriptor (FileIO only checks it against the fd)."""
    if mode.append:  # FileIO then starts at the end, as open() does in append mode
        return "ab+" if mode.readable else "ab"
    if mode.readable and mode.writable:
        return "rb+"
    return "wb" if mode.writable else "rb"


class PosixFileSystem(FileSystem):
    """Files on a mounted file system, addressed as ``/path`` or ``file:///path``.

    Parameters
    ----------
    block_size:
        Logical block size reported by ``info`` and used to cut ``block_locations`` of files on
        local file systems (default 64 MiB, the chunk size of the seeds). Striped file systems
        report their own stripe units instead.
    hostname:
        Host name reported for local file systems (default: ``socket.gethostname()``).
    orangefs_config:
        Path of the OrangeFS server configuration file (default: ``$HPCBRIDGE_ORANGEFS_CONFIG``),
        used to name the server of each datafile in ``block_locations`` on OrangeFS mounts
        (from the ``<FileSystem>`` section of the mounted file system, docs/layout.md).
    """

    scheme = "file"
    backend_name = BACKEND
    capabilities = Capabilities(xattrs=True, memory_map=True)
    # The kernel already reads ahead; a small buffer keeps 256 KiB+ transfers zero-copy.
    buffer_size = 128 << 10

    def __init__(self, netloc: str = "", *, block_size: int = DEFAULT_LOGICAL_BLOCK_SIZE,
                 hostname: str | None = None, orangefs_config: str | None = None):
        if netloc not in ("", "localhost"):
            raise InvalidURLError(f"file:// URLs address this machine only, not {netloc!r}")
        if not isinstance(block_size, int) or block_size <= 0:
            raise ValueError(f"block_size must be a positive int, got {block_size!r}")
        options = {"block_size": block_size}
        if hostname is not None:
            options["hostname"] = hostname
        if orangefs_config is not None:
            options["orangefs_config"] = orangefs_config
        super().__init__("", **options)
        self.block_size = block_size
        self.hostname = hostname
        self.orangefs_config = orangefs_config or os.environ.get("HPCBRIDGE_ORANGEFS_CONFIG")

    def _orangefs_config(self) -> str | None:
        if not self.orangefs_config:
            return None
        with open(self.orangefs_config, encoding="utf-8") as f:
            return f.read()

    # -- core -------------------------------------------------------------------------------
    def _open_raw(self, path: str, mode: OpenMode) -> PosixRawFile:
        url = self.url(path)
        if mode.readable and mode.writable:
            flags = os.O_RDWR
        elif mode.writable:
            flags = os.O_WRONLY
        else:
            flags = os.O_RDONLY
        if mode.create:
            flags |= os.O_CREAT
        if mode.truncate:
            flags |= os.O_TRUNC
        if mode.exclusive:
            flags |= os.O_EXCL
        if mode.append:
            flags |= os.O_APPEND
        flags |= getattr(os, "O_CLOEXEC", 0)
        with _errors_named(url):
            fd = os.open(path, flags, 0o666)
        try:
            with _errors_named(url):
                st = os.fstat(fd)
            # open(2) of a directory for reading succeeds; refuse it here, not at the first read.
            if stat.S_ISDIR(st.st_mode):
                raise os_error(errno.EISDIR, url, BACKEND)
            return PosixRawFile(fd, mode, url, path)
        except BaseException:
            os.close(fd)
            raise

    def _stat_to_info(self, path: str, st: os.stat_result) -> FileInfo:
        if stat.S_ISREG(st.st_mode):
            kind = FileType.FILE
        elif stat.S_ISDIR(st.st_mode):
            kind = FileType.DIRECTORY
        else:
            kind = FileType.OTHER
        return FileInfo(
            path=path,
            url=self.url(path),
            type=kind,
            size=st.st_size,
            mtime=st.st_mtime,
            mode=st.st_mode,
            owner=_user_name(st.st_uid),
            group=_group_name(st.st_gid),
            uid=st.st_uid,
            gid=st.st_gid,
            replication=1,
            block_size=self.block_size,
        )

    def _info(self, path: str) -> FileInfo:
        with _errors_named(self.url(path)):
            return self._stat_to_info(path, os.stat(path))

    def version(self, path) -> tuple:
        """Size, mtime, device, inode and change time, from one ``stat``."""
        p = self._path(path)
        with _errors_named(self.url(p)):
            st = os.stat(p)
        return (st.st_size, st.st_mtime, st.st_dev, st.st_ino, st.st_ctime_ns)

    def islink(self, path) -> bool:
        """Whether ``path`` is a symbolic link (``os.path.islink``: False if missing)."""
        return os.path.islink(self._path(path))

    def _iterdir(self, path: str) -> Iterator[FileInfo]:
        prefix = path.rstrip("/")
        with _errors_named(self.url(path)):
            with os.scandir(path) as entries:
                for entry in entries:
                    child = f"{prefix}/{entry.name}"
                    try:
                        st = entry.stat()
                    except OSError as exc:
                        # A link that cannot be followed (dangling, a loop: ELOOP, into a
                        # directory we may not search: EACCES) is listed as itself, "other",
                        # as os.walk and fsspec list it: it used to fail the whole listing.
                        if not isinstance(exc, FileNotFoundError) and not entry.is_symlink():
                            raise
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except FileNotFoundError:  # removed while listing
                            continue
                    yield self._stat_to_info(child, st)

    def _mkdir(self, path: str, parents: bool, exist_ok: bool) -> None:
        with _errors_named(self.url(path)):
            if parents:
                os.makedirs(path, exist_ok=exist_ok)
            else:
                try:
                    os.mkdir(path)
                except FileExistsError:
                    if not (exist_ok and os.path.isdir(path)):
                        raise

    def _rm_file(self, path: str) -> None:
        with _errors_named(self.url(path)):
            os.unlink(path)

    def _rmdir(self, path: str) -> None:
        with _errors_named(self.url(path)):
            os.rmdir(path)

    def _rm_tree(self, path: str) -> None:
        def fail(function, failed_path, exc):
            if isinstance(exc, tuple):  # Python < 3.12 passes sys.exc_info()
                exc = exc[1]
            raise os_error(getattr(exc, "errno", None) or errno.EIO, self.url(failed_path), BACKEND) from None

        if sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=fail)
        else:
            shutil.rmtree(path, onerror=fail)

    def _rename_no_replace(self, src: str, dst: str) -> bool:
        """link(2), which refuses an existing name, then unlink of ``src``: rename(2) would
        replace a file made at ``dst`` meanwhile. False where hard links are not available."""
        source, target = self.local_path(src), self.local_path(dst)
        try:
            os.link(source, target)
        except FileExistsError:
            raise self._error(errno.EEXIST, dst, "pass overwrite=True to replace it") from None
        except OSError:
            return False
        os.unlink(source)
        return True

    def _rename(self, src: str, dst: str) -> None:
        try:
            os.rename(src, dst)
        except OSError as exc:
            # Name the URL the error is about: the source when it is missing, else the destination.
            culprit = src if exc.errno == errno.ENOENT and not os.path.lexists(src) else dst
            raise os_error(exc.errno, self.url(culprit), BACKEND,
                           f"renaming {self.url(src)} to {self.url(dst)}") from None

    def _block_locations(self, path: str, info: FileInfo, start: int, length: int) -> list[BlockLocation]:
        with _errors_named(self.url(path)):
            return posix_block_locations(path, start, length, self.block_size, self.hostname,
                                         orangefs_config=self._orangefs_config(),
                                         orangefs_config_path=self.orangefs_config)

    # -- POSIX extras -----------------------------------------------------------------------
    def getxattr(self, path, name: str) -> bytes:
        p = self._path(path)
        with _errors_named(self.url(p)):
            return os.getxattr(p, name)

    def setxattr(self, path, name: str, value: bytes) -> None:
        p = self._path(path)
        with _errors_named(self.url(p)):
            os.setxattr(p, name, value)

    def listxattr(self, path) -> list[str]:
        p = self._path(path)
        with _errors_named(self.url(p)):
            return sorted(os.listxattr(p))

    def chmod(self, path, permission: int) -> None:
        """Set the permission bits of a file or directory (as HDFS's ``chmod``)."""
        p = self._path(path)
        with _errors_named(self.url(p)):
            os.chmod(p, permission & 0o7777)

    def local_path(self, path) -> str:
        return self._path(path)
