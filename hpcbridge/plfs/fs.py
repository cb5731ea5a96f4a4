"""PLFS as an hpcbridge backend: ``plfs+<backing-url>``.

``plfs+file:///scratch/ckpt`` or ``plfs+hdfs://nn:9820/ckpt`` address one logical file kept as a
container on the backing file system. Several volumes: ``plfs+file:///a/ckpt,/b/ckpt,/c/ckpt``
(the same logical path under each volume root; the first holds the canonical container). The
namespace is the backing one, with containers shown as plain files of their logical size.

Many writers of one file at once is the normal case: every handle opened for writing is its
own writer (its own logs), so positional writes work even where the backing store has none
(HDFS), and processes need no coordination beyond a unique writer id.
"""

from __future__ import annotations

import errno
import io
import os
import posixpath
import secrets
import socket
import stat
import zlib
from collections.abc import Iterator

from ..errors import InvalidURLError, os_error
from ..fs.base import FileSystem
from ..fs.file import OpenMode, RawFile, readable_bytes, writable_bytes
from ..fs.registry import backend_class
from ..fs.types import BlockLocation, Capabilities, FileInfo, FileType
from ..fs.url import URL, format_url, normalize_path, parse_url
from .container import Container
from .format import MARKER
from .reader import VERIFY_MODES, PlfsReader, index_version, load_index
from .writer import PlfsWriter, advance_sequence

__all__ = ["PlfsFileSystem", "split_volumes"]

BACKEND = "plfs"


def split_volumes(path: str) -> tuple[tuple[str, ...], str]:
    """``"/a/ckpt,/b/ckpt"`` -> ``(("/a", "/b"), "/ckpt")``: volume roots and the logical path (the
    longest common trailing path); a single path is one volume rooted at ``/``."""
    entries = [normalize_path(p) for p in path.split(",")]
    if len(entries) == 1:
        return ("/",), entries[0]
    parts = [e.strip("/").split("/") for e in entries]
    common = 0
    while all(len(p) > common for p in parts) and len({p[len(p) - 1 - common] for p in parts}) == 1 \
            and all(len(p) - 1 - common >= 1 for p in parts):
        common += 1
    roots = tuple("/" + "/".join(p[:len(p) - common]) for p in parts)
    logical = "/" + "/".join(parts[0][len(parts[0]) - common:]) if common else "/"
    return roots, logical


class _PlfsWriteRaw(RawFile):
    """A handle opened for writing: one writer; seek and pwrite anywhere."""

    def __init__(self, fs: "PlfsFileSystem", path: str, writer: PlfsWriter, mode: OpenMode, start: int = 0):
        super().__init__(fs.url(path), mode)
        self._writer = writer
        self._pos = start
        self._start = start

    @property
    def writer_id(self) -> int:
        """This handle's writer id in the container."""
        return self._writer.writer

    def pwrite(self, data, offset: int) -> int:
        """Write ``data`` at logical ``offset`` (appended to this writer's log)."""
        view = readable_bytes(data, self.url)
        self._check_access(offset, len(view))
        if self._open_mode.append and self._pos != offset:
            raise io.UnsupportedOperation(f"pwrite: {self.url} is open in append mode, where every write goes "
                                          "to the end")
        return self._writer.write(view, offset)

    def preadinto(self, buffer, offset: int) -> int:
        """Refused: the handle is write-only."""
        self._check_open()
        raise io.UnsupportedOperation(f"pread: {self.url} is open write-only (mode {self.mode!r})")

    def size(self) -> int:
        """The logical end of what this handle wrote (or the size it appended to)."""
        self._check_open()
        return max(self._writer.max_end, self._start)

    def flush(self) -> None:
        """Data and index records to the logs: readable by others, kept if this process dies
        (see :class:`~hpcbridge.plfs.writer.PlfsWriter` for what that takes per backend)."""
        super().flush()  # io's check: ValueError on a closed handle
        if not self._writer.closed:  # io's close flushes after the writer closed
            self._writer.flush()

    def sync(self) -> None:
        """Data and index durable."""
        self._check_open()
        self._writer.sync()

    def close(self) -> None:
        """Close the writer: index, metadata record, open record."""
        if not self.closed:
            try:
                self._writer.close()
            finally:
                super().close()


