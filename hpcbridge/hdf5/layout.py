"""The superblock and a dataset's data layout message, parsed from the file's bytes.

h5py tells the shape, type, filters and fill value of a dataset but not where its chunk index
lives; that is in the data layout message (type 0x0008) of the dataset's object header. This
module reads the superblock (size of file addresses, base address) and walks an object header
(version 1 or 2, continuation blocks included) to that message (HDF5 File Format
Specification, sections II.A, IV.A.1 and IV.A.2.i).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import HDF5FormatError, NotHDF5Error

__all__ = ["Superblock", "Layout", "read_superblock", "read_layout"]

#: The HDF5 format signature, at the start of the superblock.
SIGNATURE = b"\x89HDF\r\n\x1a\n"
_LAYOUT, _CONTINUATION = 0x0008, 0x0010
#: Layout classes.
COMPACT, CONTIGUOUS, CHUNKED, VIRTUAL = 0, 1, 2, 3


@dataclass(frozen=True)
class Superblock:
    """Where the HDF5 data starts (``base``) and the byte sizes of addresses and lengths."""

    base: int
    version: int
    offset_size: int
    length_size: int


@dataclass(frozen=True)
class Layout:
    """A dataset's data layout message.

    Attributes
    ----------
    version:
        Message version (1-4).
    layout_class:
        0 compact, 1 contiguous, 2 chunked, 3 virtual.
    address:
        Contiguous: the data's address; chunked: the chunk index's address (v1 B-tree for
        versions 1-3); both absolute (base added); None when not allocated.
    size:
        Contiguous: bytes of the data.
    chunk:
        Chunked: the chunk shape (without the element size dimension).
    index_type:
        Version 4 chunked: 1 single chunk, 2 implicit, 3 fixed array, 4 extensible array,
        5 version-2 B-tree; version 1-3 chunked: 0 (version-1 B-tree). Version 4's ``address``
        is the index's (the chunk's for a single chunk, the first chunk's for implicit).
    flags:
        Version 4 chunked: bit 0 partial edge chunks unfiltered, bit 1 a single chunk filtered.
    index_info:
        Version 4 chunked: the index type's parameters as stored (single chunk, filtered: the
        chunk's stored size and filter mask; fixed array: its page bits...).
    """

    version: int
    layout_class: int
    address: int | None = None
    size: int = 0
    chunk: tuple[int, ...] = ()
    index_type: int = 0
    flags: int = 0
    index_info: bytes = b""


def _undefined(value: int, size: int) -> bool:
    return value == (1 << (8 * size)) - 1


def read_superblock(f, url: str) -> Superblock:
    """The superblock of an open file (``f.pread``), searched at 0, 512, 1024, ... bytes."""
    size = f.size()
    at = 0
    while at + 16 <= size:
        head = f.pread(16, at)
        if head[:8] == SIGNATURE:
            version = head[8]
            if version in (0, 1):
                return Superblock(at, version, head[13], head[14])
            if version in (2, 3):
                return Superblock(at, version, head[9], head[10])
            raise HDF5FormatError(f"{url}: unsupported HDF5 superblock version {version}")
        at = 512 if at == 0 else at * 2
    raise NotHDF5Error(f"{url} is not an HDF5 file (no HDF5 signature)")


def _uint(data, at: int, size: int) -> int:
    return int.from_bytes(data[at:at + size], "little")


def _messages_v1(data: bytes, start: int, end: int):
    at = start
    while at + 8 <= end:
        mtype, msize = struct.unpack_from("<HH", data, at)
        yield mtype, data[at + 8:at + 8 + msize]
        at += 8 + msize


def _messages_v2(data: bytes, start: int, end: int, creation_order: bool):
    head = 6 if creation_order else 4
    at = start
    while at + head <= end:
        mtype = data[at]
        msize = struct.unpack_from("<H", data, at + 1)[0]
        yield mtype, data[at + head:at + head + msize]
        at += head + msize


def _object_messages(f, address: int, sb: Superblock, url: str):
    """Every ``(type, body)`` message of the object header at ``address`` (absolute)."""
    o, ln = sb.offset_size, sb.length_size
    first = f.pread(16, address)
    if first[:4] == b"OHDR":
        flags = first[5]
        at = 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
        width = 1 << (flags & 3)
        prefix = f.pread(at + width, address)
        chunk0 = _uint(prefix, at, width)
        data = f.pread(at + width + chunk0, address)
        blocks = [(data, at + width, len(data) - 4)]
        order = bool(flags & 0x04)
        while blocks:
            data, start, end = blocks.pop(0)
            for mtype, body in _messages_v2(data, start, end, order):
                if mtype == _CONTINUATION:
                    cont = f.pread(_uint(body, o, ln), _uint(body, 0, o) + sb.base)
                    if cont[:4] != b"OCHK":
                        raise HDF5FormatError(f"{url}: bad object header continuation block")
                    blocks.append((cont, 4, len(cont) - 4))
                else:
                    yield mtype, body
        return
    if first[0] != 1:
        raise HDF5FormatError(f"{url}: unknown object header version {first[0]} at address {address}")
    header_size = struct.unpack_from("<I", first, 8)[0]
    data = f.pread(16 + header_size, address)
    blocks = [(data, 16, len(data))]
    while blocks:
        data, start, end = blocks.pop(0)
        for mtype, body in _messages_v1(data, start, end):
            if mtype == _CONTINUATION:
                cont = f.pread(_uint(body, o, ln), _uint(body, 0, o) + sb.base)
                blocks.append((cont, 0, len(cont)))
            else:
                yield mtype, body


def read_layout(f, address: int, sb: Superblock, url: str) -> Layout:
    """The data layout message of the dataset whose object header is at ``address``."""
    o, ln = sb.offset_size, sb.length_size
    for mtype, body in _object_messages(f, address, sb, url):
        if mtype != _LAYOUT:
            continue
        version = body[0]
        if version in (1, 2):
            dims, cls = body[1], body[2]
            at = 8
            addr = None
            if cls != COMPACT:
                raw = _uint(body, at, o)
                addr = None if _undefined(raw, o) else raw + sb.base
                at += o
            sizes = struct.unpack_from(f"<{dims}I", body, at)
            if cls == CHUNKED:
                return Layout(version, cls, addr, 0, tuple(sizes[:-1]))
            return Layout(version, cls, addr, 0)
        if version in (3, 4):
            cls = body[1]
            if cls == CONTIGUOUS:
                raw = _uint(body, 2, o)
                return Layout(version, cls, None if _undefined(raw, o) else raw + sb.base, _uint(body, 2 + o, ln))
            if cls == COMPACT:
                return Layout(version, cls)
            if cls == CHUNKED and version == 3:
                dims = body[2]
                raw = _uint(body, 3, o)
                sizes = struct.unpack_from(f"<{dims}I", body, 3 + o)
                return Layout(version, cls, None if _undefined(raw, o) else raw + sb.base, 0, tuple(sizes[:-1]))
            if cls == CHUNKED:
                flags, dims, width = body[2], body[3], body[4]
                sizes = [_uint(body, 5 + i * width, width) for i in range(dims)]
                at = 5 + dims * width
                index_type = body[at]
                info_size = {1: ln + 4 if flags & 2 else 0, 2: 0, 3: 1, 4: 5, 5: 6}.get(index_type)
                if info_size is None:
                    raise HDF5FormatError(f"{url}: unknown chunk index type {index_type} in a data layout message")
                info = bytes(body[at + 1:at + 1 + info_size])
                raw = _uint(body, at + 1 + info_size, o)
                return Layout(version, cls, None if _undefined(raw, o) else raw + sb.base, 0, tuple(sizes[:-1]),
                              index_type, flags, info)
            return Layout(version, cls)
        raise HDF5FormatError(f"{url}: unsupported data layout message version {version}")
    raise HDF5FormatError(f"{url}: the object header at {address} has no data layout message (not a dataset?)")
