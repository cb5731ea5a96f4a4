"""hpcbridge.mpi pieces that need no peers: datatype flattening (checked against MPI's own
Unpack), file views, hints, modes, domain planning. The collective algorithm itself runs under
mpirun in tests/mpi/test_collective_mpi.py."""

import io

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MPI = pytest.importorskip("mpi4py.MPI", reason="mpi4py is not installed (pip install hpcbridge[mpi])")

from hpcbridge.mpi.datatypes import extents_filetype, flatten_datatype, merge_extents  # noqa: E402
from hpcbridge.mpi.hints import Hints, parse_config_list, parse_hints  # noqa: E402
from hpcbridge.mpi.plan import file_domains, round_windows, split_at_windows, union_extents  # noqa: E402
from hpcbridge.mpi.target import parse_amode  # noqa: E402
from hpcbridge.mpi.view import FileView  # noqa: E402


def reference_flatten(datatype):
    """Byte extents of ``datatype`` in typemap order, as MPI itself lays them out: unpack a packed
    stream whose byte k encodes k (one byte plane at a time) and see where each byte lands."""
    size = datatype.Get_size()
    lb, extent = datatype.Get_extent()
    true_lb, true_extent = datatype.Get_true_extent()
    span = max(true_lb + true_extent, extent, 1)
    # Extent = span so that a buffer of span bytes holds exactly one copy (Unpack's count).
    wrapped = datatype.Create_resized(0, span).Commit()
    try:
        positions = np.zeros(span, dtype=np.int64)
        touched = np.zeros(span, dtype=np.uint8)
        wrapped.Unpack(np.full(size, 0xFF, dtype=np.uint8), 0, touched, MPI.COMM_SELF)
        k = np.arange(size, dtype=np.int64)
        for plane in range(4):
            out = np.zeros(span, dtype=np.uint8)
            wrapped.Unpack(((k >> (8 * plane)) & 0xFF).astype(np.uint8), 0, out, MPI.COMM_SELF)
            positions |= out.astype(np.int64) << (8 * plane)
        where = np.flatnonzero(touched == 0xFF)
        order = where[np.argsort(positions[where], kind="stable")]
        return merge_extents(order, np.ones(order.size, dtype=np.int64)), lb, extent
    finally:
        wrapped.Free()


def assert_same_as_mpi(datatype):
    flat = flatten_datatype(datatype)
    (ref_off, ref_len), lb, extent = reference_flatten(datatype)
    got_off, got_len = merge_extents(flat.offsets, flat.lengths)
    np.testing.assert_array_equal(got_off, ref_off)
    np.testing.assert_array_equal(got_len, ref_len)
    assert (flat.lb, flat.extent) == (lb, extent)
    assert flat.size == datatype.Get_size()


@pytest.mark.parametrize("build", [
    lambda: MPI.BYTE.Create_vector(5, 3, 7),
    lambda: MPI.DOUBLE.Create_vector(4, 2, 5),
    lambda: MPI.INT.Create_hvector(3, 2, 20),
    lambda: MPI.DOUBLE.Create_indexed([2, 1, 3], [0, 5, 9]),
    lambda: MPI.INT.Create_hindexed([1, 2], [4, 40]),
    lambda: MPI.DOUBLE.Create_indexed_block(2, [1, 6, 11]),
    lambda: MPI.SHORT.Create_hindexed_block(3, [0, 14, 30]),
    lambda: MPI.DOUBLE.Create_subarray([6, 8, 5], [2, 3, 4], [1, 2, 0]),
    lambda: MPI.INT.Create_subarray([6, 8], [2, 3], [4, 5], order=MPI.ORDER_FORTRAN),
    lambda: MPI.Datatype.Create_struct([1, 2, 1], [0, 8, 40], [MPI.INT, MPI.DOUBLE, MPI.CHAR]),
    lambda: MPI.INT.Create_vector(3, 1, 4).Create_resized(0, 64),
    lambda: MPI.BYTE.Create_contiguous(10).Create_vector(3, 2, 4),
    lambda: MPI.DOUBLE.Create_subarray([4, 4], [2, 2], [1, 1]).Create_contiguous(3),
    lambda: MPI.DOUBLE.Dup(),
], ids=["vector-byte", "vector-double", "hvector", "indexed", "hindexed", "indexed-block", "hindexed-block",
        "subarray-3d", "subarray-fortran", "struct", "resized", "nested-contiguous", "contiguous-of-subarray", "dup"])
def test_flatten_matches_mpi_unpack(build):
    datatype = build()
    try:
        assert_same_as_mpi(datatype)
    finally:
        datatype.Free()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ndims=st.integers(1, 3), data=st.data())
