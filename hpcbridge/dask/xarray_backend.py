"""The ``hpcbridge`` engine of xarray: ``xarray.open_dataset`` on hpcbridge URLs.

xarray recognises remote URLs with the pattern ``^[a-zA-Z][a-zA-Z0-9]*(://|::)``, which a scheme
with ``+`` (``hpcbridge+hdfs://``, ``plfs+hdfs://``) fails: its own engines take such a URL for
a local path. This engine (entry point ``hpcbridge`` of the ``xarray.backends`` group) opens the
URL through hpcbridge instead, behind the block cache hpcbridge uses for HDF5 metadata
(:class:`~hpcbridge.hdf5.BlockCacheFile`), and hands the file object to xarray's ``h5netcdf``
engine, so decoding, groups and ``chunks=`` are xarray's own::

    import xarray as xr
    ds = xr.open_dataset("hpcbridge+hdfs://nn:9820/climate.h5")       # claimed by scheme
    ds = xr.open_dataset("plfs+hdfs://nn:9820/climate.nc", engine="hpcbridge",
                         storage_options={"webhdfs": "http://nn:9870"}, chunks={"time": 1})

Datasets opened this way pickle (the file is reopened from its URL where it is unpickled), so
``chunks=`` arrays compute on ``distributed`` workers too. For Dask blocks that follow storage
and read tasks placed where their bytes live, use :func:`hpcbridge.dask.open_dataset`.
See docs/arrays.md.
"""

from __future__ import annotations

import os
import re

from xarray.backends import BackendEntrypoint

from ..hdf5.cache import BlockCacheFile
from ..hdf5.layout import SIGNATURE

__all__ = ["HpcbridgeBackendEntrypoint", "HpcbridgeFile", "claims", "restore_url"]

#: URLs this engine claims when xarray guesses an engine: schemes only hpcbridge serves.
_CLAIMED = re.compile(r"^(hpcbridge|plfs)\+[A-Za-z][A-Za-z0-9+.\-]*://", re.IGNORECASE)
_PREFIX = "hpcbridge+"


#: What ``os.path.abspath`` made of such a URL: ``$PWD/plfs+hdfs:/nn:9820/x`` (see :func:`restore_url`).
_MANGLED = re.compile(r"^((?:hpcbridge|plfs)\+([A-Za-z][A-Za-z0-9+.\-]*)):/(?!/)(.*)$", re.IGNORECASE)


def restore_url(path: str) -> str:
    """The URL xarray turned into a local path, else ``path`` unchanged.

    xarray takes a URL whose scheme has a ``+`` for a relative local path, and
    ``open_mfdataset`` (and ``open_dataset`` when it records the source) makes it absolute:
    ``plfs+hdfs://nn:9820/x`` becomes ``$PWD/plfs+hdfs:/nn:9820/x``. That is undone here, for
    a path under the current directory whose first component after it is such a scheme: the
    host is the first component after the scheme unless the innermost scheme is ``file``.
    """
    cwd = os.getcwd().rstrip("/") + "/"
    if not path.startswith(cwd):
        return path
    match = _MANGLED.match(path[len(cwd):])
    if not match:
        return path
    scheme, inner, rest = match.group(1), match.group(2).rsplit("+", 1)[-1].lower(), match.group(3)
    return f"{scheme}:///{rest}" if inner == "file" else f"{scheme}://{rest}"


def claims(filename_or_obj) -> bool:
    """Whether ``filename_or_obj`` is a string URL with a ``hpcbridge+...`` or ``plfs+...`` scheme
    (or such a URL made into a local path by xarray, see :func:`restore_url`)."""
    return isinstance(filename_or_obj, str) and bool(_CLAIMED.match(restore_url(filename_or_obj)))


def _backend_url(url: str) -> str:
    """``hpcbridge+hdfs://nn/x`` -> ``hdfs://nn/x`` (the fsspec spelling names the backend's URL)."""
    return url[len(_PREFIX):] if url[:len(_PREFIX)].lower() == _PREFIX else url


