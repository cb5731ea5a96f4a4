"""Several threads sharing ONE open ``hdfs://`` or ``plfs+hdfs://`` handle (both drivers),
against the file's bytes as ``os.pread`` on one shared descriptor returns them: positional reads
across block boundaries and the readahead window, reads through the shared window, sequential
writes, and close racing reads. The memory and POSIX cases: tests/test_shared_handle_threads.py.
"""

from __future__ import annotations

import random

import pytest

import hpcbridge
from tests.test_shared_handle_threads import (assert_every_record_once, check_preads, pwrite_disjoint_ranges,
                                              race_close_with_reads, read_to_the_end, run_threads, write_records)
from tests.test_shared_handle_threads import tight_switching  # noqa: F401 - a fixture

pytestmark = pytest.mark.hdfs

BLOCK = 256 << 10  # small blocks: every read below crosses block boundaries
SIZE = 3 * BLOCK + 12_345
THREADS = 4


@pytest.fixture
def shared(hdfs_cluster, hdfs_options, hdfs_root):
    """``(fs, path, data)``: a file of SIZE random bytes in BLOCK-sized HDFS blocks."""
    fs = hpcbridge.connect(hdfs_cluster.info.url, **hdfs_options)
    data = random.Random(11).randbytes(SIZE)
    path = f"{hdfs_root}/f.bin"
    with fs.create(path, block_size=BLOCK) as f:
        f.write(data)
    return fs, path, data


@pytest.mark.parametrize("buffering", [0, -1])
def test_preads_from_threads_across_blocks(shared, buffering):
    fs, path, data = shared
    with fs.open(path, "rb", buffering=buffering) as f:
        def offsets(rng):  # anywhere, or just before a block boundary
            return rng.choice([rng.randrange(SIZE + 10), rng.randrange(1, 4) * BLOCK - rng.randrange(100)])
        run_threads(lambda i: check_preads(f, i, data, offsets, lambda rng: rng.randrange(2 * BLOCK), 40))


@pytest.mark.parametrize("prefetch", [False, True])
def test_reads_through_the_shared_window_return_every_byte_once(hdfs_cluster, hdfs_options, shared, prefetch):
    """Threads reading one buffered handle (the readahead window, and with ``prefetch`` the
    background block fetch) read the file between them: each piece a slice of it, each byte once,
    as threads reading one io.BufferedReader; mixed with positional reads of other threads."""
    _, path, data = shared
    fs = hpcbridge.connect(hdfs_cluster.info.url, readahead=64 << 10, prefetch=prefetch, **hdfs_options)
    counts = [0] * THREADS
    with fs.open(path, "rb") as f:
        def work(i):
            rng = random.Random(i)
            if i == THREADS - 1:  # a positional reader beside the sequential ones
                for _ in range(30):
                    offset, n = rng.randrange(SIZE), rng.randrange(50_000)
                    assert f.pread(n, offset) == data[offset:offset + n]
                return
            read_to_the_end(f, i, counts, data)
        run_threads(work)
        assert sum(counts) == SIZE and f.tell() == SIZE


@pytest.mark.parametrize("buffering", [0, -1])
def test_sequential_writes_from_threads_lose_no_bytes(hdfs_cluster, hdfs_options, hdfs_root, buffering):
    fs = hpcbridge.connect(hdfs_cluster.info.url, **hdfs_options)
    url = f"{hdfs_root}/w.bin"
    record = 1000
    with fs.open(url, "wb", buffering=buffering) as f:
        write_records(f, record, 50)
        assert f.tell() == THREADS * 50 * record
    content = fs.read_bytes(url)
    assert len(content) == THREADS * 50 * record
    # each write whole: every record-aligned piece is one thread's byte
    assert all(len(set(content[k:k + record])) == 1 for k in range(0, len(content), record))


def test_close_racing_reads_fails_cleanly(shared):
    fs, path, data = shared
    race_close_with_reads(lambda: fs.open(path, "rb"), data, rounds=3, reads=40, longest=100_000, seek_and_read=True)


# -- plfs+hdfs: data logs in HDFS blocks, reads across index records and holes ---------------

@pytest.fixture
def plfs_shared(hdfs_cluster, hdfs_options, hdfs_root):
    """``(fs, path, data)``: a container written as shuffled pwrites of 10 KiB with a hole."""
    fs = hpcbridge.connect(f"plfs+hdfs://127.0.0.1:{hdfs_cluster.info.rpc_port}/", **hdfs_options)
    rng = random.Random(12)
    data = bytearray(rng.randbytes(SIZE))
    data[50_000:80_000] = bytes(30_000)  # a hole: never written, reads as zeros
    path = f"{hdfs_root}/f.plfs"
    starts = [s for s in range(0, SIZE, 10_000) if not 50_000 <= s < 80_000]
    rng.shuffle(starts)
    with fs.open(path, "wb") as f:
        for s in starts:
            f.pwrite(data[s:s + 10_000], s)
    return fs, path, bytes(data)


@pytest.mark.parametrize("buffering", [0, -1])
def test_plfs_preads_from_threads_across_records_and_holes(plfs_shared, buffering):
    fs, path, data = plfs_shared
    with fs.open(path, "rb", buffering=buffering) as f:
        def work(i):
            rng = random.Random(i)
            for _ in range(40):
                offset, n = rng.randrange(SIZE + 10), rng.randrange(100_000)
                assert f.pread(n, offset) == data[offset:offset + n]
        run_threads(work)


@pytest.mark.usefixtures("tight_switching")
@pytest.mark.parametrize("buffering", [0, -1])
def test_plfs_writes_and_pwrites_from_threads(hdfs_cluster, hdfs_options, hdfs_root, buffering):
    """Sequential writes land once each; disjoint pwrites make the oracle file."""
    fs = hpcbridge.connect(f"plfs+hdfs://127.0.0.1:{hdfs_cluster.info.rpc_port}/", **hdfs_options)
    record = 1000
    with fs.open(f"{hdfs_root}/w.plfs", "wb", buffering=buffering) as f:
        write_records(f, record, 50)
    assert_every_record_once(fs.read_bytes(f"{hdfs_root}/w.plfs"), record, 50)
    data = random.Random(13).randbytes(SIZE)
    ranges = [(s, min(s + 7_777, SIZE)) for s in range(0, SIZE, 7_777)]
    with fs.open(f"{hdfs_root}/p.plfs", "wb", buffering=buffering) as f:
        pwrite_disjoint_ranges(f, data, ranges)
    assert fs.read_bytes(f"{hdfs_root}/p.plfs") == data


def test_plfs_close_racing_reads_fails_cleanly(plfs_shared):
    fs, path, data = plfs_shared
    race_close_with_reads(lambda: fs.open(path, "rb"), data, rounds=3, reads=40, longest=100_000)
