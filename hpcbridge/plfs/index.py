"""The global index of a container: every writer's records merged, overlaps resolved, compressed.

Vectorised with numpy: pattern records are expanded into pieces with ``np.repeat``; pieces are
sorted by logical offset; when no piece overlaps another (the common case: an N-1 checkpoint)
nothing more is needed. Overlapping clusters are resolved by a sweep in which the piece with
the highest ``(sequence, writer)`` wins each byte. The resolved pieces are then compressed
back into strided patterns per writer, so a regular checkpoint keeps a handful of records in
memory whatever its size.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass

import numpy as np

__all__ = ["GlobalIndex", "Checks", "CHECK", "expand", "resolve", "compress"]

_FIELDS = ("logical", "length", "physical", "sequence", "writer")


def expand(records: np.ndarray) -> dict[str, np.ndarray]:
    """Pattern records to one row per piece (``logical, length, physical, sequence, writer``)."""
    counts = records["count"].astype(np.int64)
    total = int(counts.sum())
    owner = np.repeat(np.arange(len(records)), counts)
    k = np.arange(total, dtype=np.uint64) - np.repeat(np.cumsum(counts) - counts, counts).astype(np.uint64)
    rec = records[owner]
    return {
        "logical": rec["logical"] + k * rec["stride"],
        "length": rec["length"].copy(),
        "physical": rec["physical"] + k * rec["length"],
        "sequence": rec["sequence"] + k,
        "writer": rec["writer"].astype(np.uint64),
    }


def _sweep(pieces: dict[str, np.ndarray], members: np.ndarray) -> list[tuple[int, int, int, int, int]]:
    """Resolve one overlapping cluster: the highest (sequence, writer) wins each byte."""
    lo = pieces["logical"][members]
    hi = lo + pieces["length"][members]
    key_seq, key_writer = pieces["sequence"][members], pieces["writer"][members]
    events = sorted(set(lo.tolist()) | set(hi.tolist()))
    starts = sorted(range(len(members)), key=lambda i: int(lo[i]))
    heap: list = []
    out = []
    cursor = 0
    for left, right in zip(events, events[1:]):
        while cursor < len(starts) and lo[starts[cursor]] <= left:
            i = starts[cursor]
            heapq.heappush(heap, (-int(key_seq[i]), -int(key_writer[i]), i))
            cursor += 1
        while heap and hi[heap[0][2]] <= left:
            heapq.heappop(heap)
        if not heap:
            continue
        i = heap[0][2]
        m = members[i]
        physical = int(pieces["physical"][m]) + (left - int(lo[i]))
        if out and out[-1][4] == m and out[-1][0] + out[-1][1] == left:
            last = out[-1]
            out[-1] = (last[0], last[1] + (right - left), last[2], last[3], m)
        else:
            out.append((left, right - left, physical, int(pieces["writer"][m]), m))
    return out


def resolve(pieces: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Non-overlapping pieces sorted by logical offset; the latest write wins each byte."""
    order = np.lexsort((pieces["sequence"], pieces["logical"]))
    p = {k: v[order] for k, v in pieces.items()}
    if len(order) < 2:
        return p
    ends = p["logical"] + p["length"]
    reach = np.maximum.accumulate(ends)
    overlaps = p["logical"][1:] < reach[:-1]
    if not overlaps.any():
        return p
    # Clusters: a piece starts a new cluster unless it overlaps what came before.
    new_cluster = np.concatenate(([True], ~overlaps))
    cluster = np.cumsum(new_cluster) - 1
    sizes = np.bincount(cluster)
    simple = sizes[cluster] == 1
    rows = [(int(p["logical"][i]), int(p["length"][i]), int(p["physical"][i]), int(p["writer"][i]))
            for i in np.flatnonzero(simple)]
    starts = np.flatnonzero(new_cluster)
    for c in np.flatnonzero(sizes > 1):
        members = np.arange(starts[c], starts[c] + sizes[c])
        rows.extend(r[:4] for r in _sweep(p, members))
    rows.sort()
    arr = np.array(rows, dtype=np.uint64).reshape(-1, 4)
    return {"logical": arr[:, 0], "length": arr[:, 1], "physical": arr[:, 2],
            "sequence": np.zeros(len(arr), np.uint64), "writer": arr[:, 3]}


