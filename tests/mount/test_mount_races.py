"""The mount's daemon answers requests on several threads and queues writes (write-behind): each
test drives its operations in process and puts one step of another open at the worst moment,
then checks what a program would read, stat or be told. Each failed before its fix."""

import ctypes
import errno
import os
import threading

import mfusepy
import pytest

import hpcbridge
import hpcbridge.mount.ops as mount_ops
from hpcbridge.mount.ops import BridgeOperations
from hpcbridge.plfs.writer import PlfsWriter


def _ops(tmp_path, url="plfs+file://"):
    fs = hpcbridge.connect(url)
    return fs, BridgeOperations(fs, str(tmp_path))


def _open(ops, path, flags):
    fi = mfusepy.fuse_file_info()
    fi.flags = flags
    if flags & os.O_CREAT:
        ops.create(path, 0o644, fi)
    else:
        ops.open(path, fi)
    return fi


def _write(ops, fi, data, offset):
    buffer = ctypes.create_string_buffer(data, len(data))
    return ops.write_from(fi.fh, ctypes.cast(buffer, ctypes.POINTER(ctypes.c_char)), len(data), offset)


def _read(ops, fi, n, offset):
    buffer = ctypes.create_string_buffer(n)
    got = ops.read_into(fi.fh, ctypes.cast(buffer, ctypes.POINTER(ctypes.c_char)), n, offset)
    return got if got < 0 else buffer.raw[:got]


def _close(ops, path, fi):
    try:
        ops.flush(path, fi)
    finally:
        ops.release(path, fi)


def _settled(handle):
    """Wait until the handle's queue reached its writer (without taking its error)."""
    with handle._cond:
        while handle._queued:
            handle._cond.wait()


def test_of_two_overlapping_writes_through_two_opens_the_one_answered_later_wins(tmp_path, monkeypatch):
    """A's write is answered, then B's; B's queue reaches its writer first (A's writer is still
    being made): B's bytes must still win, as on any file system."""
    fs, ops = _ops(tmp_path)
    fa = _open(ops, "/f", os.O_WRONLY | os.O_CREAT)
    fb = _open(ops, "/f", os.O_WRONLY)
    a, b = ops._handles[fa.fh], ops._handles[fb.fh]
    assert _write(ops, fb, b"x", 100) == 1  # B has its writer already
    _settled(b)
    b_appended = threading.Event()
    make_writer = mount_ops._PlfsHandle._writer

    def slow_for_a(self):
        if self is a and self.writer is None:
            assert b_appended.wait(10)
        return make_writer(self)

    monkeypatch.setattr(mount_ops._PlfsHandle, "_writer", slow_for_a)
    assert _write(ops, fa, b"A" * 8, 0) == 8
    assert _write(ops, fb, b"B" * 8, 0) == 8
    _settled(b)
    b_appended.set()
    _settled(a)
    _close(ops, "/f", fa)
    _close(ops, "/f", fb)
    assert fs.read_bytes(f"{tmp_path}/f")[:8] == b"B" * 8


def test_a_read_started_after_a_write_was_answered_sees_it_though_an_older_read_installs_late(tmp_path):
    """Two reads of one open on two daemon threads: the first builds its reader before another
    open's write and installs it after the second read installed a newer one. The second read
    must see the write, and the open must keep the newer reader."""
    fs, ops = _ops(tmp_path)
    fw = _open(ops, "/f", os.O_WRONLY | os.O_CREAT)
    _write(ops, fw, b"o" * 16, 0)
    _close(ops, "/f", fw)
    fw = _open(ops, "/f", os.O_WRONLY)
    fr = _open(ops, "/f", os.O_RDONLY)
    reading = ops._handles[fr.fh]
    first_built, second_installed, first_installed = threading.Event(), threading.Event(), threading.Event()
    lock, entries = reading.lock, {"first": 0, "second": 0}

    class Steps:  # the handle's lock, with the two reads' steps placed around it
        def __enter__(self):
            name = threading.current_thread().name
            if name in entries:
                entries[name] += 1
                if name == "first" and entries[name] == 2:  # about to install its reader
                    first_built.set()
                    second_installed.wait(10)
                if name == "second" and entries[name] == 3:  # installed; about to read
                    second_installed.set()
                    first_installed.wait(10)
            return lock.__enter__()

        def __exit__(self, *exc):
            out = lock.__exit__(*exc)
            if threading.current_thread().name == "first" and entries["first"] == 2:
                first_installed.set()
            return out

    reading.lock = Steps()
    results = {}
    first = threading.Thread(target=lambda: results.__setitem__("first", _read(ops, fr, 8, 0)), name="first")
    first.start()
    assert first_built.wait(10)
    assert _write(ops, fw, b"N" * 8, 0) == 8  # another open's write, answered
    second = threading.Thread(target=lambda: results.__setitem__("second", _read(ops, fr, 8, 0)), name="second")
    second.start()
    second.join(20)
    first.join(20)
    reading.lock = lock
    assert results["second"] == b"N" * 8
    assert reading.reader_generation == ops._states["/f"].generation
    assert _read(ops, fr, 8, 0) == b"N" * 8
    _close(ops, "/f", fw)
    _close(ops, "/f", fr)


