"""Copying files between any two backends, so that nothing half-written is ever left behind.

A copy goes to a hidden partial file beside the destination and is renamed into place only
after the last byte is written and synced (zarr's atomic write); a failure removes the partial
file and leaves any previous destination untouched. Data moves in large chunks through one
reused buffer with ``readinto``, so a copy costs no allocation per chunk.
"""

from __future__ import annotations

import errno
import uuid
from collections.abc import Callable

from .base import FileSystem
from .url import hidden_sibling

__all__ = ["copy_file", "keeps_permissions", "DEFAULT_CHUNK_SIZE"]

DEFAULT_CHUNK_SIZE = 8 << 20


def _partial_name(path: str) -> str:
    return hidden_sibling(path, f"hpcbridge-partial-{uuid.uuid4().hex[:12]}")


def _open_partial(dst_fs: FileSystem, partial: str, dst: str):
    """Open the partial file; a missing parent directory is reported under the destination's
    name (the partial file's hidden name means nothing to the user)."""
    try:
        return dst_fs.open(partial, "wb", buffering=0)
    except FileNotFoundError:
        parent = dst.rpartition("/")[0] or "/"
        raise dst_fs._error(errno.ENOENT, dst, f"its directory {dst_fs.url(parent)} does not exist") from None
    except NotADirectoryError:
        parent = dst.rpartition("/")[0] or "/"
        raise dst_fs._error(errno.ENOTDIR, dst, f"{dst_fs.url(parent)} is not a directory") from None


def copy_file(
    src_fs: FileSystem,
    src_path: str,
    dst_fs: FileSystem,
    dst_path: str,
    *,
    overwrite: bool = True,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    progress: Callable[[int], object] | None = None,
    sync: bool = True,
) -> int:
    """Copy one file from ``src_fs`` to ``dst_fs`` atomically; return the bytes copied.

    Parameters
    ----------
    overwrite:
        Replace an existing destination file (else FileExistsError).
    chunk_size:
        Bytes per read/write.
    progress:
        Called with the byte count of each chunk as it is written (e.g. ``tqdm.update``).
    sync:
        Make the copy durable (fsync/hsync) before it is renamed into place.
    """
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    src = src_fs._path(src_path)
    dst = dst_fs._path(dst_path)
    info = src_fs.info(src)
    if info.is_dir:
        raise src_fs._error(errno.EISDIR, src, "copy a directory with recursive=True")
    if dst_fs.exists(dst):
        if dst_fs.isdir(dst):
            raise dst_fs._error(errno.EISDIR, dst)
        if not overwrite:
            raise dst_fs._error(errno.EEXIST, dst, "pass overwrite=True to replace it")
    partial = _partial_name(dst)
    removed = False  # the destination replaced was removed (a service whose rename cannot replace)
    buffer = bytearray(min(chunk_size, max(info.size, 1)))
    view = memoryview(buffer)
    copied = 0
    try:
        with src_fs.open(src, "rb", buffering=0) as reader, _open_partial(dst_fs, partial, dst) as writer:
            while True:
                n = reader.readinto(view)
                if not n:
                    break
                written = 0
                while written < n:
                    written += writer.write(view[written:n])
                copied += n
                if progress is not None:
                    progress(n)
            if sync:
                writer.sync()
        if copied != info.size:  # the source ended early (it shrank, or is damaged): name it
            raise src_fs._error(errno.EIO, src, f"read {copied} of its {info.size} bytes; {dst_fs.url(dst)} "
                                                "was left as it was")
        if keeps_permissions(src_fs, dst_fs):
            dst_fs.chmod(partial, info.mode & 0o7777)  # as cp: the source's permission bits
        if not overwrite:
            # Never remove or replace what appeared at dst meanwhile: link(2) refuses it, and
            # so does HDFS's rename.
            if not dst_fs._rename_no_replace(partial, dst):
                dst_fs.rename(partial, dst)
        elif dst_fs.capabilities.rename_replaces or not dst_fs.exists(dst):
            dst_fs.rename(partial, dst)
        elif not dst_fs._replace_file(partial, dst):
            removed = True  # from here the partial file is the only copy: never remove it
            dst_fs.rm(dst)
            dst_fs.rename(partial, dst)
    except BaseException:
        if removed:
            _put_in_place(dst_fs, partial, dst)
        else:
            try:
                dst_fs.rm(partial)
            except OSError:
                pass
        raise
    return copied


def keeps_permissions(src_fs: FileSystem, dst_fs: FileSystem) -> bool:
    """Whether a copy from ``src_fs`` to ``dst_fs`` gives the copy its source's permission bits,
    as ``cp`` does: both keep permission bits and the destination can set them."""
    return src_fs.capabilities.permissions and dst_fs.capabilities.permissions and hasattr(dst_fs, "chmod")


def _put_in_place(dst_fs: FileSystem, partial: str, dst: str) -> None:
    """After the destination was removed for a copy that then failed (Ctrl-C between the remove
    and the rename): the complete copy takes its place, or, where that fails, stays under its
    hidden partial name, rather than leaving neither the old file nor the new one."""
    try:
        if dst_fs.exists(dst):  # not removed after all (or already renamed): the partial file goes
            dst_fs.rm(partial)
        elif dst_fs.exists(partial):
            dst_fs.rename(partial, dst)
    except OSError:
        pass
