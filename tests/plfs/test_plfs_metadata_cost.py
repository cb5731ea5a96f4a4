"""What a PLFS file costs to look at and to create: type checks (``exists``, ``isfile``,
``isdir``, ``rm``) do not compute a file's size (its metadata records, or every index log while a
writer is open), and a container just made is known to be empty (no size or sequence lookup).
The answers are checked against ``info``, which still computes everything."""

import errno
import os
import subprocess
import sys
import types

import mfusepy
import pytest

import hpcbridge
from hpcbridge.fs.file import OpenMode
from hpcbridge.fs.types import FileType
from hpcbridge.mount.ops import BridgeOperations
from hpcbridge.plfs.container import Container, MissingVolumesError


@pytest.fixture()
def fs():
    return hpcbridge.connect("plfs+file://")


def _forbid(monkeypatch, *names):
    """Make these size lookups of a container fail the test if called."""
    def refuse(*args, **kwargs):
        raise AssertionError("a type check or a fresh container computed a PLFS file's size")
    for name in names:
        monkeypatch.setattr(Container, name, refuse)


SIZE_LOOKUPS = ("summary_size", "metas", "open_writers", "index_logs", "max_sequence")


@pytest.mark.parametrize("writer_open", [True, False])
def test_type_checks_of_a_plfs_file_do_not_compute_its_size(fs, tmp_path, monkeypatch, writer_open):
    writer = fs.open_writer(f"{tmp_path}/ckpt")
    writer.pwrite(b"x" * 47001, 0)
    writer.flush()
    if not writer_open:
        writer.close()
    (tmp_path / "plain").write_bytes(b"not a container")
    (tmp_path / "dir").mkdir()
    paths = {name: f"{tmp_path}/{name}" for name in ("ckpt", "plain", "dir")}
    expected = {name: fs.info(p).type for name, p in paths.items()}
    assert expected == {"ckpt": FileType.FILE, "plain": FileType.OTHER, "dir": FileType.DIRECTORY}
    assert fs.info(paths["ckpt"]).size == 47001

    _forbid(monkeypatch, *SIZE_LOOKUPS)
    for name, p in paths.items():
        kind = expected[name]
        assert fs._type(p) == kind
        assert fs.exists(p)
        assert fs.isfile(p) is (kind == FileType.FILE)
        assert fs.isdir(p) is (kind == FileType.DIRECTORY)
    missing = f"{tmp_path}/missing"
    assert not fs.exists(missing) and not fs.isfile(missing) and not fs.isdir(missing)
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}/missing"):
        fs._type(missing)
    with pytest.raises(NotADirectoryError):
        fs.iterdir(paths["ckpt"])
    if writer_open:
        writer.close()
    fs.rm(paths["ckpt"])
    assert sorted(os.listdir(tmp_path)) == ["dir", "plain"]


def test_a_container_seen_through_some_of_its_volumes_is_refused_by_type_checks_too(tmp_path):
    vols = [tmp_path / f"v{k}" for k in range(2)]
    for v in vols:
        v.mkdir()
    with hpcbridge.plfs.open(f"plfs+file://{vols[0]}/ck,{vols[1]}/ck", "wb") as f:
        f.write(b"y" * 1000)
    fs = hpcbridge.connect("plfs+file://")
    with pytest.raises(MissingVolumesError):
        fs.info(f"{vols[0]}/ck")
    with pytest.raises(MissingVolumesError):
        fs._type(f"{vols[0]}/ck")
    assert not fs.exists(f"{vols[0]}/ck") and not fs.isfile(f"{vols[0]}/ck")


def test_a_container_knows_whether_this_call_made_it(fs, tmp_path):
    p = f"{tmp_path}/f"
    assert fs.prepare_container(p, OpenMode.for_pwrite()).created
    with fs.open_writer(p) as w:
        w.pwrite(b"z" * 10, 5)
    assert not fs.prepare_container(p, OpenMode.for_pwrite()).created
    assert fs.info(p).size == 15
    assert fs.prepare_container(p, OpenMode.parse("wb", fs.url(p))).created  # emptied: made anew
    assert fs.info(p).size == 0


def test_opening_a_new_plfs_file_for_writing_looks_up_no_size_or_sequence(fs, tmp_path, monkeypatch):
    _forbid(monkeypatch, "summary_size", "metas", "max_sequence")
    with fs.open(f"{tmp_path}/new", "wb") as f:
        f.write(b"a" * 100)
    with fs.open_writer(f"{tmp_path}/other") as w:
        w.pwrite(b"b" * 10, 0)
    monkeypatch.undo()
    assert fs.info(f"{tmp_path}/new").size == 100 and fs.info(f"{tmp_path}/other").size == 10


