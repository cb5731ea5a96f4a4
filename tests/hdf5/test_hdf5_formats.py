"""HDF5 files as other writers make them, read through hpcbridge with h5py as the oracle:
``libver="latest"`` chunk indexes (single chunk, implicit, fixed array, paged, extensible array,
version-2 B-tree) with and without a user block, types HDF5 converts on read, array types,
empty and null dataspaces, external links and external storage, NUL-terminated strings, and a
Hypothesis test over shapes, chunks, index types, filters, element types and Dask chunks."""

import math
import os
import time
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

h5py = pytest.importorskip("h5py", reason="HDF5 arrays need h5py: pip install 'hpcbridge[hdf5]'")
pytest.importorskip("dask.array")

import hpcbridge  # noqa: E402
import hpcbridge.dask as hd  # noqa: E402
from hpcbridge.hdf5 import HDF5Error, HDF5FormatError, btree, describe  # noqa: E402
from hpcbridge.hdf5 import dataset as h5ds  # noqa: E402

RNG = np.random.default_rng(29)

#: (shape, chunk, maxshape, which part is written)
LATEST = [
    ((20,), (4,), None, "all"),                 # fixed array
    ((3000,), (1,), None, "some"),              # fixed array in pages, some pages never written
    ((37, 23), (5, 4), (50, 40), "all"),        # fixed array over a grid larger than the data
    ((10, 10), (10, 10), None, "all"),          # single chunk
    ((10, 10), (10, 10), None, "none"),         # single chunk, never written
    ((40, 30), (3, 7), (None, 30), "some"),     # extensible array
    ((40, 30), (3, 7), (40, None), "some"),     # extensible array, unlimited axis not the first (HDF5 1.10's
                                                # get_chunk_info gives wrong coordinates: read wrongly before)
    ((12, 9, 7), (2, 4, 3), (12, None, 7), "all"),
    ((40000,), (1,), (None,), "sparse"),        # extensible array: secondary blocks, paged data blocks
    ((40, 30), (3, 7), (None, None), "some"),   # version-2 B-tree (through h5py)
]


def _read(path, name):
    h5ds._CACHE.clear()
    return hd.read_hdf5(f"file://{path}", name).compute(scheduler="sync")


