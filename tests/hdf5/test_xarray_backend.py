"""The xarray engine "hpcbridge" (hpcbridge/dask/xarray_backend.py): xarray.open_dataset on hpcbridge
URLs, against xarray's own h5netcdf engine and h5py on the original local file."""

import io
import os
import pickle
import textwrap
import uuid
from importlib.metadata import entry_points

import numpy as np
import pytest

h5py = pytest.importorskip("h5py", reason="HDF5 arrays need h5py: pip install 'hpcbridge[hdf5]'")
xr = pytest.importorskip("xarray", reason="NetCDF-4 datasets need xarray: pip install 'hpcbridge[hdf5]'")
h5netcdf = pytest.importorskip("h5netcdf", reason="NetCDF-4 datasets need h5netcdf: pip install 'hpcbridge[hdf5]'")
pytest.importorskip("dask.array")

import hpcbridge  # noqa: E402
from hpcbridge.dask.xarray_backend import HpcbridgeBackendEntrypoint, claims  # noqa: E402
from hpcbridge.fs.transfer import copy_file  # noqa: E402
from hpcbridge.hdf5 import HDF5Error, NotHDF5Error  # noqa: E402
from xarray.backends import plugins  # noqa: E402

ENGINE = HpcbridgeBackendEntrypoint


@pytest.fixture(scope="module")
def netcdf_h5(netcdf, tmp_path_factory):
    """The NetCDF-4 file of the ``netcdf`` fixture named ``.h5`` (a name xarray's netCDF engines
    do not claim)."""
    path = tmp_path_factory.mktemp("h5") / "climate.h5"
    with open(netcdf, "rb") as f:
        path.write_bytes(f.read())
    return str(path)


def expected(path, group=None, **kw):
    return xr.open_dataset(path, engine="h5netcdf", group=group, **kw).load()


@pytest.mark.parametrize("form", ["file://{}", "hpcbridge+file://{}", "{}"])
def test_values_equal_h5netcdf_on_the_local_file(netcdf, form):
    url = form.format(netcdf)
    with xr.open_dataset(url, engine=ENGINE) as ds:
        assert ds.encoding["source"] == url and ds.tas.encoding["source"] == url  # not the file object
        xr.testing.assert_identical(ds.load(), expected(netcdf))
    with xr.open_dataset(url, engine=ENGINE, group="ocean") as ds:
        xr.testing.assert_identical(ds.load(), expected(netcdf, "ocean"))
    with xr.open_dataset(url, engine=ENGINE, mask_and_scale=False, decode_times=False) as raw, \
            h5py.File(netcdf, "r") as f:
        assert raw.tas.dtype == np.int16
        np.testing.assert_array_equal(raw.tas.values, f["tas"][...])
        np.testing.assert_array_equal(raw.pr.values, f["pr"][...])
        np.testing.assert_array_equal(raw.time.values, f["time"][...])


def test_datatree_and_groups(netcdf, tmp_path):
    url = f"plfs+file://{tmp_path}/tree.nc"
    fs, target = hpcbridge.url_to_fs(url)
    copy_file(hpcbridge.connect("file://"), netcdf, fs, target)
    with xr.open_datatree(url, engine=ENGINE) as tree, xr.open_datatree(netcdf, engine="h5netcdf") as ref:
        assert set(tree.groups) == {"/", "/ocean"}
        xr.testing.assert_identical(tree.load(), ref.load())
    groups = xr.open_groups(url, engine=ENGINE, group="ocean")
    try:
        assert list(groups) == ["."]
        xr.testing.assert_identical(groups["."].load(), expected(netcdf, "ocean"))
    finally:
        for ds in groups.values():
            ds.close()


