"""Read one partition with record alignment, and measure where its bytes came from.

:func:`read_partition` runs inside a Dask task. For every byte range it fetches from storage it
asks the file system for the block locations of exactly that range, and attributes each block's
bytes to the host that served them: the worker's own host when it holds a copy (the HDFS client
reads a local replica first), else the first host listed. With replication 1 that is the only
host, so local and remote bytes are exact; with more copies, a remote read is attributed to the
first replica host. The worker's host is the host of ``distributed.get_worker().address`` (this
machine's name outside a ``distributed`` worker). The measurement goes to the scheduler's event
log (topic :data:`EVENT_TOPIC`) or, without ``distributed``, to a list in this process;
:mod:`hpcbridge.dask.report` sums it per job.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import defaultdict
from dataclasses import dataclass

from ..fs.base import FileSystem
from ..fs.ranges import merge_ranges
from .hosts import host_matches, host_of_address
from .partitions import Chunk, Partition, RecordFormat

__all__ = ["ReadSpec", "read_partition", "read_spec", "read_chunk", "EVENT_TOPIC", "local_events", "emit_event",
           "worker_host", "cached_fs"]

#: Topic of the scheduler event log the read tasks report to.
EVENT_TOPIC = "hpcbridge-locality"
#: First extra bytes read past a chunk's end to finish its last record (doubled while needed).
OVERREAD = 4 << 10

_LOCAL_EVENTS: list[dict] = []
_LOCAL_LOCK = threading.Lock()
_FS_CACHE: dict[FileSystem, FileSystem] = {}


def local_events() -> list[dict]:
    """Measurements of partitions read in this process without a ``distributed`` worker."""
    with _LOCAL_LOCK:
        return list(_LOCAL_EVENTS)


def cached_fs(fs: FileSystem) -> FileSystem:
    """This worker process's connection for ``fs`` (one per file system, reused across tasks)."""
    # A file system arrives pickled with every task; reuse one connection (and its layout cache)
    # per worker process instead of reconnecting for each partition.
    with _LOCAL_LOCK:
        return _FS_CACHE.setdefault(fs, fs)


def _boundary(f, at: int, size: int, delimiter: bytes, fetched: list) -> int:
    """Offset (in the file) just past the first record delimiter starting at or after file
    offset ``at``; ``size`` if there is none. Reads a small window from ``at``, doubled while
    needed.

    Record delimiters are the occurrences a scan from the start of the file finds, left to
    right without overlaps (``bytes.split``). For a delimiter that can overlap itself (``b"||"``,
    ``b"\\n\\n"``: a proper prefix is also a suffix) an occurrence found from ``at`` may not be
    one of them, so the scan starts where no occurrence straddles (:func:`_unstraddled`)."""
    start = _unstraddled(f, at, delimiter, fetched) if _overlaps_itself(delimiter) else at
    buf = bytearray()
    step = OVERREAD
    search = 0
    while start + len(buf) < size:
        end = start + len(buf)
        more = f.pread(min(step, size - end), end)
        if not more:
            break
        fetched.append((end, len(more)))
        buf += more
        while True:
            i = buf.find(delimiter, search)
            if i < 0:
                break
            if start + i >= at:
                return start + i + len(delimiter)
            search = i + len(delimiter)  # a delimiter before ``at``: the scan goes on after it
        search = max(search, len(buf) - len(delimiter) + 1)
        step *= 2
    return size


def _overlaps_itself(delimiter: bytes) -> bool:
    return any(delimiter[:k] == delimiter[-k:] for k in range(1, len(delimiter)))


def _unstraddled(f, at: int, delimiter: bytes, fetched: list) -> int:
    """The largest offset ``q <= at`` that no occurrence of ``delimiter`` straddles (starts
    before it, ends after it): a left-to-right scan from the file's start and one from ``q``
    find the same delimiters from ``q`` on."""
    width = len(delimiter)
    q = at
    while q > 0:
        lo = max(0, q - max(OVERREAD, 2 * width))
        buf = f.pread(q + width - 1 - lo, lo)
        fetched.append((lo, len(buf)))
        while True:
            found = next((s for s in range(max(lo, q - width + 1), q)
                          if buf[s - lo:s - lo + width] == delimiter), None)
            if found is None:
                return q
            q = found
            if lo > 0 and q - width + 1 < lo:
                break  # the bytes before the window are needed: read again from q
    return q


