"""What ``hpcbridge put/get -r`` copies: the directories to make and the files to copy, planned
before the first byte moves, so that a tree that cannot be copied safely is refused up front.

Safety rules, as ``cp -r`` keeps them:

* a directory is never copied into itself (``put -r src file:///.../src/inner`` recursed until
  ENAMETOOLONG);
* symbolic links in a local source are skipped by default (``--links skip``, each one reported),
  recreated as links where the destination is a local directory (``--links copy``), or followed
  (``--links follow``), with directory loops detected and reported instead of descended into.
  Following links silently turned ``sub/loop -> ..`` into 80 nested copies and a link to /etc
  into an upload of /etc;
* each directory's permission bits are recorded, so that the directories the copy makes keep
  them as ``cp -r`` keeps them (a private 0700 directory was copied as 0755, its file names
  readable by everyone).
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from dataclasses import dataclass, field

from ..fs.base import FileSystem
from ..fs.url import hidden_sibling

__all__ = ["CopyPlan", "plan_copy", "copy_link", "LINK_MODES"]

LINK_MODES = ("skip", "copy", "follow")
#: The permission bits a directory's copy keeps: as ``cp -r`` (without ``-p``), not set-user-ID
#: or set-group-ID.
_DIRECTORY_BITS = 0o1777


@dataclass
class CopyPlan:
    """Directories to create (in order), ``(source, target, size)`` files, ``(source, target)``
    links to recreate, ``(source, reason)`` entries left out, and the source's permission bits
    of each directory to create (by target)."""

    directories: list[str] = field(default_factory=list)
    files: list[tuple[str, str, int]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    directory_modes: dict[str, int] = field(default_factory=dict)


def _local_path(fs: FileSystem, path: str) -> str | None:
    """The local path behind ``path`` when ``fs`` is a local file system, else None."""
    # local_path, not the URL: the URL is percent-encoded ("a b" is a%20b), which os.stat
    # then did not find, and `put -r` of such a directory failed with FileNotFoundError.
    return fs.local_path(path) if fs.url(path).startswith("file://") else None


def _refuse_into_itself(src_fs: FileSystem, src: str, dst_fs: FileSystem, dst: str) -> None:
    src_local, dst_local = _local_path(src_fs, src), _local_path(dst_fs, dst)
    if src_local is not None and dst_local is not None:
        inner, outer = os.path.realpath(dst_local), os.path.realpath(src_local)
    else:
        inner, outer = dst_fs.url(dst), src_fs.url(src)
    if inner == outer or inner.startswith(outer.rstrip("/") + "/"):
        raise OSError(errno.EINVAL, f"cannot copy a directory into itself ({dst_fs.url(dst)} is inside it)",
                      src_fs.url(src))


def plan_copy(src_fs: FileSystem, src: str, dst_fs: FileSystem, dst: str, *, links: str = "skip") -> CopyPlan:
    """Plan the recursive copy of directory ``src`` to directory ``dst`` (which becomes its copy)."""
    if links not in LINK_MODES:
        raise ValueError(f"links must be one of {', '.join(LINK_MODES)}, got {links!r}")
    _refuse_into_itself(src_fs, src, dst_fs, dst)
    plan = CopyPlan(directories=[dst])
    local = _local_path(src_fs, src)
    if local is None:  # remote sources (HDFS, PLFS...) have no symbolic links to worry about
        for directory, dirs, files in src_fs.walk(src):
            target_dir = dst + directory[len(src.rstrip("/")):] if directory != src else dst
            plan.directory_modes[target_dir] = src_fs.info(directory).mode & _DIRECTORY_BITS
            plan.directories += [f"{target_dir.rstrip('/')}/{d}" for d in dirs]
            for name in files:
                source = f"{directory.rstrip('/')}/{name}"
                plan.files.append((source, f"{target_dir.rstrip('/')}/{name}", src_fs.info(source).size))
    else:
        if links == "copy" and _local_path(dst_fs, dst) is None:
            raise ValueError(f"--links copy needs a local destination; {dst_fs.url(dst)} cannot hold symbolic "
                             "links (use --links skip or --links follow)")
        root = os.stat(local)
        plan.directory_modes[dst] = root.st_mode & _DIRECTORY_BITS
        _walk_local(local, src, dst, links, plan, {(root.st_dev, root.st_ino)})
    # A name the destination cannot hold (HDFS: a local name that is not UTF-8) refuses the copy
    # before the first byte moves, not after part of the tree was copied.
    for target in [*plan.directories, *(target for _, target, _ in plan.files)]:
        dst_fs._path(target)
    return plan


def _walk_local(directory: str, src_dir: str, dst_dir: str, links: str, plan: CopyPlan, ancestors: set) -> None:
    """Depth first over one local directory; ``ancestors`` are the (device, inode) pairs of the
    directories on the current path, which is what a followed link must not lead back to."""
    with os.scandir(directory) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    for entry in entries:
        source, target = f"{src_dir.rstrip('/')}/{entry.name}", f"{dst_dir.rstrip('/')}/{entry.name}"
        path = os.path.join(directory, entry.name)
        if entry.is_symlink():
            if links == "skip":
                plan.skipped.append((source, "symbolic link (--links copy or follow to include it)"))
                continue
            if links == "copy":
                plan.links.append((path, target))
                continue
            try:
                st = os.stat(path)
            except OSError:
                plan.skipped.append((source, "dangling symbolic link"))
                continue
        else:
            st = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key in ancestors:
                plan.skipped.append((source, "symbolic link loop (leads back to a directory being copied)"))
                continue
            plan.directories.append(target)
            plan.directory_modes[target] = st.st_mode & _DIRECTORY_BITS
            _walk_local(path, source, target, links, plan, ancestors | {key})
        elif stat.S_ISREG(st.st_mode):
            plan.files.append((source, target, st.st_size))
        else:
            plan.skipped.append((source, "not a regular file (device, socket or FIFO)"))


def copy_link(link: str, target: str, *, overwrite: bool = True) -> None:
    """Recreate the local symbolic link ``link`` at ``target`` (``--links copy``), as ``cp -rP``.

    A file or link already at ``target`` is replaced, as copied files replace theirs, by a
    rename of a new link over it (atomic: never a moment without it); with ``overwrite=False``
    (``-n``) it is FileExistsError. A directory there is never replaced (FileExistsError).
    The second ``put -r --links copy`` into the same place failed on the first link.
    """
    value = os.readlink(link)
    try:
        os.symlink(value, target)
        return
    except FileExistsError:
        if not overwrite:
            raise FileExistsError(errno.EEXIST, "File exists (not replaced: -n/--no-clobber)", target) from None
        if os.path.isdir(target) and not os.path.islink(target):
            raise FileExistsError(errno.EEXIST, "File exists (a directory, not replaced by a link)", target) from None
    partial = hidden_sibling(target, f"hpcbridge-partial-{uuid.uuid4().hex[:12]}")
    os.symlink(value, partial)
    try:
        os.replace(partial, target)
    except BaseException:
        os.unlink(partial)
        raise