@pytest.mark.parametrize("userblock", [0, 512])
@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize("shape,chunk,maxshape,written", LATEST)
def test_latest_chunk_indexes_equal_h5py(tmp_path, userblock, compression, shape, chunk, maxshape, written):
    path = tmp_path / "latest.h5"
    options = {"userblock_size": userblock} if userblock else {}
    data = RNG.integers(-1000, 1000, shape).astype("<i4")
    with h5py.File(path, "w", libver="latest", **options) as f:
        d = f.create_dataset("d", shape=shape, chunks=chunk, maxshape=maxshape, dtype="<i4",
                             compression=compression, fillvalue=-7)
        if written == "all":
            d[...] = data
        elif written == "some":
            part = tuple(slice(0, max(1, n // 3)) for n in shape)
            d[part] = data[part]
        elif written == "sparse":
            d[::997] = data[::997]
    with h5py.File(path, "r") as f:
        expected = f["d"][()]
    np.testing.assert_array_equal(_read(path, "d"), expected)


def test_fixed_implicit_and_extensible_indexes_are_parsed_not_asked_of_h5py(tmp_path, monkeypatch):
    """A fixed array of 100,000 chunks indexes in well under a second (h5py's lookups, one per
    chunk, are quadratic in HDF5 1.10), an extensible array of 30,000 too; implicit and
    single-chunk indexes come from the layout."""
    path = tmp_path / "many.h5"
    with h5py.File(path, "w", libver="latest") as f:
        d = f.create_dataset("many", shape=(1000, 400), chunks=(1, 4), dtype="<i2")
        d[...] = np.arange(400_000).reshape(1000, 400) % 30000
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((4, 3))
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)  # implicit index: every chunk allocated at once
        h5py.h5d.create(f.id, b"implicit", h5py.h5t.STD_I32LE, h5py.h5s.create_simple((10, 7), (12, 9)), dcpl=dcpl)
        f["implicit"][...] = np.arange(70, dtype="<i4").reshape(10, 7)
        f.create_dataset("growing", data=np.arange(30_000, dtype="<i4"), chunks=(1,), maxshape=(None,))

    def refuse(*args):
        raise AssertionError("read_index_h5py called for an index the parser reads")

    monkeypatch.setattr(h5ds, "read_index_h5py", refuse)
    fs = hpcbridge.connect("file://")
    h5ds._CACHE.clear()
    started = time.perf_counter()
    info, index = describe(fs, str(path), "many")
    assert len(index) == 100_000 and time.perf_counter() - started < 1.0
    assert int(hd.read_hdf5(f"file://{path}", "many").sum().compute()) == int((np.arange(400_000) % 30000).sum())
    np.testing.assert_array_equal(_read(path, "implicit"), np.arange(70).reshape(10, 7))
    started = time.perf_counter()
    np.testing.assert_array_equal(_read(path, "growing"), np.arange(30_000))
    assert time.perf_counter() - started < 5.0


def test_a_parser_mistake_falls_back_to_h5py(tmp_path, monkeypatch, caplog):
    path = tmp_path / "fa.h5"
    with h5py.File(path, "w", libver="latest") as f:
        f.create_dataset("d", data=np.arange(100, dtype="<i4"), chunks=(10,))
    real = btree.read_v4_index

    def shifted(*args, **kwargs):
        index = real(*args, **kwargs)
        index.address = index.address + 8
        return index

    monkeypatch.setattr(h5ds, "read_v4_index", shifted)
    np.testing.assert_array_equal(_read(path, "d"), np.arange(100))
    assert "disagrees with HDF5's" in caplog.text


def test_types_hdf5_converts_are_read_as_h5py_reads_them(tmp_path):
    path = tmp_path / "types.h5"
    with h5py.File(path, "w") as f:
        def make(name, tid, values):
            d = h5py.h5d.create(f.id, name.encode(), tid, h5py.h5s.create_simple(values.shape))
            d.write(h5py.h5s.ALL, h5py.h5s.ALL, values)

        spaces = h5py.h5t.C_S1.copy()
        spaces.set_size(7)
        spaces.set_strpad(h5py.h5t.STR_SPACEPAD)  # Fortran's strings
        make("fortran", spaces, np.array([b"ab", b"x y", b""], "S7"))
        twelve = h5py.h5t.STD_I32LE.copy()
        twelve.set_precision(12)
        twelve.set_offset(4)
        make("int12", twelve, np.array([-3, 0, 5, 100], "<i4"))
        f.create_dataset("plain", data=np.array([b"ab", b"cd"], "S4"))
    with h5py.File(path, "r") as f:
        expected = {name: f[name][()] for name in ("fortran", "int12", "plain")}
    for name, values in expected.items():
        got = _read(path, name)
        assert got.dtype == values.dtype
        np.testing.assert_array_equal(got, values)


def test_types_hdf5_converts_beyond_the_limit_name_the_reason(tmp_path, monkeypatch):
    path = tmp_path / "int12.h5"
    with h5py.File(path, "w") as f:
        twelve = h5py.h5t.STD_I32LE.copy()
        twelve.set_precision(12)
        h5py.h5d.create(f.id, b"x", twelve, h5py.h5s.create_simple((1000,)))
    monkeypatch.setattr(h5ds, "CONVERTED_MAX", 100)
    h5ds._CACHE.clear()
    with pytest.raises(HDF5Error, match=r"'x' of file://.*12-bit integers.*read it with h5py"):
        hd.read_hdf5(f"file://{path}", "x")


@pytest.mark.parametrize("layout", ["contiguous", "chunked", "compact"])
def test_array_types_are_trailing_axes(tmp_path, layout):
    path = tmp_path / "array.h5"
    values = np.arange(60, dtype="<i2").reshape(10, 2, 3)
    with h5py.File(path, "w") as f:
        options = {"chunks": (3,), "compression": "gzip"} if layout == "chunked" else {}
        if layout == "compact":
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_layout(h5py.h5d.COMPACT)
            h5py.h5d.create(f.id, b"a", h5py.h5t.py_create(np.dtype(("<i2", (2, 3)))),
                            h5py.h5s.create_simple((10,)), dcpl=dcpl)
        else:
            f.create_dataset("a", (10,), dtype=np.dtype(("<i2", (2, 3))), **options)
        f["a"][...] = values
    h5ds._CACHE.clear()
    arr = hd.read_hdf5(f"file://{path}", "a")
    assert arr.shape == (10, 2, 3) and arr.dtype == np.int16
    np.testing.assert_array_equal(arr.compute(), values)
    np.testing.assert_array_equal(arr[2:7, 1].compute(), values[2:7, 1])
    np.testing.assert_array_equal(arr.sum(axis=0).compute(), values.sum(axis=0))


@pytest.mark.parametrize("shape,chunks", [((0,), None), ((0, 5), None), ((5, 0), (2, 2)), ((3, 0, 4), (1, 1, 2))])
def test_empty_datasets_are_empty_arrays(tmp_path, shape, chunks):
    path = tmp_path / "empty.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("e", shape=shape, chunks=chunks, dtype="<f8", maxshape=(None,) * len(shape) if chunks else None)
    got = _read(path, "e")
    assert got.shape == shape and got.dtype == np.float64


def test_null_dataspace_external_link_and_external_storage_are_refused_by_name(tmp_path):
    target = tmp_path / "target.h5"
    with h5py.File(target, "w") as f:
        f.create_dataset("x", data=np.arange(5.0))
    host = tmp_path / "host.h5"
    raw = tmp_path / "raw.bin"
    with h5py.File(host, "w") as f:
        f.create_dataset("x", data=np.arange(100.0, 105.0))  # what the link would wrongly reach
        f["link"] = h5py.ExternalLink(str(target), "/x")
        f["g/soft"] = h5py.SoftLink("/link")
        f.create_dataset("null", data=h5py.Empty("<f8"))
        f.create_dataset("outside", shape=(8,), dtype="<i4", external=[(str(raw), 0, h5py.h5f.UNLIMITED)])
        f["outside"][...] = np.arange(8)
    url = f"file://{host}"
    h5ds._CACHE.clear()
    for name in ("link", "g/soft"):
        with pytest.raises(HDF5Error, match=f"{name!r} in {url} is reached through an external link to '/x'"):
            hd.read_hdf5(url, name)
    with pytest.raises(HDF5Error, match=f"'null' of {url} has a null dataspace"):
        hd.read_hdf5(url, "null")
    with pytest.raises(HDF5Error, match=f"'outside' of {url} stores its data in external files .*raw.bin"):
        hd.read_hdf5(url, "outside")
    np.testing.assert_array_equal(hd.read_hdf5(url, "x").compute(), np.arange(100.0, 105.0))


def test_a_rewrite_keeping_size_and_mtime_is_read_anew(tmp_path):
    """cp -p and rsync -a keep size and mtime: the cached plan of the old file (its data
    address) was applied to the new one."""
    path = tmp_path / "same.h5"
    for order, value in ((("a", "b"), 1.0), (("b", "a"), 2.0)):
        with h5py.File(path, "w") as f:
            for name in order:
                f.create_dataset(name, data=np.full(1000, value if name == "a" else -value))
        if value == 1.0:
            stamp = os.stat(path).st_mtime_ns
            np.testing.assert_array_equal(hd.read_hdf5(f"file://{path}", "a").compute(), np.full(1000, 1.0))
        else:
            os.utime(path, ns=(stamp, stamp))  # as cp -p: the old mtime, the same size
    np.testing.assert_array_equal(hd.read_hdf5(f"file://{path}", "a").compute(), np.full(1000, 2.0))


def _libhdf5():
    """The HDF5 library h5py loaded, for the creation properties h5py does not expose."""
    import ctypes

    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libhdf5" in line and "_hl" not in line and ".so" in line}
    lib = ctypes.CDLL(sorted(paths)[0])
    lib.H5Pset_chunk_opts.argtypes = [ctypes.c_int64, ctypes.c_uint]
    lib.H5Pset_fill_value.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    return lib


def test_unfiltered_partial_edge_chunks_are_not_decoded(tmp_path):
    """H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS stores edge chunks raw with a filter mask of 0: they
    were unshuffled into garbage (shuffle) or called corrupt (gzip, Fletcher-32)."""
    lib = _libhdf5()
    path = tmp_path / "edges.h5"
    data = np.arange(110, dtype="<i4").reshape(10, 11) * 1001
    pipelines = {"shuffle": lambda p: p.set_shuffle(), "gzip": lambda p: p.set_deflate(4),
                 "shuffle_fletcher": lambda p: (p.set_shuffle(), p.set_fletcher32())}
    with h5py.File(path, "w", libver="latest") as f:
        for name, pipeline in pipelines.items():
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_chunk((4, 4))
            pipeline(dcpl)
            assert lib.H5Pset_chunk_opts(dcpl.id, 2) >= 0  # H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS
            f.create_dataset(name, data=data, dcpl=dcpl)
    for name in pipelines:
        with h5py.File(path) as f:
            np.testing.assert_array_equal(f[name][()], data)
        np.testing.assert_array_equal(_read(path, name), data)
        np.testing.assert_array_equal(hd.read_hdf5(f"file://{path}", name)[7:, 6:].compute(scheduler="sync"),
                                      data[7:, 6:])


def test_unwritten_elements_read_as_h5py_reads_them(tmp_path):
    """fill_time="never": h5py gives zeros, not the fill value; an array type's fill value is an
    array (h5py's fillvalue cannot convert it: the describe failed naming nothing)."""
    lib = _libhdf5()
    path = tmp_path / "fills.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("never_chunked", (8, 8), "i4", chunks=(4, 4), fillvalue=-7, fill_time="never")[0:4, 0:4] = 3
        f.create_dataset("never_contiguous", (8,), "i2", fillvalue=9, fill_time="never")
        triple = h5py.h5t.array_create(h5py.h5t.NATIVE_FLOAT, (3,))
        fill = np.array([1, 2, 3], "f4")
        for name, chunks in ((b"array_chunked", (2,)), (b"array_contiguous", None)):
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            if chunks:
                dcpl.set_chunk(chunks)
            assert lib.H5Pset_fill_value(dcpl.id, triple.id, fill.ctypes.data) >= 0
            h5py.h5d.create(f.id, name, triple, h5py.h5s.create_simple((6,)), dcpl=dcpl)
        f["array_chunked"][0:2] = np.full((2, 3), 7, "f4")
    for name in ("never_chunked", "never_contiguous", "array_chunked", "array_contiguous"):
        with h5py.File(path) as f:
            expected = f[name][()]
        np.testing.assert_array_equal(_read(path, name), expected)
    with h5py.File(path) as f:
        assert f["array_contiguous"][()].tolist() == [[1, 2, 3]] * 6
        expected = f["array_chunked"][()]
    np.testing.assert_array_equal(hd.read_hdf5(f"file://{path}", "array_chunked")[:, 1:].compute(scheduler="sync"),
                                  expected[:, 1:])


def test_nul_terminated_strings_end_at_their_nul(tmp_path):
    """H5T_STR_NULLTERM strings with bytes after the NUL (C writers leave whatever their buffer
    held): HDF5 reads them up to the NUL, and so must hpcbridge (it returned the stored bytes),
    alone, as compound members and in array types, in every layout."""
    path = tmp_path / "nulterm.h5"
    raw = np.array([b"ab\x00xyz", b"abcdef", b"\x00\x00zz\x00q", b"a", b"x\x00\x00\x00\x00y"], "S6")

    def string(pad):
        t = h5py.h5t.C_S1.copy()
        t.set_size(6)
        t.set_strpad(pad)
        return t

    nulterm = string(h5py.h5t.STR_NULLTERM)
    member = h5py.h5t.create(h5py.h5t.COMPOUND, 24)
    member.insert(b"n", 0, h5py.h5t.STD_I16BE)
    member.insert(b"s", 2, nulterm)
    member.insert(b"p", 8, string(h5py.h5t.STR_NULLPAD))  # kept as stored
    member.insert(b"a", 14, h5py.h5t.array_create(nulterm, (1,)))
    records = np.zeros(5, {"names": ["n", "s", "p", "a"], "formats": [">i2", "S6", "S6", ("S6", (1,))],
                           "offsets": [0, 2, 8, 14], "itemsize": 24})
    records["n"], records["s"], records["p"], records["a"][:, 0] = np.arange(5), raw, raw, raw[::-1]
    pair = h5py.h5t.array_create(nulterm, (2,))
    with h5py.File(path, "w") as f:
        for name, tid, values in (("plain", nulterm, raw), ("records", member, records),
                                  ("pairs", pair, np.stack([raw, raw[::-1]], 1).copy())):
            for layout, chunked in (("contiguous", None), ("chunked", (2,))):
                dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
                if chunked:
                    dcpl.set_chunk(chunked)
                    dcpl.set_deflate(1)
                d = h5py.h5d.create(f.id, f"{name}_{layout}".encode(), tid, h5py.h5s.create_simple((5,)), dcpl=dcpl)
                d.write(h5py.h5s.ALL, h5py.h5s.ALL, values, mtype=tid)  # the bytes as given, no conversion
    with h5py.File(path) as f:
        expected = {name: f[name][()] for name in f}
    assert expected["plain_contiguous"].tolist() == [b"ab", b"abcdef", b"", b"a", b"x"]
    for name, values in expected.items():
        got = _read(path, name)
        assert got.shape == values.shape and got.dtype == values.dtype.newbyteorder("="), name
        assert np.all(got == values.astype(got.dtype)), name
        part = hd.read_hdf5(f"file://{path}", name, chunks=3)[1:4].compute(scheduler="sync")
        assert np.all(part == values[1:4].astype(got.dtype)), name


#: Element types of the Hypothesis test: byte orders, bool (an HDF5 enum), fixed strings,
#: complex (a compound), a padded compound, an HDF5 array type (trailing axes).
FORMAT_DTYPES = ["<f8", ">i2", "u1", ">f4", "|b1", "S3", "<c8",
                 {"names": ["a", "b"], "formats": [">i4", "u1"], "offsets": [0, 6], "itemsize": 8}, ("<i2", (2,))]


@st.composite
def format_cases(draw):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(0, 9), min_size=rank, max_size=rank)))
    case = dict(shape=shape, libver=draw(st.sampled_from(["earliest", "latest"])),
                dtype=np.dtype(draw(st.sampled_from(FORMAT_DTYPES))), written="all", options={})
    if draw(st.booleans()):  # chunked: every index type of both libvers, chunks up to past the shape
        grow = draw(st.sampled_from(["fixed", "larger", "one unlimited", "all unlimited"]))
        unlimited = draw(st.integers(0, rank - 1))
        maxshape = {"fixed": shape, "larger": tuple(n + draw(st.integers(0, 5)) for n in shape),
                    "one unlimited": tuple(None if i == unlimited else n for i, n in enumerate(shape)),
                    "all unlimited": (None,) * rank}[grow]
        chunks = tuple(draw(st.integers(1, max(1, n if m == n else (m or n + 4)))) for n, m in zip(shape, maxshape))
        maxshape = tuple(m if m is None else max(m, c) for m, c in zip(maxshape, chunks))
        filters = draw(st.sampled_from([(), ("gzip",), ("shuffle",), ("gzip", "shuffle"), ("fletcher32",),
                                        ("gzip", "shuffle", "fletcher32")]))
        case["options"] = dict(chunks=chunks, maxshape=maxshape, compression="gzip" if "gzip" in filters else None,
                               shuffle="shuffle" in filters, fletcher32="fletcher32" in filters)
        case["written"] = draw(st.sampled_from(["all", "part", "none", "shrunk and grown"]))
    else:
        case["written"] = draw(st.sampled_from(["all", "none"]))
    if draw(st.booleans()) and not case["dtype"].subdtype:
        case["options"]["fillvalue"] = _format_values((1,), case["dtype"])[0]
    case["chunks"] = draw(st.one_of(st.none(), st.integers(1, 5), st.tuples(*[st.integers(1, max(1, n)) for n in shape])))
    case["partition_size"] = draw(st.one_of(st.none(), st.integers(1, 300)))
    case["slice"] = tuple(slice(draw(st.integers(0, max(0, n - 1))), draw(st.integers(0, n)), draw(st.integers(1, 3)))
                          for n in shape)
    return case


