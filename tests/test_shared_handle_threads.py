"""Several threads sharing ONE open file handle (Dask's threaded scheduler, reader pools, MPI
programs with threads), against the same calls on a plain file through ``io.FileIO``/``os.pread``
on one shared descriptor: positional calls are independent of the position, and each sequential
call advances the shared position atomically (the kernel's file position lock; io's buffer lock).
"""

from __future__ import annotations

import io
import os
import random
import sys
import threading
import time

import pytest

import hpcbridge
from hpcbridge.fs.readahead import ReadaheadReader

THREADS = 4
SIZE = 600_000


@pytest.fixture
def tight_switching():
    """Switch threads every microsecond so races show in a few hundred calls."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def run_threads(work, n: int = THREADS) -> None:
    """Run ``work(i)`` on ``n`` threads; re-raise the first error; fail on a hang."""
    errors = []

    def wrapped(i):
        try:
            work(i)
        except BaseException as exc:  # noqa: B902 - reported in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


def urls(tmp_path):
    return {
        "file": f"file://{tmp_path}/f.bin",
        "memory": f"memory://threads-{tmp_path.name}/f.bin",
        "plfs+file": f"plfs+file://{tmp_path}/f.plfs",
    }


@pytest.fixture(params=["file", "memory", "plfs+file"])
def url(request, tmp_path):
    return urls(tmp_path)[request.param]


def write_file(url: str, data: bytes, pieces: int = 0) -> None:
    """Write ``data``; with ``pieces``, as that many shuffled pwrites (PLFS: index records,
    holes filled later)."""
    with hpcbridge.open(url, "wb") as f:
        if not pieces:
            f.write(data)
            return
        step = -(-len(data) // pieces)
        starts = list(range(0, len(data), step))
        random.Random(7).shuffle(starts)
        for start in starts:
            f.pwrite(data[start:start + step], start)


READ_SIZES = [1, 512, 4096, 70_000]


def read_to_the_end(f, i: int, counts: list, data: bytes | None = None) -> None:
    """Thread ``i``'s part of reading ``f`` to its end in reads of mixed sizes, counted in
    ``counts[i]``; with ``data``, each piece of 512 bytes or more must be a slice of it."""
    rng = random.Random(i)
    while got := f.read(rng.choice(READ_SIZES)):
        assert data is None or len(got) < 512 or data.find(got) >= 0
        counts[i] += len(got)


def check_preads(f, i: int, data: bytes, offsets, lengths, calls: int) -> None:
    """Thread ``i``'s positional reads of ``f`` (``pread`` on odd threads, ``preadinto`` on even
    ones) at ``offsets(rng)`` for ``lengths(rng)`` bytes: each the file's bytes there."""
    rng = random.Random(i)
    for _ in range(calls):
        offset, n = offsets(rng), lengths(rng)
        if i % 2:
            assert f.pread(n, offset) == data[offset:offset + n]
        else:
            buffer = bytearray(n)
            got = f.preadinto(buffer, offset)
            assert bytes(buffer[:got]) == data[offset:offset + n]


def write_records(f, record: int, per_thread: int) -> None:
    """Each thread writes ``per_thread`` records of ``record`` bytes of its own letter to ``f``."""
    def work(i):
        for _ in range(per_thread):
            f.write(bytes([65 + i]) * record)
    run_threads(work)


def assert_every_record_once(content: bytes, record: int, per_thread: int) -> None:
    """Every thread's records are in ``content`` once each, none overwritten by another's."""
    assert [content.count(bytes([65 + i])) for i in range(THREADS)] == [per_thread * record] * THREADS


def pwrite_disjoint_ranges(f, data: bytes, ranges) -> None:
    """Threads pwrite ``data``'s ``ranges`` (disjoint), each its share of them."""
    def work(i):
        for a, b in ranges[i::THREADS]:
            assert f.pwrite(data[a:b], a) == b - a
    run_threads(work)


def race_close_with_reads(open_handle, data: bytes, rounds: int, reads: int, longest: int,
                          seek_and_read: bool = False) -> None:
    """Thread 0 closes a handle that the others read at random offsets (``pread``, or with
    ``seek_and_read`` on even threads ``seek`` + ``read``): each read gives the file's bytes or
    raises ValueError/OSError, as reads of an io object being closed do; none hangs."""
    for round_ in range(rounds):
        f = open_handle()
        reading = threading.Event()

        def work(i):
            rng = random.Random(i + 10 * round_)
            if i == 0:
                reading.wait(5)
                f.close()
                return
            for k in range(reads):
                if k == reads // 10:
                    reading.set()
                offset, n = rng.randrange(len(data)), rng.randrange(longest)
                try:
                    if seek_and_read and not i % 2:
                        f.seek(offset)
                        f.read(n)
                        continue
                    got = f.pread(n, offset)
                except (ValueError, OSError):
                    return
                assert got == data[offset:offset + n]
        run_threads(work)


