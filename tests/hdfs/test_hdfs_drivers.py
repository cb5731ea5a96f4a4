"""The two HDFS drivers against each other: bytes written by one read back identical by the other,
and what each does after fork() (the JVM does not survive it; hdfs-native reconnects)."""

import multiprocessing
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import hpcbridge
from hpcbridge.errors import ForkSafetyError

pytestmark = pytest.mark.hdfs
MiB = 1 << 20


@pytest.fixture
def drivers(hdfs_cluster):
    info = hdfs_cluster.info
    web = f"http://127.0.0.1:{info.http_port}"
    return {d: hpcbridge.connect(info.url, webhdfs=web, driver=d) for d in ("native", "libhdfs")}


@pytest.mark.parametrize("writer,reader", [("native", "libhdfs"), ("libhdfs", "native")])
def test_cross_driver_round_trip_is_byte_identical(drivers, hdfs_root, writer, reader):
    data = np.random.default_rng(7).integers(0, 256, 5 * MiB + 4321, dtype=np.uint8).tobytes()
    path = f"{hdfs_root}/{writer}-to-{reader}.bin"
    with drivers[writer].create(path, block_size=MiB, replication=2) as f:
        f.write(data[:MiB + 1])
        f.write(memoryview(data)[MiB + 1:])
    with drivers[writer].open(path, "ab") as f:
        f.write(b"appended")
    info_w, info_r = drivers[writer].info(path), drivers[reader].info(path)
    assert (info_r.size, info_r.block_size, info_r.replication) == (len(data) + 8, MiB, 2)
    assert (info_r.owner, info_r.mode, info_r.size) == (info_w.owner, info_w.mode, info_w.size)
    assert drivers[reader].read_bytes(path) == data + b"appended"
    with drivers[reader].open(path, "rb") as f:  # positional reads across block boundaries
        assert f.pread(100, MiB - 50) == data[MiB - 50:MiB + 50]
    assert sorted(drivers[reader].ls(hdfs_root)) == sorted(drivers[writer].ls(hdfs_root))


def _child_call(fs, path, out):
    try:
        out.put(("ok", fs.read_bytes(path)))
    except ForkSafetyError as exc:
        out.put(("ForkSafetyError", str(exc)))
    except Exception as exc:  # reported to the parent, which asserts
        out.put((type(exc).__name__, str(exc)))


def _in_forked_child(fs, path):
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_child_call, args=(fs, path, out))
    child.start()
    try:
        result = out.get(timeout=30)  # a deadlocked JVM call would never answer
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join()
    return result


def test_forked_child_refuses_instead_of_hanging(drivers, hdfs_root):
    path = f"{hdfs_root}/fork.bin"
    drivers["native"].write_bytes(path, b"before fork")
    assert drivers["libhdfs"].read_bytes(path) == b"before fork"  # the JVM runs in this process now
    kind, detail = _in_forked_child(drivers["libhdfs"], path)
    assert kind == "ForkSafetyError" and "spawn" in detail and f"pid {os.getpid()}" in detail, (kind, detail)
    # a fresh libhdfs connection in the child is refused the same way
    assert _in_forked_child(hpcbridge.connect(drivers["libhdfs"].url("/"), driver="libhdfs",
                                              webhdfs=drivers["libhdfs"].webhdfs.base), path)[0] == "ForkSafetyError"
    # hdfs-native's runtime threads are gone in the child as well (a call there hung before)
    kind, detail = _in_forked_child(drivers["native"], path)
    assert kind == "ForkSafetyError" and "driver='native'" in detail, (kind, detail)
    # the parent's connections still work
    assert drivers["libhdfs"].read_bytes(path) == drivers["native"].read_bytes(path) == b"before fork"


