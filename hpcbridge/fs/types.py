"""Value objects of the file API: what a backend can do, what a file is, where its bytes live."""

from __future__ import annotations

import dataclasses
import stat as _stat
from dataclasses import dataclass, field

__all__ = ["Capabilities", "FileInfo", "BlockLocation", "FileType"]


@dataclass(frozen=True)
class Capabilities:
    """What a backend supports, so callers choose a strategy without ``isinstance`` checks.

    Every backend class sets one frozen instance as its ``capabilities`` attribute. The
    conformance suite reads it to decide which behaviour to expect, and later layers read it to
    pick an I/O strategy (for example: positional writes where ``positional_write`` holds, one
    log per writer in a PLFS container where it does not).
    """

    #: ``pwrite`` at any offset of an existing file (HDFS: no).
    positional_write: bool = True
    #: Opening with ``"r+b"``/``"w+b"`` (read and write on one handle).
    read_write: bool = True
    #: Opening with ``"ab"`` appends to an existing file.
    append: bool = True
    #: Several processes may write one file at the same time (HDFS: one writer per file).
    concurrent_writers: bool = True
    #: ``rename`` replaces an existing destination file atomically, as POSIX ``rename(2)``.
    rename_replaces: bool = True
    #: ``block_locations`` reports real placement (hosts or storage targets), not a guess.
    block_locations: bool = True
    #: Extended attributes (``getxattr``/``setxattr``/``listxattr``).
    xattrs: bool = False
    #: Permission bits and owners are enforced and reported.
    permissions: bool = True
    #: Bytes written through an unbuffered handle reach the store at once: other readers see
    #: them and they survive a crash of the writing process without ``sync`` (POSIX: the page
    #: cache). HDFS: no (a packet waits for hsync); layers above flush harder there.
    visible_writes: bool = True
    #: Files can be truncated to an arbitrary length.
    truncate: bool = True
    #: Files are log-structured containers (PLFS): every writer appends to its own log, so many
    #: processes write one file at once, each open is a writer of its own, and
    #: :meth:`~hpcbridge.fs.base.FileSystem.open_collective` opens a file for all ranks of an
    #: MPI job (the MPI layer and the mount ask this, never the backend's class).
    log_structured: bool = False
    #: Other processes see the same files (``memory://``: no, its store lives in one process),
    #: so the ranks of an MPI job, Dask's worker processes and a mount daemon can share them.
    shared_between_processes: bool = True
    #: Handles map a byte range into memory (``map_range``): reads served from the page cache
    #: with no copy (POSIX: ``mmap``). Remote and log-structured files: no.
    memory_map: bool = False

    def replace(self, **changes: bool) -> "Capabilities":
        """Return a copy with some capabilities changed (for wrapper backends)."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, bool]:
        """The capabilities as a plain dict (for ``--json`` output and reports)."""
        return dataclasses.asdict(self)


class FileType:
    """The ``type`` values of :class:`FileInfo` (plain strings, as fsspec uses)."""

    FILE = "file"
    DIRECTORY = "directory"
    OTHER = "other"


@dataclass(frozen=True)
class FileInfo:
    """Metadata of one file or directory, the same fields on every backend.

    Attributes
    ----------
    path:
        Absolute path inside the backend (no scheme or host).
    url:
        Full URL of the entry.
    type:
        ``"file"``, ``"directory"`` or ``"other"`` (see :class:`FileType`).
    size:
        Size in bytes (0 for directories on backends without directory sizes).
    mtime:
        Modification time, seconds since the epoch.
    mode:
        Permission bits and file type bits, as ``st_mode``.
    owner, group:
        Owner and group names (numeric strings where no name is known).
    uid, gid:
        Numeric ids (HDFS maps names to ids; see the HDFS backend).
    replication:
        Number of copies the backend keeps (1 for POSIX: redundancy, if any, is below it).
    block_size:
        The unit the backend places data in: HDFS block, stripe size, or the logical block size.
    """

    path: str
    url: str
    type: str
    size: int
    mtime: float = 0.0
    mode: int = 0
    owner: str = ""
    group: str = ""
    uid: int = -1
    gid: int = -1
    replication: int = 1
    block_size: int = 0

    @property
    def is_file(self) -> bool:
        """True for a regular file."""
        return self.type == FileType.FILE

    @property
    def is_dir(self) -> bool:
        """True for a directory."""
        return self.type == FileType.DIRECTORY

    @property
    def permissions(self) -> str:
        """``ls -l`` style permission string, e.g. ``-rw-r--r--``."""
        return _stat.filemode(self.mode)

    def as_dict(self) -> dict:
        """The fields as a plain dict (``--json`` output, fsspec ``info``)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class BlockLocation:
    """Where one range of a file's bytes is stored, in Hadoop's ``BlockLocation`` terms.

    Attributes
    ----------
    offset, length:
        The byte range of the file this block covers.
    hosts:
        Hosts that hold a copy of the range and can serve it locally, best first. Empty when
        the layout is known but the hosts are not (e.g. CephFS objects placed by CRUSH).
    racks:
        Network location of each host (``/rack0``), parallel to ``hosts`` where known.
    targets:
        Storage targets holding the range, in the backend's own names: DataNode transfer
        addresses, Lustre OSTs (``OST0003``), OrangeFS datafile servers, Ceph object names.
    """

    offset: int
    length: int
    hosts: tuple[str, ...] = ()
    racks: tuple[str, ...] = ()
    targets: tuple[str, ...] = field(default=())

    @property
    def end(self) -> int:
        """One past the last byte of the block."""
        return self.offset + self.length

    def as_dict(self) -> dict:
        """The fields as a plain dict (lists instead of tuples) for JSON output."""
        return {
            "offset": self.offset,
            "length": self.length,
            "hosts": list(self.hosts),
            "racks": list(self.racks),
            "targets": list(self.targets),
        }
