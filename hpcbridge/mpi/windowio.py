"""An aggregator's I/O on one round window, and the independent (non-aggregated) path.

Two ways to put a window's pieces in file order:

* **vectored** (pieces of 4 KiB or more on average): each rank's pieces arrive back to back in a
  staging buffer (contiguous receives, which MPI moves with a single copy), and the kernel does
  the reordering: one ``pwritev``/``preadv`` per contiguous run, its iovecs pointing at the
  pieces in file order. No user-space reordering copy at all.
* **placed** (tiny pieces): MPI receives each rank's pieces straight into their file position in
  the round buffer through an hindexed datatype, and the aggregator writes whole runs. Per-piece
  iovecs would cost more Python than they save for millions of 8-byte elements.

Data sieving (ROMIO's name): where a window has holes no larger than its data, reads fetch the
whole span in one call (holes land in scratch), and writes read the holes back and rewrite the
span in one call — only where the backend opened the file read-write.
"""

from __future__ import annotations

import numpy as np

from ..fs.ranges import merge_ranges
from .plan import WindowPieces

__all__ = ["VECTOR_MIN_PIECE", "is_vectored", "sieve_worthwhile", "write_vectored", "read_vectored",
           "write_placed", "read_placed", "preread_span", "independent_write", "independent_read"]

#: Average piece size from which the vectored path is used.
VECTOR_MIN_PIECE = 4096


def is_vectored(pieces: WindowPieces) -> bool:
    """Vectored I/O for this window (see module docstring)?"""
    return pieces.length.size > 0 and pieces.nbytes >= VECTOR_MIN_PIECE * pieces.length.size


def sieve_worthwhile(setting: str, runs: tuple[np.ndarray, np.ndarray]) -> bool:
    """Data sieving on this window: ``enable``, ``disable``, or ``auto`` = holes no larger than the data."""
    if runs[0].size < 2 or setting == "disable":
        return False
    span = int(runs[0][-1] + runs[1][-1] - runs[0][0])
    data = int(runs[1].sum())
    return setting == "enable" or span - data <= data


