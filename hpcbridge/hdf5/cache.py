"""A read-only file object with an LRU block cache, for HDF5 metadata.

HDF5 metadata (superblock, object headers, B-tree nodes, heaps) is many small reads scattered
over the file: a sequential readahead wastes most of what it fetches, a per-read round trip to
HDFS costs a millisecond each. :class:`BlockCacheFile` reads aligned blocks (64 KiB by default)
and keeps the most recently used ones, so neighbouring metadata reads cost one fetch. Reads of
at least ``bypass`` bytes go straight to storage into the caller's buffer (raw data).

It is an ``io.RawIOBase`` (``readinto``/``seek``/``tell``), which is what ``h5py.File`` accepts
as a file-like object, and has ``pread``/``preadinto`` for the parsers of this package.

h5py calls ``readinto`` holding its global lock, which any thread's garbage collection of h5py
objects also needs; so storage calls made from ``readinto`` run on the calling thread
(:func:`~hpcbridge.fs.pool.calls_on_this_thread`) and never wait for a worker thread that may
be stuck on that lock (h5py #2019: it deadlocked until the connection's timeout). Such calls
have no per-call timeout.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict

from ..fs.buffers import read_new_bytes
from ..fs.pool import calls_on_this_thread

__all__ = ["BlockCacheFile", "DEFAULT_BLOCK", "DEFAULT_BLOCKS"]

#: Cached block size.
DEFAULT_BLOCK = 64 << 10
#: Blocks kept (16 MiB with the default block size).
DEFAULT_BLOCKS = 256


class BlockCacheFile(io.RawIOBase):
    """Cached positional reads of an open hpcbridge file (``raw``: has ``preadinto``).

    Parameters
    ----------
    raw:
        An hpcbridge file opened for reading (``fs.open(path, "rb", buffering=0)``).
    size:
        The file's size in bytes.
    url:
        The file's URL (for error messages and ``name``).
    block, blocks:
        Cached block size and how many blocks to keep.
    bypass:
        Reads at least this large are not cached (default: 4 blocks).
    """

    def __init__(self, raw, size: int, url: str, block: int = DEFAULT_BLOCK, blocks: int = DEFAULT_BLOCKS,
                 bypass: int | None = None):
        super().__init__()
        self._raw, self._size, self.url = raw, size, url
        self._block, self._max = block, blocks
        self._bypass = 4 * block if bypass is None else bypass
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._pos = 0
        # readinto/seek read and move the position in one step for threads sharing the file
        # outside h5py (whose global lock serialises its own calls), as FileIO's position lock.
        self._position_lock = threading.Lock()
        #: Storage fetches (cached blocks and bypassing reads) and bytes fetched: ``[(offset, length)]``.
        self.fetched: list[tuple[int, int]] = []

    @property
    def name(self) -> str:
        """The URL of the file."""
        return self.url

    def readable(self) -> bool:
        """True."""
        return True

    def seekable(self) -> bool:
        """True."""
        return True

    def size(self) -> int:
        """The file's size."""
        return self._size

    def close(self) -> None:
        """Close the cache and the underlying file."""
        if not self.closed:
            self._cache.clear()
            try:
                self._raw.close()
            finally:
                super().close()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move the position (as ``io``)."""
        with self._position_lock:
            base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
            if base + offset < 0:
                raise OSError(f"negative seek position {base + offset} in {self.url}")
            self._pos = base + offset
            return self._pos

    def tell(self) -> int:
        """The position."""
        return self._pos

    def readinto(self, buffer) -> int:
        """Read at the position into ``buffer`` and advance (h5py's read: storage calls run on
        this thread, see the module's docstring)."""
        with self._position_lock, calls_on_this_thread():
            n = self.preadinto(buffer, self._pos)
            self._pos += n
            return n

    def _get(self, index: int) -> bytes:
        with self._lock:
            data = self._cache.get(index)
            if data is not None:
                self._cache.move_to_end(index)
                return data
        start = index * self._block
        length = min(self._block, self._size - start)
        # The cached block is the bytes read into: no copy.
        data = read_new_bytes(length, lambda view: self._raw.preadinto(view, start))
        with self._lock:
            self.fetched.append((start, len(data)))
            self._cache[index] = data
            while len(self._cache) > self._max:
                self._cache.popitem(last=False)
        return data

    def preadinto(self, buffer, offset: int) -> int:
        """Read into ``buffer`` at ``offset`` (short only at the end of the file)."""
        view = memoryview(buffer).cast("B")
        want = max(0, min(len(view), self._size - offset))
        if want == 0:
            return 0
        if want >= self._bypass:
            got = self._raw.preadinto(view[:want], offset)
            with self._lock:
                self.fetched.append((offset, got))
            return got
        done = 0
        while done < want:
            pos = offset + done
            data = self._get(pos // self._block)
            inner = pos % self._block
            n = min(want - done, len(data) - inner)
            if n <= 0:
                break
            view[done:done + n] = data[inner:inner + n]
            done += n
        return done

    def pread(self, size: int, offset: int) -> bytes:
        """``size`` bytes at ``offset`` (fewer at the end of the file)."""
        return read_new_bytes(max(0, min(size, self._size - offset)), lambda view: self.preadinto(view, offset))
