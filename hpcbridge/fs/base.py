"""The abstract FileSystem every backend implements.

A backend subclasses :class:`FileSystem`, sets ``scheme``, ``backend_name`` and
``capabilities``, and implements the small protected core marked ``@abstractmethod``
(``_open_raw``, ``_info``, ``_iterdir``, ``_mkdir``, ``_rm_file``, ``_rmdir``, ``_rename``,
``_block_locations``). The public methods here validate arguments once for every backend
(absolute paths, URLs of the right file system, non-negative offsets, capabilities) and build
the rest (``ls``, ``walk``, ``rm -r``, ``pread``/``pwrite``, ``read_ranges``, ...) on that core.
A backend may override any of those for speed.

Protected methods receive normalised absolute paths (no scheme, no host) and raise the builtin
``OSError`` subclasses with the URL as ``filename`` (see :func:`hpcbridge.errors.os_error`).
"""

from __future__ import annotations

import abc
import errno
import io
import operator
import os
from collections.abc import Iterable, Iterator
from typing import ClassVar

from ..errors import InvalidURLError, os_error
from .file import OpenMode, buffer_length, check_offset, check_range, check_text_arguments, wrap_raw
from .ranges import merge_ranges
from .types import BlockLocation, Capabilities, FileInfo, FileType
from .url import format_url, normalize_path, parse_url

__all__ = ["FileSystem"]


def _rebuild_filesystem(cls, netloc, options):
    return cls(netloc, **options)


