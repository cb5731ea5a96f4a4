"""Buffer arguments of ``hpcbridge.mpi.File`` calls, as mpi4py accepts them.

A buffer is any object exporting the buffer protocol (bytes, bytearray, memoryview, numpy
array), or an mpi4py *message*: ``[buf, datatype]``, ``[buf, count, datatype]``,
``[buf, (count, displ), datatype]`` or ``[buf, count, displ, datatype]`` (lists or tuples). The
datatype says which bytes of ``buf`` take part: ``count`` copies of it from ``displ`` extents in
(``count`` defaults to as many whole copies as fit). Datatypes with holes in memory (a vector,
say) are packed for writes and unpacked after reads, with numpy.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Message", "message"]


class Message:
    """The bytes a call moves: ``data`` (flat, C-contiguous) and, for reads into a datatype with
    holes, ``finish()`` which scatters what was read into the caller's buffer."""

    __slots__ = ("data", "_target", "_index")

    def __init__(self, data: memoryview, target: np.ndarray | None = None, index: np.ndarray | None = None):
        self.data = data
        self._target = target
        self._index = index

    @property
    def nbytes(self) -> int:
        """Bytes the message moves (the length of its contiguous staging buffer)."""
        return len(self.data)

    def finish(self, count: int | None = None) -> None:
        """After a read: place the bytes read (the first ``count``) where the datatype says."""
        if self._index is not None:
            n = len(self.data) if count is None else count
            self._target[self._index[:n]] = np.frombuffer(self.data, dtype=np.uint8)[:n]


def _is_datatype(obj) -> bool:
    return hasattr(obj, "Get_envelope") and hasattr(obj, "Get_extent")


def _flat_bytes(buf, writable: bool) -> memoryview:
    try:
        view = memoryview(buf)
    except TypeError:
        kind = "a writable buffer (bytearray, memoryview, numpy array)" if writable else \
            "a buffer (bytes, bytearray, memoryview, numpy array)"
        raise TypeError(f"expected {kind} or an mpi4py message [buf, count, datatype], "
                        f"got {type(buf).__name__}") from None
    if writable and view.readonly:
        raise TypeError(f"cannot read into a read-only buffer ({type(buf).__name__})")
    if not view.c_contiguous and view.f_contiguous:
        # Fortran order is contiguous too: MPI (and mpi4py) move its bytes in memory order.
        view = memoryview(np.asarray(view).T)
    if not view.c_contiguous:
        if writable:
            raise ValueError("read buffers must be contiguous (use numpy.ascontiguousarray)")
        view = memoryview(np.ascontiguousarray(np.asarray(buf)))  # MPI would pack it too: one copy
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def message(spec, writable: bool) -> Message:
    """Decode a buffer argument (see the module docstring). ``writable``: the call reads into it.

    Raises
    ------
    TypeError
        Not a buffer, a read-only buffer to read into, or a malformed message.
    ValueError
        Count or displacement negative or past the end of the buffer.
    """
    if isinstance(spec, (list, tuple)) and 2 <= len(spec) <= 4 and _is_datatype(spec[-1]):
        buf, datatype = spec[0], spec[-1]
        middle = list(spec[1:-1])
        if len(middle) == 1 and isinstance(middle[0], (list, tuple)):
            middle = list(middle[0])
        count, displ = (middle + [None, None])[:2] if middle else (None, None)
        for name, value in (("count", count), ("displacement", displ)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
                raise TypeError(f"message {name} must be an integer, got {type(value).__name__}")
        return _typed(_flat_bytes(buf, writable), datatype, count, 0 if displ is None else int(displ), writable)
    if isinstance(spec, (list, tuple)) and spec and any(_is_datatype(x) for x in spec):
        raise TypeError("a message is [buf, datatype], [buf, count, datatype], [buf, (count, displ), datatype] "
                        f"or [buf, count, displ, datatype]; got {len(spec)} items")
    return Message(_flat_bytes(spec, writable))


def _typed(raw: memoryview, datatype, count, displ: int, writable: bool) -> Message:
    lb, extent = datatype.Get_extent()
    size = datatype.Get_size()
    if displ < 0:
        raise ValueError(f"message displacement must be non-negative, got {displ}")
    if extent <= 0 and size > 0:
        raise ValueError(f"message datatype has extent {extent}")
    start = displ * extent
    if count is None:
        if extent > 0 and len(raw) % extent:  # as mpi4py: never a silently shorter message
            raise ValueError(f"message: cannot infer count, buffer length {len(raw)} is not a multiple of "
                             f"datatype extent {extent} (lb:{lb}, ub:{lb + extent})")
        count = max(0, (len(raw) - start) // extent) if extent > 0 else 0
    count = int(count)
    if count < 0:
        raise ValueError(f"message count must be non-negative, got {count}")
    true_lb, true_extent = datatype.Get_true_extent()
    if count and (start + true_lb < 0 or start + (count - 1) * extent + true_lb + true_extent > len(raw)):
        raise ValueError(f"message of {count} x {size}-byte elements (extent {extent}) from element {displ} "
                         f"does not fit a buffer of {len(raw)} bytes")
    if size == extent and true_lb == 0 and true_extent == size:  # dense: a slice, no copy
        return Message(raw[start:start + count * size])
    from .datatypes import flatten_datatype

    flat = flatten_datatype(datatype)
    offs, lens = flat.offsets, flat.lengths
    within = np.concatenate([np.arange(o, o + n, dtype=np.int64) for o, n in zip(offs.tolist(), lens.tolist())]) \
        if offs.size else np.zeros(0, dtype=np.int64)
    index = (start + np.arange(count, dtype=np.int64)[:, None] * extent + within[None, :]).reshape(-1)
    target = np.frombuffer(raw, dtype=np.uint8)
    if writable:
        scratch = np.zeros(index.size, dtype=np.uint8)
        return Message(memoryview(scratch), target, index)
    return Message(memoryview(np.ascontiguousarray(target[index])))
