"""OrangeFS (PVFS2) layouts from the ``system.pvfs2.md`` and ``system.pvfs2.dh`` xattrs.

What the kernel client (fs/orangefs) passes through, as pvfs2-viewdist reads it:

* ``system.pvfs2.md``: the file's distribution, little-endian: ``u32 name length``, the name and
  a NUL padded to a multiple of 8, then the distribution's parameters; for ``simple_stripe`` an
  ``int64 strip_size``. Trailing bytes beyond the encoding are ignored.
* ``system.pvfs2.dh``: the datafile handles, ``N x uint64`` (host order); datafile ``i`` holds
  strips ``i, i+N, i+2N, ...`` (simple_stripe is round-robin, like RAID-0).

Both are hidden from ``listxattr`` and read by name. A handle belongs to the server whose
``DataHandleRanges`` range (server configuration file) contains it, in the ``<FileSystem>``
section of the mounted file system (its ``Name`` ends the mount's source,
``tcp://host:3334/<name>``); given that file, datafiles are reported on their servers' hosts,
otherwise by handle only.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from .striping import RoundRobinLayout

__all__ = ["DIST_XATTR", "HANDLES_XATTR", "HandleRange", "mounted_fs_name", "parse_distribution",
           "parse_handles", "parse_server_config", "read_layout"]

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
_COMMENT = re.compile(r"^[ \t]*#.*$", re.MULTILINE)
_FILE_SYSTEM = re.compile(r"<FileSystem>(.*?)</FileSystem>", re.DOTALL | re.IGNORECASE)
_SUBSECTION = re.compile(r"<(\w+)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_NAME = re.compile(r"^[ \t]*Name[ \t]+(\S+)", re.MULTILINE | re.IGNORECASE)
_DATA_RANGES = re.compile(r"<DataHandleRanges>(.*?)</DataHandleRanges>", re.DOTALL | re.IGNORECASE)
_RANGE = re.compile(r"^[ \t]*Range[ \t]+(\S+)[ \t]+(.*)$", re.MULTILINE)
_EXTENT = re.compile(r"(\d+)-(\d+)")


def mounted_fs_name(source: str) -> str | None:
    """The file system name of an OrangeFS mount's source, ``tcp://host:3334/orangefs`` (the
    ``Name`` of its ``<FileSystem>`` section), or None if the source does not say (a FUSE mount)."""
    last = source.rsplit(",", 1)[-1]  # several addresses: tcp://a:3334,tcp://b:3334/orangefs
    if "://" not in last:
        return None
    return urlsplit(last).path.strip("/") or None


def _file_system_section(text: str, fs_name: str | None, config: str) -> str:
    """The body of the ``<FileSystem>`` section of ``fs_name`` (any section if the text has one
    and no name is given); the whole text if it has none (a fragment of ranges)."""
    sections = _FILE_SYSTEM.findall(text)
    if not sections:
        return text
    # Its own Name, not that of a nested <Distribution> or <StorageHints> section.
    names = [m.group(1) if (m := _NAME.search(_SUBSECTION.sub("", body))) else None for body in sections]
    if fs_name is None:
        if len(sections) == 1:
            return sections[0]
        raise ValueError(f"{config} describes {len(sections)} OrangeFS file systems ({', '.join(map(str, names))}) "
                         f"and the mount does not name one: cannot tell whose handle ranges to use")
    chosen = [body for body, name in zip(sections, names) if name == fs_name]
    if len(chosen) != 1:
        which = "no OrangeFS file system" if not chosen else "several OrangeFS file systems"
        raise ValueError(f"{config} describes {which} named {fs_name!r} (it has {', '.join(map(str, names))}): "
                         f"cannot tell the servers of its handles")
    return chosen[0]


def parse_server_config(text: str, fs_name: str | None = None,
                        config: str = "the OrangeFS server configuration") -> list[HandleRange]:
    """Data handle ranges of file system ``fs_name`` from an OrangeFS server configuration file
    (``<Aliases>`` and the ``<DataHandleRanges>`` of that ``<FileSystem>`` section).

    A ``Range`` line may list several extents, ``Range {alias} {min1}-{max1}[, {min2}-{max2},...]``
    (server-config.c). The section is the one whose ``Name`` is ``fs_name``; without
    ``fs_name``, the only one. Handles of different file systems overlap (each numbers its own),
    so taking another's ranges would name the wrong servers: a configuration without that file
    system, or with several and no ``fs_name``, is a ``ValueError`` naming ``config``.
    """
    text = _COMMENT.sub("", text)
    aliases = dict(_ALIAS.findall(text))
    ranges = []
    for section in _DATA_RANGES.findall(_file_system_section(text, fs_name, config)):
        for alias, extents in _RANGE.findall(section):
            for first, last in _EXTENT.findall(extents):
                ranges.append(HandleRange(int(first), int(last), aliases.get(alias, alias)))
    return ranges


def _server_of(handle: int, ranges: list[HandleRange]) -> HandleRange | None:
    for r in ranges:
        if r.first <= handle <= r.last:
            return r
    return None


def read_layout(read_xattr: Callable[[str], bytes | None], server_config: str | None = None,
                fs_name: str | None = None, config: str = "the OrangeFS server configuration"):
    """The layout of a file on an OrangeFS mount, or None (not a striped regular file).

    ``server_config`` is the text of the OrangeFS server configuration (``config``: its path, for
    errors), used to name the server (and host) of each datafile through the handle ranges of
    the mounted file system ``fs_name`` (see :func:`parse_server_config`).
    """
    dist, handles = read_xattr(DIST_XATTR), read_xattr(HANDLES_XATTR)
    if not dist or not handles:
        return None
    name, strip_size = parse_distribution(dist)
    handle_list = parse_handles(handles)
    if strip_size is None or not handle_list:
        return None  # a distribution we do not model (basic_dist, twod_stripe, varstrip)
    ranges = parse_server_config(server_config, fs_name, config) if server_config else []
    targets, hosts = [], []
    for handle in handle_list:
        server = _server_of(handle, ranges)
        targets.append(server.server if server else f"handle:{handle:016x}")
        hosts.append((server.host,) if server else ())
    return RoundRobinLayout(strip_size, tuple(targets), tuple(hosts) if ranges else ())
