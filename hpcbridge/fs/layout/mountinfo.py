"""Which mounted file system a path lives on, from ``/proc/self/mountinfo``.

Line format (proc(5)): ``mount-id parent-id major:minor root mount-point mount-options
[optional-fields...] - fstype source super-options``; the optional fields end at a lone ``-``,
and spaces, tabs, newlines and backslashes in the mount point, root, file system type
(``fuse.my\\040fs``) and source are escaped as octal (``\\040``).
"""

from __future__ import annotations

import os
import re
import select
import threading
from dataclasses import dataclass

__all__ = ["Mount", "parse_mountinfo", "mount_table", "find_mount"]

_OCTAL = re.compile(r"\\([0-7]{3})")


def _unescape(text: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), text)


@dataclass(frozen=True)
class Mount:
    """One mount: where it is, what file system type, and from which source."""

    mount_point: str
    fstype: str
    source: str
    options: str = ""
    #: ``major:minor`` of the mounted file system, as ``os.stat(path).st_dev`` reports it
    #: ("" when unknown).
    device: str = ""


def parse_mountinfo(text: str) -> list[Mount]:
    """Parse the text of a mountinfo file into :class:`Mount` records (malformed lines skipped)."""
    mounts = []
    # Lines end at "\n" only: the kernel escapes space, tab, newline and backslash in paths but
    # not "\r", "\f", "\x1c".. or U+0085/U+2028 (valid in file names), at which str.splitlines()
    # would also break, dropping the mount.
    for line in text.split("\n"):
        fields = line.split(" ")
        try:
            separator = fields.index("-", 6)
        except ValueError:
            continue
        if len(fields) < separator + 3:
            continue
        mounts.append(Mount(
            mount_point=_unescape(fields[4]),
            # The kernel escapes the type too (show_type: a FUSE subtype is any string).
            fstype=_unescape(fields[separator + 1]),
            source=_unescape(fields[separator + 2]),
            options=fields[5],
            device=fields[2],
        ))
    return mounts


class _MountTable:
    """This process's mount table, parsed once and re-read only after a mount or unmount.

    Block-location queries ask for it once per read task; reading and parsing the file each time
    cost ~0.3 ms, more than reading a 1 MiB block from the page cache. The kernel marks an open
    mountinfo file POLLPRI when the mount namespace changes since the last poll (proc(5)), so
    a zero-timeout poll tells whether the parsed copy is still current.
    """

    PATH = "/proc/self/mountinfo"

    def __init__(self):
        self._lock = threading.Lock()
        self._fd = -1  # a raw descriptor, kept for the process's life (no file object to finalise)
        self._pid = None
        self._poll = None
        self._mounts: list[Mount] = []

    def mounts(self) -> list[Mount]:
        with self._lock:
            if self._fd < 0 or self._pid != os.getpid():  # first use, or a forked child
                self._open()
            elif self._poll.poll(0):
                self._mounts = self._parse()
            return self._mounts

    def _open(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = os.open(self.PATH, os.O_RDONLY | os.O_CLOEXEC)
        self._pid = os.getpid()
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLPRI | select.POLLERR)
        self._mounts = self._parse()

    def _parse(self) -> list[Mount]:
        os.lseek(self._fd, 0, os.SEEK_SET)
        parts = []
        while chunk := os.read(self._fd, 1 << 16):
            parts.append(chunk)
        return parse_mountinfo(b"".join(parts).decode("utf-8", "surrogateescape"))


_TABLE = _MountTable()


def mount_table() -> list[Mount]:
    """This process's mounts, from ``/proc/self/mountinfo`` (re-read only after a mount or an
    unmount). Names are decoded as ``os.fsdecode`` does, so a mount point compares equal to
    ``os.path.realpath`` of it whatever bytes it holds."""
    return _TABLE.mounts()


def _device(real: str) -> str | None:
    """``major:minor`` of the file system holding the real path ``real``, or of its nearest
    existing ancestor (where a new file would go); None if none can be stat'ed."""
    while True:
        try:
            dev = os.stat(real).st_dev
        except (OSError, ValueError):
            parent = os.path.dirname(real)
            if parent == real:
                return None
            real = parent
            continue
        return f"{os.major(dev)}:{os.minor(dev)}"


def find_mount(path: str, mounts: list[Mount] | None = None) -> Mount:
    """The mount holding ``path``: the longest mount point that contains its real path, among
    the mounts whose device is the path's ``st_dev`` when any is (else among all; ``mounts``
    given: a recorded table, placed by the prefix rule alone).

    The device check matters where a mount was made over a directory that already held mounts
    (``/a/b`` mounted, then ``/a``): the older mount is hidden, yet its mount point is the
    longest prefix. Where no mount's device matches (btrfs subvolumes report their own
    ``st_dev``; recorded tables) the prefix rule alone decides. A path that does not exist yet
    is placed by its nearest existing ancestor.
    """
    live = mounts is None  # st_dev says something only about this machine's own table
    if mounts is None:
        mounts = _TABLE.mounts()
    real = os.path.realpath(path)
    containing: list[tuple[str, Mount]] = []
    for mount in mounts:
        point = mount.mount_point.rstrip("/") or "/"
        if point == "/" or real == point or real.startswith(point + "/"):
            containing.append((point, mount))
    device = _device(real) if live else None
    same_device = [(p, m) for p, m in containing if device and m.device == device]
    best: Mount | None = None
    best_length = -1
    for point, mount in same_device or containing:
        # Later lines are later mounts: on a tie the last one shadows the others.
        if len(point) >= best_length:
            best, best_length = mount, len(point)
    return best if best is not None else Mount("/", "unknown", "unknown")
