"""Reading a container: global index once, then data from the writers' logs.

A read looks up the pieces of its range in the global index, coalesces the pieces each writer
holds contiguously in its data log into one positional read, runs those reads in parallel on a
bounded pool, and scatters the bytes into the caller's buffer; holes stay zero. At most
``max_open`` data logs are open at once (PLFS #114 ran out of descriptors on wide containers).
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from ..fs.pool import CallPool
from .container import Container
from .index import GlobalIndex

__all__ = ["PlfsReader", "load_index"]

# Resolved indexes of recently opened containers, keyed by the index logs and their sizes: an
# unchanged container is reopened without reading its index logs again.
_CACHE: collections.OrderedDict = collections.OrderedDict()
_CACHE_SIZE = 16
_cache_lock = threading.Lock()


def load_index(container: Container, on_corruption: str = "raise", comm=None):
    """Merge every writer's index log into a :class:`GlobalIndex`; returns ``(index, damage)``.

    With an MPI communicator, each rank reads its share of the index logs and the records are
    allgathered, instead of every rank reading everything.
    """
    from .tools import load_flat

    flat = load_flat(container) if (comm is None or comm.rank == 0) else None
    if comm is not None and comm.size > 1:
        flat = comm.bcast(flat, root=0)
    if flat is not None:
        return flat, []
    logs = container.index_logs()
    key = None
    if comm is None or comm.size == 1:
        key = (container.url, tuple((log[2], log[1].info(log[2]).size) for log in logs))
        with _cache_lock:
            if key in _CACHE:
                _CACHE.move_to_end(key)
                return _CACHE[key], []
    if comm is not None and comm.size > 1:
        mine = logs[comm.rank::comm.size]
        records, damage = container.read_index_logs(mine, "skip")
        gathered = comm.allgather((records, damage))
        records = np.concatenate([g[0] for g in gathered])
        damage = [d for g in gathered for d in g[1]]
        serious = [d for d in damage if d[1] >= 0]
        if serious and on_corruption == "raise":
            container.read_index_logs([log for log in logs if log[1].url(log[2]) == serious[0][0]], "raise")
    else:
        records, damage = container.read_index_logs(logs, on_corruption)
    index = GlobalIndex.build(records)
    if key is not None and not damage:
        with _cache_lock:
            _CACHE[key] = index
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    return index, damage


class PlfsReader:
    """Random-access reads of a container's logical file."""

    def __init__(self, container: Container, index: GlobalIndex, threads: int = 8, max_open: int = 64):
        self.container = container
        self.index = index
        self.size = index.size
        self.max_open = max_open
        self._handles: collections.OrderedDict = collections.OrderedDict()
        self._in_use: dict[int, int] = {}
        self._lock = threading.Lock()
        self._pool = CallPool(threads, f"plfs {container.url}")

    def _handle(self, writer: int):
        """The open data log of ``writer``, marked in use until :meth:`_release`.

        At most ``max_open`` logs stay open; only logs no read is using are closed to make room
        (closing one another thread is reading from failed that read with EBADF), so the limit
        may be passed while more reads than ``max_open`` run at once.
        """
        with self._lock:
            handle = self._handles.pop(writer, None)
            if handle is None:
                fs, path = self.container.data_log(writer)
                # Buffered: small reads that walk a writer's log in order (reading back one
                # rank's strided objects) become large sequential reads of the log.
                handle = fs.open(path, "rb", buffering=self.LOG_BUFFER)
            self._handles[writer] = handle
            self._in_use[writer] = self._in_use.get(writer, 0) + 1
            self._evict()
            return handle

    def _release(self, writer: int) -> None:
        with self._lock:
            left = self._in_use.pop(writer) - 1
            if left:
                self._in_use[writer] = left
            self._evict()

    def _evict(self) -> None:
        # Called with the lock held: close the least recently used idle logs beyond max_open.
        excess = len(self._handles) - self.max_open
        if excess <= 0:
            return
        for old in [w for w in self._handles if w not in self._in_use][:excess]:
            self._handles.pop(old).close()

    def _read_run(self, writer: int, physical: int, length: int) -> bytes:
        try:
            data = self._handle(writer).pread(length, physical)
        finally:
            self._release(writer)
        if len(data) != length:
            fs, path = self.container.data_log(writer)
            raise OSError(5, f"data log {fs.url(path)} is shorter than its index says "
                             f"({len(data)} of {length} bytes at {physical})", self.container.url)
        return data

    def readinto(self, buffer, offset: int) -> int:
        """Read the logical bytes at ``offset`` into ``buffer``; returns the count (short at EOF)."""
        view = memoryview(buffer).cast("B")
        end = min(offset + len(view), self.size)
        if end <= offset:
            return 0
        n = end - offset
        if n <= self.SMALL_READ:
            return self._readinto_small(view, offset, end)
        pieces = self.index.lookup(offset, end)
        # Holes read as zeros: zero the gaps between the pieces (sorted by logical offset).
        gap_starts = np.concatenate(([offset], pieces["logical"] + pieces["length"]))
        gap_ends = np.concatenate((pieces["logical"], [end]))
        for lo, hi in zip(gap_starts[gap_ends > gap_starts].tolist(), gap_ends[gap_ends > gap_starts].tolist()):
            view[lo - offset:hi - offset] = bytes(hi - lo)
        if not len(pieces["logical"]):
            return n
        # Coalesce per writer: pieces contiguous in the writer's log become one read.
        order = np.lexsort((pieces["physical"], pieces["writer"]))
        wr, ph, ln, lg = (pieces[k][order] for k in ("writer", "physical", "length", "logical"))
        joins = np.ones(len(wr), dtype=bool)
        joins[1:] = (wr[1:] != wr[:-1]) | (ph[1:] != ph[:-1] + ln[:-1])
        run_id = np.cumsum(joins) - 1
        starts = np.flatnonzero(joins)
        run_len = np.bincount(run_id, weights=ln).astype(np.int64)
        runs = [(int(wr[s]), int(ph[s]), int(run_len[r])) for r, s in enumerate(starts)]
        if len(runs) == 1:
            datas = [self._read_run(*runs[0])]
        else:
            futures = [self._pool.submit(self._read_run, *run) for run in runs]
            datas = [f.result() for f in futures]
        for r, s in enumerate(starts):
            data = datas[r]
            within = 0
            stop = starts[r + 1] if r + 1 < len(starts) else len(wr)
            for i in range(s, stop):
                length = int(ln[i])
                at = int(lg[i]) - offset
                view[at:at + length] = data[within:within + length]
                within += length
        return n

    #: Reads up to this size take a plain-Python path straight into the caller's buffer.
    SMALL_READ = 4 << 20
    #: Read buffer of each open data log.
    LOG_BUFFER = 1 << 20

    def _readinto_small(self, view, offset: int, end: int) -> int:
        position = offset
        for logical, length, physical, writer in self.index.lookup_list(offset, end):
            if logical > position:  # a hole
                view[position - offset:logical - offset] = bytes(logical - position)
            at = logical - offset
            handle = self._handle(writer)
            try:
                if handle.tell() != physical:
                    handle.seek(physical)
                got = handle.readinto(view[at:at + length])
            finally:
                self._release(writer)
            if got != length:
                fs, path = self.container.data_log(writer)
                raise OSError(5, f"data log {fs.url(path)} is shorter than its index says "
                                 f"({got} of {length} bytes at {physical})", self.container.url)
            position = logical + length
        if position < end:
            view[position - offset:end - offset] = bytes(end - position)
        return end - offset

    def close(self) -> None:
        """Close the data logs."""
        with self._lock:
            for handle in self._handles.values():
                handle.close()
            self._handles.clear()
