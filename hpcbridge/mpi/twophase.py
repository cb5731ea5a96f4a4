"""Two-phase collective I/O (ROMIO's algorithm, with the known weaknesses avoided).

Phase one exchanges data so each aggregator holds a contiguous *file domain*; phase two has
each aggregator write (or read) its domain in large pieces. Steps of one collective call:

1. Every rank's file extents are all-gathered as one int64 array (no per-extent Python
   objects): every rank then computes the same plan with numpy.
2. The accessed range is split into one domain per aggregator, domain boundaries aligned to the
   stripe unit so no two aggregators touch one stripe (unaligned domains cost up to 30× on
   Lustre from lock conflicts, Liao & Choudhary, SC08).
3. Each domain is processed in rounds of ``cb_buffer_size`` bytes. Each round is one
   ``Alltoallw``: senders pass slices of the caller's buffer (no packing copy, because a rank's
   data for one window is contiguous in its buffer); aggregators receive either back to back
   and let ``pwritev`` reorder, or straight into file position through hindexed datatypes
   (:mod:`hpcbridge.mpi.windowio` says when each).
4. Rounds are pipelined: a writer thread writes round k while the main thread exchanges round
   k+1 (double buffering), so exchange and I/O overlap instead of alternating.
5. Counts never exceed ``cb_buffer_size`` (≤ 1 GiB) and displacements go through 64-bit
   hindexed datatypes, so buffers over 2 GiB work (the overflow of mpich issue #1742).

``cb_write=auto`` skips the exchange when every rank's access is one contiguous extent of at
least a stripe unit: then each rank's own write is already large and aligned enough, and the
exchange would only add a copy.
"""

from __future__ import annotations

import errno
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from .plan import CollectivePlan, PieceTable, WindowPieces, file_domains, round_windows
from .windowio import (independent_read, independent_write, is_vectored, preread_span, read_placed, read_vectored,
                       sieve_worthwhile, write_placed, write_vectored)

__all__ = ["Exchanger"]

_INT_MAX = (1 << 31) - 1
_EMPTY = bytearray(1)


def _byte_type(MPI, displacements: np.ndarray, lengths: np.ndarray):
    """``(count, displacement, datatype, needs_free)`` for bytes at ``displacements`` of a buffer.

    One block within int range is a plain count and displacement; anything else is an hindexed
    type, whose displacements are 64-bit (MPI_Aint): no overflow past 2 GiB.
    """
    if lengths.size == 0:
        return 0, 0, MPI.BYTE, False
    if lengths.size == 1 and displacements[0] <= _INT_MAX and lengths[0] <= _INT_MAX:
        return int(lengths[0]), int(displacements[0]), MPI.BYTE, False
    datatype = MPI.BYTE.Create_hindexed(lengths.astype(np.int64).tolist(), displacements.astype(np.int64).tolist())
    datatype.Commit()
    return 1, 0, datatype, True


_SPARE: list[np.ndarray] = []  # round buffers of closed files, reused by the next open
_MAX_SPARE = 4


def _take_buffer(nbytes: int) -> np.ndarray:
    # Reusing buffers matters: a fresh 16 MiB buffer page-faults on first touch, and a job that
    # opens a file per checkpoint would pay that on every open.
    for i, spare in enumerate(_SPARE):
        if spare.size >= nbytes:
            return _SPARE.pop(i)
    return np.empty(nbytes, dtype=np.uint8)


def _give_back(buffer: np.ndarray | None) -> None:
    if buffer is not None and len(_SPARE) < _MAX_SPARE:
        _SPARE.append(buffer)


class _Slot:
    """One of the two pipeline slots of an aggregator: round buffer (or staging) and sieve scratch."""

    def __init__(self, size: int):
        self.size = size
        self._buffer: np.ndarray | None = None
        self._scratch: np.ndarray | None = None

    def buffer(self, nbytes: int) -> memoryview:
        # Overlapping pieces (several ranks reading one header) can stage more than a window.
        if self._buffer is None or self._buffer.size < nbytes:
            _give_back(self._buffer)
            self._buffer = _take_buffer(max(self.size, nbytes))
        return memoryview(self._buffer)

    def scratch(self) -> memoryview:
        if self._scratch is None:
            self._scratch = _take_buffer(self.size)
        return memoryview(self._scratch)

    def release(self) -> None:
        _give_back(self._buffer)
        _give_back(self._scratch)
        self._buffer = self._scratch = None


