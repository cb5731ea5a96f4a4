"""The chunk index of a chunked dataset: every chunk's coordinates, address, stored size, filter mask.

Datasets with a version 1-3 layout message (what h5py writes by default) index their chunks in a
version-1 B-tree of type 1 (File Format Specification III.A.1). :func:`read_btree_index` walks it
level by level, reading each node with one cached read and decoding its keys and child addresses
with one numpy structured view: no per-chunk Python work, so 100,000 chunks index in a fraction
of a second (HDF5 1.10's ``H5Dget_chunk_info(i)`` walks the index from the start for every
``i``: quadratic). Version-4 layouts (``libver="latest"``): :func:`read_v4_index` reads single
chunk, implicit and fixed-array indexes from the file the same way; extensible arrays and
version-2 B-trees go through :func:`read_index_h5py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import HDF5FormatError

__all__ = ["ChunkIndex", "read_btree_index", "read_v4_index", "read_index_h5py", "agrees_with_hdf5"]


@dataclass
class ChunkIndex:
    """Stored chunks of a dataset, in chunk-coordinate order.

    Attributes
    ----------
    coords:
        ``(n, rank)`` int64: each chunk's first element index on every axis.
    address:
        ``(n,)`` int64 absolute file addresses.
    size:
        ``(n,)`` int64 stored (filtered) byte sizes.
    mask:
        ``(n,)`` uint32 filter masks (bit i set: filter i of the pipeline was skipped).
    """

    coords: np.ndarray
    address: np.ndarray
    size: np.ndarray
    mask: np.ndarray

    def __len__(self) -> int:
        return len(self.address)

    def take(self, which) -> "ChunkIndex":
        """The chunks selected by ``which`` (a boolean mask or indices)."""
        return ChunkIndex(self.coords[which], self.address[which], self.size[which], self.mask[which])

    @classmethod
    def empty(cls, rank: int) -> "ChunkIndex":
        """No chunk stored."""
        return cls(np.zeros((0, rank), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                   np.zeros(0, np.uint32))


def _key_dtype(rank: int) -> np.dtype:
    return np.dtype([("size", "<u4"), ("mask", "<u4"), ("coords", "<u8", (rank + 1,))])


def read_btree_index(f, address: int, rank: int, base: int, offset_size: int, url: str) -> ChunkIndex:
    """Walk the version-1 B-tree at ``address`` (absolute) of a dataset of ``rank`` dimensions."""
    if offset_size not in (4, 8):
        raise HDF5FormatError(f"{url}: unsupported size of file addresses ({offset_size} bytes)")
    addr_type = f"<u{offset_size}"
    key = _key_dtype(rank)
    entry = np.dtype([("key", key), ("child", addr_type)])
    header = 8 + 2 * offset_size
    level_nodes = [address]
    leaves: list[np.ndarray] = []
    expected_level = None
    while level_nodes:
        children: list[np.ndarray] = []
        level = expected_level
        for node in level_nodes:
            head = f.pread(header, node)
            if head[:4] != b"TREE" or head[4] != 1:
                raise HDF5FormatError(f"{url}: no chunk B-tree node at address {node}")
            level = head[5]
            if expected_level is not None and level != expected_level:
                raise HDF5FormatError(f"{url}: B-tree node at {node} is at level {level}, expected {expected_level}")
            entries = int.from_bytes(head[6:8], "little")
            if entries == 0:
                continue
            body = f.pread(entries * entry.itemsize, node + header)
            if len(body) < entries * entry.itemsize:
                raise HDF5FormatError(f"{url}: B-tree node at {node} runs past the end of the file")
            parsed = np.frombuffer(body, dtype=entry, count=entries)
            if level == 0:
                leaves.append(parsed)
            else:
                children.append(parsed["child"].astype(np.int64) + base)
            expected_level = level
        expected_level = None if expected_level is None else expected_level - 1
        level_nodes = np.concatenate(children).tolist() if children else []
    if not leaves:
        return ChunkIndex.empty(rank)
    table = np.concatenate(leaves)
    return ChunkIndex(table["key"]["coords"][:, :rank].astype(np.int64), table["child"].astype(np.int64) + base,
                      table["key"]["size"].astype(np.int64), table["key"]["mask"].astype(np.uint32))


def read_v4_index(f, layout, shape: tuple[int, ...], maxshape: tuple[int, ...], chunk: tuple[int, ...],
                  item: int, sb, url: str) -> ChunkIndex | None:
    """The chunk index of a version-4 layout (``libver="latest"`` files) parsed from the file:
    a single chunk, implicit (chunks stored in grid order) or a fixed array (File Format
    Specification VII.A-B: every chunk's entry in one data block, in pages of 2**page_bits
    entries above that many); ``None`` for the other types (extensible array, version-2
    B-tree), which :func:`read_index_h5py` reads. Entries follow the chunk grid of
    ``maxshape``; chunks outside ``shape`` are left out."""
    rank = len(chunk)
    nbytes = math.prod(chunk) * item
    if layout.address is None:
        return ChunkIndex.empty(rank)
    if layout.index_type == 1:  # single chunk: the address is the chunk's
        if layout.flags & 2:
            size = int.from_bytes(layout.index_info[:-4], "little")
            mask = int.from_bytes(layout.index_info[-4:], "little")
        else:
            size, mask = nbytes, 0
        return ChunkIndex(np.zeros((1, rank), np.int64), np.array([layout.address], np.int64),
                          np.array([size], np.int64), np.array([mask], np.uint32))
    if any(m is None for m in maxshape):
        return None
    grid = tuple(-(-m // c) for m, c in zip(maxshape, chunk))
    if layout.index_type == 2:  # implicit: every chunk allocated, in grid order, unfiltered
        n = math.prod(grid)
        return _in_shape(np.arange(n, dtype=np.int64), layout.address + np.arange(n, dtype=np.int64) * nbytes,
                         np.full(n, nbytes, np.int64), np.zeros(n, np.uint32), grid, shape, chunk)
    if layout.index_type != 3:
        return None
    o, ln = sb.offset_size, sb.length_size
    # Header: "FAHD", version, client (1: filtered chunks), entry size, page bits, entries
    # (length), data block address, checksum.
    head = f.pread(8 + ln + o, layout.address)
    if head[:4] != b"FAHD" or len(head) < 8 + ln + o:
        raise HDF5FormatError(f"{url}: no fixed array header at address {layout.address}")
    client, entry_size, page_bits = head[5], head[6], head[7]
    count = int.from_bytes(head[8:8 + ln], "little")
    block = int.from_bytes(head[8 + ln:8 + ln + o], "little")
    if block == (1 << (8 * o)) - 1 or count == 0:
        return ChunkIndex.empty(rank)
    block += sb.base
    prefix = 4 + 1 + 1 + o  # "FADB", version, client, header address
    page = 1 << page_bits
    if count > page:  # paged: a bitmap of the pages written, its checksum, then each page + checksum
        pages = -(-count // page)
        bitmap_size = -(-pages // 8)
        head = f.pread(prefix + bitmap_size, block)
        if head[:4] != b"FADB":
            raise HDF5FormatError(f"{url}: no fixed array data block at address {block}")
        written = np.unpackbits(np.frombuffer(head[prefix:], np.uint8), bitorder="big")[:pages]
        first = block + prefix + bitmap_size + 4
        linear, rows = [], []
        for k in np.flatnonzero(written).tolist():
            n = min(page, count - k * page)
            raw = f.pread(n * entry_size, first + k * (page * entry_size + 4))
            if len(raw) < n * entry_size:
                raise HDF5FormatError(f"{url}: fixed array page {k} at {block} runs past the end of the file")
            linear.append(np.arange(k * page, k * page + n, dtype=np.int64))
            rows.append(np.frombuffer(raw, np.uint8).reshape(n, entry_size))
        if not rows:
            return ChunkIndex.empty(rank)
        positions, table = np.concatenate(linear), np.concatenate(rows)
    else:
        raw = f.pread(prefix + count * entry_size, block)
        if raw[:4] != b"FADB":
            raise HDF5FormatError(f"{url}: no fixed array data block at address {block}")
        if len(raw) < prefix + count * entry_size:
            raise HDF5FormatError(f"{url}: the fixed array data block at {block} runs past the end of the file")
        positions = np.arange(count, dtype=np.int64)
        table = np.frombuffer(raw, np.uint8, count=count * entry_size, offset=prefix).reshape(count, entry_size)
    address = _little_endian(table, 0, o)
    stored = address != np.uint64((1 << (8 * o)) - 1)
    if client == 1:  # address, stored size (entry size - address - mask bytes), filter mask
        sizes = _little_endian(table, o, entry_size - o - 4).astype(np.int64)
        masks = _little_endian(table, entry_size - 4, 4).astype(np.uint32)
    else:
        sizes, masks = np.full(len(table), nbytes, np.int64), np.zeros(len(table), np.uint32)
    return _in_shape(positions[stored], address[stored].astype(np.int64) + sb.base, sizes[stored], masks[stored],
                     grid, shape, chunk)


def _little_endian(table: np.ndarray, start: int, width: int) -> np.ndarray:
    """Unsigned little-endian integers of ``width`` bytes at column ``start`` of each row."""
    out = np.zeros(len(table), np.uint64)
    for j in range(width):
        out |= table[:, start + j].astype(np.uint64) << np.uint64(8 * j)
    return out


def _in_shape(linear, address, size, mask, grid, shape, chunk) -> ChunkIndex:
    """Chunks at ``linear`` positions of ``grid`` whose first element lies inside ``shape``."""
    coords = np.stack(np.unravel_index(linear, grid), axis=1).astype(np.int64) * np.array(chunk, np.int64) \
        if len(linear) else np.zeros((0, len(chunk)), np.int64)
    inside = np.all(coords < np.array(shape, np.int64), axis=1) if len(linear) else np.zeros(0, bool)
    return ChunkIndex(coords[inside], np.asarray(address, np.int64)[inside], np.asarray(size, np.int64)[inside],
                      np.asarray(mask, np.uint32)[inside])


def read_index_h5py(dsid, shape: tuple[int, ...], chunk: tuple[int, ...], base: int = 0) -> ChunkIndex:
    """Any chunk index, through ``h5py``'s ``get_chunk_info_by_coord`` for each chunk of the grid
    (one lookup per chunk: linear, but slower than :func:`read_btree_index`); ``base``: the
    file's base address (its user block), which HDF5 1.10 leaves out of the addresses it reports."""
    grid = [range(0, n, c) for n, c in zip(shape, chunk)]
    rows = []
    for coords in np.stack(np.meshgrid(*[np.asarray(g) for g in grid], indexing="ij"), -1).reshape(-1, len(shape)):
        info = dsid.get_chunk_info_by_coord(tuple(int(c) for c in coords))
        if info.byte_offset is not None:
            rows.append((tuple(coords), info.byte_offset, info.size, info.filter_mask))
    if not rows:
        return ChunkIndex.empty(len(shape))
    shift = base if base and _chunk_info_is_relative() else 0
    return ChunkIndex(np.array([r[0] for r in rows], np.int64).reshape(-1, len(shape)),
                      np.array([r[1] for r in rows], np.int64) + shift, np.array([r[2] for r in rows], np.int64),
                      np.array([r[3] for r in rows], np.uint32))