_FORK_FIRST = """
import os, sys, hpcbridge
fs = hpcbridge.connect(sys.argv[1], driver=sys.argv[2], webhdfs=sys.argv[3])
pid = os.fork()  # before this process's first HDFS call: the child may use HDFS
data = fs.read_bytes(sys.argv[4])
if pid == 0:
    os._exit(0 if data == b"early" else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("driver", ["native", "libhdfs"])
def test_fork_before_the_first_call_is_fine(hdfs_cluster, hdfs_admin, hdfs_root, driver):
    import subprocess
    import sys

    info = hdfs_cluster.info
    hdfs_admin.write_bytes(f"{hdfs_root}/early", b"early")
    run = subprocess.run([sys.executable, "-c", _FORK_FIRST, info.url, driver, f"http://127.0.0.1:{info.http_port}",
                          f"{hdfs_root}/early"], timeout=120, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]


def _spawned_read(url, path, driver, webhdfs):
    fs = hpcbridge.connect(url, driver=driver, webhdfs=webhdfs)
    return fs.read_bytes(path)


def test_spawned_workers_use_libhdfs(drivers, hdfs_root, hdfs_cluster):
    """The way out the error names: 'spawn' children start their own JVM."""
    path = f"{hdfs_root}/spawn.bin"
    drivers["libhdfs"].write_bytes(path, b"x" * 1000)
    info = hdfs_cluster.info
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        got = pool.starmap(_spawned_read, [(info.url, path, "libhdfs", f"http://127.0.0.1:{info.http_port}")] * 2)
    assert got == [b"x" * 1000] * 2


def test_libhdfs_under_the_call_pool_with_many_threads(drivers, hdfs_root):
    """Concurrent calls from many Python threads run on the connection's fixed pool (threads attach
    to the JVM once; seed 003 saw memory leak with a fresh thread per call)."""
    from concurrent.futures import ThreadPoolExecutor

    fs = drivers["libhdfs"]
    for i in range(16):
        fs.write_bytes(f"{hdfs_root}/t{i}", bytes([i]) * 1000)
    with ThreadPoolExecutor(32) as ex:
        got = list(ex.map(lambda i: fs.read_bytes(f"{hdfs_root}/t{i % 16}"), range(200)))
    assert got == [bytes([i % 16]) * 1000 for i in range(200)]
    assert fs.pool._threads <= fs.pool.workers


_H5_AFTER_JVM = """
import sys, h5py, numpy as np, hpcbridge
fs = hpcbridge.connect(sys.argv[1], webhdfs=sys.argv[2], driver="libhdfs")
fs.mkdir(sys.argv[3], parents=True, exist_ok=True)
with fs.open(sys.argv[3] + "/x.bin", "wb") as f:  # the JVM starts; this (main) thread calls into it
    f.write(b"x" * 1000)
assert fs.read_bytes(sys.argv[3] + "/x.bin") == b"x" * 1000
with h5py.File(sys.argv[4], "w") as f:  # h5py's LZF filter keeps a 1 MiB table on the stack
    f.create_dataset("lzf", data=np.arange(1000), compression="lzf")
with h5py.File(sys.argv[4], "r") as f:
    assert (f["lzf"][...] == np.arange(1000)).all()
print("ok")
"""


def test_main_thread_stack_survives_the_jvm(hdfs_cluster, hdfs_root, tmp_path):
    # HotSpot takes the main thread's stack to be -Xss long and puts guard pages there: with
    # the default 1 MiB, native code with big frames on the main thread died with SIGSEGV
    # after libhdfs had started the JVM. The driver sets -Xss to the stack limit; the run with
    # the old default shows what the test guards against.
    info = hdfs_cluster.info
    args = [sys.executable, "-c", _H5_AFTER_JVM, info.url, f"http://127.0.0.1:{info.http_port}"]
    env = {k: v for k, v in os.environ.items() if k != "LIBHDFS_OPTS"}
    run = subprocess.run(args + [f"{hdfs_root}/jvm-stack", str(tmp_path / "a.h5")], env=env,
                         capture_output=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == b"ok", run.stderr.decode()[-2000:]
    run = subprocess.run(args + [f"{hdfs_root}/jvm-stack-1m", str(tmp_path / "b.h5")],
                         env=dict(env, LIBHDFS_OPTS="-Xss1m"), capture_output=True, timeout=300)
    assert run.returncode == -signal.SIGSEGV, (run.returncode, run.stderr.decode()[-2000:])
