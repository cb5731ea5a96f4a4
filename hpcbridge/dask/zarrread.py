"""The read task of a Zarr array block, and where its bytes came from.

:func:`read_zarr_block` runs inside a Dask task: it reads the block's region with zarr (codecs,
sharding and fill values are zarr's) through an :class:`~hpcbridge.dask.zarr_store.HpcbridgeZarrStore`
of the task's own, and reports the bytes that store fetched per serving host, as
:func:`~hpcbridge.dask.arrayread.read_array_block` does for HDF5. zarr is imported when a task
runs, not when this module is (the scheduler imports it to recognise read tasks).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ..fs.base import FileSystem
from .arrayread import attribute_ranges
from .reader import cached_fs, emit_event, worker_host

__all__ = ["ZarrReadSpec", "read_zarr_block"]


@dataclass(frozen=True, eq=False)
class ZarrReadSpec:
    """Everything one Zarr read task needs, and the workers it should run on (the scheduler
    plugin, :class:`~hpcbridge.dask.scheduling.LocalityPlugin`, restricts it to ``workers``)."""

    fs: FileSystem
    root: str
    #: Path of the array in the hierarchy ("" for the root).
    component: str
    #: The array's zarr metadata (``ArrayV2Metadata`` / ``ArrayV3Metadata``): not read again.
    metadata: object
    region: tuple[tuple[int, int], ...]
    job: str
    block: int
    preferred: str | None = None
    #: Addresses of the workers on the hosts storing the block's chunk objects (empty: anywhere).
    workers: tuple[str, ...] = ()


def read_zarr_block(spec: ZarrReadSpec):
    """The body of a Zarr read task: the block's values as a numpy array."""
    import zarr
    from zarr.core.array import AsyncArray
    from zarr.storage import StorePath

    from .zarr_store import HpcbridgeZarrStore

    fs = cached_fs(spec.fs)
    host, worker = worker_host()
    started = time.perf_counter()
    store = HpcbridgeZarrStore(fs, spec.root)
    array = zarr.Array(AsyncArray(spec.metadata, StorePath(store, spec.component)))
    out = array[tuple(slice(a, b) for a, b in spec.region)]
    tally = {"hosts": defaultdict(int), "local": 0, "remote": 0}
    ranges: dict[str, list] = defaultdict(list)
    for path, offset, length in store.fetched:
        ranges[path].append((offset, length))
    for path, rs in ranges.items():
        attribute_ranges(fs, path, rs, host, tally)
    emit_event(worker, {
        "job": spec.job, "partition": spec.block, "worker_host": host,
        "worker": worker.address if worker is not None else None, "preferred": spec.preferred,
        "bytes_local": tally["local"], "bytes_remote": tally["remote"], "bytes_by_host": dict(tally["hosts"]),
        "records_bytes": int(out.nbytes), "seconds": time.perf_counter() - started,
    })
    return np.asarray(out)