class HpcbridgeFile(BlockCacheFile):
    """A file of any hpcbridge backend, read through a :class:`~hpcbridge.hdf5.BlockCacheFile`.

    Pickles as its URL and storage options: unpickled (on a Dask worker, say), it opens the file
    again. Use :meth:`open`.
    """

    #: The backend options the file was opened with (kept to open it again when unpickled).
    _options: dict = {}

    @classmethod
    def open(cls, url: str, storage_options: dict | None = None) -> "HpcbridgeFile":
        """Open ``url`` for reading (``FileNotFoundError`` naming ``url`` if it does not exist)."""
        from ..fs.api import url_to_fs

        options = dict(storage_options or {})
        fs, path = url_to_fs(_backend_url(url), **options)
        try:
            size = fs.info(path).size
        except FileNotFoundError as exc:
            if exc.filename == url:
                raise
            raise FileNotFoundError(exc.errno, f"{exc.strerror or 'No such file or directory'}", url) from None
        self = cls(fs.open(path, "rb", buffering=0), size, url)
        self._options = options
        return self

    def __reduce__(self):
        return type(self).open, (self.url, self._options)


class _NotIOBase:
    """A file object that xarray does not take for an ``io.IOBase``: xarray's h5netcdf engine
    looks for the HDF5 signature at offset 0 of those, where a file with a user block (valid
    HDF5, its superblock at 512, 1024, ...) holds the user's bytes. h5py finds the superblock."""

    __slots__ = ("_file",)

    def __init__(self, f):
        self._file = f

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __reduce__(self):
        return type(self), (self._file,)


def for_h5netcdf(f):
    """``f`` as xarray's h5netcdf engine must be given it: itself, or wrapped where a user block
    comes before the superblock (see :class:`_NotIOBase`)."""
    return f if f.pread(8, 0) == SIGNATURE else _NotIOBase(f)


class _Closer:
    """Closes a dataset's store, then its file. Pickled, it closes the store only: the copy's
    store opens the file again (see :class:`HpcbridgeFile`), and the file object closes with it."""

    def __init__(self, close, f=None):
        self._close, self._file = close, f

    def __call__(self) -> None:
        try:
            if self._close is not None:
                self._close()
        finally:
            if self._file is not None:
                self._file.close()

    def __reduce__(self):
        return type(self), (self._close,)


#: open_dataset's keywords that xarray.decode_cf takes (the rest go to the h5netcdf engine).
_DECODING = ("mask_and_scale", "decode_times", "concat_characters", "decode_coords", "use_cftime",
             "decode_timedelta")


