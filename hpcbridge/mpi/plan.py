"""Collective-I/O planning: file domains, round windows, and every rank's pieces of each window.

Everything here is pure numpy on the all-gathered extents, so every rank computes the same plan
without further communication.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..fs.ranges import merge_ranges

__all__ = ["CollectivePlan", "PieceTable", "SenderPieces", "file_domains", "round_windows", "split_at_windows",
           "union_extents"]


@dataclass(frozen=True)
class CollectivePlan:
    """What one collective call did (kept on the file as ``last_plan`` for tests and tuning).

    ``method`` is ``"aggregated"`` or ``"independent"``; ``reason`` says why.
    """

    method: str
    reason: str
    aggregators: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    domain_starts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    domain_ends: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    stripe_unit: int = 1
    buffer_size: int = 0
    rounds: int = 0
    sieved_windows: int = 0

    def with_sieved(self, windows: int) -> "CollectivePlan":
        """The plan with the number of data-sieved windows filled in."""
        return dataclasses.replace(self, sieved_windows=windows)

    def as_dict(self) -> dict:
        """A JSON-friendly summary."""
        return {"method": self.method, "reason": self.reason, "aggregators": self.aggregators.tolist(),
                "domains": list(zip(self.domain_starts.tolist(), self.domain_ends.tolist())),
                "stripe_unit": self.stripe_unit, "buffer_size": self.buffer_size, "rounds": self.rounds,
                "sieved_windows": self.sieved_windows}


def union_extents(offsets: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of possibly overlapping, unsorted extents as sorted disjoint runs."""
    return merge_ranges(offsets, lengths)


def file_domains(start: int, end: int, naggs: int, unit: int) -> tuple[np.ndarray, np.ndarray]:
    """Split ``[start, end)`` into ``naggs`` domains whose inner boundaries are multiples of ``unit``.

    Domains may be empty at the end when the range is small compared with ``naggs·unit``.
    """
    base = start - start % unit
    per = -(-(end - base) // naggs)
    per = max(unit, -(-per // unit) * unit)
    bounds = base + np.arange(naggs + 1, dtype=np.int64) * per
    bounds = np.clip(bounds, start, end)
    return bounds[:-1].copy(), bounds[1:].copy()


def round_windows(dstarts, dends, unit: int, buffer_size: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Windows ``(starts, ends)`` of shape (naggs, rounds): round ``i`` of domain ``k``.

    Window edges sit at ``aligned(domain start) + i·buffer_size``, so with a buffer size that is
    a multiple of the stripe unit every write of a round stays stripe-aligned.
    """
    base = dstarts - dstarts % unit
    lengths = dends - base
    rounds = int(max(1, (-(-lengths // buffer_size)).max())) if lengths.size else 0
    i = np.arange(rounds, dtype=np.int64)[None, :]
    ws = np.clip(base[:, None] + i * buffer_size, dstarts[:, None], dends[:, None])
    we = np.clip(base[:, None] + (i + 1) * buffer_size, dstarts[:, None], dends[:, None])
    return ws, we, rounds


def split_at_windows(offsets, lengths, wstarts, wends):
    """Cut extents at window edges: ``(window, offset, length, owner)`` per non-empty piece.

    ``wstarts``/``wends`` are flat, sorted by file position, and tile the accessed range (empty
    windows allowed); ``owner`` is the index of the extent a piece came from. Pieces keep the
    input order, so each rank's pieces stay in file order.
    """
    if offsets.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    ends = offsets + lengths
    first = np.searchsorted(wstarts, offsets, side="right") - 1
    last = np.searchsorted(wstarts, ends - 1, side="right") - 1
    counts = last - first + 1
    owner = np.repeat(np.arange(offsets.size), counts)
    step = np.arange(owner.size, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    window = first[owner] + step
    lo = np.maximum(offsets[owner], wstarts[window])
    hi = np.minimum(ends[owner], wends[window])
    keep = hi > lo
    return window[keep], lo[keep], (hi - lo)[keep], owner[keep]


@dataclass(frozen=True)
class WindowPieces:
    """The pieces every rank has in one window, in receive order (by rank, then file offset).

    ``staging[i]`` is where piece ``i`` sits when each rank's pieces are received back to back
    (contiguous receives); ``rank_counts``/``rank_displs`` are those receives per rank.
    """

    rank: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    staging: np.ndarray
    rank_counts: np.ndarray
    rank_displs: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.length.sum())

    def file_order(self) -> np.ndarray:
        """Indices of the pieces sorted by file offset."""
        return np.argsort(self.offset, kind="stable")

    def runs(self) -> tuple[np.ndarray, np.ndarray]:
        """Disjoint sorted runs covered by the pieces."""
        return union_extents(self.offset, self.length)


class PieceTable:
    """Every rank's extents cut at the round windows, indexed by window and by rank."""

    def __init__(self, rank_of, offsets, lengths, memory, wstarts, wends, nranks: int):
        window, off, length, owner = split_at_windows(offsets, lengths, wstarts, wends)
        rank = rank_of[owner]
        mem = memory[owner] + (off - offsets[owner])
        order = np.lexsort((off, rank, window))
        self.window, self.rank = window[order], rank[order]
        self.offset, self.length, self.memory = off[order], length[order], mem[order]
        self.nranks = nranks

    def _slice(self, window: int) -> tuple[int, int]:
        return (int(np.searchsorted(self.window, window, side="left")),
                int(np.searchsorted(self.window, window, side="right")))

    def window_pieces(self, window: int) -> WindowPieces:
        """All ranks' pieces in ``window``."""
        a, b = self._slice(window)
        rank, length = self.rank[a:b], self.length[a:b]
        staging = np.cumsum(length) - length
        counts = np.bincount(rank, weights=length, minlength=self.nranks).astype(np.int64)
        displs = np.cumsum(counts) - counts
        return WindowPieces(rank, self.offset[a:b], length, staging, counts, displs)

    def for_sender(self, rank: int) -> "SenderPieces":
        """The pieces of one rank, to find its slice of the buffer for each window."""
        mask = self.rank == rank
        return SenderPieces(self.window[mask], self.length[mask], self.memory[mask])


class SenderPieces:
    """One rank's pieces by window: its data for a window is one contiguous slice of its buffer
    (the rank's stream is in file order, and so are the windows)."""

    def __init__(self, window, length, memory):
        order = np.argsort(window, kind="stable")
        self.window, self.length, self.memory = window[order], length[order], memory[order]
        self._cumulative = np.concatenate(([0], np.cumsum(self.length))).astype(np.int64)

    def span(self, window: int) -> tuple[int, int]:
        """``(start, nbytes)`` of this rank's data for ``window`` in its buffer."""
        a = int(np.searchsorted(self.window, window, side="left"))
        b = int(np.searchsorted(self.window, window, side="right"))
        if a == b:
            return 0, 0
        return int(self.memory[a]), int(self._cumulative[b] - self._cumulative[a])
