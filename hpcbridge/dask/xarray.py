"""NetCDF-4 / HDF5 files as ``xarray.Dataset`` objects whose variables are locality-aware arrays.

:func:`open_dataset` reads the file's structure (dimensions, variables, attributes) with xarray's
``h5netcdf`` engine over an hpcbridge file object (block cache: metadata costs few round
trips), then replaces the data of every variable with :func:`~hpcbridge.dask.read_hdf5`, so each
Dask block is read where its bytes live; CF decoding (scale factors, fill values, times) is
applied last, lazily, by ``xarray.decode_cf``.
"""

from __future__ import annotations

import uuid

from ..fs.api import url_to_fs
from ..hdf5 import HDF5Error
from ..hdf5.dataset import open_cached
from ..hdf5.layout import read_superblock
from .chunks import user_chunks
from .scheduling import DEFAULT_BALANCE

__all__ = ["open_dataset"]

#: Options of xarray's h5netcdf engine that open_dataset passes to it (not to decode_cf).
_ENGINE_OPTIONS = ("phony_dims", "drop_variables", "decode_vlen_strings", "invalid_netcdf")


def open_dataset(url: str, group: str | None = None, chunks=None, *, locality: bool = True, client=None,
                 storage_options: dict | None = None, partition_size: int | None = None,
                 balance: float | None = DEFAULT_BALANCE, job: str | None = None, memory_map: bool = True,
                 **decode):
    """An ``xarray.Dataset`` of the NetCDF-4 (or HDF5) file at ``url``, on any backend.

    Parameters
    ----------
    url:
        The file (``hdfs://``, ``file://``, ``plfs+hdfs://``, ...).
    group:
        A group of the file (default: the root group).
    chunks:
        Dask chunks: ``{dimension: size}`` (as xarray: a dimension not named gets the HDF5
        chunk, or the whole axis of contiguous data; ``{}`` the HDF5 chunks), or chunks for
        every variable (anything ``dask.array`` accepts). Default: chunks that follow storage
        and block locations, see :func:`~hpcbridge.dask.read_hdf5`.
    locality, client, storage_options, partition_size, balance, memory_map:
        As for :func:`~hpcbridge.dask.read_hdf5`.
    job:
        Id of all the variables' read tasks in the locality report (the dataset's
        ``attrs["hpcbridge_job"]``).
    **decode:
        Options of ``xarray.decode_cf`` (``decode_times``, ``mask_and_scale``, ...);
        ``decode_cf=False`` skips it; ``phony_dims=`` (HDF5 files without NetCDF dimensions),
        ``drop_variables=``, ``decode_vlen_strings=`` and ``invalid_netcdf=`` go to the
        ``h5netcdf`` engine.

    Variables of fixed-size numeric types are Dask arrays; variable-length strings are read at
    once (xarray's own reader); character arrays keep their character axis in one block (CF
    decoding joins it into strings); variables of an HDF5 array type raise HDF5Error (no
    NetCDF dimensions for their axes: :func:`~hpcbridge.dask.read_hdf5` reads them).
    """
    import h5py
    import xarray as xr

    from .arrays import read_hdf5
    from .xarray_backend import for_h5netcdf

    fs, path = url_to_fs(url, **(storage_options or {}))
    job = job or uuid.uuid4().hex[:12]
    prefix = "/" + group.strip("/") + "/" if group and group.strip("/") else "/"
    decoding = decode.pop("decode_cf", True)
    engine_options = {k: decode.pop(k) for k in _ENGINE_OPTIONS if k in decode}
    with open_cached(fs, path) as f:
        read_superblock(f, url)  # NotHDF5Error naming the URL (NetCDF-3 classic files included)
        try:
            raw = xr.open_dataset(for_h5netcdf(f), engine="h5netcdf", group=group, decode_cf=False, cache=False,
                                  **engine_options)
        except (OSError, ValueError) as exc:
            if group and "not found" in str(exc).lower():
                raise OSError(f"{url} has no group {group!r}: {exc}") from None
            raise HDF5Error(f"{url} cannot be opened as NetCDF-4 / HDF5: {exc}") from exc
        with raw, h5py.File(f, "r") as h5:
            stored = h5[prefix]  # the group's HDF5 datasets (names and shapes, see _stored)
            variables = {}
            for name, var in raw.variables.items():
                if var.dtype.subdtype is not None:
                    raise HDF5Error(f"variable {name!r} of {url} has an HDF5 array type ({var.dtype}), which has "
                                    "no NetCDF dimensions for its axes: read it with hpcbridge.dask.read_hdf5 "
                                    "(its axes come last)")
                if var.ndim == 0 or var.dtype.hasobject or var.dtype.kind not in "biufcS":
                    # Loaded into memory: a shallow copy is already independent of the file
                    # (a deep one fails on h5py references, which do not copy).
                    variables[name] = var.load().copy(deep=False)
                    continue
                var_chunks = chunks
                if isinstance(chunks, dict):
                    # As xarray: a dimension not named (or None) gets the engine's preferred
                    # chunk, the HDF5 chunk (the whole axis of contiguous data); {} all of them.
                    preferred = var.encoding.get("preferred_chunks") or {}
                    var_chunks = tuple(chunks[d] if chunks.get(d) is not None else preferred.get(d, -1)
                                       for d in var.dims)
                dataset, shape = _stored(stored, name)
                dataset = prefix + dataset
                # A variable shorter than its dimensions (below) is read in its stored blocks and
                # given the chunks asked for once padded: they are chunks of the padded shape.
                data = read_hdf5(url, dataset, var_chunks if shape == var.shape else None, locality=locality,
                                 client=client,
                                 storage_options=storage_options, partition_size=partition_size,
                                 balance=balance, job=job, memory_map=memory_map)
                if var.dtype.kind == "b" and data.dtype.kind != "b":
                    # Booleans are stored as int8; xarray's BooleanCoder, which runs even without
                    # CF decoding, moved their marker (attribute dtype="bool") out of attrs.
                    data = data.astype(bool)
                if data.shape != var.shape:
                    # A variable of an unlimited dimension written shorter than the dimension
                    # (NetCDF-4 grows only the variables written): h5netcdf pads it at the end
                    # with the HDF5 fill value.
                    data = _padded(data, var.shape, h5[dataset], url)
                    if var_chunks is not None:
                        data = data.rechunk(user_chunks(var_chunks, var.shape, data.dtype,
                                                        var.encoding.get("chunksizes"),
                                                        f"variable {name!r} of {url}"))
                if var.dtype == "S1" and len(data.chunks[-1]) > 1:
                    data = data.rechunk({data.ndim - 1: -1})  # characters of one string together
                variables[name] = xr.Variable(var.dims, data, attrs=dict(var.attrs), encoding=dict(var.encoding))
            ds = xr.Dataset(variables, attrs=dict(raw.attrs)).set_coords([c for c in raw.coords if c in variables])
            # As xarray.open_dataset: unlimited_dims (to_netcdf writes them unlimited again), source.
            ds.encoding = {**raw.encoding, "source": url}
            _name_source(ds, url)
    ds.attrs["hpcbridge_job"] = job
    return xr.decode_cf(ds, **decode) if decoding else ds


