"""Plan Dask partitions from a file set's block locations: chunks, metablocks, record formats.

A :class:`Partition` is an ordered list of :class:`Chunk` byte ranges (of one or more files) plus
the hosts that store those bytes, weighted by bytes per host. The planner cuts each file at its
storage blocks (or at a fixed ``blocksize``) and, as GPFS's metablocks (seed 004 §3), groups
consecutive small blocks stored on the same host into one partition of at most
``partition_size`` bytes, so small-block layouts do not flood the scheduler with tiny tasks.

Chunks are raw byte ranges; a :class:`RecordFormat` aligns them to records when they are read
(:mod:`hpcbridge.dask.reader`), as Hadoop's LineRecordReader: the record that starts after the
first delimiter at or past a chunk's start is its first; its last is the one that the first
delimiter at or past its end finishes. Chunks of one file therefore own disjoint record sets
that cover the file: every record is processed exactly once.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from ..fs.api import url_to_fs
from ..fs.base import FileSystem
from .hosts import placement_blocks

__all__ = ["Chunk", "Partition", "RecordFormat", "expand_paths", "plan_partitions", "DEFAULT_PARTITION_SIZE"]

#: Target size of a metablock partition when ``blocksize`` is not given.
DEFAULT_PARTITION_SIZE = 32 << 20

_MAGIC = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class RecordFormat:
    """How records are delimited: by ``delimiter`` bytes or as fixed ``record_size`` records.

    Exactly one of the two is set; :meth:`make` validates user input and applies the default
    (newline-delimited records).
    """

    delimiter: bytes | None = b"\n"
    record_size: int | None = None

    @classmethod
    def make(cls, delimiter=None, record_size=None, url: str = "") -> "RecordFormat":
        """Validate ``delimiter``/``record_size`` (at most one) for reading ``url``."""
        if delimiter is not None and record_size is not None:
            raise ValueError(f"give either delimiter or record_size for {url}, not both "
                             f"(delimiter={delimiter!r}, record_size={record_size!r})")
        if record_size is not None:
            if isinstance(record_size, bool) or not isinstance(record_size, int) or record_size <= 0:
                raise ValueError(f"record_size must be a positive integer for {url}, got {record_size!r}")
            return cls(None, record_size)
        if delimiter is None:
            return cls(b"\n", None)
        if not isinstance(delimiter, (bytes, bytearray)):
            raise TypeError(f"delimiter must be bytes for {url}, got {type(delimiter).__name__}: {delimiter!r}")
        if not delimiter:
            raise ValueError(f"delimiter must not be empty for {url}")
        return cls(bytes(delimiter), None)


@dataclass(frozen=True)
class Chunk:
    """The raw byte range ``[start, end)`` of file ``path`` (of ``size`` bytes) a partition owns."""

    path: str
    start: int
    end: int
    size: int

    @property
    def length(self) -> int:
        """Bytes in the range before record alignment."""
        return self.end - self.start


@dataclass(frozen=True)
class Partition:
    """One Dask partition: chunks read in order, and where their bytes live.

    Attributes
    ----------
    index:
        Position of the partition in the bag.
    chunks:
        Byte ranges, in file order.
    hosts:
        ``(host, bytes)`` pairs, most bytes first: how many of the partition's bytes each host
        stores (a replicated byte counts for every host holding a copy).
    """

    index: int
    chunks: tuple[Chunk, ...]
    hosts: tuple[tuple[str, int], ...] = ()

    @property
    def nbytes(self) -> int:
        """Raw bytes of the partition (before record alignment)."""
        return sum(c.length for c in self.chunks)

    @property
    def primary_host(self) -> str | None:
        """The host storing most of the partition's bytes (None if no host is known)."""
        return self.hosts[0][0] if self.hosts else None

    def preferred_hosts(self, share: float = 0.5) -> list[str]:
        """Hosts storing at least ``share`` of what the best host stores, best first."""
        if not self.hosts:
            return []
        best = self.hosts[0][1]
        return [h for h, n in self.hosts if n >= share * best]


