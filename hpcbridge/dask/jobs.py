"""The Hadoop jobs of the seeds' evaluations as locality-aware Dask jobs, on any backend URL.

- :func:`teragen`: 100-byte records into N files (TeraGen; ASCII, newline-terminated).
- :func:`grep`: count matches of a (rare) regular expression (Hadoop's grep example).
- :func:`wordcount`: word frequencies (Hadoop's WordCount).
- :func:`terasort` and :func:`validate_sort`: TeraSort (sampled split points, shuffle, sorted
  output partitions) and TeraValidate (sorted, same multiset of records).
- :func:`dummy_read`: read every byte and do nothing with it (the seeds' "dummy" job).

Every job returns a :class:`JobResult`: its value, wall-clock seconds and the locality report
of its reads. Work on a partition is done on its whole buffer with bytes methods, ``re`` and
numpy, never record by record in Python.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..fs.api import url_to_fs
from .core import read_blocks
from .partitions import expand_paths
from .reader import _overlaps_itself
from .report import LocalityReport, collect_report
from .scheduling import DEFAULT_BALANCE, current_client

__all__ = ["JobResult", "teragen", "teragen_records", "grep", "grep_serial", "wordcount", "terasort",
           "validate_sort", "dummy_read", "record_checksum", "RECORD_SIZE", "KEY_SIZE"]

#: TeraSort record and key sizes.
RECORD_SIZE = 100
KEY_SIZE = 10
_KEY_ALPHABET = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", dtype=np.uint8)
#: 4-letter lowercase words of the records' text part (fixed, so word counts are comparable).
VOCABULARY = np.random.default_rng(2026).integers(ord("a"), ord("z") + 1, (256, 4), dtype=np.uint8)
_WORDS_PER_RECORD = 11
_CHECKSUM_WEIGHTS = np.random.default_rng(7).integers(1, 2**63, RECORD_SIZE // 4, dtype=np.uint64) | np.uint64(1)
_GEN_CHUNK = 1 << 17  # records generated per numpy batch (12.5 MiB)
# Hadoop's WordCount splits with java.util.StringTokenizer's default delimiters " \t\n\r\f";
# bytes.split() also splits at \v, so text holding one is tokenized with this instead.
_HADOOP_TOKEN = re.compile(rb"[^ \t\n\r\f]+")


@dataclass
class JobResult:
    """What a job returned, how long it took, and where its reads ran.

    Attributes
    ----------
    name:
        The job (``"grep"``, ``"wordcount"``, ...).
    value:
        The job's result (counts, a Counter, output paths, a validation dict).
    seconds:
        Wall-clock time of the whole job (planning, tasks, gathering the result).
    report:
        Locality of the job's reads (None for jobs that only write, such as teragen).
    partitions:
        Read partitions of the job.
    """

    name: str
    value: object
    seconds: float
    report: LocalityReport | None = None
    partitions: int = 0
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """JSON-ready fields (a Counter value becomes a plain dict)."""
        value = dict(self.value) if isinstance(self.value, Counter) else self.value
        return {"job": self.name, "value": value, "seconds": round(self.seconds, 3), "partitions": self.partitions,
                "locality": self.report.as_dict() if self.report else None, **self.details}


def _compute(client, *collections):
    import dask

    client = current_client(client)
    if client is not None:
        return client.compute(list(collections), sync=True)
    # Without distributed: threads, so the read tasks report into this process.
    return list(dask.compute(*collections, scheduler="threads"))


# -- teragen -------------------------------------------------------------------------------------
def teragen_records(first_row: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` records as a ``(count, 100)`` uint8 array: a 10-byte key of ``A-Z0-9``, a space,
    the 32-digit row number, a space, 11 four-letter words each followed by a space, and ``\\n``."""
    out = np.empty((count, RECORD_SIZE), dtype=np.uint8)
    out[:, :KEY_SIZE] = _KEY_ALPHABET[rng.integers(0, len(_KEY_ALPHABET), (count, KEY_SIZE))]
    out[:, 10] = ord(" ")
    rows = np.arange(first_row, first_row + count, dtype=np.uint64)
    powers = np.uint64(10) ** np.arange(18, -1, -1, dtype=np.uint64)
    out[:, 11:24] = ord("0")
    out[:, 24:43] = (rows[:, None] // powers % np.uint64(10)).astype(np.uint8) + ord("0")
    out[:, 43] = ord(" ")
    words = out[:, 44:99].reshape(count, _WORDS_PER_RECORD, 5)
    words[:, :, :4] = VOCABULARY[rng.integers(0, len(VOCABULARY), (count, _WORDS_PER_RECORD))]
    words[:, :, 4] = ord(" ")
    out[:, 99] = ord("\n")
    return out


def _write_teragen_file(fs, path: str, first_row: int, count: int, seed: int, index: int,
                        block_size: int | None, replication: int | None) -> int:
    rng = np.random.default_rng([seed, index])
    with fs.create(path, replication=replication, block_size=block_size) as f:
        for start in range(0, count, _GEN_CHUNK):
            n = min(_GEN_CHUNK, count - start)
            f.write(teragen_records(first_row + start, n, rng).data)
    return count * RECORD_SIZE


def _empty_output_dir(job: str, url: str, overwrite: bool, storage_options: dict | None):
    """``(fs, path)`` of an empty output directory at ``url``, as Hadoop jobs want theirs: an
    existing non-empty one is an error unless ``overwrite``, then it is emptied."""
    fs, root = url_to_fs(url, **(storage_options or {}))
    if fs.exists(root) and fs.ls(root):
        if not overwrite:
            raise FileExistsError(f"{job} output {url} exists and is not empty (overwrite=True, "
                                  "or --overwrite on the command line, replaces it)")
        if fs.islink(root):
            # The output is the directory the link points to: empty it and keep the link.
            # Removing the link (rm unlinks links) would move the output beside it, silently.
            for entry in fs.ls(root):
                fs.rm(entry, recursive=True)
        else:
            fs.rm(root, recursive=True)
    fs.mkdir(root, parents=True, exist_ok=True)
    return fs, root


def teragen(url: str, records: int, files: int = 4, *, seed: int = 0, block_size: int | None = None,
            replication: int | None = None, client=None, overwrite: bool = False,
            storage_options: dict | None = None) -> JobResult:
    """Write ``records`` 100-byte records into ``files`` files ``part-00000``... under directory ``url``.

    The files are written in parallel as Dask tasks (on the current ``distributed`` client if
    any). ``block_size``/``replication`` are per-file HDFS settings (ignored elsewhere). The
    content depends only on ``seed``, ``records`` and ``files``.
    """
    import dask

    if isinstance(records, bool) or not isinstance(records, int) or records <= 0:
        raise ValueError(f"records must be a positive integer for teragen into {url}, got {records!r}")
    if isinstance(files, bool) or not isinstance(files, int) or not 0 < files <= records:
        raise ValueError(f"files must be an integer between 1 and records ({records}) for {url}, got {files!r}")
    fs, root = _empty_output_dir("teragen", url, overwrite, storage_options)
    started = time.perf_counter()
    per_file = [records // files + (i < records % files) for i in range(files)]
    firsts = np.concatenate([[0], np.cumsum(per_file)[:-1]]).tolist()
    paths = [f"{root.rstrip('/')}/part-{i:05d}" for i in range(files)]
    tasks = [dask.delayed(_write_teragen_file, pure=False)(fs, p, first, n, seed, i, block_size, replication)
             for i, (p, first, n) in enumerate(zip(paths, firsts, per_file))]
    written = _compute(client, *tasks)
    return JobResult("teragen", [fs.url(p) for p in paths], time.perf_counter() - started,
                     details={"records": records, "bytes": int(sum(written)), "files": files})


# -- grep, wordcount, dummy read ----------------------------------------------------------------
def _checked_regex(pattern: bytes | str, what: str) -> bytes:
    """``pattern`` as bytes, compiled once here so a bad one is a ValueError naming it (not a raw
    ``re.error`` from every task)."""
    pattern = pattern.encode() if isinstance(pattern, str) else pattern
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid {what} regular expression {pattern.decode(errors='replace')!r}: {exc}") from None
    return pattern


def _checked_grep_pattern(pattern: bytes | str) -> bytes:
    """:func:`_checked_regex` for grep, compiled as the tasks compile it (:func:`_grep_regex`)."""
    pattern = pattern.encode() if isinstance(pattern, str) else pattern
    try:
        _grep_regex(pattern, True)
    except re.error as exc:
        raise ValueError(f"invalid grep regular expression {pattern.decode(errors='replace')!r}: {exc}") from None
    return pattern


# Constructs that see past a line's edges (\A, \Z, lookarounds): with one of them in the
# pattern, a search over a whole partition could count differently from a search per line.
# Textual, so it may flag a pattern that is harmless (``\\A``): that only costs speed.
_LINE_SENSITIVE = re.compile(r"\\[AZ]|\(\?<?[=!]")


def _grep_regex(pattern: bytes, lines: bool) -> tuple[re.Pattern, bool]:
    """``(regex, text)`` for grep: a ``str`` regex with Java's defaults (``re.ASCII``: ``\\w``,
    ``\\s``, ``\\b`` and case folding ASCII-only, as ``java.util.regex`` without flags) when the
    pattern is UTF-8, matched against decoded text as Hadoop's ``Text.toString`` decodes it;
    a ``bytes`` regex on raw bytes for a pattern that is not UTF-8."""
    flags = re.MULTILINE if lines else 0
    try:
        return re.compile(pattern.decode("utf-8"), flags | re.ASCII), True
    except UnicodeDecodeError:
        return re.compile(pattern, flags), False


# Python's UTF-8 decoder replaces malformed bytes as Java's does (Hadoop's Text.toString), one
# U+FFFD per maximal bad subsequence, except for an encoded surrogate: Java replaces ED A0..BF
# and a continuation byte (or ED A0..BF alone) with one U+FFFD, Python each byte. Such runs become
# 0xFF first, which both replace with one U+FFFD and which joins no neighbour (checked against
# the JVM for every sequence of up to 4 of 21 telling bytes).
_SURROGATE = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]?")


def _text_to_string(data) -> str:
    """``data`` decoded as Hadoop's ``Text.toString`` decodes it (bad UTF-8 becomes U+FFFD)."""
    if _SURROGATE.search(data):
        data = _SURROGATE.sub(b"\xff", data)
    return str(data, "utf-8", "replace")


# ``\B`` not after another backslash (``\\B`` is a backslash, then B).
_NON_BOUNDARY = re.compile(r"(?<!\\)((?:\\\\)*)\\B")


def _java_find_count(regex: re.Pattern, record) -> int:
    """Matches of ``regex`` in one record counted as ``Matcher.find()`` counts them: after an
    empty match the next search starts one character further (Python also tries a non-empty
    match at the same place)."""
    if not record and isinstance(regex.pattern, str) and _NON_BOUNDARY.search(regex.pattern):
        # Python's \B never matches in an empty string; Java's does (no word character on
        # either side). In an empty record every \B holds: an empty group says the same.
        regex = re.compile(_NON_BOUNDARY.sub(r"\1(?:)", regex.pattern), regex.flags)
    count, pos, end = 0, 0, len(record)
    while pos <= end:  # search(record, pos) with pos past the end would search at the end again
        m = regex.search(record, pos)
        if m is None:
            break
        count += 1
        pos = m.end() + (m.end() == m.start())
    return count


def _count_matches(regex: re.Pattern, text: bool, body: memoryview, delimiter: bytes, whole: bool) -> int:
    """Matches of ``regex`` in the records of ``body`` (records without the last delimiter),
    each record searched on its own, as Hadoop's RegexMapper searches each line.

    With ``whole`` (newline records, ``re.MULTILINE``, no construct that sees past a line) the
    search runs once over the whole buffer, which counts the same unless a match contains a
    line end or is a non-empty match right after an empty one; either is seen here and the
    records are then searched one by one."""
    if whole and len(body):  # an empty body is one empty record: Python's \B fails there (below)
        buf, sep = (_text_to_string(body), "\n") if text else (bytes(body), b"\n")
        count, empty_at = 0, -1
        for m in regex.finditer(buf):
            start, end = m.span()
            if sep in m.group() or (start == empty_at and end > start):
                break
            count += 1
            if start == end:
                empty_at = end
        else:
            return count
    records = bytes(body).split(delimiter)
    return sum(_java_find_count(regex, _text_to_string(r) if text else r) for r in records)


def _grep_partition(blocks: list, pattern: bytes, delimiter: bytes) -> list:
    """``[matches, records, bytes, byte sum]`` of whole records (``blocks``: one bytes per file).

    Matches are counted as Hadoop's grep counts them, per record (see :func:`_count_matches`):
    with newline records (lines end at ``\n``, ``\r\n`` or a lone ``\r``, as Hadoop's
    LineReader ends them) ``^`` and ``$`` anchor at line starts and ends, a match never crosses
    a line end, and the search stops before the last record's delimiter, so a pattern that
    matches the empty string finds as many matches however the file is partitioned (no extra
    match after the final delimiter, none in a partition that holds no record). Records are
    decoded from UTF-8 (invalid bytes become U+FFFD, as in Hadoop's ``Text``) when the pattern
    is UTF-8 (:func:`_grep_regex`)."""
    lines = delimiter == b"\n"
    regex, text = _grep_regex(pattern, lines)
    whole = lines and not _LINE_SENSITIVE.search(regex.pattern if text else pattern.decode("latin-1"))
    stats = np.zeros(4, dtype=np.int64)
    for raw in blocks:
        if not raw:
            continue
        # Lines end as Hadoop's LineReader ends them: at \n, \r\n or a lone \r (so ``$`` matches
        # before a CRLF). Partitions end after a \n, so a CRLF is never cut.
        data = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if lines and b"\r" in raw else raw
        terminated = data.endswith(delimiter)
        body = memoryview(data)[:len(data) - len(delimiter)] if terminated else memoryview(data)
        stats += (_count_matches(regex, text, body, delimiter, whole), data.count(delimiter) + (not terminated),
                  len(raw), int(np.frombuffer(raw, dtype=np.uint8).sum(dtype=np.int64)))
    return [stats]


def _sum_stats(parts) -> dict:
    total = np.sum(list(parts), axis=0) if parts else np.zeros(4, dtype=np.int64)
    return {"matches": int(total[0]), "records": int(total[1]), "bytes": int(total[2]), "byte_sum": int(total[3])}


def _finish(name: str, bag, value, started: float, client) -> JobResult:
    total = sum(p.nbytes for p in bag.partitions_plan)
    placed = sum(p.nbytes for p in bag.partitions_plan if p.index in bag.placement)
    # What the planner restricted to the data's workers (the rest ran anywhere: every worker
    # local, no worker local, or past the balance cap); the report says what actually happened.
    details = {"placed_fraction": round(placed / total, 4) if total else 0.0}
    return JobResult(name, value, time.perf_counter() - started, collect_report(bag.job, current_client(client)),
                     bag.npartitions, details)


def grep(url: str, pattern: bytes | str, *, delimiter: bytes = b"\n", client=None, locality: bool = True,
         balance: float | None = DEFAULT_BALANCE, blocksize: int | None = None, partition_size: int | None = None,
         storage_options: dict | None = None, job: str | None = None) -> JobResult:
    """Count the matches of regular expression ``pattern`` in ``url`` (a file, directory or glob).

    ``locality``, ``balance``, ``blocksize`` and ``partition_size`` are those of
    :func:`~hpcbridge.dask.read_blocks` (as for the other jobs). The value is
    ``{"matches", "records", "bytes", "byte_sum"}``: records, bytes and the sum of
    all byte values let a caller check that every record was processed exactly once (compare
    with :func:`grep_serial`). Each record is searched on its own, as Hadoop's RegexMapper
    searches each line with ``java.util.regex`` (see :func:`_grep_partition`).
    """
    pattern = _checked_grep_pattern(pattern)
    started = time.perf_counter()
    bag = read_blocks(url, delimiter=delimiter, locality=locality, balance=balance, client=client,
                      blocksize=blocksize, partition_size=partition_size, storage_options=storage_options, job=job)
    parts = bag.map_partitions(_grep_partition, pattern, delimiter)
    (stats,) = _compute(client, parts)
    return _finish("grep", bag, _sum_stats(stats), started, client)


def grep_serial(url: str, pattern: bytes | str, delimiter: bytes = b"\n", storage_options: dict | None = None,
                chunk: int = 16 << 20) -> dict:
    """:func:`grep`'s counts computed in this process, file by file, without Dask (the reference)."""
    pattern = _checked_grep_pattern(pattern)
    fs, paths = expand_paths(url, storage_options)
    total = np.zeros(4, dtype=np.int64)
    for path in paths:
        with fs.open(path, "rb") as f:
            rest = b""
            while True:
                data = f.read(chunk)
                if not data:
                    break
                data = rest + data
                if _overlaps_itself(delimiter):  # the last delimiter of a scan from the left, as bytes.split
                    cut = len(data) - len(data.split(delimiter)[-1])
                else:
                    cut = data.rfind(delimiter) + len(delimiter) if delimiter in data else 0
                rest = data[cut:]
                if cut:  # no whole record yet (a line longer than chunk): read on
                    total += _grep_partition([data[:cut]], pattern, delimiter)[0]
            if rest:
                total += _grep_partition([rest], pattern, delimiter)[0]
    return _sum_stats([total])


def _count_words(blocks, word: bytes | None) -> Counter:
    counts: Counter = Counter()
    regex = re.compile(word) if word else None
    for data in blocks:
        if regex is None:
            counts.update(data.split() if b"\x0b" not in data else _HADOOP_TOKEN.findall(data))
        elif regex.groups:  # findall would give the groups: count whole matches
            counts.update(m.group(0) for m in regex.finditer(data))
        else:
            counts.update(regex.findall(data))
    return counts


def _merge_counts(counters) -> Counter:
    total: Counter = Counter()
    for c in counters:
        total.update(c)
    return total


def wordcount(url: str, *, word: bytes | str | None = None, client=None, locality: bool = True,
              balance: float | None = DEFAULT_BALANCE, blocksize: int | None = None, partition_size: int | None = None,
              storage_options: dict | None = None, job: str | None = None) -> JobResult:
    """Count words: tokens between the delimiters of Hadoop's WordCount (``java.util.StringTokenizer``'s
    space, tab, newline, carriage return and form feed; not vertical tab), or the matches of regular
    expression ``word``. The value is a ``Counter`` of ``bytes`` words. Bytes that are not UTF-8
    are counted as they are (Hadoop's ``Text.toString`` would replace them with U+FFFD)."""
    word = None if word is None else _checked_regex(word, "word")
    started = time.perf_counter()
    bag = read_blocks(url, locality=locality, balance=balance, client=client, blocksize=blocksize,
                      partition_size=partition_size, storage_options=storage_options, job=job)
    counts = bag.reduction(lambda blocks: _count_words(blocks, word), _merge_counts, split_every=8)
    (value,) = _compute(client, counts)
    return _finish("wordcount", bag, value, started, client)


def dummy_read(url: str, *, client=None, locality: bool = True, balance: float | None = DEFAULT_BALANCE,
               blocksize: int | None = None, partition_size: int | None = None, record_size: int | None = None,
               storage_options: dict | None = None, job: str | None = None) -> JobResult:
    """Read every record and discard it; the value is the number of bytes read."""
    started = time.perf_counter()
    bag = read_blocks(url, record_size=record_size, locality=locality, balance=balance, client=client,
                      blocksize=blocksize, partition_size=partition_size, storage_options=storage_options, job=job)
    total = bag.map_partitions(lambda blocks: [sum(len(b) for b in blocks)]).sum()
    (value,) = _compute(client, total)
    return _finish("dummy_read", bag, int(value), started, client)


# -- terasort -----------------------------------------------------------------------------------
def record_checksum(data) -> int:
    """Order-independent checksum of 100-byte records: the sum (mod 2**64) of a hash per record.

    Equal for two record sets exactly when they are (with overwhelming probability) the same
    multiset.
    """
    recs = np.frombuffer(data, dtype="<u4").reshape(-1, RECORD_SIZE // 4)
    h = (recs.astype(np.uint64) * _CHECKSUM_WEIGHTS).sum(axis=1, dtype=np.uint64)
    h ^= h >> np.uint64(29)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(32)
    return int(h.sum(dtype=np.uint64))


def _keys(data) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8).reshape(-1, RECORD_SIZE)[:, :KEY_SIZE].copy().view(f"S{KEY_SIZE}")[:, 0]


def _sample_splits(fs, paths: list[str], outputs: int, sample: int) -> np.ndarray:
    """``outputs - 1`` split keys from up to ``sample`` records read at evenly spaced places."""
    sizes = [fs.info(p).size // RECORD_SIZE for p in paths]
    total = sum(sizes)
    per_file = [max(1, round(sample * n / max(total, 1))) for n in sizes]
    keys = []
    for path, n, want in zip(paths, sizes, per_file):
        if not n:
            continue
        spots = min(10, want)
        each = max(1, want // spots)
        for start in np.linspace(0, max(n - each, 0), spots).astype(np.int64):
            keys.append(_keys(fs.pread(path, offset=int(start) * RECORD_SIZE, length=each * RECORD_SIZE)))
    keys = np.sort(np.concatenate(keys)) if keys else np.array([], dtype=f"S{KEY_SIZE}")
    if not len(keys) or outputs == 1:
        return keys[:0]
    return keys[(np.arange(1, outputs) * len(keys)) // outputs]


def _bucket(blocks: list, splits: np.ndarray) -> tuple:
    data = b"".join(blocks)
    records = np.frombuffer(data, dtype=np.uint8).reshape(-1, RECORD_SIZE)
    target = np.searchsorted(splits, _keys(data), side="right")
    order = np.argsort(target, kind="stable")
    bounds = np.searchsorted(target[order], np.arange(len(splits) + 2))
    grouped = records[order]
    stats = (len(records), record_checksum(data) if len(data) else 0)
    return tuple(grouped[bounds[j]:bounds[j + 1]].tobytes() for j in range(len(splits) + 1)) + (stats,)


def _sort_write(fs, path: str, *buckets: bytes) -> dict:
    data = b"".join(buckets)
    records = np.frombuffer(data, dtype=np.uint8).reshape(-1, RECORD_SIZE)
    order = np.argsort(_keys(data), kind="stable")
    with fs.open(path, "wb") as f:
        f.write(records[order].data if len(records) else b"")
    return {"path": fs.url(path), "records": len(records)}


def terasort(url: str, out_url: str, *, outputs: int | None = None, sample: int = 10000, client=None,
             locality: bool = True, balance: float | None = DEFAULT_BALANCE, blocksize: int | None = None,
             partition_size: int | None = None,
             overwrite: bool = False, storage_options: dict | None = None, job: str | None = None) -> JobResult:
    """Sort the 100-byte records of ``url`` by their 10-byte keys into ``outputs`` files under ``out_url``.

    Split points come from a sample of keys; every input partition buckets its records by split
    point (numpy), and output ``j`` gathers bucket ``j`` of every partition (the shuffle), sorts
    it and writes ``part-j``. Concatenating the outputs in order gives the sorted input.
    """
    import dask

    started = time.perf_counter()
    fs_in, paths = expand_paths(url, storage_options)
    fs_out, out_root = _empty_output_dir("terasort", out_url, overwrite, storage_options)
    bag = read_blocks(url, record_size=RECORD_SIZE, locality=locality, balance=balance, client=client,
                      blocksize=blocksize, partition_size=partition_size, storage_options=storage_options, job=job)
    if outputs is None:
        outputs = max(1, bag.npartitions)
    if isinstance(outputs, bool) or not isinstance(outputs, int) or outputs <= 0:
        raise ValueError(f"outputs must be a positive integer for terasort of {url}, got {outputs!r}")
    splits = _sample_splits(fs_in, paths, outputs, sample)
    buckets = [dask.delayed(_bucket, nout=outputs + 1)(part, splits)
               for part in bag.to_delayed(optimize_graph=False)]
    writes = [dask.delayed(_sort_write)(fs_out, f"{out_root.rstrip('/')}/part-{j:05d}", *[b[j] for b in buckets])
              for j in range(outputs)]
    stats = [b[outputs] for b in buckets]
    results = _compute(client, *writes, *stats)
    written, input_stats = results[:outputs], results[outputs:]
    value = {"outputs": [w["path"] for w in written], "records": sum(w["records"] for w in written),
             "input_records": sum(s[0] for s in input_stats),
             "input_checksum": sum(s[1] for s in input_stats) % 2**64}
    return _finish("terasort", bag, value, started, client)


def _validate_file(fs, path: str) -> dict:
    data = fs.read_bytes(path)
    if len(data) % RECORD_SIZE:
        return {"path": fs.url(path), "error": f"{len(data)} bytes is not a whole number of records"}
    keys = _keys(data)
    # Records i, i + 1 with key i + 1 < key i; TeraValidate names each such pair ("misorder in").
    misorders = np.flatnonzero(keys[:-1] > keys[1:]) if len(keys) > 1 else np.array([], dtype=np.int64)
    first_bad = None
    if len(misorders):
        at = int(misorders[0]) * RECORD_SIZE
        first_bad = (int(misorders[0]), data[at:at + KEY_SIZE], data[at + RECORD_SIZE:at + RECORD_SIZE + KEY_SIZE])
    # The keys as the file holds them (bytes, compared as TeraSort compares them: unsigned
    # lexicographic), not numpy's S10 values, which drop trailing NUL bytes.
    return {"path": fs.url(path), "records": len(keys), "checksum": record_checksum(data) if len(data) else 0,
            "sorted": not len(misorders), "misorders": len(misorders), "first_misorder": first_bad,
            "first": data[:KEY_SIZE] if len(keys) else None, "last": data[-RECORD_SIZE:][:KEY_SIZE] if len(keys) else None}


def validate_sort(out_url: str, input_url: str | None = None, *, client=None,
                  storage_options: dict | None = None) -> JobResult:
    """TeraValidate: the files under ``out_url`` (in name order) are sorted within and across
    files; with ``input_url``, they hold the same multiset of records (count and checksum)."""
    import dask

    started = time.perf_counter()
    fs, paths = expand_paths(out_url, storage_options)
    checks = _compute(client, *[dask.delayed(_validate_file)(fs, p) for p in paths])
    problems = [f"{c['path']}: {c['error']}" for c in checks if "error" in c]
    problems += [f"{c['path']} is not sorted: {c['misorders']} misorder(s), the first between records "
                 f"{c['first_misorder'][0]} and {c['first_misorder'][0] + 1} (keys {c['first_misorder'][1].hex()} "
                 f"and {c['first_misorder'][2].hex()})" for c in checks if not c.get("sorted", True)]
    filled = [c for c in checks if c.get("records")]
    problems += [f"{a['path']} ends after {b['path']} starts (last key {a['last'].hex()}, first key "
                 f"{b['first'].hex()})" for a, b in zip(filled, filled[1:]) if a["last"] > b["first"]]
    value = {"files": len(paths), "records": sum(c.get("records", 0) for c in checks),
             "checksum": sum(c.get("checksum", 0) for c in checks) % 2**64}
    if input_url is not None:
        fs_in, in_paths = expand_paths(input_url, storage_options)
        reference = _compute(client, *[dask.delayed(_validate_file)(fs_in, p) for p in in_paths])
        value["input_records"] = sum(c.get("records", 0) for c in reference)
        value["input_checksum"] = sum(c.get("checksum", 0) for c in reference) % 2**64
        if (value["input_records"], value["input_checksum"]) != (value["records"], value["checksum"]):
            problems.append(f"the output holds {value['records']} records (checksum {value['checksum']:x}), the input "
                            f"{value['input_records']} (checksum {value['input_checksum']:x})")
    value["problems"] = problems
    value["ok"] = not problems
    return JobResult("validate_sort", value, time.perf_counter() - started)
