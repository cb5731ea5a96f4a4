"""Readahead for remote files: the shim's "buf" module (seed 000, section 3.1).

Without it, small sequential reads each cost a round trip: 4 KiB reads from HDFS crawl at about
9 MB/s. :class:`ReadaheadReader` keeps one window of the file: a sequential read that misses the
window fetches ``readahead`` bytes at once (4 MiB by default) and the following small reads are
served from memory. Access that is not sequential (a read not starting where the previous one
ended) is served exactly as asked, so random reads do not pay for a window they do not use; a
read at least as large as the window bypasses it. With ``prefetch``, the next window is fetched
in the background while the current one is consumed.

Counters (:class:`ReadaheadStats`) say what happened, as fsspec's caches do.
"""

from __future__ import annotations

import concurrent.futures
import io
import operator
import threading
from dataclasses import dataclass

from .buffers import read_new_bytes
from .file import MAX_OFFSET, SEEK_DATA_HOLE, check_range, seek_data_hole, writable_bytes
from .pool import calls_inline

__all__ = ["ReadaheadReader", "ReadaheadStats", "DEFAULT_READAHEAD"]

DEFAULT_READAHEAD = 4 << 20
#: Reads at least this large that start outside the window go to the raw file whole (unless
#: prefetching, which needs the window): a window holds several chunks at once, and freeing and
#: refilling 4 MiB of them every 4 MiB made the allocator hand back fresh, faulting memory each
#: time. Measured, 128 MiB read(1 MiB) on the testbed, libhdfs: through the window 203 ms, direct
#: 105 ms, raw pyarrow 100 ms; native: 536, 421, raw hdfs-native 711.
DIRECT_READ = 1 << 20
#: How long a read waits for a background fetch (a connection's I/O timeout, by default).
PREFETCH_TIMEOUT = 60.0


@dataclass
class ReadaheadStats:
    """What a :class:`ReadaheadReader` did: window hits, window fills, direct reads, prefetches."""

    hits: int = 0
    fills: int = 0
    direct: int = 0
    prefetched: int = 0
    bytes_fetched: int = 0


