"""One writer of a container: appends to its own data log, buffers index records.

Every write appends its bytes to the writer's data log (sequential, so HDFS takes it) and adds
an index entry. Entries merge while writes are logically and physically contiguous, and
compress into one pattern record while they form a regular stride (the N-1 strided checkpoint
costs one record per writer). Records reach the index log on ``flush``, ``sync`` and ``close``;
``sync`` makes data *and* index durable.

Sequence numbers order overlapping writes. They come from one counter per process, advanced
past the container's recorded maximum when a writer opens: writes of one process keep their
order, a writer opened after another closed wins over it, and no wall clock is involved
(PLFS #224: clock skew resolved overwrites wrongly).
"""

from __future__ import annotations

import itertools
import threading

import numpy as np

from .container import Container
from .format import RECORD, data_log_name, encode_records, index_log_name

__all__ = ["PlfsWriter", "next_sequence", "advance_sequence"]

_sequence_lock = threading.Lock()
_sequence = itertools.count(1)


def next_sequence() -> int:
    """The next sequence number of this process."""
    with _sequence_lock:
        return next(_sequence)


def advance_sequence(floor: int) -> None:
    """Make every later sequence number of this process greater than ``floor``."""
    global _sequence
    with _sequence_lock:
        current = next(_sequence)
        start = max(current, floor + 1)
        _sequence = itertools.count(start)


class PlfsWriter:
    """Writes of one writer id into a container.

    Parameters
    ----------
    container:
        The (existing) container.
    writer:
        Writer id (unique in the container: MPI rank based, or random).
    index_batch:
        Records buffered before they are written to the index log without an explicit flush.
    """

    def __init__(self, container: Container, writer: int, index_batch: int = 4096):
        self.container = container
        self.writer = writer
        self.index_batch = index_batch
        fs, hostdir = container.place(writer)
        fs.mkdir(hostdir, exist_ok=True)
        container.mark_open(writer)  # exclusive: a writer id in use fails here
        # A 1 MiB buffer: small checkpoint writes reach the log in large appends.
        self.data = fs.open(f"{hostdir}/{data_log_name(writer)}", "xb", buffering=1 << 20)
        self.index = fs.open(f"{hostdir}/{index_log_name(writer)}", "xb")
        self.physical = 0
        self.max_end = 0
        self.max_sequence = 0
        self.records_written = 0
        self._pending: list[tuple] = []
        self._cur: list | None = None  # logical, length, physical, sequence, stride, count, last_seq
        self._lock = threading.Lock()
        self.closed = False

    def write(self, data, logical: int) -> int:
        """Append ``data`` to the data log as the bytes at ``logical``; returns the count."""
        view = memoryview(data).cast("B")
        n = len(view)
        if n == 0:
            return 0
        with self._lock:
            if self.closed:
                raise ValueError(f"write to a closed PLFS writer of {self.container.url}")
            sequence = next_sequence()
            physical = self.physical
            self.data.write(view)
            self.physical += n
            self.max_end = max(self.max_end, logical + n)
            self.max_sequence = sequence
            self._add(logical, n, physical, sequence)
            if len(self._pending) >= self.index_batch:
                self._write_index()
        return n

    def _add(self, logical: int, n: int, physical: int, sequence: int) -> None:
        cur = self._cur
        if cur is not None and sequence == cur[6] + 1:
            L, length, P, _, stride, count, _ = cur
            if count == 1 and logical == L + length and physical == P + length:
                cur[1] += n  # contiguous: one longer extent
                cur[6] = sequence
                return
            if n == length and physical == P + count * length:
                step = logical - L if count == 1 else stride
                if step >= length and logical == L + count * step:
                    cur[4], cur[5], cur[6] = step, count + 1, sequence  # one more piece of the pattern
                    return
        if cur is not None:
            self._pending.append(tuple(cur[:6]))
        self._cur = [logical, n, physical, sequence, 0, 1, sequence]

    def _write_index(self) -> None:
        if self._cur is not None:
            self._pending.append(tuple(self._cur[:6]))
            self._cur = None
        if not self._pending:
            return
        records = np.zeros(len(self._pending), dtype=RECORD)
        rows = np.array(self._pending, dtype=np.uint64)
        for i, name in enumerate(("logical", "length", "physical", "sequence", "stride", "count")):
            records[name] = rows[:, i]
        records["writer"] = self.writer
        self.index.write(encode_records(records))
        self.records_written += len(records)
        self._pending = []

    def flush(self) -> None:
        """Write buffered data and index records to the logs."""
        with self._lock:
            self.data.flush()  # data before the index that points at it
            self._write_index()
            self.index.flush()

    def sync(self) -> None:
        """flush, then make data and index durable (fsync / hsync)."""
        with self._lock:
            self.data.flush()
            self.data.sync()
            self._write_index()
            self.index.flush()
            self.index.sync()

    def summary(self) -> dict:
        """What the metadata record says about this writer."""
        return {"writer": self.writer, "bytes": self.physical, "max_end": self.max_end,
                "max_sequence": self.max_sequence, "records": self.records_written}

    def close(self, write_meta: bool = True) -> dict:
        """Flush, close the logs, write this writer's metadata record (unless a collective close
        writes one for the whole job) and clear its open record. Returns the summary."""
        with self._lock:
            if self.closed:
                return self.summary()
            try:
                self.data.flush()
                self._write_index()
            finally:
                self.closed = True
                self.data.close()
                self.index.close()
        summary = self.summary()
        if write_meta:
            self.container.write_meta(f"w.{self.writer:08x}", [summary])
        self.container.mark_closed(self.writer)
        return summary
