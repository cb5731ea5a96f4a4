"""Each rank's handle on the shared file: a positional raw file of any backend, or a PLFS writer.

Backends with positional, concurrent writes (POSIX mounts, memory) give every rank an ordinary
raw handle; aggregators ``pwrite`` their domains into it. Backends without (HDFS: one writer per
file, append only) are reached through a PLFS container, ``plfs+hdfs://``, where every rank —
aggregators included — writes its own log and the index makes one logical file of them.
"""

from __future__ import annotations

import errno
import io
import os
from dataclasses import dataclass

from ..errors import os_error
from ..fs.api import url_to_fs
from ..fs.posix import IOV_MAX as _IOV_MAX

__all__ = ["AccessMode", "Target", "open_target", "parse_amode"]

#: O_DIRECT alignment of offsets, lengths and buffer addresses (the page size covers every
#: logical block size in use).
DIRECT_ALIGN = 4096
#: Writes whose aligned middle is smaller than this stay buffered.
DIRECT_MIN = 256 << 10
_BOUNCE_SIZE = 4 << 20


def _address(view: memoryview) -> int:
    import ctypes

    if view.readonly:  # ctypes cannot map a read-only buffer; numpy can
        import numpy as np

        return np.frombuffer(view, dtype=np.uint8).ctypes.data
    return ctypes.addressof(ctypes.c_char.from_buffer(view))


def _pwrite_all(fd: int, view: memoryview, offset: int) -> None:
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], offset + done)


def _scatter_tail(buffers: list, skip: int, data: memoryview) -> None:
    """Copy ``data`` into ``buffers`` seen as one stream, starting ``skip`` bytes in."""
    for buffer in buffers:
        size = len(buffer)
        if skip >= size:
            skip -= size
            continue
        n = min(size - skip, len(data))
        buffer[skip:skip + n] = data[:n]
        data = data[n:]
        skip = 0
        if not len(data):
            return


@dataclass(frozen=True)
class AccessMode:
    """An open mode, MPI style: create does not truncate unless asked."""

    read: bool
    write: bool
    create: bool = False
    exclusive: bool = False
    truncate: bool = False

    @property
    def name(self) -> str:
        """Short form for messages: ``r``, ``w+ct`` (create, truncate), ``rw``..."""
        kind = "rw" if self.read and self.write else ("r" if self.read else "w")
        flags = "".join(f for f, on in (("c", self.create), ("x", self.exclusive), ("t", self.truncate)) if on)
        return kind + (f"+{flags}" if flags else "")


_STRING_MODES = {
    "r": AccessMode(True, False),
    "r+": AccessMode(True, True),
    "w": AccessMode(False, True, create=True, truncate=True),
    "w+": AccessMode(True, True, create=True, truncate=True),
    "x": AccessMode(False, True, create=True, exclusive=True),
    "x+": AccessMode(True, True, create=True, exclusive=True),
}


def parse_amode(mode, url: str) -> AccessMode:
    """A mode string (``r``, ``r+``, ``w``, ``w+``, ``x``, ``x+``; a ``b`` is ignored) or an MPI amode.

    MPI amodes: one of ``MODE_RDONLY``/``MODE_WRONLY``/``MODE_RDWR``, optionally ``MODE_CREATE``,
    ``MODE_EXCL``, ``MODE_APPEND`` (the file pointers start at the end), ``MODE_DELETE_ON_CLOSE``
    and ``MODE_UNIQUE_OPEN`` (a promise, nothing to do): :class:`~hpcbridge.mpi.File` acts on
    them. ``MODE_SEQUENTIAL`` is refused rather than ignored.
    """
    if isinstance(mode, str):
        key = mode.replace("b", "")
        if key not in _STRING_MODES:
            raise ValueError(f"invalid mode {mode!r} for {url}: use one of {', '.join(_STRING_MODES)} "
                             "or an MPI amode (MPI.MODE_WRONLY | MPI.MODE_CREATE, ...)")
        return _STRING_MODES[key]
    if isinstance(mode, bool) or not isinstance(mode, int):
        raise TypeError(f"mode must be a string or an MPI amode integer, got {type(mode).__name__}")
    from mpi4py import MPI

    if mode & MPI.MODE_SEQUENTIAL:
        raise ValueError(f"amode flag MODE_SEQUENTIAL is not supported by hpcbridge.mpi ({url})")
    access = [name for name in ("MODE_RDONLY", "MODE_WRONLY", "MODE_RDWR") if mode & getattr(MPI, name)]
    if len(access) != 1:
        raise ValueError(f"amode for {url} needs exactly one of MODE_RDONLY, MODE_WRONLY, MODE_RDWR")
    known = (MPI.MODE_RDONLY | MPI.MODE_WRONLY | MPI.MODE_RDWR | MPI.MODE_CREATE | MPI.MODE_EXCL | MPI.MODE_APPEND
             | MPI.MODE_DELETE_ON_CLOSE | MPI.MODE_UNIQUE_OPEN)
    if mode & ~known:
        raise ValueError(f"unknown amode bits {mode & ~known:#x} for {url}")
    create, exclusive = bool(mode & MPI.MODE_CREATE), bool(mode & MPI.MODE_EXCL)
    if access[0] == "MODE_RDONLY" and (create or exclusive):
        raise ValueError(f"MODE_RDONLY cannot be combined with MODE_CREATE or MODE_EXCL ({url})")
    return AccessMode(access[0] != "MODE_WRONLY", access[0] != "MODE_RDONLY", create, exclusive)


