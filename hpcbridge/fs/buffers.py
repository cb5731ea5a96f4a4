"""Fresh ``bytes`` objects that reads fill in place.

``pread`` returns ``bytes``; building them from a ``bytearray`` costs a second copy, and a large
``bytes`` costs a page fault per 4 KiB page on first touch: glibc serves every allocation over
32 MiB (its largest mmap threshold) with a fresh ``mmap``, and on this machine's VM a fault
costs about a microsecond, so ``os.pread`` of 64 MiB spent 60 of its 63 ms faulting (128 MiB
in 64 MiB calls, medians of 8; ``numpy.empty``, which advises huge pages, read it in 12.8 ms).

:func:`empty_bytes` makes an uninitialised ``bytes`` of the size wanted (as CPython's own
``os.pread`` does, before it reads into it) and returns it with a writable view of its storage,
so the read lands in the object returned; from :data:`HUGE` bytes up, the storage is advised
for transparent huge pages first (``madvise(MADV_HUGEPAGE)``: one fault per 2 MiB; the same
read took 12.7 ms). The object must not be shared, hashed or used as a key before it is
filled: until then only the caller and the view hold it.
"""

from __future__ import annotations

import ctypes
import functools
import sys

__all__ = ["empty_bytes", "bytes_of", "read_new_bytes", "HUGE", "SMALL"]

#: From this size up, a fresh buffer is advised for huge pages. Smaller ones mostly reuse
#: memory malloc already has (16 MiB: 7.7 ms per 128 MiB either way; 4 MiB: the advice cost
#: more than it saved, 5.5 against 4.5 ms).
HUGE = 16 << 20

#: Below this size a ``bytearray`` and one copy into ``bytes`` cost less than the ctypes calls
#: (47001 B: 0.85 against 1.7 us; 128 KiB: 2.4 against 1.7 us, and from there on glibc maps
#: fresh memory for the bytearray too: 256 KiB 175 against 1.8 us).
SMALL = 128 << 10

_MADV_HUGEPAGE = 14  # Linux
_HUGE_PAGE = 2 << 20


@functools.lru_cache(maxsize=None)
def _api():
    """``(PyBytes_FromStringAndSize, madvise or None)``, bound on first use (not at import)."""
    new = ctypes.pythonapi.PyBytes_FromStringAndSize
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
    madvise = None
    if sys.platform.startswith("linux"):
        madvise = ctypes.CDLL(None, use_errno=True).madvise
        madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        madvise.restype = ctypes.c_int
    return new, madvise


def empty_bytes(size: int) -> tuple[bytes, memoryview]:
    """``(data, view)``: an uninitialised ``bytes`` of ``size`` and a writable byte view of its
    storage. Fill all of it through ``view`` before ``data`` is used (the view keeps ``data``
    alive, but writes through it after that would change an object others may hold), then
    take the result with :func:`bytes_of`. Below :data:`SMALL` (or off CPython) ``data`` is a
    ``bytearray``, which :func:`bytes_of` copies."""
    if size < SMALL or sys.implementation.name != "cpython":
        buffer = bytearray(size)  # a copy at the end (see bytes_of)
        return buffer, memoryview(buffer)  # type: ignore[return-value]
    new, madvise = _api()
    data = new(None, size)
    address = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
    if madvise is not None and size >= HUGE:
        lo = -(-address // _HUGE_PAGE) * _HUGE_PAGE
        hi = (address + size) // _HUGE_PAGE * _HUGE_PAGE
        if hi > lo:
            madvise(lo, hi - lo, _MADV_HUGEPAGE)  # advice only: refused (no THP) is fine
    storage = (ctypes.c_char * size).from_address(address)
    # The view keeps the bytes alive (through the array it exports): a read still writing into
    # it after its caller let go of ``data`` (a timed-out call finishing late) cannot write into
    # freed memory, as with a bytearray.
    storage.data = data
    return data, memoryview(storage).cast("B")


def bytes_of(data, filled: int) -> bytes:
    """The first ``filled`` bytes of a buffer from :func:`empty_bytes`, as ``bytes`` (the
    object itself when all of it was filled)."""
    if filled == len(data) and type(data) is bytes:
        return data
    return bytes(memoryview(data)[:filled])


def read_new_bytes(size: int, fill) -> bytes:
    """A fresh ``bytes`` of up to ``size`` bytes that ``fill(view)`` reads into (it returns the
    count it filled): :func:`empty_bytes`, the read, then :func:`bytes_of`."""
    data, view = empty_bytes(size)
    return bytes_of(data, fill(view))
