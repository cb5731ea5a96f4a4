"""A PLFS container on one or more backing volumes: where its parts live, its metadata."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import posixpath
import secrets
import socket
import time
import uuid

import numpy as np

from ..errors import os_error
from ..fs.base import FileSystem
from ..fs.url import hidden_sibling
from .format import (CREATING, MARKER, META_DIR, OPEN_DIR, RECORD, VOLUME_MARKER, decode_records, host_dir,
                     index_log_name, marker_json, merged_generation, merged_name, parse_marker, volume_marker_json)

__all__ = ["Container", "Damage", "PlfsCorruptionError", "MissingVolumesError", "named_error", "errors_named"]


class PlfsCorruptionError(OSError):
    """A container holds data or index records that fail their checks (errno EIO); the message
    names the container, the log and, for data, the logical range."""


class MissingVolumesError(FileNotFoundError):
    """A multi-volume container was opened through some of its volumes only; the message lists
    the missing ones."""


def named_error(exc: OSError, doing: str, container_url: str) -> OSError:
    """``exc`` as the same OSError subclass, its message saying what was being done (naming the
    part of the container) and its filename the container's URL."""
    reason = exc.strerror or str(exc)
    return OSError(exc.errno, f"{reason} (while {doing} of PLFS container {container_url})", container_url)


