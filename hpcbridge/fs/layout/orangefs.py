"""OrangeFS (PVFS2) layouts from the ``system.pvfs2.md`` and ``system.pvfs2.dh`` xattrs.

What the kernel client (fs/orangefs) passes through, as pvfs2-viewdist reads it:

* ``system.pvfs2.md``: the file's distribution, little-endian: ``u32 name length``, the name and
  a NUL padded to a multiple of 8, then the distribution's parameters; for ``simple_stripe`` an
  ``int64 strip_size``. Trailing bytes beyond the encoding are ignored.
* ``system.pvfs2.dh``: the datafile handles, ``N x uint64`` (host order); datafile ``i`` holds
  strips ``i, i+N, i+2N, ...`` (simple_stripe is round-robin, like RAID-0).

Both are hidden from ``listxattr`` and read by name. A handle belongs to the server whose
``DataHandleRanges`` range (server configuration file) contains it; given that file, datafiles
are reported on their servers' hosts, otherwise by handle only.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from .striping import RoundRobinLayout

__all__ = ["DIST_XATTR", "HANDLES_XATTR", "HandleRange", "parse_distribution", "parse_handles",
           "parse_server_config", "read_layout"]

DIST_XATTR = "system.pvfs2.md"
HANDLES_XATTR = "system.pvfs2.dh"


@dataclass(frozen=True)
class HandleRange:
    """Handles ``first..last`` (inclusive) live on ``server`` (a BMI address like tcp://h:3334)."""

    first: int
    last: int
    server: str

    @property
    def host(self) -> str:
        """Host name of the server address."""
        return urlsplit(self.server).hostname or self.server


def parse_distribution(value: bytes) -> tuple[str, int | None]:
    """Decode ``system.pvfs2.md``: ``(dist_name, strip_size)``; strip_size is None for
    distributions other than simple_stripe. Raises ValueError for a malformed value."""
    if len(value) < 4:
        raise ValueError("system.pvfs2.md value too short")
    (name_length,) = struct.unpack_from("<I", value)
    name_end = 4 + name_length
    padded = (name_end + 1 + 7) // 8 * 8
    if name_length == 0 or len(value) < name_end:
        raise ValueError(f"malformed system.pvfs2.md (name length {name_length}, {len(value)} bytes)")
    name = value[4:name_end].decode("ascii", "replace")
    if name != "simple_stripe":
        return name, None
    if len(value) < padded + 8:
        raise ValueError("system.pvfs2.md: simple_stripe without strip_size")
    (strip_size,) = struct.unpack_from("<q", value, padded)
    if strip_size <= 0:
        raise ValueError(f"system.pvfs2.md: invalid strip_size {strip_size}")
    return name, strip_size


def parse_handles(value: bytes) -> tuple[int, ...]:
    """Decode ``system.pvfs2.dh`` into datafile handles."""
    if len(value) % 8:
        raise ValueError(f"system.pvfs2.dh length {len(value)} is not a multiple of 8")
    return struct.unpack(f"<{len(value) // 8}Q", value)


_ALIAS = re.compile(r"^\s*Alias\s+(\S+)\s+(\S+)", re.MULTILINE)
_DATA_RANGES = re.compile(r"<DataHandleRanges>(.*?)</DataHandleRanges>", re.DOTALL | re.IGNORECASE)
_RANGE = re.compile(r"^[ \t]*Range[ \t]+(\S+)[ \t]+(.*)$", re.MULTILINE)
_EXTENT = re.compile(r"(\d+)-(\d+)")


def parse_server_config(text: str) -> list[HandleRange]:
    """Data handle ranges from an OrangeFS server configuration file (``<Aliases>`` and every
    ``<DataHandleRanges>`` section). A ``Range`` line may list several extents,
    ``Range {alias} {min1}-{max1}[, {min2}-{max2},...]`` (server-config.c)."""
    aliases = dict(_ALIAS.findall(text))
    ranges = []
    for section in _DATA_RANGES.findall(text):
        for alias, extents in _RANGE.findall(section):
            for first, last in _EXTENT.findall(extents):
                ranges.append(HandleRange(int(first), int(last), aliases.get(alias, alias)))
    return ranges


def _server_of(handle: int, ranges: list[HandleRange]) -> HandleRange | None:
    for r in ranges:
        if r.first <= handle <= r.last:
            return r
    return None


def read_layout(read_xattr: Callable[[str], bytes | None], server_config: str | None = None):
    """The layout of a file on an OrangeFS mount, or None (not a striped regular file).

    ``server_config`` is the text of the OrangeFS server configuration, used to name the server
    (and host) of each datafile.
    """
    dist, handles = read_xattr(DIST_XATTR), read_xattr(HANDLES_XATTR)
    if not dist or not handles:
        return None
    name, strip_size = parse_distribution(dist)
    handle_list = parse_handles(handles)
    if strip_size is None or not handle_list:
        return None  # a distribution we do not model (basic_dist, twod_stripe, varstrip)
    ranges = parse_server_config(server_config) if server_config else []
    targets, hosts = [], []
    for handle in handle_list:
        server = _server_of(handle, ranges)
        targets.append(server.server if server else f"handle:{handle:016x}")
        hosts.append((server.host,) if server else ())
    return RoundRobinLayout(strip_size, tuple(targets), tuple(hosts) if ranges else ())
