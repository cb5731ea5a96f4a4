"""The read task of an array block: a hyperslab of an HDF5 dataset, and where its bytes came from.

:func:`read_array_block` runs inside a Dask task: it opens the file through hpcbridge, reads the
block's bytes (:func:`hpcbridge.hdf5.read_region`: one read per contiguous run straight into the
output, or the block's stored chunks, decoded; or, where the block is one run of a file the file
system maps, :func:`hpcbridge.hdf5.map_region`: no read at all), and reports the bytes it
fetched per serving host, as the record readers do (:mod:`hpcbridge.dask.reader`), so the job's
:class:`~hpcbridge.dask.report.LocalityReport` is measured, not planned.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ..fs.base import FileSystem
from ..hdf5 import ChunkIndex, DatasetInfo, map_region, read_region
from . import blockbuffers
from .hosts import host_matches
from .reader import cached_fs, emit_event, worker_host

__all__ = ["ArrayReadSpec", "read_array_block", "attribute_ranges", "BlockSource", "read_source_block"]


@dataclass(frozen=True, eq=False)
class ArrayReadSpec:
    """Everything one array read task needs, and the workers it should run on.

    The scheduler plugin (:class:`~hpcbridge.dask.scheduling.LocalityPlugin`) recognises read
    tasks by this argument and restricts them softly to ``workers``.
    """

    fs: FileSystem
    path: str
    info: DatasetInfo
    region: tuple[tuple[int, int], ...]
    index: ChunkIndex | None
    job: str
    block: int
    preferred: str | None = None
    #: Addresses of the workers on the hosts storing the block's bytes (empty: anywhere).
    workers: tuple[str, ...] = ()
    #: Map a block that is one contiguous run where the file system can (``read_hdf5``'s
    #: ``memory_map``).
    memory_map: bool = True


def attribute_ranges(fs: FileSystem, path: str, ranges: list, host: str, tally: dict) -> None:
    """Add the bytes of ``ranges`` (``(offset, length)``) to ``tally`` per serving host: the
    worker's host when it stores a copy, else the first host listed (as the record readers)."""
    ranges = sorted((int(o), int(n)) for o, n in ranges if n > 0)
    if not ranges:
        return
    lo, hi = ranges[0][0], max(o + n for o, n in ranges)
    blocks = fs.block_locations(path, lo, hi - lo)
    starts = np.array([b.offset for b in blocks], np.int64)
    for offset, length in ranges:
        end = offset + length
        i = max(int(np.searchsorted(starts, offset, side="right")) - 1, 0)
        while i < len(blocks) and blocks[i].offset < end:
            b = blocks[i]
            n = min(b.end, end) - max(b.offset, offset)
            if n > 0:
                local = next((h for h in b.hosts if host_matches(h, host)), None)
                served = local or (b.hosts[0] if b.hosts else "unknown")
                tally["hosts"][served] += n
                tally["local" if local else "remote"] += n
            i += 1


def read_array_block(spec: ArrayReadSpec) -> np.ndarray:
    """The body of an array read task: the block's values as a numpy array (native byte order)."""
    fs = cached_fs(spec.fs)
    host, worker = worker_host()
    started = time.perf_counter()
    if spec.info.layout == "compact":
        out, fetched = read_region(None, spec.info, spec.region)
    else:
        with fs.open(spec.path, "rb", buffering=0) as f:
            mapped = map_region(f, spec.info, spec.region) if spec.memory_map and fs.capabilities.memory_map \
                else None
            if mapped is not None:
                # A view of the page cache: a reduction reads each byte once, from the file's
                # pages, instead of copying the block into memory first and reading it again.
                out, fetched = mapped
            else:
                out = blockbuffers.empty([b - a for a, b in spec.region], spec.info.dtype)
                out, fetched = read_region(f, spec.info, spec.region, spec.index, out)
    tally = {"hosts": defaultdict(int), "local": 0, "remote": 0}
    attribute_ranges(fs, spec.path, fetched, host, tally)
    emit_event(worker, {
        "job": spec.job, "partition": spec.block, "worker_host": host,
        "worker": worker.address if worker is not None else None, "preferred": spec.preferred,
        "bytes_local": tally["local"], "bytes_remote": tally["remote"], "bytes_by_host": dict(tally["hosts"]),
        "records_bytes": int(out.nbytes), "seconds": time.perf_counter() - started,
    })
    if not out.dtype.isnative:
        out = out.astype(out.dtype.newbyteorder("="))
    return out


class BlockSource:
    """The read specs of an array's blocks, seen as an array for ``dask.array.from_array``.

    Used where no block is restricted to workers (no distributed client, or locality off):
    ``from_array`` makes a blockwise layer, which Dask fuses with the blockwise step consuming
    each block (a sum's per-block step, an elementwise operation), so a reduction runs half the
    tasks. :func:`read_source_block` with a block's slices runs :func:`read_array_block` for
    that block; one source serves every block (one key, not one copy per task).
    """

    def __init__(self, specs: list[ArrayReadSpec], shape: tuple[int, ...], dtype: np.dtype):
        self.specs = {spec.region: spec for spec in specs}
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)

    def read(self, slices) -> np.ndarray:
        """The block whose slices these are."""
        region = tuple((s.start or 0, n if s.stop is None else s.stop) for s, n in zip(slices, self.shape))
        return read_array_block(self.specs[region])


def read_source_block(source: BlockSource, slices) -> np.ndarray:
    """The getter of a :class:`BlockSource` layer. Not one of Dask's getters on purpose: Dask
    folds later slicing (``x[::3]``) into those, and a block must be read whole."""
    return source.read(slices)
