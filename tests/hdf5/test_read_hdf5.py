"""hpcbridge.hdf5 and hpcbridge.dask.read_hdf5 on local backends (file://, plfs+file://), with h5py
as the oracle: values, chunk indexes, filters, blocks that follow storage, and bad inputs."""

import dataclasses
import os
import time
import uuid

import numpy as np
import pytest

h5py = pytest.importorskip("h5py", reason="HDF5 arrays need h5py: pip install 'hpcbridge[hdf5]'")
pytest.importorskip("dask.array")

import dask.base  # noqa: E402
from dask.local import get_sync  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import hpcbridge  # noqa: E402
import hpcbridge.dask as hd  # noqa: E402
from hpcbridge.fs.transfer import copy_file  # noqa: E402
from hpcbridge.hdf5 import (ChecksumError, DatasetNotFoundError, NotHDF5Error, UnsupportedFilterError,  # noqa: E402
                            describe, fletcher32)
from hpcbridge.hdf5 import dataset as h5ds  # noqa: E402
from hpcbridge.plfs.writer import advance_sequence  # noqa: E402

RNG = np.random.default_rng(13)


def make_file(path):
    """Datasets of every layout and filter combination the reader supports."""
    data = {
        "contig": RNG.normal(size=(257, 33, 5)),
        "gz": RNG.normal(size=(300, 40)).astype(np.float32),
        "gzf": RNG.integers(-1000, 1000, size=(100, 50), dtype=np.int32),
        "fl": RNG.integers(0, 255, size=(77, 13), dtype=np.uint8),
        "be": RNG.normal(size=(64, 8)).astype(">f8"),
        "g/x": RNG.normal(size=(10, 20, 30)),
    }
    with h5py.File(path, "w") as f:
        f.create_dataset("contig", data=data["contig"])
        f.create_dataset("gz", data=data["gz"], chunks=(17, 9), compression="gzip", shuffle=True)
        f.create_dataset("gzf", data=data["gzf"], chunks=(10, 50), compression="gzip", compression_opts=9,
                         shuffle=True, fletcher32=True)
        f.create_dataset("fl", data=data["fl"], chunks=(8, 13), fletcher32=True)
        f.create_dataset("be", data=data["be"], dtype=">f8", chunks=(16, 8))
        f.create_dataset("g/x", data=data["g/x"], chunks=(3, 7, 30), compression="gzip")
        partial = f.create_dataset("partial", shape=(40, 40), chunks=(10, 10), dtype="i2", fillvalue=7)
        partial[5:15, 22:31] = 3
        f.create_dataset("scalar", data=2.5)
        f.create_dataset("compact", data=np.arange(6.0), dtype="f8")
        f.create_dataset("empty_contig", shape=(20, 3), dtype="f4", fillvalue=1.5)
        f.create_dataset("lzf", data=np.arange(100.0), chunks=(10,), compression="lzf")
    with h5py.File(path, "r") as f:
        data["partial"] = f["partial"][()]
        data["scalar"] = f["scalar"][()]
        data["compact"] = f["compact"][()]
        data["empty_contig"] = f["empty_contig"][()]
    return data


@pytest.fixture(scope="module")
def h5file(tmp_path_factory):
    path = tmp_path_factory.mktemp("h5") / "data.h5"
    return str(path), make_file(path)


@pytest.fixture(params=["file", "plfs+file"])
def url(request, h5file, tmp_path):
    path, _ = h5file
    if request.param == "file":
        return f"file://{path}"
    src = hpcbridge.connect("file://")
    dst, target = hpcbridge.url_to_fs(f"plfs+file://{tmp_path}/c.h5")
    copy_file(src, path, dst, target)
    return f"plfs+file://{tmp_path}/c.h5"


@pytest.mark.parametrize("name", ["contig", "gz", "gzf", "fl", "be", "g/x", "partial", "empty_contig"])
def test_values_sums_means_and_strided_slices(url, h5file, name):
    expected = h5file[1][name]
    arr = hd.read_hdf5(url, name)
    assert arr.shape == expected.shape and arr.dtype == expected.dtype.newbyteorder("=")
    np.testing.assert_array_equal(arr.compute(scheduler="threads"), expected)
    np.testing.assert_allclose(arr.sum().compute(), expected.sum(dtype=arr.dtype if arr.dtype.kind == "f" else None),
                               rtol=1e-6)
    np.testing.assert_allclose(arr.mean().compute(), expected.mean(), rtol=1e-9)
    sl = (slice(1, None, 3),) + (slice(None, None, 2),) * (expected.ndim - 1)
    np.testing.assert_array_equal(arr[sl].compute(), expected[sl])
    report = hd.array_report(arr)
    assert report.tasks >= arr.npartitions and report.local_fraction in (0.0, 1.0)


