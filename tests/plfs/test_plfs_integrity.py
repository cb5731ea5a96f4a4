"""PLFS containers return the bytes written or a clear error: one regression test per case of
the integrity review (crashed writers and sequence order, partial volumes, flush, cut index logs,
huge offsets, closed handles, flipped data bytes and flattened indexes, ENOSPC)."""

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import hpcbridge
import hpcbridge.plfs
from hpcbridge.cli.main import main
from hpcbridge.plfs.container import MissingVolumesError, PlfsCorruptionError
from hpcbridge.plfs.format import RECORD_SIZE, decode_records, encode_records
from hpcbridge.plfs import reader, tools
from hpcbridge.plfs.reader import PlfsCorruptionWarning
from hpcbridge.plfs.tools import FLAT_INDEX, FLAT_META

from . import reference

MiB = 1 << 20


def run(code: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=120)


def plfs():
    return hpcbridge.connect("plfs+file:///")


# -- 1. a crashed writer's flushed bytes never win over a later process's writes ---------------
CRASH_AFTER_FLUSH = """
    import os, signal, sys, hpcbridge.plfs
    f = hpcbridge.plfs.open(sys.argv[1], "wb", shared=True)
    for i in range(50):
        f.pwrite(b"D" * 1000, 0)  # many sequence numbers: more than a fresh process starts with
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""
WRITE_AND_CLOSE = """
    import sys, hpcbridge.plfs
    f = hpcbridge.plfs.open(sys.argv[1], "wb", shared=True)
    f.pwrite(b"N" * 1000, 0)
    f.close()
"""


@pytest.mark.parametrize("recover_first", [True, False], ids=["recovered", "not-recovered"])
def test_a_later_process_wins_over_a_crashed_writers_flushed_bytes(tmp_path, recover_first):
    url = f"plfs+file://{tmp_path}/ck"
    assert run(CRASH_AFTER_FLUSH, url).returncode == -9
    assert plfs().read_bytes(f"{tmp_path}/ck") == b"D" * 1000  # the flushed write survived the kill
    if recover_first:
        assert main(["plfs", "recover", url]) == 0
    done = run(WRITE_AND_CLOSE, url)
    assert done.returncode == 0, done.stderr
    assert plfs().read_bytes(f"{tmp_path}/ck") == b"N" * 1000
    assert reference.read_logical(f"{tmp_path}/ck") == b"N" * 1000
    if not recover_first:
        assert main(["plfs", "recover", url]) == 0
    assert main(["plfs", "check", "--deep", url]) == 0


def test_recover_records_what_the_dead_writer_left(tmp_path):
    url = f"plfs+file://{tmp_path}/ck"
    run(CRASH_AFTER_FLUSH, url)
    container = plfs().container(f"{tmp_path}/ck")
    (writer,) = [w["writer"] for w in container.open_writers()]
    assert main(["plfs", "recover", "--json", url]) == 0
    (meta,) = [m for m in container.metas() if m["writers"][0].get("recovered")]
    assert meta["writers"][0]["writer"] == writer and meta["writers"][0]["records"] == 50  # one per overwrite
    assert meta["size"] == 1000 and container.open_writers() == []


# -- 2. several volumes: all of them, or an error naming the missing ones ----------------------
def _three_volumes(tmp_path):
    vols = [tmp_path / v for v in "abc"]
    for v in vols:
        v.mkdir()
    url = "plfs+file://" + ",".join(f"{v}/ck" for v in vols)
    fs = hpcbridge.connect("plfs+file://" + ",".join(str(v) for v in vols), writers_hint=9)
    for r in range(6):
        with fs.open_writer("/ck", writer_id=r) as w:
            w.pwrite(bytes([r + 1]) * 1000, r * 1000)
    return vols, url


def test_a_container_opened_through_some_of_its_volumes_is_refused(tmp_path):
    vols, url = _three_volumes(tmp_path)
    with hpcbridge.plfs.open(url, "rb") as f:
        assert f.read() == b"".join(bytes([r + 1]) * 1000 for r in range(6))
    with pytest.raises(MissingVolumesError, match=rf"spans 3 volume.*missing file://{vols[1]}/ck, file://{vols[2]}/ck"):
        hpcbridge.plfs.open(f"plfs+file://{vols[0]}/ck", "rb")
    with pytest.raises(MissingVolumesError):
        plfs().info(f"{vols[0]}/ck")
    with pytest.raises(MissingVolumesError, match=rf"volume 1 of the PLFS container whose canonical volume is "
                                                  rf"file://{vols[0]}/ck"):
        hpcbridge.plfs.open(f"plfs+file://{vols[1]}/ck", "rb")
    swapped = "plfs+file://" + ",".join(f"{v}/ck" for v in (vols[0], vols[2], vols[1]))
    with pytest.raises(MissingVolumesError, match="is not volume 1"):
        hpcbridge.plfs.open(swapped, "rb")
    assert main(["plfs", "check", f"plfs+file://{vols[0]}/ck"]) == 1


def test_a_failed_multi_volume_create_leaves_nothing_behind(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()  # the third volume's root does not exist
    url = f"plfs+file://{tmp_path}/a/ck,{tmp_path}/b/ck,{tmp_path}/c/ck"
    with pytest.raises(FileNotFoundError):
        hpcbridge.plfs.open(url, "wb")
    assert os.listdir(tmp_path / "a") == [] and os.listdir(tmp_path / "b") == []


def test_concurrent_creators_agree_on_one_container(tmp_path):
    """Many processes opening one new file at once (as through the mount): one creates it,
    every writer lands in it, nothing is left of the others' attempts."""
    import multiprocessing

    url = f"plfs+file://{tmp_path}/ck"
    with multiprocessing.get_context("spawn").Pool(6) as pool:
        pool.starmap(_write_slot, [(url, r) for r in range(12)])
    assert plfs().read_bytes(f"{tmp_path}/ck") == b"".join(bytes([r + 1]) * 100 for r in range(12))
    assert os.listdir(tmp_path) == ["ck"]


