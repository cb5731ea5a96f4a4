"""hpcbridge.dask.read_zarr: values against zarr reading the same store from a local directory,
the hosts of each block's chunk objects against WebHDFS's block locations on the testbed, and
the locality the read tasks measured."""

import asyncio
import json
import os
import socket
import urllib.request
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

zarr = pytest.importorskip("zarr", reason="Zarr arrays need zarr: pip install 'hpcbridge[zarr]'")
pytest.importorskip("dask.array")

import hpcbridge  # noqa: E402
import hpcbridge.dask as hd  # noqa: E402
from hpcbridge.dask.zarr_store import HpcbridgeZarrStore  # noqa: E402
from hpcbridge.fs.transfer import copy_file  # noqa: E402


def stage(src: str, fs, root: str) -> None:
    """Copy the local directory tree ``src`` to ``root`` of ``fs``, file by file."""
    local = hpcbridge.connect("file://")
    for d, _, files in os.walk(src):
        rel = os.path.relpath(d, src)
        target = root if rel == "." else f"{root}/{rel}"
        fs.mkdir(target, parents=True, exist_ok=True)
        for name in files:
            copy_file(local, os.path.join(d, name), fs, f"{target}/{name}")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Local Zarr stores: format 3 (zstd), format 2 (default compressor), a group holding a sharded
    int32 array with chunks never written (fill value) and a float32 one."""
    base = tmp_path_factory.mktemp("zarr")
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 37))
    zarr.create_array(base / "v3.zarr", shape=x.shape, chunks=(16, 10), dtype="f8")[:] = x
    zarr.create_array(base / "v2.zarr", shape=x.shape, chunks=(16, 10), dtype="f8", zarr_format=2)[:] = x
    g = zarr.open_group(base / "g.zarr", mode="w")
    s = g.create_array("sub/s", shape=(20, 30), chunks=(2, 3), shards=(10, 15), dtype="i4", fill_value=-7)
    s[:10] = np.arange(300, dtype="i4").reshape(10, 30)
    g.create_array("t", shape=(9,), chunks=(4,), dtype="f4")[:] = np.linspace(0, 1, 9, dtype="f4")
    return base


def local(stores, name, component=None):
    path = stores / name / component if component else stores / name
    return zarr.open_array(path, mode="r")[...]


@pytest.mark.parametrize("name,component", [("v3.zarr", None), ("v2.zarr", None), ("g.zarr", "sub/s"),
                                            ("g.zarr", "t")])
def test_values_equal_zarr_on_the_local_directory(stores, name, component):
    expected = local(stores, name, component)
    arr = hd.read_zarr(f"file://{stores / name}", component)
    assert arr.dtype == expected.dtype and arr.shape == expected.shape
    np.testing.assert_array_equal(arr.compute(), expected)
    np.testing.assert_allclose(arr.sum().compute(), expected.sum(dtype=np.float64), rtol=1e-12)
    here = socket.gethostname()
    assert {h for hosts in arr.hosts.values() for h, _ in hosts} <= {here}
    report = hd.array_report(arr)  # two computations: every block read twice
    assert report.tasks == 2 * arr.npartitions
    objects = [os.path.join(d, f) for d, _, fs in os.walk(stores / name / (component or ""))
               for f in fs if f not in ("zarr.json", ".zarray", ".zattrs", ".zgroup")]
    assert report.bytes_local + report.bytes_remote == 2 * sum(os.path.getsize(p) for p in objects)


def test_blocks_follow_chunk_objects(stores):
    assert hd.read_zarr(f"file://{stores / 'v3.zarr'}").chunks == ((16, 16, 16, 2), (10, 10, 10, 7))
    sharded = hd.read_zarr(f"file://{stores / 'g.zarr'}", "sub/s")  # one block per shard, not per inner chunk
    assert sharded.chunks == ((10, 10), (15, 15))
    assert sharded.hosts[2] == () and sharded.hosts[3] == ()  # shards never written: no bytes stored
    assert sharded.hosts[0][0][1] == os.path.getsize(stores / "g.zarr/sub/s/c/0/0")
    np.testing.assert_array_equal(sharded[10:].compute(), np.full((10, 30), -7, "i4"))


def test_plfs_container_tree(stores, tmp_path):
    fs, root = hpcbridge.url_to_fs(f"plfs+file://{tmp_path}/g.zarr")
    stage(str(stores / "g.zarr"), fs, root)
    for component in ("sub/s", "t"):
        arr = hd.read_zarr(f"plfs+file://{tmp_path}/g.zarr", component)
        np.testing.assert_array_equal(arr.compute(), local(stores, "g.zarr", component))


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_shapes_chunks_and_slices(tmp_path_factory, data):
    shape = tuple(data.draw(st.lists(st.integers(1, 30), min_size=1, max_size=3), label="shape"))
    stored = tuple(data.draw(st.integers(1, n), label="chunk") for n in shape)
    fmt = data.draw(st.sampled_from([2, 3]), label="format")
    path = tmp_path_factory.mktemp("zh") / "a.zarr"
    values = np.arange(np.prod(shape), dtype="i8").reshape(shape) * 3 - 11
    zarr.create_array(path, shape=shape, chunks=stored, dtype="i8", zarr_format=fmt)[...] = values
    chunks = data.draw(st.one_of(st.none(), st.tuples(*[st.integers(1, n) for n in shape])), label="dask chunks")
    arr = hd.read_zarr(f"file://{path}", chunks=chunks)
    index = tuple(slice(data.draw(st.integers(0, n - 1)), None, data.draw(st.integers(1, 4))) for n in shape)
    expected = zarr.open_array(path, mode="r")[...]
    np.testing.assert_array_equal(arr[index].compute(), expected[index])
    assert int(arr.sum().compute()) == int(expected.sum())


def test_clear_errors(stores, tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.zarr"):
        hd.read_zarr(f"file://{tmp_path}/nope.zarr")
    with pytest.raises(FileNotFoundError, match="component 'missing'"):
        hd.read_zarr(f"file://{stores / 'g.zarr'}", "missing")
    with pytest.raises(ValueError, match="is a Zarr group, not an array"):
        hd.read_zarr(f"file://{stores / 'g.zarr'}")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("not zarr")
    with pytest.raises(FileNotFoundError, match="No Zarr array"):
        hd.read_zarr(f"file://{tmp_path}/plain")
    with pytest.raises(ValueError, match="bad chunks"):
        hd.read_zarr(f"file://{stores / 'v3.zarr'}", chunks=(1, 2, 3))


def test_store_lists_and_refuses_writes(stores):
    fs, root = hpcbridge.url_to_fs(f"file://{stores / 'g.zarr'}")
    store = HpcbridgeZarrStore(fs, root)
    ours = zarr.open_group(store=store, mode="r")
    theirs = zarr.open_group(stores / "g.zarr", mode="r")
    assert sorted(ours.keys()) == sorted(theirs.keys()) and sorted(ours["sub"].keys()) == ["s"]
    assert dict(ours["t"].attrs) == dict(theirs["t"].attrs)
    with pytest.raises(ValueError, match="read-only"):
        zarr.open_group(store=store, mode="a").create_array("x", shape=(1,), dtype="i1")


def test_xarray_reads_the_store(tmp_path):
    """xarray's own zarr engine over the store, from a PLFS container tree, equals xarray on the
    local directory."""
    xr = pytest.importorskip("xarray")
    local_path = tmp_path / "x.zarr"
    xr.Dataset({"a": (("t", "x"), np.arange(20.0).reshape(4, 5))}, coords={"t": np.arange(4)},
               attrs={"title": "t"}).to_zarr(local_path, mode="w", consolidated=False)
    fs, root = hpcbridge.url_to_fs(f"plfs+file://{tmp_path}/plfs.zarr")
    stage(str(local_path), fs, root)
    with xr.open_zarr(HpcbridgeZarrStore(fs, root), consolidated=False) as ds, \
            xr.open_zarr(local_path, consolidated=False) as ref:
        xr.testing.assert_identical(ds.load(), ref.load())


def test_store_listing_matches_keys_as_strings(tmp_path):
    zarr.create_array(tmp_path / "a.zarr", shape=(12, 2), chunks=(1, 1), dtype="u1")[...] = 1
    fs, root = hpcbridge.url_to_fs(f"file://{tmp_path / 'a.zarr'}")
    store = HpcbridgeZarrStore(fs, root)
    keys = sorted(os.path.relpath(os.path.join(d, f), tmp_path / "a.zarr")
                  for d, _, files in os.walk(tmp_path / "a.zarr") for f in files)

    async def listing():
        return ([k async for k in store.list()], [k async for k in store.list_prefix("c/1")],
                [k async for k in store.list_prefix("c/1/")], [k async for k in store.list_dir("c")],
                [k async for k in store.list_dir("zarr.json")])

    every, c1, c1_dir, top, of_file = asyncio.run(listing())
    assert every == keys
    assert c1 == [k for k in keys if k.startswith("c/1")] and "c/10/0" in c1
    assert c1_dir == ["c/1/0", "c/1/1"]
    assert top == sorted(str(i) for i in range(12)) and of_file == []


def _webhdfs_hosts(http_port: int, path: str) -> set[str]:
    """Hosts of a file's blocks as the NameNode's REST interface reports them (not hpcbridge)."""
    url = f"http://127.0.0.1:{http_port}/webhdfs/v1{path}?op=GETFILEBLOCKLOCATIONS&user.name=root"
    with urllib.request.urlopen(url, timeout=30) as response:
        blocks = json.load(response)["BlockLocations"]["BlockLocation"]
    return {host for b in blocks for host in b["hosts"]}


@pytest.mark.hdfs
def test_hosts_and_locality_on_hdfs(dask_testbed, stores, tmp_path):
    """24 chunk objects in HDFS (replication 1): each block's hosts are those WebHDFS reports for
    its chunk object, values equal zarr's on the local directory, and with locality the read tasks
    measured nearly all bytes local."""
    client = dask_testbed.client
    src = tmp_path / "h.zarr"
    values = np.random.default_rng(8).normal(size=(96, 64))
    zarr.create_array(src, shape=values.shape, chunks=(16, 16), dtype="f8", compressors=None)[...] = values
    netloc = dask_testbed.url.split("://", 1)[1]
    root = f"/tests/zarr-{uuid.uuid4().hex[:8]}"
    options = {**dask_testbed.storage_options, "replication": 1}
    fs, path = hpcbridge.url_to_fs(f"hdfs://{netloc}{root}/h.zarr", **options)
    try:
        stage(str(src), fs, path)
        url = f"hdfs://{netloc}{root}/h.zarr"
        arr = hd.read_zarr(url, client=client, storage_options=dask_testbed.storage_options)
        assert arr.npartitions == 24
        for i, blk in enumerate(np.ndindex(*arr.numblocks)):
            expected = _webhdfs_hosts(dask_testbed.cluster.info.http_port, f"{path}/c/{blk[0]}/{blk[1]}")
            assert {h for h, _ in arr.hosts[i]} == expected
            assert sum(n for _, n in arr.hosts[i]) == 16 * 16 * 8  # uncompressed chunk objects
        total, part = client.compute([arr.sum(), arr[3::5, 1::7]], sync=True)
        np.testing.assert_allclose(total, values.sum(), rtol=1e-12)
        np.testing.assert_array_equal(part, zarr.open_array(src, mode="r")[3::5, 1::7])
        report = hd.array_report(arr, client)
        assert report.tasks >= 24 and set(report.bytes_by_host) <= set(dask_testbed.hosts)
        assert report.local_fraction >= 0.8, report.format()
        off = hd.read_zarr(url, client=client, storage_options=dask_testbed.storage_options, locality=False)
        assert not off.placement
        np.testing.assert_allclose(client.compute(off.sum(), sync=True), values.sum(), rtol=1e-12)
        off_report = hd.array_report(off, client)
        print(f"zarr on HDFS, 24 chunk objects: local {report.local_fraction:.1%} with locality, "
              f"{off_report.local_fraction:.1%} without")
        assert off_report.local_fraction < report.local_fraction
    finally:
        dask_testbed.fs().rm(root, recursive=True)
