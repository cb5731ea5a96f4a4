"""Other processes acting at the worst moment: each test puts one step of another writer, closer
or reader exactly where a race would make a container return wrong data or a wrong size, and
checks what a user then reads. Each failed before its fix."""

import ctypes
import itertools
import os

import mfusepy
import pytest

import hpcbridge
from hpcbridge.mount.ops import BridgeOperations
from hpcbridge.plfs import api, reader, tools
from hpcbridge.plfs import writer as plfs_writer
from hpcbridge.plfs.container import Container


@pytest.fixture()
def fs():
    return hpcbridge.connect("plfs+file://")


def _pwrite_through_mount(ops, path, data, offset, flags=os.O_WRONLY):
    fi = mfusepy.fuse_file_info()
    fi.flags = flags
    ops.open(path, fi)
    buffer = ctypes.create_string_buffer(data, len(data))
    assert ops.write_from(fi.fh, ctypes.cast(buffer, ctypes.POINTER(ctypes.c_char)), len(data), offset) == len(data)
    ops.flush(path, fi)
    ops.release(path, fi)


def test_a_write_through_the_mount_wins_over_what_another_process_wrote_before(fs, tmp_path, monkeypatch):
    """The daemon's writers take their sequence numbers from the daemon's counter: opening a
    file must first raise it above the container's, or a daemon started before another process
    wrote the file gives the user's newer bytes lower numbers, and they lose."""
    with fs.open(f"{tmp_path}/f", "wb") as f:  # another process, many writes
        for _ in range(50):
            f.pwrite(b"o" * 100, 0)
    monkeypatch.setattr(plfs_writer, "_sequence", itertools.count(1))  # the daemon has drawn none
    ops = BridgeOperations(fs, str(tmp_path))
    _pwrite_through_mount(ops, "/f", b"N" * 10, 0)
    assert fs.read_bytes(f"{tmp_path}/f") == b"N" * 10 + b"o" * 90


def test_a_collective_close_keeps_its_writers_visible_until_the_jobs_record_is_written(fs, tmp_path, monkeypatch):
    """Each rank's open record stays until rank 0 has written the job's metadata record: in
    between, a stat must see the job's size and a writer opened by another process must win."""
    from mpi4py import MPI

    p = f"{tmp_path}/ckpt"
    with fs.open(p, "wb") as f:
        f.write(b"o" * 100)
    job = api.open(f"plfs+file://{p}", "wb", comm=MPI.COMM_SELF)
    for _ in range(5):
        job.pwrite(b"J" * 200, 0)
    write_meta, seen = Container.write_meta, {}

    def in_the_window(self, name, writers):
        if name.startswith("job."):
            seen["size"] = hpcbridge.connect("plfs+file://").info(p).size
            with fs.open_writer(p) as later:  # another process, opened after the job's writes
                later.pwrite(b"N" * 10, 0)
        return write_meta(self, name, writers)

    monkeypatch.setattr(Container, "write_meta", in_the_window)
    job.close()
    monkeypatch.undo()
    assert seen["size"] == 200
    assert fs.read_bytes(p) == b"N" * 10 + b"J" * 190
    assert fs.container(p).open_writers() == []  # cleared once the record was written


def test_a_collective_close_whose_record_fails_leaves_its_writers_to_recovery(fs, tmp_path, monkeypatch):
    from mpi4py import MPI

    p = f"{tmp_path}/ckpt"
    job = api.open(f"plfs+file://{p}", "wb", comm=MPI.COMM_SELF)
    job.pwrite(b"J" * 200, 0)

    def full(self, name, writers):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Container, "write_meta", full)
    with pytest.raises(OSError):
        job.close()
    monkeypatch.undo()
    container = fs.container(p)
    assert len(container.open_writers()) == 1  # not lost: still known, as a crashed writer
    assert fs.info(p).size == 200 and fs.read_bytes(p) == b"J" * 200
    assert len(tools.recover(container)) == 1
    assert container.open_writers() == [] and fs.info(p).size == 200


