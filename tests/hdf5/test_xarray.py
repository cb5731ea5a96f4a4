"""NetCDF-4 through xarray: hpcbridge.dask.open_dataset (variables are read_hdf5 arrays) against
xarray's own h5netcdf reader on the local file, and plain xarray over the hpcbridge+ fsspec protocol."""

import uuid

import numpy as np
import pytest

h5py = pytest.importorskip("h5py", reason="HDF5 arrays need h5py: pip install 'hpcbridge[hdf5]'")
xr = pytest.importorskip("xarray", reason="NetCDF-4 datasets need xarray: pip install 'hpcbridge[hdf5]'")
h5netcdf = pytest.importorskip("h5netcdf", reason="NetCDF-4 datasets need h5netcdf: pip install 'hpcbridge[hdf5]'")
pytest.importorskip("dask.array")

import fsspec  # noqa: E402

import hpcbridge  # noqa: E402
import hpcbridge.dask as hd  # noqa: E402
from hpcbridge.fs.transfer import copy_file  # noqa: E402
from hpcbridge.hdf5 import NotHDF5Error  # noqa: E402


def expected(path, group=None, **options):
    return xr.open_dataset(path, engine="h5netcdf", group=group, **options).load()


def test_open_dataset_equals_xarray(netcdf, tmp_path):
    url = f"file://{netcdf}"
    ds = hd.open_dataset(url)
    assert ds.tas.chunks is not None and ds.pr.chunks is not None  # dask arrays, not loaded
    assert ds.attrs["hpcbridge_job"]
    ref = expected(netcdf)
    assert ds.tas.encoding.get("scale_factor") == 0.01 and ds.time.dtype.kind == "M"
    xr.testing.assert_identical(ds.drop_attrs(deep=False).load(), ref.drop_attrs(deep=False))
    np.testing.assert_allclose(float(ds.tas.mean()), float(ref.tas.mean()), rtol=1e-12)
    assert int(ds.tas.isnull().sum()) == 15
    report = hd.array_report(ds.attrs["hpcbridge_job"])
    assert report.tasks >= 2
    sst = hd.open_dataset(url, group="ocean")
    xr.testing.assert_identical(sst.load().drop_attrs(deep=False), expected(netcdf, "ocean").drop_attrs(deep=False))
    raw = hd.open_dataset(url, mask_and_scale=False, decode_times=False)
    assert raw.tas.dtype == np.int16 and raw.time.dtype == np.float64
    # From a PLFS container too.
    fs, target = hpcbridge.url_to_fs(f"plfs+file://{tmp_path}/c.nc")
    copy_file(hpcbridge.connect("file://"), netcdf, fs, target)
    plfs = hd.open_dataset(f"plfs+file://{tmp_path}/c.nc", chunks={"time": 2})
    assert plfs.tas.chunks[0] == (2, 2, 2)
    xr.testing.assert_identical(plfs.drop_attrs(deep=False).load(), ref.drop_attrs(deep=False))


def test_booleans_character_arrays_and_decode_options_as_xarray(tmp_path):
    """Booleans (stored as int8, marked by an attribute xarray moves) come back bool; character
    arrays keep their strings whole whatever the chunks; decode_cf=False and phony_dims pass."""
    path = tmp_path / "kinds.nc"
    data = xr.Dataset({"mask": ("x", np.array([True, False, True])),
                       "name": ("x", np.array([b"ab", b"cdef", b"g"], dtype="S4")),
                       "t": ("x", np.array([1.0, 2.0, 3.0]))})
    data.to_netcdf(path, engine="h5netcdf", encoding={"name": {"dtype": "S1"}})
    ref = xr.open_dataset(path, engine="h5netcdf").load()
    for options in ({}, {"chunks": 2}, {"chunks": {"x": 1}}, {"partition_size": 2}):
        ds = hd.open_dataset(f"file://{path}", **options).load()
        assert ds.mask.dtype == bool and (~ds.mask).values.tolist() == [False, True, False]
        xr.testing.assert_identical(ds.drop_attrs(deep=False), ref.drop_attrs(deep=False))
    raw = hd.open_dataset(f"file://{path}", decode_cf=False)
    xr.testing.assert_identical(raw.drop_attrs(deep=False).load(),
                                xr.open_dataset(path, engine="h5netcdf", decode_cf=False).load())
    array_typed = tmp_path / "array.h5"
    with h5py.File(array_typed, "w") as f:
        f.create_dataset("v", shape=(4,), dtype=np.dtype(("<f4", (3,))))
    with pytest.raises(hpcbridge.hdf5.HDF5Error, match=f"'v' of file://{array_typed} has an HDF5 array type"):
        hd.open_dataset(f"file://{array_typed}", phony_dims="sort")


