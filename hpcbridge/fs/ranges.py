"""One range planner: byte ranges merged into the extents (or reads) that cover them.

Every layer that turns many ``(offset, length)`` ranges into fewer, larger accesses uses
:func:`merge_ranges`: ``FileSystem.read_ranges`` (one read per merged block), the MPI layer's
file views (a flattened datatype's extents, in datatype order) and its collective plans (the
union of every rank's pieces), and the PLFS reader (the pieces of a read, per writer's log).
As fsspec's ``merge_offset_ranges``, ranges closer than ``max_gap`` are read together, and
``max_block`` bounds one read.
"""

from __future__ import annotations

import numpy as np

__all__ = ["merge_ranges", "merge_few_ranges", "FEW"]

#: Up to this many ranges given as Python sequences, :func:`merge_ranges` plans in plain Python
#: (:func:`merge_few_ranges`): numpy's per-call costs, ~20 us, outweigh the work, and a PLFS
#: read of a few pieces plans on every call (128 MiB read in 256 KiB calls: 55 ms).
FEW = 32


def merge_few_ranges(offsets, lengths, *, max_gap: int = 0, keys=None) -> tuple[list, list, list]:
    """:func:`merge_ranges` with ``sort=True`` and no ``max_block``, for a few ranges, in plain
    Python: ``(starts, lengths, block of each range)`` as lists (same rules, same order)."""
    n = len(offsets)
    if keys is None:
        order = sorted((i for i in range(n) if lengths[i] > 0), key=lambda i: (offsets[i], lengths[i]))
    else:
        order = sorted((i for i in range(n) if lengths[i] > 0), key=lambda i: (keys[i], offsets[i], lengths[i]))
    starts, block_lengths, block_of = [], [], [-1] * n
    reach = key = None
    for i in order:
        start, end = offsets[i], offsets[i] + lengths[i]
        if starts and (keys is None or keys[i] == key) and start <= reach + max_gap:
            reach = max(reach, end)
        else:
            if starts:
                block_lengths.append(reach - starts[-1])
            starts.append(start)
            reach = end
            key = None if keys is None else keys[i]
        block_of[i] = len(starts) - 1
    if starts:
        block_lengths.append(reach - starts[-1])
    return starts, block_lengths, block_of


def merge_ranges(offsets, lengths, *, max_gap: int = 0, max_block: int | None = None, sort: bool = True,
                 return_blocks: bool = False, keys=None):
    """Merge byte ranges ``(offsets[i], lengths[i])``; empty ranges are dropped.

    ``keys`` (fsspec's ``paths``): integers naming the file (or log) each range is in; ranges
    merge only with ranges of the same key, and sorting orders by key first.

    ``sort=True``: ranges in any order, overlapping or not; the result is sorted and its
    blocks are disjoint unless ``max_block`` cut an overlapping cluster. Two ranges share a block
    when the second starts at most ``max_gap`` bytes after the end of what the block covers so
    far, and (with ``max_block``) extending the block by it would not make it longer than
    ``max_block`` bytes (a range inside the block always joins; a single longer range is still
    one block). These are fsspec's ``merge_offset_ranges`` rules for one file.

    ``sort=False``: order is kept (a datatype's extents, whose order is the data's); only a range
    that starts 0..``max_gap`` bytes after the previous one ends joins its block.

    Returns ``(starts, lengths)`` as int64 arrays, and with ``return_blocks`` also the block of
    each input range (``-1`` for an empty one).
    """
    if (sort and max_block is None and max_gap >= 0 and isinstance(offsets, (list, tuple)) and len(offsets) <= FEW
            and isinstance(lengths, (list, tuple)) and len(lengths) == len(offsets)
            and (keys is None or (isinstance(keys, (list, tuple)) and len(keys) == len(offsets)))):
        starts, block_lengths, block_of = merge_few_ranges(offsets, lengths, max_gap=max_gap, keys=keys)
        result = (np.array(starts, dtype=np.int64), np.array(block_lengths, dtype=np.int64))
        return result + (np.array(block_of, dtype=np.int64),) if return_blocks else result
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1)
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
    if offsets.shape != lengths.shape:
        raise ValueError(f"{offsets.size} offsets but {lengths.size} lengths")
    if max_gap < 0 or (max_block is not None and max_block <= 0):
        raise ValueError(f"max_gap must be >= 0 and max_block > 0, got {max_gap} and {max_block}")
    if keys is not None:
        keys = np.asarray(keys).reshape(-1)
        if keys.shape != offsets.shape:
            raise ValueError(f"{offsets.size} offsets but {keys.size} keys")
    kept = np.flatnonzero(lengths > 0)
    if sort:  # by start, then end (as fsspec), so a nested range follows the one holding it
        order = (lengths[kept], offsets[kept]) if keys is None else (lengths[kept], offsets[kept], keys[kept])
        kept = kept[np.lexsort(order)]
    starts, ends = offsets[kept], offsets[kept] + lengths[kept]
    n = starts.size
    new = np.ones(n, dtype=bool)
    other_key = None
    if keys is not None and n > 1:
        k = keys[kept]
        other_key = np.flatnonzero(k[1:] != k[:-1]) + 1  # where a key's ranges begin (but the first)
    if sort:
        if other_key is None:
            reach = np.maximum.accumulate(ends)
        else:  # the running maximum restarts with every key
            reach = np.empty_like(ends)
            bounds = [0, *other_key.tolist(), n]
            for a, b in zip(bounds[:-1], bounds[1:]):
                np.maximum.accumulate(ends[a:b], out=reach[a:b])
        np.greater(starts[1:], reach[:-1] + max_gap, out=new[1:])
    else:
        reach = ends
        gap = starts[1:] - ends[:-1]
        new[1:] = (gap < 0) | (gap > max_gap)
    if other_key is not None:
        new[other_key] = True
    if max_block is not None and n > 1:
        # Whether a range extends its block too far depends on where the block began: one
        # pass in order. Only a range that extends the block is cut, so (sorted) a block's
        # reach stays the running maximum of the ends and the gap test above still holds.
        block_start = block_reach = 0
        for i in range(n):
            start, end = int(starts[i]), int(ends[i])
            if i and not new[i] and end > block_reach and end - block_start > max_block:
                new[i] = True
            if new[i]:
                block_start, block_reach = start, end
            else:
                block_reach = max(block_reach, end)
    first = np.flatnonzero(new)
    last = np.append(first[1:], n) - 1 if n else first
    block_starts = starts[first]
    block_lengths = (reach[last] if sort else ends[last]) - block_starts
    if not return_blocks:
        return block_starts, block_lengths
    block_of = np.full(offsets.size, -1, dtype=np.int64)
    block_of[kept] = np.cumsum(new) - 1
    return block_starts, block_lengths, block_of
