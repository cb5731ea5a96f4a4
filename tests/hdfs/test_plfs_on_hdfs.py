"""PLFS containers on the real HDFS cluster: N-1 writes where HDFS alone allows one writer per
file and no positional writes."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hpcbridge
import hpcbridge.plfs
from hpcbridge.plfs.format import RECORD_SIZE

pytestmark = pytest.mark.hdfs


@pytest.fixture
def plfs_url(hdfs_cluster, hdfs_root):
    return f"plfs+hdfs://127.0.0.1:{hdfs_cluster.info.rpc_port}{hdfs_root}"


def test_n1_strided_checkpoint_into_hdfs(plfs_url, hdfs_options, hdfs):
    S, P, n = 47001, 4, 40
    writers = [hpcbridge.plfs.open(f"{plfs_url}/ckpt", "wb", shared=True, **hdfs_options) for _ in range(P)]
    for r, w in enumerate(writers):  # each writer's writes in order, as one rank's
        for i in range(n):
            w.pwrite(np.full(S, (r * 7 + i) % 251 + 1, np.uint8), i * P * S + r * S)
    for w in writers:
        w.close()
    fs = hpcbridge.connect(plfs_url.split("/tests/")[0] + "/", **hdfs_options)
    path = "/tests/" + plfs_url.split("/tests/")[1] + "/ckpt"
    assert fs.info(path).size == n * P * S
    with fs.open(path) as f:
        for r in range(P):
            for i in (0, n // 2, n - 1):
                assert f.pread(S, i * P * S + r * S) == bytes([(r * 7 + i) % 251 + 1]) * S
    container = fs.container(path)
    assert [hdfs.info(p).size for _, _, p in container.index_logs()] == [RECORD_SIZE] * P  # one pattern each
    blocks = fs.block_locations(path)
    assert blocks[0].offset == 0 and blocks[-1].end == n * P * S
    assert {h for b in blocks for h in b.hosts} <= {"127.0.0.2", "127.0.0.3", "127.0.0.4"}


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 300_000), st.integers(1, 100_000)),
                    min_size=1, max_size=16))
def test_overlapping_writers_on_hdfs_match_the_model(plfs_url, hdfs_options, ops):
    url = f"{plfs_url}/ow-{abs(hash(tuple(ops)))}"
    model = bytearray()
    writers = {}
    for step, (w, offset, length) in enumerate(ops):
        if w not in writers:
            writers[w] = hpcbridge.plfs.open(url, "wb", shared=True, **hdfs_options)
        payload = bytes([step % 251 + 1]) * length
        writers[w].pwrite(payload, offset)
        model.extend(bytes(max(0, offset + length - len(model))))
        model[offset:offset + length] = payload
    for w in writers.values():
        w.close()
    with hpcbridge.plfs.open(url, "rb", **hdfs_options) as f:
        assert f.read() == bytes(model)


def _args(options):
    return [options["webhdfs"], options["driver"]]


_CRASHER = textwrap.dedent("""
    import sys, hpcbridge.plfs
    f = hpcbridge.plfs.open(sys.argv[1], "wb", shared=True, webhdfs=sys.argv[2], driver=sys.argv[3])
    i = 0
    while True:
        f.pwrite(bytes([i % 251 + 1]) * 1000, i * 1000)
        i += 1
        if i % 100 == 0:
            f.sync()
            print(i, flush=True)
