"""The FUSE operations of ``hpcbridge mount``: POSIX calls mapped onto an hpcbridge backend.

One :class:`BridgeOperations` serves one mount. Every path in the mount is the backend path
``root + path``. Under a PLFS URL every regular file is a PLFS container, directories are
directories, and every open for writing becomes its own PLFS writer (created at the first write),
so many processes writing one file at once is the N-1 checkpoint pattern PLFS was made for.

What each call does, and what the library guarantees, is in docs/mount.md. In short:

* reads see every byte that any writer in this daemon wrote (its writers are flushed first) and
  what writers elsewhere flushed or closed (the index is reloaded at open and when a read reaches
  past the end it knew);
* ``stat`` sizes include what open writers of this daemon wrote, and truncations;
* ``fsync`` is the backend's durable sync (fsync, hsync); ``close`` publishes (flush);
* ``ftruncate`` grows (a zero byte at the new end) and shrinks (a PLFS container is rewritten
  with the kept prefix; writers of this daemon are closed first and reopen on their next write);
* what a backend cannot do fails with the errno that says so: EOPNOTSUPP (rewriting HDFS files,
  read-write opens where no emulation exists), EROFS on read-only mounts, ENOSPC, EIO.
"""

from __future__ import annotations

import collections
import ctypes
import errno
import io
import itertools
import logging
import os
import posixpath
import secrets
import stat
import threading
import time

import mfusepy

from ..fs.file import OpenMode
from ..fs.types import FileType
from ..fs.url import hidden_sibling
from ..plfs.writer import reserve_sequences, sequences_for

__all__ = ["BridgeOperations", "BridgeFUSE"]

log = logging.getLogger("hpcbridge.mount")

#: Reported as st_blksize: cp, dd and stdio size their buffers from it.
BLOCK = 1 << 20
#: libfuse's FUSE_CAP_ASYNC_DIO: direct I/O requests of one call issued in parallel.
FUSE_CAP_ASYNC_DIO = 1 << 15
#: Bytes a handle may have queued (write-behind) before a write waits.
WRITE_BEHIND = 16 << 20
#: Chunk of the copy that rewrites a shrunk PLFS container.
COPY_CHUNK = 8 << 20
#: utimensat's special tv_nsec values (<sys/stat.h>): the current time, and the time left alone.
UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2


def _errno_of(exc: BaseException) -> int:
    """The errno to hand the kernel for an exception raised by the library."""
    if isinstance(exc, io.UnsupportedOperation):
        return errno.EOPNOTSUPP
    if isinstance(exc, OSError) and isinstance(exc.errno, int) and exc.errno > 0:
        return exc.errno
    if isinstance(exc, ConnectionError):  # the backend is gone (BackendUnavailable...)
        return errno.EIO
    if isinstance(exc, (ValueError, TypeError)):
        return errno.EINVAL
    return errno.EIO


def _guard(method):
    """Run an operation; library exceptions become ``FuseOSError`` with the right errno (mfusepy
    would turn anything that is not an OSError into EINVAL)."""
    name = method.__name__

    def wrapper(self, *args):
        try:
            return method(self, *args)
        except mfusepy.FuseOSError:
            raise
        except Exception as exc:  # every failure reaches the caller as an errno, never a hang
            code = _errno_of(exc)
            if code not in (errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY):
                log.warning("%s%r failed: %s (errno %d)", name, args[:1], exc, code)
            raise mfusepy.FuseOSError(code) from exc

    wrapper.__name__ = name
    wrapper.__doc__ = method.__doc__
    return wrapper


class _FileState:
    """What the daemon knows about one path while handles of it are open."""

    __slots__ = ("path", "lock", "handles", "generation", "base_size")

    def __init__(self, path: str, base_size: int):
        self.path = path
        self.lock = threading.RLock()
        self.handles: set = set()
        #: Bumped by every write and truncate; a reader built at an older generation is stale.
        self.generation = 0
        #: Size before the open writers' bytes (at first open, or after a truncate).
        self.base_size = base_size

    def size(self) -> int:
        return max([self.base_size, *(h.end() for h in self.handles)])


class _Handle:
    """An open file of the mount (one per open(2))."""

    #: Whether write() keeps the data after returning (and so needs a copy of the kernel's buffer).
    copies_writes = False

    def __init__(self, ops: "BridgeOperations", path: str, state: _FileState, readable: bool, writable: bool):
        self.ops = ops
        self.path = path
        self.state = state
        self.readable = readable
        self.writable = writable
        self.lock = threading.RLock()

    def end(self) -> int:
        return 0