def test_scalar_and_compact(url, h5file):
    assert hd.read_hdf5(url, "scalar").compute() == h5file[1]["scalar"]
    np.testing.assert_array_equal(hd.read_hdf5(url, "compact").compute(), h5file[1]["compact"])


def test_explicit_chunks_not_aligned_to_storage(url, h5file):
    expected = h5file[1]["gz"]
    arr = hd.read_hdf5(url, "gz", chunks=(23, 11))
    assert arr.chunks[0][0] == 23 and arr.chunks[1][0] == 11
    np.testing.assert_array_equal(arr.compute(), expected)
    contig = hd.read_hdf5(url, "contig", chunks=(50, 7, 2))
    np.testing.assert_array_equal(contig[3:200:7, ::3, 1].compute(), h5file[1]["contig"][3:200:7, ::3, 1])


@pytest.mark.parametrize("chunks", ["1KiB", ("1KiB", -1), "128MiB", "auto", 5, (7, -1), ((30, 7), (11,))])
def test_user_chunks_are_dask_from_arrays(tmp_path, chunks):
    """Oracle: dask.array.from_array of the h5py dataset, and from_zarr: byte sizes other than
    partition_size were refused, "auto" ignored dask's array.chunk-size."""
    import dask
    import dask.array as da
    import zarr

    data = np.arange(37 * 11, dtype="f8").reshape(37, 11)
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f.create_dataset("x", data=data)
        f.create_dataset("k", data=data, chunks=(5, 4))
    zarr.create_array(tmp_path / "c.zarr", shape=data.shape, chunks=(5, 4), dtype="f8")[...] = data
    with dask.config.set({"array.chunk-size": "1KiB"}), h5py.File(tmp_path / "c.h5") as f:
        for name in ("x", "k"):
            ours = hd.read_hdf5(f"file://{tmp_path}/c.h5", name, chunks=chunks)
            assert ours.chunks == da.from_array(f[name], chunks=chunks).chunks, name
            np.testing.assert_array_equal(ours.compute(scheduler="sync"), data)
        ours = hd.read_zarr(f"file://{tmp_path}/c.zarr", chunks=chunks)
        assert ours.chunks == da.from_zarr(str(tmp_path / "c.zarr"), chunks=chunks).chunks


@pytest.mark.parametrize("chunks", [-2, (-3, 4), ((30, 8), (11,)), 0])
def test_chunks_that_are_not_blocks_of_the_array_are_refused(tmp_path, chunks):
    """read_zarr took chunks=-2 and returned an array of shape (-1, -1) holding (36, 10)."""
    import zarr

    data = np.arange(37 * 11, dtype="f8").reshape(37, 11)
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f.create_dataset("k", data=data, chunks=(5, 4))
    zarr.create_array(tmp_path / "c.zarr", shape=data.shape, chunks=(5, 4), dtype="f8")[...] = data
    with pytest.raises(ValueError, match=r"bad chunks .*c\.h5"):
        hd.read_hdf5(f"file://{tmp_path}/c.h5", "k", chunks=chunks)
    with pytest.raises(ValueError, match=r"bad chunks .*c\.zarr"):
        hd.read_zarr(f"file://{tmp_path}/c.zarr", chunks=chunks)


def test_default_blocks_follow_storage(tmp_path):
    """Contiguous: slabs cut at the (logical) storage blocks; chunked: whole chunks grouped."""
    path = tmp_path / "b.h5"
    data = np.arange(4000 * 256, dtype=np.float64).reshape(4000, 256)  # 8000 KiB, rows of 2 KiB
    with h5py.File(path, "w") as f:
        f.create_dataset("c", data=data)
        f.create_dataset("k", data=data, chunks=(100, 64))
    url = f"file://{path}"
    options = {"block_size": 1 << 20}
    c = hd.read_hdf5(url, "c", storage_options=options, partition_size=4 << 20)
    info, _ = describe(hpcbridge.connect("file://", **options), str(path), "c")
    cuts = np.cumsum(c.chunks[0])[:-1] * 2048 + info.address  # file offsets where slabs start
    boundaries = np.arange(1 << 20, info.address + data.nbytes, 1 << 20)
    assert len(c.chunks[0]) == 2 and max(c.chunks[0]) * 2048 <= 4 << 20  # 8000 KiB in <= 4 MiB groups
    assert all(np.min(np.abs(boundaries - x)) <= 1024 for x in cuts), (cuts, boundaries)
    assert c.chunks[1] == (256,)
    np.testing.assert_array_equal(c.compute(), data)
    k = hd.read_hdf5(url, "k", partition_size=1 << 20)
    assert all(n % 100 == 0 for n in k.chunks[0][:-1]) and k.chunks[1] == (256,)
    assert max(k.chunks[0]) * 256 * 8 <= 1 << 20
    np.testing.assert_array_equal(k.compute(), data)