def _glob_regex(pattern: str) -> re.Pattern:
    """Regex of a path glob: ``*``/``?``/``[...]`` stay within one path segment, ``**`` crosses them."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and "]" in pattern[i + 2:]:
            j = pattern.index("]", i + 2)
            body = pattern[i + 1:j].replace("\\", "\\\\")
            if body.startswith("!"):
                body = "^" + body[1:]
            elif body.startswith("^"):
                body = "\\" + body
            out.append("[" + body + "]")
            i = j
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


#: Names a directory or glob expansion skips, as Hadoop's FileInputFormat (its hiddenFileFilter)
#: and ``pyarrow.dataset`` (``ignore_prefixes``) skip them: job markers (``_SUCCESS``,
#: TeraSort's ``_partition.lst``), checksum files (``.part-0.crc``), partial and hidden files.
HIDDEN_PREFIXES = ("_", ".")


def _visible(paths: list[str], base: str, keep_hidden_last: bool = False) -> list[str]:
    """``paths`` (below directory ``base``) without those that are hidden below ``base``: a name
    starting with one of :data:`HIDDEN_PREFIXES` (``keep_hidden_last``: except the file's own
    name, which a glob named explicitly)."""
    start = len(base.rstrip("/")) + 1
    out = []
    for p in paths:
        names = p[start:].split("/")
        if keep_hidden_last:
            names = names[:-1]
        if not any(n.startswith(HIDDEN_PREFIXES) for n in names):
            out.append(p)
    return out


def expand_paths(url_or_glob, storage_options: dict | None = None) -> tuple[FileSystem, list[str]]:
    """The file system and the sorted files a URL names: a file, every file below a directory,
    or the files matching a glob (``*``, ``?``, ``[...]``, ``**``); for a list of them, each one's
    files in the list's order (a file listed twice once, where it is first).

    Below a directory, and where a glob's wildcards match, names starting with ``_`` or ``.``
    are skipped, as Hadoop's input formats skip them (``_SUCCESS``, ``_partition.lst``, ``.crc``
    files); a file named in the URL, or by a glob whose last part starts with ``_`` or ``.``, is
    read. Raises FileNotFoundError naming the URL or glob when nothing matches.
    """
    if isinstance(url_or_glob, (list, tuple)):
        if not url_or_glob:
            raise FileNotFoundError("no URLs given")
        results = [expand_paths(u, storage_options) for u in url_or_glob]
        fs = results[0][0]
        if any(r[0] != fs for r in results):
            raise ValueError(f"all URLs must be on one file system: {list(url_or_glob)}")
        # In the list's order, as dask.bag.read_text and dask.dataframe.read_csv read a list
        # (each glob's matches sorted); a file named twice is read once.
        return fs, list(dict.fromkeys(p for _, paths in results for p in paths))
    if not isinstance(url_or_glob, str):
        raise TypeError(f"expected a URL or glob string, got {type(url_or_glob).__name__}: {url_or_glob!r}")
    magic = _MAGIC.search(url_or_glob)
    if not magic:
        fs, path = url_to_fs(url_or_glob, **(storage_options or {}))
        files = fs.find(path)
        if files != [fs._path(path)]:  # a directory: its hidden entries are not data
            files = _visible(files, path)
        if not files:
            raise FileNotFoundError(f"no files in {url_or_glob} (names starting with _ or . are skipped)")
        return fs, files
    # The directory before the first segment with a glob character is listed; the rest matches.
    head = url_or_glob[:magic.start()]
    base_url = head[:head.rfind("/") + 1] if "/" in head else head
    fs, base = url_to_fs(base_url, **(storage_options or {}))
    pattern = base.rstrip("/") + "/" + url_or_glob[len(base_url):]
    regex = _glob_regex(pattern)
    try:
        candidates = fs.find(base)
    except FileNotFoundError:
        candidates = []
    last = pattern.rstrip("/").rsplit("/", 1)[-1]
    files = _visible([p for p in candidates if regex.match(p)], base, keep_hidden_last=last.startswith(HIDDEN_PREFIXES))
    if not files:
        raise FileNotFoundError(f"no files match the glob {url_or_glob} (names starting with _ or . are skipped)")
    return fs, files


def _weights(blocks, start: int, end: int) -> dict[str, int]:
    """Bytes of ``[start, end)`` stored on each host, from a file's block locations."""
    weights: dict[str, int] = defaultdict(int)
    for b in blocks:
        overlap = min(b.end, end) - max(b.offset, start)
        if overlap > 0:
            for host in b.hosts:
                weights[host] += overlap
    return weights


