"""Dask arrays of Zarr arrays on any backend, each read task placed where its chunk objects live.

:func:`read_zarr` opens the array's metadata with zarr (format 2 or 3, sharded or not) through an
:class:`~hpcbridge.dask.zarr_store.HpcbridgeZarrStore`, makes one Dask block per stored chunk
object (a shard, for sharded arrays) unless ``chunks=`` says otherwise, finds the hosts storing
each chunk object from its block locations (HDFS blocks, PLFS data logs, POSIX layouts: the
same ``block_locations`` as :func:`~hpcbridge.dask.read_hdf5`), and restricts each read task
softly to the workers on those hosts (:class:`~hpcbridge.dask.scheduling.LocalityPlugin`).
The tasks (:func:`~hpcbridge.dask.zarrread.read_zarr_block`) report the bytes they fetched per
host: :func:`~hpcbridge.dask.array_report`.
"""

from __future__ import annotations

import itertools
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import MissingDependencyError
from ..fs.api import url_to_fs
from .chunks import user_chunks
from .hosts import placement_blocks
from .partitions import Chunk, Partition
from .scheduling import DEFAULT_BALANCE, LocalReadTask, current_client, ensure_plugin, locality_plan, worker_hosts
from .zarrread import ZarrReadSpec, read_zarr_block

__all__ = ["read_zarr", "open_zarr_array"]

#: Concurrent block-location look-ups while planning (one per chunk object; I/O bound).
_LOOKUPS = 8


def _zarr(url: str):
    try:
        import zarr
    except ImportError:
        raise MissingDependencyError(f"reading the Zarr store {url} needs zarr: pip install 'hpcbridge[zarr]'") \
            from None
    return zarr


def open_zarr_array(url: str, component: str | None = None, *, storage_options: dict | None = None):
    """``(fs, root, component, zarr.Array)``: the Zarr array at ``url`` (or at ``component`` in the
    hierarchy at ``url``), read-only, on any hpcbridge backend.

    Raises
    ------
    FileNotFoundError
        No Zarr array there (naming the URL and the component).
    ValueError
        The node is a group, not an array (naming the URL).
    """
    zarr = _zarr(url)
    from zarr.errors import ContainsGroupError, NodeTypeValidationError

    from .zarr_store import HpcbridgeZarrStore

    fs, root = url_to_fs(url, **(storage_options or {}))
    component = (component or "").strip("/")
    where = f"{url}" + (f" (component {component!r})" if component else "")
    store = HpcbridgeZarrStore(fs, root)
    try:
        array = zarr.open_array(store=store, path=component, mode="r")
    except FileNotFoundError:
        if not fs.exists(root):
            raise FileNotFoundError(2, "No such file or directory", url) from None
        raise FileNotFoundError(2, "No Zarr array (no zarr.json or .zarray)", where) from None
    except (ContainsGroupError, NodeTypeValidationError) as exc:
        raise ValueError(f"{where} is a Zarr group, not an array; name an array with component=: {exc}") \
            from None
    return fs, root, component, array


def _object_weights(fs, paths: list[str]) -> list[tuple[int, dict[str, int]]]:
    """``(size, {host: bytes})`` of each chunk object (``(0, {})`` for an object never written:
    zarr reads it as the fill value)."""
    def one(path):
        try:
            blocks = placement_blocks(fs, path)
        except (FileNotFoundError, NotADirectoryError):
            return 0, {}
        out: dict[str, int] = defaultdict(int)
        for b in blocks:
            for h in b.hosts:
                out[h] += b.length
        return sum(b.length for b in blocks), dict(out)

    if len(paths) <= 1:
        return [one(p) for p in paths]
    with ThreadPoolExecutor(min(_LOOKUPS, len(paths))) as pool:
        return list(pool.map(one, paths))