def test_object_references_load_as_xarray_loads_them(tmp_path):
    """A dataset of object references (HDF5 files that are not NetCDF-4): xarray loads it as
    an object array of h5py references; open_dataset failed deep-copying them (TypeError)."""
    path = tmp_path / "refs.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("t", data=np.arange(3.0))
        f.create_dataset("refs", data=[f["t"].ref, f.ref], dtype=h5py.ref_dtype)
    ref = xr.open_dataset(path, engine="h5netcdf", phony_dims="sort").load()
    ds = hd.open_dataset(f"file://{path}", phony_dims="sort").load()
    assert ds.refs.dtype == ref.refs.dtype == object
    assert [type(r) for r in ds.refs.values] == [type(r) for r in ref.refs.values] == [h5py.Reference] * 2
    xr.testing.assert_identical(ds.drop_vars("refs").drop_attrs(deep=False),
                                ref.drop_vars("refs").drop_attrs(deep=False))


def test_plain_xarray_through_fsspec_file_object(netcdf):
    """xarray with its own h5netcdf engine, reading through the hpcbridge+file fsspec protocol."""
    with fsspec.open(f"hpcbridge+file://{netcdf}", "rb") as f:
        ds = xr.open_dataset(f, engine="h5netcdf").load()
    xr.testing.assert_identical(ds, expected(netcdf))


def test_open_dataset_bad_inputs(netcdf, tmp_path):
    text = tmp_path / "x.nc"
    text.write_bytes(b"CDF\x01" + b"\0" * 2000)  # NetCDF-3 classic: not HDF5
    with pytest.raises(NotHDF5Error, match=f"file://{text} is not an HDF5 file"):
        hd.open_dataset(f"file://{text}")
    with pytest.raises(FileNotFoundError, match="nope.nc"):
        hd.open_dataset(f"file://{tmp_path}/nope.nc")
    with pytest.raises(OSError, match="no group 'deep'"):
        hd.open_dataset(f"file://{netcdf}", group="deep")


@pytest.mark.hdfs
def test_xarray_on_hdfs(dask_testbed, netcdf):
    """On the HDFS testbed: plain xarray over hpcbridge+hdfs://, and open_dataset with the
    testbed's workers, both equal to xarray on the local file."""
    client = dask_testbed.client
    netloc = dask_testbed.url.split("://", 1)[1]
    root = f"/tests/nc-{uuid.uuid4().hex[:8]}"
    options = {**dask_testbed.storage_options, "block_size": 64 << 10, "replication": 1}
    fs, path = hpcbridge.url_to_fs(f"hdfs://{netloc}{root}/climate.nc", **options)
    fs.mkdir(root, parents=True)
    try:
        copy_file(hpcbridge.connect("file://"), netcdf, fs, path)
        ref = expected(netcdf)
        with fsspec.open(f"hpcbridge+hdfs://{netloc}{root}/climate.nc", "rb", **dask_testbed.storage_options) as f:
            xr.testing.assert_identical(xr.open_dataset(f, engine="h5netcdf").load(), ref)
        ds = hd.open_dataset(f"hdfs://{netloc}{root}/climate.nc", client=client, storage_options=options)
        xr.testing.assert_identical(client.compute(ds, sync=True).drop_attrs(deep=False), ref.drop_attrs(deep=False))
        report = hd.array_report(ds.attrs["hpcbridge_job"], client)
        assert report.tasks >= 2 and set(report.bytes_by_host) <= set(dask_testbed.hosts)
    finally:
        dask_testbed.fs().rm(root, recursive=True)


