"""Collective write-behind across calls (hint ``cb_write_behind=true``).

A checkpoint written one object per ``write_at_all`` (the LANL N-1 test, 1428 calls of 47001
bytes per rank) pays one collective agreement per call: every call waits for the slowest rank,
and on oversubscribed or noisy nodes that lockstep, not the storage, sets the pace. With this
hint a collective write only *stages* the rank's bytes (one copy, so the caller may reuse its
buffer as MPI allows) and returns; the ranks later write everything staged in one collective
write, which ``cb_write`` plans as for any call: with ``direct_write`` the pieces under 1 MiB
are aggregated into stripe-aligned ``O_DIRECT`` windows.

When to flush must be the same decision on every rank, without an agreement per call. Every
rank makes the same collective calls, so the decision counts calls: the ranks flush together
every ``period`` calls, where ``period`` = the stage size (4 × ``cb_buffer_size``, so that a
flush is several pipelined rounds) / the largest call of any rank. It
is agreed once, at the first collective write (one ``allreduce``), and re-agreed at every
periodic flush from the bytes each rank actually staged, so it follows the application's call
sizes. Between flushes the ranks run free. (Non-blocking collectives posted call by call would
also do; Open MPI 4.1's corrupted its heap with a few of them outstanding, seen here.) A rank
whose stage still outgrows ``HARD_LIMIT`` × the stage size (its calls grew) writes its own
stage at once, without the others.

Flushes also happen at ``sync``, ``close`` and collective reads (all collective); an
independent read or write first writes out the calling rank's own stage without the others, so
a rank always reads its own writes. Other ranks see staged data after ``sync`` or ``close``,
which is what MPI's non-atomic mode promises. Errors of a flush are raised, on every rank, by
the call that flushes.
"""

from __future__ import annotations

import numpy as np

from .buffers import give_back, take_buffer

__all__ = ["WriteBehind", "HARD_LIMIT", "in_file_order"]

#: A rank whose stage passes this many times its size writes it alone, without waiting.
HARD_LIMIT = 2


class WriteBehind:
    """The stage of one open file on one rank, and the call-counting rule for flushing it."""

    def __init__(self, comm, limit: int):
        self.comm = comm
        self.limit = max(1, int(limit))
        self._buffer = np.empty(0, dtype=np.uint8)
        self.nbytes = 0
        self._offsets: list[np.ndarray] = []
        self._lengths: list[np.ndarray] = []
        self.period: int | None = None  # calls per flush, agreed by all ranks
        self._calls = 0                 # collective writes since the last collective flush
        self._bytes = 0                 # bytes those calls staged (also what was written alone)

    def stage(self, data: memoryview, offsets: np.ndarray, lengths: np.ndarray) -> str | None:
        """Copy this call's bytes and extents into the stage.

        Returns ``"all"`` when the ranks must flush together now (the same answer on every
        rank), ``"own"`` when only this rank must write its stage (it outgrew the hard limit),
        else None."""
        from mpi4py import MPI

        n = len(data)
        if self.period is None:
            self.period = self._period(self.comm.allreduce(n, op=MPI.MAX))
        if self.nbytes + n > self._buffer.size:
            grown = take_buffer(max(self.nbytes + n, 2 * self._buffer.size, self.limit))
            grown[:self.nbytes] = self._buffer[:self.nbytes]
            give_back(self._buffer if self._buffer.size else None)
            self._buffer = grown
        self._buffer[self.nbytes:self.nbytes + n] = np.frombuffer(data, dtype=np.uint8)
        self.nbytes += n
        self._offsets.append(offsets)
        self._lengths.append(lengths)
        self._calls += 1
        self._bytes += n
        if self._calls >= self.period:
            # Every rank is at the same call: re-agree the period from what was staged.
            largest = self.comm.allreduce(-(-self._bytes // self._calls), op=MPI.MAX)
            self.period = self._period(largest)
            return "all"
        if self.nbytes > HARD_LIMIT * self.limit:
            return "own"
        return None

    def _period(self, call_bytes: int) -> int:
        return max(1, self.limit // max(1, call_bytes))

    def take(self, collective: bool) -> tuple[memoryview, np.ndarray, np.ndarray]:
        """The staged bytes (stream order) and their file extents; the stage is empty after.

        ``collective``: every rank takes its stage at this call (restarts the call count). The
        returned view stays valid until the next :meth:`stage`."""
        data = memoryview(self._buffer)[:self.nbytes]
        if self._offsets:
            offsets = np.concatenate(self._offsets).astype(np.int64, copy=False)
            lengths = np.concatenate(self._lengths).astype(np.int64, copy=False)
        else:
            offsets = lengths = np.empty(0, dtype=np.int64)
        self.nbytes = 0
        self._offsets, self._lengths = [], []
        if collective:
            self._calls = self._bytes = 0
        if len(offsets) > 1 and np.any(offsets[1:] < offsets[:-1] + lengths[:-1]):
            # A later call wrote below or over an earlier one: the writers downstream take a
            # rank's extents in file order, without overlaps, its bytes in that order.
            data, offsets, lengths = in_file_order(data, offsets, lengths)
        return data, offsets, lengths

    def close(self) -> None:
        """Give the stage buffer back for the next open file."""
        give_back(self._buffer if self._buffer.size else None)
        self._buffer = np.empty(0, dtype=np.uint8)
        self.nbytes = 0
        self._offsets, self._lengths = [], []


def in_file_order(data, offsets: np.ndarray, lengths: np.ndarray) -> tuple[memoryview, np.ndarray, np.ndarray]:
    """``(bytes, offsets, lengths)`` of extents written in call order (``data`` their bytes in
    that order) as disjoint extents in file order, where extents overlap the later one winning:
    what the file holds after the calls, as MPI requires of one process's own writes."""
    keep = lengths > 0
    offsets, lengths = offsets[keep], lengths[keep]
    starts = (np.cumsum(lengths) - lengths)  # each extent's place in ``data``
    ends = offsets + lengths
    # Elementary segments between every extent boundary; each owned by the last extent
    # covering it (extents are painted in call order).
    bounds = np.unique(np.concatenate([offsets, ends]))
    owner = np.full(len(bounds) - 1, -1, dtype=np.int64)
    lo, hi = np.searchsorted(bounds, offsets), np.searchsorted(bounds, ends)
    for i in range(len(offsets)):
        owner[lo[i]:hi[i]] = i
    covered = owner >= 0
    seg_start, seg_end, seg_owner = bounds[:-1][covered], bounds[1:][covered], owner[covered]
    source = np.frombuffer(data, dtype=np.uint8)
    out = np.empty(int((seg_end - seg_start).sum()), dtype=np.uint8)
    at = 0
    for a, b, i in zip(seg_start.tolist(), seg_end.tolist(), seg_owner.tolist()):
        here = starts[i] + (a - offsets[i])
        out[at:at + b - a] = source[here:here + b - a]
        at += b - a
    return memoryview(out), seg_start.astype(np.int64), (seg_end - seg_start).astype(np.int64)
