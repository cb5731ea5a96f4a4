"""The call pool (timeouts, bounded threads, LIFO reuse) and the readahead reader, without a cluster."""

import io
import os
import threading
import time

import pytest

import hpcbridge
from hpcbridge.errors import BackendUnavailable
from hpcbridge.fs import pool as pool_module
from hpcbridge.fs.pool import CallPool
from hpcbridge.fs.readahead import ReadaheadReader


def test_call_returns_results_and_raises_errors():
    pool = CallPool(2, "svc")
    assert pool.call(5, "add", lambda a, b: a + b, 2, 3) == 5
    with pytest.raises(KeyError):
        pool.call(5, "fail", {}.__getitem__, "x")


def test_an_idle_thread_keeps_no_reference_to_a_calls_arguments():
    """A view of the caller's buffer passed to a call is released when the call returns, so the
    caller can resize the buffer (RawFile.pread trims its bytearray: BufferError otherwise)."""
    pool = CallPool(1, "svc")
    buffer = bytearray(8)

    def fill(view):
        view[:3] = b"abc"
        return 3

    for _ in range(3):  # the same (now idle) thread each time
        n = pool.call(5, "fill", fill, memoryview(buffer)[:5])
        del buffer[n:]
        assert buffer == b"abc"
        buffer.extend(bytes(5))


def test_call_times_out_with_backend_unavailable():
    pool = CallPool(1, "hdfs://dead:1")
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match=r"hdfs://dead:1 did not answer stat /x within 0.3 s"):
        pool.call(0.3, "stat /x", time.sleep, 5)
    assert time.monotonic() - started < 2


def test_pool_is_bounded_and_sequential_calls_stay_on_one_thread():
    pool = CallPool(3, "b")
    names = {pool.call(5, "who", lambda: threading.current_thread().name) for _ in range(50)}
    assert len(names) == 1  # one-at-a-time calls reuse the most recently idle thread
    barrier = threading.Barrier(3, timeout=5)
    futures = [pool.submit(barrier.wait) for _ in range(3)]  # needs three threads at once
    assert sorted(f.result(5) for f in futures) == [0, 1, 2]
    blocked = [pool.submit(time.sleep, 0.2) for _ in range(6)]  # more calls than threads queue up
    assert all(f.result(5) is None for f in blocked)
    assert pool._threads == 3
    with pytest.raises(ValueError):
        CallPool(0)


def test_idle_threads_leave_and_come_back_on_demand(monkeypatch):
    """A process making many connections (one pool each) keeps no thread per connection it
    stopped using: idle workers leave after IDLE_EXIT seconds; the pool starts new ones."""
    monkeypatch.setattr(pool_module, "IDLE_EXIT", 0.2)
    names = [f"idle-test-svc{i}" for i in range(5)]

    def alive():  # this test's pool threads only: threads of earlier tests' pools may end meanwhile
        return sum(t.name.rsplit("-", 1)[0] in names for t in threading.enumerate())

    pools = [CallPool(4, name) for name in names]
    for pool in pools:
        barrier = threading.Barrier(4, timeout=5)
        futures = [pool.submit(barrier.wait) for _ in range(4)]  # four threads at once
        assert sorted(f.result(5) for f in futures) == [0, 1, 2, 3]
    assert alive() == 20
    deadline = time.monotonic() + 5
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive() == 0
    assert all(pool._threads == 0 and not pool._idle for pool in pools)
    assert pools[0].call(5, "add", lambda a, b: a + b, 2, 3) == 5  # a new thread serves it
    assert pools[0]._threads == 1


def test_stuck_calls_do_not_block_interpreter_exit(tmp_path):
    import subprocess
    import sys

    code = ("from hpcbridge.fs.pool import CallPool; import time\n"
            "p = CallPool(1, 'x')\n"
            "try:\n    p.call(0.1, 'hang', time.sleep, 3600)\nexcept Exception as e:\n    print(type(e).__name__)\n")
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30).stdout
    assert out.strip() == "BackendUnavailable" and time.monotonic() - started < 20


def test_exit_waits_for_calls_in_flight(tmp_path):
    # A native call (hdfs-native under PyO3) returning while CPython < 3.14 finalizes aborts the
    # process; exit therefore lets calls in flight end first. Here: a call ending 1 s after the
    # main thread is done still runs to its end.
    import subprocess
    import sys

    done = tmp_path / "done"
    code = ("from hpcbridge.fs.pool import CallPool; import pathlib, time\n"
            "def slow():\n    time.sleep(1)\n    pathlib.Path(%r).write_text('ok')\n"
            "CallPool(1, 'x').submit(slow)\n" % str(done))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert done.read_text() == "ok"


def test_an_interrupted_caller_lets_the_running_call_end_first():
    # Ctrl-C while a call runs: the caller's cleanup must find the client object free (hdfs-native
    # answered "Already borrowed" and the process aborted), so the KeyboardInterrupt is raised
    # only once the call has ended.
    import signal

    ended = []

    def slow():
        time.sleep(0.5)
        ended.append(True)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(KeyboardInterrupt):
            CallPool(1, "x").call(5, "slow", slow)
        assert ended == [True]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def memory_file():
    fs = hpcbridge.connect("memory://readahead-tests")
    data = os.urandom(5 << 20)
    fs.write_bytes("/f", data)
    yield fs, data
    fs.clear()


