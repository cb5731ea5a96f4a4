"""The one range planner (hpcbridge.fs.ranges) against fsspec's merge_offset_ranges, the MPI
layer's two extent helpers built on it, and FileSystem.read_ranges reading merged blocks."""

import numpy as np
import pytest
from fsspec.utils import merge_offset_ranges
from hypothesis import given, settings
from hypothesis import strategies as st

import hpcbridge
from hpcbridge.fs.ranges import merge_ranges

RANGES = st.lists(st.tuples(st.integers(0, 5000), st.integers(1, 700)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(ranges=RANGES, max_gap=st.sampled_from([0, 1, 64, 1000]),
       max_block=st.sampled_from([None, 1, 100, 1500, 10**6]))
def test_sorted_merge_equals_fsspec(ranges, max_gap, max_block):
    offsets = [o for o, _ in ranges]
    ends = [o + n for o, n in ranges]
    starts, lengths, block_of = merge_ranges(offsets, [n for _, n in ranges], max_gap=max_gap,
                                             max_block=max_block, return_blocks=True)
    _, want_starts, want_ends = merge_offset_ranges(["f"] * len(ranges), offsets, ends, max_gap=max_gap,
                                                    max_block=max_block)
    if len(ranges) <= 1:  # fsspec returns its input as is
        want_starts, want_ends = offsets, ends
    assert starts.tolist() == want_starts and (starts + lengths).tolist() == want_ends
    for (o, n), b in zip(ranges, block_of):  # each range inside the block said to hold it
        assert starts[b] <= o and o + n <= starts[b] + lengths[b]
    # Python lists of up to FEW ranges are planned in plain Python, arrays with numpy: the same plan.
    as_arrays = merge_ranges(np.array(offsets, dtype=np.int64), np.array([n for _, n in ranges], dtype=np.int64),
                             max_gap=max_gap, max_block=max_block, return_blocks=True)
    assert all(a.tolist() == b.tolist() for a, b in zip(as_arrays, (starts, lengths, block_of)))


@settings(max_examples=200, deadline=None)
@given(ranges=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3000), st.integers(1, 500)), max_size=40),
       max_gap=st.sampled_from([0, 1, 64]), max_block=st.sampled_from([None, 100, 1500]))
def test_keyed_merge_equals_fsspec_with_paths(ranges, max_gap, max_block):
    # keys are fsspec's paths: ranges of different files (PLFS: writers' logs) never merge
    keys = [k for k, _, _ in ranges]
    offsets = [o for _, o, _ in ranges]
    ends = [o + n for _, o, n in ranges]
    starts, lengths, block_of = merge_ranges(offsets, [n for _, _, n in ranges], max_gap=max_gap,
                                             max_block=max_block, return_blocks=True, keys=keys)
    want_paths, want_starts, want_ends = merge_offset_ranges([f"f{k}" for k in keys], offsets, ends,
                                                             max_gap=max_gap, max_block=max_block)
    if len(ranges) <= 1:
        want_paths, want_starts, want_ends = [f"f{k}" for k in keys], offsets, ends
    block_keys = {}
    for k, b in zip(keys, block_of.tolist()):
        assert block_keys.setdefault(b, k) == k  # a block holds one key's ranges
    assert [f"f{block_keys[b]}" for b in range(len(starts))] == want_paths
    assert starts.tolist() == want_starts and (starts + lengths).tolist() == want_ends
    as_arrays = merge_ranges(np.array(offsets, dtype=np.int64), np.array([n for _, _, n in ranges], dtype=np.int64),
                             max_gap=max_gap, max_block=max_block, return_blocks=True, keys=np.array(keys))
    assert all(a.tolist() == b.tolist() for a, b in zip(as_arrays, (starts, lengths, block_of)))


@given(ranges=st.lists(st.tuples(st.integers(0, 300), st.integers(0, 40)), max_size=30),
       max_gap=st.sampled_from([0, 5]))
def test_unsorted_merge_keeps_order_and_joins_only_continuations(ranges, max_gap):
    starts, lengths = merge_ranges([o for o, _ in ranges], [n for _, n in ranges], sort=False, max_gap=max_gap)
    want = []
    for o, n in ranges:  # the rule, written out
        if n == 0:
            continue
        if want and 0 <= o - (want[-1][0] + want[-1][1]) <= max_gap:
            want[-1][1] = o + n - want[-1][0]
        else:
            want.append([o, n])
    assert list(zip(starts.tolist(), lengths.tolist())) == [tuple(w) for w in want]


def test_empty_and_bad_input():
    s, n, b = merge_ranges([5, 9], [0, 0], return_blocks=True)
    assert s.size == n.size == 0 and b.tolist() == [-1, -1]
    with pytest.raises(ValueError, match="2 offsets but 1 lengths"):
        merge_ranges([1, 2], [3])
    with pytest.raises(ValueError, match="max_gap"):
        merge_ranges([1], [3], max_gap=-1)
    with pytest.raises(ValueError, match="max_block"):
        merge_ranges([1], [3], max_block=0)
    with pytest.raises(ValueError, match="2 offsets but 1 keys"):
        merge_ranges([1, 2], [3, 4], keys=[0])
    # unsorted: a key change ends a block even where the next range continues the last
    assert [a.tolist() for a in merge_ranges([0, 10, 20], [10, 10, 5], sort=False, keys=[1, 1, 2])] == \
        [[0, 20], [20, 5]]


def test_mpi_extent_helpers_are_the_planner():
    from hpcbridge.mpi.datatypes import merge_extents
    from hpcbridge.mpi.plan import union_extents

    offsets, lengths = np.array([10, 15, 0, 5, 30, 31]), np.array([5, 2, 6, 0, 1, 1])
    assert [a.tolist() for a in merge_extents(offsets, lengths)] == [[10, 0, 30], [7, 6, 2]]
    assert [a.tolist() for a in union_extents(offsets, lengths)] == [[0, 10, 30], [6, 7, 2]]


def test_read_ranges_reads_merged_blocks(tmp_path, monkeypatch):
    from hpcbridge.fs.posix import PosixRawFile

    data = np.random.default_rng(1).integers(0, 256, 100_000, dtype=np.uint8).tobytes()
    (tmp_path / "f").write_bytes(data)
    fs = hpcbridge.connect("file://")
    ranges = [(10, 100), (50, 10), (5000, 3), (99_990, 50), (200_000, 4), (7, 0), (60_000, 20_000)]
    calls = []
    pread = PosixRawFile.pread
    monkeypatch.setattr(PosixRawFile, "pread", lambda self, n, o: calls.append((o, n)) or pread(self, n, o))
    want = [data[o:o + n] for o, n in ranges]  # as pread: short at the end of the file, empty past it
    assert fs.READ_RANGES_GAP == 64 << 10
    assert fs.read_ranges(str(tmp_path / "f"), ranges) == want
    assert calls == [(10, 100_030), (200_000, 4)]  # gaps under 64 KiB read through
    calls.clear()
    assert fs.read_ranges(str(tmp_path / "f"), ranges, max_gap=0) == want
    assert calls == [(10, 100), (5000, 3), (60_000, 20_000), (99_990, 50), (200_000, 4)]
    calls.clear()
    assert fs.read_ranges(str(tmp_path / "f"), ranges, max_block=30_000) == want
    assert calls == [(10, 5000 - 10 + 3), (60_000, 20_000), (99_990, 50), (200_000, 4)]