def read_zarr(url: str, component: str | None = None, chunks=None, *, locality: bool = True, client=None,
              storage_options: dict | None = None, balance: float | None = DEFAULT_BALANCE, job: str | None = None):
    """A ``dask.array.Array`` of the Zarr array at ``url`` (a store directory on any backend:
    ``file://``, ``hdfs://``, ``plfs+file://``, ``plfs+hdfs://``, ...).

    Parameters
    ----------
    url:
        The Zarr store (the directory holding ``zarr.json`` or ``.zarray`` / ``.zgroup``).
    component:
        Path of the array inside the store's hierarchy (default: the store is the array).
    chunks:
        Dask chunks (anything ``dask.array`` accepts). Default: one block per stored chunk
        object (per shard for sharded arrays), so every task reads objects stored together.
    locality:
        Restrict each read task (softly) to the Dask workers on the hosts storing its chunk
        objects.
    client:
        The ``distributed`` client to plan for (default: the current one, if any; without one the
        array computes with any Dask scheduler and locality does not apply).
    storage_options:
        Options of the file system (as for :func:`hpcbridge.connect`).
    balance:
        As for :func:`~hpcbridge.dask.read_hdf5`.
    job:
        Id of the read tasks in the locality report (default: a fresh id; ``array.job``).

    Returns
    -------
    dask.array.Array
        Values as zarr reads them (codecs, fill value of chunk objects never written), with
        attributes ``job`` (see :func:`~hpcbridge.dask.array_report`), ``placement``
        (``{block index: worker addresses}``) and ``hosts`` (``{block index: ((host, bytes),
        ...)}``: the stored bytes of the block's chunk objects per host, most first).

    Raises
    ------
    FileNotFoundError, ValueError
        Naming the URL (see :func:`open_zarr_array`); bad ``chunks`` raise ``ValueError``.
    """
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    fs, root, component, array = open_zarr_array(url, component, storage_options=storage_options)
    metadata = array.metadata
    shape, dtype = tuple(array.shape), np.dtype(array.dtype)
    stored = tuple(metadata.chunk_grid.chunk_shape)  # the chunk objects (shards, if sharded)
    chunks = user_chunks(stored if chunks is None else chunks, shape, dtype, stored, f"the Zarr array at {url}")
    bounds = [np.concatenate([[0], np.cumsum(c)]).astype(np.int64) for c in chunks]
    base = root.rstrip("/") + ("/" + component if component else "")
    regions, objects = {}, {}
    for blk in itertools.product(*[range(len(c)) for c in chunks]):
        region = tuple((int(bounds[ax][i]), int(bounds[ax][i + 1])) for ax, i in enumerate(blk))
        grid = [range(a // s, -(-b // s)) if b > a else range(0) for (a, b), s in zip(region, stored)]
        regions[blk] = region
        objects[blk] = [f"{base}/{metadata.encode_chunk_key(c)}" for c in itertools.product(*grid)]
    paths = sorted({p for ps in objects.values() for p in ps})
    weights = dict(zip(paths, _object_weights(fs, paths)))
    job = job or uuid.uuid4().hex[:12]
    keys = list(regions)
    partitions, hosts = [], {}
    for i, blk in enumerate(keys):
        total: dict[str, int] = defaultdict(int)
        parts = []
        for p in objects[blk]:
            n, by_host = weights[p]
            for h, b in by_host.items():
                total[h] += b
            parts.append(Chunk(p, 0, n, n))
        hosts[i] = tuple(sorted(total.items(), key=lambda kv: (-kv[1], kv[0])))
        partitions.append(Partition(i, tuple(parts), hosts[i]))
    placement: dict[int, list[str]] = {}
    client = current_client(client)
    if locality and client is not None and ensure_plugin(client):
        placement = locality_plan(partitions, worker_hosts(client), url, balance=balance)
    sizes = tuple(weights[p][0] for p in paths)
    name = "zarr-" + tokenize(fs, root, component, metadata.to_dict(), chunks, sizes, job)
    graph = {}
    for i, blk in enumerate(keys):
        spec = ZarrReadSpec(fs, root, component, metadata, regions[blk], job, i, partitions[i].primary_host,
                            tuple(placement.get(i, ())))
        key = (name, *blk)
        graph[key] = LocalReadTask(key, read_zarr_block, spec)
    result = da.Array(HighLevelGraph.from_collections(name, graph, dependencies=()), name, chunks, dtype=dtype,
                      meta=np.empty((0,) * len(shape), dtype))
    result.job, result.placement, result.hosts = job, placement, hosts
    return result