def _write_slot(url, r):
    with hpcbridge.plfs.open(url, "wb", shared=True) as f:
        f.pwrite(bytes([r + 1]) * 100, r * 100)


# -- 3. flush: what it guarantees (the HDFS case is in tests/hdfs) ----------------------------
CRASH_WITHOUT_FLUSH = """
    import os, signal, sys, hpcbridge.plfs
    f = hpcbridge.plfs.open(sys.argv[1], "wb", shared=True)
    f.pwrite(b"F" * 5000, 0)
    f.flush()
    f.pwrite(b"L" * (3 << 20), 5000)  # large: straight to the data log, its record not yet written
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_flushed_data_survives_a_kill_and_unindexed_bytes_are_reported(tmp_path, capsys):
    url = f"plfs+file://{tmp_path}/ck"
    assert run(CRASH_WITHOUT_FLUSH, url).returncode == -9
    assert plfs().read_bytes(f"{tmp_path}/ck") == b"F" * 5000
    assert main(["plfs", "check", url]) == 1  # a writer never closed
    assert main(["plfs", "recover", url]) == 0
    capsys.readouterr()
    assert main(["plfs", "check", "--json", url]) == 0
    report = json.loads(capsys.readouterr().out)
    assert any(f"{3 << 20} unindexed bytes" in n for n in report["notes"])


# -- 4. an index log cut short: an error, not a short file ------------------------------------
def test_a_cut_index_log_is_an_error_naming_the_log_and_the_source(tmp_path, capsys):
    fs = plfs()
    path = f"{tmp_path}/ck"
    with fs.open(path, "wb") as f:
        for i in range(50):
            f.pwrite(bytes([i + 1]) * 101, i * 101 + (i % 3) * 7)  # irregular: one record per write
    container = fs.container(path)
    (_, _, log), = container.index_logs()
    size = os.path.getsize(log)
    os.truncate(log, size - 10)
    records = size // RECORD_SIZE
    with pytest.raises(PlfsCorruptionError, match=rf"{log}: holds {records - 1} whole records, its writer closed "
                                                  rf"after writing {records}: the log was cut short"):
        fs.read_bytes(path)
    for command in (["get", f"plfs+file://{path}", str(tmp_path / "out")],
                    ["plfs", "export", f"plfs+file://{path}", str(tmp_path / "out")]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert "PlfsCorruptionError" in err and f"plfs+file://{path}" in err and "cut short" in err
    assert not (tmp_path / "out").exists()
    assert main(["plfs", "check", f"plfs+file://{path}"]) == 1


def test_a_data_log_cut_under_an_open_reader_is_an_error_not_a_short_read(tmp_path):
    # Reading back one writer's objects goes through a fast path once its log is open; a log
    # cut meanwhile must still be named, whichever path the read takes.
    path = f"{tmp_path}/ck"
    unit, objects = 47001, 60  # > 2 MiB: past the log's read buffer
    with hpcbridge.plfs.open(f"plfs+file://{path}", "wb", shared=True) as a, \
            hpcbridge.plfs.open(f"plfs+file://{path}", "wb", shared=True) as b:
        for i in range(objects):
            a.pwrite(bytes([i % 250 + 1]) * unit, 2 * i * unit)
            b.pwrite(bytes([251]) * unit, (2 * i + 1) * unit)
    with hpcbridge.plfs.open(f"plfs+file://{path}", "rb") as f:
        buf = bytearray(unit)
        assert f.preadinto(buf, 0) == unit and buf == bytes([1]) * unit
        reader = f.raw._reader
        writer = reader.index.lookup_list(0, 1)[0][3]
        fs, log = reader.container.data_log(writer)
        os.truncate(log, os.path.getsize(log) // 2)
        with pytest.raises(PlfsCorruptionError, match=rf"data log file://{log} is shorter than its index says"):
            f.preadinto(buf, 2 * (objects - 1) * unit)


# -- 5. offsets past 2**63-1 ------------------------------------------------------------------
def test_offsets_are_bounded_and_a_refused_write_loses_nothing(tmp_path):
    fs = plfs()
    path = f"{tmp_path}/ck"
    f = fs.open(path, "wb")
    f.pwrite(b"first", 0)
    for offset in (2**64 + 5, 2**64 - 2, 2**63):
        with pytest.raises(ValueError, match=rf"past the largest file offset.*plfs\+file://{path}"):
            f.pwrite(b"x", offset)
    with pytest.raises(ValueError, match="end past the largest file offset"):
        f.pwrite(b"xy", 2**63 - 2)
    f.pwrite(b"z", 2**63 - 2)  # the last addressable byte
    f.close()
    assert fs.info(path).size == 2**63 - 1
    with fs.open(path) as r:
        assert r.pread(5, 0) == b"first" and r.pread(1, 2**63 - 2) == b"z"
        with pytest.raises(ValueError, match="past the largest file offset"):
            r.pread(1, 2**63)


# -- 6. closed handles: the conformance suite's test_closed_handles_refuse_every_call, every backend

# -- 7. data checksums and the flattened index ------------------------------------------------
def _flip_a_data_byte(fs, path, at=1234):
    container = fs.container(path)
    writer, _, _ = container.index_logs()[0]
    _, data_log = container.data_log(writer)
    raw = bytearray(open(data_log, "rb").read())
    raw[at] ^= 0x40
    open(data_log, "r+b").write(raw)
    return data_log


def _interleaved(fs, path, size, writers, pieces):
    """Writers of one process interleaved write by write (piece k by writer k % writers): no
    record merges, each piece is its own record. Returns the logical bytes."""
    handles = [fs.open_writer(path) for _ in range(writers)]
    for k in range(pieces * writers):
        handles[k % writers].pwrite(bytes([k % 251 + 1]) * size, k * size)
    for h in handles:
        h.close()
    return b"".join(bytes([k % 251 + 1]) * size for k in range(pieces * writers))


def _checkpoint(fs, path, writers=2, pieces=20, size=4000):
    handles = [fs.open_writer(path) for _ in range(writers)]
    for r, h in enumerate(handles):  # each writer's writes in a row, as an MPI rank's: one pattern record
        for i in range(pieces):
            h.pwrite(bytes([(i * writers + r) % 251 + 1]) * size, (i * writers + r) * size)
    for h in handles:
        h.close()
    return b"".join(bytes([k % 251 + 1]) * size for k in range(pieces * writers))


def test_a_flipped_data_byte_is_an_error_naming_log_and_range(tmp_path, capsys):
    fs = plfs()
    path = f"{tmp_path}/ck"
    expected = _checkpoint(fs, path)
    data_log = _flip_a_data_byte(fs, path)
    with pytest.raises(PlfsCorruptionError, match=rf"corrupt data: file://{data_log} bytes 0..80000 \(logical "
                                                  r"\d+\.\.\d+\) fail their CRC32C") as info:
        fs.read_bytes(path)
    assert info.value.filename == f"plfs+file://{path}" and info.value.errno == errno.EIO
    with fs.open(path, buffering=0) as f, pytest.raises(PlfsCorruptionError):  # read front to back in chunks:
        while f.read(3000):  # each record is checked once its last byte is read
            pass
    with fs.open(path) as f:  # a read of part of a record is not checked by default...
        assert len(f.pread(100, 0)) == 100
    strict = hpcbridge.connect("plfs+file:///", verify="always")
    with strict.open(path) as f, pytest.raises(PlfsCorruptionError):  # ...on request it is
        f.pread(100, 0)  # (the first piece of one writer...
        f.pread(100, 4000)  # ...and of the other)
    skipping = hpcbridge.connect("plfs+file:///", on_corruption="skip")
    with pytest.warns(PlfsCorruptionWarning, match="read as zeros"):
        data = skipping.read_bytes(path)
    damaged = [i for i in range(0, len(expected), 4000) if data[i:i + 4000] != expected[i:i + 4000]]
    assert all(data[i:i + 4000] == bytes(4000) for i in damaged) and len(damaged) == 20  # one writer's record
    with pytest.raises(reference.CorruptData):  # the independent reader sees it too
        reference.read_logical(path)
    assert main(["plfs", "check", f"plfs+file://{path}"]) == 0  # the index is fine...
    capsys.readouterr()
    assert main(["plfs", "check", "--deep", "--json", f"plfs+file://{path}"]) == 1  # ...the data is not
    report = json.loads(capsys.readouterr().out)
    (bad,) = report["bad_ranges"]
    assert bad[:3] == [f"file://{data_log}", 0, 80000]


@pytest.mark.parametrize("chunk", [None, 100, 3000], ids=["whole", "100-byte-reads", "3000-byte-reads"])
@pytest.mark.parametrize("flip", [10, 700], ids=["before-the-overwrite", "after-it"])
def test_a_flipped_byte_of_a_partly_overwritten_record_is_an_error(tmp_path, chunk, flip):
    # A later write hides part of a record, so no read ever fetches the record whole: its
    # visible bytes must still be checked (reading the file front to back checks everything).
    fs = plfs()
    path = f"{tmp_path}/ck"
    with hpcbridge.plfs.open(f"plfs+file://{path}", "wb", shared=True) as f:
        f.pwrite(b"x" * 1000, 0)
        f.flush()  # two records: the second hides bytes 500..600 of the first
        f.pwrite(b"y" * 100, 500)
    (fs_, log), = [fs.container(path).data_log(w) for w, *_ in fs.container(path).index_logs()]
    with open(log, "r+b") as raw:
        raw.seek(flip)
        raw.write(b"Z")
    with pytest.raises(PlfsCorruptionError, match=rf"corrupt data: file://{log} bytes 0..1000 "):
        if chunk is None:
            fs.read_bytes(path)
        else:
            with fs.open(path, buffering=0) as handle:
                while handle.read(chunk):
                    pass
    with pytest.warns(PlfsCorruptionWarning, match="read as zeros"):
        data = hpcbridge.connect("plfs+file:///", on_corruption="skip").read_bytes(path)
    assert data == bytes(500) + b"y" * 100 + bytes(400)
    with pytest.raises(reference.CorruptData):  # the independent reader agrees
        reference.read_logical(path)


@pytest.mark.parametrize("threads", ["pool", "shared", "calling"])
@pytest.mark.parametrize("group", [3000, 4000, 9000, 1 << 20])
def test_large_reads_check_in_groups_that_cut_records_and_pieces(tmp_path, monkeypatch, group, threads):
    # Large reads (here every read: SMALL_READ 0) read and check each run a group at a time, on
    # the pool, shared by the calling thread and one pool thread, or on the calling thread;
    # groups smaller than a piece (3000), of a piece (4000), cutting records of 20 pieces (9000)
    # or of the whole run: every byte reads back, and a flipped byte is found wherever it falls.
    from hpcbridge.plfs.reader import PlfsReader

    monkeypatch.setattr(PlfsReader, "SMALL_READ", 0)
    monkeypatch.setattr(PlfsReader, "CHECK_GROUP", group)
    monkeypatch.setattr(PlfsReader, "PARALLEL_RUNS", threads == "pool")
    monkeypatch.setattr(PlfsReader, "SHARED_READS", threads == "shared")
    monkeypatch.setattr("hpcbridge.plfs.reader._runnable", lambda: 1)  # two idle cores, wherever this runs
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    fs = plfs()
    path = f"{tmp_path}/ck"
    expected = _checkpoint(fs, path)
    assert fs.read_bytes(path) == expected
    with fs.open(path, buffering=0) as f:  # in chunks that end inside records: carried from read to read
        assert b"".join(iter(lambda: f.read(7001), b"")) == expected
    _flip_a_data_byte(fs, path, at=40000 + 17)  # the 11th piece of the first writer's one record
    with pytest.raises(PlfsCorruptionError, match=r"bytes 0\.\.80000 "):
        fs.read_bytes(path)
    with fs.open(path, buffering=0) as f, pytest.raises(PlfsCorruptionError, match=r"bytes 0\.\.80000 "):
        while f.read(7001):
            pass


@pytest.mark.parametrize("calls", ["large", "planned"])
@pytest.mark.parametrize("where", ["inside a call", "cut by a call's end"])
def test_large_reads_check_whole_records_by_their_rows(tmp_path, monkeypatch, where, calls):
    # An N-1 file whose pieces are each one record, read in calls that cut records, either
    # large (here every read: SMALL_READ 0) or mid-sized (under SMALL_READ, over PLANNED_READ:
    # planned from the index's runs, on the calling thread): a run's whole records are checked
    # by their rows from the index (no search), the records a call's end cuts by the carried
    # CRC. A flipped byte is found in either kind of record.
    from hpcbridge.plfs.reader import PlfsReader

    if calls == "large":
        monkeypatch.setattr(PlfsReader, "SMALL_READ", 0)
    monkeypatch.setattr(PlfsReader, "CHECK_GROUP", 64 << 10)
    checked, by_rows, large = [], [], []
    original = PlfsReader._check_records
    monkeypatch.setattr(PlfsReader, "_check_records",
                        lambda self, w, at, parts, rows: checked.append(rows) or original(self, w, at, parts, rows))
    check_rows = PlfsReader._check_rows
    monkeypatch.setattr(PlfsReader, "_check_rows",
                        lambda self, r0, sums: by_rows.append(len(sums)) or check_rows(self, r0, sums))
    read_runs = PlfsReader._read_runs
    monkeypatch.setattr(PlfsReader, "_read_runs", lambda self, view, runs: large.append(1) or read_runs(self, view, runs))
    fs = plfs()
    path = f"{tmp_path}/ck"
    size, writers, pieces = 5000, 4, 400  # 8 MB
    expected = _interleaved(fs, path, size, writers, pieces)
    call = (1 << 20) + 7

    def read_all(fs):
        with fs.open(path, buffering=0) as f:
            return b"".join(iter(lambda: f.read(call), b""))

    with fs.open(path, buffering=0) as f:  # the index names each whole piece's record
        index = f._reader.index
        whole, cut = index.lookup(0, len(expected)), index.lookup(size // 2, 3 * size + 7)
    rows = index.checks.table[whole["record"]]
    assert (whole["record"] >= 0).all() and (rows["writer"] == whole["writer"]).all()
    assert (rows["start"] == whole["physical"]).all() and (rows["end"] == whole["physical"] + size).all()
    assert cut["record"].tolist() == [-1, whole["record"][1], whole["record"][2], -1]
    assert read_all(fs) == expected
    assert bool(large) == (calls == "large")  # the large reads' path, or the small reads'
    assert sum(by_rows) > len(expected) // size // 2  # whole records by row...
    assert any(rows[0] < 0 or rows[-1] < 0 for rows in checked)  # ...and records cut by a call
    # The flipped log (_flip_a_data_byte's) holds the pieces k = r, r + 4, ... of one writer r.
    container = fs.container(path)
    r = open(container.data_log(container.index_logs()[0][0])[1], "rb").read(1)[0] - 1
    if where == "inside a call":
        logical = (8 * writers + r) * size + 17
    else:  # the first call end that falls in one of r's pieces
        logical = next(m * call for m in range(1, 8) if m * call // size % writers == r)
    flip = (logical // size - r) // writers * size + logical % size
    data_log = _flip_a_data_byte(fs, path, at=flip)
    record = flip // size * size
    with pytest.raises(PlfsCorruptionError, match=rf"{data_log} bytes {record}\.\.{record + size} "):
        read_all(fs)
    with pytest.warns(PlfsCorruptionWarning, match="read as zeros"):
        data = read_all(hpcbridge.connect("plfs+file:///", on_corruption="skip"))
    damaged = [i for i in range(0, len(expected), size) if data[i:i + size] != expected[i:i + size]]
    start = logical // size * size
    assert damaged == [start]
    # Zeros from where the failing read began: the bytes of a record before a call's end were
    # returned by that call, before its last byte was read and the record could be checked.
    zeroed = start if where == "inside a call" else logical
    assert data[zeroed:start + size] == bytes(start + size - zeroed)


def _spy_on_halves(monkeypatch):
    """Record each ``_read_runs`` call of a large read: (on the main thread?, writers, bytes)."""
    import threading

    from hpcbridge.plfs.reader import PlfsReader

    halves = []
    original = PlfsReader._read_runs

    def spy(self, view, runs):
        halves.append((threading.current_thread() is threading.main_thread(), {run.writer for run in runs},
                       sum(run.length for run in runs)))
        return original(self, view, runs)
    monkeypatch.setattr(PlfsReader, "_read_runs", spy)
    monkeypatch.setattr(PlfsReader, "SMALL_READ", 0)
    monkeypatch.setattr("hpcbridge.plfs.reader._runnable", lambda: 1)  # as on an idle machine
    return halves


def test_a_large_read_is_shared_by_the_calling_thread_and_one_pool_thread(tmp_path, monkeypatch):
    # On a kernel file system a large read's runs are cut in two halves of about equal bytes,
    # one read and checked on a pool thread and one on the calling thread, so that two cores
    # copy and check. Every byte reads back; a flipped byte or a short data log in the pool
    # thread's half fails the read as it would on the calling thread.
    from hpcbridge.plfs.reader import PlfsReader

    halves = _spy_on_halves(monkeypatch)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})  # two cores, wherever this runs
    fs = plfs()
    path = f"{tmp_path}/ck"
    size, writers, pieces = 5000, 4, 100  # 2 MB, 4 runs of 500 kB
    expected = _interleaved(fs, path, size, writers, pieces)
    buffer = bytearray(len(expected))
    with fs.open(path, buffering=0) as f:
        assert f.readinto(buffer) == len(expected) and buffer == expected
    assert sorted(main for main, _, _ in halves) == [False, True]
    helper_bytes = next(n for main, _, n in halves if not main)
    assert sum(n for _, _, n in halves) == len(expected)
    assert abs(helper_bytes - PlfsReader.HELPER_SHARE * len(expected)) <= size  # cut between two records
    first, second = (w for _, w, _ in halves)
    assert len(first | second) == writers and len(first & second) <= 1  # one run may be cut in two
    pooled = max(next(w for main, w, _ in halves if not main) - next(w for main, w, _ in halves if main))
    container = fs.container(path)
    _, data_log = container.data_log(pooled)
    raw = bytearray(open(data_log, "rb").read())
    raw[3 * size + 17] ^= 0x40  # its 4th record
    open(data_log, "r+b").write(raw)
    with fs.open(path, buffering=0) as f, \
            pytest.raises(PlfsCorruptionError, match=rf"{data_log} bytes {3 * size}\.\.{4 * size} "):
        f.readinto(buffer)
    with hpcbridge.connect("plfs+file:///", on_corruption="skip").open(path, buffering=0) as f, \
            pytest.warns(PlfsCorruptionWarning, match="read as zeros"):
        assert f.readinto(buffer) == len(expected)
    damaged = [i for i in range(0, len(expected), size) if buffer[i:i + size] != expected[i:i + size]]
    assert len(damaged) == 1 and buffer[damaged[0]:damaged[0] + size] == bytes(size)
    os.truncate(data_log, len(raw) // 2)
    with fs.open(path, buffering=0) as f, pytest.raises(PlfsCorruptionError, match="shorter than its index"):
        f.readinto(buffer)


def test_a_large_read_stays_on_the_calling_thread_where_the_process_has_one_core(tmp_path, monkeypatch):
    halves = _spy_on_halves(monkeypatch)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    fs = plfs()
    path = f"{tmp_path}/ck"
    expected = _interleaved(fs, path, 5000, 4, 100)
    assert fs.read_bytes(path) == expected
    assert [(main, n) for main, _, n in halves] == [(True, len(expected))]


def test_a_large_read_takes_no_helper_while_other_large_reads_use_the_cores(tmp_path, monkeypatch):
    # Two cores: while one read is shared (its helper held back here), a second large read, of
    # another handle, reads alone on its calling thread; once the first has ended, a third
    # is shared again. Concurrent readers (Dask tasks on every core) do not oversubscribe.
    import threading

    from hpcbridge.plfs.reader import PlfsReader

    halves = _spy_on_halves(monkeypatch)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    original = PlfsReader._read_runs
    release = threading.Event()

    def held(self, view, runs):
        if threading.current_thread().name.startswith("plfs "):  # the pool thread's half
            assert release.wait(30)
        return original(self, view, runs)
    monkeypatch.setattr(PlfsReader, "_read_runs", held)
    fs = plfs()
    path = f"{tmp_path}/ck"
    expected = _interleaved(fs, path, 5000, 4, 100)
    first = threading.Thread(target=lambda: fs.read_bytes(path), name="first")
    first.start()
    for _ in range(3000):  # until the first read's caller has done its half
        if halves:
            break
        threading.Event().wait(0.01)
    with fs.open(path, buffering=0) as f:
        alone = bytearray(len(expected))
        assert f.readinto(alone) == len(expected) and alone == expected
    assert len(halves) == 2 and halves[1][0] and halves[1][2] == len(expected)  # alone, on this thread
    release.set()
    first.join(30)
    assert not first.is_alive() and len(halves) == 3
    assert fs.read_bytes(path) == expected and len(halves) == 5  # shared again


def test_busy_cores_count_readers_and_their_helpers(monkeypatch):
    from hpcbridge.plfs.reader import _BusyCores

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr("hpcbridge.plfs.reader._runnable", lambda: 1)  # only this thread ready to run
    busy = _BusyCores()
    with busy.reading(True) as first:
        with busy.reading(True) as second:
            assert first and not second  # 1 reader + its helper + 1 reader: no core left
    with busy.reading(True) as again, busy.reading(False) as unwanted:
        assert again and not unwanted  # every count given back
    busy._pid, busy._busy = -1, 5  # as a forked child inherits them: reads of its parent
    with busy.reading(True) as child:
        assert child
    # As many threads ready to run as cores, this one included (MPI ranks reading at once,
    # another process computing on the other core): no core is idle for a helper.
    for ready in (3, 2):
        monkeypatch.setattr("hpcbridge.plfs.reader._runnable", lambda ready=ready: ready)
        with busy.reading(True) as crowded:
            assert not crowded
    monkeypatch.setattr("hpcbridge.plfs.reader._runnable", lambda: 1)
    with busy.reading(True) as alone:
        assert alone  # and the helper not taken before was given back


def test_runnable_threads_are_read_from_proc_loadavg():
    from hpcbridge.plfs.reader import _runnable

    assert _runnable() >= 1  # this thread, running


@pytest.mark.parametrize("lengths, share, expected", [
    ([4, 4, 4, 4], 0.5, ([4, 4], [4, 4])), ([1, 1], 0.5, ([1], [1])), ([10, 1], 0.5, ([10], [1])),
    ([1, 10], 0.5, ([1], [10])), ([1, 1, 10], 0.5, ([1, 1], [10])), ([10, 1, 1], 0.9, ([10], [1, 1])),
    ([1, 2, 3, 4, 5, 6], 0.5, ([1, 2, 3, 4], [5, 6]))])
def test_runs_are_shared_between_runs_where_their_records_are_not_known(lengths, share, expected):
    from hpcbridge.plfs.reader import _Run, _share

    runs = [_Run(0, 0, n, [(0, n)]) for n in lengths]
    assert tuple([run.length for run in side] for side in _share(runs, share)) == expected


def test_runs_are_shared_inside_a_run_between_whole_records():
    from hpcbridge.plfs.reader import _Run, _share

    def run(writer, rows, size=10):  # consecutive pieces of one log, each one record (or -1)
        return _Run(writer, 1000 * writer, size * len(rows), [(i * size, size) for i in range(len(rows))], rows)

    mine, theirs = _share([run(0, [-1, 1, 2, 3]), run(1, [5, 6, 7, 8, 9, 10, -1])], 0.48)
    assert [r.length for r in mine] == [40, 20] and [r.length for r in theirs] == [50]  # 57 % / 43 %
    assert mine[1].records == [5, 6] and theirs[0].records == [7, 8, 9, 10, -1]
    assert theirs[0].start == mine[1].start + 20 and theirs[0].segments[0] == (20, 10)
    # Where the nearest boundary would cut a record that is not whole: between runs.
    mine, theirs = _share([run(0, [1, 2, 3, -1]), run(1, [-1, 6, 7, 8])], 0.5)
    assert [r.writer for r in mine] == [0] and [r.writer for r in theirs] == [1]


def test_large_reads_of_tiny_records_split_scatter_reads_at_iov_max(tmp_path, monkeypatch):
    # 64-byte records: a 512 KiB check group holds 8192 of them, more buffers than one preadv
    # takes (IOV_MAX, 1024): the group is read in several calls, and every record checked.
    from hpcbridge.fs.posix import IOV_MAX
    from hpcbridge.plfs.reader import PlfsReader

    monkeypatch.setattr(PlfsReader, "SMALL_READ", 0)
    fs = plfs()
    path = f"{tmp_path}/ck"
    size, writers, pieces = 64, 2, 20000
    assert PlfsReader.CHECK_GROUP // size > IOV_MAX
    handles = [fs.open_writer(path) for _ in range(writers)]
    expected = np.random.default_rng(7).integers(0, 256, size * writers * pieces, dtype=np.uint8).tobytes()
    for k in range(pieces * writers):
        handles[k % writers].pwrite(expected[k * size:(k + 1) * size], k * size)
    for h in handles:
        h.close()
    assert fs.read_bytes(path) == expected
    data_log = _flip_a_data_byte(fs, path, at=7777 * size + 5)
    with pytest.raises(PlfsCorruptionError, match=rf"{data_log} bytes {7777 * size}\.\.{7778 * size} "):
        fs.read_bytes(path)


def test_a_flipped_byte_is_found_where_each_write_is_its_own_record(tmp_path):
    # Writers interleaved write by write in one process: no record merges, so a whole-file
    # read checks one record per piece, hundreds per run.
    fs = plfs()
    path = f"{tmp_path}/ck"
    size, writers, pieces = 5000, 2, 900  # 4.5 MB: both the small and the large read paths
    expected = _interleaved(fs, path, size, writers, pieces)
    assert fs.read_bytes(path) == expected
    data_log = _flip_a_data_byte(fs, path, at=3 * size + 17)  # the 4th piece of the first writer
    with pytest.raises(PlfsCorruptionError, match=rf"{data_log} bytes {3 * size}..{4 * size} "):
        fs.read_bytes(path)
    skipping = hpcbridge.connect("plfs+file:///", on_corruption="skip")
    with pytest.warns(PlfsCorruptionWarning, match="read as zeros"):
        data = skipping.read_bytes(path)
    damaged = [i for i in range(0, len(expected), size) if data[i:i + size] != expected[i:i + size]]
    assert len(damaged) == 1 and data[damaged[0]:damaged[0] + size] == bytes(size)
    # Read object by object (each read is one whole record): the damaged one is refused, the
    # others read back, in logical order and in one writer's order.
    bad = damaged[0]
    for order in (range(0, len(expected), size), range(0, len(expected), writers * size)):
        with fs.open(path, buffering=0) as f:
            index = f._reader.index
            assert all(index.piece_of(at, at + size)[2] >= 0 for at in order)  # each names its record
            for at in order:
                if at == bad:
                    with pytest.raises(PlfsCorruptionError, match=rf"{data_log} bytes {3 * size}..{4 * size} "):
                        f.pread(size, at)
                else:
                    assert f.pread(size, at) == expected[at:at + size], at


def test_checksums_can_be_switched_off_for_measurements(tmp_path, capsys):
    fs = hpcbridge.connect("plfs+file:///", checksums=False)
    path = f"{tmp_path}/ck"
    _checkpoint(fs, path)
    _flip_a_data_byte(fs, path)
    assert len(fs.read_bytes(path)) == 160000  # nothing to check against
    assert main(["plfs", "info", "--json", f"plfs+file://{path}"]) == 0
    assert json.loads(capsys.readouterr().out)["checksummed_records"] == 0
    with pytest.raises(ValueError, match="verify must be one of"):
        hpcbridge.connect("plfs+file:///", verify="sometimes")


def test_a_broken_flat_index_is_reported_and_not_used(tmp_path, capsys):
    fs = plfs()
    path = f"{tmp_path}/ck"
    expected = _checkpoint(fs, path)
    url = f"plfs+file://{path}"
    assert main(["plfs", "flatten", url]) == 0
    flat = f"{path}/{FLAT_INDEX}"
    raw = bytearray(open(flat, "rb").read())
    raw[17] ^= 1  # a record's CRC no longer matches
    open(flat, "wb").write(raw)
    with pytest.warns(PlfsCorruptionWarning, match="flattened index fails its checksums"):
        assert fs.read_bytes(path) == expected
    assert main(["plfs", "check", url]) == 1
    assert "flattened index fails its checksums" in capsys.readouterr().out


def test_a_consistent_but_wrong_flat_index_is_caught_by_check(tmp_path, capsys):
    fs = plfs()
    path = f"{tmp_path}/ck"
    _checkpoint(fs, path)
    url = f"plfs+file://{path}"
    assert main(["plfs", "flatten", url]) == 0
    records, valid, _ = decode_records(open(f"{path}/{FLAT_INDEX}", "rb").read())
    forged = records.copy()
    forged["physical"][0] += 4000  # valid record checksums, wrong mapping
    data = encode_records(forged)
    open(f"{path}/{FLAT_INDEX}", "wb").write(data)
    meta = json.load(open(f"{path}/{FLAT_META}"))
    meta["crc32c"] = hpcbridge.plfs.format.data_crc(data)
    json.dump(meta, open(f"{path}/{FLAT_META}", "w"))
    assert main(["plfs", "check", url]) == 1
    assert "flattened index disagrees with the index logs" in capsys.readouterr().out


# -- 8. ENOSPC and other write errors name the container and the log --------------------------
@pytest.fixture
def small_fs(tmp_path):
    """A 4 MiB tmpfs, mounted for the test and unmounted after it (needs root)."""
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root): no ENOSPC to provoke")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_enospc_names_the_container_and_keeps_what_reached_the_log(small_fs):
    fs = plfs()
    path = f"{small_fs}/ck"
    (small_fs / "filler").write_bytes(bytes(MiB))  # removed after the failure: room to close
    f = fs.open(path, "wb")
    f.pwrite(b"a" * MiB, 0)
    f.flush()  # this much is safe
    with pytest.raises(OSError) as info:
        for i in range(1, 8):
            f.pwrite(bytes([i]) * MiB, i * MiB)
    assert info.value.errno == errno.ENOSPC and info.value.filename == f"plfs+file://{path}"
    assert "data log" in str(info.value) and f"file://{path}/hostdir." in str(info.value)
    written = i
    (small_fs / "filler").unlink()
    f.close()  # room for the index and the metadata: the writer closes
    container = fs.container(path)
    assert container.open_writers() == []
    data = fs.read_bytes(path)
    assert data[:MiB] == b"a" * MiB
    for k in range(1, written):  # what was accepted before the failing write reads back right
        assert data[k * MiB:(k + 1) * MiB] == bytes([k]) * MiB
    report = hpcbridge.plfs.tools.check(container, deep=True)
    assert report["bad_ranges"] == []
    assert all("unindexed bytes" in p for p in report["problems"])


def test_a_vanished_backing_directory_is_named(tmp_path):
    fs = plfs()
    path = f"{tmp_path}/ck"
    f = fs.open(path, "wb")
    f.pwrite(b"x" * 100, 0)
    shutil.rmtree(path)
    with pytest.raises(FileNotFoundError, match=rf"PLFS container plfs\+file://{path}") as info:
        f.close()
    assert info.value.filename == f"plfs+file://{path}"


# -- crashes in the model-based test -----------------------------------------------------------
def test_record_size_is_what_the_spec_says():
    assert RECORD_SIZE == 64 and reference.RECORD_V2.size == 64
    assert reference.crc32c(b"123456789") == 0xE3069283  # the CRC32C check value (RFC 3720)
    assert hpcbridge.plfs.format.data_crc(b"123456789") == 0xE3069283
    data = np.arange(1000, dtype=np.uint8)
    assert hpcbridge.plfs.format.data_crc(data) == reference.crc32c(data.tobytes())
    # continued over pieces (a merged record's checksum grows write by write), from any split
    crc = 0
    for piece in np.split(data, [1, 7, 300, 301, 999]):
        crc = hpcbridge.plfs.format.data_crc(memoryview(piece), crc)
    assert crc == reference.crc32c(data.tobytes())


def test_version_1_containers_stay_readable_and_writable(tmp_path, capsys):
    path = f"{tmp_path}/v1"
    reference.write_logical(path, b"old" * 1000, version=1)
    fs = plfs()
    assert fs.read_bytes(path) == b"old" * 1000
    assert main(["plfs", "info", "--json", f"plfs+file://{path}"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format_version"] == 1 and info["data_checks"].startswith("none")
    with fs.open_writer(path) as w:  # one more writer: version-1 records, as the container's
        w.pwrite(b"new", 0)
    assert {os.path.getsize(p) for _, _, p in fs.container(path).index_logs()} == {56}
    assert fs.read_bytes(path) == b"new" + (b"old" * 1000)[3:]
    assert reference.read_logical(path) == b"new" + (b"old" * 1000)[3:]
    assert main(["plfs", "check", "--deep", f"plfs+file://{path}"]) == 0
    fs.write_bytes(path, b"rewritten")  # "wb": a fresh container, version 2
    assert fs.container(path).version == 2 and fs.read_bytes(path) == b"rewritten"


# -- nothing is made inside a logical file (its container is a backing directory) -------------
@pytest.mark.parametrize("inside", ["file", "file/meta", "file/openhosts"])
def test_nothing_is_made_inside_a_container(tmp_path, inside):
    fs = plfs()
    fs.write_bytes(f"{tmp_path}/file", b"data")
    for make in (lambda: fs.open(f"{tmp_path}/{inside}/x", "wb"), lambda: fs.mkdir(f"{tmp_path}/{inside}/sub"),
                 lambda: fs.mkdir(f"{tmp_path}/{inside}/sub/deeper", parents=True)):
        with pytest.raises(NotADirectoryError, match=f"plfs\\+file://{tmp_path}/{inside}/"):
            make()
    made = [name for _, dirs, files in os.walk(tmp_path / "file") for name in dirs + files]
    assert "x" not in made and "sub" not in made
    assert fs.read_bytes(f"{tmp_path}/file") == b"data"


def test_a_large_read_that_is_all_hole_reads_zeros(tmp_path, monkeypatch):
    """Found by an audit: a read above SMALL_READ with no stored byte in it planned no run, and
    the shared read (taken when a core is idle) failed with UnboundLocalError."""
    import hpcbridge.plfs.reader as reader

    fs = plfs()
    with fs.open(f"{tmp_path}/holey", "wb") as f:
        f.pwrite(b"x", 10 << 20)
    monkeypatch.setattr(reader, "_runnable", lambda: 1)  # an idle machine: the shared path
    buffer = bytearray(b"\xee" * (5 << 20))
    with fs.open(f"{tmp_path}/holey", "rb") as f:
        assert f.preadinto(buffer, 0) == 5 << 20
    assert buffer == bytes(5 << 20)


# -- 9. removal and truncation killed half-way; flattened indexes after a close -----------------
TRUNCATE_KILLED = """
    import os, sys, hpcbridge
    real_rmdir = os.rmdir
    def rmdir(path, *args, **kwargs):  # killed after the first host directory is gone
        real_rmdir(path, *args, **kwargs)
        if os.path.basename(str(path)).startswith("hostdir."):
            os._exit(9)
    os.rmdir = rmdir
    hpcbridge.open(sys.argv[1], "wb").close()
