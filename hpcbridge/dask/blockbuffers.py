"""Recycled memory for array blocks: a block read into memory that is already faulted in.

A Dask array task returns a fresh block (64 MiB by default) that a reduction reads once and
drops (blocks that are memory maps of a local file need no memory of their own:
:func:`hpcbridge.hdf5.map_region`; these are the blocks that must be read). Fresh memory of
that size comes from ``mmap``: the kernel zero-fills each page on its first touch, which costs
as much as reading the bytes from the page cache (here: reading 1 GiB from the page cache into
one reused buffer 0.10 s, into fresh 16 MiB arrays 0.15 s). So read tasks
take their output from :func:`empty`: when every array viewing a block is gone, its memory goes
back to a free list and backs the next block of the same size.

Safety: the array handed out is a view of the pooled memory through a ``memoryview``; every
view numpy derives from it (slices, reshapes, transposes, ``np.asarray``) keeps that array
alive, so its memory returns to the pool only once nothing can reach it (a ``weakref.finalize``
on it). The pool keeps at most :data:`KEEP_BYTES` of free memory per process; blocks smaller
than :data:`MIN_BYTES` are plain ``numpy.empty`` (malloc already reuses those).
"""

from __future__ import annotations

import math
import threading
import weakref

import numpy as np

__all__ = ["empty", "KEEP_BYTES", "MIN_BYTES", "pooled_bytes"]

#: Free memory the pool keeps per process (beyond it, returned blocks are freed).
KEEP_BYTES = 256 << 20
#: Blocks below this size are not pooled.
MIN_BYTES = 1 << 20

_lock = threading.Lock()
_free: dict[int, list[np.ndarray]] = {}
_free_bytes = 0


def empty(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` and ``dtype`` (as ``numpy.empty``),
    backed by recycled memory when the block is large enough to be worth it."""
    dtype = np.dtype(dtype)
    shape = tuple(int(n) for n in shape)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES or dtype.hasobject:
        return np.empty(shape, dtype)
    global _free_bytes
    with _lock:
        spare = _free.get(nbytes)
        raw = spare.pop() if spare else None
        if raw is not None:
            _free_bytes -= nbytes
    if raw is None:
        raw = np.empty(nbytes, np.uint8)
    # The memoryview makes ``owner`` the base of every array derived from it (numpy stops
    # collapsing bases at an array whose base is not an array); ``raw`` itself never leaves.
    owner = np.frombuffer(memoryview(raw), dtype)
    weakref.finalize(owner, _give_back, raw)
    return owner.reshape(shape)


def _give_back(raw: np.ndarray) -> None:
    global _free_bytes
    with _lock:
        if _free_bytes + raw.nbytes <= KEEP_BYTES:
            _free.setdefault(raw.nbytes, []).append(raw)
            _free_bytes += raw.nbytes


def pooled_bytes() -> int:
    """Free bytes the pool holds now."""
    with _lock:
        return _free_bytes