def test_an_open_racing_the_last_release_joins_the_state_other_opens_see(tmp_path, monkeypatch):
    fs, ops = _ops(tmp_path)
    fq = _open(ops, "/f", os.O_WRONLY | os.O_CREAT)
    _write(ops, fq, b"q" * 4, 0)
    ops.flush("/f", fq)
    opening, released = threading.Event(), threading.Event()
    make_handle = mount_ops._PlfsHandle.__init__

    def between_state_and_registration(self, *args):
        if threading.current_thread().name == "P":
            opening.set()
            released.wait(2)  # with the fix the release waits for this open instead: time out
        make_handle(self, *args)

    monkeypatch.setattr(mount_ops._PlfsHandle, "__init__", between_state_and_registration)
    box = {}
    opener = threading.Thread(target=lambda: box.__setitem__("fi", _open(ops, "/f", os.O_WRONLY)), name="P")
    opener.start()
    assert opening.wait(10)
    releaser = threading.Thread(target=ops.release, args=("/f", fq))  # the last other handle goes
    releaser.start()
    releaser.join(0.5)
    released.set()
    opener.join(10)
    releaser.join(10)
    monkeypatch.undo()
    fp = box["fi"]
    handle = ops._handles[fp.fh]
    assert ops._states.get("/f") is handle.state
    assert _write(ops, fp, b"P" * 1000, 0) == 1000
    _settled(handle)
    assert ops.getattr("/f")["st_size"] == 1000
    fr = _open(ops, "/f", os.O_RDONLY)
    assert _read(ops, fr, 1000, 0) == b"P" * 1000
    _close(ops, "/f", fr)
    _close(ops, "/f", fp)


@pytest.mark.parametrize("other", ["read", "truncate", "rename"])
def test_a_failed_queued_write_is_reported_to_its_own_open_not_to_another(tmp_path, monkeypatch, other):
    fs, ops = _ops(tmp_path)
    fa = _open(ops, "/f", os.O_WRONLY | os.O_CREAT)
    a = ops._handles[fa.fh]
    write = PlfsWriter.write

    def full(self, data, logical, *rest):
        if bytes(data[:1]) == b"A":
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(self, data, logical, *rest)

    monkeypatch.setattr(PlfsWriter, "write", full)
    assert _write(ops, fa, b"A" * 8, 0) == 8  # answered; its append fails behind
    _settled(a)
    if other == "read":
        fb = _open(ops, "/f", os.O_RDONLY)
        assert _read(ops, fb, 8, 0) == b""  # another open: no error of A's
        _close(ops, "/f", fb)
    elif other == "truncate":
        ops.truncate("/f", 100)
    else:
        ops.rename("/f", "/g")
    with pytest.raises(mfusepy.FuseOSError) as told:
        ops.flush(a.path, fa)
    assert told.value.errno == errno.ENOSPC
    ops.release(a.path, fa)
    if other == "read":
        assert ops.getattr("/f")["st_size"] == 0  # the dropped bytes are not in the size


def test_a_write_answered_after_an_o_trunc_open_returned_is_kept(tmp_path, monkeypatch):
    """B opens with O_TRUNC (the kernel does not serialise that with A's writes); A's write
    lands while B's truncate runs, and makes A a writer of the old container. A write A makes
    after B's open returned must be in the file."""
    fs, ops = _ops(tmp_path)
    fa = _open(ops, "/f", os.O_WRONLY | os.O_CREAT)
    a = ops._handles[fa.fh]
    _write(ops, fa, b"o" * 100, 0)
    _settled(a)
    prepare = fs.prepare_container
    calls = []

    def write_meanwhile(path, mode, *args):
        calls.append(path)
        if threading.current_thread().name == "B" and len(calls) == 2:  # inside the truncation
            assert _write(ops, fa, b"1" * 10, 50) == 10
            _settled(a)
        return prepare(path, mode, *args)

    monkeypatch.setattr(fs, "prepare_container", write_meanwhile)
    box = {}
    b = threading.Thread(target=lambda: box.__setitem__("fi", _open(ops, "/f", os.O_WRONLY | os.O_TRUNC)), name="B")
    b.start()
    b.join(20)
    monkeypatch.undo()
    assert _write(ops, fa, b"2" * 10, 0) == 10
    _close(ops, "/f", fa)
    _close(ops, "/f", box["fi"])
    assert fs.read_bytes(f"{tmp_path}/f")[:10] == b"2" * 10