class _PlfsHandle(_Handle):
    """A logical PLFS file: a lazily created writer, and a reader rebuilt when stale."""

    def __init__(self, *args):
        super().__init__(*args)
        self.writer = None
        self.reader = None
        self.reader_generation = -1
        self.retired = []
        #: ``(file system, path)`` of the logs of writers closed since the last fsync.
        self.unsynced: list = []
        #: The end of what this handle's closed writers wrote (a stat racing the asynchronous
        #: release still counts it).
        self.ended = 0
        # Write-behind: requests are copied to a queue and answered at once; one thread per
        # handle appends them to the writer in order. The kernel holds the inode lock for every
        # direct write to a file (libfuse 3.14 cannot ask for parallel direct writes), so without
        # this, the writers of one N-1 file would wait for each other's backend calls. A failed
        # append is reported by the next write, flush (close), fsync or read of the handle.
        self._queue: collections.deque = collections.deque()
        self._cond = threading.Condition()
        self._queued = 0  # bytes queued or being appended
        self._queued_end = 0
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def end(self) -> int:
        w = self.writer
        return max(self.ended, self._queued_end, w.max_end if w is not None else 0)

    def _writer(self):
        if self.writer is None:
            fs = self.ops.fs
            self.writer = fs.new_writer(fs.container(self.ops.backend_path(self.path)))
        return self.writer

    #: Writes are queued, so they need their own copy of the kernel's buffer (see write_from).
    copies_writes = True

    def write(self, data, offset: int) -> int:
        """Queue ``data`` (bytes: the kernel's buffer is reused once this request returns)."""
        n = len(data)
        if n == 0:
            return 0
        self._check_error()
        with self._cond:
            while self._queued > WRITE_BEHIND and self._error is None:
                self._cond.wait()
            # Its sequence numbers now, as it is answered: a write answered later, through any
            # open, must win where they overlap, whichever queue reaches its writer first.
            self._queue.append((data, offset, reserve_sequences(sequences_for(n))))
            self._queued += n
            self._queued_end = max(self._queued_end, offset + n)
            if self._thread is None:
                self._thread = threading.Thread(target=self._appender, name="hpcbridge-write-behind", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        self.state.generation += 1
        return n

    def _appender(self) -> None:
        while True:
            # Everything queued so far in one turn: one writer lock and one wake-up of waiting
            # writers per batch, not per request (the daemon's requests share one GIL).
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                batch = list(self._queue)
            try:
                if self._error is None and batch[0][0] is not None:
                    with self.lock:
                        writer = self._writer()
                        for data, offset, sequence in batch:
                            if data is not None:
                                writer.write(data, offset, sequence)
                failed = None
            except BaseException as exc:
                failed = exc
            with self._cond:
                if failed is not None:
                    self._error = failed
                if self._error is not None:
                    # Dropped, to be reported: the size counts only what reached a writer.
                    self._queued_end = 0
                for data, _, _ in batch:
                    self._queue.popleft()
                    if data is not None:
                        self._queued -= len(data)
                self._cond.notify_all()
            if batch[-1][0] is None:  # release() queued the end after the last write
                return

    def _check_error(self) -> None:
        with self._cond:  # taken and cleared at once: the appender sets it under this lock
            error, self._error = self._error, None
        if error is not None:
            raise error

    def drain(self, report: bool = True) -> None:
        """Wait until every queued write reached the writer; raise a failed one's error
        (``report``: the caller is this handle's owner; another open draining it, to read or
        truncate the file, leaves the error for the owner's next write, fsync or close)."""
        with self._cond:
            while self._queued:
                self._cond.wait()
        if report:
            self._check_error()

    def readinto(self, view, offset: int) -> int:
        # Lock order: the path's state, then a handle (as truncate and _publish take them).
        state = self.state
        with self.lock:
            reader = self.reader
            stale = (reader is None or self.reader_generation != state.generation
                     or offset + len(view) > reader.size)
        if stale:
            with state.lock:
                generation = state.generation
                self.ops._publish(state)
                fs = self.ops.fs
                fresh = fs.reader(fs.container(self.ops.backend_path(self.path)))
                # What it found is the file's size here too (other hosts' writers included).
                state.base_size = max(state.base_size, fresh.size)
            with self.lock:
                # Another read may have installed a newer one meanwhile: keep the newest (and
                # read through our own, which is at least as new as this read).
                if self.reader is None or generation >= self.reader_generation:
                    if self.reader is not None:
                        self.retired.append(self.reader)  # another thread may still read from it
                    self.reader, self.reader_generation = fresh, generation
                else:
                    self.retired.append(fresh)
            reader = fresh
        with self.lock:
            return reader.readinto(view, offset)

    def flush(self) -> None:
        """close(2) of a descriptor: close the writer, so its index and metadata are complete
        for every reader, the library's included, before close(2) returns (the kernel's release
        comes later, asynchronously). The next write through the handle opens a new writer."""
        self.close_writer()

    def publish(self) -> None:
        """Make what this handle wrote readable by this daemon's readers: flushed logs where
        the backing store shows written bytes at once (POSIX); elsewhere (HDFS shows a file
        still being written only up to its last closed block) the writer is closed. Called for
        every open of a file (another's read or truncate): errors stay for the owner."""
        self.drain(report=False)
        if self.ops.visible_writes:
            with self.lock:
                if self.writer is not None:
                    self.writer.flush()
        else:
            self.close_writer(report=False)

    def fsync(self) -> None:
        """Durable: the open writer's logs, and those of the writers this open had that were
        closed since its last fsync (by a close(2) of a duplicate descriptor, or by a rename,
        unlink or truncate of the file): fsync(2) covers everything written through it."""
        self.drain()
        with self.lock:
            if self.writer is not None:
                self.writer.sync()
            closed, self.unsynced = self.unsynced, []
        for log_fs, path in closed:
            try:
                local = log_fs.local_path(path)
            except io.UnsupportedOperation:
                continue  # HDFS: a closed file is as durable as the store makes it; no handle to hsync
            try:
                fd = os.open(local, os.O_RDONLY)
            except FileNotFoundError:
                continue  # removed since (the file was truncated or unlinked): nothing to keep
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close_writer(self, report: bool = True) -> None:
        """Close the writer (its next write opens a new one); ``report``: raise a queued write's
        failure (this handle's owner asks; another open closing it leaves that to the owner).
        The writer is closed even then, so everything that did reach it is published."""
        self.drain(report=False)
        with self.lock:
            writer = self.writer
            if writer is not None:
                self.ended = max(self.ended, writer.max_end)
                self.unsynced += writer.log_paths()
            self.writer = None
        if writer is not None:
            try:
                writer.close()
            except BaseException as exc:
                # Kept for the owner too: this close may be a child's close-on-exec of an
                # inherited descriptor, or another open's read, whose result nobody reads.
                with self._cond:
                    self._error = self._error or exc
                if report:
                    raise
        if report:
            self._check_error()

    def release(self) -> None:
        error = None
        try:
            self.close_writer()
        except Exception as exc:
            error = exc
        with self._cond:
            if self._thread is not None:
                self._queue.append((None, 0, 0))
                self._cond.notify_all()
        with self.lock:
            for reader in [self.reader, *self.retired]:
                if reader is not None:
                    reader.close()
            self.reader, self.retired = None, []
        if error is not None:
            raise error


class _RawHandle(_Handle):
    """A file of a plain backend (POSIX, HDFS...), through its raw file object."""

    def __init__(self, *args, raw):
        super().__init__(*args)
        self.raw = raw
        self.position = 0  # where a backend without positional writes (HDFS) is
        #: A failed close of the backend file by a flush that was not this open's own close(2)
        #: (a reader's publish, or a child's close-on-exec of an inherited descriptor): kept
        #: for this open's next write, fsync or close, as the kernel's write-back reports errors.
        self.error = None
        #: The state's generation when this reader's stream was opened (see readinto).
        self.reader_generation = self.state.generation

    def end(self) -> int:
        return self.position if self.writable else 0

    def _check_error(self) -> None:
        with self.lock:
            error, self.error = self.error, None
        if error is not None:
            raise error

    def write(self, view, offset: int) -> int:
        self._check_error()
        with self.lock:
            self._reopen()
            if self.ops.fs.capabilities.positional_write:
                n = self.raw.pwrite(view, offset)
            elif offset == self.position:
                n = 0
                while n < len(view):
                    n += self.raw.write(view[n:])
            else:
                raise mfusepy.FuseOSError(errno.EOPNOTSUPP)  # HDFS files are written once, in order
            self.position = max(self.position, offset + n)
        self.state.generation += 1
        return n

    def readinto(self, view, offset: int) -> int:
        fs = self.ops.fs
        if not fs.capabilities.visible_writes:
            # A store that shows written bytes only once their writer closes (HDFS): a stream
            # opened while this daemon writes the file sees none of it. Publish the writers
            # (close them; their next write appends) and read through a new stream.
            state = self.state
            with state.lock:
                holding = any(h.writable and getattr(h, "raw", None) is not None for h in state.handles)
                if holding or self.reader_generation != state.generation:
                    self.ops._publish(state)
                    with self.lock:
                        old, self.raw = self.raw, fs._open_raw(fs._path(self.ops.backend_path(self.path)),
                                                               OpenMode.parse("rb", self.path))
                        old.close()
                    self.reader_generation = state.generation
        with self.lock:
            return self.raw.preadinto(view, offset)

    def _reopen(self) -> None:
        if self.raw is None:  # closed by flush on a store that shows written bytes only at close
            fs = self.ops.fs
            if not fs.capabilities.append:
                raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
            self.raw = fs._open_raw(fs._path(self.ops.backend_path(self.path)), OpenMode.parse("ab", ""))

    def publish(self) -> None:
        """Another open reads or truncates the file: a failure stays for this open's owner."""
        try:
            self._close_raw()
        except Exception:
            pass  # kept in self.error

    def flush(self) -> None:
        """close(2) of a descriptor: where written bytes show only when the file is closed
        (HDFS), close it now (a later write through the handle appends); elsewhere flush. An
        earlier flush's failure is raised here too: that flush may have been a child's
        close-on-exec of an inherited descriptor, whose close(2) result nobody reads."""
        self._check_error()
        self._close_raw()

    def _close_raw(self) -> None:
        with self.lock:
            if not self.writable or self.raw is None:
                return
            if self.ops.fs.capabilities.visible_writes:
                self.raw.flush()
                return
            raw, self.raw = self.raw, None
            try:
                raw.close()
            except Exception as exc:
                # The bytes since the last close are lost (HDFS keeps a file's last block only
                # once its close succeeds). Report it to this open's next call, and go on from
                # the file's real end, so a later write is not appended where it does not
                # belong and stat does not count the lost bytes.
                self.error = exc
                try:
                    self.position = self.ops.fs.info(self.ops.backend_path(self.path)).size
                except Exception:
                    pass
                raise

    def fsync(self) -> None:
        self._check_error()
        with self.lock:
            if self.writable and self.raw is not None:
                self.raw.sync()

    def release(self) -> None:
        with self.lock:
            if self.raw is not None:
                self.raw.close()


def _fallocate(fd: int, mode: int, offset: int, length: int) -> int:
    """libc's fallocate(2) (os has only posix_fallocate, without modes); errno in ctypes."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    return libc.fallocate(fd, mode, offset, length)


def _groups(pid: int) -> set:
    """The supplementary groups of process ``pid`` (empty if it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Groups:"):
                    return {int(g) for g in line.split()[1:]}
    except OSError:
        pass
    return set()


def _flags_mode(flags: int) -> tuple[bool, bool]:
    acc = flags & os.O_ACCMODE
    return acc in (os.O_RDONLY, os.O_RDWR), acc in (os.O_WRONLY, os.O_RDWR)


class BridgeOperations(mfusepy.Operations):
    """FUSE operations over ``fs`` with the mount's root at backend path ``root``.

    Parameters
    ----------
    fs:
        The hpcbridge file system (any backend; PLFS gets container semantics).
    root:
        Backend path shown as the mount's root (must be a directory).
    direct_io:
        Bypass the page cache (default True): the only safe choice where other processes or
        hosts write the same files (PLFS N-1, HDFS), and what gives 1 MiB requests straight to
        the backend.
    """

    use_ns = True
    flag_nullpath_ok = True  # read/write/flush/release get no path: no lookup per request
    flag_nopath = True

    def __init__(self, fs, root: str, direct_io: bool = True, max_write: int = 1 << 20):
        self.fs = fs
        self.root = root.rstrip("/") or "/"
        #: Container semantics (PLFS): files are containers, each open(2) its own writer.
        self.plfs = fs.capabilities.log_structured
        backing = fs.backing if self.plfs else fs
        #: Written bytes are readable at once (POSIX) rather than at close (HDFS).
        self.visible_writes = backing.capabilities.visible_writes
        self.direct_io = direct_io
        self.max_write = max_write
        self._handles: dict[int, _Handle] = {}
        self._ids = itertools.count(1)
        self._states: dict[str, _FileState] = {}
        self._dirs: dict[int, str] = {}
        self._states_lock = threading.Lock()
        self.uid, self.gid = os.getuid(), os.getgid()

    def init_with_config(self, conn, config):
        """Negotiate big requests: 1 MiB writes (libfuse asks the kernel for max_pages to match),
        1 MiB readahead, many requests in flight, parallel asynchronous direct I/O."""
        if conn is not None:
            conn.max_write = self.max_write
            conn.max_readahead = self.max_write
            conn.max_background = 64
            conn.congestion_threshold = 48
            conn.want |= conn.capable & FUSE_CAP_ASYNC_DIO
        if config is not None:
            config.nullpath_ok = 1

    # -- helpers --------------------------------------------------------------------------------
    def backend_path(self, path: str) -> str:
        """The backend path of mount path ``path``."""
        if path in ("/", ""):
            return self.root
        return posixpath.join(self.root, path.lstrip("/"))

    def _attrs(self, info) -> dict:
        mode = info.mode
        if info.is_dir:
            mode = stat.S_IFDIR | (stat.S_IMODE(mode) or 0o755)
        elif not stat.S_IFMT(mode) or not info.is_file:
            mode = stat.S_IFREG | (stat.S_IMODE(mode) or 0o644)
        mtime = int(info.mtime * 1e9)
        return {"st_mode": mode, "st_nlink": 2 if info.is_dir else 1, "st_size": info.size,
                "st_uid": info.uid if info.uid >= 0 else self.uid, "st_gid": info.gid if info.gid >= 0 else self.gid,
                "st_mtime": mtime, "st_ctime": mtime, "st_atime": mtime, "st_blksize": BLOCK,
                "st_blocks": (info.size + 511) // 512}

    def _state(self, path: str, base_size) -> _FileState:
        with self._states_lock:
            return self._state_locked(path, base_size)

    def _state_locked(self, path: str, base_size) -> _FileState:
        """The state of ``path``, made if none (``base_size``: a size or a call that gives it);
        the caller holds the states' lock."""
        state = self._states.get(path)
        if state is None:
            state = self._states[path] = _FileState(path, base_size() if callable(base_size) else base_size)
        return state

    def _attach(self, path: str, base_size, make_handle, truncated: bool = False) -> _Handle:
        """A new handle of ``path`` (``make_handle(state)``) in the path's state, made if there is
        none, in one step: the last handle's release drops a state, and a handle added to one
        after that would be in a state no other open sees (its writes missing from their stat
        and reads). ``truncated``: the open emptied the file (plain backends' O_TRUNC), which
        the other opens' state must learn."""
        with self._states_lock:
            known = path in self._states
            state = self._state_locked(path, base_size)
            if known and truncated:
                with state.lock:
                    state.base_size = 0
                    for h in state.handles:
                        if isinstance(h, _RawHandle):
                            h.position = 0
                    state.generation += 1
            handle = make_handle(state)
            with state.lock:
                state.handles.add(handle)
        return handle

    def _drop_state(self, state: _FileState) -> None:
        with self._states_lock:
            if not state.handles and self._states.get(state.path) is state:
                del self._states[state.path]

    def _publish(self, state: _FileState) -> None:
        """Flush every writer of ``state`` so a reader sees their bytes."""
        for h in list(state.handles):
            if h.writable:
                h.publish()

    def _handle(self, fi) -> _Handle:
        try:
            return self._handles[fi.fh]
        except KeyError:
            raise mfusepy.FuseOSError(errno.EBADF) from None

    # -- metadata -------------------------------------------------------------------------------
    @_guard
    def getattr(self, path, fh=None):
        """stat: the backend's metadata; sizes of files open here are the daemon's."""
        if fh is not None and getattr(fh, "fh", 0) in self._handles:
            path = self._handles[fh.fh].path
        elif path is None:
            raise mfusepy.FuseOSError(errno.EBADF)
        state = self._states.get(path)
        if state is not None and self.plfs:
            # Open here: the size is the daemon's, and asking the library would read every index
            # log (a PLFS file with open writers has no size in its metadata): the container
            # directory's attributes and the daemon's size.
            info = self.fs.backing.info(self.fs._backing_paths(self.backend_path(path))[0])
            attrs = self._attrs(info)
            attrs["st_mode"] = stat.S_IFREG | (stat.S_IMODE(info.mode) & 0o666 or 0o644)
            attrs["st_nlink"] = 1
        else:
            info = self.fs.info(self.backend_path(path))
            attrs = self._attrs(info)
            if not self.plfs:
                self._local_times(path, attrs)
        if state is not None and (self.plfs or (not info.is_dir and not self.visible_writes)):
            # (A POSIX backend's own size is exact, other processes' truncations included; HDFS
            # shows a file being written only up to its last complete block.)
            attrs["st_size"] = state.size()
            attrs["st_blocks"] = (attrs["st_size"] + 511) // 512
        return attrs

    def _local_times(self, path: str, attrs: dict) -> None:
        """A POSIX backend's own access and change times, link count and allocated blocks (the
        library's FileInfo has only mtime): ``touch -a``, ``utime``, sparse files and directories'
        link counts show as on the disk."""
        local = self._local(self.backend_path(path))
        if local is None:
            return
        try:
            st = os.stat(local)
        except OSError:
            return  # removed meanwhile: keep what info found
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns,
                     st_blocks=st.st_blocks, st_nlink=st.st_nlink)

    @_guard
    def access(self, path, amode):
        """access(2) by the permission bits ``stat`` shows, for the calling process, as the
        kernel checks them itself under ``default_permissions`` (mfusepy's default said yes to
        everything: ``test -x`` of any file, ``test -w`` of a read-only one). Root may read
        and write anything, and execute what has an x bit or is a directory."""
        attrs = self.getattr(path)  # ENOENT
        want = amode & (os.R_OK | os.W_OK | os.X_OK)
        if not want:
            return 0
        mode = attrs["st_mode"]
        uid, gid, pid = mfusepy.fuse_get_context()
        if uid == 0:
            allowed = os.R_OK | os.W_OK | (os.X_OK if stat.S_ISDIR(mode) or mode & 0o111 else 0)
        elif uid == attrs["st_uid"]:
            allowed = (mode >> 6) & 7
        elif attrs["st_gid"] == gid or attrs["st_gid"] in _groups(pid):
            allowed = (mode >> 3) & 7
        else:
            allowed = mode & 7
        if want & ~allowed:
            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    @_guard
    def opendir(self, path):
        """Remember the directory's path (readdir gets none under nullpath_ok)."""
        if not self.fs.isdir(self.backend_path(path)):
            raise mfusepy.FuseOSError(errno.ENOTDIR if self.fs.exists(self.backend_path(path)) else errno.ENOENT)
        fh = next(self._ids)
        self._dirs[fh] = path
        return fh

    @_guard
    def releasedir(self, path, fh):
        """Forget an open directory."""
        self._dirs.pop(fh, None)
        return 0

    @_guard
    def readdir(self, path, fh):
        """The entries of a directory from one backend listing."""
        if path is None:
            path = self._dirs.get(fh)
            if path is None:
                raise mfusepy.FuseOSError(errno.EBADF)
        p = self.backend_path(path)
        entries = [".", ".."]
        if self.plfs:
            # One listing of the backing directory: names only (containers are directories
            # there; telling them apart would cost a call per entry, and the kernel asks
            # getattr for the entries it needs anyway).
            backing = self.fs.backing
            for entry in backing.iterdir(self.fs._backing_paths(p)[0]):
                entries.append(entry.path.rsplit("/", 1)[-1])
            return entries
        for entry in self.fs.iterdir(p):
            name = entry.path.rsplit("/", 1)[-1]
            entries.append((name, {"st_mode": stat.S_IFDIR if entry.is_dir else stat.S_IFREG}, 0))
        return entries

    @_guard
    def mkdir(self, path, mode):
        """Create a directory; on ``file://`` mounts with the caller's permission bits."""
        p = self.backend_path(path)
        local = self._local(p)
        if local is None:
            self.fs.mkdir(p)
            return
        os.mkdir(local, stat.S_IMODE(mode))
        os.chmod(local, stat.S_IMODE(mode))  # exactly: the daemon's umask is not the caller's

    def _local(self, p: str) -> str | None:
        """The local path of backend path ``p`` on a plain POSIX backend (None under PLFS, whose
        containers keep no permission bits of their own, and on remote stores)."""
        if self.plfs:
            return None
        try:
            return self.fs.local_path(p)
        except io.UnsupportedOperation:
            return None

    def _create_local(self, p: str, flags: int, mode: int) -> bool:
        """open(O_CREAT) on a ``file://`` mount: make a missing file with the caller's permission
        bits (the kernel applied its umask), as open(2) does: the backend's open would give
        0o666 less the daemon's umask (a private 0o600 file readable by all). True where this
        call made the file (an O_EXCL open must then not fail on it)."""
        local = self._local(p)
        if local is None:
            return False
        try:
            fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, stat.S_IMODE(mode))
        except FileExistsError:
            if flags & os.O_EXCL:
                raise
            return False  # an existing file keeps its bits
        try:
            os.fchmod(fd, stat.S_IMODE(mode))  # the daemon's umask only took bits away
        finally:
            os.close(fd)
        return True

    @_guard
    def mknod(self, path, mode, dev):
        """mknod(2): a regular file is made as ``open(O_CREAT | O_EXCL)`` makes it (libfuse's own
        fallback while no mknod was defined); FIFOs, sockets and devices: EPERM, as mknod(2)
        says for a file system without that type of node (the backends store none; libfuse
        answered ENOSYS)."""
        if not stat.S_ISREG(mode):
            raise mfusepy.FuseOSError(errno.EPERM)
        fi = mfusepy.fuse_file_info()
        fi.flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        self._open(path, fi.flags, fi, create=True, perm=mode)
        handle = self._handles.pop(fi.fh)
        try:
            handle.flush()
        finally:
            self._release(handle)
        return 0

    @_guard
    def symlink(self, target, source):
        """EPERM, as symlink(2) says for a file system without symbolic links (libfuse answered
        ENOSYS, which ``ln -s`` reports as "Function not implemented")."""
        raise mfusepy.FuseOSError(errno.EPERM)

    @_guard
    def rmdir(self, path):
        """Remove an empty directory."""
        self.fs.rmdir(self.backend_path(path))

    @_guard
    def unlink(self, path):
        """Remove a file (a PLFS container); writers of it in this daemon are closed first."""
        p = self.backend_path(path)
        kind = self.fs._type(p)  # not info: a PLFS file's size may take every index log
        if kind == FileType.DIRECTORY:
            raise mfusepy.FuseOSError(errno.EISDIR)
        if self.plfs and kind != FileType.FILE:  # a plain backing file inside a PLFS tree
            self.fs.backing.rm(self.fs._backing_paths(p)[0])
            return
        state = self._states.get(path)
        if state is not None:  # this daemon's writers would otherwise write into removed logs
            with state.lock:
                self._close_writers(state)
        self.fs.rm(p)

    @_guard
    def rename(self, old, new, flags=0):
        """rename(2), with RENAME_NOREPLACE; open writers of the source are closed first."""
        if flags & 2:  # RENAME_EXCHANGE
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
        src, dst = self.backend_path(old), self.backend_path(new)
        if flags & 1 and self.fs.exists(dst):  # RENAME_NOREPLACE
            raise mfusepy.FuseOSError(errno.EEXIST)
        # The open files moved: the path itself, or (a directory) every path below it.
        moved = [state for path, state in list(self._states.items()) if path == old or path.startswith(old + "/")]
        for state in moved:
            with state.lock:
                self._close_writers(state)  # they name the old container
        if not self.fs.capabilities.rename_replaces and self.fs.isfile(dst) and self.fs.isfile(src):
            # POSIX rename(2) replaces a file; this store cannot do it in one step (HDFS):
            # remove the destination first (not atomic: see docs/mount.md).
            self.fs.rm(dst)
        elif not self.fs.capabilities.rename_replaces and src != dst and self.fs.isdir(dst) and self.fs.isdir(src):
            # ... and an empty directory; a non-empty one is ENOTEMPTY, as rename(2) says.
            if next(iter(self.fs.iterdir(dst)), None) is not None:
                raise mfusepy.FuseOSError(errno.ENOTEMPTY)
            self.fs.rmdir(dst)
        self.fs.rename(src, dst)
        with self._states_lock:
            for state in moved:
                if self._states.get(state.path) is not state:
                    continue  # released meanwhile
                del self._states[state.path]
                state.path = new + state.path[len(old):]
                with state.lock:
                    # Readers open their data logs lazily, by the old path: rebuilt at the next read.
                    state.generation += 1
                    for h in state.handles:
                        h.path = state.path
                        if isinstance(h, _PlfsHandle):  # the logs fsync still owes moved with the file
                            h.unsynced = [(log_fs, dst + path[len(src):] if path.startswith(src + "/") else path)
                                          for log_fs, path in h.unsynced]
                self._states[state.path] = state

    @_guard
    def chmod(self, path, mode):
        """Permission bits on file:// backends; EOPNOTSUPP elsewhere."""
        try:
            os.chmod(self.fs.local_path(self.backend_path(path)), stat.S_IMODE(mode))
        except io.UnsupportedOperation:
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP) from None

    @_guard
    def chown(self, path, uid, gid):
        """Owners on file:// backends; EOPNOTSUPP elsewhere."""
        try:
            os.chown(self.fs.local_path(self.backend_path(path)), uid, gid)
        except io.UnsupportedOperation:
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP) from None

    @_guard
    def utimens(self, path, times=None):
        """Times on POSIX backends; elsewhere the backend keeps its own (accepted, not stored).

        ``times``: ``(atime, mtime)`` in ns, either None to leave it as it is (``UTIME_OMIT``:
        ``touch -a`` / ``touch -m``), or None for both to set the current time."""
        try:
            local = self.fs.local_path(self.backend_path(path))
        except io.UnsupportedOperation:
            self.fs.info(self.backend_path(path))  # ENOENT still reported
            return 0
        if times is None:
            os.utime(local)
            return 0
        atime, mtime = times
        if atime is None or mtime is None:
            st = os.stat(local)
            atime = st.st_atime_ns if atime is None else atime
            mtime = st.st_mtime_ns if mtime is None else mtime
        os.utime(local, ns=(atime, mtime))
        return 0

    @_guard
    def statfs(self, path):
        """Free space of the backing file system where it is local; large figures otherwise."""
        try:
            st = os.statvfs(self.fs.local_path(self.backend_path("/")))
        except io.UnsupportedOperation:
            try:
                backing = self.fs.backing if self.plfs else self.fs
                st = os.statvfs(backing.local_path(self.fs._backing_paths(self.root)[0] if self.plfs else self.root))
            except (io.UnsupportedOperation, OSError):
                st = None
        if st is None:  # a remote store: no free-space figure through this API
            return {"f_bsize": BLOCK, "f_frsize": BLOCK, "f_blocks": 1 << 30, "f_bfree": 1 << 30,
                    "f_bavail": 1 << 30, "f_files": 1 << 30, "f_ffree": 1 << 30, "f_favail": 1 << 30,
                    "f_namemax": 255}
        return {key: getattr(st, key) for key in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                                                  "f_files", "f_ffree", "f_favail", "f_namemax")}

    # -- opening ----------------------------------------------------------------------------------
    def _open(self, path: str, flags: int, fi, create: bool, perm: int | None = None):
        readable, writable = _flags_mode(flags)
        p = self.backend_path(path)
        fs = self.fs
        # Also for O_RDONLY: Linux truncates such an open when the caller may write the file
        # (the kernel checked that), and it believes the file empty from then on.
        trunc = bool(flags & os.O_TRUNC)
        if self.plfs:
            created = False
            if writable:
                mode = OpenMode(readable, True, create or bool(flags & os.O_CREAT), False,
                                bool(flags & os.O_EXCL), False, False, "fuse")
                # Its writes must win over what other processes wrote before: sequence numbers
                # above the container's (the writer itself is made at the first write).
                created = fs.container_for_writer(p, mode).created
            elif not fs.isfile(p):
                if fs.isdir(p) or not (create or flags & os.O_CREAT):
                    raise mfusepy.FuseOSError(errno.EISDIR if fs.isdir(p) else errno.ENOENT)
                # open(O_RDONLY | O_CREAT) of a new file: an empty container, as open(2) makes one.
                fs.prepare_container(p, OpenMode(True, True, True, False, bool(flags & os.O_EXCL), False, False,
                                                 "fuse"))
                created = True
            handle = self._attach(path, 0 if created else lambda: fs.info(p).size,
                                  lambda state: _PlfsHandle(self, path, state, readable, writable))
            trunc = trunc and not created  # made empty just now
        else:
            if writable and not fs.capabilities.positional_write:
                # One writer per file (HDFS leases it): a second open for writing would see the
                # file still being written as empty and create it again over the first.
                with self._states_lock:
                    state = self._states.get(path)
                    if state is not None and any(h.writable for h in state.handles):
                        raise mfusepy.FuseOSError(errno.EBUSY)
            if perm is not None and self._create_local(p, flags, perm):
                flags &= ~os.O_EXCL  # made just now, with the caller's bits
            elif not writable and (create or flags & os.O_CREAT) and not fs.exists(p):
                # open(O_RDONLY | O_CREAT) of a new file makes it empty, as open(2) does; the
                # backend's read-only open would not (HDFS answered ENOENT).
                try:
                    fs._open_raw(fs._path(p), OpenMode(False, True, True, False, True, False, False, "fuse")).close()
                    flags &= ~os.O_EXCL
                except FileExistsError:
                    pass  # made by another process meanwhile: open it, or EEXIST for O_EXCL below
            mode = self._raw_mode(p, flags, readable, writable, create)
            raw = fs._open_raw(fs._path(p), mode)

            def make(state):
                handle = _RawHandle(self, path, state, readable, writable, raw=raw)
                if mode.append:
                    handle.position = state.base_size
                return handle
            handle = self._attach(path, lambda: 0 if mode.truncate else fs.info(p).size, make, mode.truncate)
            trunc = trunc and not mode.truncate  # the backend's open emptied it
        if trunc:
            try:
                if self.plfs:
                    self._truncate(handle.state, 0)
                else:
                    self._truncate_raw(handle.state, path, 0, None)
            except BaseException:
                self._release(handle)
                raise
        fh = next(self._ids)
        self._handles[fh] = handle
        fi.fh = fh
        fi.direct_io = 1 if self.direct_io else 0
        fi.keep_cache = 0
        return 0

    def _raw_mode(self, p: str, flags: int, readable: bool, writable: bool, create: bool) -> OpenMode:
        caps = self.fs.capabilities
        creat = create or bool(flags & os.O_CREAT)
        trunc = bool(flags & os.O_TRUNC)
        append = bool(flags & os.O_APPEND)
        if readable and writable and not caps.read_write:
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
        if writable and not caps.positional_write and not trunc:
            # A store whose files are written once (HDFS): a new or empty file is written from
            # the start; an existing one can only be appended to.
            try:
                size = self.fs.info(p).size
            except FileNotFoundError:
                size = 0
                if not creat:
                    raise
            if size == 0:
                trunc, append = True, False
            elif not (append and caps.append):
                raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
        return OpenMode(readable, writable, creat, trunc and writable, bool(flags & os.O_EXCL),
                        append and writable, False, "fuse")

    @_guard
    def open(self, path, fi):
        """open(2) of an existing file."""
        return self._open(path, fi.flags, fi, create=False)

    @_guard
    def create(self, path, mode, fi):
        """open(2) with O_CREAT."""
        return self._open(path, fi.flags | os.O_CREAT, fi, create=True, perm=mode)

    def _release(self, handle: _Handle) -> None:
        state = handle.state
        try:
            handle.release()
        finally:
            with state.lock:
                state.handles.discard(handle)
                if handle.writable:
                    state.base_size = max(state.base_size, handle.end())
            self._drop_state(state)

    @_guard
    def release(self, path, fi):
        """The last close of an open file: close its writer and readers."""
        handle = self._handles.pop(fi.fh, None)
        if handle is not None:
            self._release(handle)
        return 0

    @_guard
    def flush(self, path, fi):
        """close(2) of a descriptor: publish what it wrote (see the handle classes)."""
        self._handle(fi).flush()
        return 0

    @_guard
    def fsync(self, path, datasync, fi):
        """The backend's durable sync of what this open file wrote."""
        self._handle(fi).fsync()
        return 0

    # -- truncate ---------------------------------------------------------------------------------
    @_guard
    def truncate(self, path, length, fi=None):
        """truncate/ftruncate/O_TRUNC: grow or shrink (see the module docstring)."""
        if fi is not None and getattr(fi, "fh", 0) in self._handles:
            handle = self._handles[fi.fh]
            state, temporary, path = handle.state, False, handle.path
        elif path is None:
            raise mfusepy.FuseOSError(errno.EBADF)
        else:
            state, temporary = self._state(path, lambda: self.fs.info(self.backend_path(path)).size), True
        try:
            if self.plfs:
                self._truncate(state, length)
            else:
                self._truncate_raw(state, path, length, handle if not temporary else None)
        finally:
            if temporary:
                self._drop_state(state)
        return 0

    def _truncate_raw(self, state: _FileState, path: str, length: int, handle) -> None:
        p = self.backend_path(path)
        if handle is not None and hasattr(handle.raw, "truncate") and self.fs.capabilities.truncate:
            with handle.lock:
                handle.raw.truncate(length)
        elif self.fs.capabilities.truncate:
            os.truncate(self.fs.local_path(p), length)
        elif length == state.size():
            return
        else:
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
        with state.lock:
            state.base_size = length
            for h in state.handles:
                h.position = min(getattr(h, "position", 0), length)
            state.generation += 1

    def _close_writers(self, state: _FileState) -> None:
        error = None
        for h in list(state.handles):
            if isinstance(h, _PlfsHandle):
                try:
                    h.close_writer(report=False)
                except Exception as exc:
                    error = error or exc
        if error is not None:
            raise error

    def _truncate(self, state: _FileState, length: int) -> None:
        """PLFS: grow with a zero byte at the new end; shrink by rewriting the container."""
        fs = self.fs
        p = self.backend_path(state.path)
        with state.lock:
            self._publish(state)
            current = max(state.size(), fs.info(p).size)
            if length == current:
                state.base_size = length
                return
            if length > current:
                writer = fs.open_writer(p)
                try:
                    writer.pwrite(b"\0", length - 1)
                finally:
                    writer.close()
                state.base_size = length
                state.generation += 1
                return
            self._close_writers(state)
            for h in state.handles:
                h.ended = min(h.ended, length)
                h._queued_end = min(h._queued_end, length)
            if length == 0:
                fs.prepare_container(p, OpenMode.parse("wb", fs.url(p)))
                # A write queued on another open while this ran (an O_TRUNC open does not take
                # the kernel's inode lock) may have made a writer of the old container: close it,
                # so the writes answered after this returns go to the new one.
                self._close_writers(state)
            else:
                tmp = hidden_sibling(p, f"hpcbridge-truncate-{secrets.token_hex(4)}")
                with fs.open(p, "rb") as src:
                    dst = fs.open_writer(tmp)
                    try:
                        buffer = bytearray(min(COPY_CHUNK, length))
                        done = 0
                        while done < length:
                            view = memoryview(buffer)[:min(len(buffer), length - done)]
                            got = src.preadinto(view, done)
                            if got <= 0:
                                break
                            dst.pwrite(view[:got], done)
                            done += got
                        if done < length:
                            dst.pwrite(b"\0", length - 1)
                    finally:
                        dst.close()
                # Replace the file by renames, the old one removed last: a daemon killed here
                # leaves the file or its copy in place, never neither (the window where the
                # path is missing is two renames, not a removal of a whole container).
                old = hidden_sibling(p, f"hpcbridge-truncated-{secrets.token_hex(4)}")
                fs.rename(p, old)
                fs.rename(tmp, p)
                self._close_writers(state)  # a writer made meanwhile names the old container
                fs.rm(old)
            state.base_size = length
            state.generation += 1

    @_guard
    def fallocate(self, path, mode, offset, length, fi):
        """fallocate(2) on ``file://`` mounts, with every mode the disk takes (allocate, KEEP_SIZE,
        PUNCH_HOLE, ZERO_RANGE...); EOPNOTSUPP elsewhere (PLFS logs and HDFS files cannot
        reserve space or punch holes; glibc's posix_fallocate then writes the zeros itself)."""
        handle = self._handle(fi)
        local = self._local(self.backend_path(handle.path))
        if local is None:
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
        fd = os.open(local, os.O_WRONLY)
        try:
            if _fallocate(fd, mode, offset, length) != 0:
                code = ctypes.get_errno()
                raise OSError(code, os.strerror(code), local)
        finally:
            os.close(fd)
        with handle.state.lock:  # readers of a store that caches them reopen (see readinto)
            handle.state.generation += 1
        return 0

    # -- data -------------------------------------------------------------------------------------
    def read_into(self, fh: int, buf, size: int, offset: int) -> int:
        """A read request: straight into the kernel's buffer; returns the count or -errno."""
        handle = self._handles.get(fh)
        if handle is None:
            return -errno.EBADF
        if not handle.readable:
            return -errno.EBADF
        view = memoryview((ctypes.c_char * size).from_address(ctypes.addressof(buf.contents))).cast("B")
        try:
            return handle.readinto(view, offset)
        except Exception as exc:
            code = _errno_of(exc)
            log.warning("read of %s at %d failed: %s (errno %d)", handle.path, offset, exc, code)
            return -code

    def write_from(self, fh: int, buf, size: int, offset: int) -> int:
        """A write request from the kernel's buffer; returns the count or -errno."""
        handle = self._handles.get(fh)
        if handle is None or not handle.writable:
            return -errno.EBADF
        address = ctypes.addressof(buf.contents)
        if handle.copies_writes:  # one copy, made by one C call
            data = ctypes.string_at(address, size)
        else:
            data = memoryview((ctypes.c_char * size).from_address(address)).cast("B")
        try:
            return handle.write(data, offset)
        except Exception as exc:
            code = _errno_of(exc)
            log.warning("write to %s at %d failed: %s (errno %d)", handle.path, offset, exc, code)
            return -code

    def destroy(self, path):
        """Unmount: close what is still open (writers publish their index and metadata)."""
        for fh in list(self._handles):
            handle = self._handles.pop(fh, None)
            if handle is not None:
                try:
                    self._release(handle)
                except Exception as exc:
                    log.warning("closing %s at unmount failed: %s", handle.path, exc)