def _run_bounds(offsets: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Indices where runs of file-ordered pieces start (each piece continuing the previous one
    stays in its run: the range planner's blocks, in order), with the number of pieces appended:
    run ``k`` is ``[b[k], b[k+1])``."""
    _, _, block_of = merge_ranges(offsets, ends - offsets, sort=False, return_blocks=True)
    return np.concatenate(([0], np.flatnonzero(block_of[1:] != block_of[:-1]) + 1, [offsets.size]))


def _whole_span(runs) -> tuple[np.ndarray, np.ndarray]:
    """The single run from the first run's start to the last run's end (data sieving)."""
    return runs[0][:1], np.array([runs[0][-1] + runs[1][-1] - runs[0][0]])


def _file_ordered(pieces: WindowPieces):
    order = pieces.file_order()
    return pieces.offset[order], pieces.length[order], pieces.staging[order]


def _iovecs(buffer: memoryview, positions: np.ndarray, lengths: np.ndarray) -> list:
    return [buffer[p:p + n] for p, n in zip(positions.tolist(), lengths.tolist())]


def _with_holes(views: list, offsets: np.ndarray, ends: np.ndarray, scratch: memoryview, base: int) -> list:
    """``views`` with a scratch slice inserted for every hole between consecutive pieces."""
    holes = _run_bounds(offsets, ends)[1:-1]
    if holes.size == 0:
        return views
    out = []
    previous = 0
    for k in holes.tolist():
        out.extend(views[previous:k])
        hole_start, hole_end = int(ends[k - 1]) - base, int(offsets[k]) - base
        out.append(scratch[hole_start:hole_end])
        previous = k
    out.extend(views[previous:])
    return out


def write_vectored(target, staging: memoryview, scratch: memoryview | None, pieces: WindowPieces,
                   sieve: bool) -> bool:
    """Write a window whose pieces sit in ``staging`` in receive order; returns True if sieved."""
    offsets, lengths, positions = _file_ordered(pieces)
    ends = offsets + lengths
    if offsets.size > 1 and np.any(offsets[1:] < ends[:-1]):
        # Two ranks wrote the same bytes: MPI leaves the outcome undefined; write piece by piece.
        for p, n, o in zip(pieces.staging.tolist(), pieces.length.tolist(), pieces.offset.tolist()):
            target.pwrite(staging[p:p + n], o)
        return False
    views = _iovecs(staging, positions, lengths)
    if sieve and scratch is not None:
        first, span = int(offsets[0]), int(ends[-1] - offsets[0])
        got = target.preadinto(scratch[:span], first)
        if got < span:  # past the end of file: holes are zeros
            scratch[got:span] = bytes(span - got)
        target.pwritev(_with_holes(views, offsets, ends, scratch, first), first)
        return True
    bounds = _run_bounds(offsets, ends)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        target.pwritev(views[a:b], int(offsets[a]))
    return False


def read_vectored(target, staging: memoryview, scratch: memoryview | None, pieces: WindowPieces,
                  sieve: bool) -> bool:
    """Fill ``staging`` (receive order) with a window's pieces; bytes past end of file become zeros."""
    offsets, lengths, positions = _file_ordered(pieces)
    ends = offsets + lengths
    if offsets.size > 1 and np.any(offsets[1:] < ends[:-1]):
        # Ranks reading the same bytes: iovecs cannot overlap, so read those pieces one by one.
        for p, n, o in zip(positions.tolist(), lengths.tolist(), offsets.tolist()):
            got = target.preadinto(staging[p:p + n], o)
            if got < n:
                staging[p + got:p + n] = bytes(n - got)
        return False
    views = _iovecs(staging, positions, lengths)
    if sieve and scratch is not None:
        first, span = int(offsets[0]), int(ends[-1] - offsets[0])
        got = target.preadv(_with_holes(views, offsets, ends, scratch, first), first)
        if got < span:
            _zero_from(staging, offsets, lengths, positions, first + got)
        return True
    bounds = _run_bounds(offsets, ends)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        run_start = int(offsets[a])
        got = target.preadv(views[a:b], run_start)
        if got < int(ends[b - 1]) - run_start:
            _zero_from(staging, offsets[a:b], lengths[a:b], positions[a:b], run_start + got)
    return False


def _zero_from(buffer: memoryview, offsets, lengths, positions, eof: int) -> None:
    """Zero the parts of pieces that lie at or past file offset ``eof``."""
    cut = np.clip(eof - offsets, 0, lengths)
    for p, c, n in zip(positions.tolist(), cut.tolist(), lengths.tolist()):
        if c < n:
            buffer[p + c:p + n] = bytes(n - c)


def preread_span(target, buffer: memoryview, runs, window_start: int) -> None:
    """Data sieving for placed writes: read the span of ``runs`` before the exchange fills it."""
    first = int(runs[0][0])
    span = int(runs[0][-1] + runs[1][-1]) - first
    start = first - window_start
    got = target.preadinto(buffer[start:start + span], first)
    if got < span:
        buffer[start + got:start + span] = bytes(span - got)


def write_placed(target, buffer: memoryview, runs, window_start: int, sieved: bool, direct: bool = False) -> None:
    """Write runs from a round buffer holding the window in file order (``direct``: O_DIRECT for
    their block-aligned parts; the buffer is page-aligned and windows start block-aligned)."""
    if sieved:
        runs = _whole_span(runs)
    pwrite = target.pwrite_direct if direct else target.pwrite
    for offset, length in zip(runs[0].tolist(), runs[1].tolist()):
        start = offset - window_start
        pwrite(buffer[start:start + length], offset)


def read_placed(target, buffer: memoryview, runs, window_start: int, sieve: bool) -> bool:
    """Read runs into a round buffer at their window positions (zeros past end of file)."""
    if sieve:
        runs = _whole_span(runs)
    for offset, length in zip(runs[0].tolist(), runs[1].tolist()):
        start = offset - window_start
        got = target.preadinto(buffer[start:start + length], offset)
        if got < length:
            buffer[start + got:start + length] = bytes(length - got)
    return sieve


def independent_write(target, data: memoryview, offsets: np.ndarray, lengths: np.ndarray,
                      direct: bool = False) -> None:
    """Each extent with one positional write (``direct``: O_DIRECT for its aligned middle)."""
    pwrite = target.pwrite_direct if direct else target.pwrite
    position = 0
    for offset, length in zip(offsets.tolist(), lengths.tolist()):
        pwrite(data[position:position + length], offset)
        position += length


def independent_read(target, data: memoryview, offsets: np.ndarray, lengths: np.ndarray,
                     zero_past_end: bool = True) -> None:
    """Each extent with one positional read; bytes past the end of file become zeros
    (``zero_past_end``), or are left as they were (an independent read: MPI returns the count
    and, as Open MPI does, leaves the rest of the caller's buffer alone)."""
    position = 0
    for offset, length in zip(offsets.tolist(), lengths.tolist()):
        part = data[position:position + length]
        got = target.preadinto(part, offset)
        if got < length and zero_past_end:
            part[got:] = bytes(length - got)
        position += length