def oracle_sequential_reads(tmp_path, data: bytes, sizes) -> int:
    """What FileIO on one shared descriptor gives threads reading to the end: every byte once."""
    path = tmp_path / "oracle.bin"
    path.write_bytes(data)
    total = 0
    with io.FileIO(path, "r") as f:
        for n in sizes:
            total += len(f.read(n))
    return total


@pytest.mark.parametrize("buffering", [0, -1])
def test_preads_from_threads_equal_the_files_bytes(url, buffering, tight_switching):
    data = random.Random(1).randbytes(SIZE)
    write_file(url, data, pieces=37)
    with hpcbridge.open(url, "rb", buffering=buffering) as f:
        run_threads(lambda i: check_preads(f, i, data, lambda rng: rng.randrange(SIZE + 100),
                                           lambda rng: rng.randrange(40_000), 150))


@pytest.mark.parametrize("buffering", [0, -1])
def test_sequential_reads_from_threads_return_every_byte_once(url, buffering, tight_switching, tmp_path):
    """Threads sharing the position read the file between them, each byte once, as threads
    reading one FileIO do (unbuffered handles used to hand two threads the same bytes)."""
    data = random.Random(2).randbytes(SIZE)
    write_file(url, data)
    got = [[] for _ in range(THREADS)]
    with hpcbridge.open(url, "rb", buffering=buffering) as f:
        def work(i):
            rng = random.Random(i)
            while True:
                position_piece = f.read(rng.choice([1, 512, 4096, 30_000]))
                if not position_piece:
                    return
                got[i].append(position_piece)
        run_threads(work)
    pieces = [p for per_thread in got for p in per_thread]
    assert sum(map(len, pieces)) == len(data) == oracle_sequential_reads(tmp_path, data, [SIZE, 1])
    assert all(data.find(p) >= 0 for p in pieces if len(p) >= 512)  # each piece a slice of the file


@pytest.mark.parametrize("buffering", [0, -1])
def test_sequential_writes_from_threads_lose_no_bytes(url, buffering, tight_switching):
    """Every write lands at its own offset, as with threads writing one FileIO (unbuffered
    memory and PLFS handles used to write two threads' records at one offset)."""
    record = 37
    with hpcbridge.open(url, "wb", buffering=buffering) as f:
        write_records(f, record, 300)
        assert f.tell() == THREADS * 300 * record
    content = hpcbridge.open(url, "rb").read()
    assert len(content) == THREADS * 300 * record
    assert_every_record_once(content, record, 300)


@pytest.mark.parametrize("buffering", [0, -1])
def test_disjoint_pwrites_from_threads_make_the_oracle_file(url, buffering, tight_switching, tmp_path):
    rng = random.Random(3)
    data = rng.randbytes(SIZE)
    cuts = sorted(rng.sample(range(1, SIZE), 150))
    ranges = list(zip([0, *cuts], [*cuts, SIZE]))
    rng.shuffle(ranges)
    with hpcbridge.open(url, "wb", buffering=buffering) as f:
        pwrite_disjoint_ranges(f, data, ranges)
    assert hpcbridge.open(url, "rb").read() == data


def test_close_racing_reads_fails_cleanly(url):
    data = random.Random(4).randbytes(SIZE)
    write_file(url, data, pieces=11)
    race_close_with_reads(lambda: hpcbridge.open(url, "rb"), data, rounds=5, reads=400, longest=20_000)


# -- the readahead window (HDFS's buffered reader), over a memory file ----------------------

def readahead_reader(tmp_path, data: bytes) -> ReadaheadReader:
    url = f"memory://threads-ra-{tmp_path.name}/f.bin"
    write_file(url, data)
    fs, path = hpcbridge.url_to_fs(url)
    return ReadaheadReader(fs.open(path, "rb", buffering=0), readahead=64 << 10)


def test_readahead_reads_from_threads_return_slices_of_the_file(tmp_path, tight_switching):
    """Each read through the window returns bytes of the file at the position it read from, as
    io.BufferedReader does under its lock (the window's fast path used to pair one chunk's
    offset with another chunk's bytes)."""
    data = random.Random(5).randbytes(SIZE)
    f = readahead_reader(tmp_path, data)

    def work(i):
        rng = random.Random(i)
        for _ in range(300):
            if rng.random() < 0.1:
                f.seek(rng.randrange(SIZE))
            got = f.read(rng.choice([100, 4096, 70_000]))
            assert not got or data.find(got) >= 0
    try:
        run_threads(work)
    finally:
        f.close()