def read_chunk(f, chunk: Chunk, fmt: RecordFormat, fetched: list) -> bytes:
    """The whole records a chunk owns, read from open file ``f``; ``fetched`` collects the
    ``(offset, length)`` ranges read from storage.

    The record boundaries are found first, with small reads at the chunk's start and end; the
    records are then one read of exactly their bytes, straight into the bytes object returned
    (no growing buffer to copy out of).
    """
    if fmt.record_size:
        r = fmt.record_size
        start = -(-chunk.start // r) * r
        end = min(-(-chunk.end // r) * r, chunk.size)
    else:
        start = chunk.start if chunk.start == 0 else _boundary(f, chunk.start, chunk.size, fmt.delimiter, fetched)
        # When the first delimiter at or past the chunk's start lies past its end, the chunk
        # owns no record: the end search finds the same delimiter, and start == end.
        end = chunk.size if chunk.end >= chunk.size else _boundary(f, chunk.end, chunk.size, fmt.delimiter,
                                                                   fetched)
    if start >= end:
        return b""
    data = f.pread(end - start, start)
    fetched.append((start, len(data)))
    return data


def worker_host() -> tuple[str, object]:
    """``(host, worker)`` of the running ``distributed`` worker, or ``(hostname, None)`` outside one."""
    try:
        from distributed import get_worker

        worker = get_worker()
        return host_of_address(worker.address), worker
    except (ImportError, ValueError):
        return socket.gethostname(), None


def _attribute(fs: FileSystem, path: str, ranges: list, worker_host: str, tally: dict) -> None:
    # A record boundary's window is read again with the records: each byte counted once.
    starts, lengths = merge_ranges([o for o, _ in ranges], [n for _, n in ranges])
    for offset, length in zip(starts.tolist(), lengths.tolist()):
        for block in fs.block_locations(path, offset, length):
            local = next((h for h in block.hosts if host_matches(h, worker_host)), None)
            served_by = local or (block.hosts[0] if block.hosts else "unknown")
            tally["hosts"][served_by] += block.length
            tally["local" if local else "remote"] += block.length


@dataclass(frozen=True)
class ReadSpec:
    """Everything one read task needs, and the workers it should run on.

    The scheduler plugin of :mod:`hpcbridge.dask.scheduling` recognises read tasks by this
    argument and restricts them (softly) to ``workers``.
    """

    fs: FileSystem
    partition: Partition
    fmt: RecordFormat
    job: str
    #: Addresses of the workers on the hosts storing the partition's bytes (empty: anywhere).
    workers: tuple[str, ...] = ()


def read_spec(spec: ReadSpec) -> list:
    """The body of a read task: the partition's whole records, one ``bytes`` per file."""
    return read_partition(spec.fs, spec.partition, spec.fmt, spec.job)


def read_partition(fs: FileSystem, partition: Partition, fmt: RecordFormat, job: str) -> list[bytes]:
    """Read a partition's whole records, one ``bytes`` per file it covers (its chunks of one
    file, in order, concatenated), and report where the bytes came from (see the module
    docstring). Files stay apart: a file's last record without a delimiter would otherwise run
    into the next file's first."""
    fs = cached_fs(fs)
    host, worker = worker_host()
    started = time.perf_counter()
    files: list[tuple[str, list]] = []
    tally = {"hosts": defaultdict(int), "local": 0, "remote": 0}
    for chunk in partition.chunks:
        fetched: list = []
        with fs.open(chunk.path, "rb") as f:
            piece = read_chunk(f, chunk, fmt, fetched)
        if not files or files[-1][0] != chunk.path:
            files.append((chunk.path, []))
        files[-1][1].append(piece)
        _attribute(fs, chunk.path, fetched, host, tally)
    data = [pieces[0] if len(pieces) == 1 else b"".join(pieces) for _, pieces in files] or [b""]
    event = {
        "job": job, "partition": partition.index, "worker_host": host,
        "worker": worker.address if worker is not None else None,
        "preferred": partition.primary_host, "bytes_local": tally["local"], "bytes_remote": tally["remote"],
        "bytes_by_host": dict(tally["hosts"]), "records_bytes": sum(map(len, data)),
        "seconds": time.perf_counter() - started,
    }
    emit_event(worker, event)
    return data


def emit_event(worker, event: dict) -> None:
    """Send a read task's measurement to the scheduler's event log (or, without a
    ``distributed`` worker, to this process's list)."""
    if worker is not None:
        worker.log_event(EVENT_TOPIC, event)
    else:
        with _LOCAL_LOCK:
            _LOCAL_EVENTS.append(event)