class _PlfsReadRaw(RawFile):
    """A handle opened for reading: the merged index and the data logs."""

    def __init__(self, fs: "PlfsFileSystem", path: str, reader: PlfsReader, mode: OpenMode):
        super().__init__(fs.url(path), mode)
        self._reader = reader

    def preadinto(self, buffer, offset: int) -> int:
        """Logical bytes at ``offset`` into ``buffer`` (holes are zeros)."""
        view = writable_bytes(buffer, self.url)
        self._check_access(offset, len(view))
        return self._reader.readinto(view, offset)

    def size(self) -> int:
        """Logical size."""
        self._check_open()
        return self._reader.size

    def close(self) -> None:
        """Close the data logs."""
        if not self.closed:
            self._reader.close()
            super().close()


class PlfsFileSystem(FileSystem):
    """Logical files kept as PLFS containers on a backing hpcbridge file system.

    Parameters
    ----------
    backing:
        Scheme of the backing file system (``"file"``, ``"hdfs"``, ...).
    volumes:
        Volume roots on the backing file system (default ``("/",)``).
    writers_hint:
        Expected writers of a new container (sets its host subdirectories ~ sqrt).
    on_corruption:
        ``"raise"`` (default) or ``"skip"`` damaged index records and data when reading
        (skipped data reads as zeros, with a :class:`~hpcbridge.plfs.reader.PlfsCorruptionWarning`).
    verify:
        Data checks on read: ``"auto"`` (default: every record whose whole data a handle has
        fetched, in one read or in consecutive ones), ``"always"`` (every record a read touches,
        fetched whole once per handle) or ``"never"``.
    checksums:
        Record a CRC32C of the data with every index record (default). ``False`` only to
        measure what the checksums cost.
    comm:
        Not an option here: use :func:`hpcbridge.plfs.open` for MPI collective opens.
    **backing_options:
        Options of the backing file system (e.g. ``webhdfs=`` for HDFS).
    """

    scheme = "plfs"
    backend_name = BACKEND
    capabilities = Capabilities(positional_write=True, read_write=False, append=True, concurrent_writers=True,
                                rename_replaces=True, block_locations=True, xattrs=False, permissions=False,
                                truncate=False, visible_writes=False,
                                log_structured=True)
    unsupported_advice = "PLFS handles are read-only or write-only; reopen for the other direction"

    def __init__(self, netloc: str = "", *, backing: str = "file", volumes: tuple[str, ...] = ("/",),
                 writers_hint: int = 4, on_corruption: str = "raise", verify: str = "auto",
                 checksums: bool = True, **backing_options):
        if on_corruption not in ("raise", "skip"):
            raise ValueError(f"on_corruption must be 'raise' or 'skip', got {on_corruption!r}")
        if verify not in VERIFY_MODES:
            raise ValueError(f"verify must be one of {', '.join(VERIFY_MODES)}, got {verify!r}")
        if not isinstance(checksums, bool):
            raise TypeError(f"checksums must be True or False, got {checksums!r}")
        volumes = tuple(normalize_path(v) for v in volumes)
        options = dict(backing=backing, volumes=volumes, writers_hint=writers_hint, on_corruption=on_corruption,
                       **backing_options)
        if verify != "auto":  # only what differs from the defaults: URLs and pickles stay as they were
            options["verify"] = verify
        if not checksums:
            options["checksums"] = checksums
        super().__init__(netloc, **options)
        if backing.split("+", 1)[0] == "plfs":
            raise InvalidURLError(f"plfs+{backing}://{netloc}: PLFS cannot be layered over PLFS")
        self.backing = backend_class(backing)(netloc, **backing_options)
        self.volumes = volumes
        self.writers_hint = writers_hint
        self.on_corruption = on_corruption
        self.verify = verify
        self.checksums = checksums
        self.scheme = f"plfs+{backing}"
        self.capabilities = self.capabilities.replace(
            rename_replaces=self.backing.capabilities.rename_replaces,
            shared_between_processes=self.backing.capabilities.shared_between_processes)

    @classmethod
    def from_url(cls, url: URL, **options) -> "PlfsFileSystem":
        if "+" not in url.scheme:
            raise InvalidURLError(f"{url.raw!r}: PLFS URLs name their backing store: plfs+file:///path, "
                                  "plfs+hdfs://namenode:port/path")
        volumes, _ = split_volumes(url.path)
        return cls(url.netloc, backing=url.scheme.split("+", 1)[1], volumes=volumes, **options)

    def __reduce__(self):
        return (_rebuild, (self.netloc, self.options))

    # -- paths --------------------------------------------------------------------------------
    def url(self, path: str) -> str:
        joined = ",".join(posixpath.join(root, path.lstrip("/")).rstrip("/") or "/" for root in self.volumes)
        return format_url(self.scheme, self.netloc, joined)

    def _path(self, path) -> str:
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if isinstance(path, str) and path.startswith("/"):
            if "," not in path:
                return normalize_path(path)
            roots, logical = split_volumes(path)  # a volume list as url_to_fs returns it
        else:
            parsed = parse_url(path)
            if parsed.scheme != self.scheme or parsed.netloc != self.netloc:
                raise InvalidURLError(f"{path!r} is not on this file system ({self.scheme}://{self.netloc}); "
                                      "use hpcbridge.connect() for it")
            roots, logical = split_volumes(parsed.path)
        if len(self.volumes) == 1 and len(roots) == 1:
            return logical
        if roots != self.volumes:
            raise InvalidURLError(f"{path!r} names volumes {roots}, this file system has {self.volumes}")
        return logical

    def _backing_paths(self, path: str) -> list[str]:
        return [posixpath.join(root, path.lstrip("/")).rstrip("/") or "/" for root in self.volumes]

    def container(self, path) -> Container:
        """The container of logical file ``path`` (which may not exist yet)."""
        p = self._path(path)
        return Container([(self.backing, bp) for bp in self._backing_paths(p)], self.url(p))

    def _is_container(self, path: str) -> bool:
        return Container.is_container(self.backing, self._backing_paths(path)[0])

    def _marker_info(self, canonical: str) -> FileInfo | None:
        """The backing info of the container marker in directory ``canonical`` (None: not a container)."""
        try:
            return self.backing.info(f"{canonical.rstrip('/')}/{MARKER}")
        except (FileNotFoundError, NotADirectoryError):
            return None

    # -- core ---------------------------------------------------------------------------------
    def _canonical(self, path: str, ask):
        """``(canonical backing path, ask(it))``; ENOENT naming the PLFS URL if it is missing."""
        canonical = self._backing_paths(path)[0]
        try:
            return canonical, ask(canonical)
        except FileNotFoundError:
            raise os_error(errno.ENOENT, self.url(path), BACKEND) from None

    def _info(self, path: str) -> FileInfo:
        canonical, backing_info = self._canonical(path, self.backing.info)
        marker_info = self._marker_info(canonical) if backing_info.is_dir else None
        if marker_info is not None:
            container = self.container(path)
            container.marker  # opened through all its volumes, or MissingVolumesError
            size = container.summary_size()
            if size is None:  # a writer is open (or crashed): only the index tells
                # (on HDFS only up to its logs' last complete blocks until it closes or is
                # recovered: a stat states the visible size; reads raise, see load_index)
                size = load_index(container, "skip", quiet=True)[0].size
            # Replication and block size are the logs': the marker is a file made like them (the
            # directory's are not: HDFS gives directories replication 0).
            return FileInfo(path, self.url(path), FileType.FILE, size, backing_info.mtime,
                            stat.S_IFREG | (backing_info.mode & 0o666 or 0o644), backing_info.owner,
                            backing_info.group, backing_info.uid, backing_info.gid, marker_info.replication,
                            marker_info.block_size)
        # A directory, or a plain backing file that is not a PLFS file (reported as "other").
        kind = FileType.DIRECTORY if backing_info.is_dir else FileType.OTHER
        return FileInfo(path, self.url(path), kind, 0 if backing_info.is_dir else backing_info.size,
                        backing_info.mtime, backing_info.mode,
                        backing_info.owner, backing_info.group, backing_info.uid, backing_info.gid,
                        backing_info.replication, backing_info.block_size)

    def version(self, path) -> tuple:
        """Size and mtime, and for a logical file what every write changes: the container's id,
        its index logs and metadata records by path and size.

        A container's mtime is its directory's, which changes only when an entry directly in it
        does. A rewrite in place (an ``r+`` open or ``dd conv=notrunc`` through the mount, a
        second writer of the same container) adds its logs to host subdirectories that exist
        already, so size and mtime stay as they were while the bytes change: caches keyed by them
        (``describe``'s chunk index and addresses) then answered with the old file's layout."""
        info = self.info(path)
        if not info.is_file:
            return (info.size, info.mtime)
        container = self.container(path)
        return (info.size, info.mtime, index_version(container, container.index_logs(sizes=True)))

    def _type(self, path: str) -> str:
        # What _info decides, without the size (metadata records, or every index log while a
        # writer is open): the backing entry's type and the container marker.
        canonical, backing_type = self._canonical(path, self.backing._type)
        if backing_type != FileType.DIRECTORY:
            return FileType.OTHER
        if self._marker_info(canonical) is None:
            return FileType.DIRECTORY
        self.container(path).marker  # opened through all its volumes, or MissingVolumesError
        return FileType.FILE

    def _iterdir(self, path: str) -> Iterator[FileInfo]:
        prefix = path.rstrip("/")
        for entry in self.backing.iterdir(self._backing_paths(path)[0]):
            name = entry.path.rsplit("/", 1)[-1]
            yield self._info(f"{prefix}/{name}")

    def _inside_a_file(self, path: str, levels: int | None = None) -> bool:
        """Whether one of the first ``levels`` ancestors of ``path`` (all: None) is a logical file:
        its container is a backing directory, in which nothing may be made (POSIX: ENOTDIR)."""
        parent = posixpath.dirname(path.rstrip("/"))
        while parent not in ("", "/") and (levels is None or levels > 0):
            if self._is_container(parent):
                return True
            parent = posixpath.dirname(parent)
            levels = None if levels is None else levels - 1
        return False

    def _under_a_file(self, path: str) -> bool:
        """Whether a parent of missing ``path`` is a file, logical or plain on the backing store:
        where open(2) of it fails with ENOTDIR rather than ENOENT."""
        try:
            parent_type = self.backing._type(posixpath.dirname(self._backing_paths(path)[0]))
        except NotADirectoryError:
            return True
        except FileNotFoundError:  # missing, or inside a container (a logical file)
            parent_type = FileType.DIRECTORY
        return parent_type != FileType.DIRECTORY or self._inside_a_file(path)

    def _mkdir(self, path: str, parents: bool, exist_ok: bool) -> None:
        first, *others = self._backing_paths(path)
        if self._is_container(path):
            raise os_error(errno.EEXIST, self.url(path), BACKEND)
        if self._inside_a_file(path):
            raise os_error(errno.ENOTDIR, self.url(path), BACKEND)
        self.backing.mkdir(first, parents=parents, exist_ok=exist_ok)
        for other in others:
            self.backing.mkdir(other, parents=True, exist_ok=True)

    def _rm_file(self, path: str) -> None:
        if not self._is_container(path):
            raise os_error(errno.ENOENT, self.url(path), BACKEND)
        self.container(path).remove()

    def _rmdir(self, path: str) -> None:
        for backing_path in self._backing_paths(path):
            if self.backing.exists(backing_path):
                self.backing.rmdir(backing_path)

    def _rm_tree(self, path: str) -> None:
        for backing_path in self._backing_paths(path):
            if self.backing.exists(backing_path):
                self.backing.rm(backing_path, recursive=True)

    def _rename(self, src: str, dst: str) -> None:
        src_info = self._info(src)
        try:
            dst_info = self._info(dst)
        except FileNotFoundError:
            dst_info = None
        if dst_info is not None:
            if dst_info.is_dir and not src_info.is_dir:
                raise os_error(errno.EISDIR, self.url(dst), BACKEND)
            if src_info.is_dir and not dst_info.is_dir:
                raise os_error(errno.ENOTDIR, self.url(dst), BACKEND)
            if not dst_info.is_dir:  # replace a logical file: remove its container first (POSIX-like)
                if not self.backing.capabilities.rename_replaces:
                    raise os_error(errno.EEXIST, self.url(dst), BACKEND)
                self.container(dst).remove()
        for s, d in zip(self._backing_paths(src), self._backing_paths(dst)):
            if self.backing.exists(s):
                self.backing.rename(s, d)

    def _block_locations(self, path: str, info: FileInfo, start: int, length: int) -> list[BlockLocation]:
        container = self.container(path)
        index, _ = load_index(container, self.on_corruption)
        pieces = index.lookup(start, start + length)
        blocks: list[BlockLocation] = []
        columns = (pieces[k].tolist() for k in ("logical", "length", "physical", "writer"))
        for logical, size, physical, writer in zip(*columns):
            fs, log = container.data_log(writer)
            for b in fs.block_locations(log, physical, size):
                offset = logical + (b.offset - physical)
                last = blocks[-1] if blocks else None
                if last and last.end == offset and last.hosts == b.hosts and last.length < info.block_size:
                    blocks[-1] = BlockLocation(last.offset, last.length + b.length, b.hosts, b.racks, last.targets)
                else:
                    blocks.append(BlockLocation(offset, b.length, b.hosts, b.racks, b.targets))
        # Holes are stored nowhere: report them without hosts so the blocks still cover the range.
        covered, position = [], start
        for b in blocks:
            if b.offset > position:
                covered.append(BlockLocation(position, b.offset - position))
            covered.append(b)
            position = b.end
        if position < start + length:
            covered.append(BlockLocation(position, start + length - position))
        return covered

    def prepare_container(self, path: str, mode: OpenMode, writers_hint: int | None = None) -> Container:
        """The container for writing ``path`` with ``mode``: created if missing, emptied for ``w``,
        refused for ``x`` if it exists (POSIX open errors otherwise). Its ``created`` is true
        where this call made it (empty: no size or sequence numbers to look up)."""
        canonical = self._backing_paths(path)[0]
        container = self.container(path)
        is_container = self._is_container(path)
        if not is_container and container.being_created():  # by another process, right now
            container.wait_created()
            is_container = True
        if not is_container and self.backing.isdir(canonical):
            # A directory: a plain one, or a container another process renamed into place
            # between the two checks.
            if not self._is_container(path):
                # open(2): O_CREAT|O_EXCL on any existing name is EEXIST, a directory included
                raise os_error(errno.EEXIST if mode.exclusive else errno.EISDIR, self.url(path), BACKEND)
            is_container = True
        if is_container and mode.exclusive:
            raise os_error(errno.EEXIST, self.url(path), BACKEND)
        if not is_container and not mode.create:  # open(2) without O_CREAT of a missing file
            raise os_error(errno.ENOENT, self.url(path), BACKEND)
        if is_container and mode.truncate:
            container.remove()  # truncate to 0: a fresh container
            is_container = False
        if not is_container:
            parent = posixpath.dirname(canonical)
            if not self.backing.isdir(parent):
                code = errno.ENOTDIR if self.backing.exists(parent) else errno.ENOENT
                raise os_error(code, self.url(path), BACKEND)
            # A parent that is a logical file (or a directory of a container's own): its backing
            # directory exists, but nothing may be made in it. Deeper nesting needs one of these.
            if self._inside_a_file(path, levels=2):
                raise os_error(errno.ENOTDIR, self.url(path), BACKEND)
            if not container.create(writers_hint or self.writers_hint):  # another process was first
                container.wait_created()
                if mode.exclusive:
                    raise os_error(errno.EEXIST, self.url(path), BACKEND)
        return container

    def _open_raw(self, path: str, mode: OpenMode):
        if mode.readable:
            if not self._is_container(path):
                if self.backing.isdir(self._backing_paths(path)[0]):
                    self.container(path).refuse_volume_directory()
                    raise os_error(errno.EISDIR, self.url(path), BACKEND)
                code = errno.ENOTDIR if self._under_a_file(path) else errno.ENOENT
                raise os_error(code, self.url(path), BACKEND)
            container = self.container(path)
            return _PlfsReadRaw(self, path, self.reader(container), mode)
        container = self.container_for_writer(path, mode)
        start = self._info(path).size if mode.append and not container.created else 0
        return _PlfsWriteRaw(self, path, self.new_writer(container), mode, start)

    def container_for_writer(self, path: str, mode: OpenMode) -> Container:
        """:meth:`prepare_container`, then this process's sequence numbers above every one the
        container holds, so a writer opened now wins over all written before (nothing to look
        up in a container this call made)."""
        container = self.prepare_container(path, mode)
        if not container.created:
            advance_sequence(container.max_sequence())
        return container

    def reader(self, container: Container, comm=None) -> PlfsReader:
        """A reader of ``container`` with this file system's checks (``comm``: read the index
        collectively)."""
        index, _ = load_index(container, self.on_corruption, comm=comm)
        return PlfsReader(container, index, verify=self.verify, on_corruption=self.on_corruption)

    def open_collective(self, path, mode: str, comm, flatten: bool = False, **options):
        """Collective open by every rank of ``comm``: ``"rb"`` reads the index logs in parallel,
        ``"wb"``/``"xb"``/``"ab"`` give each rank a writer and make the close collective (one
        metadata record for the job); see :func:`hpcbridge.plfs.open`."""
        from .api import open_collective

        if options:
            raise TypeError(f"unexpected options {sorted(options)} for a collective open of {self.url(self._path(path))}")
        return open_collective(self, path, mode, comm, flatten=flatten)

    def open_writer(self, path, writer_id: int | None = None):
        """A new writer of ``path`` that keeps what is there (creating the container if missing):
        how several processes without MPI write one logical file. Returns a write handle."""
        p = self._path(path)
        mode = OpenMode.for_pwrite()  # create if missing, keep what is there
        container = self.container_for_writer(p, mode)
        return _PlfsWriteRaw(self, p, self.new_writer(container, writer_id), mode)

    def new_writer(self, container: Container, writer_id: int | None = None) -> PlfsWriter:
        """A writer of ``container`` with this file system's options; ``writer_id`` None: a
        fresh random id."""
        if writer_id is not None:
            return PlfsWriter(container, writer_id, checksums=self.checksums)
        for _ in range(8):  # collisions are improbable and detected (exclusive create of the open record)
            try:
                return PlfsWriter(container, _writer_id(), checksums=self.checksums)
            except FileExistsError:
                continue
        raise os_error(errno.EEXIST, container.url, BACKEND, "could not find an unused writer id")

    def _wrap(self, raw, mode: OpenMode, buffering: int, encoding, errors, newline):
        # A writer's data log is already buffered by the backing store, and io's buffered writer
        # would flush (and so cut the index patterns) before every pwrite: hand out the raw writer.
        if mode.writable and not mode.text:
            return raw
        return super()._wrap(raw, mode, buffering, encoding, errors, newline)

    def local_path(self, path) -> str:
        raise self._unsupported("a local OS path", self._path(path), "PLFS files exist only as containers")


def _writer_id() -> int:
    """A writer id for a writer outside MPI: from this host, this process and a random part.

    The random part comes from the OS (``secrets``), not the ``random`` module: applications (and
    Hypothesis) seed that one, and a reseeded stream would hand out the same ids again.
    """
    return zlib.crc32(f"{socket.gethostname()}:{os.getpid()}:{secrets.randbits(64)}".encode())


def _rebuild(netloc, options):
    return PlfsFileSystem(netloc, **options)