class Target:
    """One rank's handle: ``pwrite``, ``preadinto``, ``size``, ``sync``, ``close``.

    ``read_modify_write`` says whether an aggregator may read a domain's holes back and write
    the domain in one piece (data sieving); ``stripe_unit`` is the alignment for file domains.
    """

    def __init__(self, fs, path: str, raw, mode: AccessMode, stripe_unit: int, read_modify_write: bool):
        self.fs = fs
        self.path = path
        self.url = fs.url(path)
        self.raw = raw
        self.mode = mode
        self.stripe_unit = stripe_unit
        self.read_modify_write = read_modify_write
        #: Write handles that see only their own writes (log-structured: PLFS) keep the file's end
        #: as of the last collective sync here (see :meth:`synced`).
        self.own_writes_only = False
        self._synced_end = 0

    def pwrite(self, data, offset: int) -> int:
        """Write all of ``data`` at ``offset``."""
        return self.raw.pwrite(data, offset)

    # -- direct I/O ----------------------------------------------------------------------------
    direct_fd: int | None = None
    _bounce = None  # an anonymous mmap, page-aligned

    def enable_direct(self) -> bool:
        """Open a second descriptor with ``O_DIRECT`` (POSIX files only); False where impossible."""
        local = None
        if self._fd is not None and hasattr(os, "O_DIRECT"):
            try:
                local = self.fs.local_path(self.path)
            except io.UnsupportedOperation:
                local = None
        if local is None:
            return False
        try:
            self.direct_fd = os.open(local, os.O_WRONLY | os.O_DIRECT)
        except OSError:  # tmpfs and some FUSE file systems refuse O_DIRECT: stay buffered
            return False
        return True

    def pwrite_direct(self, data, offset: int) -> int:
        """Write ``data`` at ``offset``: the block-aligned middle with ``O_DIRECT`` (bounced through
        an aligned buffer if ``data`` is not aligned), the unaligned head and tail buffered."""
        view = memoryview(data).cast("B")
        end = offset + len(view)
        first = -(-offset // DIRECT_ALIGN) * DIRECT_ALIGN
        last = end - end % DIRECT_ALIGN
        if self.direct_fd is None or last - first < DIRECT_MIN:
            # Small writes gain nothing from O_DIRECT (each one would wait for the device).
            return self.raw.pwrite(view, offset)
        if first > offset:
            self.raw.pwrite(view[:first - offset], offset)
        if end > last:
            self.raw.pwrite(view[last - offset:], last)
        middle = view[first - offset:last - offset]
        if _address(middle) % DIRECT_ALIGN == 0:
            _pwrite_all(self.direct_fd, middle, first)
        else:
            bounce = self._bounce_buffer()
            for start in range(0, len(middle), len(bounce)):
                chunk = middle[start:start + len(bounce)]
                bounce[:len(chunk)] = chunk
                _pwrite_all(self.direct_fd, bounce[:len(chunk)], first + start)
        return len(view)

    def _bounce_buffer(self) -> memoryview:
        if self._bounce is None:
            import mmap

            self._bounce = mmap.mmap(-1, _BOUNCE_SIZE)  # page-aligned by construction
        return memoryview(self._bounce)

    def preadinto(self, buffer, offset: int) -> int:
        """Fill ``buffer`` from ``offset``; returns the bytes read (short at end of file)."""
        return self.raw.preadinto(buffer, offset)

    @property
    def _fd(self) -> int | None:
        return self.raw.fileno() if isinstance(self.raw, io.FileIO) else None

    def pwritev(self, buffers: list, offset: int) -> int:
        """Write ``buffers`` back to back at ``offset`` (one ``pwritev`` per IOV_MAX buffers on POSIX)."""
        fd = self._fd
        if fd is None:  # one gathering copy in C, then the backend's positional write
            return self.raw.pwrite(b"".join(buffers), offset)
        total = 0
        for i in range(0, len(buffers), _IOV_MAX):
            batch = buffers[i:i + _IOV_MAX]
            expected = sum(map(len, batch))
            n = os.pwritev(fd, batch, offset + total)
            if n < expected:  # a short write (signal, quota edge): finish the batch plainly
                self.raw.pwrite(b"".join(batch)[n:], offset + total + n)
            total += expected
        return total

    def preadv(self, buffers: list, offset: int) -> int:
        """Fill ``buffers`` back to back from ``offset``; returns bytes read (short at end of file)."""
        fd = self._fd
        if fd is None:
            expected = sum(map(len, buffers))
            scratch = bytearray(expected)
            got = self.raw.preadinto(scratch, offset)
            position = 0
            for buffer in buffers:  # scatter: one C copy per buffer
                n = min(len(buffer), max(0, got - position))
                buffer[:n] = scratch[position:position + n]
                position += len(buffer)
            return got
        total = 0
        for i in range(0, len(buffers), _IOV_MAX):
            batch = buffers[i:i + _IOV_MAX]
            expected = sum(map(len, batch))
            n = os.preadv(fd, batch, offset + total)
            if n < expected:  # end of file, or a short read: read the rest of the batch plainly
                scratch = bytearray(expected - n)
                more = self.raw.preadinto(scratch, offset + total + n)
                if more:
                    _scatter_tail(batch, n, memoryview(scratch)[:more])
                return total + n + more
            total += n
        return total

    def size(self) -> int:
        """Current file size (PLFS write handles: the end of this rank's writes, or of every
        rank's as of the last collective sync if that is larger)."""
        return max(self.raw.size(), self._synced_end)

    def synced(self, end: int) -> None:
        """After a collective sync: ``end`` is the largest size any rank's handle reported. A
        handle that sees only its own writes keeps it: MPI makes every rank's writes visible
        after sync-barrier-sync, the file's end included (Open MPI's SEEK_END and Get_size do)."""
        if self.own_writes_only:
            self._synced_end = max(self._synced_end, end)

    def sync(self) -> None:
        """Make this rank's writes durable (fsync, hsync)."""
        self.raw.sync()

    def close(self) -> None:
        """Close the handles (PLFS write handles: collectively)."""
        if self.direct_fd is not None:
            os.close(self.direct_fd)
            self.direct_fd = None
        self.raw.close()


def _stripe_unit(fs, path: str, default: int) -> int:
    """The backend's stripe or block size for ``path`` (what file domains align to)."""
    try:
        local = fs.local_path(path)
    except io.UnsupportedOperation:
        local = None
    if local is not None:
        from ..fs.layout import _xattr_reader, layout_for
        from ..fs.layout.mountinfo import find_mount

        try:
            layout = layout_for(find_mount(local), _xattr_reader(local))
        except (OSError, ValueError):
            layout = None
        for attribute in ("stripe_size", "stripe_unit"):
            unit = getattr(layout, attribute, None)
            if unit:
                return int(unit)
        components = getattr(layout, "components", None)
        if components:
            unit = getattr(getattr(components[0], "layout", None), "stripe_size", None)
            if unit:
                return int(unit)
        try:  # Lustre, GPFS and OrangeFS report their stripe or block size here; ext4 its page-sized block
            return max(int(os.stat(local).st_blksize), 1)
        except OSError:
            return default
    try:
        block = fs.info(path).block_size
    except OSError:
        block = 0
    return int(block) if block > 0 else default


def open_target(comm, url, mode: AccessMode, default_unit: int = 1 << 20, **options) -> Target:
    """Collective: open ``url`` on every rank of ``comm`` with ``mode``.

    Rank 0 creates or truncates the file first so no rank truncates data another rank has
    already written; every rank then opens it. Errors raised on rank 0 are raised on every rank.
    """
    from .agree import agree

    error = None
    try:  # each rank's own checks, agreed on before the ranks talk
        fs, path = url_to_fs(url, **options)
        log_structured = fs.capabilities.log_structured  # each rank a writer of its own (PLFS)
        full_url = fs.url(path)
        if comm.size > 1 and not fs.capabilities.shared_between_processes:
            raise io.UnsupportedOperation(
                f"{full_url}: {fs.backend_name} files live in one process, so the {comm.size} ranks cannot share "
                "one (each would see its own store); use a file system they all reach: file://, plfs+file://, "
                "plfs+hdfs://")
        shared_writes = fs.capabilities.positional_write and fs.capabilities.concurrent_writers
        if not log_structured and mode.write and not shared_writes:
            raise io.UnsupportedOperation(
                f"{full_url}: {fs.backend_name} has no concurrent positional writes, so ranks cannot share one "
                f"file there; write a PLFS container instead: plfs+{fs.scheme}://{fs.netloc}{path}")
        if not log_structured and mode.read and mode.write and not fs.capabilities.read_write:
            raise io.UnsupportedOperation(f"{full_url}: {fs.backend_name} cannot open a file for reading and "
                                          "writing")
    except Exception as exc:
        error = exc
    agree(comm, error)
    if log_structured:
        return _open_log_structured(comm, fs, path, mode)
    status = None
    if comm.rank == 0:
        try:
            if mode.write:
                exists = fs.exists(path)
                if exists and mode.exclusive:
                    raise os_error(errno.EEXIST, full_url, fs.backend_name)
                if not exists and not mode.create:
                    raise os_error(errno.ENOENT, full_url, fs.backend_name)
                if mode.truncate or not exists:
                    with fs.open(path, "wb", buffering=0):
                        pass
            elif not fs.isfile(path):
                raise os_error(errno.ENOENT if not fs.exists(path) else errno.EISDIR, full_url, fs.backend_name)
            status = ("ok", None)
        except Exception as exc:  # the same error on every rank, not a hang
            status = ("error", exc)
    status = comm.bcast(status, root=0)
    if status[0] == "error":
        raise status[1]
    if mode.write:
        # Aggregators read holes back (data sieving) where the backend allows read-write handles.
        raw_mode = "r+b" if fs.capabilities.read_write else "ab"
    else:
        raw_mode = "rb"
    error = None
    try:
        raw = fs.open(path, raw_mode, buffering=0)
    except Exception as exc:
        raw, error = None, exc
    failed = comm.allgather(error is not None)
    if any(failed):
        if raw is not None:
            raw.close()
        if error is not None:
            raise error
        raise OSError(errno.EIO, f"{full_url}: another rank failed to open the file", full_url)
    unit = _stripe_unit(fs, path, default_unit) if comm.rank == 0 else None
    unit = comm.bcast(unit, root=0)
    return Target(fs, path, raw, mode, unit, read_modify_write=mode.write and raw_mode == "r+b")


def _open_log_structured(comm, fs, path: str, mode: AccessMode) -> Target:
    full_url = fs.url(path)
    if mode.read and mode.write:
        raise io.UnsupportedOperation(f"{full_url}: {fs.backend_name} handles are read-only or write-only; open "
                                      "with 'r' or 'w'")
    if mode.write and not mode.truncate:
        # A PLFS open for writing starts a new job whose logs override older data by sequence;
        # MPI's "create without truncate" would need the old job kept: say so instead of guessing.
        exists = fs.exists(path) if comm.rank == 0 else None
        exists = comm.bcast(exists, root=0)
        if not exists and not mode.create:  # as open(2) without O_CREAT, on every rank
            raise os_error(errno.ENOENT, full_url, fs.backend_name)
        if exists and not mode.exclusive:
            raise io.UnsupportedOperation(f"{full_url}: {fs.backend_name} files are rewritten whole: open with "
                                          f"mode 'w' (opening an existing file for writing without truncating "
                                          f"it is not supported there)")
    handle = fs.open_collective(path, "rb" if mode.read else ("xb" if mode.exclusive else "wb"), comm)
    # Read handles come buffered: take their raw file out (detach), or the buffer's finaliser
    # would close it under us.
    raw = handle.detach() if isinstance(handle, io.BufferedIOBase) else handle
    # Log-structured: every writer appends to its own log, so no domain alignment is needed to
    # avoid lock conflicts; align to 1 MiB anyway so domains stay readable in traces.
    target = Target(fs, path, raw, mode, 1 << 20, read_modify_write=False)
    target.own_writes_only = mode.write  # a writer's size is the end of its own log's data
    return target