"""


def test_a_truncating_open_killed_while_removing_leaves_no_holes(tmp_path):
    """open("wb") of an existing file removes its container: killed half-way, the old code left a
    container with some writers' logs gone, read as zeros where they were (check called it
    healthy). Now the container is renamed away first: the old bytes, or no file, never holes."""
    fs = plfs()
    path = f"{tmp_path}/ckpt"
    old = bytes(range(256)) * 64
    for writer in range(4):
        with fs.open_writer(path, writer_id=writer) as w:
            w.pwrite(old[writer * 4096:(writer + 1) * 4096], writer * 4096)
    assert fs.read_bytes(path) == old
    assert run(TRUNCATE_KILLED, f"plfs+file://{path}").returncode == 9
    assert not fs.exists(path)
    leftovers = [p for p in os.listdir(tmp_path) if p.startswith(".ckpt.plfs-removed-")]
    assert len(leftovers) == 1  # what the delete had not reached yet, out of the way
    with fs.open(path, "wb") as f:
        f.write(b"new")
    assert fs.read_bytes(path) == b"new"


def test_a_closed_writers_missing_index_log_is_damage_not_a_hole(tmp_path, capsys):
    fs = plfs()
    path = f"{tmp_path}/ck"
    expected = _checkpoint(fs, path)
    hostdir = next(p for p in sorted(os.listdir(path)) if p.startswith("hostdir."))
    index = next(p for p in os.listdir(f"{path}/{hostdir}") if p.startswith("index."))
    os.unlink(f"{path}/{hostdir}/{index}")
    with pytest.raises(PlfsCorruptionError, match=f"{index}: the index log is missing: its writer closed after writing"):
        fs.read_bytes(path)
    assert len(hpcbridge.plfs.open(f"plfs+file://{path}", on_corruption="skip").read()) <= len(expected)  # as asked
    assert main(["plfs", "check", f"plfs+file://{path}"]) == 1
    assert f"{index}: the index log is missing" in capsys.readouterr().out


def test_a_flat_index_is_stale_once_a_close_changes_which_records_count(tmp_path):
    """A recovery, then a flatten, then the writer's own close (no new index record): the flat
    index, built when the recovery's count hid the second write, was still used (b"AAAA")."""
    from hpcbridge.plfs import reader, tools

    url = f"plfs+file://{tmp_path}/c"
    fs, path = hpcbridge.url_to_fs(url)
    w = hpcbridge.plfs.open(url, "wb", shared=True)
    w.pwrite(b"A" * 100, 0)
    w.flush()
    tools.recover(fs.container(path))
    w.pwrite(b"B" * 100, 0)
    w.flush()
    tools.flatten(fs.container(path))
    w.close()
    reader._CACHE.clear()
    assert hpcbridge.plfs.open(url).read() == b"B" * 100