def test_flatten_records_the_log_sizes_it_read_not_later_ones(fs, tmp_path, monkeypatch):
    """A writer still open flushes while flatten builds the index: the flattened index must be
    stale (ignored) afterwards, not current with the flushed records missing."""
    p = f"{tmp_path}/f"
    with fs.open(p, "wb") as f:
        f.write(b"a" * 100)
    live = fs.open_writer(p)
    live.pwrite(b"b" * 50, 0)
    live.flush()
    load_index = reader.load_index

    def then_the_writer_flushes(*args, **kwargs):
        out = load_index(*args, **kwargs)
        live.pwrite(b"c" * 50, 100)
        live.flush()
        return out

    monkeypatch.setattr(reader, "load_index", then_the_writer_flushes)
    tools.flatten(fs.container(p))
    monkeypatch.undo()
    live.close()
    reader._CACHE.clear()
    assert fs.read_bytes(p) == b"b" * 50 + b"a" * 50 + b"c" * 50


def test_a_container_made_again_at_the_same_path_is_not_read_through_the_old_ones_cached_index(fs, tmp_path,
                                                                                               monkeypatch):
    """Same writer id, same sizes of logs and records: only the container's id tells the new
    container from the removed one whose resolved index this process cached."""
    import time

    p = f"{tmp_path}/f"
    monkeypatch.setattr(time, "time", lambda: 1.8e9)  # records of the same length

    def write(offset, byte):
        w = fs.open_writer(p, writer_id=7)
        w.pwrite(byte * 100, offset)
        w.close()

    write(0, b"a")
    assert fs.read_bytes(p) == b"a" * 100  # its index is now cached
    before = sorted((e.name, e.stat().st_size) for e in os.scandir(f"{p}/meta"))
    fs.rm(p)
    write(500, b"b")
    assert sorted((e.name, e.stat().st_size) for e in os.scandir(f"{p}/meta")) == before
    assert fs.read_bytes(p) == b"\0" * 500 + b"b" * 100


def test_a_writer_open_across_a_truncation_does_not_describe_the_new_file(fs, tmp_path):
    """Another open truncates the file (a new container) while a writer of the old one is
    open; that writer's close must not put its size into the new container's metadata (the
    size would then promise bytes no read can return)."""
    p = f"{tmp_path}/f"
    old = fs.open_writer(p)
    old.pwrite(b"o" * 100, 0)
    with fs.open(p, "wb") as f:
        f.write(b"n" * 10)
    old.pwrite(b"o" * 100, 1000)
    old.close()
    assert fs.info(p).size == 10 and fs.read_bytes(p) == b"n" * 10
    container = fs.container(p)
    assert len(container.closed_writers()) == 1
    assert container.compact_metas(threshold=0) == 2  # the stray record is dropped by a merge
    assert len(container.closed_writers()) == 1 and fs.info(p).size == 10


def test_a_writer_recovered_while_alive_and_then_closed_keeps_everything_it_indexed(fs, tmp_path):
    """On POSIX nothing stops a writer recovered by mistake: its own close's record counts all
    it indexed and must win over the recovery's, whatever order a listing returns them in."""
    p = f"{tmp_path}/f"
    alive = fs.open_writer(p)
    alive.pwrite(b"a" * 10, 0)
    alive.flush()
    assert len(tools.recover(fs.container(p))) == 1
    alive.pwrite(b"b" * 10, 10)
    alive.close()
    container = fs.container(p)
    for metas in (container.metas(), container.metas()[::-1]):
        assert [entry.get("recovered", False) for entry in container.closed_writers(metas).values()] == [False]
    assert fs.info(p).size == 20 and fs.read_bytes(p) == b"a" * 10 + b"b" * 10
    assert tools.check(container)["healthy"]