def _name_source(ds, url: str) -> None:
    """Set the ``source`` of each variable's encoding to ``url``, as xarray's engines set it to
    the path they opened (the h5netcdf engine, given a file object, records the object)."""
    for var in ds.variables.values():
        if "source" in var.encoding:
            var.encoding["source"] = url


#: How NetCDF-4 (netCDF-C and h5netcdf alike) names the HDF5 dataset of a variable that has the
#: name of a dimension but is not that dimension's coordinate variable: the dimension's scale
#: holds the plain name.
_NON_COORD = "_nc4_non_coord_"


def _stored(group, name: str) -> tuple[str, tuple]:
    """``(HDF5 dataset name, stored shape)`` of variable ``name`` of h5py group ``group``.

    A variable is not always stored under its name: ``x`` that is not the coordinate variable of
    dimension ``x`` is ``_nc4_non_coord_x`` (h5netcdf reads it as ``x``; the dataset ``x`` is
    the dimension's scale, of another size and type). Its stored shape may be shorter than its
    dimensions (see :func:`_padded`)."""
    key = _NON_COORD + name if _NON_COORD + name in group else name
    return key, tuple(group[key].shape)


def _padded(data, shape: tuple, dataset, url: str):
    """``data`` padded at the end of each axis to ``shape`` with the HDF5 fill value of
    ``dataset`` (an h5py dataset), as h5netcdf pads it (``Variable._get_padding``)."""
    import dask.array as da

    if len(shape) != data.ndim or any(have > want for have, want in zip(data.shape, shape)):
        raise HDF5Error(f"variable {dataset.name!r} of {url} has shape {data.shape} in HDF5, which does not fit "
                        f"its NetCDF dimensions {shape}")
    fill = data.dtype.type(dataset.fillvalue)
    return da.pad(data, [(0, want - have) for have, want in zip(data.shape, shape)], mode="constant",
                  constant_values=fill)