class Exchanger:
    """Runs the collective reads and writes of one open file: aggregators, buffers, I/O thread."""

    def __init__(self, comm, target, aggregators: np.ndarray, hints):
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = comm
        self.target = target
        self.aggregators = aggregators
        self.hints = hints
        self.rank = comm.rank
        self.size = comm.size
        self.my_agg = int(np.searchsorted(aggregators, self.rank))
        self.is_aggregator = self.my_agg < aggregators.size and aggregators[self.my_agg] == self.rank
        self.unit = max(1, int(hints.striping_unit or target.stripe_unit))
        self.buffer_size = int(hints.cb_buffer_size)
        if self.buffer_size > self.unit and self.buffer_size % self.unit:
            # Keep round windows stripe-aligned: a buffer that is not a multiple of the unit would
            # make every round after the first start mid-stripe.
            self.buffer_size -= self.buffer_size % self.unit
        self._slots = (_Slot(self.buffer_size), _Slot(self.buffer_size))
        self._pool: ThreadPoolExecutor | None = None
        self.last_plan: CollectivePlan | None = None

    def _io_thread(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hpcbridge-mpi-io")
        return self._pool

    def close(self) -> None:
        """Stop the I/O thread and drop the round buffers."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for slot in self._slots:
            slot.release()

    # -- planning -----------------------------------------------------------------------------
    def gather(self, offsets: np.ndarray, lengths: np.ndarray):
        """All ranks' extents: ``(rank_of, offsets, lengths, memory, counts)``, in rank order.

        ``memory`` is each extent's position in its own rank's buffer. One ``Allgather`` of
        three integers per rank carries everything when every rank has at most one extent (the
        common case of per-transfer collective calls); otherwise an ``Allgatherv`` follows.
        """
        head = np.zeros(3, dtype=np.int64)
        head[0] = offsets.size
        if offsets.size:
            head[1], head[2] = offsets[0], lengths[0]
        heads = np.empty((self.size, 3), dtype=np.int64)
        self.comm.Allgather(head, heads)
        counts = heads[:, 0].copy()
        rank_of = np.repeat(np.arange(self.size, dtype=np.int64), counts)
        if counts.max(initial=0) <= 1:
            has = counts > 0
            all_offsets, all_lengths = heads[has, 1].copy(), heads[has, 2].copy()
            return rank_of, all_offsets, all_lengths, np.zeros(all_offsets.size, dtype=np.int64), counts
        total = int(counts.sum())
        send = np.empty((offsets.size, 2), dtype=np.int64)
        send[:, 0], send[:, 1] = offsets, lengths
        recv = np.empty((total, 2), dtype=np.int64)
        displs = np.cumsum(counts) - counts
        self.comm.Allgatherv(send, [recv, (counts * 2).tolist(), (displs * 2).tolist(), self.MPI.INT64_T])
        all_offsets, all_lengths = recv[:, 0].copy(), recv[:, 1].copy()
        cumulative = np.concatenate(([0], np.cumsum(all_lengths))).astype(np.int64)
        memory = cumulative[:-1] - np.repeat(cumulative[displs], counts)
        return rank_of, all_offsets, all_lengths, memory, counts

    def _decide(self, setting: str, lengths: np.ndarray) -> tuple[bool, str]:
        if setting == "enable":
            return True, "cb enabled by hint"
        if lengths.size == 0 or lengths.min() >= self.unit:
            # Large pieces need no aggregation: each write already covers whole stripes (a
            # contiguous per-rank access is the common case), and the exchange would only add a
            # copy. Smaller pieces share stripes between ranks: aggregate.
            return False, f"every piece is at least one stripe unit ({self.unit} bytes)"
        return True, f"pieces smaller than the stripe unit ({self.unit} bytes)"

    def _prepare(self, setting: str, offsets, lengths):
        if setting == "disable":
            # Every rank reads the same hint: no need to gather anything to agree on skipping.
            return None, CollectivePlan("independent", "cb disabled by hint")
        rank_of, all_off, all_len, memory, counts = self.gather(offsets, lengths)
        nonempty = all_len > 0
        if not nonempty.any():
            return None, CollectivePlan("independent", "no data")
        aggregate, reason = self._decide(setting, all_len[nonempty])
        if not aggregate:
            return None, CollectivePlan("independent", reason)
        start, end = int(all_off[nonempty].min()), int((all_off + all_len)[nonempty].max())
        dstarts, dends = file_domains(start, end, self.aggregators.size, self.unit)
        ws, we, rounds = round_windows(dstarts, dends, self.unit, self.buffer_size)
        table = PieceTable(rank_of, all_off, all_len, memory, ws.reshape(-1), we.reshape(-1), self.size)
        plan = CollectivePlan("aggregated", reason, self.aggregators, dstarts, dends, self.unit,
                              self.buffer_size, rounds)
        return (table, ws.reshape(-1), rounds), plan

    def _sender_specs(self, mine, rounds: int, rnd: int):
        """Per aggregator: this rank's slice of its buffer for round ``rnd``, and the base offset."""
        spans = [mine.span(k * rounds + rnd) for k in range(self.aggregators.size)]
        used = [start for start, n in spans if n]
        base = min(used) if used else 0
        specs = [_byte_type(self.MPI, np.array([start - base]), np.array([n])) if n else (0, 0, self.MPI.BYTE, False)
                 for start, n in spans]
        return base, specs

    def _aggregator_specs(self, pieces: WindowPieces, vectored: bool, window_start: int) -> dict:
        """Per rank: where its pieces of this window sit in the aggregator's slot buffer."""
        MPI = self.MPI
        specs = {}
        if vectored:
            for rank in np.flatnonzero(pieces.rank_counts).tolist():
                specs[rank] = (int(pieces.rank_counts[rank]), int(pieces.rank_displs[rank]), MPI.BYTE, False)
            return specs
        bounds = np.concatenate(([0], np.flatnonzero(np.diff(pieces.rank)) + 1, [pieces.rank.size]))
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            specs[int(pieces.rank[lo])] = _byte_type(MPI, pieces.offset[lo:hi] - window_start, pieces.length[lo:hi])
        return specs

    # -- collective write ---------------------------------------------------------------------
    def write(self, data: memoryview, offsets: np.ndarray, lengths: np.ndarray) -> int:
        """Collective: write ``data`` (this rank's bytes, in stream order) to its file extents."""
        prepared, plan = self._prepare(self.hints.cb_write, offsets, lengths)
        if prepared is None:
            # Every rank took the same decision from the same gathered extents, and nothing
            # collective follows: each rank reports its own errors, as MPI does.
            self.last_plan = plan
            independent_write(self.target, data, offsets, lengths)
            return len(data)
        table, wstarts, rounds = prepared
        mine = table.for_sender(self.rank)
        pending: list[Future | None] = [None, None]
        error: BaseException | None = None
        sieved = 0
        for rnd in range(rounds):
            slot = self._slots[rnd % 2]
            recv_specs, recv_buffer, job = None, None, None
            if self.is_aggregator:
                if pending[rnd % 2] is not None:
                    error = error or _exception(pending[rnd % 2])
                    pending[rnd % 2] = None
                window = self.my_agg * rounds + rnd
                window_start = int(wstarts[window])
                pieces = table.window_pieces(window)
                if pieces.length.size:
                    vectored = is_vectored(pieces)
                    runs = pieces.runs()
                    sieve = self.target.read_modify_write and sieve_worthwhile(self.hints.romio_ds_write, runs)
                    recv_buffer = slot.buffer(pieces.nbytes if vectored else self.buffer_size)
                    if vectored:
                        job = (write_vectored, self.target, recv_buffer, slot.scratch() if sieve else None, pieces,
                               sieve)
                    else:
                        if sieve and error is None:
                            try:  # the holes must be read before the exchange fills the rest
                                preread_span(self.target, recv_buffer, runs, window_start)
                            except OSError as exc:
                                error = exc
                        job = (write_placed, self.target, recv_buffer, runs, window_start, sieve)
                    sieved += bool(sieve)
                    recv_specs = self._aggregator_specs(pieces, vectored, window_start)
            base, send_specs = self._sender_specs(mine, rounds, rnd)
            self._alltoallw(data[base:], self._by_aggregator(send_specs), recv_buffer, recv_specs or {})
            if job is not None and error is None:
                pending[rnd % 2] = self._io_thread().submit(*job)
        for future in pending:
            if future is not None:
                error = error or _exception(future)
        self.last_plan = plan.with_sieved(sieved)
        self._raise_collectively(error, "write")
        return len(data)

    # -- collective read ----------------------------------------------------------------------
    def read(self, data: memoryview, offsets: np.ndarray, lengths: np.ndarray) -> None:
        """Collective: fill ``data`` from this rank's file extents (bytes past the end read as 0)."""
        prepared, plan = self._prepare(self.hints.cb_read, offsets, lengths)
        if prepared is None:
            self.last_plan = plan
            independent_read(self.target, data, offsets, lengths)
            return
        table, wstarts, rounds = prepared
        mine = table.for_sender(self.rank)
        error: BaseException | None = None
        sieved = 0

        def start_read(rnd: int):
            """Submit round ``rnd``'s read; returns (future, send buffer, send specs) or None."""
            if not self.is_aggregator or rnd >= rounds:
                return None
            window = self.my_agg * rounds + rnd
            window_start = int(wstarts[window])
            pieces = table.window_pieces(window)
            if pieces.length.size == 0:
                return None
            slot = self._slots[rnd % 2]
            vectored = is_vectored(pieces)
            runs = pieces.runs()
            sieve = sieve_worthwhile(self.hints.romio_ds_read, runs)
            if vectored:
                buffer = slot.buffer(pieces.nbytes)
                future = self._io_thread().submit(read_vectored, self.target, buffer,
                                                  slot.scratch() if sieve else None, pieces, sieve)
            else:
                buffer = slot.buffer(self.buffer_size)
                future = self._io_thread().submit(read_placed, self.target, buffer, runs, window_start, sieve)
            return future, buffer, self._aggregator_specs(pieces, vectored, window_start)

        upcoming = start_read(0)
        for rnd in range(rounds):
            current = upcoming
            send_buffer, send_specs = None, {}
            if current is not None:
                future, send_buffer, send_specs = current
                try:
                    sieved += bool(future.result())
                except OSError as exc:
                    error = error or exc
            upcoming = start_read(rnd + 1)  # prefetch the next round while this one is exchanged
            base, recv_specs = self._sender_specs(mine, rounds, rnd)
            # Reversed roles: aggregators send pieces out of the slot buffer, each rank receives
            # its bytes in place in the caller's buffer.
            self._alltoallw(send_buffer, send_specs, data[base:], self._by_aggregator(recv_specs))
        if upcoming is not None:
            try:
                upcoming[0].result()
            except OSError as exc:
                error = error or exc
        self.last_plan = plan.with_sieved(sieved)
        self._raise_collectively(error, "read")

    # -- MPI plumbing -------------------------------------------------------------------------
    def _by_aggregator(self, specs: list) -> dict:
        return {int(agg): spec for agg, spec in zip(self.aggregators.tolist(), specs) if spec[0]}

    def _alltoallw(self, first_buffer, first_specs: dict, second_buffer, second_specs: dict) -> None:
        """One Alltoallw. Writing: ranks send ``first`` (to aggregators), aggregators receive
        ``second`` (from ranks). Reading (``reverse``): aggregators send ``first``, ranks receive
        ``second``. Specs map a peer rank to ``(count, displacement, datatype, needs_free)``."""
        MPI = self.MPI
        P = self.size
        send = ([0] * P, [0] * P, [MPI.BYTE] * P)
        recv = ([0] * P, [0] * P, [MPI.BYTE] * P)
        to_free = []
        for (counts, displs, types), specs in ((send, first_specs), (recv, second_specs)):
            for peer, (count, displ, datatype, free) in specs.items():
                counts[peer], displs[peer], types[peer] = count, displ, datatype
                if free:
                    to_free.append(datatype)
        try:
            self.comm.Alltoallw([first_buffer if first_buffer is not None and len(first_buffer) else _EMPTY, *send],
                                [second_buffer if second_buffer is not None and len(second_buffer) else _EMPTY,
                                 *recv])
        finally:
            for datatype in to_free:
                datatype.Free()

    def _raise_collectively(self, error: BaseException | None, what: str) -> None:
        """Every rank raises when any rank failed, so no rank goes on as if the data were stored."""
        failed = self.comm.allgather(None if error is None else f"{type(error).__name__}: {error}")
        if error is not None:
            raise error
        bad = [(rank, message) for rank, message in enumerate(failed) if message is not None]
        if bad:
            rank, message = bad[0]
            raise OSError(errno.EIO, f"collective {what} of {self.target.url} failed on rank {rank}: {message}",
                          self.target.url)


def _exception(future: Future) -> BaseException | None:
    try:
        future.result()
    except OSError as exc:
        return exc
    return None
