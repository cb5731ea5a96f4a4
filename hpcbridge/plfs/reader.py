"""Reading a container: global index once, then data from the writers' logs, checked.

A read looks up the pieces of its range in the global index, groups the pieces each writer
holds contiguously in its data log into runs (a large read of a regular checkpoint takes them
from the index's runs directly), reads each run with positional scatter calls
straight into the caller's buffer (a group of ``CHECK_GROUP`` bytes at a time, checked while in
cache; for large reads from a remote file system, in parallel on a bounded pool, from a kernel
one shared by the calling thread and one pool thread while a core is free); holes are
zero-filled in place. A read of one object (one piece) is one positional read on a kernel file
system, and goes through the log's read buffer on a remote one.
At most ``max_open`` data logs are open at once (PLFS #114 ran out of descriptors on wide
containers).

Every record of a format-2 container carries the CRC32C of the data it describes. A reader
verifies each record whose whole data it has fetched anyway (``verify="auto"``, the default:
one read, or consecutive reads such as a file read front to back), or fetches and verifies
every record a read touches (``"always"``), or none (``"never"``). A mismatch
raises :class:`PlfsCorruptionError` naming the container, the data log and the logical range;
with ``on_corruption="skip"`` the damaged record's bytes read as zeros and a
:class:`PlfsCorruptionWarning` says where.
"""

from __future__ import annotations

import bisect
import collections
import concurrent.futures
import contextlib
import errno
import itertools
import os
import threading
import warnings

import numpy as np

from ..errors import os_error
from ..fs.pool import CallPool
from ..fs.posix import IOV_MAX as _IOV_MAX
from ..fs.ranges import FEW, merge_few_ranges, merge_ranges
from .container import Container, PlfsCorruptionError, of_this_process
from .format import data_crc, data_crcs
from .index import GlobalIndex

__all__ = ["PlfsReader", "PlfsCorruptionWarning", "load_index", "VERIFY_MODES"]

#: Values of the ``verify`` option.
VERIFY_MODES = ("auto", "always", "never")

# Resolved indexes of recently opened containers, keyed by the index logs and their sizes: an
# unchanged container is reopened without reading its index logs again.
_CACHE: collections.OrderedDict = collections.OrderedDict()
_CACHE_SIZE = 16
_cache_lock = threading.Lock()


class PlfsCorruptionWarning(UserWarning):
    """Damage that ``on_corruption="skip"`` read around (its bytes read as zeros), or a
    persisted flattened index that was ignored because it failed its checks."""


def index_version(container: Container, logs) -> tuple:
    """What the cached index of ``container`` depends on: which container it is (the marker's
    id: one removed and made again at the same path, by writers of the same ids, can have logs
    of the same sizes), its index logs (``index_logs(sizes=True)``) and metadata records, by path
    and size."""
    metas = container.fs.iterdir(f"{container.path}/meta")
    return (container.url, container.id, tuple((path, size) for _, _, path, size in logs),
            tuple(sorted((m.path, m.size) for m in metas)))


def load_index(container: Container, on_corruption: str = "raise", comm=None, quiet: bool = False):
    """Merge every writer's index log into a :class:`GlobalIndex`; returns ``(index, damage)``.

    A valid persisted flattened index (``hpcbridge plfs flatten``) is used instead of the logs;
    one that fails its checks is reported (a warning) and ignored. With an MPI communicator,
    each rank reads its share of the index logs and the records are allgathered, instead of
    every rank reading everything.

    A writer still open (or crashed) on HDFS makes it raise EBUSY (``on_corruption="skip"``: a
    warning, none with ``quiet``): see :func:`_hidden_writers`.
    """
    from .tools import load_flat

    flat = load_flat(container) if (comm is None or comm.rank == 0) else None
    if comm is not None and comm.size > 1:
        flat = comm.bcast(flat, root=0)
    index, flat_damage = flat
    if index is not None:
        return index, []
    for damage in flat_damage:
        warnings.warn(f"{damage.text()}: reading the index logs instead", PlfsCorruptionWarning, stacklevel=3)
    logs = container.index_logs(sizes=True)
    if not quiet:
        # Decided once for all ranks: ranks that disagreed (a writer closing meanwhile) would
        # leave the others waiting in the allgather below.
        why = _hidden_writers(container) if comm is None or comm.rank == 0 else None
        if comm is not None and comm.size > 1:
            why = comm.bcast(why, root=0)
        if why is not None and on_corruption == "raise":
            raise OSError(errno.EBUSY, why, container.url)
        if why is not None:
            warnings.warn(f"{container.url}: {why}", PlfsCorruptionWarning, stacklevel=3)
    key = None
    if comm is None or comm.size == 1:
        key = index_version(container, logs)
        with _cache_lock:
            if key in _CACHE:
                _CACHE.move_to_end(key)
                return _CACHE[key], []
    closed = container.closed_writers()
    if comm is not None and comm.size > 1:
        mine = logs[comm.rank::comm.size]
        records, damage = container.read_index_logs(mine, "skip", closed, complete=False)
        gathered = comm.allgather((records, damage))
        records = np.concatenate([g[0] for g in gathered])
        damage = [d for g in gathered for d in g[1]] + container.missing_index_logs(logs, closed)
        serious = [d for d in damage if d[3]]
        if serious and on_corruption == "raise":
            raise PlfsCorruptionError(errno.EIO, f"corrupt index: {serious[0].text()}; run `hpcbridge plfs check` "
                                      "or open with on_corruption='skip' to read the other writers' data",
                                      container.url)
    else:
        records, damage = container.read_index_logs(logs, on_corruption, closed)
    index = GlobalIndex.build(records)
    if key is not None and not damage:
        with _cache_lock:
            _CACHE[key] = index
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    return index, damage