def _top_hosts(weights: dict[str, int]) -> frozenset[str]:
    """The hosts storing the most bytes (several where replicas tie; none if none is known)."""
    most = max(weights.values(), default=0)
    return frozenset(h for h, n in weights.items() if n == most and n > 0)


def _pieces(fs: FileSystem, path: str, size: int, blocksize: int | None):
    """``(Chunk, weights)`` per storage block (or per ``blocksize`` range) of one file."""
    blocks = placement_blocks(fs, path)
    if blocksize:
        bounds = [(s, min(s + blocksize, size)) for s in range(0, size, blocksize)]
    else:
        bounds = [(b.offset, b.end) for b in blocks] or [(0, size)]
    return [(Chunk(path, s, e, size), _weights(blocks, s, e)) for s, e in bounds]


def plan_partitions(fs: FileSystem, paths: list[str], blocksize: int | None = None,
                    partition_size: int | None = None, fmt: RecordFormat | None = None,
                    url: str = "") -> list[Partition]:
    """Partitions of ``paths`` that follow their storage blocks.

    Parameters
    ----------
    blocksize:
        Cut files into ranges of this many bytes instead of at their storage blocks (no
        metablock grouping then: every range is one partition).
    partition_size:
        Metablock target: consecutive blocks on the same host are grouped into one partition
        while it stays within this many bytes (default 32 MiB). Blocks at least this large
        stay partitions of their own.
    fmt:
        The record format; with fixed-size records every file must hold whole records.
    """
    if blocksize is not None and (isinstance(blocksize, bool) or not isinstance(blocksize, int) or blocksize <= 0):
        raise ValueError(f"blocksize must be a positive integer (bytes) for {url}, got {blocksize!r}")
    if partition_size is None:
        partition_size = DEFAULT_PARTITION_SIZE
    if isinstance(partition_size, bool) or not isinstance(partition_size, int) or partition_size <= 0:
        raise ValueError(f"partition_size must be a positive integer (bytes) for {url}, got {partition_size!r}")
    groups: list[tuple[list[Chunk], dict[str, int]]] = []
    for path in paths:
        info = fs.info(path)
        if info.size == 0:
            continue
        if fmt is not None and fmt.record_size and info.size % fmt.record_size:
            raise ValueError(f"{fs.url(path)} holds {info.size} bytes, not a whole number of "
                             f"{fmt.record_size}-byte records")
        for chunk, weights in _pieces(fs, path, info.size, blocksize):
            if groups and not blocksize:
                chunks, current = groups[-1]
                # Same host: one that stores the most of both. With replicas several hosts tie,
                # listed in the order the store gives them (the NameNode shuffles equal ones).
                top, current_top = _top_hosts(weights), _top_hosts(current)
                shared = top & current_top or top == current_top  # (both empty: hosts unknown)
                if shared and sum(c.length for c in chunks) + chunk.length <= partition_size:
                    chunks.append(chunk)
                    for h, n in weights.items():
                        current[h] = current.get(h, 0) + n
                    continue
            groups.append(([chunk], dict(weights)))
    return [Partition(i, tuple(chunks), tuple(sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))))
            for i, (chunks, weights) in enumerate(groups)]