""")


def test_writer_killed_mid_write_on_hdfs(plfs_url, hdfs_options):
    proc = subprocess.Popen([sys.executable, "-c", _CRASHER, f"{plfs_url}/crash", *_args(hdfs_options)],
                            stdout=subprocess.PIPE, text=True)
    synced = 0
    deadline = time.monotonic() + 120
    while synced < 300 and time.monotonic() < deadline:
        synced = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    from hpcbridge.cli.main import main

    assert main(["plfs", "check", f"{plfs_url}/crash"]) == 1  # the unclosed writer is reported
    assert main(["plfs", "recover", f"{plfs_url}/crash"]) == 0  # HDFS lease recovery of its logs
    assert main(["plfs", "check", f"{plfs_url}/crash"]) == 0
    with hpcbridge.plfs.open(f"{plfs_url}/crash", "rb", **hdfs_options) as f:
        data = f.read()
    assert len(data) >= synced * 1000
    for i in range(synced):  # every byte synced before the kill reads back right
        assert data[i * 1000:(i + 1) * 1000] == bytes([i % 251 + 1]) * 1000


def test_corrupt_index_record_on_hdfs(plfs_url, hdfs_options, hdfs):
    from hpcbridge.plfs.container import PlfsCorruptionError

    writers = [hpcbridge.plfs.open(f"{plfs_url}/bad", "wb", shared=True, **hdfs_options) for _ in range(3)]
    for r, w in enumerate(writers):
        w.pwrite(bytes([r + 1]) * 100, r * 100)
        w.close()
    fs = hpcbridge.connect(plfs_url.split("/tests/")[0] + "/", **hdfs_options)
    path = "/tests/" + plfs_url.split("/tests/")[1] + "/bad"
    victim_writer, _, victim = fs.container(path).index_logs()[0]
    raw = bytearray(hdfs.read_bytes(victim))
    raw[20] ^= 0x01  # the physical offset: checksum mismatch
    hdfs.write_bytes(victim, bytes(raw))  # HDFS has no in-place write: rewrite the log
    with pytest.raises(PlfsCorruptionError, match=r"corrupt index: hdfs://\S+: record 0: checksum mismatch"):
        fs.read_bytes(path)
    data = hpcbridge.connect(plfs_url.split("/tests/")[0] + "/", **hdfs_options, on_corruption="skip").read_bytes(path)
    data = data.ljust(300, b"\0")  # dropping the last writer's record also shortens the file
    for r, w in enumerate(writers):
        expected = bytes(100) if w.writer_id == victim_writer else bytes([r + 1]) * 100
        assert data[r * 100:(r + 1) * 100] == expected


_FLUSH_THEN_KILL = textwrap.dedent("""
    import os, signal, sys, hpcbridge.plfs
    f = hpcbridge.plfs.open(sys.argv[1], "wb", shared=True, webhdfs=sys.argv[2], driver=sys.argv[3])
    for i in range(189):
        f.pwrite(bytes([i % 251 + 1]) * 1024, i * 1024)
    f.flush()  # flush, not sync: on HDFS it must still keep these bytes when the writer dies
    f.pwrite(b"lost" * 1000, 0)
    os.kill(os.getpid(), signal.SIGKILL)
""")
_WRITE_AND_CLOSE = textwrap.dedent("""
    import sys, hpcbridge.plfs
    f = hpcbridge.plfs.open(sys.argv[1], "wb", shared=True, webhdfs=sys.argv[2], driver=sys.argv[3])
    f.pwrite(b"N" * 1024, 0)
    f.close()
""")


def test_flushed_data_survives_a_killed_writer_on_hdfs_and_a_later_process_wins(plfs_url, hdfs_options):
    """The integrity review's cases 3 and 1 on HDFS: flush() and SIGKILL left data but an empty
    index (size 0 after recovery); a new process's write at the same offset lost to the dead one."""
    from hpcbridge.cli.main import main

    url = f"{plfs_url}/flushed"
    killed = subprocess.run([sys.executable, "-c", _FLUSH_THEN_KILL, url, *_args(hdfs_options)], timeout=120)
    assert killed.returncode == -signal.SIGKILL
    assert main(["plfs", "recover", url]) == 0
    expected = bytearray(b"".join(bytes([i % 251 + 1]) * 1024 for i in range(189)))
    with hpcbridge.plfs.open(url, "rb", **hdfs_options) as f:
        assert f.read() == expected
    assert main(["plfs", "check", "--deep", url]) == 0
    done = subprocess.run([sys.executable, "-c", _WRITE_AND_CLOSE, url, *_args(hdfs_options)], timeout=120)
    assert done.returncode == 0
    expected[:1024] = b"N" * 1024
    with hpcbridge.plfs.open(url, "rb", **hdfs_options) as f:
        assert f.read() == expected