class FileSystem(abc.ABC):
    """A storage backend addressed by URLs of one scheme and one authority (host:port).

    Obtain one with :func:`hpcbridge.connect`. All paths given to its methods are absolute
    paths (``/data/x``) or full URLs of this file system (``hdfs://nn:9820/data/x``).

    Instances pickle to their URL authority and options, so they can be sent to MPI ranks and
    Dask workers, where they reconnect.
    """

    #: URL scheme served (``"file"``, ``"hdfs"``, ...).
    scheme: ClassVar[str] = ""
    #: Short name used in error messages (``"posix"``).
    backend_name: ClassVar[str] = ""
    #: What the backend supports; see :class:`~hpcbridge.fs.types.Capabilities`.
    capabilities: ClassVar[Capabilities] = Capabilities()
    #: Appended to io.UnsupportedOperation messages: what to use instead on this backend.
    unsupported_advice: ClassVar[str] = ""
    #: Default buffer of ``open``. Reads and writes LARGER than it bypass the buffer and go
    #: straight between the caller's memory and the raw file (io's rule), so it should stay
    #: below the transfer sizes that matter; remote backends raise it to amortise round trips.
    buffer_size: ClassVar[int] = 1 << 20

    def __init__(self, netloc: str = "", **options):
        #: ``host:port`` (or ``user@host:port``) of the service; empty for local backends.
        self.netloc = netloc
        #: The options the file system was created with (kept for pickling).
        self.options = dict(options)

    @classmethod
    def from_url(cls, url, **options) -> "FileSystem":
        """Create the file system serving ``url`` (a :class:`~hpcbridge.fs.url.URL`)."""
        return cls(url.netloc, **options)

    # -- identity ---------------------------------------------------------------------------
    def __reduce__(self):
        return (_rebuild_filesystem, (type(self), self.netloc, self.options))

    def __eq__(self, other) -> bool:
        return (
            type(other) is type(self)
            and other.netloc == self.netloc
            and other.options == self.options
        )

    def __hash__(self) -> int:
        return hash((type(self), self.netloc, tuple(sorted(self.options.items(), key=str))))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.scheme}://{self.netloc}>"

    def url(self, path: str) -> str:
        """The full URL of absolute ``path`` on this file system."""
        return format_url(self.scheme, self.netloc, path)

    def _path(self, path) -> str:
        """Normalise a path or URL of this file system to an absolute path, or raise."""
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, str):
            raise TypeError(f"expected a path or URL string, got {type(path).__name__}: {path!r}")
        if path.startswith("/"):
            return normalize_path(path)
        parsed = parse_url(path)
        if parsed.scheme != self.scheme or parsed.netloc != self.netloc:
            raise InvalidURLError(
                f"{path!r} is not on this file system ({self.scheme}://{self.netloc}); "
                "use hpcbridge.connect() for it"
            )
        return parsed.path

    def _error(self, code: int, path: str, detail: str | None = None) -> OSError:
        return os_error(code, self.url(path), self.backend_name, detail)

    def _unsupported(self, what: str, path: str, advice: str = "") -> io.UnsupportedOperation:
        text = f"{what} is not supported by the {self.backend_name} backend ({self.url(path)})"
        return io.UnsupportedOperation(text + (f"; {advice}" if advice else ""))

    # -- the core a backend implements ------------------------------------------------------
    @abc.abstractmethod
    def _open_raw(self, path: str, mode: OpenMode):
        """Open ``path`` unbuffered: an io.RawIOBase with ``preadinto``/``pwrite``/``sync``."""

    @abc.abstractmethod
    def _info(self, path: str) -> FileInfo:
        """Metadata of ``path``; FileNotFoundError if it does not exist."""

    def _type(self, path: str) -> str:
        """The :class:`FileType` of ``path`` (FileNotFoundError if it does not exist): all that
        ``exists``, ``isdir``, ``isfile``, ``rm`` and ``iterdir`` ask. From :meth:`_info` unless a
        backend knows the type for less (a PLFS file's size takes its metadata records, or, while
        a writer is open, every index log)."""
        return self._info(path).type

    @abc.abstractmethod
    def _iterdir(self, path: str) -> Iterator[FileInfo]:
        """Entries of directory ``path``, streamed, in any order."""

    @abc.abstractmethod
    def _mkdir(self, path: str, parents: bool, exist_ok: bool) -> None:
        """Create directory ``path`` with POSIX ``mkdir``/``mkdir -p`` semantics."""

    @abc.abstractmethod
    def _rm_file(self, path: str) -> None:
        """Remove the file ``path``."""

    @abc.abstractmethod
    def _rmdir(self, path: str) -> None:
        """Remove the empty directory ``path``."""

    @abc.abstractmethod
    def _rename(self, src: str, dst: str) -> None:
        """Rename with POSIX ``rename(2)`` semantics (replacing a destination file)."""

    def _block_locations(self, path: str, info: FileInfo, start: int, length: int) -> list[BlockLocation]:
        """Blocks covering ``[start, start+length)`` of file ``path`` (already clipped to its size).

        Default, for stores that do not say where bytes live (``capabilities.block_locations``
        false): the range as one block on no particular host.
        """
        return [BlockLocation(start, length, (), (), ())]

    # -- public API -------------------------------------------------------------------------
    def open(self, path, mode: str = "rb", buffering: int = -1, encoding=None, errors=None, newline=None):
        """Open a file, as the builtin ``open``: binary and buffered by default.

        Parameters
        ----------
        path:
            Absolute path or URL on this file system.
        mode:
            ``rb``, ``wb``, ``ab``, ``xb``, ``r+b``, ``w+b``...; without ``b`` the file is
            opened in text mode (UTF-8 unless ``encoding`` says otherwise).
        buffering:
            Buffer size in bytes; ``0`` for an unbuffered raw file; ``-1`` for the default (1 MiB).

        Returns
        -------
        A file object (context manager) with ``read``/``readinto``/``write``/``seek`` and, in
        binary mode, positional ``pread``/``preadinto``/``pwrite`` and ``sync``.
        """
        p = self._path(path)
        m = OpenMode.parse(mode, self.url(p))
        # Arguments are checked before the file is opened, as open() checks them: a truncating
        # open must not empty the file and then fail.
        buffering = operator.index(buffering)  # TypeError for None, floats, strings
        if buffering < 0:
            buffering = -1
        if not m.text:
            for name, value in (("an encoding", encoding), ("an errors", errors), ("a newline", newline)):
                if value is not None:
                    raise ValueError(f"binary mode doesn't take {name} argument ({self.url(p)})")
        else:
            # open() checks the encoding, newline and buffering values only once the file is open,
            # so a bad one has emptied (or created) it: a writing mode checks them first. A
            # read-only open keeps open()'s order (a missing file is FileNotFoundError).
            check_text_arguments(encoding, errors, newline, buffering, self.url(p), values=m.writable)
        if m.readable and m.writable and not self.capabilities.read_write:
            raise self._unsupported(f"read-write mode {mode!r}", p,
                                    self.unsupported_advice or "open for reading or writing only")
        if m.append and not self.capabilities.append:
            raise self._unsupported("append mode", p)
        raw = self._open_raw(p, m)
        try:
            if m.text and not m.writable:
                check_text_arguments(encoding, errors, newline, buffering, self.url(p))
            return self._wrap(raw, m, buffering, encoding, errors, newline)
        except BaseException:
            raw.close()
            raise

    def _wrap(self, raw, mode: OpenMode, buffering: int, encoding, errors, newline):
        """Buffer a raw file for ``open`` (a backend may use its own reader, e.g. readahead)."""
        return wrap_raw(raw, mode, buffering, encoding, errors, newline, self.buffer_size)

    def info(self, path) -> FileInfo:
        """Metadata of a file or directory (size, type, mtime, mode, owner, replication, block size)."""
        return self._info(self._path(path))

    def version(self, path) -> tuple:
        """What tells one version of a file from another, for caches of what was read from it:
        its size and mtime here; backends that know more add it (POSIX: device, inode and
        change time, which a rewrite keeping size and mtime, ``cp -p`` or ``rsync -a``, changes)."""
        info = self.info(path)
        return (info.size, info.mtime)

    def exists(self, path) -> bool:
        """Whether ``path`` exists."""
        try:
            self._type(self._path(path))
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def isdir(self, path) -> bool:
        """Whether ``path`` is an existing directory."""
        try:
            return self._type(self._path(path)) == FileType.DIRECTORY
        except (FileNotFoundError, NotADirectoryError):
            return False

    def islink(self, path) -> bool:
        """Whether ``path`` is a symbolic link (dangling or not), as ``os.path.islink``; False on
        backends without links. ``walk``/``find`` do not descend into links to directories and
        ``rm`` removes the link itself, never what it points to (docs/file-api.md)."""
        return False

    def isfile(self, path) -> bool:
        """Whether ``path`` is an existing regular file."""
        try:
            return self._type(self._path(path)) == FileType.FILE
        except (FileNotFoundError, NotADirectoryError):
            return False

    def iterdir(self, path) -> Iterator[FileInfo]:
        """Stream the entries of a directory (no full listing held in memory)."""
        p = self._path(path)
        if self._type(p) != FileType.DIRECTORY:
            raise self._error(errno.ENOTDIR, p)
        return self._iterdir(p)

    def ls(self, path, detail: bool = False) -> list:
        """List a directory, sorted by name: paths, or :class:`FileInfo` with ``detail=True``.

        Listing a file returns that file alone, as ``ls`` does.
        """
        p = self._path(path)
        info = self._info(p)
        entries = [info] if not info.is_dir else sorted(self._iterdir(p), key=lambda e: e.path)
        return entries if detail else [e.path for e in entries]

    def walk(self, path) -> Iterator[tuple[str, list[str], list[str]]]:
        """Walk a tree top-down like ``os.walk``: ``(dirpath, dirnames, filenames)``.

        As ``os.walk(followlinks=False)``: a symbolic link to a directory is listed in
        ``dirnames`` but not descended into (following them repeated files, or looped), and
        other links are listed in ``filenames``. ``path`` itself is walked even if a link.
        """
        top = self._path(path)
        stack = [top]
        while stack:
            current = stack.pop()
            dirs, files = [], []
            for entry in self._iterdir(current):
                name = entry.path.rsplit("/", 1)[-1]
                (dirs if entry.is_dir else files).append(name)
            dirs.sort()
            files.sort()
            yield current, dirs, files
            below = (f"{current.rstrip('/')}/{d}" for d in reversed(dirs))
            stack.extend(d for d in below if not self.islink(d))

    def find(self, path) -> list[str]:
        """All files below ``path`` (or ``path`` itself if it is a file), sorted: the
        ``filenames`` of :meth:`walk`, so files behind links to directories are not repeated."""
        p = self._path(path)
        if self._type(p) != FileType.DIRECTORY:
            return [p]
        return sorted(
            f"{d.rstrip('/')}/{name}" for d, _, names in self.walk(p) for name in names
        )

    def mkdir(self, path, parents: bool = False, exist_ok: bool = False) -> None:
        """Create a directory; with ``parents=True`` also its missing parents (``mkdir -p``).

        Raises FileExistsError if it exists (a directory with ``exist_ok`` is fine), and
        FileNotFoundError if the parent is missing and ``parents`` is false.
        """
        self._mkdir(self._path(path), parents, exist_ok)

    def rmdir(self, path) -> None:
        """Remove an empty directory."""
        p = self._path(path)
        if self._type(p) != FileType.DIRECTORY:
            raise self._error(errno.ENOTDIR, p)
        self._rmdir(p)

    def rm(self, path, recursive: bool = False) -> None:
        """Remove a file, or a directory tree with ``recursive=True``.

        Raises IsADirectoryError for a directory without ``recursive``. A symbolic link is
        removed itself (dangling or to a directory, with or without ``recursive``), as ``rm``
        and ``os.unlink`` remove it: never what it points to.
        """
        p = self._path(path)
        if self.islink(p) or self._type(p) != FileType.DIRECTORY:
            self._rm_file(p)
        elif not recursive:
            raise self._error(errno.EISDIR, p, "pass recursive=True to remove a directory")
        elif p == "/":
            raise self._error(errno.EBUSY, p, "refusing to remove the root directory")
        else:
            self._rm_tree(p)

    def _rm_tree(self, path: str) -> None:
        for entry in list(self._iterdir(path)):
            if entry.is_dir:
                self._rm_tree(entry.path)
            else:
                self._rm_file(entry.path)
        self._rmdir(path)

    def rename(self, src, dst) -> None:
        """Rename ``src`` to ``dst`` with POSIX semantics.

        A destination file is replaced atomically where ``capabilities.rename_replaces``; a
        destination directory must be empty (and ``src`` a directory too).
        """
        s, d = self._path(src), self._path(dst)
        if s == d:
            self._type(s)  # POSIX: a no-op, but the source must exist
            return
        self._rename(s, d)

    def _replace_file(self, src: str, dst: str) -> bool:
        """Rename file ``src`` over the existing file ``dst`` in one call, so that ``dst`` is never
        missing meanwhile, where ``rename`` cannot replace (``capabilities.rename_replaces``
        false: HDFS). False where the backend cannot either: the caller removes ``dst`` first."""
        return False

    def _rename_no_replace(self, src: str, dst: str) -> bool:
        """Rename file ``src`` to ``dst`` only if ``dst`` does not exist, in one call that refuses
        an existing ``dst`` (FileExistsError); False where the backend has no such call (then a
        plain ``rename``, which refuses an existing file where ``rename_replaces`` is false)."""
        return False

    def block_locations(self, path, start: int = 0, length: int | None = None) -> list[BlockLocation]:
        """Where the bytes ``[start, start+length)`` of a file are stored.

        Returns one :class:`BlockLocation` per storage block (HDFS block, stripe unit, logical
        block), clipped to the requested range and the file's size; empty for an empty range.
        """
        p = self._path(path)
        url = self.url(p)
        check_offset(start, url, "start")
        if length is not None:
            check_offset(length, url, "length")
        info = self._info(p)
        if info.is_dir:
            raise self._error(errno.EISDIR, p)
        end = info.size if length is None else min(info.size, start + length)
        if start >= end:
            return []
        return self._block_locations(p, info, start, end - start)

    # -- positional and whole-file helpers ----------------------------------------------------
    def pread(self, path, *positional, offset: int | None = None, length: int | None = None) -> bytes:
        """Read up to ``length`` bytes at ``offset`` of a file (short only at end of file).

        ``offset`` and ``length`` are keywords: a file handle's ``pread(size, offset)`` takes
        the size first, as ``os.pread`` does, and positional numbers here could be swapped
        without an error.
        """
        if positional or offset is None or length is None:
            raise TypeError(f"{type(self).__name__}.pread takes offset= and length= as keywords: "
                            "fs.pread(path, offset=..., length=...) (a file handle's pread(size, offset) takes "
                            f"the size first); got {len(positional)} positional number(s) for {path!r}")
        p = self._path(path)
        check_range(offset, length, self.url(p))
        with self._open_raw(p, OpenMode.parse("rb", self.url(p))) as raw:
            return raw.pread(length, offset)

    def pwrite(self, path, data, offset: int) -> int:
        """Write ``data`` at ``offset`` of a file, creating it if missing and keeping the rest.

        Several processes may ``pwrite`` disjoint ranges of one file at once where
        ``capabilities.concurrent_writers`` holds (the N-1 pattern of HPC checkpoints).
        """
        p = self._path(path)
        check_range(offset, buffer_length(data, self.url(p)), self.url(p))
        if not self.capabilities.positional_write:
            raise self._unsupported(
                "positional write", p, self.unsupported_advice or "write through a PLFS container (plfs+ URLs)"
            )
        with self._open_raw(p, OpenMode.for_pwrite()) as raw:
            return raw.pwrite(data, offset)

    #: ``read_ranges`` reads ranges closer than this together (one call instead of two; on a
    #: remote store a round trip costs more than reading the gap).
    READ_RANGES_GAP = 64 << 10
    #: ... and no merged read longer than this (unless one range is).
    READ_RANGES_BLOCK = 64 << 20

    def read_ranges(self, path, ranges: Iterable[tuple[int, int]], max_gap: int | None = None,
                    max_block: int | None = None) -> list[bytes]:
        """Read several ``(offset, length)`` ranges of one file with one open: ranges closer
        than ``max_gap`` (default :data:`READ_RANGES_GAP`) are read by one call of at most
        ``max_block`` bytes (:func:`~hpcbridge.fs.ranges.merge_ranges`). Each result is what
        ``pread(length, offset)`` returns: short at the end of the file, empty past it."""
        p = self._path(path)
        ranges = list(ranges)
        for offset, length in ranges:
            check_range(offset, length, self.url(p))
        starts, lengths, block_of = merge_ranges(
            [o for o, _ in ranges], [n for _, n in ranges], return_blocks=True,
            max_gap=self.READ_RANGES_GAP if max_gap is None else max_gap,
            max_block=self.READ_RANGES_BLOCK if max_block is None else max_block)
        with self._open_raw(p, OpenMode.parse("rb", self.url(p))) as raw:
            blocks = [raw.pread(int(n), int(o)) for o, n in zip(starts, lengths)]
        out = []
        for (offset, length), b in zip(ranges, block_of.tolist()):
            if b < 0:
                out.append(b"")
                continue
            at = offset - int(starts[b])
            block = blocks[b]
            out.append(block if at == 0 and length == len(block) else bytes(memoryview(block)[at:at + length]))
        return out

    def read_bytes(self, path) -> bytes:
        """The whole content of a file."""
        with self.open(path, "rb") as f:
            return f.read()

    def write_bytes(self, path, data) -> int:
        """Replace a file's content with ``data`` (creating it); returns the byte count."""
        with self.open(path, "wb") as f:
            return f.write(data)

    def create(self, path, replication: int | None = None, block_size: int | None = None,
               permission: int | None = None, overwrite: bool = True):
        """Open a new file for writing (binary, buffered) with per-file storage settings.

        ``replication`` and ``block_size`` are placement settings of stores that keep files in
        replicated blocks (HDFS applies them at create); stores without per-file settings
        (POSIX, memory, PLFS containers) write the file as any other. ``permission`` needs a
        backend that sets modes at create (HDFS); ``overwrite=False`` refuses an existing file.
        """
        p = self._path(path)
        if permission is not None:
            raise self._unsupported("create with a permission", p, "create the file, then set its mode")
        return self.open(p, "wb" if overwrite else "xb")

    def open_collective(self, path, mode: str, comm, **options):
        """Collective open by every rank of ``comm`` (an mpi4py communicator), for backends
        whose ``capabilities.log_structured`` is true: each rank gets a writer of its own and
        the close is collective. Elsewhere every rank opens the file itself (``open``)."""
        raise self._unsupported("collective opens", self._path(path), "open the file on each rank")

    def recover_lease(self, path, timeout: float = 60.0) -> None:
        """Close a file whose writer died, so readers see everything it synced. Backends with
        writer leases (HDFS) override this; elsewhere a dead writer leaves nothing to close."""
        self._info(self._path(path))

    # -- optional features ------------------------------------------------------------------
    def getxattr(self, path, name: str) -> bytes:
        """Value of extended attribute ``name`` (needs ``capabilities.xattrs``)."""
        raise self._unsupported("extended attributes", self._path(path))

    def setxattr(self, path, name: str, value: bytes) -> None:
        """Set extended attribute ``name`` (needs ``capabilities.xattrs``)."""
        raise self._unsupported("extended attributes", self._path(path))

    def listxattr(self, path) -> list[str]:
        """Names of the extended attributes of ``path`` (needs ``capabilities.xattrs``)."""
        raise self._unsupported("extended attributes", self._path(path))

    def local_path(self, path) -> str:
        """The OS path of ``path`` where the storage is mounted locally (for MPI-IO and h5py).

        Raises io.UnsupportedOperation for backends that are not a local mount.
        """
        raise self._unsupported("a local OS path", self._path(path))