def test_chunks_as_xarray_does(netcdf):
    ref = expected(netcdf)
    with xr.open_dataset(f"hpcbridge+file://{netcdf}", engine=ENGINE, chunks={"time": 2}) as ds, \
            xr.open_dataset(netcdf, engine="h5netcdf", chunks={"time": 2}) as local:
        assert ds.tas.chunks == local.tas.chunks and ds.tas.chunks[0] == (2, 2, 2)
        np.testing.assert_allclose(float(ds.tas.mean()), float(ref.tas.mean()), rtol=1e-12)
        xr.testing.assert_identical(ds.load(), ref)
    with xr.open_dataset(f"file://{netcdf}", engine=ENGINE, chunks={}) as ds:  # the stored chunks
        assert ds.tas.chunks == ((1,) * 6, (15, 15, 15), (45, 45))


def test_plfs_container(netcdf, tmp_path):
    url = f"plfs+file://{tmp_path}/c.nc"
    fs, target = hpcbridge.url_to_fs(url)
    copy_file(hpcbridge.connect("file://"), netcdf, fs, target)
    with xr.open_dataset(url, engine=ENGINE, chunks={"lat": 15}) as ds:
        assert ds.tas.chunks[1] == (15, 15, 15)
        xr.testing.assert_identical(ds.load(), expected(netcdf))
    with xr.open_dataset(url, engine=ENGINE, group="/ocean") as ds:
        xr.testing.assert_identical(ds.load(), expected(netcdf, "ocean"))


def test_open_mfdataset(netcdf, tmp_path, monkeypatch):
    """xarray makes every string of open_mfdataset's list an absolute path unless it looks remote:
    the engine gets `$PWD/plfs+file:/...` and recovers the URL (restore_url)."""
    parts = []
    for i in range(3):
        part = tmp_path / f"part{i}.nc"
        expected(netcdf).isel(time=slice(2 * i, 2 * i + 2)).to_netcdf(part, engine="h5netcdf")
        parts.append(str(part))
    fs, root = hpcbridge.url_to_fs(f"plfs+file://{tmp_path}/plfs")
    fs.mkdir(root)
    for i, part in enumerate(parts):
        copy_file(hpcbridge.connect("file://"), part, fs, f"{root}/part{i}.nc")
    monkeypatch.chdir(tmp_path)
    with xr.open_mfdataset(parts, engine="h5netcdf") as local:
        ref_chunks, ref = local.tas.chunks, local.load()
    for urls in ([f"hpcbridge+file://{p}" for p in parts], [f"plfs+file://{root}/part{i}.nc" for i in range(3)],
                 [f"file://{p}" for p in parts]):
        with xr.open_mfdataset(urls, engine=ENGINE) as ds:
            assert ds.tas.chunks == ref_chunks and sum(ds.tas.chunks[0]) == 6
            xr.testing.assert_identical(ds.load(), ref)
    from hpcbridge.dask.xarray_backend import restore_url

    for url in ("plfs+hdfs://nn:9820/a/b.nc", "hpcbridge+hdfs://nn:9820/x", "hpcbridge+plfs+file:///x/y",
                "plfs+file:///a,/b/c"):
        assert restore_url(os.path.abspath(url)) == url
    assert restore_url("/elsewhere/plfs+file:/x") == "/elsewhere/plfs+file:/x"  # not under $PWD: a path
    assert restore_url(str(tmp_path / "part0.nc")) == str(tmp_path / "part0.nc")


def test_pickled_dataset_reopens_its_file_and_close_closes_it(netcdf):
    ref = expected(netcdf)
    ds = xr.open_dataset(f"hpcbridge+file://{netcdf}", engine=ENGINE, chunks={"time": 4})
    copy = pickle.loads(pickle.dumps(ds))  # as dask.distributed ships it to a worker
    try:
        xr.testing.assert_identical(copy.load(), ref)
        closer = ds._close
        ds.close()
        assert closer._file.closed
        with pytest.raises(RuntimeError):  # xarray refuses reads of a closed file
            ds.tas.values
    finally:
        copy.close()


