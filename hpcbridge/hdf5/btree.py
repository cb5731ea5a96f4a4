"""The chunk index of a chunked dataset: every chunk's coordinates, address, stored size, filter mask.

Datasets with a version 1-3 layout message (what h5py writes by default) index their chunks in a
version-1 B-tree of type 1 (File Format Specification III.A.1). :func:`read_btree_index` walks it
level by level, reading each node with one cached read and decoding its keys and child addresses
with one numpy structured view: no per-chunk Python work, so 100,000 chunks index in a fraction
of a second (HDF5 1.10's ``H5Dget_chunk_info(i)`` walks the index from the start for every
``i``: quadratic). Version-4 layouts (``libver="latest"``): :func:`read_v4_index` reads single
chunk, implicit, fixed-array and extensible-array indexes from the file the same way;
version-2 B-trees go through :func:`read_index_h5py`. :func:`agrees_with_hdf5` checks either
against the chunks HDF5's own lookup reads.
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
    a single chunk, implicit (chunks stored in grid order), a fixed array (File Format
    Specification VII.A-B: every chunk's entry in one data block, in pages of 2**page_bits
    entries above that many) or an extensible array (one unlimited axis, VII.C); ``None`` for
    version-2 B-trees, which :func:`read_index_h5py` reads. Entries follow the chunk grid of
    ``maxshape`` (an unlimited axis first); chunks outside ``shape`` are left out."""
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
    if layout.index_type in (2, 3) and any(m is None for m in maxshape):
        return None
    if layout.index_type == 2:  # implicit: every chunk allocated, in grid order, unfiltered
        n = math.prod(-(-m // c) for m, c in zip(maxshape, chunk))
        positions = np.arange(n, dtype=np.int64)
        return _placed(positions, layout.address + positions * nbytes, np.full(n, nbytes, np.int64),
                       np.zeros(n, np.uint32), list(range(rank)), shape, maxshape, chunk)
    if layout.index_type == 3:
        found = _fixed_array(f, layout.address, sb, url)
        order = list(range(rank))
    elif layout.index_type == 4 and sum(m is None for m in maxshape) == 1:
        found = _extensible_array(f, layout.address, sb, url)
        # Entries follow the grid with the unlimited axis slowest (HDF5 "swizzles" it first).
        unlimited = maxshape.index(None)
        order = [unlimited] + [d for d in range(rank) if d != unlimited]
    else:
        return None
    if found is None:
        return ChunkIndex.empty(rank)
    client, entry_size, positions, table = found
    o = sb.offset_size
    address = _little_endian(table, 0, o)
    stored = address != np.uint64((1 << (8 * o)) - 1)
    if client == 1:  # address, stored size (entry size - address - mask bytes), filter mask
        sizes = _little_endian(table, o, entry_size - o - 4).astype(np.int64)
        masks = _little_endian(table, entry_size - 4, 4).astype(np.uint32)
    else:
        sizes, masks = np.full(len(table), nbytes, np.int64), np.zeros(len(table), np.uint32)
    return _placed(positions[stored], address[stored].astype(np.int64) + sb.base, sizes[stored], masks[stored],
                   order, shape, maxshape, chunk)


def _placed(positions, address, sizes, masks, order, shape, maxshape, chunk) -> ChunkIndex:
    """The chunks at ``positions`` of the grid of ``maxshape`` traversed with axis ``order[0]``
    slowest (an unlimited axis: as many rows as the positions need) whose first element lies
    inside ``shape``."""
    grid = [-(-maxshape[d] // chunk[d]) if maxshape[d] is not None else 0 for d in order]
    if len(positions) and grid[0] == 0:
        grid[0] = int(positions.max() // max(1, math.prod(grid[1:]))) + 1
    coords = np.zeros((len(positions), len(chunk)), np.int64)
    if len(positions):
        for axis, values in zip(order, np.unravel_index(positions, grid)):
            coords[:, axis] = values * chunk[axis]
    inside = np.all(coords < np.array(shape, np.int64), axis=1)
    return ChunkIndex(coords[inside], np.asarray(address, np.int64)[inside], np.asarray(sizes, np.int64)[inside],
                      np.asarray(masks, np.uint32)[inside])


def _fixed_array(f, address: int, sb, url: str):
    """``(client, entry size, positions, entries as rows of bytes)`` of the fixed array at
    ``address``; None when it holds no entry (File Format Specification VII.A-B)."""
    o, ln = sb.offset_size, sb.length_size
    # Header: "FAHD", version, client (1: filtered chunks), entry size, page bits, entries
    # (length), data block address, checksum.
    head = f.pread(8 + ln + o, address)
    if head[:4] != b"FAHD" or len(head) < 8 + ln + o:
        raise HDF5FormatError(f"{url}: no fixed array header at address {address}")
    client, entry_size, page_bits = head[5], head[6], head[7]
    count = int.from_bytes(head[8:8 + ln], "little")
    block = int.from_bytes(head[8 + ln:8 + ln + o], "little")
    if block == (1 << (8 * o)) - 1 or count == 0:
        return None
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
            linear.append(np.arange(k * page, k * page + n, dtype=np.int64))
            rows.append(_entries(f, first + k * (page * entry_size + 4), n, entry_size, url))
        if not rows:
            return None
        return client, entry_size, np.concatenate(linear), np.concatenate(rows)
    raw = f.pread(prefix, block)
    if raw[:4] != b"FADB":
        raise HDF5FormatError(f"{url}: no fixed array data block at address {block}")
    return client, entry_size, np.arange(count, dtype=np.int64), _entries(f, block + prefix, count, entry_size, url)


def _extensible_array(f, address: int, sb, url: str):
    """``(client, entry size, positions, entries as rows of bytes)`` of the extensible array at
    ``address`` (the index of a dataset with one unlimited axis); None when it holds no entry.

    Layout (File Format Specification VII.C, HDF5's H5EA): the first entries sit in the index
    block; the rest in data blocks that double in size every second "super block"; the data
    blocks of the first super blocks are listed in the index block, the others in secondary
    blocks, whose data blocks are paged above 2**page_bits entries (a bitmap says which pages
    were written)."""
    o, ln = sb.offset_size, sb.length_size
    undefined = (1 << (8 * o)) - 1
    head = f.pread(12 + 6 * ln + o, address)
    if head[:4] != b"EAHD" or len(head) < 12 + 6 * ln + o:
        raise HDF5FormatError(f"{url}: no extensible array header at address {address}")
    client, entry_size, max_bits, index_entries, block_min, sblock_min_blocks, page_bits = head[5:12]
    lengths = [int.from_bytes(head[12 + k * ln:12 + (k + 1) * ln], "little") for k in range(6)]
    entries_set = lengths[4]  # "max index set": one past the highest entry ever set
    index_block = int.from_bytes(head[12 + 6 * ln:12 + 6 * ln + o], "little")
    if index_block == undefined or entries_set == 0:
        return None
    index_block += sb.base
    sblocks = 1 + max_bits - (block_min.bit_length() - 1)
    in_index = 2 * (sblock_min_blocks.bit_length() - 1)  # super blocks whose data blocks the index block lists
    block_addrs, sblock_addrs = 2 * (sblock_min_blocks - 1), sblocks - in_index
    offset_size = (max_bits + 7) // 8
    page = 1 << page_bits
    prefix = 6 + o  # signature, version, client, header address
    raw = f.pread(prefix + index_entries * entry_size + (block_addrs + sblock_addrs) * o, index_block)
    if raw[:4] != b"EAIB" or len(raw) < prefix + index_entries * entry_size + (block_addrs + sblock_addrs) * o:
        raise HDF5FormatError(f"{url}: no extensible array index block at address {index_block}")
    table = np.frombuffer(raw, np.uint8, count=index_entries * entry_size, offset=prefix).reshape(-1, entry_size)
    addrs = _little_endian(np.frombuffer(raw, np.uint8, count=(block_addrs + sblock_addrs) * o,
                                         offset=prefix + index_entries * entry_size).reshape(-1, o), 0, o).tolist()
    linear = [np.arange(min(index_entries, entries_set), dtype=np.int64)]
    rows = [table[:entries_set]]
    start, start_block = index_entries, 0
    for u in range(sblocks):
        blocks, per_block = 1 << (u // 2), (1 << ((u + 1) // 2)) * block_min
        if start >= entries_set:
            break
        pages = per_block // page if per_block > page else 0
        written = None
        if u < in_index:
            if pages:
                return None  # not made by HDF5's defaults: h5py reads it
            data_blocks = addrs[start_block:start_block + blocks]
        else:
            sblock = addrs[block_addrs + u - in_index]
            if sblock == undefined:
                data_blocks = []
            else:
                bitmap_size = -(-(blocks * pages) // 8) if pages else 0
                raw = f.pread(prefix + offset_size + bitmap_size + blocks * o, sblock + sb.base)
                if raw[:4] != b"EASB" or len(raw) < prefix + offset_size + bitmap_size + blocks * o:
                    raise HDF5FormatError(f"{url}: no extensible array secondary block at {sblock + sb.base}")
                if pages:
                    written = np.unpackbits(np.frombuffer(raw, np.uint8, count=bitmap_size,
                                                          offset=prefix + offset_size), bitorder="big")
                data_blocks = _little_endian(np.frombuffer(raw, np.uint8, count=blocks * o,
                                                           offset=prefix + offset_size + bitmap_size).reshape(-1, o),
                                             0, o).tolist()
        for k, block in enumerate(data_blocks):
            first = start + k * per_block
            n = min(per_block, entries_set - first)
            if n <= 0:
                break
            if block == undefined:
                continue
            block += sb.base
            if pages:  # pages after the block's prefix and checksum, each with its checksum
                for p in range(-(-n // page)):
                    if written is not None and not written[k * pages + p]:
                        continue
                    m = min(page, n - p * page)
                    at = block + prefix + offset_size + 4 + p * (page * entry_size + 4)
                    linear.append(np.arange(first + p * page, first + p * page + m, dtype=np.int64))
                    rows.append(_entries(f, at, m, entry_size, url))
            else:
                if f.pread(4, block) != b"EADB":
                    raise HDF5FormatError(f"{url}: no extensible array data block at address {block}")
                linear.append(np.arange(first, first + n, dtype=np.int64))
                rows.append(_entries(f, block + prefix + offset_size, n, entry_size, url))
        start += blocks * per_block
        start_block += blocks
    return client, entry_size, np.concatenate(linear), np.concatenate(rows)


def _entries(f, at: int, count: int, entry_size: int, url: str) -> np.ndarray:
    """``count`` index entries of ``entry_size`` bytes at ``at``, as rows of bytes."""
    raw = f.pread(count * entry_size, at)
    if len(raw) < count * entry_size:
        raise HDF5FormatError(f"{url}: chunk index entries at {at} run past the end of the file")
    return np.frombuffer(raw, np.uint8).reshape(count, entry_size)


def _little_endian(table: np.ndarray, start: int, width: int) -> np.ndarray:
    """Unsigned little-endian integers of ``width`` bytes at column ``start`` of each row."""
    out = np.zeros(len(table), np.uint64)
    for j in range(width):
        out |= table[:, start + j].astype(np.uint64) << np.uint64(8 * j)
    return out


def read_index_h5py(dsid, shape: tuple[int, ...], chunk: tuple[int, ...], base: int = 0) -> ChunkIndex:
    """Any chunk index, through ``h5py``'s ``get_chunk_info_by_coord`` for each chunk of the grid
    (one lookup per chunk, which HDF5 1.10 answers by walking the index: quadratic; only
    version-2 B-trees come here); ``base``: the file's base address (its user block), which
    HDF5 1.10 leaves out of the addresses it reports."""
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


#: Largest chunk :func:`agrees_with_hdf5` reads whole to compare it with HDF5's read.
DIRECT_CHECK_MAX = 16 << 20


def agrees_with_hdf5(f, dsid, index: ChunkIndex, base: int) -> bool:
    """Whether the first, middle and last chunks of ``index`` are where HDF5 has them, and
    whether both find no chunk where ``index`` is empty. A parser's mistake is never silent:
    the caller falls back or refuses.

    Asked first of ``get_chunk_info_by_coord`` (no data read); where that disagrees, the chunk's
    bytes are compared with ``read_direct_chunk`` (HDF5's own lookup, the one its reads use):
    HDF5 1.10's ``get_chunk_info`` reports wrong coordinates for extensible arrays whose
    unlimited axis is not the first."""
    if not len(index):
        return dsid.get_num_chunks() == 0
    shift = base if base and _chunk_info_is_relative() else 0
    for i in sorted({0, len(index) // 2, len(index) - 1}):
        coords = tuple(int(c) for c in index.coords[i])
        ours = (int(index.address[i]), int(index.size[i]), int(index.mask[i]))
        info = dsid.get_chunk_info_by_coord(coords)
        if info.byte_offset is not None and (info.byte_offset + shift, info.size, info.filter_mask) == ours:
            continue
        if ours[1] > DIRECT_CHECK_MAX:
            return False
        try:
            mask, raw = dsid.read_direct_chunk(coords)
        except (KeyError, ValueError, OSError):  # HDF5 holds no chunk there
            return False
        if (int(mask), len(raw)) != (ours[2], ours[1]) or f.pread(ours[1], ours[0]) != raw:
            return False
    return True