def test_integrity_checks_on_hdfs(plfs_url, hdfs_options, hdfs, hdfs_cluster):
    """The integrity review's cases on HDFS backing: a flipped data byte, an index log cut
    short, a container opened through one of its two volumes, a vanished log directory."""
    from hpcbridge.plfs.container import MissingVolumesError, PlfsCorruptionError

    root = plfs_url.split("127.0.0.1:")[1].split("/", 1)[1]
    base = f"plfs+hdfs://127.0.0.1:{hdfs_cluster.info.rpc_port}"
    fs = hpcbridge.connect(f"{base}/", **hdfs_options)
    path = f"/{root}/ck"
    with fs.open(path, "wb") as f:
        for i in range(30):
            f.pwrite(bytes([i + 1]) * 10_000, i * 10_000)
    container = fs.container(path)
    (writer, _, index_log), = container.index_logs()
    _, data_log = container.data_log(writer)
    good_data, good_index = hdfs.read_bytes(data_log), hdfs.read_bytes(index_log)
    flipped = bytearray(good_data)
    flipped[12_345] ^= 0x10
    hdfs.write_bytes(data_log, bytes(flipped))  # HDFS has no in-place write: rewrite the log
    with pytest.raises(PlfsCorruptionError, match=rf"corrupt data: hdfs://\S+{data_log} bytes 0\.\.300000"):
        fs.read_bytes(path)
    hdfs.write_bytes(data_log, good_data)
    hdfs.write_bytes(index_log, good_index[:-10])
    with pytest.raises(PlfsCorruptionError, match="cut short"):
        fs.read_bytes(path)
    hdfs.write_bytes(index_log, good_index)
    assert fs.read_bytes(path) == b"".join(bytes([i + 1]) * 10_000 for i in range(30))

    two = hpcbridge.connect(f"{base}/{root}/a,/{root}/b", **hdfs_options, writers_hint=4)
    hdfs.mkdir(f"/{root}/a")
    hdfs.mkdir(f"/{root}/b")
    for r in range(2):
        with two.open_writer("/ck", writer_id=r) as w:
            w.pwrite(bytes([r + 1]) * 100, r * 100)
    with pytest.raises(MissingVolumesError, match=rf"missing hdfs://127.0.0.1:\d+/{root}/b/ck"):
        hpcbridge.plfs.open(f"{base}/{root}/a/ck", "rb", **hdfs_options)

    f = fs.open(f"/{root}/gone", "wb")
    f.pwrite(b"x" * 100, 0)
    hdfs.rm(f"/{root}/gone", recursive=True)
    with pytest.raises(OSError, match=rf"PLFS container plfs\+hdfs://\S+/{root}/gone"):
        f.close()


def test_reading_around_a_killed_writer_under_lease_raises_until_recover(plfs_url, hdfs_options, tmp_path):
    """A killed writer's logs stay under lease: HDFS shows them only up to their last complete
    block, so its synced writes read back as zeros (or not at all) until `plfs recover`. A read
    or an export then must fail naming the cause (EBUSY, the writer, recover), not answer wrong;
    a writer opening meanwhile, unable to see the dead writer's sequence numbers, must still
    draw greater ones (it lost to the dead writer's older bytes at offset 0 on the native driver)."""
    import errno
    import warnings

    from hpcbridge.cli.main import main
    from hpcbridge.plfs import PlfsCorruptionWarning

    url = f"{plfs_url}/leased"
    with hpcbridge.plfs.open(url, "wb", shared=True, **hdfs_options) as f:  # a closed writer beside it
        f.pwrite(b"C" * 1024, 189 * 1024)
    killed = subprocess.run([sys.executable, "-c", _FLUSH_THEN_KILL, url, *_args(hdfs_options)], timeout=120)
    assert killed.returncode == -signal.SIGKILL
    expected = b"".join(bytes([i % 251 + 1]) * 1024 for i in range(189)) + b"C" * 1024
    with pytest.raises(OSError, match=r"1 writer\(s\) still open or crashed: .*plfs recover") as raised:
        with hpcbridge.plfs.open(url, "rb", **hdfs_options) as f:
            f.read()
    assert raised.value.errno == errno.EBUSY
    with warnings.catch_warnings(record=True) as caught:  # skip: what is visible, with a warning
        warnings.simplefilter("always")
        with hpcbridge.plfs.open(url, "rb", on_corruption="skip", **hdfs_options) as f:
            f.read()
    assert any(issubclass(w.category, PlfsCorruptionWarning) and "plfs recover" in str(w.message) for w in caught)
    assert main(["plfs", "export", url, str(tmp_path / "out")]) == 1
    assert not (tmp_path / "out").exists()
    assert main(["plfs", "check", url]) == 1
    # A later process writes while the lease still hides the dead writer's records: its write
    # must still win over the dead writer's once that is recovered.
    done = subprocess.run([sys.executable, "-c", _WRITE_AND_CLOSE, url, *_args(hdfs_options)], timeout=120)
    assert done.returncode == 0
    expected = b"N" * 1024 + expected[1024:]
    started = time.monotonic()
    assert main(["plfs", "recover", url]) == 0
    assert time.monotonic() - started < 30  # lease recovery, not the 60 s soft limit
    with hpcbridge.plfs.open(url, "rb", **hdfs_options) as f:
        assert f.read() == expected