def test_flatten_random_subarrays(ndims, data):
    sizes = [data.draw(st.integers(1, 6)) for _ in range(ndims)]
    subsizes = [data.draw(st.integers(1, s)) for s in sizes]
    starts = [data.draw(st.integers(0, s - sub)) for s, sub in zip(sizes, subsizes)]
    base = data.draw(st.sampled_from([MPI.BYTE, MPI.INT, MPI.DOUBLE]))
    order = data.draw(st.sampled_from([MPI.ORDER_C, MPI.ORDER_FORTRAN]))
    datatype = base.Create_subarray(sizes, subsizes, starts, order=order)
    try:
        assert_same_as_mpi(datatype)
    finally:
        datatype.Free()


@settings(max_examples=60, deadline=None)
@given(blocks=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 3)), min_size=1, max_size=6),
       stride=st.integers(1, 4), count=st.integers(1, 4))
def test_flatten_random_nested_indexed(blocks, stride, count):
    displs, lens = [], []
    position = 0
    for gap, n in blocks:  # monotonically increasing blocks, as file views need
        position += gap
        displs.append(position)
        lens.append(n)
        position += n
    inner = MPI.INT.Create_indexed(lens, displs)
    outer = inner.Create_vector(count, 1, stride)
    try:
        assert_same_as_mpi(outer)
    finally:
        outer.Free()
        inner.Free()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ndims=st.integers(1, 3), data=st.data())