def _mapped_file(block) -> str | None:
    """The file the kernel maps ``block``'s first byte from (/proc/self/maps), None if anonymous."""
    address = block.__array_interface__["data"][0]
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= address < hi:
                name = fields[5].strip() if len(fields) == 6 else ""
                return name if name.startswith("/") else None
    raise AssertionError(f"address {address:#x} is not mapped")


def test_contiguous_blocks_are_memory_maps_of_the_file(tmp_path):
    """On POSIX a block that is one run of the file is a copy-on-write map of it (zero-copy):
    same values as a read, writable, writes never reach the file; memory_map=False reads."""
    path = tmp_path / "m.h5"
    data = RNG.normal(size=(600, 300))
    with h5py.File(path, "w") as f:
        f.create_dataset("c", data=data)
        f.create_dataset("be", data=data[:100].astype(">f4"))
    url = f"file://{path}"
    mapped = hd.read_hdf5(url, "c", partition_size=256 << 10)
    copied = hd.read_hdf5(url, "c", partition_size=256 << 10, memory_map=False)
    assert mapped.numblocks[0] > 4 and mapped.name != copied.name
    for i in (0, mapped.numblocks[0] - 1):
        # The tasks' own results (compute() of a collection concatenates, a copy).
        block, again = (get_sync(a.__dask_graph__(), (a.name, i, 0)) for a in (mapped, copied))
        assert _mapped_file(block) == os.path.realpath(path) and _mapped_file(again) is None
        np.testing.assert_array_equal(block, again)
        block[:] = -1.0  # private to this array: the file and later reads keep the data
    np.testing.assert_array_equal(mapped.compute(), data)
    np.testing.assert_allclose(mapped.sum().compute(), data.sum(), rtol=1e-12)
    with h5py.File(path, "r") as f:
        np.testing.assert_array_equal(f["c"][()], data)
    # A block of several runs (cut along the second axis) is read, correctly.
    parts = hd.read_hdf5(url, "c", chunks=(600, 100))
    assert _mapped_file(get_sync(parts.__dask_graph__(), (parts.name, 0, 1))) is None
    np.testing.assert_array_equal(parts.compute(), data)
    # Big-endian data is mapped, then swapped to native order.
    be_array = hd.read_hdf5(url, "be")
    be = get_sync(be_array.__dask_graph__(), (be_array.name, 0, 0))
    assert be.dtype == np.dtype("f4") and be.dtype.isnative
    np.testing.assert_array_equal(be, data[:100].astype("f4"))


def test_blocks_fuse_with_their_consumer_where_nothing_is_placed(h5file):
    """Without a locality plan the read tasks are a blockwise layer: a sum's per-block step runs
    in the read's task (one task per block, not two); later slicing is not folded into reads."""
    path, data = h5file
    arr = hd.read_hdf5(f"file://{path}", "contig", chunks=(20, 33, 5))
    assert arr.placement == {} and arr.numblocks[0] == 13
    total = arr.sum()
    graph = dask.base.collections_to_expr([total], optimize_graph=True).__dask_graph__()
    assert not [k for k in graph if isinstance(k, tuple) and k[0] == arr.name], "the reads were not fused"
    np.testing.assert_allclose(total.compute(), data["contig"].sum(), rtol=1e-12)
    np.testing.assert_array_equal(arr[::7, 1::4].compute(), data["contig"][::7, 1::4])