def test_guess_engine_claims_hpcbridge_and_plfs_schemes(netcdf, netcdf_h5, tmp_path, monkeypatch):
    """Without engine=: the entry point of a temporary distribution (as `pip install` writes it)
    makes xarray pick the engine by scheme."""
    for url in ("hpcbridge+hdfs://nn:9820/a.h5", "HPCBRIDGE+file:///a", "plfs+hdfs://nn:9820/x/chk",
                "plfs+file:///a.nc", "hpcbridge+plfs+hdfs://nn:1/x"):
        assert claims(url) and claims(os.path.abspath(url)), url  # also as xarray's open_mfdataset passes it
    for other in ("hdfs://nn:9820/a.h5", "/tmp/a.h5", "file:///a.nc", "s3://b/a.nc", "plfs+file:/a",
                  io.BytesIO(b"x"), b"hpcbridge+file:///a"):
        assert not claims(other), other
    dist = tmp_path / "hpcbridge_engine_test-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hpcbridge-engine-test\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""\
        [xarray.backends]
        hpcbridge = hpcbridge.dask.xarray_backend:HpcbridgeBackendEntrypoint
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins.refresh_engines()
    try:
        assert isinstance(plugins.list_engines()["hpcbridge"], HpcbridgeBackendEntrypoint)
        h5 = netcdf_h5
        with xr.open_dataset(f"hpcbridge+file://{h5}") as ds:
            xr.testing.assert_identical(ds.load(), expected(netcdf))
        fs, target = hpcbridge.url_to_fs(f"plfs+file://{tmp_path}/chk")
        copy_file(hpcbridge.connect("file://"), netcdf, fs, target)
        with xr.open_dataset(f"plfs+file://{tmp_path}/chk", group="ocean") as ds:
            xr.testing.assert_identical(ds.load(), expected(netcdf, "ocean"))
        with xr.open_dataset(f"file://{netcdf}", engine="hpcbridge") as ds:
            xr.testing.assert_identical(ds.load(), expected(netcdf))
        # The limitation docs/arrays.md states: a name ending in .nc/.nc4/.cdf is claimed first by
        # xarray's own h5netcdf engine (by extension; it is ordered before every installed engine).
        assert plugins.guess_engine(f"hpcbridge+file://{netcdf}") == "h5netcdf"
        assert plugins.guess_engine(f"hpcbridge+file://{h5}") == "hpcbridge"
    finally:
        monkeypatch.undo()
        plugins.refresh_engines()


def test_installed_entry_point():
    """Needs the package installed with its current metadata (`pip install -e .`)."""
    ours = [ep for ep in entry_points(group="xarray.backends") if ep.name == "hpcbridge"]
    assert [ep.value for ep in ours] == ["hpcbridge.dask.xarray_backend:HpcbridgeBackendEntrypoint"]
    plugins.refresh_engines()
    assert isinstance(xr.backends.list_engines()["hpcbridge"], HpcbridgeBackendEntrypoint)


def test_clear_errors(netcdf, tmp_path):
    for url in (f"file://{tmp_path}/nope.nc", f"hpcbridge+file://{tmp_path}/nope.nc",
                f"plfs+file://{tmp_path}/nope.nc"):
        with pytest.raises(FileNotFoundError) as info:
            xr.open_dataset(url, engine=ENGINE)
        assert url in str(info.value)
    classic = tmp_path / "classic.nc"
    classic.write_bytes(b"CDF\x01" + b"\0" * 2000)  # NetCDF-3 classic: not HDF5
    with pytest.raises(NotHDF5Error, match=f"file://{classic} is not an HDF5 file"):
        xr.open_dataset(f"file://{classic}", engine=ENGINE)
    assert issubclass(NotHDF5Error, ValueError)
    text = tmp_path / "notes.h5"
    text.write_text("just text\n" * 100)
    with pytest.raises(ValueError, match=f"hpcbridge\\+file://{text} is not an HDF5 file"):
        xr.open_dataset(f"hpcbridge+file://{text}", engine=ENGINE)
    cut = tmp_path / "cut.nc"  # an HDF5 signature, then the file ends
    with open(netcdf, "rb") as f:
        cut.write_bytes(f.read(3000))
    with pytest.raises(HDF5Error, match=f"file://{cut} cannot be opened as NetCDF-4 / HDF5"):
        xr.open_dataset(f"file://{cut}", engine=ENGINE)
    with pytest.raises(OSError, match="has no group 'deep'"):
        xr.open_dataset(f"file://{netcdf}", engine=ENGINE, group="deep")
    with pytest.raises(TypeError, match="opens URLs"):
        xr.open_dataset(io.BytesIO(b"\x89HDF\r\n\x1a\n"), engine=ENGINE)


