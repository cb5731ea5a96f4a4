"""A process that read Parquet through hpcbridge (hpcbridge.arrow, pandas over fsspec) exits cleanly.

Arrow's I/O threads may drop the last reference to a Python file, or to a buffer a read of it
returned, after the read returned; at interpreter exit that aborted the process ("terminate called
without an active exception") in 3 of 20 runs of the first script below before hpcbridge.arrow
waited for the files' releases at exit, and in 7 of 80 runs of the second (pandas) before
hpcbridge's fsspec files had the interpreter wait for Arrow's threads to go idle
(hpcbridge.fs.native_exit).
"""

import subprocess
import sys
import time

import pytest

pytest.importorskip("pyarrow")

SCRIPT = """
import sys, pyarrow as pa, pyarrow.parquet as pq
import hpcbridge.arrow
afs, root = hpcbridge.arrow.filesystem_and_path("file://" + sys.argv[1])
pq.write_table(pa.table({"x": list(range(100))}), f"{root}/t.parquet", filesystem=afs)
print(pq.read_table(f"{root}/t.parquet", filesystem=afs).num_rows)
"""


PANDAS_SCRIPT = """
import sys, pandas as pd
d = sys.argv[1]
pd.DataFrame({"x": list(range(1000)), "y": [float(i) for i in range(1000)]}).to_parquet(d + "/t.parquet")
print(len(pd.read_parquet("hpcbridge+file://" + d + "/t.parquet")))
"""


def _runs_of(script, expected, tmp_path, runs, at_once=4):
    results = []
    for start in range(0, runs, at_once):
        procs = []
        for i in range(start, start + at_once):
            (tmp_path / str(i)).mkdir()
            procs.append(subprocess.Popen([sys.executable, "-c", script, str(tmp_path / str(i))],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        results += [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    failed = [(rc, err[-300:]) for rc, out, err in results if rc != 0 or out.strip() != expected]
    assert not failed, f"{len(failed)} of {runs} runs failed: {failed[:3]}"


def test_processes_that_read_parquet_exit_cleanly(tmp_path):
    _runs_of(SCRIPT, "100", tmp_path, 20)


def test_processes_that_read_parquet_with_pandas_over_fsspec_exit_cleanly(tmp_path):
    pytest.importorskip("pandas")
    _runs_of(PANDAS_SCRIPT, "1000", tmp_path, 40)


def test_exit_waits_for_busy_threads_to_go_quiet_and_no_longer_than_its_bound():
    import threading

    from hpcbridge.fs.native_exit import wait_for_quiet_threads

    assert wait_for_quiet_threads(timeout=1)  # other threads idle (or none): at once
    stop = threading.Event()

    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end and not stop.is_set():
            sum(range(1000))

    worker = threading.Thread(target=spin, args=(0.3,))
    started = time.monotonic()
    worker.start()
    assert wait_for_quiet_threads(timeout=5)  # returns once the thread stopped computing
    assert 0.25 < time.monotonic() - started < 3
    worker.join()
    worker = threading.Thread(target=spin, args=(30,))
    worker.start()
    started = time.monotonic()
    try:
        assert not wait_for_quiet_threads(timeout=0.3)  # a thread that never stops: the bound
        assert time.monotonic() - started < 2
    finally:
        stop.set()
        worker.join()


def test_exit_does_not_wait_for_files_the_program_holds(tmp_path):
    import hpcbridge.arrow as ha

    (tmp_path / "t.bin").write_bytes(b"x" * 10)
    afs, root = ha.filesystem_and_path(f"file://{tmp_path}")
    held = afs.open_input_file(f"{root}/t.bin")  # open, referenced from this frame's Python code
    assert held.read() == b"x" * 10
    kept = list(ha._open_files)  # the Python file behind it, referenced by this list
    assert kept
    started = time.monotonic()
    ha._wait_for_native_releases(timeout=5)
    assert time.monotonic() - started < 1
