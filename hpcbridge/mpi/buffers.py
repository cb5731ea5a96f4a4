"""Page-aligned buffers of the collective layer, reused from one open file to the next.

Reuse matters: a fresh 16 MiB buffer page-faults on first touch, and a job that opens a file
per checkpoint would pay that on every open. Anonymous mmaps are page-aligned, as ``O_DIRECT``
writes from them need.
"""

from __future__ import annotations

import mmap

import numpy as np

__all__ = ["take_buffer", "give_back"]

_SPARE: list[np.ndarray] = []  # buffers of closed files, reused by the next open
_MAX_SPARE = 6                 # two pipeline slots, two scratch, a direct write in flight and a stage


def take_buffer(nbytes: int) -> np.ndarray:
    """A page-aligned uint8 buffer of at least ``nbytes``: a spare one if any is large enough."""
    for i, spare in enumerate(_SPARE):
        if spare.size >= nbytes:
            return _SPARE.pop(i)
    return np.frombuffer(mmap.mmap(-1, max(nbytes, 1)), dtype=np.uint8)


def give_back(buffer: np.ndarray | None) -> None:
    """Keep ``buffer`` for a later :func:`take_buffer` (up to a few; the rest are freed)."""
    if buffer is not None and len(_SPARE) < _MAX_SPARE:
        _SPARE.append(buffer)
