"""Two-phase collective I/O (ROMIO's algorithm, with the known weaknesses avoided).

Phase one exchanges data so each aggregator holds a contiguous *file domain*; phase two has
each aggregator write (or read) its domain in large pieces. Steps of one collective call:

1. Ranks agree on a plan (``Exchanger._prepare``): every rank's file extents are all-gathered as
   one int64 array (no per-extent Python objects), and every rank computes the same plan with
   numpy. Ranks whose pieces are all large write them directly while the others agree.
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
import functools
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from .agree import agree
from .behind import WriteBehind
from .buffers import give_back, take_buffer
from .plan import CollectivePlan, PieceTable, WindowPieces, file_domains, round_windows
from .windowio import (independent_read, independent_write, is_vectored, preread_span, read_placed, read_vectored,
                       sieve_worthwhile, write_placed, write_vectored)

__all__ = ["Exchanger"]

_INT_MAX = (1 << 31) - 1
#: With direct_write, pieces from this size on are written directly by their owner.
DIRECT_LARGE_PIECE = 1 << 20
_EMPTY = bytearray(1)
#: cb_write_behind: bytes staged per rank before the ranks flush, in cb_buffer_size units.
STAGE_ROUNDS = 4


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


@functools.lru_cache(maxsize=64)
def _independent_plan(reason: str) -> CollectivePlan:
    """The plan of a call whose ranks all wrote (or read) on their own: immutable, so one per
    reason is shared (building it, with its empty arrays, cost 6 us per per-object call)."""
    return CollectivePlan("independent", reason)


class _Slot:
    """One of the two pipeline slots of an aggregator: round buffer (or staging) and sieve scratch."""

    def __init__(self, size: int):
        self.size = size
        self._buffer: np.ndarray | None = None
        self._scratch: np.ndarray | None = None

    def buffer(self, nbytes: int) -> memoryview:
        # Overlapping pieces (several ranks reading one header) can stage more than a window.
        if self._buffer is None or self._buffer.size < nbytes:
            give_back(self._buffer)
            self._buffer = take_buffer(max(self.size, nbytes))
        return memoryview(self._buffer)

    def scratch(self) -> memoryview:
        if self._scratch is None:
            self._scratch = take_buffer(self.size)
        return memoryview(self._scratch)

    def release(self) -> None:
        give_back(self._buffer)
        give_back(self._scratch)
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
        # _prepare's agreement buffers: this rank's five integers and every rank's.
        self._heads = (np.empty(5, dtype=np.int64), np.empty((self.size, 5), dtype=np.int64))
        self._pool: ThreadPoolExecutor | None = None
        self.last_plan: CollectivePlan | None = None
        # O_DIRECT for aligned writes where asked and possible (a local POSIX file).
        self.direct = bool(hints.direct_write) and target.mode.write and target.enable_direct()
        self._direct_in_flight: list[tuple[Future, np.ndarray]] = []  # direct writes still in flight
        # Collective writes staged across calls (cb_write_behind), written together later in
        # STAGE_ROUNDS rounds per aggregator and rank: one round per flush left the pipeline
        # (exchange round k+1 while writing round k) no depth (measured 1.07-1.14 GB/s against
        # 1.41-1.67 with 4 rounds, LANL 47001 B per-object calls, direct_write).
        self.stage = (WriteBehind(comm, STAGE_ROUNDS * self.buffer_size)
                      if hints.cb_write_behind and target.mode.write else None)

    def _io_thread(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hpcbridge-mpi-io")
        return self._pool

    # -- asynchronous direct writes (direct_write) ---------------------------------------------
    def _write_direct_async(self, data: memoryview, offsets: np.ndarray, lengths: np.ndarray) -> None:
        """Copy this rank's large pieces into an aligned buffer and let the I/O thread write them
        with O_DIRECT, so the rank goes on to its next call while the device works (at most two
        writes in flight). Errors surface at the next :meth:`drain` (sync, close, any read)."""
        nbytes = len(data)
        if nbytes > self.buffer_size:
            independent_write(self.target, data, offsets, lengths, direct=True)
            return
        while len(self._direct_in_flight) >= 2:
            self._finish_direct_write(*self._direct_in_flight.pop(0))
        # One extent: place it at the same offset modulo the alignment as in the file, so its
        # aligned middle needs no second copy.
        shift = int(offsets[0]) % 4096 if offsets.size == 1 else 0
        buffer = take_buffer(shift + nbytes)
        buffer[shift:shift + nbytes] = np.frombuffer(data, dtype=np.uint8)
        view = memoryview(buffer)[shift:shift + nbytes]
        future = self._io_thread().submit(independent_write, self.target, view, offsets, lengths, True)
        self._direct_in_flight.append((future, buffer))

    @staticmethod
    def _finish_direct_write(future: Future, buffer: np.ndarray) -> None:
        try:
            future.result()
        finally:
            give_back(buffer)

    def drain(self) -> None:
        """This rank's own pending writes reach the file, in call order: the direct writes in
        flight, then its stage of collective writes (cb_write_behind), written by the rank alone.
        Before any independent access, so a rank reads its own writes and its later writes land
        after its earlier ones. Raises the first error of a write that failed."""
        error = None
        while self._direct_in_flight:
            try:
                self._finish_direct_write(*self._direct_in_flight.pop(0))
            except OSError as exc:
                error = error or exc
        if error is not None:
            raise error
        if self.stage is not None and self.stage.nbytes:
            independent_write(self.target, *self.stage.take(collective=False), self.direct)

    def close(self) -> None:
        """Collective: write what is staged, finish the direct writes in flight, stop the I/O thread, drop buffers."""
        try:
            self.flush_staged()
        finally:
            try:
                if self.stage is not None:
                    self.stage.close()
                self.drain()
            finally:
                self._close_pool()

    # -- write-behind across calls (cb_write_behind) ------------------------------------------
    def flush_staged(self) -> None:
        """Collective: every rank writes its staged collective writes, aggregated as one call."""
        if self.stage is not None:
            self._write_now(*self.stage.take(collective=True))

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for slot in self._slots:
            slot.release()

    # -- planning -----------------------------------------------------------------------------
    def _prepare(self, setting: str, offsets: np.ndarray, lengths: np.ndarray, direct,
                 arg_error: BaseException | None = None):
        """Agree on a plan; returns ``(prepared or None, plan, error of the direct I/O or None)``.

        ``direct()`` does this rank's own I/O of its extents, independently. Under ``auto`` a
        rank whose pieces are all at least a stripe unit runs it *while* the ranks agree (a
        non-blocking ``Iallgather`` of four integers per rank), so per-transfer collective calls
        cost little more than independent ones; those ranks then take no part in aggregation,
        which covers only the small pieces of the others. When every rank has at most one extent
        the gathered integers carry all extents; otherwise an ``Allgatherv`` of the aggregated
        ranks' extents follows, as one int64 array. ``arg_error``: this rank's arguments were
        bad (it has no extents); a fifth integer tells every rank, and every rank raises it
        (:func:`hpcbridge.mpi.agree.agree`) instead of planning.
        """
        if setting == "disable":
            # Every rank passed the same hints (checked at open): no need to agree on skipping.
            return None, _independent_plan("cb disabled by hint"), self._run(direct)
        # With O_DIRECT a piece is large when it is worth a direct write of its own (1 MiB);
        # smaller ones are better aggregated into stripe-aligned windows first. (Buffered
        # flushes of a write-behind stage keep this rule too: measured with 47001-byte pieces
        # and fsync, aggregating them ran at 0.68x of writing them independently.)
        threshold = max(self.unit, DIRECT_LARGE_PIECE) if self.direct else self.unit
        # Per-transfer collective calls (a checkpoint of small objects) run this once per
        # object: the tiny head arrays are reused and read back as Python ints, where numpy
        # calls on five-element arrays had cost more than the write itself.
        n = offsets.size
        shortest = int(lengths[0]) if n == 1 else (int(lengths.min()) if n else 0)
        large = n == 0 or (setting == "auto" and shortest >= threshold)
        head, heads = self._heads
        head[:] = (n, int(large), int(offsets[0]) if n else 0, int(lengths[0]) if n else 0,
                   int(arg_error is not None))
        request = self.comm.Iallgather(head, heads)
        error = self._run(direct) if large and n and arg_error is None else None
        request.Wait()
        rows = heads.tolist()
        if any(row[4] for row in rows):
            agree(self.comm, arg_error)  # raises on every rank
        if all(row[1] == 1 or row[0] == 0 for row in rows):  # every rank did its own I/O, or had none
            reason = ("no data" if not any(row[0] for row in rows) else
                      f"every piece is at least {threshold} bytes (stripe unit {self.unit})")
            return None, _independent_plan(reason), error
        counts = np.where(heads[:, 1] == 1, 0, heads[:, 0])  # ranks that did their own I/O drop out
        rank_of = np.repeat(np.arange(self.size, dtype=np.int64), counts)
        if counts.max() <= 1:
            has = counts > 0
            all_off, all_len = heads[has, 2].copy(), heads[has, 3].copy()
            memory = np.zeros(all_off.size, dtype=np.int64)
        else:
            mine = 0 if large else offsets.size
            send = np.empty((mine, 2), dtype=np.int64)
            send[:, 0], send[:, 1] = offsets[:mine], lengths[:mine]
            recv = np.empty((int(counts.sum()), 2), dtype=np.int64)
            displs = np.cumsum(counts) - counts
            self.comm.Allgatherv(send, [recv, (counts * 2).tolist(), (displs * 2).tolist(), self.MPI.INT64_T])
            all_off, all_len = recv[:, 0].copy(), recv[:, 1].copy()
            cumulative = np.concatenate(([0], np.cumsum(all_len))).astype(np.int64)
            memory = cumulative[:-1] - np.repeat(cumulative[displs], counts)
        keep = all_len > 0
        start, end = int(all_off[keep].min()), int((all_off + all_len)[keep].max())
        dstarts, dends = file_domains(start, end, self.aggregators.size, self.unit)
        ws, we, rounds = round_windows(dstarts, dends, self.unit, self.buffer_size)
        table = PieceTable(rank_of, all_off, all_len, memory, ws.reshape(-1), we.reshape(-1), self.size)
        reason = "cb enabled by hint" if setting == "enable" else \
            f"pieces smaller than the stripe unit ({self.unit} bytes)"
        plan = CollectivePlan("aggregated", reason, self.aggregators, dstarts, dends, self.unit,
                              self.buffer_size, rounds)
        return (table, ws.reshape(-1), rounds), plan, error

    @staticmethod
    def _run(direct) -> OSError | None:
        try:
            direct()
        except OSError as exc:
            return exc
        return None

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
    @property
    def agrees_in_plan(self) -> bool:
        """True when a collective write's argument check can ride on the plan's ``Iallgather``
        (:meth:`write` with ``arg_error``) instead of an agreement of its own: every call then
        agrees on a plan (no write-behind stage, aggregation not disabled)."""
        return self.stage is None and self.hints.cb_write != "disable"

    def write(self, data: memoryview, offsets: np.ndarray, lengths: np.ndarray,
              arg_error: BaseException | None = None) -> int:
        """Collective: write ``data`` (this rank's bytes, in stream order) to its file extents.

        ``arg_error`` (only where :attr:`agrees_in_plan`): this rank's arguments were bad; the
        ranks learn it from the plan's agreement and every rank raises it (ranks whose own
        pieces go straight to the file may have written them: MPI leaves a file undefined after
        an erroneous call)."""
        if self.stage is not None:
            due = self.stage.stage(data, offsets, lengths)
            if due == "all":
                self.flush_staged()
            elif due == "own":
                self.drain()
            return len(data)
        return self._write_now(data, offsets, lengths, arg_error)

    def _write_now(self, data: memoryview, offsets: np.ndarray, lengths: np.ndarray,
                   arg_error: BaseException | None = None) -> int:
        prepared, plan, error = self._prepare(self.hints.cb_write, offsets, lengths,
                                              lambda: self._write_direct_async(data, offsets, lengths) if self.direct
                                              else independent_write(self.target, data, offsets, lengths), arg_error)
        if prepared is None:
            # Nothing collective follows: each rank reports its own errors, as MPI does.
            self.last_plan = plan
            if error is not None:
                raise error
            return len(data)
        table, wstarts, rounds = prepared
        mine = table.for_sender(self.rank)
        pending: list[Future | None] = [None, None]
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
                    # O_DIRECT needs the window in file order in an aligned buffer: placed mode.
                    vectored = is_vectored(pieces) and not self.direct
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
                        job = (write_placed, self.target, recv_buffer, runs, window_start, sieve, self.direct)
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
        self.flush_staged()
        self.drain()  # a rank reads its own earlier writes
        prepared, plan, error = self._prepare(self.hints.cb_read, offsets, lengths,
                                              lambda: independent_read(self.target, data, offsets, lengths))
        if prepared is None:
            self.last_plan = plan
            if error is not None:
                raise error
            return
        table, wstarts, rounds = prepared
        mine = table.for_sender(self.rank)
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