class BridgeFUSE(mfusepy.FUSE):
    """mfusepy's FUSE with zero-copy data calls: reads land in the kernel's buffer and writes are
    handed to the backend as a view of it (mfusepy's defaults copy both ways through ``bytes``)."""

    def read(self, path, buf, size, offset, fip):
        """Read into the kernel's buffer (no bytes object)."""
        return self.operations.read_into(fip.contents.fh, buf, size, offset)

    def write(self, path, buf, size, offset, fip):
        """Write from the kernel's buffer (no bytes object)."""
        return self.operations.write_from(fip.contents.fh, buf, size, offset)

    def truncate_fuse_3(self, path, length, fip):
        """truncate with the open file's handle, which mfusepy would drop."""
        # mfusepy drops the file info: ftruncate must reach the open handle (its writer).
        decoded = None if path is None else path.decode(self.encoding, self.errors)
        return self.operations.truncate(decoded, length, fip.contents if fip else None)

    def utimens_fuse_3(self, path, buf, fip):
        """utimensat with its special values, which mfusepy would take for times: libfuse hands
        ``UTIME_NOW`` (``touch``) and ``UTIME_OMIT`` (the time not to change: ``touch -a``) as
        ``tv_nsec`` with ``tv_sec`` 0, read by mfusepy as 1.07 s after the epoch."""
        decoded = None if path is None else path.decode(self.encoding, self.errors)
        if not buf:
            return self.operations.utimens(decoded, None)
        now = time.time_ns()
        times = []
        for ts in (buf.contents.actime, buf.contents.modtime):
            if ts.tv_nsec == UTIME_OMIT:
                times.append(None)
            elif ts.tv_nsec == UTIME_NOW:
                times.append(now)
            else:
                times.append(ts.tv_sec * 10**9 + ts.tv_nsec)
        return self.operations.utimens(decoded, tuple(times))

    def rename_fuse_3(self, old, new, flags):
        """rename with its flags, which mfusepy would drop."""
        return self.operations.rename(old.decode(self.encoding, self.errors),
                                      new.decode(self.encoding, self.errors), flags)


def _registered(self, *args):
    """Never called: BridgeFUSE.read/write serve these requests (mfusepy registers a request
    only if the operations object has a method of its name)."""
    raise mfusepy.FuseOSError(errno.ENOSYS)


BridgeOperations.read = _registered
BridgeOperations.write = _registered