class HpcbridgeBackendEntrypoint(BackendEntrypoint):
    """xarray engine ``"hpcbridge"``: NetCDF-4 / HDF5 files on any hpcbridge backend.

    ``xarray.open_dataset(url, engine="hpcbridge", ...)`` takes any hpcbridge URL (``file://``,
    ``hdfs://``, ``plfs+file://``, ``plfs+hdfs://``, an absolute path) or its fsspec spelling
    (``hpcbridge+hdfs://``); without ``engine=``, xarray picks this engine for ``hpcbridge+...``
    and ``plfs+...`` URLs (unless one of its netCDF engines claims the name first, see
    docs/arrays.md). The file is read through a block cache and decoded by xarray's ``h5netcdf``
    engine: every parameter of that engine applies, plus ``storage_options`` (the hpcbridge
    backend's options, as for :func:`hpcbridge.connect`).
    """

    description = "NetCDF-4 / HDF5 on any hpcbridge backend (file, hdfs, plfs+..., hpcbridge+...) via h5netcdf"
    url = "docs/arrays.md of hpcbridge (section: Plain xarray, the hpcbridge engine)"
    supports_groups = True
    open_dataset_parameters = (
        "filename_or_obj", "mask_and_scale", "decode_times", "concat_characters", "decode_coords",
        "drop_variables", "use_cftime", "decode_timedelta", "format", "group", "lock", "invalid_netcdf",
        "phony_dims", "decode_vlen_strings", "storage_options",
    )

    def guess_can_open(self, filename_or_obj) -> bool:
        """True for ``hpcbridge+<scheme>://...`` and ``plfs+<scheme>://...`` strings."""
        return claims(filename_or_obj)

    def _open(self, filename_or_obj, storage_options):
        from ..hdf5.layout import read_superblock

        if isinstance(filename_or_obj, os.PathLike):
            filename_or_obj = os.fspath(filename_or_obj)
        if not isinstance(filename_or_obj, str):
            raise TypeError(f"the hpcbridge engine opens URLs (str), not {type(filename_or_obj).__name__}; "
                            "pass a file object with engine='h5netcdf'")
        f = HpcbridgeFile.open(restore_url(filename_or_obj), storage_options)
        try:
            read_superblock(f, filename_or_obj)  # NotHDF5Error (a ValueError) naming the URL
        except BaseException:
            f.close()
            raise
        return f

    def _delegate(self, filename_or_obj, storage_options, method: str, group, **kwargs) -> dict:
        """``{name: dataset}`` from the h5netcdf engine's ``method`` called on the opened file, each
        dataset closing the file when it closes; errors of h5netcdf / h5py named with the URL."""
        from xarray.backends.h5netcdf_ import H5netcdfBackendEntrypoint

        from ..hdf5 import HDF5Error

        f = self._open(filename_or_obj, storage_options)
        url = f.url
        # CF decoding after the file is open, so that its errors (an unknown calendar...) are
        # not reported as a file that cannot be opened; xarray.decode_cf decodes as the
        # engine would.
        decoding = {k: kwargs.pop(k) for k in _DECODING if k in kwargs}
        try:
            out = getattr(H5netcdfBackendEntrypoint(), method)(
                for_h5netcdf(f), group=group, **kwargs, **{k: False for k in decoding if k != "use_cftime"})
        except BaseException as exc:
            f.close()
            if isinstance(exc, (OSError, ValueError)) and not isinstance(exc, (HDF5Error, FileNotFoundError)):
                if group and "not found" in str(exc).lower():
                    raise OSError(f"{url} has no group {group!r}: {exc}") from None
                raise HDF5Error(f"{url} cannot be opened as NetCDF-4 / HDF5: {exc}") from exc
            raise
        import xarray as xr

        from .xarray import _name_source

        datasets = {"": out} if method == "open_dataset" else out
        for key, ds in datasets.items():
            ds.set_close(_Closer(ds._close, f))
            ds.encoding["source"] = url
            _name_source(ds, url)
            datasets[key] = xr.decode_cf(ds, **decoding) if decoding else ds
        return datasets

    def open_dataset(self, filename_or_obj, *, mask_and_scale=True, decode_times=True, concat_characters=True,
                     decode_coords=True, drop_variables=None, use_cftime=None, decode_timedelta=None,
                     format="NETCDF4", group=None, lock=None, invalid_netcdf=None, phony_dims=None,
                     decode_vlen_strings=True, storage_options=None):
        """The dataset at URL ``filename_or_obj`` (xarray calls this; see the class)."""
        return self._delegate(
            filename_or_obj, storage_options, "open_dataset", group, mask_and_scale=mask_and_scale,
            decode_times=decode_times, concat_characters=concat_characters, decode_coords=decode_coords,
            drop_variables=drop_variables, use_cftime=use_cftime, decode_timedelta=decode_timedelta, format=format,
            lock=lock, invalid_netcdf=invalid_netcdf, phony_dims=phony_dims,
            decode_vlen_strings=decode_vlen_strings)[""]

    def open_groups_as_dict(self, filename_or_obj, *, group=None, storage_options=None, **kwargs):
        """``{group path: dataset}`` of the file at URL ``filename_or_obj`` (``xarray.open_groups``);
        keywords as for :meth:`open_dataset`."""
        return self._delegate(filename_or_obj, storage_options, "open_groups_as_dict", group, **kwargs)

    def open_datatree(self, filename_or_obj, *, group=None, storage_options=None, **kwargs):
        """The file at URL ``filename_or_obj`` as an ``xarray.DataTree`` (``xarray.open_datatree``);
        keywords as for :meth:`open_dataset`."""
        from xarray.backends.common import datatree_from_dict_with_io_cleanup

        return datatree_from_dict_with_io_cleanup(
            self.open_groups_as_dict(filename_or_obj, group=group, storage_options=storage_options, **kwargs))
