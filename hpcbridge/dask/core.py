"""Dask collections whose partitions follow storage blocks and run where the blocks live.

``read_blocks`` plans partitions from block locations (:mod:`~hpcbridge.dask.partitions`),
places each read task on the workers of the hosts storing its bytes
(:mod:`~hpcbridge.dask.scheduling`), and reads whole records with exact-once alignment
(:mod:`~hpcbridge.dask.reader`). ``read_text``, ``read_records`` and ``read_csv`` build on it.
"""

from __future__ import annotations

import codecs
import io
import uuid
from functools import partial

import dask
import dask.bag as db
from dask._task_spec import Task
from dask.base import tokenize

from ..fs.file import text_codec
from .partitions import RecordFormat, expand_paths, plan_partitions
from .reader import ReadSpec, read_spec
from .report import LocalityReport, collect_report
from .scheduling import DEFAULT_BALANCE, LocalReadTask, current_client, ensure_plugin, locality_plan, worker_hosts

__all__ = ["read_blocks", "read_text", "read_records", "read_csv", "plan", "job_report", "BlockBag"]


def _label(url_or_glob) -> str:
    """How errors name a read: its URL or glob, or the list of them."""
    return url_or_glob if isinstance(url_or_glob, str) else repr(url_or_glob)


def plan(url_or_glob, blocksize: int | None = None, partition_size: int | None = None, delimiter=None,
         record_size: int | None = None, storage_options: dict | None = None):
    """``(fs, paths, format, partitions)`` of a read, without building a collection.

    Validates the arguments as :func:`read_blocks` does (errors name the URL or glob).
    """
    label = _label(url_or_glob)
    fmt = RecordFormat.make(delimiter, record_size, label)
    if blocksize is not None and (isinstance(blocksize, bool) or not isinstance(blocksize, int) or blocksize <= 0):
        raise ValueError(f"blocksize must be a positive integer (bytes) for {label}, got {blocksize!r}")
    fs, paths = expand_paths(url_or_glob, storage_options)
    partitions = plan_partitions(fs, paths, blocksize, partition_size, fmt, label)
    return fs, paths, fmt, partitions


class BlockBag(db.Bag):
    """A ``dask.bag.Bag`` read by :func:`read_blocks`, which also knows its job and plan.

    Attributes
    ----------
    job:
        Id under which the read tasks report their measurements (see :meth:`report`).
    partitions_plan:
        The :class:`~hpcbridge.dask.partitions.Partition` of every partition.
    placement:
        ``{partition index: [worker addresses]}`` the read tasks were restricted to (soft).
    fs:
        The file system read (``fs.url(chunk.path)`` names a partition's files).
    """

    def report(self, client=None) -> LocalityReport:
        """The locality report of the reads of this bag so far."""
        return collect_report(self.job, current_client(client))


