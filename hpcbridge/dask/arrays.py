"""Dask arrays of HDF5 datasets whose blocks follow storage and run where their bytes live.

:func:`read_hdf5` describes the dataset (:mod:`hpcbridge.hdf5`: shape, type, filters, chunk
index), cuts it into Dask blocks that follow its storage, computes for every block the hosts
storing the bytes it will read (block locations of the file: HDFS blocks, PLFS data logs, POSIX
layouts), restricts each read task softly to the workers on those hosts (the
:class:`~hpcbridge.dask.scheduling.LocalityPlugin`), and reads with
:func:`~hpcbridge.dask.arrayread.read_array_block`, which reports what it actually read. Where
no block is restricted (no client, locality off) the blocks are a blockwise layer instead
(:class:`~hpcbridge.dask.arrayread.BlockSource`), which Dask fuses with what consumes them.

Default blocks:

* contiguous datasets: slabs along the first axis, cut at the file's storage block boundaries
  and grouped, as metablocks, while consecutive slabs are stored on the same host and the group
  stays within ``partition_size`` bytes;
* chunked datasets: whole HDF5 chunks; slabs of chunk rows (every chunk with the same first-axis
  chunk index) grouped the same way, or, when one chunk row exceeds ``partition_size``, tiles of
  whole chunks grown along the last axes up to it.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict

import numpy as np

from ..fs.api import url_to_fs
from ..hdf5 import ChunkIndex, describe
from ..hdf5.dataset import contiguous_runs
from .chunks import user_chunks
from .arrayread import ArrayReadSpec, BlockSource, read_array_block, read_source_block
from .hosts import placement_blocks
from .partitions import Chunk, Partition
from .report import LocalityReport, collect_report
from .scheduling import DEFAULT_BALANCE, LocalReadTask, current_client, ensure_plugin, locality_plan, worker_hosts

__all__ = ["read_hdf5", "array_report", "plan_hdf5", "ARRAY_PARTITION_SIZE"]

#: Default target bytes (in memory) of an array block. Blocks read into memory (not mapped:
#: see ``memory_map``) come from recycled memory
#: (:mod:`hpcbridge.dask.blockbuffers`), so a larger block costs no fresh page faults and fewer
#: tasks cost less scheduling. A sum over a page-cached 1 GiB POSIX dataset with 2 Dask threads,
#: as a fraction of the raw read, in one interleaved run: 32 / 64 / 128 MiB blocks 0.67 / 0.71 /
#: 0.75; in another, 16 MiB 0.64 (0.61 fresh) and 64 MiB 0.79 (0.52 fresh: glibc maps and faults
#: in every allocation above 32 MiB afresh). 64 MiB keeps tasks small for the workers' memory.
ARRAY_PARTITION_SIZE = 64 << 20


class _Blocks:
    """The file's storage blocks as arrays, for host weights of byte ranges."""

    def __init__(self, blocks):
        self.blocks = blocks
        self.starts = np.array([b.offset for b in blocks], np.int64)
        self.ends = np.array([b.end for b in blocks], np.int64)

    def weights(self, ranges) -> dict[str, int]:
        """Bytes of ``ranges`` (``(offset, length)`` pairs) stored on each host."""
        out: dict[str, int] = defaultdict(int)
        for offset, length in ranges:
            end = offset + length
            i = max(int(np.searchsorted(self.starts, offset, side="right")) - 1, 0)
            while i < len(self.blocks) and self.starts[i] < end:
                n = min(int(self.ends[i]), end) - max(int(self.starts[i]), offset)
                if n > 0:
                    for h in self.blocks[i].hosts:
                        out[h] += n
                i += 1
        return out

    def host_of(self, offsets: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Index of the block holding the first byte of each range (-1: none)."""
        if not len(self.blocks):
            return np.full(len(offsets), -1)
        return np.searchsorted(self.starts, offsets, side="right") - 1


def _group(units: list[tuple[int, int, str | None, int]], target: int) -> list[int]:
    """Cut points along axis 0 grouping consecutive ``(start, stop, host, nbytes)`` units stored
    on the same host while the group stays within ``target`` bytes (metablocks)."""
    cuts = [units[0][0]]
    size, host = 0, units[0][2]
    for start, stop, h, n in units:
        if size and (h != host or size + n > target):
            cuts.append(start)
            size, host = 0, h
        size += n
    cuts.append(units[-1][1])
    return cuts


def _primary(weights: dict[str, int]) -> str | None:
    return max(sorted(weights), key=weights.get) if weights else None


def _contiguous_chunks(info, blocks: _Blocks, target: int) -> tuple:
    shape, item = info.shape, info.dtype.itemsize
    row = math.prod(shape[1:]) * item
    if info.address is None or row == 0 or shape[0] == 0:
        return _regular(shape, (1,) + shape[1:], item, target)
    if row > target:  # one row is already too big: slabs of one row, cut along the next axes
        return _regular(shape, (1,) + shape[1:], item, target, split_inner=True)
    # Row cut points: storage block boundaries (to the nearest row), then at most target bytes.
    cuts = {0, shape[0]}
    for b in blocks.blocks:
        if info.address < b.offset < info.address + shape[0] * row:
            cuts.add(int(round((b.offset - info.address) / row)))
    cuts = sorted(cuts)
    rows_per = max(1, target // row)
    units = []
    for a, b in zip(cuts, cuts[1:]):
        for s in range(a, b, rows_per):
            e = min(s + rows_per, b)
            w = blocks.weights([(info.address + s * row, (e - s) * row)])
            units.append((s, e, _primary(w), (e - s) * row))
    edges = _group(units, target)
    return (tuple(np.diff(edges).tolist()),) + tuple((n,) for n in shape[1:])


def _regular(shape, unit, item, target, split_inner=False) -> tuple:
    """Blocks of whole ``unit`` tiles grown from the last axis towards the first up to ``target``."""
    tile = list(unit)
    if split_inner:  # unit is a whole row: shrink it along the axes after the first
        for ax in range(1, len(shape)):
            while math.prod(tile) * item > target and tile[ax] > 1:
                tile[ax] = -(-tile[ax] // 2)
    else:
        for ax in range(len(shape) - 1, -1, -1):
            grid = -(-shape[ax] // unit[ax]) if unit[ax] else 1
            per = max(1, min(grid, target // max(1, math.prod(tile) * item)))
            tile[ax] = unit[ax] * per
            if per < grid:
                break
    # An axis of length 0 is one block of 0 (Dask's way to say empty), not no block.
    return tuple(tuple([t] * (n // t) + ([n % t] if n % t else [])) if t and n else (0,) for t, n in zip(tile, shape))


def _chunked_chunks(info, index: ChunkIndex, blocks: _Blocks, target: int) -> tuple:
    shape, chunk, item = info.shape, info.chunk, info.dtype.itemsize
    slab = chunk[0] * math.prod(shape[1:]) * item
    if slab > target or not len(index) or shape[0] == 0:
        return _regular(shape, chunk, item, target)
    # Chunk rows grouped as metablocks: host of each chunk row from its stored bytes.
    rows = index.coords[:, 0] // chunk[0]
    nrows = -(-shape[0] // chunk[0])
    first = blocks.host_of(index.address, index.size)
    weights: list[dict[str, int]] = [defaultdict(int) for _ in range(nrows)]
    for r, bi, n in zip(rows.tolist(), first.tolist(), index.size.tolist()):
        if bi >= 0:
            for h in blocks.blocks[bi].hosts:
                weights[r][h] += n
    units = [(r * chunk[0], min((r + 1) * chunk[0], shape[0]), _primary(weights[r]),
              (min((r + 1) * chunk[0], shape[0]) - r * chunk[0]) * math.prod(shape[1:]) * item) for r in range(nrows)]
    edges = _group(units, target)
    return (tuple(np.diff(edges).tolist()),) + tuple((n,) for n in shape[1:])


def _assign_chunks(index: ChunkIndex, chunk, bounds: list[np.ndarray]) -> dict[tuple, np.ndarray]:
    """``{block index: positions in index}`` of the stored chunks intersecting each Dask block."""
    if not len(index):
        return {}
    lows, highs = [], []
    for ax, edges in enumerate(bounds):
        c = index.coords[:, ax]
        lows.append(np.searchsorted(edges, c, side="right") - 1)
        highs.append(np.searchsorted(edges, np.minimum(c + chunk[ax], edges[-1]) - 1, side="right") - 1)
    lows, highs = np.stack(lows, 1), np.stack(highs, 1)
    out: dict[tuple, list] = defaultdict(list)
    single = np.all(lows == highs, axis=1)
    if single.all():
        grid = tuple(len(e) - 1 for e in bounds)
        flat = np.ravel_multi_index(lows.T, grid)
        order = np.argsort(flat, kind="stable")
        keys, starts = np.unique(flat[order], return_index=True)
        groups = np.split(order, starts[1:])
        return {tuple(int(x) for x in np.unravel_index(k, grid)): g for k, g in zip(keys.tolist(), groups)}
    for i in range(len(index)):
        for blk in np.ndindex(*(highs[i] - lows[i] + 1)):
            out[tuple(int(lo + d) for lo, d in zip(lows[i], blk))].append(i)
    return {k: np.array(v, np.int64) for k, v in out.items()}


def plan_hdf5(url: str, dataset: str, chunks=None, *, partition_size: int | None = None,
              storage_options: dict | None = None):
    """``(fs, path, info, index, chunks, blocks)`` of a read: the dataset, its Dask chunks and,
    per Dask block, ``(region, chunk subset, byte ranges, host weights)``; no collection built."""

    if partition_size is None:
        partition_size = ARRAY_PARTITION_SIZE
    if isinstance(partition_size, bool) or not isinstance(partition_size, int) or partition_size <= 0:
        raise ValueError(f"partition_size must be a positive integer (bytes) for {url}, got {partition_size!r}")
    fs, path = url_to_fs(url, **(storage_options or {}))
    info, index = describe(fs, path, dataset)
    storage = _Blocks(placement_blocks(fs, path) if info.layout != "compact" else [])
    if chunks is None:
        if info.layout == "contiguous":
            chunks = _contiguous_chunks(info, storage, partition_size)
        elif info.layout == "chunked":
            chunks = _chunked_chunks(info, index, storage, partition_size)
        else:
            chunks = tuple((n,) for n in info.shape)
    else:
        chunks = user_chunks(chunks, info.shape, info.dtype, info.chunk, f"dataset {dataset!r} in {url}")
    bounds = [np.concatenate([[0], np.cumsum(c)]).astype(np.int64) for c in chunks]
    owned = _assign_chunks(index, info.chunk, bounds) if info.layout == "chunked" else {}
    blocks = {}
    for blk in np.ndindex(*[len(c) for c in chunks]):
        region = tuple((int(bounds[ax][i]), int(bounds[ax][i + 1])) for ax, i in enumerate(blk))
        subset = None
        if info.layout == "contiguous" and info.address is not None and all(b > a for a, b in region):
            starts, run = contiguous_runs(info, region)
            ranges = [(int(starts[0]), int(starts[-1]) + run - int(starts[0]))]
        elif info.layout == "chunked":
            sel = owned.get(tuple(blk))
            subset = index.take(sel) if sel is not None else ChunkIndex.empty(len(info.shape))
            ranges = list(zip(subset.address.tolist(), subset.size.tolist()))
        else:
            ranges = []
        blocks[tuple(blk)] = (region, subset, ranges, storage.weights(ranges))
    return fs, path, info, index, chunks, blocks


def read_hdf5(url: str, dataset: str, chunks=None, *, locality: bool = True, client=None,
              storage_options: dict | None = None, partition_size: int | None = None,
              balance: float | None = DEFAULT_BALANCE, job: str | None = None, memory_map: bool = True):
    """A ``dask.array.Array`` of HDF5 dataset ``dataset`` in the file at ``url``, on any backend
    (``file://``, ``hdfs://``, ``plfs+file://``, ``plfs+hdfs://``, ...).

    Parameters
    ----------
    url:
        The HDF5 (or NetCDF-4) file.
    dataset:
        Path of the dataset in the file (``"dens"``, ``"/group/temp"``).
    chunks:
        Dask chunks (anything ``dask.array`` accepts). Default: blocks that follow storage --
        first-axis slabs cut at storage block boundaries (contiguous data) or groups of whole
        HDF5 chunks (chunked data), grouped while on one host up to ``partition_size``.
    locality:
        Restrict each read task (softly) to the Dask workers on the hosts storing its bytes.
    client:
        The ``distributed`` client to plan for (default: the current one, if any; without one
        the array computes with any Dask scheduler and locality does not apply).
    storage_options:
        Options of the file system (as for :func:`hpcbridge.connect`).
    partition_size:
        Target bytes (in memory) of a default block (64 MiB, :data:`ARRAY_PARTITION_SIZE`).
    balance:
        As for :func:`~hpcbridge.dask.read_blocks`: at most this many fair shares planned on one
        worker.
    job:
        Id of the read tasks in the locality report (default: a fresh id; ``array.job``).
    memory_map:
        Where the file system maps files (``capabilities.memory_map``: POSIX), a block that is
        one contiguous run of the file is a copy-on-write memory map of it instead of a copy
        (zero-copy: the page cache is read once, by whatever uses the block). Such a block shows
        the file as it is when first used and, as any memory map (``numpy.memmap``), raises
        ``SIGBUS`` if another program truncates the file under it: pass ``False`` for files
        that may be rewritten during the analysis. Other file systems read either way.

    Returns
    -------
    dask.array.Array
        In native byte order, with attributes ``job`` (see :func:`array_report`) and
        ``placement`` (``{block index: worker addresses}``).

    Raises
    ------
    FileNotFoundError, NotHDF5Error, DatasetNotFoundError, UnsupportedFilterError
        Naming the URL (and the dataset, the filter).
    """
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    fs, path, info, _, chunks, blocks = plan_hdf5(url, dataset, chunks, partition_size=partition_size,
                                                  storage_options=storage_options)
    job = job or uuid.uuid4().hex[:12]
    stat = fs.info(path)
    name = "hdf5-" + tokenize(fs, path, fs.version(path), dataset, chunks, job, memory_map)
    keys = list(blocks)
    partitions = []
    for i, blk in enumerate(keys):
        _, _, ranges, weights = blocks[blk]
        hosts = tuple(sorted(weights.items(), key=lambda kv: (-kv[1], kv[0])))
        partitions.append(Partition(i, tuple(Chunk(path, o, o + n, stat.size) for o, n in ranges), hosts))
    placement: dict[int, list[str]] = {}
    client = current_client(client)
    if locality and client is not None and ensure_plugin(client):
        placement = locality_plan(partitions, worker_hosts(client), url, balance=balance)
    specs = []
    for i, blk in enumerate(keys):
        region, subset, _, _ = blocks[blk]
        specs.append(ArrayReadSpec(fs, path, info, region, subset, job, i, partitions[i].primary_host,
                                   tuple(placement.get(i, ())), memory_map=bool(memory_map)))
    dtype = info.dtype.newbyteorder("=")
    meta = np.empty((0,) * len(info.shape), dtype)
    if placement:
        # Read tasks of their own (LocalReadTask is never fused), whose specs name the workers
        # the scheduler plugin restricts them to.
        graph = {(name, *blk): LocalReadTask((name, *blk), read_array_block, spec) for blk, spec in zip(keys, specs)}
        array = da.Array(HighLevelGraph.from_collections(name, graph, dependencies=()), name, chunks, dtype=dtype,
                         meta=meta)
    else:
        # Nothing to restrict: a blockwise layer, fused with whatever consumes each block.
        array = da.from_array(BlockSource(specs, info.shape, dtype), chunks=chunks, name=name, asarray=False,
                              lock=False, meta=meta, getitem=read_source_block)
    array.job, array.placement = job, placement
    return array


def array_report(job_or_array, client=None) -> LocalityReport:
    """The locality report of the read tasks of an array from :func:`read_hdf5` (or its job id)."""
    job = getattr(job_or_array, "job", job_or_array)
    return collect_report(job, current_client(client))