_RELATIVE: list[bool] = []


def _chunk_info_is_relative() -> bool:
    """Whether this HDF5 reports chunk addresses relative to the base address (HDF5 1.10 does;
    the file format's addresses are relative to it, H5Dget_chunk_info is documented as
    absolute): asked once per process of a small file with a user block, made in memory."""
    if not _RELATIVE:
        import io

        import h5py

        data = np.arange(0x51525354, 0x51525354 + 8, dtype="<u4")
        image = io.BytesIO()
        with h5py.File(image, "w", libver="latest", userblock_size=512) as f:
            f.create_dataset("d", data=data, chunks=(8,))
        with h5py.File(image, "r") as f:
            offset = f["d"].id.get_chunk_info_by_coord((0,)).byte_offset
        raw = image.getvalue()
        _RELATIVE.append(raw[offset + 512:offset + 512 + data.nbytes] == data.tobytes()
                         and raw[offset:offset + data.nbytes] != data.tobytes())
    return _RELATIVE[0]


def agrees_with_hdf5(dsid, index: ChunkIndex, base: int) -> bool:
    """Whether the first, middle and last chunks of ``index`` are where HDF5 says they are
    (a parser's mistake is never silent: the caller falls back to :func:`read_index_h5py`)."""
    if not len(index):
        return dsid.get_chunk_info_by_coord((0,) * index.coords.shape[1]).byte_offset is None
    shift = base if base and _chunk_info_is_relative() else 0
    for i in sorted({0, len(index) // 2, len(index) - 1}):
        info = dsid.get_chunk_info_by_coord(tuple(int(c) for c in index.coords[i]))
        if info.byte_offset is None or (info.byte_offset + shift, info.size, info.filter_mask) != \
                (int(index.address[i]), int(index.size[i]), int(index.mask[i])):
            return False
    return True