@pytest.mark.hdfs
def test_hdfs_and_plfs_on_hdfs(hdfs_cluster, hdfs_options, hdfs_root, netcdf):
    """Both HDFS drivers: hdfs://, its fsspec spelling hpcbridge+hdfs://, and a PLFS container on
    HDFS, all equal to xarray on the local file."""
    netloc = f"127.0.0.1:{hdfs_cluster.info.rpc_port}"
    ref, ocean = expected(netcdf), expected(netcdf, "ocean")
    for url in (f"hdfs://{netloc}{hdfs_root}/climate.nc", f"plfs+hdfs://{netloc}{hdfs_root}/plfs.nc"):
        fs, target = hpcbridge.url_to_fs(url, **hdfs_options)
        copy_file(hpcbridge.connect("file://"), netcdf, fs, target)
    for url in (f"hdfs://{netloc}{hdfs_root}/climate.nc", f"hpcbridge+hdfs://{netloc}{hdfs_root}/climate.nc",
                f"plfs+hdfs://{netloc}{hdfs_root}/plfs.nc"):
        with xr.open_dataset(url, engine=ENGINE, storage_options=hdfs_options, chunks={"time": 2}) as ds:
            assert ds.tas.chunks[0] == (2, 2, 2)
            xr.testing.assert_identical(ds.load(), ref)
        with xr.open_dataset(url, engine=ENGINE, storage_options=hdfs_options, group="ocean") as ds:
            xr.testing.assert_identical(ds.load(), ocean)
    missing = f"hpcbridge+hdfs://{netloc}{hdfs_root}/nope.nc"
    with pytest.raises(FileNotFoundError, match=missing.replace("+", "\\+")):
        xr.open_dataset(missing, engine=ENGINE, storage_options=hdfs_options)


@pytest.mark.hdfs
def test_chunks_compute_on_distributed_workers(dask_testbed, netcdf):
    """chunks= arrays computed by the testbed's worker processes, which open the file again."""
    client = dask_testbed.client
    netloc = dask_testbed.url.split("://", 1)[1]
    root = f"/tests/xrb-{uuid.uuid4().hex[:8]}"
    url = f"hpcbridge+hdfs://{netloc}{root}/climate.nc"
    fs, path = hpcbridge.url_to_fs(url[len("hpcbridge+"):], **dask_testbed.storage_options)
    fs.mkdir(root, parents=True)
    try:
        copy_file(hpcbridge.connect("file://"), netcdf, fs, path)
        with xr.open_dataset(url, engine=ENGINE, storage_options=dask_testbed.storage_options,
                             chunks={"time": 2}) as ds:
            total = client.compute(ds.tas.sum(), sync=True)
            np.testing.assert_allclose(float(total), float(expected(netcdf).tas.sum()), rtol=1e-12)
    finally:
        dask_testbed.fs().rm(root, recursive=True)