def _hidden_writers(container: Container) -> str | None:
    """Why reading now would miss synced data of an unclosed writer, or None.

    HDFS shows a file still being written (open, or left under lease by a killed writer) only up
    to its last complete block: what the writer synced after it, index and data alike, stays
    invisible until it closes or lease recovery (``hpcbridge plfs recover``) closes its logs.
    Read then, its synced writes would come back as holes (zeros) without a word.

    Writers of this very process are left to it: it knows them, and closes them before it reads
    what they wrote where it must (the mount daemon publishes its writers before a read).
    """
    if container.fs.capabilities.visible_writes:
        return None  # POSIX: a crashed writer's flushed bytes are all there (no listing spent)
    try:
        opened = container.open_writers()
    except FileNotFoundError:  # a container made by another tool, without openhosts/
        return None
    opened = [r for r in opened if not of_this_process(r)]
    closed = container.closed_writers() if opened else {}
    hidden = []
    for record in opened:
        writer = int(record.get("writer", 0))
        if writer not in closed and not container.place(writer)[0].capabilities.visible_writes:
            hidden.append(f"{writer:08x} (host {record.get('host', '?')}, pid {record.get('pid', '?')})")
    if not hidden:
        return None
    return (f"{len(hidden)} writer(s) still open or crashed: {', '.join(hidden)}; the backing store shows "
            "their logs only up to their last complete block until they close, so what they synced would "
            "read as holes. Close them, or run `hpcbridge plfs recover` once they are gone (lease recovery)")


class _Run:
    """Bytes of one writer's data log read with one call: physical ``[start, start + length)``,
    placed at ``segments`` (``(buffer offset, length)`` in physical order). ``records``: for
    each segment, the checks row of the record that is exactly it, or -1 (None: not known)."""

    __slots__ = ("writer", "start", "length", "segments", "records")

    def __init__(self, writer: int, start: int, length: int, segments: list, records: list | None = None):
        self.writer, self.start, self.length, self.segments = writer, start, length, segments
        self.records = records


def _runs(pieces, offset: int) -> list[_Run]:
    """Group pieces into runs with the range planner: per writer, physically contiguous pieces
    are read together. ``pieces``: ``(logical, length, physical, writer)`` tuples, or those four
    int64 arrays and the pieces' record rows or None (a large read's lookup), in any order."""
    record = None
    if isinstance(pieces, tuple):
        logical, length, physical, writer, record = pieces
    elif not pieces:
        return []
    elif len(pieces) == 1:
        logical, length, physical, writer = pieces[0]
        return [_Run(writer, physical, length, [(logical - offset, length)])]
    elif len(pieces) <= FEW:  # a small read's few pieces: the planner in plain Python
        logical, length, physical, writer = zip(*pieces)
        starts, lengths, block_of = merge_few_ranges(physical, length, keys=writer)
        runs: dict[int, _Run] = {}
        for i in sorted(range(len(pieces)), key=lambda i: (writer[i], physical[i])):
            b = block_of[i]
            if b < 0:
                continue  # empty piece: nothing to read
            run = runs.get(b)
            if run is None:
                runs[b] = _Run(writer[i], starts[b], lengths[b], [(logical[i] - offset, length[i])])
            else:
                run.segments.append((logical[i] - offset, length[i]))
        return list(runs.values())
    else:
        table = np.array(pieces, dtype=np.int64).reshape(-1, 4)
        logical, length, physical, writer = table.T
    if not len(logical):
        return []
    starts, lengths, block_of = merge_ranges(physical, length, keys=writer, return_blocks=True)
    # In (writer, physical) order the pieces of one run are consecutive: cut that order where
    # the run changes, with no Python step per piece (a 16 MiB read of an N-1 file has hundreds).
    order = np.lexsort((physical, writer))
    order = order[block_of[order] >= 0]  # empty pieces: nothing to read
    if not len(order):
        return []
    blocks = block_of[order]
    segments = np.stack((logical[order] - offset, length[order]), axis=1).tolist()
    records = record[order].tolist() if record is not None else None
    bounds = [0, *(np.flatnonzero(blocks[1:] != blocks[:-1]) + 1).tolist(), len(order)]
    firsts = bounds[:-1]
    run_writers, run_blocks = writer[order[firsts]].tolist(), blocks[firsts].tolist()
    starts, lengths = starts.tolist(), lengths.tolist()
    return [_Run(w, starts[b], lengths[b], segments[a:z], records and records[a:z])
            for w, b, a, z in zip(run_writers, run_blocks, firsts, bounds[1:])]


_LOADAVG: list[int] = []  # the descriptor of /proc/loadavg, opened at the first large read
_loadavg_lock = threading.Lock()


def _runnable() -> int:
    """Threads of the whole machine ready to run now, this one included (Linux's
    ``/proc/loadavg``, read with one ``pread``: 1.5 us against 8.6 opening it each time); 0
    where that is not known."""
    try:
        if not _LOADAVG:
            with _loadavg_lock:
                if not _LOADAVG:
                    _LOADAVG.append(os.open("/proc/loadavg", os.O_RDONLY | os.O_CLOEXEC))
        return int(os.pread(_LOADAVG[0], 64, 0).split()[3].split(b"/")[0])
    except (OSError, IndexError, ValueError):
        return 0


