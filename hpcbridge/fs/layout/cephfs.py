"""CephFS layouts from the ``ceph.file.layout`` virtual extended attribute.

The value is text, not NUL-terminated: ``stripe_unit=4194304 stripe_count=1
object_size=4194304 pool=cephfs_data`` (optionally `` pool_namespace=ns``). The virtual xattrs
are hidden from ``listxattr``: they are read by name.

Bytes map to RADOS objects as Ceph's Striper does: ``blockno = off // su``, ``stripeno = blockno
// sc``, ``stripepos = blockno % sc``, ``objectsetno = stripeno // (object_size // su)``,
``objectno = objectsetno * sc + stripepos``; object names are ``<inode hex>.<objectno %08x>``.
Objects are placed on OSDs by CRUSH, which no xattr exposes: hosts are reported unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..types import BlockLocation

__all__ = ["XATTR", "CephLayout", "parse_layout", "read_layout"]

XATTR = "ceph.file.layout"


@dataclass(frozen=True)
class CephLayout:
    """Ceph file striping parameters (and the inode number for object names)."""

    stripe_unit: int
    stripe_count: int
    object_size: int
    pool: str = ""
    pool_namespace: str = ""
    inode: int | None = None

    def object_number(self, offset: int) -> int:
        """Number of the RADOS object holding byte ``offset``."""
        blockno = offset // self.stripe_unit
        stripeno, stripepos = divmod(blockno, self.stripe_count)
        objectsetno = stripeno // (self.object_size // self.stripe_unit)
        return objectsetno * self.stripe_count + stripepos

    def object_name(self, number: int) -> str:
        """RADOS object name of object ``number`` (``<ino hex>.<number %08x>``)."""
        prefix = f"{self.inode:x}" if self.inode is not None else "?"
        return f"{prefix}.{number:08x}"

    def blocks(self, start: int, length: int, merge_up_to: int = 0) -> list[BlockLocation]:
        """Block locations of ``[start, start+length)``, one per stripe unit (merged with the next
        unit when it lies in the same object, up to ``merge_up_to`` bytes)."""
        from . import striped_blocks

        def locate(index: int):
            return (), (self.object_name(self.object_number(index * self.stripe_unit)),)

        return striped_blocks(start, length, self.stripe_unit, locate, merge_up_to)


def parse_layout(text: bytes | str, inode: int | None = None) -> CephLayout:
    """Parse a ``ceph.file.layout`` value. Raises ValueError if fields are missing or invalid."""
    if isinstance(text, bytes):
        text = text.rstrip(b"\0").decode("utf-8")
    fields = dict(item.split("=", 1) for item in text.split() if "=" in item)
    try:
        su, sc, size = (int(fields[k]) for k in ("stripe_unit", "stripe_count", "object_size"))
    except (KeyError, ValueError) as exc:
        raise ValueError(f"not a ceph.file.layout value: {text!r}") from exc
    if su <= 0 or sc <= 0 or size <= 0 or size % su:
        raise ValueError(f"inconsistent ceph.file.layout: {text!r}")
    return CephLayout(su, sc, size, fields.get("pool", ""), fields.get("pool_namespace", ""), inode)


def read_layout(read_xattr: Callable[[str], bytes | None], inode: int | None = None):
    """The layout of a file on a CephFS mount, or None if the xattr is not there."""
    value = read_xattr(XATTR)
    return parse_layout(value, inode) if value else None
