"""Flatten an MPI derived datatype into byte extents, as numpy arrays.

A file view's filetype says which bytes of each tile the process accesses. ROMIO flattens it
into an ``(offset, length)`` list once per view; so do we, reading the type's construction
back with ``Get_envelope``/``Get_contents`` (the MPI introspection calls that work for any
datatype, whoever built it) and composing each level with numpy broadcasting, so a vector of a
million blocks is a few array operations rather than a million Python tuples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fs.ranges import merge_ranges

__all__ = ["Flattened", "flatten_datatype", "extents_filetype", "merge_extents"]


@dataclass(frozen=True)
class Flattened:
    """A datatype's typemap as byte extents.

    ``offsets``/``lengths`` (int64) list the bytes the type touches, in typemap order, relative
    to the type's origin; ``lb`` and ``extent`` are the type's lower bound and extent (the step
    between consecutive copies, what tiles a file view).
    """

    offsets: np.ndarray
    lengths: np.ndarray
    lb: int
    extent: int

    @property
    def size(self) -> int:
        """Bytes of data in one copy of the type."""
        return int(self.lengths.sum())


def merge_extents(offsets: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Join extents that continue one another (``off[i] + len[i] == off[i+1]``), keeping their
    order (the data's); drop empty ones."""
    return merge_ranges(offsets, lengths, sort=False)