def test_a_shrinking_truncate_interrupted_leaves_the_file_or_its_copy(tmp_path, monkeypatch):
    fs, ops = _ops(tmp_path)
    fw = _open(ops, "/f", os.O_WRONLY | os.O_CREAT)
    _write(ops, fw, b"D" * 1000, 0)
    _close(ops, "/f", fw)
    rename = fs.rename
    renames = []

    def killed_at_the_second(src, dst):
        renames.append(src)
        if len(renames) == 2:
            raise SystemExit("the daemon is killed here")
        return rename(src, dst)

    monkeypatch.setattr(fs, "rename", killed_at_the_second)
    with pytest.raises(SystemExit):
        ops.truncate("/f", 500)
    monkeypatch.undo()
    hidden = sorted(n for n in os.listdir(tmp_path) if n.startswith(".f.hpcbridge-"))
    assert len(hidden) == 2  # the old file, whole, and its cut copy
    sizes = sorted(fs.info(f"{tmp_path}/{n}").size for n in hidden)
    assert sizes == [500, 1000]


def test_fsync_covers_writers_closed_since_the_last_fsync(tmp_path, monkeypatch):
    fs, ops = _ops(tmp_path)
    synced = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), fsync(fd))[1])
    fa = _open(ops, "/f", os.O_WRONLY | os.O_CREAT)
    _write(ops, fa, b"B" * 4096, 0)
    ops.flush("/f", fa)  # close(dup(fd)): this open's writer is closed
    assert ops.fsync("/f", 0, fa) == 0
    assert len(synced) == 2 and all(p.startswith(f"{tmp_path}/f/") for p in synced)  # data and index logs
    synced.clear()
    assert ops.fsync("/f", 0, fa) == 0 and synced == []  # owed once
    _write(ops, fa, b"C" * 4096, 4096)
    ops.rename("/f", "/g")  # another open's rename closes the writer
    assert ops.fsync("/g", 0, fa) == 0
    assert len(synced) == 2 and all(p.startswith(f"{tmp_path}/g/") for p in synced)
    ops.release("/g", fa)


def test_a_plain_file_truncated_by_another_open_stats_its_new_size(tmp_path):
    fs, ops = _ops(tmp_path, "file://")
    (tmp_path / "f").write_bytes(b"o" * 100)
    fr = _open(ops, "/f", os.O_RDONLY)
    fw = _open(ops, "/f", os.O_WRONLY | os.O_TRUNC)
    assert ops.getattr("/f")["st_size"] == 0
    _write(ops, fw, b"n" * 10, 0)
    _close(ops, "/f", fw)
    assert ops.getattr("/f")["st_size"] == 10
    fa = _open(ops, "/f", os.O_WRONLY | os.O_APPEND)
    assert ops._handles[fa.fh].position == 10
    _close(ops, "/f", fa)
    _close(ops, "/f", fr)


def test_a_plain_file_opened_read_only_with_o_trunc_is_emptied(tmp_path):
    """As Linux does (test_mount.py has the kernel's side): the flag was dropped."""
    fs, ops = _ops(tmp_path, "file://")
    (tmp_path / "f").write_bytes(b"o" * 100)
    fa = _open(ops, "/f", os.O_WRONLY | os.O_APPEND)
    fr = _open(ops, "/f", os.O_RDONLY | os.O_TRUNC)
    assert ops.getattr("/f")["st_size"] == 0 and (tmp_path / "f").read_bytes() == b""
    assert ops._handles[fa.fh].position == 0
    _close(ops, "/f", fr)
    _close(ops, "/f", fa)


def test_stat_of_a_file_open_here_shows_what_a_read_found_other_hosts_wrote(tmp_path):
    fs, ops = _ops(tmp_path)
    fw = _open(ops, "/f", os.O_WRONLY | os.O_CREAT)
    _write(ops, fw, b"a" * 100, 0)
    _close(ops, "/f", fw)
    fr = _open(ops, "/f", os.O_RDONLY)
    with fs.open_writer(f"{tmp_path}/f") as elsewhere:  # a rank on another node
        elsewhere.pwrite(b"b" * 100, 100)
    assert _read(ops, fr, 200, 0) == b"a" * 100 + b"b" * 100
    assert ops.getattr("/f")["st_size"] == 200
    _close(ops, "/f", fr)


def test_opening_a_missing_plfs_file_for_writing_without_o_creat_is_enoent(tmp_path):
    fs, ops = _ops(tmp_path)
    with pytest.raises(mfusepy.FuseOSError) as refused:
        _open(ops, "/missing", os.O_WRONLY)
    assert refused.value.errno == errno.ENOENT and not (tmp_path / "missing").exists()