def read_blocks(url_or_glob, blocksize: int | None = None, delimiter: bytes | None = None,
                record_size: int | None = None, *, partition_size: int | None = None, locality: bool = True,
                balance: float | None = DEFAULT_BALANCE, client=None, job: str | None = None,
                storage_options: dict | None = None) -> BlockBag:
    """A bag of whole records, one bytes object per file in each partition, partitions following storage blocks.

    Parameters
    ----------
    url_or_glob:
        A file, a directory (every file below it but hidden ones: names starting with ``_`` or
        ``.``, as Hadoop skips them), a glob (``hdfs://nn:9820/data/part-*``) or a
        list of them, on any backend (``hdfs://``, ``file://``, ``plfs+file://``, ...).
    blocksize:
        Cut files into ranges of this many bytes instead of at their storage blocks.
    delimiter, record_size:
        Records end with ``delimiter`` (default ``b"\\n"``) or have ``record_size`` bytes;
        give at most one.
    partition_size:
        Metablock target: consecutive storage blocks on the same host are grouped up to this
        many bytes (default 32 MiB).
    locality:
        Restrict each read task (softly) to the workers on the hosts storing its bytes.
    balance:
        Plan at most this multiple of a fair share of the bytes on one worker; partitions past it
        run wherever a worker is free (None: place every partition on its data).
    client:
        The ``distributed`` client to plan for (default: the current one, if any).
    job:
        Id of this read in the locality report (default: a fresh id).

    Returns
    -------
    BlockBag
        ``npartitions`` equals the number of planned partitions; partition ``i`` is a list of
        ``bytes``, one per file it covers (a file's last record may lack its delimiter: files
        are not run together). ``bag.report()`` sums what its read tasks measured.
    """
    fs, paths, fmt, partitions = plan(url_or_glob, blocksize, partition_size, delimiter, record_size,
                                      storage_options)
    job = job or uuid.uuid4().hex[:12]
    versions = [(p, fs.version(p)) for p in paths]
    name = "hpcbridge-read-" + tokenize(fs, versions, fmt, partitions, job)
    label = _label(url_or_glob)
    placement: dict[int, list[str]] = {}
    client = current_client(client)
    if locality and client is not None and ensure_plugin(client):
        placement = locality_plan(partitions, worker_hosts(client), label, balance=balance)
    graph = {}
    for p in partitions:
        workers = tuple(placement.get(p.index, ()))
        # A read placed on workers is a LocalReadTask, never fused, so the scheduler plugin finds
        # its spec. The others are plain tasks that Dask fuses with what consumes them, as it
        # fuses dask.bag.read_text's: the partition is then freed by the worker thread that read
        # it, in memory its core reuses for the next read, not by the scheduler's thread. Freed
        # there, a worker on the other core took memory the VM's balloon had handed back
        # (read_paths.py's read_blocks: docs/benchmarks.md, 2026-11-27 23:15).
        make = LocalReadTask if workers else Task
        graph[(name, p.index)] = make((name, p.index), read_spec, ReadSpec(fs, p, fmt, job, workers))
    bag = BlockBag(graph, name, len(partitions))
    bag.job, bag.partitions_plan, bag.placement, bag.fs = job, partitions, placement, fs
    return bag


#: ``blocksize`` that makes every file one chunk (and one partition), read whole.
_WHOLE_FILES = 1 << 62


def cuts_at_bytes(encoding: str) -> bool:
    """Whether files in ``encoding`` may be cut at delimiter bytes: UTF-8 (no character's bytes
    hold another's) and single-byte encodings.

    In UTF-16/32 the newline's byte ``0x0A`` is also half of other characters (U+0A00..U+0AFF,
    U+010A, ...), a cut must fall on a code unit and only the first block has the byte-order
    mark; in Shift JIS or GBK a byte such as ``|`` is also the trail byte of a character. Files
    in those encodings are read whole, one partition each, as ``dask.bag.read_text`` without
    ``blocksize`` reads them.
    """
    info = codecs.lookup(encoding)
    if info.name == "utf-8":
        return True
    # A single-byte decoder gives a character for every byte on its own; a multi-byte or
    # stateful one waits for more after some byte (a lead byte, a UTF-16 half, an escape).
    decoder = info.incrementaldecoder("replace")
    return all(decoder.decode(bytes([i])) for i in range(256))


def _decode(data: bytes, encoding: str, errors: str, path: str) -> str:
    try:
        return data.decode(encoding, errors)
    except UnicodeDecodeError as e:
        # Same exception type as dask's, but naming the file (positions count from the first
        # record of this partition's part of the file).
        raise UnicodeDecodeError(e.encoding, e.object, e.start, e.end, f"{e.reason} in {path}") from None


def _lines(blocks: list, paths: list, delimiter: bytes | None, encoding: str, errors: str) -> list:
    out: list = []
    for data, path in zip(blocks, paths):
        text = _decode(data, encoding, errors, path)
        if delimiter is None:  # universal newlines, as dask.bag.read_text's default
            out.extend(io.StringIO(text, newline=None))
            continue
        sep = delimiter.decode(encoding)
        parts = text.split(sep)
        if parts and parts[-1] == "":
            parts.pop()
            out.extend(p + sep for p in parts)
        else:
            out.extend(p + sep for p in parts[:-1])
            out.extend(parts[-1:])
    return out