@pytest.mark.parametrize("damage", ["deleted", "garbled"])
def test_a_closed_writer_whose_metadata_record_is_lost_is_reported_and_recovered(tmp_path, capsys, damage):
    # Without its record a closed writer is neither closed nor open: a cut index log would go
    # unnoticed and the file's size (from the records) is understated. check says so, and
    # recover gives the writer a record counting what its log holds.
    fs = plfs()
    path, url = f"{tmp_path}/ck", f"plfs+file://{tmp_path}/ck"
    with hpcbridge.plfs.open(url, "wb", shared=True) as f:
        f.pwrite(b"a" * 100, 0)
    with hpcbridge.plfs.open(url, "wb", shared=True) as f:
        f.pwrite(b"b" * 100, 1000)
        lost = f.writer_id
    record = f"{path}/meta/w.{lost:08x}.json"
    os.unlink(record) if damage == "deleted" else open(record, "w").write("{garbage")
    expected = bytes(b"a" * 100 + bytes(900) + b"b" * 100)
    assert fs.read_bytes(path) == expected
    capsys.readouterr()
    assert main(["plfs", "check", "--json", url]) == 1
    (problem,) = json.loads(capsys.readouterr().out)["problems"]
    assert f"index.{lost:08x}: writer {lost:08x} has neither a metadata record nor an open record" in problem
    assert main(["plfs", "recover", url]) == 0
    assert f"{lost:08x}" in capsys.readouterr().out
    assert main(["plfs", "check", url]) == 0
    assert fs.info(path).size == len(expected) and fs.read_bytes(path) == expected