def test_flatten_random_darrays(ndims, data):
    """darray (block, cyclic and none, default and explicit dargs, C and Fortran order, every
    rank of the grid), refused before: as MPI lays it out."""
    gsizes, distribs, dargs, psizes = [], [], [], []
    for _ in range(ndims):
        gsize = data.draw(st.integers(1, 9))
        distrib = data.draw(st.sampled_from([MPI.DISTRIBUTE_BLOCK, MPI.DISTRIBUTE_CYCLIC, MPI.DISTRIBUTE_NONE]))
        psize = 1 if distrib == MPI.DISTRIBUTE_NONE else data.draw(st.integers(1, 3))
        darg = MPI.DISTRIBUTE_DFLT_DARG
        if distrib == MPI.DISTRIBUTE_CYCLIC and data.draw(st.booleans()):
            darg = data.draw(st.integers(1, 4))
        if distrib == MPI.DISTRIBUTE_BLOCK and data.draw(st.booleans()):
            darg = data.draw(st.integers(-(-gsize // psize), gsize + 1))  # blocks must cover the dimension
        gsizes.append(gsize), distribs.append(distrib), dargs.append(darg), psizes.append(psize)
    size = int(np.prod(psizes))
    rank = data.draw(st.integers(0, size - 1))
    base = data.draw(st.sampled_from([MPI.BYTE, MPI.INT, MPI.DOUBLE]))
    order = data.draw(st.sampled_from([MPI.ORDER_C, MPI.ORDER_FORTRAN]))
    datatype = base.Create_darray(size, rank, gsizes, distribs, dargs, psizes, order=order)
    try:
        if datatype.Get_size() == 0:  # a process owning nothing (MPI's true extent is then meaningless)
            assert flatten_datatype(datatype).size == 0
        else:
            assert_same_as_mpi(datatype)
    finally:
        datatype.Free()


# -- views -----------------------------------------------------------------------------------
def brute_force_view(disp, etype_size, offsets, lengths, extent, offset, nbytes):
    """File offset of every data byte, by walking tiles byte by byte (the slow, obvious way)."""
    tile = np.concatenate([np.arange(o, o + n) for o, n in zip(offsets, lengths)]) if len(offsets) else []
    tile = np.asarray(tile, dtype=np.int64)
    start = offset * etype_size
    k = np.arange(start, start + nbytes)
    return disp + (k // tile.size) * extent + tile[k % tile.size]


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_view_extents_match_a_byte_by_byte_walk(data):
    etype = data.draw(st.sampled_from([1, 2, 8]))
    nblocks = data.draw(st.integers(1, 5))
    offsets, lengths, position = [], [], 0
    for _ in range(nblocks):
        position += data.draw(st.integers(0, 3)) * etype
        n = data.draw(st.integers(1, 3)) * etype
        offsets.append(position)
        lengths.append(n)
        position += n
    extent = position + data.draw(st.integers(0, 3)) * etype
    disp = data.draw(st.integers(0, 50))
    view = FileView.build(disp, etype, list(zip(offsets, lengths)), extent=extent)
    offset = data.draw(st.integers(0, 20))
    nbytes = data.draw(st.integers(0, 60)) * etype
    got_off, got_len = view.extents(offset, nbytes)
    assert got_len.sum() == nbytes
    got = np.concatenate([np.arange(o, o + n) for o, n in zip(got_off, got_len)]) if nbytes else np.zeros(0)
    expected = brute_force_view(disp, etype, offsets, lengths, extent, offset, nbytes)
    np.testing.assert_array_equal(got, expected)


def test_view_rejects_what_mpi_rejects():
    with pytest.raises(ValueError, match="non-decreasing"):
        FileView.build(0, 1, [(10, 4), (0, 4)])
    with pytest.raises(ValueError, match="multiple of the etype"):
        FileView.build(0, 8, [(0, 12)], extent=16)
    empty = FileView.build(0, 1, [(0, 0)], extent=4)  # MPI takes it; only empty accesses work
    assert [a.size for a in empty.extents(3, 0)] == [0, 0] and empty.bytes_before(100) == 0
    with pytest.raises(ValueError, match="selects no bytes"):
        empty.extents(0, 1)
    with pytest.raises(ValueError, match="non-negative"):
        FileView.build(-1, 1, None)
    with pytest.raises(ValueError, match="smaller than"):
        extents_filetype([(0, 10)], extent=5)
    with pytest.raises(ValueError, match="whole number of etypes"):
        FileView.build(0, 8, None).extents(0, 12)


def test_dense_filetype_collapses_to_the_byte_stream():
    assert FileView.build(16, 1, MPI.BYTE.Create_contiguous(100)).contiguous
    assert not FileView.build(0, 1, MPI.BYTE.Create_vector(2, 1, 2)).contiguous


# -- hints and modes -------------------------------------------------------------------------
def test_hints_are_validated_and_listed():
    hints = parse_hints({"cb_buffer_size": "4m", "cb_nodes": "2", "striping_unit": 65536, "cb_write": "automatic",
                         "cb_config_list": "node1:2,*:1", "romio_ds_write": "disable"})
    assert hints.cb_buffer_size == 4 << 20 and hints.cb_nodes == 2 and hints.striping_unit == 65536
    assert hints.cb_write == "auto" and hints.romio_ds_write == "disable"
    assert hints.cb_config_list == (("node1", 2), ("*", 1))
    assert parse_hints(None) == Hints()
    with pytest.raises(ValueError, match="unknown hint 'cb_node'.*valid hints: cb_buffer_size"):
        parse_hints({"cb_node": 2})
    for bad in ({"cb_nodes": "0"}, {"cb_nodes": "two"}, {"cb_buffer_size": "-1"}, {"cb_buffer_size": "4x"},
                {"cb_write": "sometimes"}, {"cb_buffer_size": "2g"}, {"cb_config_list": "host:0"},
                {"cb_config_list": ":2"}):
        with pytest.raises(ValueError, match="hint"):
            parse_hints(bad)
    with pytest.raises(TypeError):
        parse_hints(["cb_nodes"])
    assert parse_config_list("*:*") == (("*", -1),)
    assert parse_hints({"cb_write_behind": "true", "direct_write": "false"}).cb_write_behind
    assert parse_hints({}).cb_write_behind is False
    with pytest.raises(ValueError, match="cb_write_behind"):
        parse_hints({"cb_write_behind": "often"})


def test_write_behind_counts_calls_and_keeps_stream_order():
    """The flush rule on one rank (COMM_SELF): flush every limit/largest-call calls, re-agreed
    from what was staged; a stage that outgrows 4 × the limit is written by its rank alone."""
    from hpcbridge.mpi.behind import HARD_LIMIT, WriteBehind

    stage = WriteBehind(MPI.COMM_SELF, limit=100)
    ext = np.array([0], dtype=np.int64)
    verdicts = [stage.stage(memoryview(bytes([i]) * 30), ext + 30 * i, ext + 30) for i in range(3)]
    assert stage.period is not None and verdicts == [None, None, "all"]  # 100 // 30 = 3 calls
    data, offsets, lengths = stage.take(collective=True)
    assert bytes(data) == bytes([0]) * 30 + bytes([1]) * 30 + bytes([2]) * 30
    assert offsets.tolist() == [0, 30, 60] and lengths.tolist() == [30, 30, 30] and stage.nbytes == 0
    # Calls of 150 bytes after a period of 3 was agreed: the third flushes for all, and the
    # period re-agreed from the staged bytes becomes 1. Then: a period of 10 agreed from small
    # calls, and calls so large that the hard limit is passed before the period ends.
    stage = WriteBehind(MPI.COMM_SELF, limit=100)
    stage.stage(memoryview(b"a" * 30), ext, ext + 30)
    assert stage.stage(memoryview(b"b" * 150), ext + 30, ext + 150) is None
    assert stage.stage(memoryview(b"c" * 150), ext + 180, ext + 150) == "all" and stage.period == 1
    stage.take(collective=True)
    stage = WriteBehind(MPI.COMM_SELF, limit=100)
    big = HARD_LIMIT * 100 // 2 + 1
    stage.stage(memoryview(b"a" * 10), ext, ext + 10)                       # period 10
    assert stage.stage(memoryview(b"b" * big), ext + 10, ext + big) is None  # still within the hard limit
    assert stage.stage(memoryview(b"c" * big), ext + 10 + big, ext + big) == "own"
    data, offsets, _ = stage.take(collective=False)
    assert bytes(data) == b"a" * 10 + b"b" * big + b"c" * big and offsets.tolist() == [0, 10, 10 + big]
    stage.close()


def test_mpi_info_hints_are_accepted():
    info = MPI.Info.Create()
    info.Set("cb_nodes", "3")
    try:
        assert parse_hints(info).cb_nodes == 3
    finally:
        info.Free()


def test_modes():
    assert parse_amode("w", "u").truncate and parse_amode("w", "u").create
    assert parse_amode("r+", "u").read and parse_amode("r+", "u").write
    amode = parse_amode(MPI.MODE_WRONLY | MPI.MODE_CREATE, "u")
    assert amode.write and amode.create and not amode.truncate and not amode.read
    with pytest.raises(ValueError, match="MODE_SEQUENTIAL"):
        parse_amode(MPI.MODE_WRONLY | MPI.MODE_SEQUENTIAL, "u")
    for flag in (MPI.MODE_APPEND, MPI.MODE_DELETE_ON_CLOSE, MPI.MODE_UNIQUE_OPEN):
        assert parse_amode(MPI.MODE_WRONLY | flag, "u").write
    with pytest.raises(ValueError, match="exactly one"):
        parse_amode(MPI.MODE_WRONLY | MPI.MODE_RDWR, "u")
    with pytest.raises(ValueError, match="invalid mode 'a'"):
        parse_amode("a", "file:///x")
    with pytest.raises(TypeError):
        parse_amode(3.5, "u")


# -- planning --------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(start=st.integers(0, 10_000), length=st.integers(1, 50_000), naggs=st.integers(1, 7),
       unit=st.sampled_from([1, 512, 4096, 65536]), buffer=st.sampled_from([4096, 10_000, 65536]))
def test_domains_tile_the_range_aligned(start, length, naggs, unit, buffer):
    end = start + length
    dstarts, dends = file_domains(start, end, naggs, unit)
    assert dstarts[0] == start and dends[-1] == end
    assert np.all(dstarts[1:] == dends[:-1]) and np.all(dends >= dstarts)
    inner = dstarts[1:][(dstarts[1:] > start) & (dstarts[1:] < end)]
    assert np.all(inner % unit == 0)  # no stripe shared by two aggregators
    ws, we, rounds = round_windows(dstarts, dends, unit, buffer)
    assert np.all(we - ws <= buffer)
    flat_s, flat_e = ws.reshape(-1), we.reshape(-1)
    nonempty = flat_e > flat_s
    assert (flat_e - flat_s)[nonempty].sum() == length
    assert np.all(np.diff(flat_s) >= 0)


@settings(max_examples=200, deadline=None)
@given(extents=st.lists(st.tuples(st.integers(0, 3000), st.integers(1, 400)), min_size=1, max_size=20),
       naggs=st.integers(1, 5), buffer=st.sampled_from([64, 100, 1000]))
def test_split_at_windows_keeps_every_byte_once(extents, naggs, buffer):
    extents.sort()
    offsets = np.array([o for o, _ in extents], dtype=np.int64)
    lengths = np.array([n for _, n in extents], dtype=np.int64)
    start, end = int(offsets.min()), int((offsets + lengths).max())
    dstarts, dends = file_domains(start, end, naggs, 16)
    ws, we, _ = round_windows(dstarts, dends, 16, buffer)
    window, off, length, owner = split_at_windows(offsets, lengths, ws.reshape(-1), we.reshape(-1))
    assert np.all(off >= ws.reshape(-1)[window]) and np.all(off + length <= we.reshape(-1)[window])
    np.testing.assert_array_equal(np.bincount(owner, weights=length, minlength=offsets.size), lengths)


def test_union_extents_merges_overlaps():
    off, length = union_extents(np.array([10, 0, 5, 30]), np.array([5, 6, 2, 1]))
    assert off.tolist() == [0, 10, 30] and length.tolist() == [7, 5, 1]


def test_importing_hpcbridge_mpi_does_not_start_mpi():
    import subprocess
    import sys

    code = "import sys, hpcbridge.mpi; print('mpi4py' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_hdfs_writes_point_to_plfs():
    from hpcbridge.mpi import File

    # Refused from the capabilities alone, before any connection: no NameNode needed.
    with pytest.raises(io.UnsupportedOperation, match="plfs\\+hdfs://nn:9820/ckpt"):
        File.open(MPI.COMM_SELF, "hdfs://nn:9820/ckpt", "w")