class ReadaheadReader(io.BufferedIOBase):
    """A read-only buffered file over a raw file with ``pread``/``preadinto``/``size``.

    Parameters
    ----------
    raw:
        The backend's raw file: ``pread(size, offset)``, ``preadinto``, ``size()``, and optionally
        ``fetch(size, offset)`` returning the bytes as a list of equal-sized chunks.
    readahead:
        Window size for sequential reads (0 disables readahead: every read goes to the raw file).
        Reads of :data:`DIRECT_READ` or more outside the window go to the raw file directly,
        except with ``prefetch``.
    prefetch:
        After each sequential fill, fetch the following ``prefetch_size`` bytes asynchronously.
    prefetch_size:
        Bytes fetched ahead (default: ``readahead``; HDFS uses the file's block size: whole-block
        prefetch).
    submit:
        Runs a prefetch in the background (``CallPool.submit``); required with ``prefetch``.
    """

    def __init__(self, raw, readahead: int = DEFAULT_READAHEAD, prefetch: bool = False, submit=None,
                 prefetch_size: int | None = None):
        super().__init__()
        if readahead < 0:
            raise ValueError(f"readahead must be >= 0, got {readahead}")
        if prefetch and submit is None:
            raise ValueError("prefetch needs a submit function (the connection's call pool)")
        self.raw = raw
        self.url = raw.url
        self.readahead = readahead
        self.prefetch = prefetch
        self.prefetch_size = prefetch_size or readahead
        self._submit = submit
        self._size = raw.size()
        self._pos = 0
        self._next_sequential = 0
        self._window: list = []
        self._window_start = 0
        self._window_len = 0
        self._chunk = 1
        self._cur, self._cur_start, self._cur_len = b"", -1, 0  # the chunk the position was last in
        self._hits = self._fills = self._direct = self._prefetched = self._bytes_fetched = 0
        self._pending = None  # (start, future) of a background fetch
        # Smallest read that skips the window (see DIRECT_READ).
        self._direct_from = readahead if prefetch else min(readahead, DIRECT_READ)
        # Serialises the position, the window and the pending prefetch between threads sharing
        # this handle (Dask's threaded scheduler, reader pools), as io.BufferedReader's lock does:
        # unlocked, a read could take one chunk's offset and another chunk's bytes. Reentrant:
        # read calls readinto, readline calls peek and read.
        self._lock = threading.RLock()

    # -- io plumbing ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The file's URL."""
        return self.url

    @property
    def mode(self) -> str:
        """Always ``"rb"``."""
        return "rb"

    def readable(self) -> bool:
        self._check_open()
        return True

    def seekable(self) -> bool:
        self._check_open()
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        """Close the raw file and drop the window."""
        with self._lock:  # after any read in progress, as io.BufferedReader.close
            self._close()

    def _close(self) -> None:
        if not self.closed:
            self._window, self._window_len = [], 0
            self._cur, self._cur_start, self._cur_len = b"", -1, 0
            self._drop_pending()
            self.raw.close()
        super().close()

    def detach(self):
        raise io.UnsupportedOperation(f"detach is not supported on {self.url}")

    def __repr__(self) -> str:
        return f"<hpcbridge ReadaheadReader {self.url} {'closed' if self.closed else 'rb'}>"

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O operation on closed file {self.url}")

    @property
    def stats(self) -> ReadaheadStats:
        """Counters so far: window hits, fills, direct reads, prefetches, bytes fetched."""
        return ReadaheadStats(self._hits, self._fills, self._direct, self._prefetched, self._bytes_fetched)

    # -- position ----------------------------------------------------------------------------
    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move the position (the window is kept: seeking back into it costs nothing)."""
        with self._lock:
            return self._seek_locked(offset, whence)

    def _seek_locked(self, offset: int, whence: int) -> int:
        self._check_open()
        offset, whence = operator.index(offset), operator.index(whence)  # as BufferedReader: no floats
        if whence in SEEK_DATA_HOLE:
            offset, whence = seek_data_hole(offset, whence, self._size, self.url), io.SEEK_SET
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}.get(whence)
        if base is None:
            raise ValueError(f"invalid whence {whence} for {self.url}")
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset} for {self.url}")
        if base + offset > MAX_OFFSET:
            raise ValueError(f"seek position {base + offset} is past the largest file offset (2**63-1) for {self.url}")
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        """The current position."""
        self._check_open()
        return self._pos

    # -- reading -----------------------------------------------------------------------------
    # The window is a list of chunks as the raw file returned them (``raw.fetch``), so filling it
    # costs no joining copy; every chunk but the last has the same length.
    def _fetch(self, length: int, position: int) -> list:
        fetch = getattr(self.raw, "fetch", None)
        return fetch(length, position) if fetch else [self.raw.pread(length, position)]

    def _drop_pending(self) -> None:
        """Forget the background fetch; one already running is waited for (bounded), because the
        raw file is not to be used by two threads at once (hdfs-native: "Already borrowed")."""
        if self._pending is not None:
            future, self._pending = self._pending[1], None
            if not future.cancel():
                concurrent.futures.wait([future], timeout=PREFETCH_TIMEOUT)

    def _take_prefetched(self, position: int):
        if self._pending is None:
            return None
        if self._pending[0] != position:
            self._drop_pending()
            return None
        future = self._pending[1]
        self._pending = None
        try:
            chunks = future.result(timeout=PREFETCH_TIMEOUT)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"prefetch of {self.url} did not finish within {PREFETCH_TIMEOUT:g} s") from None
        self._prefetched += 1
        return chunks

    def _fill(self, position: int) -> None:
        """Make the window start at ``position`` (a sequential miss)."""
        length = min(self.readahead, self._size - position)
        chunks = self._take_prefetched(position)  # a prefetched block becomes the window whole
        if chunks is None:
            chunks = self._fetch(length, position)
            self._bytes_fetched += sum(len(c) for c in chunks)
        self._window = [c if isinstance(c, bytes) else bytes(c) for c in chunks if len(c)]
        self._chunk = len(self._window[0]) if self._window else 1
        if any(len(c) != self._chunk for c in self._window[:-1]):  # a short read mid-window: rare
            self._window = [b"".join(self._window)]
            self._chunk = len(self._window[0])
        self._window_start = position
        self._window_len = sum(len(c) for c in self._window)
        self._cur, self._cur_start, self._cur_len = b"", -1, 0
        self._fills += 1
        following = position + self._window_len
        # Not where calls run on the caller's thread (calls_on_this_thread): a prefetch would be
        # a second read waited for at once.
        if self.prefetch and following < self._size and not calls_inline():
            next_length = min(self.prefetch_size, self._size - following)
            self._pending = (following, self._submit(self._fetch, next_length, following))
            self._bytes_fetched += next_length

    def _locate(self, position: int):
        """``(chunk, offset in chunk)`` of ``position`` in the window, or None."""
        offset = position - self._window_start
        if not 0 <= offset < self._window_len:
            return None
        index, within = divmod(offset, self._chunk)
        chunk = self._window[index]
        self._cur, self._cur_start, self._cur_len = chunk, self._window_start + index * self._chunk, len(chunk)
        return chunk, within

    def readinto(self, buffer) -> int:
        """Read into ``buffer`` from the position; returns the byte count (0 at end of file)."""
        with self._lock:
            return self._readinto_locked(buffer)

    def _readinto_locked(self, buffer) -> int:
        self._check_open()
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._size - self._pos)
        total = 0
        while total < want:
            position = self._pos
            found = self._locate(position)
            if found is not None:
                chunk, within = found
                n = min(want - total, len(chunk) - within)
                view[total:total + n] = chunk[within:within + n]
                self._hits += 1
            elif (want - total) >= self._direct_from or position != self._next_sequential:
                self._drop_pending()
                n = self.raw.preadinto(view[total:want], position)
                self._direct += 1
                self._bytes_fetched += n
                if n == 0:
                    break
            else:
                self._fill(position)
                continue
            total += n
            self._pos += n
            self._next_sequential = self._pos
        return total

    readinto1 = readinto

    def read(self, size: int | None = -1) -> bytes:
        """Read up to ``size`` bytes (all the rest with -1)."""
        with self._lock:
            return self._read_locked(size)

    def _read_locked(self, size: int | None) -> bytes:
        # Fast path, kept tight because 4 KiB reads call it a thousand times per window: the
        # request lies inside the current chunk.
        position = self._pos
        offset = position - self._cur_start
        if size is not None and 0 <= offset and 0 <= size and offset + size <= self._cur_len:
            self._pos = self._next_sequential = position + size
            self._hits += 1
            return self._cur[offset:offset + size]
        self._check_open()
        if size is not None and size < -1:
            raise ValueError(f"read length must be non-negative or -1, got {size} ({self.url})")
        remaining = max(0, self._size - position)
        size = remaining if size is None or size < 0 else min(size, remaining)
        found = self._locate(position)
        if found is not None and found[1] + size <= len(found[0]):  # within one chunk
            chunk, within = found
            self._pos = self._next_sequential = position + size
            self._hits += 1
            return bytes(chunk[within:within + size])
        if found is None and size and (size >= self._direct_from or position != self._next_sequential):
            # What readinto would read past the window: the raw file's own bytes object (HDFS:
            # the client's buffer, not copied into a scratch buffer and copied out again).
            self._drop_pending()
            data = self.raw.pread(size, position)
            self._direct += 1
            self._bytes_fetched += len(data)
            self._pos = self._next_sequential = position + len(data)
            return data
        return read_new_bytes(size, self.readinto)  # into the bytes returned: no second copy

    read1 = read

    @property
    def size(self) -> int:
        """The file's size in bytes (fsspec's file objects have it: ``read_block``)."""
        return self._size

    def readline(self, size: int | None = -1) -> bytes:
        """One line (through ``\\n``), of at most ``size`` bytes if ``size`` >= 0, scanned in the
        readahead window (io's generic readline may overshoot ``size`` where a line crosses
        the window's end)."""
        with self._lock:
            return self._readline_locked(size)

    def _readline_locked(self, size: int | None) -> bytes:
        self._check_open()
        limit = -1 if size is None else operator.index(size)  # as BufferedReader: no floats
        line = bytearray()
        while limit < 0 or len(line) < limit:
            window = self.peek(1)
            if not window:
                break
            room = len(window) if limit < 0 else min(len(window), limit - len(line))
            end = window.find(b"\n", 0, room)
            take = end + 1 if end >= 0 else room
            line += self.read(take)
            if end >= 0:
                break
        return bytes(line)

    def peek(self, size: int = 0) -> bytes:
        """Bytes from the position without consuming them (lets ``readline`` scan the window)."""
        with self._lock:
            return self._peek_locked(size)

    def _peek_locked(self, size: int) -> bytes:
        self._check_open()
        if self._pos >= self._size:
            return b""
        found = self._locate(self._pos)
        if found is None:
            if self.readahead and self._pos == self._next_sequential:
                self._fill(self._pos)
                found = self._locate(self._pos)
            else:
                self._drop_pending()
                return self.raw.pread(max(size, 1), self._pos)
        chunk, within = found
        return bytes(chunk[within:])

    # -- positional --------------------------------------------------------------------------
    def pread(self, size: int, offset: int) -> bytes:
        """Read up to ``size`` bytes at ``offset`` directly (no window, position unchanged)."""
        self._check_open()
        check_range(offset, size, self.url, "size")
        with self._lock:  # another thread's read may be setting up a prefetch
            self._drop_pending()
        return self.raw.pread(min(size, max(0, self._size - offset)), offset)

    def preadinto(self, buffer, offset: int) -> int:
        """Read into ``buffer`` at ``offset`` directly; returns the byte count."""
        self._check_open()
        check_range(offset, len(writable_bytes(buffer, self.url)), self.url)
        with self._lock:  # another thread's read may be setting up a prefetch
            self._drop_pending()
        return self.raw.preadinto(buffer, offset)

    def preadvinto(self, buffers, offset: int) -> int:
        """Scatter read at ``offset`` directly (no window, position unchanged)."""
        self._check_open()
        views = [writable_bytes(b, self.url) for b in buffers]
        check_range(offset, sum(len(v) for v in views), self.url)
        with self._lock:  # another thread's read may be setting up a prefetch
            self._drop_pending()
        return self.raw.preadvinto(views, offset)

    def map_range(self, offset: int, length: int) -> memoryview:
        """The raw file's memory map of the range (where ``capabilities.memory_map``)."""
        self._check_open()
        return self.raw.map_range(offset, length)

    def sync(self) -> None:
        """Nothing to make durable on a read-only file (as on the other backends' readers)."""
        self._check_open()

    # -- refusals ----------------------------------------------------------------------------
    def write(self, data) -> int:
        """Refused: the file is read-only (closed or not, as io.BufferedReader refuses it)."""
        raise io.UnsupportedOperation(f"write: {self.url} is open read-only (mode 'rb')")

    def truncate(self, size=None) -> int:
        """Refused: the file is read-only; a closed file is ValueError first, as io.BufferedReader."""
        self._check_open()
        raise io.UnsupportedOperation(f"truncate: {self.url} is open read-only (mode 'rb')")

    def pwrite(self, data, offset: int) -> int:
        """Refused: the file is read-only."""
        self._check_open()
        raise io.UnsupportedOperation(f"pwrite: {self.url} is open read-only (mode 'rb')")