def compress(pieces: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Non-overlapping pieces to strided runs per writer: piece i of a run is at logical
    ``logical + i*stride`` and physical ``physical + i*length``."""
    n = len(pieces["logical"])
    if n == 0:
        return {k: np.zeros(0, np.uint64) for k in ("logical", "length", "physical", "stride", "count", "writer")}
    order = np.lexsort((pieces["logical"], pieces["writer"]))
    lg = pieces["logical"][order].astype(np.int64)
    ln = pieces["length"][order].astype(np.int64)
    ph = pieces["physical"][order].astype(np.int64)
    wr = pieces["writer"][order].astype(np.int64)
    stride = np.diff(lg, prepend=lg[0])
    # Piece i continues the run of piece i-1 when: same writer and length, physically contiguous,
    # and (for i >= 2 within the run) the same stride as the previous step.
    cont = np.zeros(n, dtype=bool)
    cont[1:] = (wr[1:] == wr[:-1]) & (ln[1:] == ln[:-1]) & (ph[1:] == ph[:-1] + ln[:-1]) & (stride[1:] >= ln[1:])
    same_step = np.zeros(n, dtype=bool)
    same_step[2:] = stride[2:] == stride[1:-1]
    # A continuation whose predecessor also continued must keep the stride.
    breaks = ~cont | (np.concatenate(([False], cont[:-1])) & ~same_step)
    run = np.cumsum(breaks) - 1
    starts = np.flatnonzero(breaks)
    counts = np.bincount(run)
    run_stride = np.where(counts > 1, stride[np.minimum(starts + 1, n - 1)], 0)
    return {
        "logical": lg[starts].astype(np.uint64), "length": ln[starts].astype(np.uint64),
        "physical": ph[starts].astype(np.uint64), "stride": run_stride.astype(np.uint64),
        "count": counts.astype(np.uint64), "writer": wr[starts].astype(np.uint64),
    }


#: Fields of a checksummed range (see :class:`Checks`).
CHECK = np.dtype([("writer", "<u8"), ("start", "<u8"), ("end", "<u8"), ("crc", "<u4"), ("logical", "<u8"),
                  ("length", "<u8"), ("stride", "<u8"), ("count", "<u8")])


class Checks:
    """The data checksums of a container: for every record that has one, the physical range of
    its writer's data log it covers, its CRC32C and the logical pieces it maps (for messages).

    The resolved index describes which bytes win; checksums belong to the records as written
    (a record's range stays checksummed as a whole even where later writes overwrote part of
    it), so they are kept apart from it. Reads ask which ranges of one writer a physical range
    touches, once per positional read: per writer, plain sorted lists searched with bisect
    answer that in a microsecond, where numpy calls on tiny arrays would cost tens.
    """

    def __init__(self, table: np.ndarray):
        self.table = np.sort(table, order=("writer", "start"))
        self._by_writer: dict[int, tuple[list, list, list, int]] = {}
        writers = self.table["writer"].tolist()
        starts, ends, crcs = (self.table[k].tolist() for k in ("start", "end", "crc"))
        #: The CRC of each row of :attr:`table`.
        self.crc_of_row: list[int] = crcs
        first = 0
        for i in range(1, len(writers) + 1):
            if i == len(writers) or writers[i] != writers[first]:
                self._by_writer[writers[first]] = (starts[first:i], ends[first:i], crcs[first:i], first)
                first = i

    @classmethod
    def from_records(cls, records: np.ndarray) -> "Checks":
        """The checksums of the records that carry one (format 2 records with FLAG_DATA_CRC)."""
        from .format import FLAG_DATA_CRC

        mine = records[(records["flags"] & FLAG_DATA_CRC) != 0]
        table = np.zeros(len(mine), CHECK)
        table["writer"], table["start"], table["crc"] = mine["writer"], mine["physical"], mine["data_crc"]
        table["end"] = mine["physical"] + mine["length"] * mine["count"].astype(np.uint64)
        for name in ("logical", "length", "stride", "count"):
            table[name] = mine[name]
        return cls(table)

    def __len__(self) -> int:
        return len(self.table)

    def of(self, writer: int) -> tuple[list, list, list, int] | None:
        """``(starts, ends, crcs, first row)`` of ``writer``'s checksummed ranges, in physical
        order (sorted lists; ranges of one log do not overlap, so ``ends`` is sorted too)."""
        return self._by_writer.get(writer)

    def exact(self, writer: int, start: int, end: int) -> tuple[int, int] | None:
        """``(crc, row)`` of the checksummed range of ``writer`` that is exactly ``[start, end)``
        (a read of one whole record), else None."""
        entry = self._by_writer.get(writer)
        if entry is None:
            return None
        starts, ends, crcs, base = entry
        i = bisect.bisect_left(starts, start)
        if i < len(starts) and starts[i] == start and ends[i] == end:
            return crcs[i], base + i
        return None

    def rows_of_pieces(self, writer: int, physical: int, length: int, count: int) -> int:
        """The row of the first of ``count`` records of ``writer`` that are exactly its pieces
        of ``length`` bytes at ``physical``, ``physical + length``, ... (an N-1 pattern written
        an object per call: piece ``k`` is record ``row + k``), else -1."""
        entry = self._by_writer.get(writer)
        if entry is None or not length:
            return -1
        starts, _, _, base = entry
        i = bisect.bisect_left(starts, physical)
        rows = self.table[base + i:base + i + count]
        if len(rows) != count:
            return -1
        expected = physical + length * np.arange(count, dtype=np.uint64)
        if np.array_equal(rows["start"], expected) and np.array_equal(rows["end"], expected + np.uint64(length)):
            return base + i
        return -1

    def touching(self, writer: int, start: int, end: int) -> list[tuple[int, int, int, int]]:
        """``(start, end, crc, row)`` of the checksummed ranges of ``writer`` that overlap
        ``[start, end)``, in physical order (``row``: the range's row in :attr:`table`)."""
        entry = self._by_writer.get(writer)
        if entry is None:
            return []
        starts, ends, crcs, base = entry
        i = max(bisect.bisect_right(starts, start) - 1, 0)
        out = []
        while i < len(starts) and starts[i] < end:
            if ends[i] > start:
                out.append((starts[i], ends[i], crcs[i], base + i))
            i += 1
        return out


def _touching(rows: list, start: int, end: int):
    """``(j, row, k_lo, k_hi)`` for each run ``rows[j]`` (``(logical, length, physical, stride,
    count, writer)``) with pieces ``k_lo..k_hi`` intersecting ``[start, end)``."""
    for j, row in enumerate(rows):
        L, ln, _, st, ct, _ = row
        if st:
            k_lo = max((start - L - ln) // st + 1, 0)
            k_hi = min((end - L - 1) // st, ct - 1)
            if k_hi >= k_lo:
                yield j, row, k_lo, k_hi
        elif L < end and L + ln > start:
            yield j, row, 0, 0


@dataclass
class GlobalIndex:
    """The resolved, compressed index of a container, what it maps, and its data checksums."""

    runs: dict[str, np.ndarray]
    size: int
    checks: Checks = None

    @classmethod
    def build(cls, records: np.ndarray) -> "GlobalIndex":
        """Build from all valid records of all writers."""
        checks = Checks.from_records(records)
        if len(records) == 0:
            return cls(compress({k: np.zeros(0, np.uint64) for k in _FIELDS}), 0, checks)
        pieces = resolve(expand(records))
        size = int((pieces["logical"] + pieces["length"]).max()) if len(pieces["logical"]) else 0
        return cls(compress(pieces), size, checks)

    def __post_init__(self):
        if self.checks is None:
            self.checks = Checks(np.zeros(0, CHECK))
        # Few runs (regular checkpoints): plain Python lists make small lookups ~10x cheaper
        # than a dozen numpy calls on tiny arrays.
        self._rows = None
        self._hint = 0  # row of the last piece found (piece_of tries it first)
        self._shadowed = None  # shadowed_rows(), computed at its first call
        if len(self.runs["logical"]) <= 64:
            self._rows = list(zip(*(self.runs[k].tolist() for k in
                                    ("logical", "length", "physical", "stride", "count", "writer"))))
            # Per run, the checks row of its first piece's record when each piece is one
            # record (else -1): a one-object read then finds its CRC with no search.
            self._records = [self.checks.rows_of_pieces(w, P, ln, ct) for _, ln, P, _, ct, w in self._rows]
        self._lanes = self._find_lanes()
        #: The same per run as an array, for :meth:`lookup` (None beyond 64 runs: not computed).
        self._record_of_run = None if self._rows is None else np.array(self._records, dtype=np.int64)

    def shadowed_rows(self) -> np.ndarray:
        """Rows of :attr:`checks` whose record later writes hid in part (not whole): reads never fetch such
        a record whole (its hidden bytes are in no run), so they cannot check it on the way and
        must fetch it to check it. Computed once per index (none in a file without overwrites).

        A writer's runs cover disjoint physical ranges of its log (each byte of the log is one
        byte of one piece), so a record is whole in the runs when the runs cover as many bytes
        of its range as it has."""
        if self._shadowed is None:
            table, runs = self.checks.table, self.runs
            hidden = np.zeros(len(table), dtype=bool)
            span = (runs["length"] * runs["count"]).astype(np.int64)
            # Only writers whose runs show fewer bytes than their records hold (none in a file
            # without overwrites) need a closer look.
            writers, which = np.unique(table["writer"], return_inverse=True)
            held = np.bincount(which, weights=(table["end"] - table["start"]).astype(np.float64),
                               minlength=len(writers))
            shown = np.zeros(len(writers))
            known = np.isin(runs["writer"], writers)
            np.add.at(shown, np.searchsorted(writers, runs["writer"][known]), span[known].astype(np.float64))
            for writer in writers[shown != held].tolist():
                mine = runs["writer"] == writer
                if not mine.any():
                    continue  # every byte of this writer hidden: no read touches its records
                starts = runs["physical"][mine].astype(np.int64)
                order = np.argsort(starts)
                starts, lengths = starts[order], span[mine][order]
                before = np.concatenate(([0], np.cumsum(lengths)))  # bytes covered below each run

                def covered(x, starts=starts, lengths=lengths, before=before):
                    j = np.searchsorted(starts, x, side="right") - 1
                    inside = np.where(j >= 0, np.minimum(x - starts[np.maximum(j, 0)], lengths[np.maximum(j, 0)]), 0)
                    return np.where(j >= 0, before[np.maximum(j, 0)] + inside, 0)

                rows = np.flatnonzero(table["writer"] == writer)
                lo, hi = (table[k][rows].astype(np.int64) for k in ("start", "end"))
                visible = covered(hi) - covered(lo)
                hidden[rows] = (visible > 0) & (visible < hi - lo)  # a record no read touches needs no check
            self._shadowed = np.flatnonzero(hidden)
        return self._shadowed

    def piece_of(self, start: int, end: int) -> tuple[int, int, int] | None:
        """``(physical, writer, record)`` when one piece holds all of ``[start, end)`` (a read
        of one object of a strided pattern), else None (several pieces, a hole, or many runs:
        use :meth:`lookup_list`). ``record``: the row in :attr:`checks` of the record that is
        exactly the bytes read, where the run's pieces are its records (else -1).

        In an N-1 strided file (:meth:`_find_lanes`) the run holding ``start`` is computed;
        elsewhere, or where that run does not hold the read, the run of the last hit is tried
        first, then the ones after it.
        """
        rows = self._rows
        if not rows or end <= start:
            return None
        lanes = self._lanes
        if lanes is not None and start >= lanes[0]:
            first, unit, stride, lane_rows = lanes
            k, within = divmod(start - first, stride)
            j = lane_rows[within // unit]
            L, ln, P, st, ct, w = rows[j]
            lo = L + k * st
            if k < ct and end <= lo + ln:
                return self._piece(j, k, lo, start, end)
        count = len(rows)
        first = self._hint
        for step in range(count):
            j = first + step
            if j >= count:
                j -= count
            L, ln, P, st, ct, w = rows[j]
            if start < L:
                continue
            k = (start - L) // st if st else 0
            lo = L + k * st
            if k < ct and end <= lo + ln:
                self._hint = j
                return self._piece(j, k, lo, start, end)
        return None

    def _piece(self, j: int, k: int, lo: int, start: int, end: int) -> tuple[int, int, int]:
        """:meth:`piece_of`'s answer for ``[start, end)`` inside piece ``k`` of run ``j``,
        which begins at logical ``lo``."""
        _, ln, P, _, _, w = self._rows[j]
        record = self._records[j]
        return P + k * ln + (start - lo), w, (record + k if record >= 0 and start == lo and end == lo + ln else -1)

    def _find_lanes(self) -> tuple[int, int, int, list[int]] | None:
        """``(first, unit, stride, rows)`` where the runs include an N-1 strided layout: ``m``
        runs of ``unit``-byte pieces every ``stride = m * unit`` bytes, run ``i`` starting at
        ``first + i * unit`` (the LANL pattern: one run per rank); ``rows[i]`` is run ``i``'s
        row. Byte ``x`` past ``first`` is then in run ``rows[(x - first) % stride // unit]``,
        if anywhere among these runs: a read of one object finds its run with no search.
        Pieces of resolved runs are disjoint, so a run found so holds the only answer; other
        runs (a tail, an overwrite) are found by :meth:`piece_of`'s search. None otherwise."""
        rows = self._rows
        if not rows:
            return None
        first, unit, _, stride, _, _ = min(rows)
        if unit <= 0 or stride <= 0 or stride % unit or stride // unit > len(rows):  # a lane per run
            return None
        at = {L: j for j, (L, ln, _, st, _, _) in enumerate(rows) if ln == unit and st == stride}
        lane_rows = [at.get(first + i * unit) for i in range(stride // unit)]
        return None if None in lane_rows else (first, unit, stride, lane_rows)

    def spans(self, start: int, end: int, base: int = 0) -> list[tuple] | None:
        """What each run of the index holds of ``[start, end)``, where the index has at most 64
        runs and they cover the range whole (no hole): ``(writer, physical, length, logical
        offsets, lengths, records)``, the pieces of one run being consecutive bytes of its
        writer's log (piece k of a run at ``physical + k * length``). ``logical offsets`` are
        each piece's, less ``base`` (a reader passes the read's offset: they are then places
        in its buffer), ``lengths`` its clipped length, ``records`` the checks row of each whole
        piece that is one record (else -1; None where the run's pieces are not records). None
        where this does not apply: :meth:`lookup` then.

        A large read of a regular checkpoint (an N-1 file: one run per writer) is planned here
        with a few range calls per run instead of a dozen numpy calls over all its pieces."""
        rows = self._rows
        if rows is None or end <= start:
            return None
        out = []
        covered = 0
        for j, (L, ln, P, st, ct, w), k_lo, k_hi in _touching(rows, start, end):
            if not ln:
                continue
            first, last = L + k_lo * st, L + k_hi * st
            logical = list(range(first - base, last - base + 1, st)) if st else [first - base]
            lengths = [ln] * len(logical)
            record = self._records[j]
            records = list(range(record + k_lo, record + k_hi + 1)) if record >= 0 else None
            physical = P + k_lo * ln
            if first < start:  # the first piece begins before the range
                cut = start - first
                logical[0], lengths[0] = start - base, ln - cut
                physical += cut
                if records is not None:
                    records[0] = -1
            if last + ln > end:  # the last piece ends after it
                lengths[-1] = end - base - logical[-1]
                if records is not None:
                    records[-1] = -1
            length = sum(lengths)
            covered += length
            out.append((w, physical, length, logical, lengths, records))
        if covered != end - start:
            return None  # a hole (or overlapping runs): lookup's general plan
        out.sort(key=lambda span: (span[0], span[1]))
        return out

    def lookup_list(self, start: int, end: int) -> list[tuple[int, int, int, int]]:
        """Pieces intersecting ``[start, end)`` as ``(logical, length, physical, writer)`` tuples,
        clipped and sorted by logical offset."""
        if self._rows is None:
            p = self.lookup(start, end)
            return list(zip(*(p[k].tolist() for k in ("logical", "length", "physical", "writer"))))
        out = []
        for j, (L, ln, P, st, ct, w), k_lo, k_hi in _touching(self._rows, start, end):
            for k in range(k_lo, k_hi + 1):
                lo = L + k * st
                a, b = max(lo, start), min(lo + ln, end)
                if b > a:
                    out.append((a, b - a, P + k * ln + (a - lo), w))
                    self._hint = j
        out.sort()
        return out

    @property
    def nbytes(self) -> int:
        """Memory held by the index arrays."""
        return sum(a.nbytes for a in self.runs.values())

    @property
    def records(self) -> int:
        """Number of runs (records) in the index."""
        return len(self.runs["logical"])

    def lookup(self, start: int, end: int) -> dict[str, np.ndarray]:
        """Pieces intersecting ``[start, end)``, clipped to it, sorted by logical offset.

        ``record``: for each piece, the row in :attr:`checks` of the record that is exactly
        the piece (not clipped, in a run whose pieces are its records), else -1; known where
        the index has at most 64 runs, -1 everywhere beyond."""
        r = self.runs
        if end <= start or not len(r["logical"]):
            return {k: np.zeros(0, np.int64) for k in ("logical", "length", "physical", "writer", "record")}
        L, ln, st, ct = (r[k].astype(np.int64) for k in ("logical", "length", "stride", "count"))
        safe = np.where(st > 0, st, 1)
        # pieces k with L + k*st + ln > start (k > (start - L - ln) / st) and L + k*st < end
        k_lo = np.maximum((start - L - ln) // safe + 1, 0)
        k_hi = np.minimum((end - L - 1) // safe, ct - 1)
        single = st == 0
        hit = np.where(single, (L < end) & (L + ln > start), k_hi >= k_lo)
        idx = np.flatnonzero(hit)
        counts = (k_hi[idx] - k_lo[idx] + 1)
        owner = np.repeat(idx, counts)
        k = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts) \
            + np.repeat(k_lo[idx], counts)
        logical = L[owner] + k * st[owner]
        length = ln[owner]
        physical = r["physical"][owner].astype(np.int64) + k * length
        lo = np.maximum(logical, start)
        hi = np.minimum(logical + length, end)
        keep = hi > lo
        physical = physical + (lo - logical)
        if self._record_of_run is None:
            record = np.full(int(keep.sum()), -1, np.int64)
        else:
            first = self._record_of_run[owner]
            whole = (first >= 0) & (lo == logical) & (hi == logical + length)
            record = np.where(whole, first + k, -1)[keep]
        out = {"logical": lo[keep], "length": (hi - lo)[keep], "physical": physical[keep],
               "writer": r["writer"][owner][keep].astype(np.int64), "record": record}
        order = np.argsort(out["logical"], kind="stable")
        return {k: v[order] for k, v in out.items()}