def _format_values(shape, dtype):
    n = math.prod(shape)
    base = np.arange(n) * 7 % 251 + 1
    if dtype.names:
        out = np.zeros(n, dtype)
        out["a"], out["b"] = base * 1001, base
        return out.reshape(shape)
    if dtype.subdtype:
        return (np.arange(n * 2) % 97).astype(dtype.base).reshape(shape + dtype.shape)
    if dtype.kind == "S":
        return np.array([str(x).encode() for x in base], dtype).reshape(shape)
    return (base % 3 == 0).reshape(shape) if dtype.kind == "b" else base.astype(dtype).reshape(shape)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=format_cases())
def test_hypothesis_formats_equal_h5py(tmp_path, case):
    """Shapes (empty ones too), chunks (larger than the data too), index types of both libvers,
    filters, element types, unwritten, partly written and shrunk-then-grown datasets, Dask chunks
    and partition sizes that cut HDF5 chunks: every element as h5py reads it."""
    path = tmp_path / f"h{uuid.uuid4().hex}.h5"
    shape, dtype = case["shape"], case["dtype"]
    data = _format_values(shape, dtype)
    with h5py.File(path, "w", libver=case["libver"]) as f:
        d = f.create_dataset("d", shape=shape, dtype=dtype, **case["options"])
        if case["written"] == "part" and data.size:
            part = tuple(slice(0, max(1, n // 2)) for n in shape)
            d[part] = data[part]
        elif case["written"] in ("all", "shrunk and grown") and data.size:
            d[...] = data
        if case["written"] == "shrunk and grown":
            d.resize(tuple(n // 2 for n in shape))
            d.resize(tuple(n + 3 if m is None else min(n + 3, m) for n, m in zip(shape, d.maxshape)))
    with h5py.File(path) as f:
        expected = f["d"][()]
    chunks = case["chunks"]
    if isinstance(chunks, tuple):  # the grown shape, an array type's axes
        chunks = tuple(min(c, max(1, n)) for c, n in zip(chunks, expected.shape)) + dtype.shape
    h5ds._CACHE.clear()
    arr = hd.read_hdf5(f"file://{path}", "d", chunks=chunks, partition_size=case["partition_size"])
    sl = case["slice"] if expected.shape[:len(shape)] == shape else ()
    for got, want in ((arr.compute(scheduler="sync"), expected), (arr[sl].compute(scheduler="sync"), expected[sl])):
        assert got.shape == want.shape and got.dtype == want.dtype.newbyteorder("=")
        assert np.all(got == want.astype(got.dtype))


def _earliest_file_with(path, data, **options):
    with h5py.File(path, "w", libver="earliest") as f:
        f.create_dataset("d", data=data, **options)
    return bytearray(path.read_bytes())


def test_chunk_btree_key_outside_the_shape_reads_as_hdf5_reads_it(tmp_path):
    """A version-1 B-tree whose key places a chunk past the dataset's end (damaged): HDF5 never
    looks that chunk up and reads the fill value; planning the blocks raised IndexError."""
    path = tmp_path / "key.h5"
    raw = _earliest_file_with(path, np.arange(8, dtype="<i4"), chunks=(4,), fillvalue=-1)
    node = raw.index(b"TREE\x01\x00\x02\x00")  # the leaf: 2 chunks
    second = node + 24 + 24 + 8  # header (signature, type, level, entries, siblings), key 0, child 0
    assert np.frombuffer(raw[second + 8:second + 16], "<u8")[0] == 4
    raw[second + 8:second + 16] = np.array([8], "<u8").tobytes()
    path.write_bytes(raw)
    with h5py.File(path) as f:
        expected = f["d"][()]
    assert expected.tolist() == [0, 1, 2, 3, -1, -1, -1, -1]
    np.testing.assert_array_equal(_read(path, "d"), expected)


def test_metadata_hdf5_cannot_read_is_an_hdf5_error(tmp_path):
    """A damaged local heap (the root group's link names): h5py raises, and so does hpcbridge,
    but as HDF5FormatError naming the URL (h5py's RuntimeError escaped)."""
    path = tmp_path / "heap.h5"
    raw = _earliest_file_with(path, np.arange(8.0))
    heap = raw.index(b"HEAP")
    raw[heap:heap + 4] = b"PAEH"
    path.write_bytes(raw)
    with h5py.File(path) as f, pytest.raises((KeyError, RuntimeError)):
        f["d"]
    h5ds._CACHE.clear()
    with pytest.raises(HDF5FormatError, match=f"file://{path}: HDF5 cannot read the metadata of 'd'"):
        hd.read_hdf5(f"file://{path}", "d")
