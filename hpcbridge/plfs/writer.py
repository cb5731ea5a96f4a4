"""One writer of a container: appends to its own data log, buffers index records.

Every write appends its bytes to the writer's data log (sequential, so HDFS takes it) and adds
an index entry. Entries merge while writes are logically and physically contiguous, and
compress into one pattern record while they form a regular stride (the N-1 strided checkpoint
costs one record per writer and 8 MiB of data). Each record carries the CRC32C of the data it
describes, computed as the bytes are appended.

Records reach the index log only after the data they describe reached the data log: on
``flush``, ``sync``, ``close`` and when many records are pending. What ``flush`` guarantees
depends on the backing store (``capabilities.visible_writes``): where bytes handed to the
store are visible to others and survive the writer's crash (POSIX), flush writes both logs;
where they are not (HDFS buffers a packet until hsync), flush also hsyncs both logs, data
first, so a flushed write is readable after the writer is killed and its lease recovered.
``sync`` makes data and index durable on every backend.

Sequence numbers order overlapping writes. They come from one counter per process, advanced
past every sequence number already in the container when a writer opens (closed writers'
metadata and unclosed writers' index logs): writes of one process keep their order, a writer
opened after another closed or crashed wins over it, and no wall clock is involved (PLFS #224:
clock skew resolved overwrites wrongly).
"""

from __future__ import annotations

import itertools
import threading

import numpy as np

from ..fs.file import MAX_OFFSET
from .container import Container, errors_named, named_error
from .format import FLAG_DATA_CRC, MAX_RECORD_SPAN, RECORD, data_crc, data_log_name, encode_records, \
    index_log_name, record_size

__all__ = ["PlfsWriter", "next_sequence", "reserve_sequences", "advance_sequence", "sequences_for"]

_sequence_lock = threading.Lock()
_sequence = itertools.count(1)


def reserve_sequences(count: int) -> int:
    """``count`` consecutive sequence numbers of this process, taken now; returns the first.
    For writes whose order is decided before they reach a writer (a write-behind queue): see
    :meth:`PlfsWriter.write`."""
    global _sequence
    with _sequence_lock:
        first = next(_sequence)
        if count > 1:
            _sequence = itertools.count(first + count)
        return first


def next_sequence() -> int:
    """The next sequence number of this process."""
    return reserve_sequences(1)


def advance_sequence(floor: int) -> None:
    """Make every later sequence number of this process greater than ``floor``."""
    global _sequence
    with _sequence_lock:
        current = next(_sequence)
        start = max(current, floor + 1)
        _sequence = itertools.count(start)


def current_sequence() -> int:
    """The next sequence number of this process, not taken."""
    global _sequence
    with _sequence_lock:
        current = next(_sequence)
        _sequence = itertools.count(current)
        return current


