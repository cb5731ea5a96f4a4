"""Mounts of HDFS (plain and PLFS on it) against a local directory as the oracle: a reader
opened while this daemon writes the file, a second writer, a directory renamed over another."""

import errno
import os

import pytest

from hpcbridge.mount.ops import BridgeOperations

pytestmark = pytest.mark.hdfs


@pytest.fixture(params=["hdfs", "plfs_hdfs"])
def hdfs_mount_dir(request, tmp_path):
    """``(directory in an HDFS-backed mount, local oracle directory)``."""
    mounted = request.getfixturevalue(f"{request.param}_mount" if request.param == "plfs_hdfs"
                                      else "hdfs_plain_mount")
    directory = os.path.join(mounted.path, f"{request.param}-{os.urandom(4).hex()}")
    os.mkdir(directory)
    return directory, str(tmp_path)


def _outcome(call):
    try:
        result = call()
        return "ok" if result is None else result
    except OSError as exc:
        return errno.errorcode[exc.errno]


def test_a_reader_sees_what_another_descriptor_wrote(hdfs_mount_dir):
    """hdfs://: a reader opened while a descriptor of this daemon wrote the file read 0 bytes,
    even after the writer closed (the docs promise its bytes)."""
    results = []
    for root in hdfs_mount_dir:
        path = os.path.join(root, "f")
        w = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(w, b"x" * 1000)
        r = os.open(path, os.O_RDONLY)
        seen = [os.stat(path).st_size, len(os.pread(r, 4096, 0))]
        os.close(w)
        seen.append(len(os.pread(r, 4096, 0)))
        os.close(r)
        results.append(seen)
    assert results[0] == results[1] == [1000, 1000, 1000]


