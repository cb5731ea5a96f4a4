"""File views: which file bytes a process's data stream lands on.

As in MPI, a view is a displacement, an elementary type (the unit of offsets) and a filetype
tiled from the displacement; the process's data fill the filetype's bytes in order, tile after
tile. :meth:`FileView.extents` maps a range of that data stream to file extents with numpy, so
the cost is a few array operations per call whatever the number of pieces.
"""

from __future__ import annotations

import numpy as np

from .datatypes import Flattened, extents_filetype, flatten_datatype, merge_extents

__all__ = ["FileView"]


class FileView:
    """``disp`` + tiles of ``filetype``, offsets counted in ``etype`` units.

    Parameters
    ----------
    disp:
        Byte displacement of the first tile.
    etype_size:
        Size in bytes of the elementary type (offsets passed to ``write_at`` count these).
    filetype:
        A :class:`~hpcbridge.mpi.datatypes.Flattened` filetype, or None for the contiguous
        byte stream (the default view).
    shift:
        For the contiguous stream: bytes between ``disp`` and the first data byte (a dense
        filetype whose typemap starts past 0, e.g. ``indexed([1], [1])``, tiles into the stream
        from ``disp + shift``).
    """

    def __init__(self, disp: int = 0, etype_size: int = 1, filetype: Flattened | None = None, shift: int = 0):
        if disp < 0:
            raise ValueError(f"view displacement must be non-negative, got {disp}")
        if etype_size <= 0:
            raise ValueError(f"etype size must be positive, got {etype_size}")
        self.disp = int(disp)
        self.etype_size = int(etype_size)
        self.filetype = filetype
        self.shift = int(shift)
        if filetype is None:
            return
        # Empty blocks (count 0 in an indexed or struct type) are not in MPI's typemap: their
        # displacements take no part in the ordering rule.
        keep = filetype.lengths > 0
        offsets, lengths = filetype.offsets[keep], filetype.lengths[keep]
        if filetype.size == 0:
            # MPI takes a filetype of no bytes (a darray share of a process that owns nothing):
            # such a rank can only make calls that move no data (extents() refuses any other).
            self._offsets = self._lengths = self._starts = np.zeros(0, dtype=np.int64)
            self._tile_size, self._tile_extent = 0, int(filetype.extent)
            return
        if filetype.size % self.etype_size:
            raise ValueError(f"filetype size {filetype.size} is not a multiple of the etype size {self.etype_size}")
        if np.any(offsets < 0):
            raise ValueError("filetype displacements must be non-negative (MPI file view rule)")
        if offsets.size > 1 and np.any(offsets[1:] < (offsets + lengths)[:-1]):
            raise ValueError("filetype displacements must be monotonically non-decreasing without overlap "
                             "(MPI file view rule)")
        span = int((offsets + lengths).max()) - int(offsets.min())
        if filetype.extent < span:
            # Tile k lies at disp + k·extent: its bytes must end before tile k+1's begin.
            raise ValueError(f"filetype extent {filetype.extent} is smaller than the span of its bytes ({span}); "
                             "consecutive tiles would overlap (MPI file view rule)")
        merged = merge_extents(offsets, lengths)
        self._offsets, self._lengths = merged
        self._starts = np.concatenate(([0], np.cumsum(self._lengths)[:-1])).astype(np.int64)
        self._tile_size = int(self._lengths.sum())
        self._tile_extent = int(filetype.extent)

    @classmethod
    def build(cls, disp: int = 0, etype=None, filetype=None, extent: int | None = None) -> "FileView":
        """A view from MPI datatypes (``etype``, ``filetype``) or explicit ``(offset, length)`` extents."""
        etype_size = 1 if etype is None else (etype if isinstance(etype, int) else etype.Get_size())
        if filetype is None:
            flat = None
        elif hasattr(filetype, "Get_envelope"):
            flat = flatten_datatype(filetype)
            if extent is not None:
                raise ValueError("extent= is for explicit extents; resize the MPI datatype instead")
        else:
            flat = extents_filetype(filetype, extent)
        view = cls(disp, etype_size, flat)
        if flat is not None and view._is_contiguous_stream():
            # A filetype without holes between tiles: the plain byte stream from its first byte.
            return cls(disp, etype_size, None, shift=int(view._offsets[0]))
        return view

    def _is_contiguous_stream(self) -> bool:
        return self._offsets.size == 1 and self._tile_extent == self._tile_size

    @property
    def contiguous(self) -> bool:
        """True for the default byte-stream view (every data byte follows the previous one)."""
        return self.filetype is None

    def check(self, offset: int, nbytes: int) -> None:
        """Raise ValueError unless ``offset`` is non-negative and ``nbytes`` whole etypes (what
        :meth:`extents` checks, without computing them: calls validate their arguments on every
        rank before they agree, and compute the extents once after)."""
        if offset < 0:
            raise ValueError(f"offset must be non-negative, got {offset}")
        if nbytes % self.etype_size:
            raise ValueError(f"buffer of {nbytes} bytes is not a whole number of etypes ({self.etype_size} bytes)")

    def extents(self, offset: int, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        """File ``(offsets, lengths)`` of data bytes ``[offset·etype, offset·etype + nbytes)``.

        The extents come in data-stream order; extent ``i`` holds data bytes
        ``sum(lengths[:i])`` onwards. Adjacent extents are merged.
        """
        self.check(offset, nbytes)
        start = offset * self.etype_size
        if nbytes == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if self.filetype is None:
            return np.array([self.disp + self.shift + start], dtype=np.int64), np.array([nbytes], dtype=np.int64)
        size = self._tile_size
        if size == 0:
            raise ValueError(f"the view's filetype selects no bytes: {nbytes} bytes cannot be accessed through it")
        first_tile, last_tile = start // size, (start + nbytes - 1) // size
        if first_tile == last_tile:
            # Within one tile (the common per-transfer call): only the blocks it touches.
            lo_in, hi_in = start - first_tile * size, start + nbytes - first_tile * size
            a = int(np.searchsorted(self._starts, lo_in, side="right")) - 1
            b = int(np.searchsorted(self._starts, hi_in - 1, side="right"))
            starts, offs, lens = self._starts[a:b], self._offsets[a:b], self._lengths[a:b]
            lo = np.maximum(starts, lo_in)
            hi = np.minimum(starts + lens, hi_in)
            base = self.disp + first_tile * self._tile_extent
            return merge_extents(base + offs + (lo - starts), hi - lo)
        tiles = np.arange(first_tile, last_tile + 1, dtype=np.int64)[:, None]
        logical = tiles * size + self._starts[None, :]
        lo = np.maximum(logical, start)
        hi = np.minimum(logical + self._lengths[None, :], start + nbytes)
        file_offsets = self.disp + tiles * self._tile_extent + self._offsets[None, :] + (lo - logical)
        return merge_extents(file_offsets.reshape(-1), (hi - lo).clip(min=0).reshape(-1))

    def bytes_before(self, position: int) -> int:
        """Data bytes of the view that lie before absolute file byte ``position``."""
        if position <= self.disp:
            return 0
        if self.filetype is None:
            return max(0, position - self.disp - self.shift)
        if self._tile_size == 0:
            return 0
        first = int(self._offsets[0])  # tile k's bytes lie in [disp + k·extent + first, + extent)
        relative = position - self.disp - first
        if relative <= 0:
            return 0
        tiles, within = divmod(relative, self._tile_extent)
        partial = np.clip(within - (self._offsets - first), 0, self._lengths).sum()
        return int(tiles * self._tile_size + partial)

    def __repr__(self) -> str:
        if self.filetype is None:
            shift = f", shift={self.shift}" if self.shift else ""
            return f"FileView(disp={self.disp}, etype_size={self.etype_size}, contiguous{shift})"
        return (f"FileView(disp={self.disp}, etype_size={self.etype_size}, {self._offsets.size} extents "
                f"of {self._tile_size} bytes per {self._tile_extent}-byte tile)")
