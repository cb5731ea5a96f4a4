"""Ctrl-C during `hpcbridge put`/`get` against HDFS: exit 130, no partial file, never an abort.

An interrupted copy used to end in "(Already borrowed)", "FATAL: exception not rethrown" and
SIGABRT: the cleanup used the client object while a pool thread was still inside it, and that
thread returned into a finalizing interpreter. Each try interrupts at a random moment of the
copy (after its partial file appeared, so the signal lands in hpcbridge, not in Python's start).
"""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

#: Interrupts per direction with the native driver, at random moments over the copy's span (20 took
#: over two minutes of the suite on a 2-core machine).
TRIES = 12
SIZE = 300 << 20


def _start(driver, *argv):
    env = {**os.environ, "HPCBRIDGE_HDFS_DRIVER": driver}
    return subprocess.Popen([sys.executable, "-m", "hpcbridge", *argv, "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)


def _interrupt_when(proc, started, delay):
    deadline = time.monotonic() + 60
    while not started() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err.decode(errors="replace")


@pytest.fixture(scope="module")
def big_local(tmp_path_factory):
    path = tmp_path_factory.mktemp("signals") / "big.bin"
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for _ in range(SIZE >> 20):
            f.write(block)
    return path


def _partials(names):
    return [n for n in names if "hpcbridge-partial" in n]


# The CLI under test picks its driver from $HPCBRIDGE_HDFS_DRIVER; libhdfs starts a JVM in every
# process (~5 s), so fewer tries there keep the suite's time bounded.
@pytest.mark.parametrize("driver, tries", [("native", TRIES), ("libhdfs", 5)])
def test_sigint_during_put_and_get(driver, tries, hdfs_admin, hdfs_root, hdfs_cluster, big_local, tmp_path):
    hdfs = hdfs_admin  # only looks at what the CLI left
    rng = random.Random(1234)
    url = f"{hdfs_cluster.info.url}{hdfs_root}"
    # One full copy: how long the copy itself runs once its partial file exists (the moments are
    # drawn from that span; the process start, a JVM's included, is not part of it), and the
    # source of the gets.
    proc = _start(driver, "put", str(big_local), f"{url}/whole.bin")
    deadline = time.monotonic() + 120
    while not _partials(hdfs.ls(hdfs_root)) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    started = time.monotonic()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    put_seconds = time.monotonic() - started
    codes = []
    for i in range(tries):
        proc = _start(driver, "put", str(big_local), f"{url}/put-{i}.bin")
        code, err = _interrupt_when(proc, lambda: _partials(hdfs.ls(hdfs_root)), rng.uniform(0, put_seconds))
        codes.append(code)
        assert code in (0, 130), f"try {i}: exit {code}\n{err}"
        assert "FATAL" not in err and "Traceback" not in err, err
        assert _partials(hdfs.ls(hdfs_root)) == [], f"try {i} left a partial file"
        if code == 0:  # finished before the signal: then the whole file is there
            assert hdfs.info(f"{hdfs_root}/put-{i}.bin").size == SIZE
    local = tmp_path / "got"
    local.mkdir()
    for i in range(tries):
        proc = _start(driver, "get", f"{url}/whole.bin", str(local / f"get-{i}.bin"))
        code, err = _interrupt_when(proc, lambda: _partials(os.listdir(local)), rng.uniform(0, put_seconds))
        codes.append(code)
        assert code in (0, 130), f"try {i}: exit {code}\n{err}"
        assert "FATAL" not in err and "Traceback" not in err, err
        assert _partials(os.listdir(local)) == [], f"try {i} left a partial file"
    assert codes.count(130) >= tries, f"too few tries were interrupted mid-copy: {codes}"