def sequences_for(n: int) -> int:
    """How many sequence numbers a write of ``n`` bytes takes (one per record of at most
    MAX_RECORD_SPAN bytes)."""
    return max(1, -(-n // MAX_RECORD_SPAN))


class _AppendLog:
    """An append-only log on the backing store with its own buffer, that knows exactly how many
    bytes reached the store: after a failed write (ENOSPC, EIO, a vanished directory) the bytes
    not yet written stay buffered for a retry, and nothing is written twice or skipped."""

    def __init__(self, fs, path: str, buffer_size: int, what: str, container_url: str):
        self.fs, self.path = fs, path
        self.url = fs.url(path)
        self.what = what
        self.container_url = container_url
        # A fixed buffer, never resized: the backing store's client may still hold a view of it.
        self._buffer = bytearray(buffer_size)
        self._fill = 0
        #: Bytes that reached the backing store.
        self.reached = 0
        self.raw = self._guard(lambda: fs.open(path, "xb", buffering=0))

    def _guard(self, call):
        try:
            return call()
        except OSError as exc:
            raise self.error(exc) from exc

    def error(self, exc: OSError) -> OSError:
        """``exc`` as the same OSError subclass naming the container and this log."""
        return named_error(exc, f"writing the {self.what} {self.url}", self.container_url)

    @property
    def end(self) -> int:
        """Bytes appended so far, buffered ones included."""
        return self.reached + self._fill

    def discard(self) -> None:
        """Forget the buffered bytes (they will never be written)."""
        self._fill = 0

    def _write_all(self, view) -> OSError | None:
        """Write all of ``view``; count what reached the store in ``reached`` (also when a
        write fails part-way, whose error is returned)."""
        written = 0
        try:
            while written < len(view):
                n = self.raw.write(view[written:])
                if not n:
                    raise OSError(5, "the backing store accepted no bytes")
                written += n
        except OSError as exc:
            return exc
        finally:
            self.reached += written
        return None

    def append(self, view) -> None:
        """Append ``view``: buffered when small, written through when large."""
        size = len(self._buffer)
        # A write that would fill an empty buffer exactly (the 1 MiB transfers of checkpoints
        # and of the mount) is written through: copying it into the buffer first buys nothing.
        if self._fill + len(view) <= size and (self._fill or len(view) < size):
            self._buffer[self._fill:self._fill + len(view)] = view
            self._fill += len(view)
            if self._fill == size:
                self.flush()
            return
        self.flush()
        if len(view) < size:
            self._buffer[:len(view)] = view
            self._fill = len(view)
            return
        error = self._write_all(view)
        if error is not None:
            # The log may now end with part of this write, which no record will describe (check
            # reports such bytes as unindexed); the writer's next bytes go after them.
            raise self.error(error) from error

    def flush(self) -> None:
        """Write the buffered bytes; on failure the unwritten rest stays buffered."""
        if not self._fill:
            return
        before = self.reached
        error = self._write_all(memoryview(self._buffer)[:self._fill])
        written = self.reached - before
        if written < self._fill:  # keep the rest, moved to the front, for the next try
            self._buffer[:self._fill - written] = self._buffer[written:self._fill]
        self._fill -= written
        if error is not None:
            raise self.error(error) from error

    def sync(self) -> None:
        """flush, then make the log durable (fsync / hsync)."""
        self.flush()
        self._guard(self.raw.sync)

    def close(self) -> None:
        """Close the handle (buffered bytes not written are dropped: flush first)."""
        self._guard(self.raw.close)


class PlfsWriter:
    """Writes of one writer id into a container.

    Parameters
    ----------
    container:
        The (existing) container.
    writer:
        Writer id (unique in the container: MPI rank based, or random).
    index_batch:
        Records pending before they are written to the index log without an explicit flush.
    checksums:
        Record the CRC32C of every write's data (format 2); ``False`` only to measure what
        checksums cost.
    """

    #: Buffer of the data log: small checkpoint writes reach the store in large appends.
    DATA_BUFFER = 1 << 20

    def __init__(self, container: Container, writer: int, index_batch: int = 4096, checksums: bool = True):
        self.container = container
        self.writer = writer
        self.index_batch = index_batch
        self.version = container.version  # a writer joining a version-1 container writes its records
        self.checksums = checksums and self.version >= 2
        fs, hostdir = container.place(writer)
        self.visible_writes = fs.capabilities.visible_writes
        with errors_named(f"creating the host directory {fs.url(hostdir)}", container.url):
            fs.mkdir(hostdir, exist_ok=True)
        container.mark_open(writer, current_sequence())  # exclusive: a writer id in use fails here
        try:
            self.data = _AppendLog(fs, f"{hostdir}/{data_log_name(writer)}", self.DATA_BUFFER, "data log",
                                   container.url)
            self.index = _AppendLog(fs, f"{hostdir}/{index_log_name(writer)}", 1 << 20, "index log", container.url)
        except BaseException:
            container.mark_closed(writer)
            raise
        self.max_end = 0
        self._indexed_end = 0
        self.max_sequence = 0
        self._pending: list[tuple] = []
        # The record being extended: logical, length, physical, sequence, stride, count, last
        # sequence, data crc.
        self._cur: list | None = None
        self._lock = threading.Lock()
        self.closed = False

    @property
    def physical(self) -> int:
        """Bytes in the data log, buffered ones included."""
        return self.data.end

    @property
    def records_written(self) -> int:
        """Index records that reached the index log."""
        return self.index.reached // record_size(self.version)

    def write(self, data, logical: int, sequence: int | None = None) -> int:
        """Append ``data`` to the data log as the bytes at ``logical``; returns the count.

        ``sequence``: the first of ``sequences_for(len(data))`` numbers the caller reserved
        (:func:`reserve_sequences`) when it answered the write, for writes queued before they
        reach a writer: overlapping writes then rank in the order they were answered, not in
        the order they were appended. None: numbers drawn now."""
        view = memoryview(data).cast("B")
        n = len(view)
        if logical < 0 or logical + n > MAX_OFFSET:
            raise ValueError(f"write of {n} bytes at {logical} is outside 0..2**63-1 in {self.container.url}")
        if n == 0:
            return 0
        with self._lock:
            if self.closed:
                raise ValueError(f"write to a closed PLFS writer of {self.container.url}")
            # Large writes become several records of at most MAX_RECORD_SPAN bytes, each with
            # its own sequence number, so every checksum covers a bounded range.
            for k, start in enumerate(range(0, n, MAX_RECORD_SPAN)):
                self._append(view[start:start + MAX_RECORD_SPAN], logical + start,
                             None if sequence is None else sequence + k)
            if len(self._pending) >= self.index_batch:
                self._flush_logs(publish=False)
        return n

    def _append(self, part, logical: int, sequence: int | None) -> None:
        n = len(part)
        physical = self.data.end
        if sequence is None:
            sequence = next_sequence()
        cur = self._cur
        merge = None
        if cur is not None and sequence == cur[6] + 1 and cur[1] * cur[5] + n <= MAX_RECORD_SPAN:
            L, length, P, _, stride, count = cur[:6]
            if count == 1 and logical == L + length and physical == P + length:
                merge = "extent"
            elif n == length and physical == P + count * length:
                step = logical - L if count == 1 else stride
                if step >= length and logical == L + count * step:
                    merge = "pattern"
        # The checksum of a merged record continues over the new bytes (they follow its others
        # in the data log).
        crc = data_crc(part, cur[7] if merge else 0) if self.checksums else 0
        self.data.append(part)  # a failure leaves no record: the bytes were not written
        self.max_end = max(self.max_end, logical + n)
        self.max_sequence = max(self.max_sequence, sequence)
        if merge == "extent":
            cur[1] += n  # contiguous: one longer extent
            cur[6], cur[7] = sequence, crc
        elif merge == "pattern":
            step = logical - cur[0] if cur[5] == 1 else cur[4]
            cur[4], cur[5], cur[6], cur[7] = step, cur[5] + 1, sequence, crc  # one more piece of the pattern
        else:
            self._cut_record()
            self._cur = [logical, n, physical, sequence, 0, 1, sequence, crc]

    def _cut_record(self) -> None:
        """Move the record being extended to the pending list."""
        if self._cur is not None:
            cur = self._cur
            self._pending.append((cur[0], cur[1], cur[2], cur[3], cur[4], cur[5], cur[7]))
            self._cur = None

    def _encode_pending(self) -> None:
        """Append the pending records to the index log's buffer."""
        self._cut_record()
        if not self._pending:
            return
        rows = np.array(self._pending, dtype=np.uint64)
        records = np.zeros(len(rows), dtype=RECORD)
        for i, name in enumerate(("logical", "length", "physical", "sequence", "stride", "count", "data_crc")):
            records[name] = rows[:, i]
        records["writer"] = self.writer
        records["flags"] = FLAG_DATA_CRC if self.checksums else 0
        ends = records["logical"] + records["stride"] * (records["count"].astype(np.uint64) - 1) + records["length"]
        self._indexed_end = max(self._indexed_end, int(ends.max()))
        self.index.append(memoryview(encode_records(records, self.version)))
        self._pending = []

    def _flush_logs(self, publish: bool, durable: bool = False) -> None:
        """Data to its log, then the records describing it to theirs; ``publish``: so that
        other processes can read it and a crash of this one keeps it (hsync where the backing
        store holds writes back, see the module docstring); ``durable``: fsync/hsync always."""
        hard = durable or (publish and not self.visible_writes)
        self.data.sync() if hard else self.data.flush()
        self._encode_pending()
        self.index.sync() if hard else self.index.flush()

    def flush(self) -> None:
        """Data and index records to their logs: readable by other processes, and kept if this
        process is killed (see the module docstring for what each backend needs for that)."""
        with self._lock:
            self._check_open()
            self._flush_logs(publish=True)

    def sync(self) -> None:
        """flush, then make data and index durable (fsync / hsync)."""
        with self._lock:
            self._check_open()
            self._flush_logs(publish=True, durable=True)

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O operation on a closed PLFS writer of {self.container.url}")

    def summary(self) -> dict:
        """What the metadata record says about this writer: data bytes, the logical end and
        highest sequence number of what it indexed, and how many index records it wrote."""
        return {"writer": self.writer, "bytes": self.data.reached, "max_end": self._indexed_end,
                "max_sequence": self.max_sequence, "records": self.records_written}

    def _drop_unreached(self) -> None:
        """After the data log could not take the rest of the buffer: drop the records that
        describe bytes it never got (check reports any partial tail as unindexed bytes)."""
        self._cut_record()
        reached = self.data.reached
        self._pending = [r for r in self._pending if r[2] + r[1] * r[5] <= reached]
        self.data.discard()

    def log_paths(self) -> list[tuple]:
        """``(file system, path)`` of this writer's data log and index log."""
        return [(log.fs, log.path) for log in (self.data, self.index)]

    def close(self, write_meta: bool = True) -> dict:
        """Flush, close the logs, write this writer's metadata record and clear its open record
        (``write_meta=False``: a collective close does both, once the record of the whole job is
        written). Returns the summary.

        A failure (ENOSPC...) still indexes every write whose bytes reached the data log and
        closes the writer before the error is raised; only if the index itself cannot be
        written does the writer stay open (``hpcbridge plfs recover`` closes it later).
        """
        with self._lock:
            if self.closed:
                return self.summary()
            self.closed = True
            error = None
            try:
                self.data.flush()
            except OSError as exc:
                error = exc
                self._drop_unreached()
            indexed = True
            try:
                self._encode_pending()
                self.index.flush()
            except OSError as exc:
                error, indexed = error or exc, False
            for log in (self.data, self.index):
                try:
                    log.close()
                except OSError as exc:
                    error = error or exc
        summary = self.summary()
        if indexed and write_meta:
            # The record first, then the open record cleared: a reader of the two (see
            # Container.max_sequence) always finds this writer in one or the other. A collective
            # close clears it once the job's record is written (hpcbridge.plfs.api).
            self.container.write_meta(f"w.{self.writer:08x}", [summary])
            self.container.mark_closed(self.writer)
        if error is not None:
            raise error
        return summary