def test_a_flatten_killed_while_writing_leaves_no_damaged_flat_index(tmp_path, capsys, monkeypatch):
    # Flatten replaces flat.index and flat.json: a flatten killed half way through writing them
    # must leave the old pair, or none, never a torn one (reported as damage at every read).
    fs = plfs()
    path, url = f"{tmp_path}/ck", f"plfs+file://{tmp_path}/ck"
    with fs.open(path, "wb") as f:
        f.pwrite(b"a" * 1000, 0)
    assert main(["plfs", "flatten", url]) == 0
    with hpcbridge.plfs.open(url, "wb", shared=True) as f:
        f.pwrite(b"b" * 100, 500)  # the flat index is stale now
    container = fs.container(path)
    write_bytes = type(container.fs).write_bytes
    for crash_at in range(1, 3):
        calls = []

        def killed_midway(self, target, data, calls=calls, crash_at=crash_at):
            calls.append(target)
            if len(calls) == crash_at:
                with open(target, "wb") as raw:
                    raw.write(bytes(data)[:len(data) // 2])
                raise KeyboardInterrupt  # the process dies here
            return write_bytes(self, target, data)

        monkeypatch.setattr(type(container.fs), "write_bytes", killed_midway)
        with pytest.raises(KeyboardInterrupt):
            tools.flatten(container)
        monkeypatch.undo()
        reader._CACHE.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("error", PlfsCorruptionWarning)
            assert fs.read_bytes(path) == b"a" * 500 + b"b" * 100 + b"a" * 400
        capsys.readouterr()
        assert main(["plfs", "check", "--json", url]) == 0, capsys.readouterr().out
    assert main(["plfs", "flatten", url]) == 0
    assert fs.read_bytes(path) == b"a" * 500 + b"b" * 100 + b"a" * 400