def test_variable_named_as_another_dimension_and_dataset_encoding(tmp_path):
    """A variable with the name of a dimension it does not use is stored by NetCDF-4 as
    `_nc4_non_coord_<name>` (the dataset `<name>` is the dimension's scale): its values are
    those h5netcdf reads, not the scale's; the dataset's encoding names the unlimited dimensions
    as xarray's does, and every encoding's source is the URL (as xarray's is the path)."""
    path = tmp_path / "noncoord.nc"
    with h5netcdf.File(path, "w") as f:
        f.dimensions = {"x": 4, "lat": 5, "time": None}
        f.create_variable("x", ("lat",), "i4", data=np.arange(5) * 100)
        f.create_variable("v", ("x",), "f8", data=np.arange(4.0))
        f.resize_dimension("time", 3)
        f.create_variable("time", ("time",), "f8", data=[1.0, 2.0, 3.0])
        f.create_group("g").create_variable("x", ("lat",), "i2", data=np.arange(5) - 2)
    with h5py.File(path, "r") as f:
        assert "_nc4_non_coord_x" in f and f["x"].shape == (4,)
    for group in (None, "g"):
        ds = hd.open_dataset(f"file://{path}", group=group)
        ref = expected(path, group)
        assert ds.x.dtype == ref.x.dtype
        xr.testing.assert_identical(ds.drop_attrs(deep=False).load(), ref.drop_attrs(deep=False))
        assert ds.encoding["unlimited_dims"] == ref.encoding["unlimited_dims"]
        assert ds.encoding["source"] == f"file://{path}" and ds.x.encoding["source"] == f"file://{path}"


def test_h5netcdf_engine_options_pass_through(tmp_path):
    """decode_vlen_strings= and invalid_netcdf= are the h5netcdf engine's (they were given to
    xarray.decode_cf, a TypeError)."""
    path = tmp_path / "vlen.nc"
    with h5netcdf.File(path, "w") as f:
        f.dimensions = {"n": 3}
        f.create_variable("s", ("n",), h5py.string_dtype(), data=np.array(["a", "bb", "ccc"], dtype=object))
        f.create_variable("v", ("n",), "f4", data=[1, 2, 3])
    for options in ({"decode_vlen_strings": False}, {"decode_vlen_strings": True}, {"invalid_netcdf": True}):
        ds = hd.open_dataset(f"file://{path}", **options).load()
        xr.testing.assert_identical(ds.drop_attrs(deep=False), expected(path, **options).drop_attrs(deep=False))


@pytest.mark.parametrize("chunks", [{"time": (2, 3)}, {"time": 4}, 4, -1, "auto", {}, {"x": 3}])
def test_chunks_of_a_variable_shorter_than_its_dimension(tmp_path, chunks):
    """A variable written shorter than its unlimited dimension takes the chunks asked for as
    xarray gives them, chunks of the padded shape (they were applied to the stored shape, then
    padding added blocks; explicit sizes of the dimension were a ValueError)."""
    import h5netcdf.legacyapi as legacy

    path = tmp_path / "short.nc"
    with legacy.Dataset(path, "w") as f:
        f.createDimension("time", None)
        f.createDimension("x", 3)
        time = f.createVariable("time", "f8", ("time",))
        v = f.createVariable("v", "f4", ("time", "x"), fill_value=-9.0, chunksizes=(1, 3))
        time[0:5], v[0:2, :] = np.arange(5.0), 1.0  # only what is written grows
    with h5py.File(path, "r") as f:
        assert f["v"].shape == (2, 3)
    ds = hd.open_dataset(f"file://{path}", chunks=chunks)
    ref = xr.open_dataset(path, engine="h5netcdf", chunks=chunks)
    assert ds.v.chunks == ref.v.chunks
    xr.testing.assert_identical(ds.drop_attrs(deep=False).load(), ref.drop_attrs(deep=False).load())