def test_map_region_declines_what_it_cannot_map(h5file, tmp_path):
    """map_region maps only one aligned run inside the file; otherwise None (the caller reads)."""
    path, data = h5file
    fs = hpcbridge.connect("file://")
    info, _ = describe(fs, path, "contig")
    whole = [(0, n) for n in info.shape]
    with fs.open(path, "rb", buffering=0) as f:
        out, ranges = h5ds.map_region(f, info, whole)
        np.testing.assert_array_equal(out, data["contig"])
        assert ranges == [(info.address, data["contig"].nbytes)] and _mapped_file(out) == os.path.realpath(path)
        assert h5ds.map_region(f, info, [(0, 5), (0, 10), (0, 5)]) is None  # five runs
        assert h5ds.map_region(f, info, [(0, 0), (0, 33), (0, 5)]) is None  # empty
        assert h5ds.map_region(f, dataclasses.replace(info, address=info.address + 1), whole) is None  # unaligned
        past = dataclasses.replace(info, address=fs.info(path).size - 64)
        assert h5ds.map_region(f, past, whole) is None
        with pytest.raises(h5ds.HDF5FormatError, match="ends early"):
            h5ds.read_region(f, past, whole)  # the read path names the problem
    plfs, target = hpcbridge.url_to_fs(f"plfs+file://{tmp_path}/c.h5")
    copy_file(fs, path, plfs, target)
    with plfs.open(target, "rb", buffering=0) as f:  # no memory_map capability: declined
        assert not plfs.capabilities.memory_map and h5ds.map_region(f, info, whole) is None


def test_chunk_index_matches_hdf5(h5file):
    path, _ = h5file
    fs = hpcbridge.connect("file://")
    for name in ("gz", "gzf", "partial", "g/x"):
        info, index = describe(fs, path, name)
        with h5py.File(path, "r") as f:
            dsid = f[name].id
            n = dsid.get_num_chunks()
            assert len(index) == n
            for i in range(n):
                ref = dsid.get_chunk_info(i)
                assert tuple(index.coords[i]) == ref.chunk_offset
                assert (index.address[i], index.size[i], index.mask[i]) == (ref.byte_offset, ref.size,
                                                                            ref.filter_mask)


def test_index_of_100000_chunks_is_fast(tmp_path):
    path = tmp_path / "many.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("many", shape=(1000, 400), chunks=(1, 4), dtype="i2")
        d[...] = np.arange(400_000, dtype=np.int64).reshape(1000, 400) % 30000
    fs = hpcbridge.connect("file://")
    h5ds._CACHE.clear()
    started = time.perf_counter()
    info, index = describe(fs, str(path), "many")
    seconds = time.perf_counter() - started
    assert len(index) == 100_000 and seconds < 5.0, seconds
    with h5py.File(path, "r") as f:
        for coord in [(0, 0), (999, 396), (517, 212)]:
            ref = f["many"].id.get_chunk_info_by_coord(coord)
            i = int(np.flatnonzero((index.coords == coord).all(axis=1))[0])
            assert index.address[i] == ref.byte_offset and index.size[i] == ref.size
    started = time.perf_counter()
    describe(fs, str(path), "many")  # cached per file version
    assert time.perf_counter() - started < 0.05
    arr = hd.read_hdf5(f"file://{path}", "many")
    assert arr.npartitions <= 4
    assert int(arr.sum().compute()) == int((np.arange(400_000) % 30000).sum())


def test_bad_inputs_name_the_url(h5file, tmp_path):
    path, _ = h5file
    url = f"file://{path}"
    with pytest.raises(DatasetNotFoundError, match=f"no dataset 'nope' in {url}.*contig"):
        hd.read_hdf5(url, "nope")
    with pytest.raises(DatasetNotFoundError, match="is a group, not a dataset"):
        hd.read_hdf5(url, "g")
    text = tmp_path / "x.txt"
    text.write_bytes(b"hello world\n" * 100)
    with pytest.raises(NotHDF5Error, match=f"file://{text} is not an HDF5 file"):
        hd.read_hdf5(f"file://{text}", "x")
    with pytest.raises(UnsupportedFilterError, match=f"{url} uses the lzf \\(id 32000\\) filter"):
        hd.read_hdf5(url, "lzf")
    with pytest.raises(FileNotFoundError, match="missing.h5"):
        hd.read_hdf5(f"file://{tmp_path}/missing.h5", "x")
    with pytest.raises(ValueError, match=f"bad chunks .* in {url}"):
        hd.read_hdf5(url, "gz", chunks=(1, 2, 3))
    with pytest.raises(ValueError, match="partition_size"):
        hd.read_hdf5(url, "gz", partition_size=0)


def test_corrupt_chunk_fails_its_checksum(tmp_path):
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("d", data=np.arange(1000, dtype="i4"), chunks=(100,), fletcher32=True)
    info, index = describe(hpcbridge.connect("file://"), str(path), "d")
    with open(path, "r+b") as f:
        f.seek(int(index.address[3]) + 10)
        byte = f.read(1)
        f.seek(int(index.address[3]) + 10)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ChecksumError, match=f"Fletcher-32 .* in file://{path}"):
        hd.read_hdf5(f"file://{path}", "d").compute()