def _repeat(child: tuple[np.ndarray, np.ndarray], positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Copies of ``child`` extents placed at each of ``positions`` (in that order)."""
    offs, lens = child
    positions = np.asarray(positions, dtype=np.int64).reshape(-1)
    return ((positions[:, None] + offs[None, :]).reshape(-1), np.broadcast_to(lens, (positions.size, lens.size)).reshape(-1))


def _blocks(displacements, blocklengths, step: int) -> np.ndarray:
    """Positions of every element of blocks ``(displacement, blocklength)`` with element step ``step``."""
    displacements = np.asarray(displacements, dtype=np.int64)
    blocklengths = np.asarray(blocklengths, dtype=np.int64)
    total = int(blocklengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    block_of = np.repeat(np.arange(displacements.size), blocklengths)
    first = np.cumsum(blocklengths) - blocklengths
    within = np.arange(total, dtype=np.int64) - first[block_of]
    return displacements[block_of] + within * step


def _place(child, displacements, blocklengths, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Blocks of ``blocklengths`` consecutive copies of ``child`` at ``displacements``.

    A dense child (its bytes fill its extent) makes each block one extent, so a vector of
    47001-byte blocks costs one array entry per block, not one per byte.
    """
    offs, lens = child
    displacements = np.asarray(displacements, dtype=np.int64).reshape(-1)
    blocklengths = np.broadcast_to(np.asarray(blocklengths, dtype=np.int64), displacements.shape)
    if offs.size == 1 and offs[0] == 0 and lens[0] == step:
        return displacements.copy(), blocklengths * step
    return _repeat(child, _blocks(displacements, blocklengths, step))


def _subarray(child, sizes, subsizes, starts, order, element_extent: int) -> tuple[np.ndarray, np.ndarray]:
    sizes, subsizes, starts = (np.asarray(a, dtype=np.int64) for a in (sizes, subsizes, starts))
    if np.any(subsizes < 0) or np.any(starts < 0) or np.any(starts + subsizes > sizes):
        raise ValueError(f"subarray out of range: sizes {sizes.tolist()}, subsizes {subsizes.tolist()}, "
                         f"starts {starts.tolist()}")
    indices = [start + np.arange(n, dtype=np.int64) for start, n in zip(starts.tolist(), subsizes.tolist())]
    return _grid(child, sizes, indices, order, element_extent)


def _grid(child, sizes, indices, order, element_extent: int) -> tuple[np.ndarray, np.ndarray]:
    """The elements of an array of ``sizes`` whose index along dimension ``d`` is in
    ``indices[d]`` (increasing), in array order (``order`` 0: C, else Fortran): what subarray and
    darray types select."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if order != 0:  # Fortran order: the first dimension varies fastest
        sizes, indices = sizes[::-1], indices[::-1]
    strides = np.ones(sizes.size, dtype=np.int64)
    if sizes.size > 1:
        strides[:-1] = np.cumprod(sizes[::-1])[::-1][1:]
    rows = np.zeros(1, dtype=np.int64)
    for dim in range(sizes.size - 1):  # one numpy op per outer dimension, not per element
        rows = (rows[:, None] + indices[dim][None, :] * strides[dim]).reshape(-1)
    # Along the last (fastest) dimension, runs of consecutive indices are runs of elements.
    last = indices[-1]
    breaks = np.flatnonzero(np.diff(last) != 1) + 1
    run_starts = last[np.concatenate(([0], breaks))] if last.size else last
    run_lengths = np.diff(np.concatenate(([0], breaks, [last.size]))) if last.size else last
    displacements = (rows[:, None] + run_starts[None, :]).reshape(-1) * element_extent
    blocklengths = np.broadcast_to(run_lengths, (rows.size, run_lengths.size)).reshape(-1)
    return _place(child, displacements, blocklengths, element_extent)


def _darray_indices(gsize: int, distrib: int, darg: int, psize: int, coord: int, MPI) -> np.ndarray:
    """Indices of one dimension of a darray that process coordinate ``coord`` owns (MPI-3.1
    §4.1.4): all of them (DISTRIBUTE_NONE), one block of ``darg`` (default ceil(gsize/psize)), or
    blocks of ``darg`` (default 1) dealt round-robin (DISTRIBUTE_CYCLIC)."""
    if distrib == MPI.DISTRIBUTE_NONE:
        return np.arange(gsize, dtype=np.int64)
    if distrib == MPI.DISTRIBUTE_BLOCK:
        block = -(-gsize // psize) if darg == MPI.DISTRIBUTE_DFLT_DARG else darg
        return np.arange(coord * block, min((coord + 1) * block, gsize), dtype=np.int64)
    block = 1 if darg == MPI.DISTRIBUTE_DFLT_DARG else darg
    index = np.arange(gsize, dtype=np.int64)
    return index[(index // block) % psize == coord]


def _darray(child, integers, element_extent: int, MPI) -> tuple[np.ndarray, np.ndarray]:
    rank, ndims = integers[1], integers[2]
    gsizes, distribs, dargs, psizes = (integers[3 + k * ndims:3 + (k + 1) * ndims] for k in range(4))
    order = integers[3 + 4 * ndims]
    # The process grid is row-major whatever the array order.
    coords, rest = [], rank
    for psize in reversed(psizes):
        coords.append(rest % psize)
        rest //= psize
    coords.reverse()
    indices = [_darray_indices(*args, MPI) for args in zip(gsizes, distribs, dargs, psizes, coords)]
    return _grid(child, gsizes, indices, 0 if order == MPI.ORDER_C else 1, element_extent)


def _flatten(datatype, MPI, depth: int = 0) -> tuple[np.ndarray, np.ndarray]:
    if depth > 64:
        raise ValueError("datatype nesting deeper than 64 levels")
    ni, na, nc, nd, combiner = datatype.Get_envelope()
    if combiner == MPI.COMBINER_NAMED:
        return np.zeros(1, dtype=np.int64), np.full(1, datatype.Get_size(), dtype=np.int64)
    integers, addresses, _counts, types = datatype.Get_contents()
    try:
        children = [_flatten(t, MPI, depth + 1) for t in types]
        child_extents = [t.Get_extent()[1] for t in types]
    finally:
        for t in types:
            if not t.is_predefined:
                t.Free()
    C = MPI
    if combiner == C.COMBINER_DUP:
        return children[0]
    if combiner == C.COMBINER_CONTIGUOUS:
        return _place(children[0], [0], [integers[0]], child_extents[0])
    if combiner == C.COMBINER_VECTOR:
        count, blocklength, stride = integers[:3]
        ext = child_extents[0]
        return _place(children[0], np.arange(count) * stride * ext, blocklength, ext)
    if combiner == C.COMBINER_HVECTOR:
        count, blocklength = integers[:2]
        ext = child_extents[0]
        return _place(children[0], np.arange(count) * addresses[0], blocklength, ext)
    if combiner == C.COMBINER_INDEXED:
        count = integers[0]
        ext = child_extents[0]
        bls, displs = integers[1:1 + count], integers[1 + count:1 + 2 * count]
        return _place(children[0], np.asarray(displs, dtype=np.int64) * ext, bls, ext)
    if combiner == C.COMBINER_HINDEXED:
        count = integers[0]
        return _place(children[0], addresses[:count], integers[1:1 + count], child_extents[0])
    if combiner == C.COMBINER_INDEXED_BLOCK:
        count, blocklength = integers[:2]
        ext = child_extents[0]
        return _place(children[0], np.asarray(integers[2:2 + count], dtype=np.int64) * ext, blocklength, ext)
    if combiner == C.COMBINER_HINDEXED_BLOCK:
        count, blocklength = integers[:2]
        return _place(children[0], addresses[:count], blocklength, child_extents[0])
    if combiner == C.COMBINER_STRUCT:
        count = integers[0]
        parts = [_place(children[i], [addresses[i]], [integers[1 + i]], child_extents[i])
                 for i in range(count)]
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    if combiner == C.COMBINER_SUBARRAY:
        ndims = integers[0]
        sizes, subsizes = integers[1:1 + ndims], integers[1 + ndims:1 + 2 * ndims]
        starts, order = integers[1 + 2 * ndims:1 + 3 * ndims], integers[1 + 3 * ndims]
        order_c = 0 if order == MPI.ORDER_C else 1
        return _subarray(children[0], sizes, subsizes, starts, order_c, child_extents[0])
    if combiner == C.COMBINER_DARRAY:
        return _darray(children[0], integers, child_extents[0], MPI)
    if combiner == C.COMBINER_RESIZED:
        return children[0]  # same bytes; only lb/extent change, read from the type itself
    names = {getattr(MPI, n): n for n in dir(MPI) if n.startswith("COMBINER_")}
    raise ValueError(f"file views of {names.get(combiner, combiner)} datatypes are not supported; "
                     "build the view from subarray, vector, indexed or struct types")


def flatten_datatype(datatype) -> Flattened:
    """Flatten an ``mpi4py.MPI.Datatype`` (committed or not) into byte extents.

    Raises
    ------
    ValueError
        For combiners a file view cannot use here (the F90 types): the message says which.
    """
    from mpi4py import MPI

    offsets, lengths = _flatten(datatype, MPI)
    lb, extent = datatype.Get_extent()
    return Flattened(offsets.astype(np.int64), lengths.astype(np.int64), int(lb), int(extent))


def extents_filetype(extents, extent: int | None = None) -> Flattened:
    """A filetype from explicit ``(offset, length)`` pairs (an N×2 array-like, or two arrays).

    The tile's extent is the end of the last byte unless ``extent`` is given.
    """
    if isinstance(extents, tuple) and len(extents) == 2 and np.ndim(extents[0]) == 1:
        offsets, lengths = (np.asarray(a, dtype=np.int64) for a in extents)
        if offsets.shape != lengths.shape:
            raise ValueError(f"offsets and lengths differ in shape: {offsets.shape} vs {lengths.shape}")
    else:
        pairs = np.asarray(extents, dtype=np.int64)
        if pairs.size == 0:
            pairs = pairs.reshape(0, 2)
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            raise ValueError(f"explicit extents must be (offset, length) pairs, got an array of shape {pairs.shape}")
        offsets, lengths = pairs[:, 0].copy(), pairs[:, 1].copy()
    if np.any(offsets < 0) or np.any(lengths < 0):
        raise ValueError("explicit extents need non-negative offsets and lengths")
    end = int((offsets + lengths).max()) if offsets.size else 0
    if extent is None:
        extent = end
    elif extent < end:
        raise ValueError(f"extent {extent} is smaller than the extents' end {end}")
    return Flattened(offsets, lengths, 0, int(extent))