def _records(blocks: list, record_size: int) -> list:
    out: list = []
    for data in blocks:
        view = memoryview(data)
        out.extend(bytes(view[i:i + record_size]) for i in range(0, len(data), record_size))
    return out


def read_text(url_or_glob, encoding: str = "utf-8", delimiter: bytes | None = None, errors: str = "strict",
              **kwargs) -> db.Bag:
    """A bag of text lines, as ``dask.bag.read_text``: by default universal newlines (a line ends
    at ``\n``, ``\r\n`` or ``\r`` and is given ending with ``\n``); with ``delimiter`` (bytes
    in ``encoding``) lines end only there and keep it (dask's ``linedelimiter``). ``errors`` is
    the decoding's; a decoding error names the file.

    Takes the options of :func:`read_blocks`; the bag's ``job`` attribute names its report.
    Files in an encoding other than UTF-8 or a single-byte one (UTF-16, UTF-32, Shift JIS, ...)
    are read whole, one partition per file, whatever ``blocksize`` (see :func:`cuts_at_bytes`).
    """
    if delimiter is not None and not (isinstance(delimiter, bytes) and delimiter):
        raise ValueError(f"delimiter must be non-empty bytes or None for {url_or_glob}, got {delimiter!r}")
    # Before any task runs, and naming the files (codecs' LookupError names only the encoding).
    text_codec(encoding, f"read_text of {_label(url_or_glob)}")
    if delimiter is not None:
        try:
            delimiter.decode(encoding)
        except UnicodeDecodeError:
            raise ValueError(f"delimiter {delimiter!r} for {url_or_glob} is not text in {encoding}") from None
    if not cuts_at_bytes(encoding):
        kwargs = {**kwargs, "blocksize": _WHOLE_FILES}
    # Cut after a newline character: b"\n" in UTF-8 and ASCII-based encodings, not in EBCDIC.
    blocks = read_blocks(url_or_glob, delimiter=delimiter or "\n".encode(encoding), **kwargs)
    parts = [dask.delayed(_lines)(d, [blocks.fs.url(path) for path, _, _ in _file_ends(p)], delimiter, encoding, errors)
             for d, p in zip(blocks.to_delayed(optimize_graph=False), blocks.partitions_plan)]
    bag = db.from_delayed(parts) if parts else db.from_sequence([], npartitions=1)
    bag.job = blocks.job
    return bag


def read_records(url_or_glob, record_size: int = 100, **kwargs) -> db.Bag:
    """A bag of fixed-size records (``bytes`` of ``record_size``), e.g. TeraSort's 100-byte rows."""
    blocks = read_blocks(url_or_glob, record_size=record_size, **kwargs)
    bag = blocks.map_partitions(_records, record_size)
    bag.job = blocks.job
    return bag


#: pandas options that count rows from a file's start (``skiprows``, ``header``) or end
#: (``skipfooter``): they apply to the partition that starts (ends) each file, as in
#: ``dask.dataframe.read_csv``, not to every partition.
_FILE_START_KEYS = ("skiprows", "header")
_FILE_END_KEYS = ("skipfooter",)
#: pandas options that do not make one DataFrame per partition.
_REFUSED_CSV_KEYS = ("nrows", "chunksize", "iterator")


def _file_ends(partition) -> list[tuple[str, bool, bool]]:
    """``(path, starts the file, ends the file)`` of each file a partition's data covers, in
    the order of :func:`~hpcbridge.dask.reader.read_partition`'s ``bytes`` (one per file)."""
    out: list[tuple[str, bool, bool]] = []
    for chunk in partition.chunks:
        if out and out[-1][0] == chunk.path:
            out[-1] = (chunk.path, out[-1][1], chunk.end >= chunk.size)
        else:
            # The chunk at offset 0 owns the file's first record; the one reaching the file's
            # end owns its last.
            out.append((chunk.path, chunk.start == 0, chunk.end >= chunk.size))
    return out