class _BusyCores:
    """Threads of this process busy with large reads on kernel file systems: each reading
    thread and each helper sharing a read count one. A read takes a helper only while that
    leaves no more busy than the cores the process may run on, and while the machine has fewer
    threads ready to run than those cores (this one included), so that a core is idle for the
    helper: concurrent readers (Dask tasks on every core, MPI ranks on every core), or another
    process computing on the other core, then read alone. Measured, 128 MiB: two threads each
    reading half with a handle of its own, medians of 15, 17.9-19.2 ms alone, 20.4-21.9 ms with
    a helper each; four processes each reading a quarter on two cores, medians of 11, 32.1
    against 35.4 ms; one reader while another process spins on the second of two cores,
    medians of 13, 18.4 ms with a helper, 17.2 alone."""

    def __init__(self):
        self._lock = threading.Lock()
        self._busy = 0
        self._pid = None

    @contextlib.contextmanager
    def reading(self, want_helper: bool):
        """Count this thread while it reads; yields whether it may take a helper (counted too)."""
        cores = len(os.sched_getaffinity(0)) if want_helper else 0
        if cores and _runnable() >= cores:  # no core idle for a helper
            cores = 0
        with self._lock:
            if self._pid != os.getpid():  # a forked child inherits no reads in flight
                self._pid, self._busy = os.getpid(), 0
            helper = self._busy + 2 <= cores
            self._busy += 1 + helper
        try:
            yield helper
        finally:
            with self._lock:
                if self._pid == os.getpid():
                    self._busy -= 1 + helper


_LARGE_READS = _BusyCores()
_HELPERS: list[CallPool] = []  # the helpers of shared reads, one pool for every reader of the process
_helpers_lock = threading.Lock()


def _helpers() -> CallPool:
    """The pool whose threads help large reads (created at the first): its threads outlive a
    reader, so opening a file and reading it whole does not start a thread each time (the
    first 16 MiB call of a 128 MiB read took 0.51 ms longer than the others with a pool per
    reader, 0.17 ms with this one)."""
    if not _HELPERS:
        with _helpers_lock:
            if not _HELPERS:
                _HELPERS.append(CallPool(max(2, os.cpu_count() or 2), "plfs helpers"))
    return _HELPERS[0]


def _share(runs: list[_Run], helper: float) -> tuple[list[_Run], list[_Run]]:
    """``runs`` cut in two: the calling thread's and about ``helper`` of the bytes for the
    helper. The cut falls between runs, or inside the run that holds it between two parts that
    are whole records (no record's CRC is then carried across it), whichever is nearer."""
    total = sum(run.length for run in runs)
    target = total - helper * total  # the calling thread's bytes
    done = 0
    for i, run in enumerate(runs):
        if done + run.length >= target:
            break
        done += run.length
    # (distance from the target, run index, part of that run to cut before or None): between
    # runs, before run i or after it, or inside run i at its first boundary past the target.
    candidates = [(abs(target - done), i, None)]
    if i + 1 < len(runs):
        candidates.append((abs(done + run.length - target), i + 1, None))
    rows = run.records
    if rows is not None and len(rows) > 1:
        at = done
        for k, (_, length) in enumerate(run.segments[:-1]):
            at += length
            if at >= target:
                if rows[k] >= 0 and rows[k + 1] >= 0:
                    candidates.append((abs(at - target), i, k + 1))
                break
    _, i, cut = min(candidates, key=lambda candidate: candidate[0])  # the first of equals
    if cut is None:
        i = min(max(i, 1), len(runs) - 1)  # each side gets a run
        return runs[:i], runs[i:]
    head = sum(length for _, length in run.segments[:cut])
    first = _Run(run.writer, run.start, head, run.segments[:cut], rows[:cut])
    second = _Run(run.writer, run.start + head, run.length - head, run.segments[cut:], rows[cut:])
    return runs[:i] + [first], [second] + runs[i + 1:]


def _whole_records(rows: list) -> tuple[int, int, bool]:
    """``(lo, hi, consecutive)`` of a run's or a group's parts, ``rows`` being each part's
    checks row (-1: not a whole record): parts ``[lo, hi)`` lie between a first part and a last
    one that are not whole records (cut by a read's ends), and ``consecutive`` says whether
    they are whole records of consecutive rows (then checked by their rows, no search)."""
    lo = int(rows[0] < 0)
    hi = max(lo, len(rows) - int(rows[-1] < 0))
    consecutive = hi > lo and rows[lo] >= 0 and rows[lo:hi] == list(range(rows[lo], rows[lo] + hi - lo))
    return lo, hi, consecutive


def _groups(parts: list, limit: int):
    """``(group, bytes)``: ``parts`` (memoryviews) in consecutive groups of about ``limit``
    bytes, cut between parts (where pieces, and so mostly records, end), inside a part only
    where it alone is larger than ``limit``. Cuts are found by bisection of the running sizes,
    not by a step per part."""
    ends = list(itertools.accumulate(map(len, parts)))
    i = done = 0
    while i < len(parts):
        j = bisect.bisect_right(ends, done + limit, i)
        if j == i:  # one part larger than limit: its first limit bytes, the rest stays next
            parts = parts[:i] + [parts[i][:limit], parts[i][limit:]] + parts[i + 1:]
            ends = ends[:i] + [done + limit] + ends[i:]
            j = i + 1
        yield parts[i:j], ends[j - 1] - done
        done = ends[j - 1]
        i = j


class _Parts:
    """A run's buffers (memoryviews, consecutive bytes of one log) and where each begins, so
    the bytes of any range are found by bisection, not by walking from the first buffer (a
    whole-file read checks hundreds of records per run)."""

    __slots__ = ("parts", "starts", "next")

    def __init__(self, parts: list):
        self.parts = parts
        self.starts = [0] if len(parts) == 1 else list(itertools.accumulate(map(len, parts[:-1]), initial=0))
        self.next = 0  # the buffer after the last one used: records are checked in order

    def are_records(self, starts: list, ends: list, first: int, last: int, a: int, b: int) -> bool:
        """Whether records ``[first, last)`` (``starts``/``ends`` in the log) are exactly these
        buffers, holding log bytes ``[a, b)`` (each piece written as one record, as an N-1
        checkpoint's interleaved writers leave them): then each record is summed by one CRC call
        on its buffer, no slicing or search. Measured with the groups above it (128 MiB, three
        interleaved pairs): 16.6-17.3 ms against 17.5-17.8 ms through :meth:`crc`."""
        if last - first != len(self.parts) or starts[first] != a or ends[last - 1] != b:
            return False
        # Contiguous records starting where the buffers start: then each spans its buffer. (A
        # piece never spans two records, so equal counts imply this for a sound index; checked
        # anyway, as an index with overlapping records must not pass a wrong sum.)
        return starts[first + 1:last] == ends[first:last - 1] and \
            self.starts == [start - a for start in starts[first:last]]

    def crc(self, lo: int, hi: int, seed: int) -> int:
        """CRC32C (continuing ``seed``) of bytes ``[lo, hi)`` of the concatenated buffers."""
        parts, starts = self.parts, self.starts
        if len(parts) == 1:
            return data_crc(parts[0][lo:hi], seed)
        i = self.next
        if not (i < len(starts) and starts[i] == lo):
            i = bisect.bisect_right(starts, lo) - 1
        elif hi - lo == len(parts[i]):  # exactly the next buffer (a record per piece): no slicing
            self.next = i + 1
            return data_crc(parts[i], seed)
        crc = seed
        while lo < hi:
            part, start = parts[i], starts[i]
            end = min(hi, start + len(part))
            crc = data_crc(part[lo - start:end - start], crc)
            lo, i = end, i + 1
        self.next = i if lo == starts[i - 1] + len(parts[i - 1]) else i - 1
        return crc


