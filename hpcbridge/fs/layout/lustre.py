"""Lustre layouts from the ``lustre.lov`` extended attribute.

The value is a ``lov_user_md`` (lustre/include/uapi/linux/lustre/lustre_user.h), packed and
returned in host byte order (little-endian on x86) by the client:

* V1 (magic 0x0BD10BD0): 32-byte header ``magic u32, pattern u32, lmm_oi 16 B, stripe_size u32,
  stripe_count u16, stripe_offset/layout_gen u16``, then 24-byte ``lov_user_ost_data_v1``
  records ``ost_oi 16 B, ost_gen u32, ost_idx u32``;
* V3 (0x0BD30BD0): the same with a 16-byte pool name before the objects (48-byte header);
* FOREIGN (0x0BD70BD0, ``lov_foreign_md``): data kept outside Lustre's OSTs, no objects;
* COMP_V1 (0x0BD60BD0, progressive file layouts): 32-byte ``lov_comp_md_v1`` header, 48-byte
  ``lov_comp_md_entry_v1`` entries ``id, flags, extent [start, end), offset, size, ...``, each
  pointing at its own V1/V3 record; uninstantiated components carry no objects. In a mirrored
  (FLR) file, bits 30..16 of ``lcme_id`` number the mirror and each mirror's components cover
  the file again; ``LCME_FL_STALE`` (0x1) marks a mirror that missed writes.

RAID-0: stripe unit ``off // stripe_size`` goes to object ``unit % stripe_count``; the object
count is taken from the record length (stripe_count may be a request value such as 0xFFFF), and
the starting OST from the first object (clients overwrite ``stripe_offset``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from .striping import Component, ComponentLayout, RoundRobinLayout

__all__ = ["XATTR", "parse_lov", "read_layout", "LUSTRE_EOF"]

XATTR = "lustre.lov"
MAGIC_V1 = 0x0BD10BD0
MAGIC_V3 = 0x0BD30BD0
MAGIC_COMP_V1 = 0x0BD60BD0
MAGIC_FOREIGN = 0x0BD70BD0
PATTERN_RAID0 = 0x001
PATTERN_MDT = 0x100
PATTERN_OVERSTRIPING = 0x200
LCME_FL_STALE = 0x01
LCME_FL_INIT = 0x10
MIRROR_ID_MASK = 0x7FFF0000
MIRROR_ID_SHIFT = 16
LUSTRE_EOF = 0xFFFFFFFFFFFFFFFF

_HEADER = struct.Struct("<II16sIHH")  # 32 bytes
_OBJECT = struct.Struct("<16sII")  # 24 bytes
_COMP_HEADER = struct.Struct("<IIIHHH6s8s")  # 32 bytes
_COMP_ENTRY = struct.Struct("<IIQQIIIQI")  # 48 bytes


def _ost_name(fsname: str, index: int) -> str:
    return f"{fsname}-OST{index:04x}" if fsname else f"OST{index:04x}"


def _parse_lmm(data: bytes, fsname: str) -> RoundRobinLayout | None:
    if len(data) >= 4 and struct.unpack_from("<I", data)[0] == MAGIC_FOREIGN:
        return None  # lov_foreign_md (lfs setstripe --foreign, HSM copies): no OST objects
    if len(data) < _HEADER.size:
        raise ValueError(f"lov_user_md too short ({len(data)} bytes)")
    magic, pattern, _oi, stripe_size, _count, _offset = _HEADER.unpack_from(data)
    if magic == MAGIC_V1:
        header = _HEADER.size
    elif magic == MAGIC_V3:
        header = _HEADER.size + 16
    else:
        raise ValueError(f"unknown lov_user_md magic 0x{magic:08x}")
    if pattern & PATTERN_MDT or not pattern & (PATTERN_RAID0 | PATTERN_OVERSTRIPING):
        return None  # data on the MDT, or a pattern with no OST objects
    n_objects = max(0, (len(data) - header) // _OBJECT.size)
    if n_objects == 0 or stripe_size == 0:
        return None  # released (HSM) file or a component not instantiated yet
    targets = tuple(
        _ost_name(fsname, _OBJECT.unpack_from(data, header + i * _OBJECT.size)[2]) for i in range(n_objects)
    )
    return RoundRobinLayout(stripe_size, targets)


def parse_lov(data: bytes, fsname: str = ""):
    """Parse a ``lustre.lov`` value into a layout (RoundRobinLayout or ComponentLayout).

    ``fsname`` prefixes OST names (``lfs01-OST0003``). Returns None when the file has no OST
    objects (released, data-on-MDT). Raises ValueError for a value that is not a Lustre layout.
    """
    if len(data) < 4:
        raise ValueError("lustre.lov value too short")
    (magic,) = struct.unpack_from("<I", data)
    if magic != MAGIC_COMP_V1:
        return _parse_lmm(data, fsname)
    _magic, total, _gen, _flags, entry_count, _mirrors, _p1, _p2 = _COMP_HEADER.unpack_from(data)
    components = []
    for i in range(entry_count):
        (comp_id, flags, start, end, offset, size, _lgen, _ts, _pad) = _COMP_ENTRY.unpack_from(
            data, _COMP_HEADER.size + i * _COMP_ENTRY.size
        )
        layout = None
        if flags & LCME_FL_INIT:
            layout = _parse_lmm(data[offset:offset + size], fsname)
        # FLR: bits 30..16 of the id number the mirror; mirrors cover the same bytes.
        mirror = (comp_id & MIRROR_ID_MASK) >> MIRROR_ID_SHIFT
        components.append(Component(start, end, layout, mirror, bool(flags & LCME_FL_STALE)))
    return ComponentLayout(tuple(components))


def read_layout(read_xattr: Callable[[str], bytes | None], fsname: str = ""):
    """The layout of a file on a Lustre mount, or None if it has no ``lustre.lov``."""
    value = read_xattr(XATTR)
    return parse_lov(value, fsname) if value else None