MANY_WRITES = """
import sys, hpcbridge
with hpcbridge.connect("plfs+file://").open_writer(sys.argv[1]) as w:
    for _ in range(50):  # sequence numbers up to 50: more than a fresh process starts with
        w.pwrite(b"D" * 1000, 0)
"""
ONE_WRITE = """
import sys, hpcbridge
with hpcbridge.connect("plfs+file://").open_writer(sys.argv[1]) as w:
    w.pwrite(b"N" * 1000, 0)
"""


def test_a_later_process_writing_an_existing_file_still_wins(fs, tmp_path):
    # The sequence lookup skipped for new containers is kept for existing ones: a process that
    # opens the file after another closed it draws greater sequence numbers, so its bytes win.
    p = f"{tmp_path}/f"
    for code in (MANY_WRITES, ONE_WRITE):
        done = subprocess.run([sys.executable, "-c", code, p], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    assert fs.read_bytes(p) == b"N" * 1000


def _open(ops, path, flags):
    fi = mfusepy.fuse_file_info()
    fi.flags = flags
    ops.create(path, 0o644, fi)
    return fi


def _close(ops, path, fi):
    ops.flush(path, fi)
    ops.release(path, fi)


def test_mount_create_of_a_new_file_and_unlink_skip_size_lookups(fs, tmp_path, monkeypatch):
    """The mount's create of a file that did not exist knows its size (0) and its unlink asks
    only the type: neither reads a container's metadata (Open MPI creates and removes a probe
    file at every MPI_File_open)."""
    ops = BridgeOperations(fs, str(tmp_path))
    with fs.open_writer(f"{tmp_path}/kept") as w:
        w.pwrite(b"k" * 4096, 0)
    _forbid(monkeypatch, *SIZE_LOOKUPS)
    for flags in (os.O_RDWR | os.O_CREAT, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, os.O_RDWR | os.O_CREAT | os.O_EXCL):
        fi = _open(ops, "/probe", flags)
        assert ops.getattr("/probe")["st_size"] == 0
        _close(ops, "/probe", fi)
        ops.unlink("/probe")
        assert not fs.exists(f"{tmp_path}/probe")
    monkeypatch.undo()
    # Existing files: O_CREAT keeps the size, O_TRUNC empties, O_EXCL refuses.
    fi = _open(ops, "/kept", os.O_RDWR | os.O_CREAT)
    assert ops.getattr("/kept")["st_size"] == 4096
    _close(ops, "/kept", fi)
    fi = _open(ops, "/kept", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    assert ops.getattr("/kept")["st_size"] == 0
    _close(ops, "/kept", fi)
    assert fs.info(f"{tmp_path}/kept").size == 0
    with pytest.raises(mfusepy.FuseOSError) as refused:
        _open(ops, "/kept", os.O_RDWR | os.O_CREAT | os.O_EXCL)
    assert refused.value.errno == errno.EEXIST
    (tmp_path / "d").mkdir()
    with pytest.raises(mfusepy.FuseOSError) as is_dir:
        ops.unlink("/d")
    assert is_dir.value.errno == errno.EISDIR
    (tmp_path / "plain").write_bytes(b"p")
    ops.unlink("/plain")  # a plain backing file inside the PLFS tree
    assert sorted(os.listdir(tmp_path)) == ["d", "kept"]


# -- metadata records are merged once there are many -------------------------------------------
def _write_and_close(fs, path, offset, payload):
    with fs.open_writer(path) as w:
        w.pwrite(payload, offset)


def test_many_closed_writers_leave_few_metadata_records(fs, tmp_path, monkeypatch):
    monkeypatch.setattr(Container, "COMPACT_RECORDS", 4)
    p = f"{tmp_path}/log"
    expected = bytearray()
    for i in range(23):  # as 23 appends through a mount, each its own writer
        line = b"line %02d\n" % i
        _write_and_close(fs, p, len(expected), line)
        expected += line
        assert len([n for n in os.listdir(f"{tmp_path}/log/meta") if not n.startswith("merged.")]) <= 5
    container = fs.container(p)
    assert len(container.closed_writers()) == 23  # every writer still has its summary
    assert container.summary_size() == len(expected) == fs.info(p).size
    assert fs.read_bytes(p) == bytes(expected)
    from hpcbridge.plfs import tools

    report = tools.check(container, deep=True)
    assert report["healthy"], report["problems"]
    assert sorted(n for n in os.listdir(f"{tmp_path}/log/meta") if n.startswith("merged.")) == [
        f"merged.{n:08d}.json" for n in range(1, 5)]  # 5 records merged at closes 5, 10, 15, 20


def test_a_reader_whose_listed_records_are_merged_before_it_reads_them_finds_the_merge(fs, tmp_path, monkeypatch):
    """The reader lists the records, another process merges and removes them, the reader's
    reads fail: it must find the merged record (skipping the missing ones would drop those
    writers' sizes, and a file could read short)."""
    p = f"{tmp_path}/f"
    for i in range(6):
        _write_and_close(fs, p, i * 1000, bytes([i + 1]) * (1000 + 500 * (i == 5)))
    reader_side, other_process = fs.container(p), fs.container(p)
    backing = reader_side.fs
    original = type(backing).read_bytes
    calls = []

    def read_bytes(self, path, *args, **kwargs):
        if "/meta/" in path and not calls:
            calls.append(path)
            assert other_process.compact_metas(threshold=0) == 6  # between the listing and the read
        return original(self, path, *args, **kwargs)

    monkeypatch.setattr(type(backing), "read_bytes", read_bytes)
    metas = reader_side.metas()
    assert calls and [m["size"] for m in metas] == [6500] and len(metas[0]["writers"]) == 6
    assert reader_side.summary_size() == 6500


def test_a_listing_that_misses_a_merge_and_the_records_it_removed_still_finds_every_writer(fs, tmp_path, monkeypatch):
    """A directory listing is not a snapshot: one made while a merge creates its record and
    removes the ones it merged can return neither (ext4 returns entries in hash order; CI saw a
    file's size drop to 0 this way). The reader must still find every writer."""
    p = f"{tmp_path}/f"
    for i in range(6):
        _write_and_close(fs, p, i * 1000, bytes([i + 1]) * (1000 + 500 * (i == 5)))
    reader_side, other_process = fs.container(p), fs.container(p)
    listing = Container._meta_paths

    def listing_overtaken_by_two_merges(self):
        listed = listing(self)  # the records, as the cursor will see them
        assert other_process.compact_metas(threshold=0) == 6  # the merged record lands behind the cursor
        _write_and_close(fs, p, 6500, b"z" * 10)  # a later writer, and a second merge
        _write_and_close(fs, p, 6510, b"z" * 10)
        assert other_process.compact_metas(threshold=0) == 2
        return [path for path in listed if os.path.exists(path)]  # merged records removed ahead of it

    monkeypatch.setattr(reader_side, "_meta_paths", types.MethodType(listing_overtaken_by_two_merges, reader_side))
    assert reader_side.summary_size() == 6520
    monkeypatch.undo()
    assert len(reader_side.closed_writers()) == 8 and reader_side.max_sequence() == fs.container(p).max_sequence()


def test_of_two_merges_at_once_one_makes_the_generation_and_the_other_leaves_its_records(fs, tmp_path, monkeypatch):
    p = f"{tmp_path}/f"
    for i in range(4):
        _write_and_close(fs, p, i * 10, b"x" * 10)
    first, second = fs.container(p), fs.container(p)
    backing = first.fs
    original_open = type(backing).open
    raced = []

    def open_(self, path, mode="rb", *args, **kwargs):
        if "/meta/merged." in str(path) and mode == "xb" and not raced:
            raced.append(path)
            assert second.compact_metas(threshold=0) == 4  # claims the same generation first
            _write_and_close(fs, p, 40, b"y" * 10)  # and a writer closes meanwhile
        return original_open(self, path, mode, *args, **kwargs)

    monkeypatch.setattr(type(backing), "open", open_)
    assert first.compact_metas(threshold=0) == 0  # lost the race: removes nothing
    monkeypatch.undo()
    names = sorted(os.listdir(f"{tmp_path}/f/meta"))
    assert raced and len(names) == 2 and names[0] == "merged.00000001.json" and names[1].startswith("w.")
    assert first.compact_metas(threshold=0) == 0  # one record: nothing to merge
    _write_and_close(fs, p, 50, b"y" * 10)
    assert first.compact_metas(threshold=0) == 2
    assert sorted(os.listdir(f"{tmp_path}/f/meta")) == ["merged.00000001.json", "merged.00000002.json"]
    assert len(first.closed_writers()) == 6 and fs.info(p).size == 60


def test_a_writer_closing_while_sequence_numbers_are_drawn_is_counted(fs, tmp_path, monkeypatch):
    """A writer closes between the reads of the metadata records and of the open-writer
    records: its highest sequence number must still count, or a writer opening then draws
    lower ones and its later writes lose to the closed writer's older ones."""
    p = f"{tmp_path}/f"
    _write_and_close(fs, p, 0, b"a" * 10)
    closing = fs.open_writer(p)
    closing.pwrite(b"b" * 10, 0)
    drawing = fs.container(p)

    def metas_while_it_closes():
        metas = Container.metas(drawing)
        closing.close()
        return metas

    monkeypatch.setattr(drawing, "metas", metas_while_it_closes)
    highest = drawing.max_sequence()
    monkeypatch.undo()
    assert highest == fs.container(p).max_sequence() > 0
    with fs.open_writer(p) as later:
        later.pwrite(b"c" * 10, 0)
    assert fs.read_bytes(p) == b"c" * 10


@pytest.mark.parametrize("torn, left", [
    ("w.torn.json", ["merged.00000001.json", "w.torn.json"]),  # a record being written, or damaged: left
    ("merged.00000001.json", ["merged.00000001.json", "merged.00000002.json"]),  # a merge that died writing
], ids=["record", "merged-record"])
def test_a_record_that_cannot_be_read_is_left_and_skipped(fs, tmp_path, torn, left):
    p = f"{tmp_path}/f"
    for i in range(3):
        _write_and_close(fs, p, i * 10, b"x" * 10)
    container = fs.container(p)
    with open(f"{tmp_path}/f/meta/{torn}", "w") as f:
        f.write('{"writers": [')
    assert container.compact_metas(threshold=0) == 3
    assert sorted(os.listdir(f"{tmp_path}/f/meta")) == left
    assert len(container.closed_writers()) == 3 and fs.info(p).size == 30


def test_concurrent_closes_compactions_and_readers_agree(fs, tmp_path, monkeypatch):
    """Four threads each open, write and close writers of one file (every close compacting, each
    thread with containers of its own), while a fifth reads its size: the size never goes
    down, and the file reads back as written."""
    import threading

    monkeypatch.setattr(Container, "COMPACT_RECORDS", 2)
    p = f"{tmp_path}/f"
    _write_and_close(fs, p, 0, b"\0")
    done, sizes, errors = threading.Event(), [], []

    def writer(t):
        try:
            for i in range(12):
                _write_and_close(hpcbridge.connect("plfs+file://"), p, (i * 4 + t) * 100, bytes([t + 1]) * 100)
        except Exception as exc:  # reported below
            errors.append(exc)

    def reader():
        local = hpcbridge.connect("plfs+file://")
        while not done.is_set():
            try:
                sizes.append(local.info(p).size)
            except Exception as exc:
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    watcher.join()
    assert not errors, errors
    assert sizes == sorted(sizes) and sizes  # never shrinks: no record missed mid-merge
    assert fs.info(p).size == 4800
    expected = b"".join(bytes([(k % 4) + 1]) * 100 for k in range(48))
    assert fs.read_bytes(p) == expected
    assert len(fs.container(p).closed_writers()) == 49


def test_at_every_step_of_a_compaction_every_writer_has_a_summary(fs, tmp_path, monkeypatch):
    p = f"{tmp_path}/f"
    for i in range(5):
        _write_and_close(fs, p, i * 100, b"y" * 100)
    compactor = fs.container(p)
    backing = compactor.fs
    original_rm, original_rename = type(backing).rm, type(backing).rename
    seen = []

    def check():
        seen.append(len(fs.container(p).closed_writers()))

    def rm(self, path, *args, **kwargs):
        check()
        original_rm(self, path, *args, **kwargs)
        check()

    def rename(self, src, dst):
        check()
        original_rename(self, src, dst)
        check()

    monkeypatch.setattr(type(backing), "rm", rm)
    monkeypatch.setattr(type(backing), "rename", rename)
    assert compactor.compact_metas(threshold=0) == 5
    monkeypatch.undo()
    assert len(seen) == 10 and set(seen) == {5}, seen
    assert fs.info(p).size == 500 and len(os.listdir(f"{tmp_path}/f/meta")) == 1