class PlfsReader:
    """Random-access reads of a container's logical file, with data checks (see the module).

    Parameters
    ----------
    container, index:
        The container and its resolved index (:func:`load_index`).
    verify:
        ``"auto"``, ``"always"`` or ``"never"`` (see the module docstring).
    on_corruption:
        ``"raise"`` or ``"skip"`` data that fails its checksum.
    """

    #: Reads up to this size are served on the calling thread.
    SMALL_READ = 4 << 20
    #: Reads of several pieces from this size up (copies' 1 MiB calls, a mount's requests) are
    #: planned from the index's runs like large ones: 128 MiB read in 1 MiB calls, 22.6 -> 18.1 ms
    #: (plain file 9.4); in 256 KiB calls 38.8 -> 32.1 ms; 47001 B across two objects, 23.0 -> 20.9 us.
    PLANNED_READ = 32 << 10
    #: A larger read's runs go to the reader's pool (True) or stay off it (False: the calling
    #: thread, with one helper, see ``SHARED_READS``); None: by the backing file system. A remote
    #: one (HDFS) overlaps round trips on the pool; on one that maps files (a kernel one), the
    #: kernel's readahead already overlaps the I/O and a pool's threads only contend for the GIL.
    #: Measured here, 128 MiB read in 16 MiB calls (medians of 6): warm cache 17.7 ms on the
    #: calling thread, 23.3 ms on the pool (plain file 8.9); cold cache 53.4 and 79.7 ms (plain
    #: 51.0).
    PARALLEL_RUNS: bool | None = None
    #: Where runs stay off the pool (a kernel file system), a large read of several runs is
    #: shared by the calling thread and one pool thread (``HELPER_SHARE`` of its bytes) while a
    #: core is free for it (:class:`_BusyCores`): the copies and CRCs release the GIL.
    SHARED_READS = True
    #: The helper's share of a shared read's bytes. It starts a thread wake-up (about 20 us)
    #: after the calling thread, but the calling thread also plans the read: 128 MiB read in 16
    #: MiB calls with a share of 0.48, the calling thread's part took 1175 us a call and the
    #: helper's 1079 us (medians of 160), so the calling thread ended last; with half each
    #: neither waits long for the other.
    HELPER_SHARE = 0.5
    #: Bytes of a large read's run read and checked at a time: the CRC finds them still in the
    #: core's cache (2 MiB of L2 here). 128 MiB whole-file read, checked: 16.6-17.1 ms, against
    #: 19.1-19.2 ms reading each run whole, then summing it.
    CHECK_GROUP = 512 << 10
    #: Bound of one large read's parallel runs, seconds.
    READ_TIMEOUT = 600.0

    def __init__(self, container: Container, index: GlobalIndex, threads: int = 8, max_open: int = 64,
                 verify: str = "auto", on_corruption: str = "raise"):
        if verify not in VERIFY_MODES:
            raise ValueError(f"verify must be one of {', '.join(VERIFY_MODES)}, got {verify!r} ({container.url})")
        self.container = container
        self.index = index
        self.size = index.size
        self.max_open = max_open
        self.verify = verify if len(index.checks) else "never"
        self.on_corruption = on_corruption
        self._verified = bytearray(len(index.checks))  # by row of the checks table: 1 once verified
        # Records part of which later writes hid: no read fetches them whole, so "auto" fetches
        # each whole once a read touches it (by row: 1 for such a record).
        shadowed = index.shadowed_rows() if self.verify == "auto" else ()
        self._shadowed = None
        if len(shadowed):
            self._shadowed = bytearray(len(index.checks))
            for row in shadowed.tolist():
                self._shadowed[row] = 1
        self._bad: dict[int, list[tuple[int, int]]] = {}  # writer: physical ranges read as zeros (skip)
        # (writer, physical offset the next read must start at): (start, end, crc expected, row,
        # CRC so far) of a record summed that far
        self._partial: dict[tuple[int, int], tuple] = {}
        self._carried: dict[tuple[int, int], int] = {}  # (writer, record start): its key's offset above
        self._state_lock = threading.Lock()
        self._seek_lock = threading.Lock()
        self._handles: collections.OrderedDict = collections.OrderedDict()
        self._in_use: dict[int, int] = {}
        self._closed = False  # no new log opens; logs in use close at their release
        self._lock = threading.Lock()
        self._pool = CallPool(threads, f"plfs {container.url}")
        # On kernel file systems (ones that map files) a read is a memory copy from the page
        # cache: the logs are read unbuffered, one positional call per read, by descriptor.
        self._kernel = all(fs.capabilities.memory_map for fs, _ in container.volumes)
        self.parallel_runs = not self._kernel if self.PARALLEL_RUNS is None else self.PARALLEL_RUNS

    # -- data log handles ---------------------------------------------------------------------
    def _handle(self, writer: int):
        """The open data log of ``writer``, marked in use until :meth:`_release`.

        At most ``max_open`` logs stay open; only logs no read is using are closed to make room
        (closing one another thread is reading from failed that read with EBADF), so the limit
        may be passed while more reads than ``max_open`` run at once.
        """
        with self._lock:
            if self._closed:  # a read that passed the handle's open check as close() ran
                raise ValueError(f"I/O operation on closed file {self.container.url}")
            handle = self._handles.pop(writer, None)
            if handle is None:
                fs, path = self.container.data_log(writer)
                # On HDFS buffered: small reads that walk a writer's log in order (reading back
                # one rank's strided objects) become large sequential reads of the log.
                handle = fs.open(path, "rb", buffering=0 if self._kernel else self.LOG_BUFFER)
            self._handles[writer] = handle
            self._in_use[writer] = self._in_use.get(writer, 0) + 1
            self._evict()
            return handle

    def _release(self, writer: int) -> None:
        with self._lock:
            left = self._in_use.pop(writer) - 1
            if left:
                self._in_use[writer] = left
            elif self._closed:  # close() left this log to its last read
                self._handles.pop(writer).close()
            self._evict()

    def _evict(self) -> None:
        # Called with the lock held: close the least recently used idle logs beyond max_open.
        excess = len(self._handles) - self.max_open
        if excess <= 0:
            return
        for old in [w for w in self._handles if w not in self._in_use][:excess]:
            self._handles.pop(old).close()

    #: Read buffer of each open data log on a remote file system (HDFS: its readahead window,
    #: one round trip each). On a kernel file system the logs are unbuffered: reading an object
    #: straight from the page cache into the caller's buffer measured faster than through a
    #: buffer (128 MiB read back object by object: 7.9 against 8.6 us per 47001 B object).
    LOG_BUFFER = 1 << 20

    def _short(self, writer: int, got: int, length: int, physical: int) -> PlfsCorruptionError:
        fs, path = self.container.data_log(writer)
        return PlfsCorruptionError(errno.EIO, f"data log {fs.url(path)} is shorter than its index says "
                                              f"({got} of {length} bytes at {physical})", self.container.url)

    def _read_into(self, writer: int, physical: int, parts: list, sequential: bool = False,
                   want: int | None = None) -> None:
        """Fill ``parts`` (memoryviews, in turn) from ``writer``'s data log at ``physical``.

        ``sequential``: through the log's read buffer (small reads walking a log in order
        become large reads of it), under the reader's lock; else one positional scatter read
        (``preadv`` on POSIX: straight into the caller's buffer), any thread.
        """
        if want is None:
            want = len(parts[0]) if len(parts) == 1 else sum(len(p) for p in parts)
        handle = self._handle(writer)
        try:
            if sequential:
                with self._seek_lock:
                    got = self._read_on(handle, physical, parts)
            elif len(parts) == 1:
                got = handle.preadinto(parts[0], physical)
            else:
                got = handle.preadvinto(parts, physical)
        finally:
            self._release(writer)
        if got != want:
            raise self._short(writer, got, want, physical)

    def _read_piece(self, writer: int, physical: int, part) -> None:
        """:meth:`_read_into` of one buffer (sequentially where the log is buffered). Reading
        back a rank's objects makes this call per object, from a log already open: it is then
        read under the lock, without marking the handle in use (no other thread can evict it
        meanwhile); on a kernel file system by one ``preadv`` on its descriptor, as the POSIX
        backend's own ``preadinto`` does, without its per-call checks (the reader made them)."""
        if self._kernel:
            with self._lock:
                handle = self._handles.get(writer)
                if handle is not None:
                    self._handles.move_to_end(writer)
                    if self._preadv(writer, handle.fileno(), [part], physical) == len(part):
                        return
            self._read_into(writer, physical, [part])  # first read of the log, or short
            return
        with self._seek_lock, self._lock:
            handle = self._handles.get(writer)
            if handle is not None:
                self._handles.move_to_end(writer)
                if handle.tell() != physical:
                    handle.seek(physical)
                got = handle.readinto(part)
                if 0 < got < len(part):  # io's buffered readers fill ``part`` unless the log ends
                    got += self._read_on(handle, physical + got, [part[got:]])
                if got != len(part):
                    raise self._short(writer, got, len(part), physical)
                return
        self._read_into(writer, physical, [part], sequential=True)

    def _preadv(self, writer: int, fd: int, parts: list, physical: int) -> int:
        """``os.preadv`` of ``writer``'s data log (descriptor ``fd``, on a kernel file system)
        into ``parts``, with no per-call checks (the reader made them); errors name the log."""
        try:
            return os.preadv(fd, parts, physical)
        except OSError as exc:
            fs, path = self.container.data_log(writer)
            raise os_error(exc.errno, fs.url(path), "posix", f"a data log of {self.container.url}") from None

    @staticmethod
    def _read_on(handle, physical: int, parts: list) -> int:
        """Fill ``parts`` in turn through ``handle``'s buffer from ``physical`` (the caller holds
        the seek lock); returns the bytes read, short at the end of the log."""
        if handle.tell() != physical:
            handle.seek(physical)
        got = 0
        for part in parts:
            done = 0
            while done < len(part):
                n = handle.readinto(part[done:] if done else part)
                if not n:
                    return got + done
                done += n
            got += done
        return got

    # -- reads --------------------------------------------------------------------------------
    def readinto(self, buffer, offset: int) -> int:
        """Read the logical bytes at ``offset`` into ``buffer``; returns the count (short at EOF)."""
        view = buffer if isinstance(buffer, memoryview) and buffer.format == "B" else memoryview(buffer).cast("B")
        end = min(offset + len(view), self.size)
        if end <= offset:
            return 0
        n = end - offset
        if n <= self.SMALL_READ:
            alone = self.verify != "always"  # a one-piece read may be read and checked on its own
            piece = self.index.piece_of(offset, end) if alone else None
            # A read of many pieces (1 MiB calls of a copy, a mount's requests) planned from the
            # index's runs, where they cover it, as a large read is.
            runs = self._spans(offset, end) if piece is None and n >= self.PLANNED_READ else None
            if piece is None and runs is None:
                pieces = self.index.lookup_list(offset, end)
                if alone and len(pieces) == 1 and pieces[0][1] == n:  # many runs: no piece_of
                    piece = (*pieces[0][2:], -1)
            if piece is not None:
                # One piece of one writer's log covers the read (reading back strided objects):
                # no holes to zero, one run, one buffer.
                physical, writer, record = piece
                part = view if len(view) == n else view[:n]
                if self._shadowed is not None:
                    self._verify_touched([_Run(writer, physical, n, [])], self._shadowed)
                self._read_piece(writer, physical, part)
                if self.verify == "auto":
                    if record < 0:
                        self._verify_piece(writer, physical, part)
                    elif not self._verified[record]:  # the read is that whole record
                        if data_crc(part) == self.index.checks.crc_of_row[record]:
                            self._verified[record] = 1
                        else:
                            self._corrupt(record)
                if writer in self._bad:
                    self._zero_bad(view, _Run(writer, physical, n, [(0, n)]))
                return n
            if runs is None:
                self._zero_holes(view, offset, end, pieces)
                runs = _runs(pieces, offset)
        else:
            runs = self._plan(view, offset, end)
        if self.verify == "always":
            self._verify_touched(runs)
        elif self._shadowed is not None:
            self._verify_touched(runs, self._shadowed)
        if n <= self.SMALL_READ or len(runs) <= 1:  # (no run: a read that is all hole, zeroed above)
            for run in runs:
                # Through the logs' read buffers where each read is a round trip (HDFS); on a
                # kernel file system one scatter read per run, straight into ``view``.
                self._read_run(view, run, sequential=n <= self.SMALL_READ and not self._kernel)
        elif self.parallel_runs:
            self._wait([self._pool.submit(self._read_run, view, run) for run in runs], n, offset)
        else:
            with _LARGE_READS.reading(self.SHARED_READS) as shared:
                if shared:
                    # About half the runs' bytes on one pool thread, the rest on this one: their
                    # copies from the page cache and their CRCs release the GIL: two cores share.
                    mine, theirs = _share(runs, self.HELPER_SHARE)
                    helper = _helpers().submit(self._read_runs, view, theirs)
                    try:
                        self._read_runs(view, mine)
                    finally:
                        self._wait([helper], n, offset)
                else:
                    self._read_runs(view, runs)
        return n

    def _plan(self, view, offset: int, end: int) -> list[_Run]:
        """The runs of a large read of ``[offset, end)``, holes zeroed in ``view``: from the
        index's runs directly where they cover the range (:meth:`GlobalIndex.spans`, a regular
        checkpoint's few runs), else by the range planner over :meth:`GlobalIndex.lookup`."""
        runs = self._spans(offset, end)
        if runs is not None:
            return runs
        found = self.index.lookup(offset, end)
        pieces = tuple(found[k] for k in ("logical", "length", "physical", "writer", "record"))
        if len(pieces[1]) and int(pieces[1].max()) > self.CHECK_GROUP:
            pieces = (*pieces[:4], None)  # a piece larger than a check group is read in parts
        self._zero_holes(view, offset, end, pieces)
        return _runs(pieces, offset)

    def _spans(self, offset: int, end: int) -> list[_Run] | None:
        """The runs of ``[offset, end)`` from :meth:`GlobalIndex.spans` (no hole to zero), or
        None where that does not apply."""
        spans = self.index.spans(offset, end, base=offset)
        if spans is None:
            return None
        limit = self.CHECK_GROUP
        # A piece larger than a check group is read in parts: its record is then not known.
        return [_Run(w, physical, length, list(zip(at, lengths)),
                     records if records is not None and max(lengths) <= limit else None)
                for w, physical, length, at, lengths, records in spans]

    def _read_runs(self, view, runs: list[_Run]) -> None:
        for run in runs:
            self._read_run(view, run)

    def _wait(self, futures: list, n: int, offset: int) -> None:
        """Wait for the pool's part of a read of ``n`` bytes at ``offset``; raise its error."""
        # Every run ends before the read returns or raises: none may write into the caller's
        # buffer afterwards. Each backend call inside has its own timeout; this bounds the rest.
        if all(future.done() for future in futures):  # the helper's share of a large read, mostly
            pending = None
        else:
            _, pending = concurrent.futures.wait(futures, timeout=self.READ_TIMEOUT)
        if pending:
            raise TimeoutError(errno.ETIMEDOUT, f"read of {n} bytes at {offset} did not finish within "
                                                f"{self.READ_TIMEOUT:g} s", self.container.url)
        for future in futures:
            future.result()

    @staticmethod
    def _zero_holes(view, offset: int, end: int, pieces) -> None:
        """Bytes no piece covers read as zeros, written in place. ``pieces`` as :func:`_runs`
        takes them; the arrays of a large read are sorted by logical offset and disjoint."""
        if isinstance(pieces, tuple):
            logical, length = pieces[0], pieces[1]
            ends = logical + length
            gaps = np.flatnonzero(logical[1:] > ends[:-1])  # a hole between piece i and i + 1
            bounds = [(offset, int(logical[0]) if len(logical) else end)]
            bounds += [(int(ends[i]), int(logical[i + 1])) for i in gaps.tolist()]
            bounds.append((int(ends[-1]) if len(ends) else end, end))
            zeros = None
            for a, b in bounds:
                if b > a:
                    zeros = np.frombuffer(view, np.uint8) if zeros is None else zeros
                    zeros[a - offset:b - offset] = 0
            return
        position = offset
        zeros = None
        for logical, length, _, _ in sorted(pieces):
            if logical > position:
                zeros = np.frombuffer(view, np.uint8) if zeros is None else zeros
                zeros[position - offset:logical - offset] = 0
            position = max(position, logical + length)
        if position < end:
            zeros = np.frombuffer(view, np.uint8) if zeros is None else zeros
            zeros[position - offset:end - offset] = 0

    def _read_run(self, view, run: _Run, sequential: bool = False) -> None:
        """Read one run straight into its places in ``view`` (pieces contiguous in the log but
        not in the file, a strided pattern, are one scatter read), verify what it covers whole,
        and zero what it holds of data skipped as corrupt."""
        parts = [view[at:at + length] for at, length in run.segments]
        if sequential or self.verify != "auto" or (run.length <= self.CHECK_GROUP and run.records is None):
            self._read_into(run.writer, run.start, parts, sequential, run.length)
            if self.verify == "auto":
                self._verify_run(run.writer, run.start, run.start + run.length, _Parts(parts))
        else:
            # A group at a time: its records are summed while the bytes are still in the core's
            # cache, instead of being fetched from memory a second time; where the records are
            # known (even in a run of one group), checked by their rows with no search.
            self._read_groups(run, parts)
        if run.writer in self._bad:
            self._zero_bad(view, run)

    def _read_groups(self, run: _Run, parts: list) -> None:
        """Read a large run ``CHECK_GROUP`` bytes at a time and check each group's records
        while its bytes are in the core's cache.

        The log is taken once for the run; on a kernel file system each group is one ``preadv``
        on its descriptor (the parts are slices of the caller's buffer, checked at the read's
        entry). Where the index knows each part's record (:meth:`GlobalIndex.spans`, ``lookup``), a
        group's records are checked by :meth:`_check_records` with no search. A 128 MiB read
        has 256 groups: their bookkeeping had cost more than their CRCs."""
        writer = run.writer
        records = run.records  # no part is larger than a group where it is known (readinto)
        lo, hi, check = self._consecutive(records)
        sums: list[int] = []  # CRCs of the parts from ``lo`` on, summed group by group
        handle = self._handle(writer)
        try:
            fd = handle.fileno() if self._kernel else -1
            position, first = run.start, 0
            for group, size in _groups(parts, self.CHECK_GROUP):
                if fd < 0 or len(group) > _IOV_MAX:
                    got = handle.preadvinto(group, position)
                else:
                    got = self._preadv(writer, fd, group, position)
                if got != size:
                    raise self._short(writer, got, size, position)
                if lo <= first and first + len(group) <= hi:
                    if check:  # compared once, after the run: here only the sums
                        sums += data_crcs(group)
                elif records is None:
                    self._verify_run(writer, position, position + size, _Parts(group))
                else:
                    self._check_records(writer, position, group, records[first:first + len(group)])
                    if first < lo < first + len(group):  # a group before the consecutive ones
                        lo = first + len(group)
                position += size
                first += len(group)
        finally:
            self._release(writer)
        if sums:
            self._check_rows(records[lo], sums)

    def _consecutive(self, records: list | None) -> tuple[int, int, bool]:
        """``(lo, hi, check)``: parts ``[lo, hi)`` of a run are whole records of consecutive rows
        (an N-1 lane: every part but a first or last one a read's bounds cut), so groups made of
        them only sum their parts, compared with the rows' CRCs once for the run (their per-group
        bookkeeping had cost as much as the CRCs themselves); ``check``: some are unverified.
        ``(0, 0, False)`` where that does not hold."""
        if not records:
            return 0, 0, False
        lo, hi, consecutive = _whole_records(records)
        if not consecutive:
            return 0, 0, False
        return lo, hi, bool(self._verified.count(0, records[lo], records[lo] + hi - lo))

    def _check_rows(self, r0: int, sums: list[int]) -> None:
        """Records of rows ``r0``, ``r0 + 1``... summed to ``sums``: compare them as one list."""
        r1 = r0 + len(sums)
        expected = self.index.checks.crc_of_row[r0:r1]
        if sums == expected:
            self._verified[r0:r1] = b"\x01" * (r1 - r0)
        else:
            for row, crc, want in zip(range(r0, r1), sums, expected):
                self._settle(row, crc, want)

    def _check_records(self, writer: int, position: int, parts: list, rows: list) -> None:
        """Check consecutive ``parts`` of ``writer``'s log from ``position`` whose records are
        ``rows`` (-1: the part is not a whole record). The records in the middle are summed by
        one C call each and compared as one list; a first part that continues a record an
        earlier read began and a last part that begins one the next read continues (where a
        read's end cuts a record) go through :meth:`_verify_run`, which carries the CRC."""
        lo, hi, consecutive = _whole_records(rows)
        if lo:
            self._verify_run(writer, position, position + len(parts[0]), _Parts(parts[:1]))
            position += len(parts[0])
        tail = parts[hi] if hi < len(parts) else None
        if hi > lo:
            middle = parts[lo:hi]
            size = sum(map(len, middle))
            if consecutive:
                r0 = rows[lo]
                if self._verified.count(0, r0, r0 + hi - lo):
                    self._check_rows(r0, data_crcs(middle))
            else:
                self._verify_run(writer, position, position + size, _Parts(middle))
            position += size
        if tail is not None:
            self._verify_run(writer, position, position + len(tail), _Parts([tail]))

    def _verify_run(self, writer: int, a: int, b: int, parts: _Parts) -> None:
        """Check the records that bytes ``[a, b)`` of ``writer``'s log complete (``parts``: those
        bytes, in physical order).

        A record's checksum runs over its physical range, which reads in logical order visit
        in order (each writer appends as it goes): the CRC is carried from read to read, so a
        file read front to back in chunks of any size verifies every record once. A read that
        does not continue where the last one stopped restarts the record.
        """
        # The common case first: this read continues a record an earlier read began (reading a
        # rank's strided objects back walks its pattern record piece by piece): its state is
        # found by where it stopped, without an index search.
        with self._state_lock:
            state = self._partial.pop((writer, a), None)
            if state is not None:
                del self._carried[(writer, state[0])]
        if state is not None:
            start, end, expected, row, crc = state
            hi = min(b, end)
            crc = parts.crc(0, hi - a, crc)
            self._check_or_carry(writer, start, end, expected, row, hi, crc)
            if b <= end:
                return
            a_search = end
        else:
            a_search = a
        entry = self.index.checks.of(writer)
        if entry is None:
            return
        starts, ends, crcs, base = entry
        # Records that begin before a_search cannot be checked by this read; of the others,
        # [first, last) lie whole in it (every record but the last of a large read) and the
        # one after them may begin in it.
        first = bisect.bisect_left(starts, a_search)
        last = bisect.bisect_right(ends, b, first)
        verified = self._verified
        if last > first and verified.count(0, base + first, base + last):
            if parts.are_records(starts, ends, first, last, a, b):
                sums = data_crcs(parts.parts)
            else:
                sums = [parts.crc(starts[k] - a, ends[k] - a, 0) for k in range(first, last)]
            if sums == crcs[first:last]:
                verified[base + first:base + last] = b"\x01" * (last - first)
            else:
                for k, crc in zip(range(first, last), sums):
                    self._settle(base + k, crc, crcs[k])
        if last < len(starts) and starts[last] < b and not verified[base + last]:
            self._check_or_carry(writer, starts[last], ends[last], crcs[last], base + last, b,
                                 parts.crc(starts[last] - a, b - a, 0))

    def _verify_piece(self, writer: int, a: int, part) -> None:
        """:meth:`_verify_run` of one buffer at ``a`` in ``writer``'s log. The common case, a
        read that continues a record an earlier read began and does not finish it (the next
        object of a rank's pattern record), carries the record's CRC on under one lock hold:
        this runs once per object read, and its bookkeeping had cost half as much as the CRC."""
        b = a + len(part)
        exact = self.index.checks.exact(writer, a, b)
        if exact is not None:  # the read is one whole record (each object written by one call)
            expected, row = exact
            if not self._verified[row]:
                self._settle(row, data_crc(part), expected)
            return
        key = (writer, a)
        partial = self._partial
        with self._state_lock:
            state = partial.get(key)
            if state is not None and b < state[1]:
                del partial[key]
                start, end, expected, row, crc = state
                partial[(writer, b)] = (start, end, expected, row, data_crc(part, crc))
                self._carried[(writer, start)] = b
                return
        self._verify_run(writer, a, b, _Parts([part]))

    def _check_or_carry(self, writer: int, start: int, end: int, expected: int, row: int, hi: int,
                        crc: int) -> None:
        """The record ``[start, end)`` has been summed up to ``hi``: check it, or keep its CRC
        so far for the read that continues at ``hi``."""
        if hi < end:
            with self._state_lock:
                # One carried state per record: a record restarted elsewhere drops the old one,
                # so random reads cannot pile states up.
                stale = self._carried.pop((writer, start), None)
                if stale is not None:
                    self._partial.pop((writer, stale), None)
                self._partial[(writer, hi)] = (start, end, expected, row, crc)
                self._carried[(writer, start)] = hi
        else:
            self._settle(row, crc, expected)

    def _verify_touched(self, runs: list[_Run], only: bytearray | None = None) -> None:
        """``verify="always"``: fetch and check every record a read touches, once per reader
        (``only``: those whose row it marks, the partly hidden records of ``"auto"``)."""
        for run in runs:
            for start, end, expected, row in self.index.checks.touching(run.writer, run.start, run.start + run.length):
                if self._verified[row] or (only is not None and not only[row]):
                    continue
                whole = memoryview(bytearray(end - start))
                self._read_into(run.writer, start, [whole])
                self._settle(row, data_crc(whole), expected)

    def _settle(self, row: int, crc: int, expected: int) -> None:
        """A whole record (``row`` of the checks table) summed: remember it as verified, or
        report it corrupt."""
        if crc == expected:
            self._verified[row] = 1
        else:
            self._corrupt(row)

    def _corrupt(self, row: int) -> None:
        """A record's data failed its checksum: raise, or (skip) remember to read it as zeros."""
        row = self.index.checks.table[row]
        fs, path = self.container.data_log(int(row["writer"]))
        last = int(row["logical"]) + int(row["stride"]) * (int(row["count"]) - 1) + int(row["length"])
        what = (f"{fs.url(path)} bytes {int(row['start'])}..{int(row['end'])} (logical "
                f"{int(row['logical'])}..{last}) fail their CRC32C")
        if self.on_corruption == "raise":
            raise PlfsCorruptionError(errno.EIO, f"corrupt data: {what}; run `hpcbridge plfs check --deep`",
                                      self.container.url)
        warnings.warn(f"{self.container.url}: {what}: read as zeros", PlfsCorruptionWarning, stacklevel=4)
        self._bad.setdefault(int(row["writer"]), []).append((int(row["start"]), int(row["end"])))

    def _zero_bad(self, view, run: _Run) -> None:
        position = run.start
        zeros = np.frombuffer(view, np.uint8)
        for at, length in run.segments:
            for start, end in self._bad[run.writer]:
                a, b = max(position, start), min(position + length, end)
                if b > a:
                    zeros[at + a - position:at + b - position] = 0
            position += length

    def close(self) -> None:
        """Close the data logs; a log another thread is reading from is closed when that read
        ends (:meth:`_release`): closing its descriptor under the read failed it with EBADF, or
        read another file that took the descriptor number meanwhile."""
        with self._lock:
            self._closed = True
            for writer in [w for w in self._handles if w not in self._in_use]:
                self._handles.pop(writer).close()