def test_readahead_sequential_reads_from_threads_return_every_byte_once(tmp_path, tight_switching):
    data = random.Random(6).randbytes(SIZE)
    f = readahead_reader(tmp_path, data)
    counts = [0] * THREADS
    try:
        run_threads(lambda i: read_to_the_end(f, i, counts))
        assert sum(counts) == SIZE and f.tell() == SIZE
    finally:
        f.close()


@pytest.mark.parametrize("backend", ["file", "memory"])
def test_pwrite_on_a_read_write_handle_keeps_another_threads_position(backend, tmp_path, tight_switching):
    """A pwrite never moves the position (os.pwrite on a descriptor another thread reads): the
    reader reads the file once. pwrite used to tell, seek to the end and seek back, undoing a
    read another thread made meanwhile, which then read those bytes again."""
    url = urls(tmp_path)[backend]
    data = random.Random(8).randbytes(SIZE)
    write_file(url, data)
    for round_ in range(4):
        read = [0]
        done = threading.Event()
        with hpcbridge.open(url, "r+b") as f:
            def work(i):
                rng = random.Random(i + 2 * round_)
                if i == 0:
                    while not done.is_set():
                        offset = rng.randrange(SIZE - 100)
                        f.pwrite(data[offset:offset + 100], offset)  # the same bytes: content unchanged
                    return
                try:
                    while chunk := f.read(1024):
                        read[0] += len(chunk)
                finally:
                    done.set()
            run_threads(work, 2)
        assert read[0] == SIZE


@pytest.mark.parametrize("backend", ["file", "memory"])  # PLFS handles are read-only or write-only
def test_pwrite_on_a_read_write_handle_is_seen_by_the_next_read(backend, tmp_path):
    """The read buffer is dropped by a pwrite (as the bytes of os.pwrite are seen by the next read)."""
    url = urls(tmp_path)[backend]
    write_file(url, b"a" * 100)
    with hpcbridge.open(url, "r+b") as f:
        assert f.read(10) == b"a" * 10
        f.pwrite(b"B" * 20, 10)
        assert f.tell() == 10
        assert f.read(5) == b"BBBBB" and f.tell() == 15


def test_plfs_close_racing_reads_closes_every_log_and_never_pulls_one_from_under_a_read(
        tmp_path, tight_switching):
    """close() while other threads read: they end with ValueError or their bytes, as a read of a
    io.BufferedReader being closed does; never EBADF (the data log's descriptor closed under a
    read, whose number another open could have taken: another file's bytes), and once every
    read ended no descriptor of the container is left open (a read that passed the open check
    as close ran used to reopen a log that nothing closed)."""
    url = urls(tmp_path)["plfs+file"]
    container = str(tmp_path / "f.plfs")
    data = random.Random(9).randbytes(SIZE)
    write_file(url, data, pieces=23)

    def open_logs():
        fds = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                if os.readlink(f"/proc/self/fd/{fd}").startswith(container):
                    fds.append(fd)
            except OSError:
                pass
        return fds

    for round_ in range(15):
        f = hpcbridge.open(url, "rb", buffering=0)

        def work(i):
            rng = random.Random(i + 10 * round_)
            if i == 0:
                time.sleep(0.001 * rng.random())
                f.close()
                return
            for _ in range(100):
                offset, n = rng.randrange(SIZE), rng.randrange(30_000)
                try:
                    got = f.pread(n, offset)
                except ValueError:
                    return
                assert got == data[offset:offset + n]
        run_threads(work)
        assert open_logs() == []


def test_block_cache_file_sequential_reads_from_threads_return_every_byte_once(tmp_path, tight_switching):
    """hdf5's BlockCacheFile (xarray's file object) shared by threads outside h5py: each byte
    read once, as from one FileIO (two threads used to read the same bytes)."""
    from hpcbridge.hdf5.cache import BlockCacheFile

    url = urls(tmp_path)["memory"]
    data = random.Random(10).randbytes(SIZE)
    write_file(url, data)
    fs, path = hpcbridge.url_to_fs(url)
    f = BlockCacheFile(fs.open(path, "rb", buffering=0), SIZE, url, block=16 << 10)
    counts = [0] * THREADS
    try:
        run_threads(lambda i: read_to_the_end(f, i, counts))
    finally:
        f.close()
    assert sum(counts) == SIZE