def test_a_second_writer_never_loses_the_first_ones_bytes(hdfs_mount_dir):
    """hdfs://: an O_APPEND open of a file another descriptor was writing re-created it (HDFS
    showed it empty): the 1000 bytes written were lost. Now it is EBUSY there (one writer per
    HDFS file); PLFS on HDFS takes both writers, as the local file system does."""
    mount_dir, local = hdfs_mount_dir
    results = []
    for root in (local, mount_dir):
        path = os.path.join(root, "g")
        w1 = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(w1, b"a" * 1000)
        try:
            w2 = os.open(path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            second = errno.errorcode[exc.errno]
        else:
            os.write(w2, b"b" * 10)
            os.close(w2)
            second = "ok"
        os.write(w1, b"c" * 10)
        os.close(w1)
        with open(path, "rb") as f:
            data = f.read()
        results.append((second, data[:1000] == b"a" * 1000, len(data)))
    plain_hdfs = "/hdfs-" in mount_dir
    assert results[1] == (("EBUSY", True, 1010) if plain_hdfs else results[0])


def test_a_directory_renamed_over_another_as_rename_2(hdfs_mount_dir):
    """Over an empty directory: replaced; over a non-empty one: ENOTEMPTY (both were EEXIST)."""
    results = []
    for root in hdfs_mount_dir:
        for d in ("src", "empty", "full"):
            os.mkdir(os.path.join(root, d))
        for f in ("src/k", "full/f"):
            open(os.path.join(root, f), "wb").close()
        outcomes = [_outcome(lambda: os.rename(os.path.join(root, "src"), os.path.join(root, "full"))),
                    _outcome(lambda: os.rename(os.path.join(root, "src"), os.path.join(root, "empty")))]
        results.append((outcomes, sorted(os.listdir(root)), os.listdir(os.path.join(root, "empty"))))
    assert results[1] == results[0] == (["ENOTEMPTY", "ok"], ["empty", "full"], ["k"])


def test_a_failed_close_of_the_hdfs_file_reaches_its_writer(hdfs, hdfs_root, tmp_path, monkeypatch):
    """hdfs://: a descriptor's bytes reach HDFS only when the daemon closes the file, which a
    flush does; a flush that is not the writer's own close (here a child's close-on-exec of the
    inherited descriptor, as `subprocess.run(["cat", path])` makes, whose result nobody reads)
    took the close's failure along and the writer's fsync and close said 0: its 5000 bytes
    lost silently (seen with the libhdfs driver on a one-DataNode testbed, whose append
    pipeline failed). The local oracle keeps every byte; the mount must report the loss to the
    writer (fsync or close) if it cannot keep them."""
    from hpcbridge.fs.hdfs import _HdfsWriteRaw
    from tests.mount.test_mount_races import _close, _open, _write

    ops = BridgeOperations(hdfs, hdfs_root)
    local = tmp_path / "f"
    w = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    fi = _open(ops, "/f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    oracle, mount = [], []
    for data in (b"a" * 5000, b"b" * 5000):
        oracle.append(os.write(w, data))
        mount.append(_write(ops, fi, data, len(data) * len(mount)))
        if len(mount) == 1:
            ops.flush("/f", fi)  # a child's close-on-exec: the first close succeeds
    real_close, leaked = _HdfsWriteRaw.close, []

    def lost(self):  # the DataNode pipeline fails: the bytes since the last close are gone
        leaked.append(self)
        raise OSError(errno.EIO, "Failed to replace a bad datanode on the existing pipeline")

    monkeypatch.setattr(_HdfsWriteRaw, "close", lost)
    try:
        ops.flush("/f", fi)  # the second child's close-on-exec: its result is not read
    except Exception:
        pass
    monkeypatch.setattr(_HdfsWriteRaw, "close", real_close)
    for raw in leaked:
        raw.close()  # give the lease back (the test's stand-in kept the stream open)
    hdfs.rm(f"{hdfs_root}/f")  # ... and lose the bytes, as the failed pipeline did
    with hdfs.open(f"{hdfs_root}/f", "wb") as f:
        f.write(b"a" * 5000)
    reported = []
    for call in (lambda: os.fsync(w), lambda: ops.fsync("/f", 0, fi)):
        reported.append(_outcome(call))
    oracle_close = _outcome(lambda: os.close(w))
    mount_close = _outcome(lambda: _close(ops, "/f", fi))
    with open(local, "rb") as f:
        kept_locally = f.read()
    with hdfs.open(f"{hdfs_root}/f", "rb") as f:
        kept = f.read()
    assert (oracle, reported[0], oracle_close, len(kept_locally)) == ([5000, 5000], "ok", "ok", 10000)
    assert mount == oracle
    assert kept == kept_locally or "EIO" in (reported[1], mount_close), (reported, mount_close, len(kept))


def test_a_read_only_open_with_o_creat_makes_the_file(hdfs_mount_dir):
    """hdfs://: open(O_RDONLY | O_CREAT) of a new file was ENOENT (the backend's read-only
    open does not create); Linux makes it empty, as the PLFS mounts already did."""
    results = []
    for root in hdfs_mount_dir:
        path = os.path.join(root, "ro-created")
        seen = []
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
        seen += [os.read(fd, 10), os.fstat(fd).st_size]
        os.close(fd)
        seen += [os.path.isfile(path), _outcome(lambda: os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL))]
        results.append(seen)
    assert results[1] == results[0] == [b"", 0, True, "EEXIST"]


def test_a_failed_close_of_a_plfs_writer_reaches_its_owner(hdfs_cluster, hdfs_root, tmp_path, monkeypatch):
    """plfs+hdfs://: the same for a PLFS writer: a flush that was not the owner's close(2)
    took the writer's failed close along, and the owner's fsync and close said 0."""
    import hpcbridge
    from hpcbridge.plfs.writer import PlfsWriter
    from tests.mount.test_mount_races import _close, _open, _write

    info = hdfs_cluster.info
    fs = hpcbridge.connect(f"plfs+{info.url}", webhdfs=f"http://127.0.0.1:{info.http_port}")
    ops = BridgeOperations(fs, hdfs_root)
    w = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    fi = _open(ops, "/f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    assert _write(ops, fi, b"a" * 5000, 0) == os.write(w, b"a" * 5000) == 5000
    real_close, leaked = PlfsWriter.close, []

    def lost(self, write_meta=True):
        leaked.append(self)
        raise OSError(errno.EIO, "Failed to replace a bad datanode on the existing pipeline")

    monkeypatch.setattr(PlfsWriter, "close", lost)
    try:
        ops.flush("/f", fi)  # a child's close-on-exec: its result is not read
    except Exception:
        pass
    monkeypatch.setattr(PlfsWriter, "close", real_close)
    oracle = [_outcome(lambda: os.fsync(w)), _outcome(lambda: os.close(w))]
    mount = [_outcome(lambda: ops.fsync("/f", 0, fi)), _outcome(lambda: _close(ops, "/f", fi))]
    for writer in leaked:
        writer.close()
    assert oracle == ["ok", "ok"]
    assert "EIO" in mount, mount