def test_fletcher32_edge_cases():
    assert fletcher32(b"") == 0
    # Reference values from HDF5's H5_checksum_fletcher32 loop, written out in Python.
    for data in [b"\x01", b"ab", b"abcde", bytes(range(256)) * 40, b"\xff" * 722, b"\xff\xfe" * 361]:
        s1 = s2 = 0
        words = [data[i] << 8 | (data[i + 1] if i + 1 < len(data) else 0) for i in range(0, len(data), 2)]
        for w in words:
            s1 += w
            s2 += s1
            s1 = (s1 & 0xFFFF) + (s1 >> 16) if s1 > 0xFFFF else s1
            s2 = (s2 & 0xFFFF) + (s2 >> 16) if s2 > 0xFFFF else s2
        s1 = (s1 & 0xFFFF) + (s1 >> 16)
        s2 = (s2 & 0xFFFF) + (s2 >> 16)
        assert fletcher32(data) == (s2 << 16 | s1), data[:8]


@st.composite
def cases(draw):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 12), min_size=rank, max_size=rank)))
    chunked = draw(st.booleans())
    chunk = tuple(draw(st.integers(1, n)) for n in shape) if chunked else None
    gzip = chunked and draw(st.booleans())
    shuffle = chunked and draw(st.booleans())
    dask_chunks = tuple(draw(st.integers(1, n)) for n in shape) if draw(st.booleans()) else None
    sl = tuple(slice(draw(st.integers(0, n - 1)), draw(st.integers(0, n)), draw(st.integers(1, 3))) for n in shape)
    dtype = draw(st.sampled_from(["f8", "i4", "u1", ">i2"]))
    return shape, chunk, gzip, shuffle, dask_chunks, sl, dtype


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_hypothesis_shapes_chunks_slices(tmp_path, case):
    shape, chunk, gzip, shuffle, dask_chunks, sl, dtype = case
    path = tmp_path / f"h{uuid.uuid4().hex}.h5"
    data = (np.arange(np.prod(shape)).reshape(shape) * 7 % 251).astype(dtype)
    with h5py.File(path, "w") as f:
        f.create_dataset("d", data=data, chunks=chunk, compression="gzip" if gzip else None,
                         shuffle=shuffle or None)
    arr = hd.read_hdf5(f"file://{path}", "d", chunks=dask_chunks)
    np.testing.assert_array_equal(arr[sl].compute(scheduler="sync"), data[sl])
    assert int(arr.sum().compute(scheduler="sync")) == int(data.astype(np.int64).sum())


def _same_size_files(directory):
    """Two HDF5 files of the same size whose datasets ``x`` and ``y`` sit at each other's
    addresses (made in the other order), with different values."""
    paths = []
    for order, base in ((("x", "y"), 0), (("y", "x"), 7)):
        path = os.path.join(directory, f"{''.join(order)}.h5")
        with h5py.File(path, "w") as f:
            for name in order:
                f.create_dataset(name, data=np.arange(5000.0) + base + 1e5 * (name == "y"))
        paths.append(path)
    assert os.path.getsize(paths[0]) == os.path.getsize(paths[1])
    return paths


def test_plfs_file_rewritten_in_place_is_read_anew(tmp_path):
    """A PLFS logical file rewritten in place with the same size (another writer joining the
    container, as ``dd conv=notrunc`` or an ``r+`` open through the mount) keeps its size and
    its container directory's mtime: read_hdf5 must not answer from the first version's
    addresses. Oracle: h5py on the bytes written last."""
    (tmp_path / "src").mkdir()
    paths = _same_size_files(str(tmp_path / "src"))
    # One host subdirectory: every writer after the first adds its logs there, so nothing
    # directly in the container directory (its mtime) changes with a rewrite.
    fs, path = hpcbridge.url_to_fs(f"plfs+file://{tmp_path}/c.h5", writers_hint=1)
    for i in range(4):
        source = paths[i % 2]
        if i == 0:
            with fs.open(path, "wb") as f:
                f.write(open(source, "rb").read())
        else:  # what the mount does for an open without O_TRUNC: one more writer of the container
            advance_sequence(fs.container(path).max_sequence())
            writer = fs.new_writer(fs.container(path))
            writer.write(open(source, "rb").read(), 0)
            writer.close()
        with h5py.File(source, "r") as f:
            want = {name: f[name][()] for name in ("x", "y")}
        for name in ("x", "y"):
            got = hd.read_hdf5(f"plfs+file://{tmp_path}/c.h5", name, storage_options={"writers_hint": 1})
            np.testing.assert_array_equal(got.compute(scheduler="sync"), want[name], err_msg=f"rewrite {i}, {name}")