@contextlib.contextmanager
def errors_named(doing: str, container_url: str):
    """Re-raise OS errors of the block with :func:`named_error`."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, (PlfsCorruptionError, MissingVolumesError)) or exc.errno is None:
            raise
        raise named_error(exc, doing, container_url) from exc


class Damage(tuple):
    """(log URL, record number or -1 for the log as a whole, description, serious).

    ``serious`` damage makes reads raise unless ``on_corruption="skip"``; the rest (a torn record
    at the end of an unclosed writer's log: the normal trace of a crash) is only reported.
    """

    def __new__(cls, url: str, record: int, why: str, serious: bool = True):
        return super().__new__(cls, (url, record, why, serious))

    def text(self) -> str:
        """One line for reports."""
        url, record, why, _ = self
        return f"{url}: record {record}: {why}" if record >= 0 else f"{url}: {why}"


def _meta_json(writers: list[dict], container_id: str | None, closed: float | None = None) -> bytes:
    """A metadata record: the writers' entries, their largest size and sequence number, and the
    id of the container they wrote (format 2)."""
    record = {"writers": writers, "closed": time.time() if closed is None else closed,
              "size": max((w["max_end"] for w in writers), default=0),
              "max_sequence": max((w["max_sequence"] for w in writers), default=0)}
    if container_id is not None:
        record["container"] = container_id
    return json.dumps(record).encode()


def _writer_entries(records: list[dict]) -> dict[int, dict]:
    """``{writer id: entry}`` over metadata records. A writer recovered while it was in fact
    alive (nothing fences a POSIX writer) and then closed has two entries: its own close's,
    which counts everything it indexed, is the one that holds."""
    out: dict[int, dict] = {}
    for record in records:
        for entry in record["writers"]:
            writer = int(entry["writer"])
            if writer not in out or out[writer].get("recovered"):
                out[writer] = entry
    return out


def of_this_process(record: dict) -> bool:
    """Whether an open record (``openhosts/<writer>``, see :meth:`Container.mark_open`) is of a
    writer of this very process, which knows its own writers."""
    return (record.get("host"), record.get("pid")) == (socket.gethostname(), os.getpid())


class Container:
    """The parts of one logical file: ``volumes`` are ``(file system, container path)`` pairs, the
    first being canonical (marker, metadata, open-writer records)."""

    def __init__(self, volumes: list[tuple[FileSystem, str]], url: str):
        self.volumes = volumes
        self.url = url
        self._marker: dict | None = None
        #: Whether :meth:`create` of this object made the container (it then holds no writer's
        #: data: its size is 0 and no sequence number is taken).
        self.created = False

    # -- paths --------------------------------------------------------------------------------
    @property
    def fs(self) -> FileSystem:
        """The canonical volume's file system."""
        return self.volumes[0][0]

    @property
    def path(self) -> str:
        """The canonical container directory."""
        return self.volumes[0][1]

    @property
    def host_dirs(self) -> int:
        """Number of host subdirectories (fixed at creation)."""
        return int(self.marker["host_dirs"])

    @property
    def version(self) -> int:
        """Format version of the container."""
        return int(self.marker["version"])

    def place(self, writer: int) -> tuple[FileSystem, str]:
        """``(file system, host directory)`` holding a writer's logs."""
        name = host_dir(writer, self.host_dirs)
        fs, path = self.volumes[(writer % self.host_dirs) % len(self.volumes)]
        return fs, f"{path}/{name}"

    def _volume_urls(self) -> list[str]:
        return [fs.url(path) for fs, path in self.volumes]

    # -- existence and creation ---------------------------------------------------------------
    @staticmethod
    def is_container(fs: FileSystem, path: str) -> bool:
        """Whether ``path`` is a container directory (it holds the marker)."""
        return fs.exists(f"{path.rstrip('/')}/{MARKER}")

    @property
    def marker(self) -> dict:
        """The parsed marker file, once the volumes it was opened through are checked against it."""
        if self._marker is None:
            try:
                data = self.fs.read_bytes(f"{self.path}/{MARKER}")
            except FileNotFoundError:
                raise os_error(errno.ENOENT, self.url, "plfs", self._why_no_marker()) from None
            marker = parse_marker(data, self.url)
            self._check_volumes(marker)
            self._marker = marker
        return self._marker

    @property
    def id(self) -> str | None:
        """The marker's id of this container (None: format 1, which has none)."""
        return self.marker.get("id")

    def refuse_volume_directory(self) -> None:
        """MissingVolumesError if this directory is a non-canonical volume of a container."""
        detail = self._why_no_marker()
        if detail.startswith("this is volume"):
            raise MissingVolumesError(errno.ENOENT, detail, self.url)

    def _why_no_marker(self) -> str:
        """The detail of the error for a directory without a marker: a non-canonical volume of a
        container says which container it belongs to."""
        try:
            volume = json.loads(self.fs.read_bytes(f"{self.path}/{VOLUME_MARKER}"))
        except (OSError, ValueError):
            return "no PLFS container here"
        return (f"this is volume {volume.get('volume')} of the PLFS container whose canonical volume is "
                f"{volume.get('canonical')}; open it through all its volumes, canonical first")

    def _check_volumes(self, marker: dict) -> None:
        """Refuse to serve a container through fewer (or other) volumes than it was made with:
        the missing volumes' data would read as holes."""
        expected = int(marker.get("volumes", 1))
        recorded = marker.get("volume_urls") or []
        given = self._volume_urls()
        if len(given) != expected:
            missing = recorded[len(given):] if recorded[:len(given)] == given else \
                [u for u in recorded if u not in given] or [f"volume {k}" for k in range(len(given), expected)]
            detail = f"missing {', '.join(missing)}" if len(given) < expected else f"given {len(given)}"
            raise MissingVolumesError(
                errno.ENOENT, f"PLFS container spans {expected} volume(s) but was opened through {len(given)} "
                f"({detail}); open it as plfs+{','.join(recorded) or '<every volume>'}", self.url)
        container_id = marker.get("id")
        if container_id is None or expected == 1:
            return  # version 1: no volume markers to check
        for k, (fs, path) in enumerate(self.volumes[1:], start=1):
            try:
                volume = json.loads(fs.read_bytes(f"{path}/{VOLUME_MARKER}"))
            except (OSError, ValueError):
                volume = {}
            if volume.get("id") != container_id or volume.get("volume") != k:
                raise MissingVolumesError(
                    errno.ENOENT, f"{fs.url(path)} is not volume {k} of this PLFS container (its volumes: "
                    f"{', '.join(recorded)})", self.url)

    def create(self, writers_hint: int = 4) -> bool:
        """Create the container (all volumes); host subdirectories ~ sqrt(writers).

        Atomic against other processes creating it at the same time (several writers of one
        file opening together, as through the mount): the canonical directory is built under a
        temporary name and renamed into place; the one whose rename lands made the container,
        the others return False and use it. A failure on any volume removes what this call made.
        """
        fs, path = self.volumes[0]
        host_dirs = max(1, math.isqrt(max(1, writers_hint - 1)) + 1)
        container_id = uuid.uuid4().hex
        marker = marker_json(host_dirs, self._volume_urls(), container_id)
        single = len(self.volumes) == 1
        temp = hidden_sibling(path, f"plfs-new-{container_id[:16]}")
        try:
            fs.mkdir(temp)
            fs.mkdir(f"{temp}/{META_DIR}")
            fs.mkdir(f"{temp}/{OPEN_DIR}")
            # With one volume the marker goes in now; with several, once every volume is ready
            # (until then others wait: see wait_created).
            fs.write_bytes(f"{temp}/{MARKER if single else CREATING}", marker)
            try:
                fs.rename(temp, path)
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR):
                    raise
                return False  # another process's rename landed first
            if not self._made_by(container_id):
                # HDFS moves a directory renamed onto an existing one into it: ours is inside.
                self._remove_quietly(fs, f"{path}/{posixpath.basename(temp)}")
                return False
        finally:
            if fs.exists(temp):
                self._remove_quietly(fs, temp)
        if not single:
            made = [(fs, path)]
            try:
                canonical = self._volume_urls()[0]
                for k, (vfs, vpath) in enumerate(self.volumes[1:], start=1):
                    if not vfs.exists(vpath):
                        vfs.mkdir(vpath)
                        made.append((vfs, vpath))
                    vfs.write_bytes(f"{vpath}/{VOLUME_MARKER}", volume_marker_json(container_id, k, canonical))
                fs.write_bytes(f"{path}/{MARKER}.{container_id[:16]}", marker)
                fs.rename(f"{path}/{MARKER}.{container_id[:16]}", f"{path}/{MARKER}")  # appears whole
                fs.rm(f"{path}/{CREATING}")
            except BaseException:
                for vfs, vpath in reversed(made):
                    self._remove_quietly(vfs, vpath)
                raise
        self._marker = None
        self.created = True
        return True

    def _made_by(self, container_id: str) -> bool:
        fs, path = self.volumes[0]
        for name in (MARKER, CREATING):
            try:
                return json.loads(fs.read_bytes(f"{path}/{name}")).get("id") == container_id
            except FileNotFoundError:
                continue
            except (OSError, ValueError):
                return False
        return False

    @staticmethod
    def _remove_quietly(fs: FileSystem, path: str) -> None:
        try:
            fs.rm(path, recursive=True)
        except OSError:
            pass

    def being_created(self) -> bool:
        """Whether another process is creating this (multi-volume) container right now."""
        return self.fs.exists(f"{self.path}/{CREATING}") and not self.fs.exists(f"{self.path}/{MARKER}")

    def wait_created(self, timeout: float = 60.0) -> None:
        """Wait until a container another process is creating has its marker."""
        deadline = time.monotonic() + timeout
        while self.being_created():
            if time.monotonic() > deadline:
                raise TimeoutError(errno.ETIMEDOUT, f"PLFS container still being created after {timeout:g} s "
                                                    f"(a creator died? remove {self.fs.url(self.path)})", self.url)
            time.sleep(0.05)

    def remove(self) -> None:
        """Remove every part of the container on every volume.

        Each part is first renamed out of the way (``.NAME.plfs-removed-HEX`` beside it), then
        deleted: a crash during the delete leaves that hidden directory, never a container
        with some of its logs gone (which would read as holes)."""
        doomed = []
        for fs, path in self.volumes:
            if fs.exists(path):
                hidden = hidden_sibling(path, f"plfs-removed-{secrets.token_hex(6)}")
                fs.rename(path, hidden)
                doomed.append((fs, hidden))
        for fs, hidden in doomed:
            fs.rm(hidden, recursive=True)

    # -- writers ------------------------------------------------------------------------------
    def index_logs(self, sizes: bool = False) -> list[tuple]:
        """Every writer's index log: ``(writer id, file system, path)``, sorted by writer;
        ``sizes``: ``(writer id, file system, path, size)``, the size from the same listing
        (an open checks the index cache by them without a ``stat`` per log)."""
        self.marker  # the volumes are all there
        found = []
        for fs, path in self.volumes:
            for entry in fs.iterdir(path):
                name = entry.path.rsplit("/", 1)[-1]
                if not (entry.is_dir and name.startswith("hostdir.")):
                    continue
                for log in fs.iterdir(entry.path):
                    log_name = log.path.rsplit("/", 1)[-1]
                    if log_name.startswith("index."):
                        writer = int(log_name[6:], 16)
                        found.append((writer, fs, log.path, log.size) if sizes else (writer, fs, log.path))
        return sorted(found, key=lambda item: item[0])

    def data_log(self, writer: int) -> tuple[FileSystem, str]:
        """``(file system, path)`` of a writer's data log."""
        fs, hostdir = self.place(writer)
        return fs, f"{hostdir}/data.{writer:08x}"

    def mark_open(self, writer: int, sequence: int = 0) -> None:
        """Record that ``writer`` is open (removed at close; left behind by a crash).
        ``sequence``: the next sequence number its process draws (see :meth:`max_sequence`)."""
        record = json.dumps({"writer": writer, "host": socket.gethostname(), "pid": os.getpid(),
                             "opened": time.time(), "sequence": sequence}).encode()
        path = f"{self.path}/{OPEN_DIR}/{writer:08x}"
        try:
            with self.fs.open(path, "xb") as f:
                f.write(record)
        except FileExistsError:
            raise  # the writer id is taken: the caller picks another
        except OSError as exc:
            raise named_error(exc, f"recording writer {writer:08x} as open in {self.fs.url(path)}", self.url) from exc

    def mark_closed(self, writer: int) -> None:
        """Remove the open-writer record."""
        path = f"{self.path}/{OPEN_DIR}/{writer:08x}"
        try:
            with errors_named(f"clearing the open record {self.fs.url(path)}", self.url):
                self.fs.rm(path)
        except FileNotFoundError:
            pass

    def open_writers(self) -> list[dict]:
        """Writers that opened and did not close (still writing, or crashed)."""
        out = []
        for entry in self.fs.iterdir(f"{self.path}/{OPEN_DIR}"):
            try:
                out.append(json.loads(self.fs.read_bytes(entry.path)))
            except (ValueError, OSError):
                out.append({"writer": int(entry.path.rsplit("/", 1)[-1], 16)})
        return out

    # -- metadata ------------------------------------------------------------------------------
    #: More metadata records than this and the next one written merges them into one
    #: (:meth:`compact_metas`). Every open(2) that writes through a mount is a writer with a
    #: record of its own: a file appended to a thousand times would otherwise keep a thousand,
    #: all read by every ``stat`` and every open for writing.
    COMPACT_RECORDS = 64

    def write_meta(self, name: str, writers: list[dict]) -> None:
        """One metadata record for a set of writers (one per writer, one per MPI job, or one per
        recovered writer); then the records are merged if there are too many."""
        path = f"{self.path}/{META_DIR}/{name}.json"
        with errors_named(f"writing the metadata record {self.fs.url(path)}", self.url):
            # The id of the container this object opened: a writer that outlived it (the file
            # truncated or removed and made again meanwhile) must not describe the new one.
            self.fs.write_bytes(path, _meta_json(writers, self.id))
        self.compact_metas()

    def _meta_paths(self) -> list[str]:
        return [e.path for e in self.fs.iterdir(f"{self.path}/{META_DIR}") if e.path.endswith(".json")]

    def _merged_path(self, generation: int) -> str:
        return f"{self.path}/{META_DIR}/{merged_name(generation)}"

    def _listed_records(self) -> tuple[list[str], int]:
        """``(paths of the unmerged records listed, newest merged generation listed or 0)``."""
        paths, newest = [], 0
        for path in self._meta_paths():
            generation = merged_generation(path.rsplit("/", 1)[-1])
            if generation is None:
                paths.append(path)
            else:
                newest = max(newest, generation)
        return paths, newest

    def _newest_generation(self, listed: int) -> int:
        """The newest merged generation that exists now, probed by name from one listed."""
        newest = listed
        while self.fs.exists(self._merged_path(newest + 1)):
            newest += 1
        return newest

    def metas(self) -> list[dict]:
        """All metadata records: the unmerged ``meta/*.json`` the listing returns, then every
        merged record ``meta/merged.<n>.json`` read by name (n = 1, 2, ... until one is missing).

        A directory listing is not a snapshot: one made while a merge creates its record and
        removes the records it merged may return neither (ext4 lists in hash order). So the
        merged records are read by name, after the unmerged ones: a record removed before it
        was read had been merged into one that existed before its removal, and merged records
        are never removed."""
        paths, listed = self._listed_records()
        out = []
        for path in paths:
            try:
                out.append(json.loads(self.fs.read_bytes(path)))
            except (ValueError, OSError):
                continue  # merged meanwhile (read below), being written (a writer closing), or damaged
        generation = 0
        while True:
            generation += 1
            path = self._merged_path(generation)
            try:
                data = self.fs.read_bytes(path)
            except FileNotFoundError:
                if generation <= listed:  # listed, never removed: the container went away
                    raise os_error(errno.ENOENT, self.url, "plfs", f"its merged metadata record {path} vanished")
                return [record for record in out if self._ours(record)]
            except OSError as exc:
                raise named_error(exc, f"reading the merged metadata record {self.fs.url(path)}", self.url) from exc
            try:
                out.append(json.loads(data))
            except ValueError:
                # Still being written, or its merge died writing it: either way the records it
                # merges were not removed (removal follows a complete merged record).
                continue

    def _ours(self, record: dict) -> bool:
        """Whether a metadata record describes this container: one written by a writer of an
        earlier container at this path (removed or emptied while it was open) names that one."""
        return record.get("container", self.id) == self.id

    def compact_metas(self, threshold: int | None = None) -> int:
        """Merge the unmerged metadata records into a new merged record when there are more than
        ``threshold`` (default :attr:`COMPACT_RECORDS`); returns how many were merged.

        The merged record ``meta/merged.<n>.json`` lists every writer entry of the records it
        merges (their largest size, sequence number and close time), with n one above the
        newest merged record. It is created exclusively, so of two merges at once only one
        makes generation n (the other leaves its records for a later close); it is complete
        before the records it merges are removed, and merged records are never removed, so a
        reader that reads them by name after the unmerged ones (:meth:`metas`) finds every
        writer. A record that cannot be read (one being written) is left as it is."""
        limit = self.COMPACT_RECORDS if threshold is None else threshold
        paths, listed = self._listed_records()
        if len(paths) <= limit:
            return 0
        records, merged = [], []
        for path in paths:
            try:
                record = json.loads(self.fs.read_bytes(path))
            except (ValueError, OSError):
                continue
            if self._ours(record):
                records.append(record)
            merged.append(path)  # another container's record is dropped with the merged ones
        if len(merged) < 2:
            return 0
        writers = _writer_entries(records)
        closed = max((r.get("closed", 0) for r in records), default=0)
        final = self._merged_path(self._newest_generation(listed) + 1)
        with errors_named(f"writing the merged metadata record {self.fs.url(final)}", self.url):
            try:
                with self.fs.open(final, "xb") as f:
                    f.write(_meta_json(list(writers.values()), self.id, closed))
            except FileExistsError:
                return 0  # another merge made this generation first
            for path in merged:
                try:
                    self.fs.rm(path)
                except FileNotFoundError:
                    pass  # merged by another merge too
        return len(merged)

    def closed_writers(self, metas: list[dict] | None = None) -> dict[int, dict]:
        """``{writer id: its summary}`` of every writer a metadata record lists (closed or
        recovered): how many index records it wrote, its size, its highest sequence number."""
        return _writer_entries(self.metas() if metas is None else metas)

    def summary_size(self) -> int | None:
        """Logical size from metadata alone, or None when a writer is open (or crashed): then
        only the index logs can tell."""
        if self.open_writers():
            return None
        metas = self.metas()
        return max((m["size"] for m in metas), default=0)

    def max_sequence(self) -> int:
        """Highest sequence number any writer used, closed or not: a writer opening now must
        draw greater ones so its writes win over everything already there, a crashed writer's
        included. Closed writers' metadata says it; an open (or crashed) writer's index log
        tells what it has flushed so far.

        The open writers are listed before the metadata is read: a writer writes its metadata
        record before it removes its open record, so one closing meanwhile is in one or the
        other (read the other way round, it could be in neither, and a writer opening now draw
        numbers below its writes)."""
        open_records = {int(w.get("writer", 0)): w for w in self.open_writers()}
        metas = self.metas()
        highest = max((m.get("max_sequence", 0) for m in metas), default=0)
        closed = self.closed_writers(metas)
        unclosed = set(open_records) - set(closed)
        if unclosed:
            logs = [log for log in self.index_logs() if log[0] in unclosed]
            records, _ = self.read_index_logs(logs, "skip", closed, complete=False)
            if len(records):
                last = records["sequence"] + records["count"].astype(np.uint64) - np.uint64(1)
                highest = max(highest, int(last.max()))
        hidden = [open_records[w] for w in unclosed if not self.place(w)[0].capabilities.visible_writes]
        if hidden:
            highest = max(highest, self._hidden_sequences(hidden, highest))
        return highest

    #: Sequence numbers an unclosed writer whose index log is hidden may have drawn since it
    #: opened (2**40 writes), for :meth:`max_sequence`.
    HIDDEN_SEQUENCES = 1 << 40

    def _hidden_sequences(self, open_records: list[dict], highest: int) -> int:
        """An upper bound of the sequence numbers of unclosed writers whose index logs the
        backing store hides: HDFS shows a file under lease (a writer open, or killed and not yet
        recovered) only up to its last complete block, so their synced records cannot be read
        and a writer opening now would draw numbers below them, and lose to a dead writer's
        older writes once it is recovered. Each open record holds the next number its process
        would draw at the open; a writer of this very process drew from this process's own
        counter, which is above its numbers already."""
        bound = 0
        for record in open_records:
            if not of_this_process(record):
                bound = max(bound, int(record.get("sequence") or highest) + self.HIDDEN_SEQUENCES)
        return bound

    # -- index ------------------------------------------------------------------------------------
    def read_index_logs(self, logs, on_corruption: str = "raise",
                        closed: dict[int, dict] | None = None, complete: bool = True) -> tuple[np.ndarray, list[Damage]]:
        """Read and check the given index logs: ``(valid records, damage found)``.

        A closed writer's log must hold exactly the records its metadata counts (``closed``:
        the summaries of :meth:`closed_writers`; read here when not given); a log cut short is
        serious damage, not a shorter file, and so is a missing one (``complete``: ``logs`` is
        every index log of the container, so a closed writer with records must be among them).
        An unclosed writer's torn last record is the trace of a crash and only reported.

        ``on_corruption="raise"`` raises PlfsCorruptionError naming the first seriously damaged
        log; ``"skip"`` drops damaged records and keeps everything else.
        """
        if closed is None:
            closed = self.closed_writers()
        version = self.version
        parts, damage = [], []
        for writer, fs, path, *_ in logs:  # index_logs() entries, with or without sizes
            url = fs.url(path)
            data = fs.read_bytes(path)
            records, valid, torn = decode_records(data, version)
            for i in np.flatnonzero(~valid):
                damage.append(Damage(url, int(i), "checksum mismatch or invalid fields"))
            wrong_writer = valid & (records["writer"] != writer)
            for i in np.flatnonzero(wrong_writer):
                damage.append(Damage(url, int(i), f"record names writer {records['writer'][i]:08x}"))
            keep = valid & ~wrong_writer
            summary = closed.get(writer)
            expected = summary.get("records") if summary is not None else None
            if expected is not None and len(records) < expected:
                damage.append(Damage(url, -1, f"holds {len(records)} whole records, its writer closed after "
                                              f"writing {expected}: the log was cut short"
                                              + (f" ({torn} bytes of a torn record)" if torn else "")))
            elif expected is not None and len(records) > expected:
                # A recovered writer's metadata counts the records it completed; what follows
                # them is what the crash left half-done.
                damage.append(Damage(url, -1, f"holds {len(records)} records, its writer's metadata counts "
                                              f"{expected}: records {expected}.. are left out",
                                     serious=not summary.get("recovered")))
                keep[expected:] = False
            elif torn:
                damage.append(Damage(url, -1, f"torn record at the end ({torn} bytes)", serious=False))
            if summary is None and keep.any():
                keep &= self._reached_data_log(writer, records, url, damage)
            parts.append(records[keep])
        if complete:
            damage.extend(self.missing_index_logs(logs, closed))
        serious = [d for d in damage if d[3]]
        if serious and on_corruption == "raise":
            raise PlfsCorruptionError(
                errno.EIO, f"corrupt index: {serious[0].text()}; run `hpcbridge plfs check` "
                f"or open with on_corruption='skip' to read the other writers' data", self.url)
        return (np.concatenate(parts) if parts else np.zeros(0, RECORD)), damage

    def missing_index_logs(self, logs, closed: dict[int, dict]) -> list[Damage]:
        """Serious damage for each closed writer whose metadata counts records but whose index
        log is not among ``logs`` (every index log of the container): its data would read as
        holes."""
        present = {log[0] for log in logs}
        damage = []
        for writer, summary in sorted(closed.items()):
            if writer not in present and (summary.get("records") or 0) > 0:
                fs, hostdir = self.place(writer)
                damage.append(Damage(fs.url(f"{hostdir}/{index_log_name(writer)}"), -1, "the index log is missing: its "
                                     f"writer closed after writing {summary['records']} records"))
        return damage

    def _reached_data_log(self, writer: int, records: np.ndarray, url: str, damage: list) -> np.ndarray:
        """Which records of an unclosed writer describe bytes its data log holds. A writer puts
        data in its log before the records that describe it, but a crash can still leave the
        log shorter than what a record says (on HDFS the unsynced end of a block is lost):
        those records were never complete writes, and are dropped with a note."""
        fs, path = self.data_log(writer)
        try:
            have = fs.info(path).size
        except FileNotFoundError:
            have = 0
        ends = records["physical"] + records["length"] * records["count"].astype(np.uint64)
        reached = ends <= np.uint64(have)
        if not reached.all():
            damage.append(Damage(url, -1, f"{int((~reached).sum())} record(s) describe bytes past the end of "
                                          f"{fs.url(path)} ({have} bytes): writes the unclosed writer never "
                                          "completed, left out", serious=False))
        return reached