def reader(fs, readahead=1 << 20, **kw):
    return ReadaheadReader(fs.open("/f", "rb", buffering=0), readahead, **kw)


def test_sequential_small_reads_fill_windows(memory_file):
    fs, data = memory_file
    with reader(fs) as f:
        out = b"".join(iter(lambda: f.read(4096), b""))
        assert out == data
        assert f.stats.fills == 5 and f.stats.direct == 0 and f.stats.bytes_fetched == len(data)


def test_random_reads_fetch_only_what_they_ask(memory_file):
    fs, data = memory_file
    with reader(fs) as f:
        for offset in (3_000_000, 100, 4_000_000, 2_000):
            f.seek(offset)
            assert f.read(1000) == data[offset:offset + 1000]
        assert f.stats.fills == 0 and f.stats.direct == 4 and f.stats.bytes_fetched == 4000
        f.read(1000)  # continues where the last read ended: sequential again, readahead resumes
        assert f.stats.fills == 1


def test_large_reads_bypass_the_window(memory_file):
    fs, data = memory_file
    with reader(fs) as f:
        buffer = bytearray(2 << 20)
        assert f.readinto(buffer) == len(buffer) and buffer == data[:2 << 20]
        assert f.stats.fills == 0 and f.stats.direct == 1


def test_reads_of_a_mebibyte_skip_the_window_unless_prefetching(memory_file):
    """read(1 MiB) through a 4 MiB window held four chunks at once and cost the allocator fresh
    memory every window (libhdfs: 203 vs 105 ms per 128 MiB): such reads go to the raw file."""
    fs, data = memory_file
    with reader(fs, readahead=4 << 20) as f:
        assert b"".join(iter(lambda: f.read(1 << 20), b"")) == data
        assert f.stats.fills == 0 and f.stats.direct == 5
    pool = CallPool(2, "pf")
    with reader(fs, readahead=4 << 20, prefetch=True, submit=pool.submit) as f:
        assert b"".join(iter(lambda: f.read(1 << 20), b"")) == data
        assert f.stats.direct == 0 and f.stats.prefetched == 1  # prefetching needs the window


def test_mixed_reads_seek_tell_peek_readline(memory_file):
    fs, _ = memory_file
    text = b"".join(b"line %d\n" % i for i in range(100_000))
    fs.write_bytes("/t", text)
    with ReadaheadReader(fs.open("/t", buffering=0), 64 << 10) as f:
        assert f.readline() == b"line 0\n"
        assert f.peek(3)[:3] == b"lin"
        assert f.tell() == 7
        assert f.readlines()[-1] == b"line 99999\n"
        assert f.read() == b"" and f.read(10) == b""
        f.seek(-11, io.SEEK_END)
        assert f.read() == b"line 99999\n"
        assert f.pread(4, 0) == b"line" and f.tell() == len(text)
    with pytest.raises(ValueError):
        f.read(1)


def test_prefetch_uses_the_pool(memory_file):
    fs, data = memory_file
    pool = CallPool(2, "pf")
    with reader(fs, prefetch=True, submit=pool.submit) as f:
        assert b"".join(iter(lambda: f.read(65536), b"")) == data
        assert f.stats.prefetched == 4
    with reader(fs, prefetch=True, submit=pool.submit, prefetch_size=2 << 20) as f:  # 1 MiB, then 2 MiB windows
        assert b"".join(iter(lambda: f.read(65536), b"")) == data
        assert (f.stats.fills, f.stats.prefetched) == (3, 2)
    with pytest.raises(ValueError, match="submit"):
        reader(fs, prefetch=True)


def test_more_prefetching_readers_than_pool_threads(memory_file):
    # Each prefetch runs on the pool and reads through the same pool (as HDFS files do): with
    # more prefetching readers than threads, nested calls used to wait for threads held by
    # their own callers until the I/O timeout.
    fs, data = memory_file
    pool = CallPool(2, "pf")

    class PooledRaw:
        def __init__(self, raw):
            self.raw, self.url = raw, raw.url

        def size(self):
            return self.raw.size()

        def fetch(self, size, offset):
            return [pool.call(5, "read", self.raw.pread, size, offset)]

        def pread(self, size, offset):
            return pool.call(5, "read", self.raw.pread, size, offset)

        def preadinto(self, buffer, offset):
            return pool.call(5, "read", self.raw.preadinto, buffer, offset)

        def close(self):
            self.raw.close()

    started = time.monotonic()
    readers = [ReadaheadReader(PooledRaw(fs.open("/f", "rb", buffering=0)), 1 << 20, prefetch=True,
                               submit=pool.submit) for _ in range(6)]
    for r in readers:
        r.read(1000)  # a fill each: six prefetches queued on two threads
    for r in readers:
        assert r.read() == data[1000:]
        r.close()
    assert time.monotonic() - started < 4


def test_errors_name_the_url(memory_file):
    fs, _ = memory_file
    with reader(fs) as f:
        with pytest.raises(io.UnsupportedOperation, match="memory://readahead-tests/f is open read-only"):
            f.write(b"x")
        with pytest.raises(ValueError, match="negative offset"):
            f.pread(1, -1)
        with pytest.raises(ValueError, match="negative seek"):
            f.seek(-1)
