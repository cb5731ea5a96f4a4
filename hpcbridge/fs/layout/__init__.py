"""Block layouts of files on mounted file systems, read from what each file system exposes.

:func:`posix_block_locations` finds the mount of a path (``/proc/self/mountinfo``), picks the
parser for its file system type, reads the extended attributes that parser names, and maps the
requested byte range onto storage blocks:

=====================  ======================================  ===============================
file system type       source of the layout                    hosts / targets reported
=====================  ======================================  ===============================
``pvfs2`` (OrangeFS)   ``user.pvfs2.*`` xattrs (orangefs.py)   datafile servers, round robin
``lustre``             ``lustre.lov`` xattr (lustre.py)        OSTs (``OST0003``), RAID-0
``ceph``               ``ceph.file.layout.*`` (cephfs.py)      object names; hosts unknown
ext4, xfs, tmpfs, ...  none: the file is on this host          this host, cut at block_size
nfs, gpfs, others      none exposed                            hosts unknown, cut at block_size
=====================  ======================================  ===============================

docs/layout.md describes what each parser reads.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

from ..types import BlockLocation
from .mountinfo import Mount, find_mount

__all__ = [
    "DEFAULT_LOGICAL_BLOCK_SIZE",
    "LOCAL_FS_TYPES",
    "chunked_blocks",
    "striped_blocks",
    "posix_block_locations",
    "layout_for",
]

#: The seeds' chunk size (HDFS and PVFS-shim default): 64 MiB.
DEFAULT_LOGICAL_BLOCK_SIZE = 64 << 20

#: File system types whose files live on this host's own disks or memory.
LOCAL_FS_TYPES = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "overlay", "zfs", "f2fs", "jfs",
    "reiserfs", "vfat", "exfat", "ntfs", "ntfs3", "squashfs", "bcachefs", "devtmpfs",
})

Locator = Callable[[int], tuple[tuple[str, ...], tuple[str, ...]]]


def striped_blocks(start: int, length: int, unit: int, locate: Locator,
                   merge_up_to: int = 0) -> list[BlockLocation]:
    """Cut ``[start, start+length)`` at multiples of ``unit`` and place each piece.

    ``locate(i)`` returns ``(hosts, targets)`` of unit ``i`` (the bytes ``[i*unit, (i+1)*unit)``).
    Consecutive units in the same place merge into one block of at most ``merge_up_to`` bytes
    (0: never merge), so a file striped over one target is not reported stripe by stripe.
    """
    if unit <= 0:
        raise ValueError(f"stripe unit must be positive, got {unit}")
    end = start + length
    blocks: list[BlockLocation] = []
    index = start // unit
    position = start
    while position < end:
        piece_end = min((index + 1) * unit, end)
        hosts, targets = locate(index)
        last = blocks[-1] if blocks else None
        if (
            last is not None
            and merge_up_to
            and last.hosts == hosts
            and last.targets == targets
            and last.length + (piece_end - position) <= merge_up_to
        ):
            blocks[-1] = BlockLocation(last.offset, piece_end - last.offset, hosts, last.racks, targets)
        else:
            blocks.append(BlockLocation(position, piece_end - position, hosts, (), targets))
        position = piece_end
        index += 1
    return blocks


def chunked_blocks(start: int, length: int, block_size: int, hosts: tuple[str, ...] = ()) -> list[BlockLocation]:
    """Cut a range at logical block boundaries, every block on the same ``hosts``."""
    placement = (hosts, ())
    return striped_blocks(start, length, block_size, lambda _index: placement)


def _xattr_reader(path: str) -> Callable[[str], bytes | None]:
    def read(name: str) -> bytes | None:
        try:
            return os.getxattr(path, name)
        except OSError:
            return None

    return read


def layout_for(mount: Mount, read_xattr: Callable[[str], bytes | None], inode: int | None = None,
               orangefs_config: str | None = None, orangefs_config_path: str | None = None):
    """The parsed layout of a file on ``mount`` (an object with ``blocks(start, length, merge)``),
    or None where the file system exposes none.

    ``inode`` names Ceph objects; ``orangefs_config`` (server configuration text, read from
    ``orangefs_config_path``, which errors name) names the OrangeFS servers of each datafile,
    from the ``<FileSystem>`` section named by the mount's source (``tcp://host:3334/<name>``).
    """
    fstype = mount.fstype
    if fstype == "pvfs2" or "pvfs2" in fstype or "orangefs" in fstype:
        from . import orangefs

        return orangefs.read_layout(read_xattr, orangefs_config, orangefs.mounted_fs_name(mount.source),
                                    orangefs_config_path or "the OrangeFS server configuration")
    if fstype == "lustre":
        from . import lustre

        # mgsnid[:mgsnid]:/fsname[/subdir]: OSTs are named after the file system, not the subdirectory.
        fsname = mount.source.rsplit(":/", 1)[-1].split("/", 1)[0] if ":/" in mount.source else ""
        return lustre.read_layout(read_xattr, fsname)
    if fstype in ("ceph", "fuse.ceph-fuse"):
        from . import cephfs

        return cephfs.read_layout(read_xattr, inode)
    return None


def posix_block_locations(path: str, start: int, length: int, block_size: int,
                          hostname: str | None = None, mount: Mount | None = None,
                          read_xattr: Callable[[str], bytes | None] | None = None,
                          inode: int | None = None, orangefs_config: str | None = None,
                          orangefs_config_path: str | None = None) -> list[BlockLocation]:
    """Block locations of ``[start, start+length)`` of the file at OS path ``path``.

    ``mount`` and ``read_xattr`` default to the real mount table and ``os.getxattr``; tests pass
    recorded values to exercise the parsers of file systems this machine does not have.
    """
    mount = mount or find_mount(path)
    if inode is None and mount.fstype in ("ceph", "fuse.ceph-fuse"):
        inode = os.stat(path).st_ino
    layout = layout_for(mount, read_xattr or _xattr_reader(path), inode, orangefs_config, orangefs_config_path)
    if layout is not None:
        return layout.blocks(start, length, block_size)
    if mount.fstype in LOCAL_FS_TYPES:
        return chunked_blocks(start, length, block_size, (hostname or socket.gethostname(),))
    # A network or unknown file system without an exposed layout: the blocks are real, the
    # hosts are not known, and claiming this host would mislead a locality-aware scheduler.
    return chunked_blocks(start, length, block_size, ())