def test_netcdf_files_h5netcdf_opens_open_alike(tmp_path):
    """Oracle: xarray's h5netcdf engine on the local path. A variable written shorter than its
    unlimited dimension is padded with its fill value (open_dataset failed); a file with a user
    block opens (both entry points refused it); drop_variables is not read (an unreadable
    dropped variable failed open_dataset); a CF decoding error is not reported as a file that
    cannot be opened."""
    import h5netcdf
    import h5netcdf.legacyapi as legacy
    import h5py

    import hpcbridge.dask as hd

    def both(path, **kw):
        ours = hd.open_dataset(f"file://{path}", **kw)
        assert ours.attrs.pop("hpcbridge_job")
        return ours.load(), xr.open_dataset(f"file://{path}", engine="hpcbridge", **kw).load()

    padded = tmp_path / "padded.nc"
    with legacy.Dataset(padded, "w") as f:
        f.createDimension("time", None)
        f.createDimension("x", 3)
        v = f.createVariable("v", "f4", ("time",), fill_value=-1.0)
        w = f.createVariable("w", "f4", ("time",), fill_value=-2.0)
        u = f.createVariable("u", "i2", ("time", "x"))
        v[0:5], w[0:2], u[0:1, :] = np.arange(5, dtype="f4"), np.arange(2, dtype="f4"), 7  # only what is written grows
    with h5py.File(padded) as f:
        assert (f["v"].shape, f["w"].shape, f["u"].shape) == ((5,), (2,), (1, 3))
    for kw in ({}, {"mask_and_scale": False}):
        stock = xr.open_dataset(padded, engine="h5netcdf", **kw).load()
        for ours in both(padded, **kw):
            xr.testing.assert_identical(ours, stock)

    userblock = tmp_path / "userblock.nc"
    with h5py.File(userblock, "w", userblock_size=512) as f:
        f.create_dataset("v", data=np.arange(4.0))
    stock = xr.open_dataset(userblock, engine="h5netcdf", phony_dims="sort").load()
    for ours in both(userblock, phony_dims="sort"):
        xr.testing.assert_identical(ours, stock)
    pickle.loads(pickle.dumps(xr.open_dataset(f"file://{userblock}", engine="hpcbridge", phony_dims="sort")))

    dropped = tmp_path / "drop.nc"
    with h5netcdf.File(dropped, "w") as f:
        f.dimensions["x"] = 4
        f.create_variable("good", ("x",), "f4", data=np.arange(4, dtype="f4"))
        f.create_variable("lzf", ("x",), "f4", data=np.arange(4, dtype="f4"), compression="lzf")
    stock = xr.open_dataset(dropped, engine="h5netcdf", drop_variables=["lzf"]).load()
    for drop in (["lzf"], "lzf"):
        for ours in both(dropped, drop_variables=drop):
            xr.testing.assert_identical(ours, stock)

    calendar = tmp_path / "calendar.nc"
    with h5netcdf.File(calendar, "w") as f:
        f.dimensions["time"] = 2
        time = f.create_variable("time", ("time",), "f8", data=np.array([0.0, 59.0]))
        time.attrs.update(units="days since 2000-01-01", calendar="noleap")
    with pytest.raises(ValueError) as stock_error:
        xr.open_dataset(calendar, engine="h5netcdf", use_cftime=False)
    with pytest.raises(ValueError) as ours:
        xr.open_dataset(f"file://{calendar}", engine="hpcbridge", use_cftime=False)
    assert not isinstance(ours.value, HDF5Error) and str(ours.value) == str(stock_error.value)


@pytest.mark.parametrize("chunks", [{}, {"time": 3}, {"foo": 3}, {"time": "auto"}, {"time": None, "lat": 2}])
def test_dict_chunks_leave_unnamed_dimensions_at_the_hdf5_chunks_as_xarray(tmp_path, chunks):
    """Oracle: xr.open_dataset with the h5netcdf engine. Unnamed dimensions got "auto" (whole
    axes here), and {} the default blocks, where xarray gives the engine's preferred chunks."""
    import h5netcdf

    import hpcbridge.dask as hd

    path = tmp_path / "c.nc"
    with h5netcdf.File(path, "w") as f:
        f.dimensions = {"time": 12, "lat": 9, "lon": 10}
        f.create_variable("tas", ("time", "lat", "lon"), "f4", chunks=(5, 4, 10))[:] = \
            np.arange(1080, dtype="f4").reshape(12, 9, 10)
        f.create_variable("flat", ("lat", "lon"), "f4")[:] = np.ones((9, 10), "f4")  # contiguous
    stock = xr.open_dataset(path, engine="h5netcdf", chunks=chunks)
    ours = hd.open_dataset(f"file://{path}", chunks=chunks)
    for name in ("tas", "flat"):
        assert ours[name].chunks == stock[name].chunks, name
        xr.testing.assert_identical(ours[name].load(), stock[name].load())