def _rows_needed(value, url: str) -> int | None:
    """Lines at a file's start (or end) an int or list ``skiprows``/``header``/``skipfooter``
    reaches; None if it cannot tell (a callable)."""
    if value is None or callable(value):
        return None
    if isinstance(value, bool):
        raise ValueError(f"read_csv of {url}: expected an int, a list or None, got {value!r}")
    if isinstance(value, int):
        return value
    return max(value, default=-1) + 1


def _lines_in(data: bytes, terminator: bytes) -> int:
    return data.count(terminator) + (1 if data and not data.endswith(terminator) else 0)


def _empty_frame(names: list, pandas_kwargs: dict):
    import pandas as pd

    dtype = pandas_kwargs.get("dtype")
    return pd.DataFrame({n: pd.Series(dtype=dtype.get(n, "object") if isinstance(dtype, dict) else "object")
                         for n in names})


def _frame(blocks: list, ends: list, names: list, pandas_kwargs: dict, url: str, terminator: bytes,
           whole_files: bool):
    import io

    import pandas as pd

    # Files read whole (UTF-16, ...) are parsed one by one: each may start with its own BOM.
    if not whole_files and not any(k in pandas_kwargs for k in _FILE_START_KEYS + _FILE_END_KEYS):
        # One bytes per file: a file whose last row has no newline must not run into the next.
        data = b"".join(b if not b or b.endswith(terminator) else b + terminator for b in blocks)
        if not data:
            return _empty_frame(names, pandas_kwargs)
        return pd.read_csv(io.BytesIO(data), header=None, names=names, **pandas_kwargs)
    frames = []
    for data, (path, first, last) in zip(blocks, ends):
        kwargs = dict(pandas_kwargs)
        if not first:
            for k in _FILE_START_KEYS:
                kwargs.pop(k, None)
        if not last:
            for k in _FILE_END_KEYS:
                kwargs.pop(k, None)
        # A count of rows past what this partition holds of the file would be applied to the
        # wrong rows (the rest are in the next partition): refuse rather than keep them.
        lines = _lines_in(data, terminator)
        if first:
            need = max(_rows_needed(kwargs.get("skiprows"), url) or 0,
                       (_rows_needed(kwargs.get("header"), url) or -1) + 1)
            if need > lines and not last:
                raise ValueError(f"read_csv of {url}: skiprows/header reach line {need} of {path}, but its "
                                 f"first partition holds {lines} lines: use a larger blocksize")
        if last and kwargs.get("skipfooter") and _rows_needed(kwargs["skipfooter"], url) > lines and not first:
            raise ValueError(f"read_csv of {url}: skipfooter={kwargs['skipfooter']} reaches past the last "
                             f"partition of {path} ({lines} lines): use a larger blocksize")
        if data:
            header = kwargs.pop("header", None)
            frames.append(pd.read_csv(io.BytesIO(data), header=header, names=names, **kwargs))
    if not frames:
        return _empty_frame(names, pandas_kwargs)
    return frames[0] if len(frames) == 1 else pd.concat(frames)


def read_csv(url_or_glob, names: list[str], meta=None, **kwargs):
    """A dask DataFrame of CSV files, one partition per block partition.

    ``names`` gives the columns. Files have no header row unless ``header`` says so: as in
    ``dask.dataframe.read_csv``, ``header``, ``skiprows`` (counted from each file's start) and
    ``skipfooter`` apply to the partition starting (ending) each file, whose rows must include
    the lines they reach (else a ``ValueError`` asks for a larger ``blocksize``); ``nrows``,
    ``chunksize`` and ``iterator`` are refused. Other keyword arguments go to
    :func:`read_blocks` if it takes them, else to ``pandas.read_csv``. ``meta`` (an empty
    pandas DataFrame) skips reading the first partition holding rows to learn the dtypes; a
    partition whose column is text where ``meta``'s is a number (or the reverse) raises a
    ``ValueError`` naming the column when it is computed.
    """
    import dask.dataframe as dd

    if not names:
        raise ValueError(f"read_csv of {url_or_glob} needs the column names (names=[...])")
    refused = [k for k in _REFUSED_CSV_KEYS if kwargs.get(k) not in (None, False)]
    if refused:
        raise ValueError(f"read_csv of {url_or_glob} does not take {', '.join(refused)}: a partition is one "
                         f"DataFrame of its rows (use .head(n) or .partitions[...] instead)")
    block_keys = {"blocksize", "partition_size", "locality", "client", "job", "storage_options"}
    block_kwargs = {k: v for k, v in kwargs.items() if k in block_keys}
    pandas_kwargs = {k: v for k, v in kwargs.items() if k not in block_keys}
    label = _label(url_or_glob)
    encoding = pandas_kwargs.get("encoding") or "utf-8"
    text_codec(encoding, f"read_csv of {label}")  # as pandas' LookupError, but naming the files
    # Rows end at pandas' line terminator: cut the files there, not at every b"\n".
    terminator = (pandas_kwargs.get("lineterminator") or "\n").encode(encoding)
    whole_files = not cuts_at_bytes(encoding)
    if whole_files:
        block_kwargs["blocksize"] = _WHOLE_FILES
    blocks = read_blocks(url_or_glob, delimiter=terminator, **block_kwargs)
    frame = partial(_frame, names=list(names), pandas_kwargs=pandas_kwargs, url=label, terminator=terminator,
                    whole_files=whole_files)
    parts = [dask.delayed(frame)(d, _file_ends(p))
             for d, p in zip(blocks.to_delayed(optimize_graph=False), blocks.partitions_plan)]
    if not parts:  # only empty files: no partition, but pandas reads them as an empty frame
        parts = [dask.delayed(frame)([], [])]
    unknown: list = []  # columns whose dtype the first partition does not tell: no value
    if meta is None:
        # The dtypes of the first partition holding rows (from_delayed would take the first
        # partition's, all object when it holds only a header or skipped rows).
        for part in parts:
            meta = part.compute()
            if len(meta):
                break
        unknown = [c for c in meta.columns if meta[c].isna().all()]
        meta = meta.iloc[:0]
    frame = dd.from_delayed(parts, meta=meta, verify_meta=False)
    return frame.map_partitions(_conform, frame._meta, label, unknown, meta=frame._meta)


def _conform(part, meta, url: str, unknown: list = ()):
    """A partition whose columns have the dtypes of ``meta`` (the first partition's, or the
    caller's), up to numeric promotion (an int column with a missing value in another partition
    is float there, as pandas reads the whole file) and columns of only missing values on one
    side (``unknown``: those of the first partition).

    A column read as text in one partition and as numbers in another would be a column of
    mixed Python objects (``1`` and ``"x"``, where pandas reads the whole column as text):
    refused, as ``dask.dataframe.read_csv`` refuses mismatched dtypes.
    """
    import pandas as pd

    if part.empty:  # a partition owning no row: the dtypes of the others
        return meta
    for column in meta.columns:
        want, got = meta[column].dtype, part[column].dtype
        if want == got or (pd.api.types.is_numeric_dtype(want) and pd.api.types.is_numeric_dtype(got)):
            continue
        # Only missing values on one side (float NaN beside text): pandas reads those as NaN too.
        if column in unknown or part[column].isna().all():
            continue
        raise ValueError(f"read_csv of {url}: column {column!r} is {got} in one partition and {want} in "
                         f"the first; give its dtype (dtype={{{column!r}: ...}}) or meta=")
    return part


def job_report(job: str, client=None) -> LocalityReport:
    """The locality report of the read tasks of ``job`` (see :class:`LocalityReport`)."""
    return collect_report(job, current_client(client))
