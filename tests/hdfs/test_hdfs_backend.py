"""HDFS semantics made safe, block locations, readahead, drivers and timeouts, on the real cluster."""

import errno
import io
import os
import signal
import subprocess
import time

import numpy as np
import pytest

import hpcbridge
from hpcbridge.errors import BackendUnavailable, MissingDependencyError
from hpcbridge.fs.hdfs import HdfsFileSystem
from hpcbridge.testbed.hadoop import java_command

pytestmark = pytest.mark.hdfs
MiB = 1 << 20


def test_capabilities_describe_hdfs(hdfs):
    caps = hdfs.capabilities
    assert not caps.positional_write and not caps.concurrent_writers and not caps.read_write
    assert caps.append and caps.block_locations and not caps.rename_replaces


def test_block_locations_name_distinct_hosts_and_racks(hdfs, hdfs_root):
    path = f"{hdfs_root}/rep3.bin"
    data = os.urandom(3 * MiB + 123)
    with hdfs.create(path, replication=3, block_size=MiB) as f:
        f.write(data)
    info = hdfs.info(path)
    assert (info.replication, info.block_size, info.size) == (3, MiB, len(data))
    blocks = _complete_layout(hdfs, path, 3)
    assert [(b.offset, b.length) for b in blocks] == [(0, MiB), (MiB, MiB), (2 * MiB, MiB), (3 * MiB, 123)]
    for b in blocks:
        assert sorted(b.hosts) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        assert dict(zip(b.hosts, b.racks)) == {"127.0.0.2": "/rack0", "127.0.0.3": "/rack1", "127.0.0.4": "/rack0"}
        assert len(b.targets) == 3
    assert [(b.offset, b.length) for b in hdfs.block_locations(path, MiB + 10, 20)] == [(MiB + 10, 20)]


def _complete_layout(fs, path, replication, timeout=30):
    """Block locations once the NameNode knows every replica (it learns of them just after close)."""
    deadline = time.monotonic() + timeout
    while True:
        blocks = fs.block_locations(path)
        if all(len(b.hosts) == replication for b in blocks) or time.monotonic() > deadline:
            return blocks
        time.sleep(0.2)


def test_replication_one_spreads_blocks_over_datanodes(hdfs, hdfs_root):
    path = f"{hdfs_root}/spread.bin"
    with hdfs.create(path, replication=1, block_size=MiB) as f:
        f.write(bytes(12 * MiB))
    hosts = [b.hosts for b in hdfs.block_locations(path)]
    assert all(len(h) == 1 for h in hosts)
    assert len({h[0] for h in hosts}) >= 2  # the NameNode places blocks on several DataNodes


def test_block_location_cache_follows_appends(hdfs, hdfs_root):
    path = f"{hdfs_root}/grow.bin"
    with hdfs.create(path, block_size=MiB) as f:
        f.write(bytes(MiB))
    assert hdfs.block_locations(path)[-1].end == MiB
    with hdfs.open(path, "ab") as f:
        f.write(bytes(MiB // 2))
    assert hdfs.block_locations(path)[-1].end == MiB + MiB // 2


def test_block_locations_after_a_same_size_rewrite_within_a_second(hdfs, hdfs_root, hdfs_cluster):
    """libhdfs gives whole-second mtimes, the layout cache's version is (size, mtime): a rewrite
    in the same second must not be answered with the old file's blocks."""
    import json
    import urllib.request

    path = f"{hdfs_root}/rewritten.bin"
    url = (f"http://127.0.0.1:{hdfs_cluster.info.http_port}/webhdfs/v1{path}"
           f"?op=GETFILEBLOCKLOCATIONS&offset=0&length={4 * MiB}")

    def theirs():
        blocks = json.loads(urllib.request.urlopen(url, timeout=30).read())["BlockLocations"]["BlockLocation"]
        return [(b["offset"], b["length"], sorted(b["hosts"])) for b in blocks]

    for round_ in range(3):
        with hdfs.create(path, block_size=MiB, replication=2) as f:
            f.write(bytes([round_]) * (4 * MiB))
        # The NameNode learns of the second replicas shortly after close; compare once it knows
        # them all, so both answers describe the same moment (what this test checks is the rewrite).
        deadline = time.monotonic() + 30
        while not all(len(hosts) == 2 for _, _, hosts in theirs()) and time.monotonic() < deadline:
            time.sleep(0.05)
        ours = [(b.offset, b.length, sorted(b.hosts)) for b in hdfs.block_locations(path)]
        assert ours == theirs()


def _fsck_replicas(cluster, path):
    """Oracle: ``hdfs fsck PATH -files -blocks -locations``: each block's replica transfer
    addresses, sorted."""
    import re

    run = subprocess.run(java_command("org.apache.hadoop.hdfs.tools.DFSck", cluster.info.conf_dir,
                                      [path, "-files", "-blocks", "-locations"]),
                         capture_output=True, timeout=120)
    lines = [line for line in run.stdout.decode().splitlines() if " len=" in line]
    return [sorted(re.findall(r"\d+\.\d+\.\d+\.\d+:\d+", line.split(" len=", 1)[1])) for line in lines]


@pytest.mark.slow  # ~9 s: the NameNode drops excess replicas on its heartbeats
def test_block_locations_follow_a_replication_change(hdfs_admin, hdfs_root, hdfs_cluster):
    """A setrep leaves length and mtime as they were: the cached layout kept naming the removed
    replicas (3 hosts after setrep 1, for LAYOUT_TTL) where fsck names one. Both drivers share
    this WebHDFS path, so one connection checks it."""
    import json
    import urllib.request

    fs, path = hdfs_admin, f"{hdfs_root}/setrep.bin"
    url = (f"http://127.0.0.1:{hdfs_cluster.info.http_port}/webhdfs/v1{path}"
           f"?op=GETFILEBLOCKLOCATIONS&offset=0&length={4 * MiB}")
    with fs.create(path, replication=3, block_size=MiB) as f:
        f.write(os.urandom(MiB + 3))
    assert all(len(b.hosts) == 3 for b in _complete_layout(fs, path, 3))  # cached now
    fs.set_replication(path, 1)
    deadline = time.monotonic() + 30  # the NameNode drops excess replicas over a few heartbeats
    while time.monotonic() < deadline:
        blocks = json.loads(urllib.request.urlopen(url, timeout=30).read())["BlockLocations"]["BlockLocation"]
        if all(len(b["hosts"]) == 1 for b in blocks):
            break
        time.sleep(0.1)
    theirs = _fsck_replicas(hdfs_cluster, path)
    assert [len(r) for r in theirs] == [1, 1]
    assert [sorted(b.targets) for b in fs.block_locations(path)] == theirs


def test_a_same_size_rewrite_is_a_new_version(hdfs, hdfs_root, hdfs_cluster):
    """Oracle: WebHDFS GETFILESTATUS names the rewritten file by a new fileId and mtime. libhdfs
    gives whole-second mtimes, so ``version`` (size, mtime) named both files alike and caches
    keyed by it served the old one: ``hdf5.describe`` gave the replaced dataset's shape."""
    import json
    import urllib.request

    h5py = pytest.importorskip("h5py")
    from hpcbridge.hdf5 import describe

    def h5(shape):
        buffer = io.BytesIO()
        with h5py.File(buffer, "w") as f:
            f.create_dataset("x", data=np.zeros(shape, "<i4"))
        return buffer.getvalue()

    def theirs(path):
        url = f"http://127.0.0.1:{hdfs_cluster.info.http_port}/webhdfs/v1{path}?op=GETFILESTATUS"
        status = json.loads(urllib.request.urlopen(url, timeout=30).read())["FileStatus"]
        return status["fileId"], status["modificationTime"]

    tall, wide = h5((100, 10)), h5((10, 100))
    assert len(tall) == len(wide)
    for round_ in range(3):  # old code: a round whose writes shared a second failed (libhdfs)
        path = f"{hdfs_root}/r{round_}.h5"
        hdfs.write_bytes(path, tall)
        before, their_before = hdfs.version(path), theirs(path)
        assert describe(hdfs, path, "x")[0].shape == (100, 10)
        hdfs.write_bytes(path, wide)
        assert theirs(path) != their_before
        assert hdfs.version(path) != before
        assert describe(hdfs, path, "x")[0].shape == (10, 100)


def test_create_with_mode_and_owner_mapping(hdfs, hdfs_root):
    path = f"{hdfs_root}/private.bin"
    with hdfs.create(path, permission=0o600) as f:
        f.write(b"secret")
    info = hdfs.info(path)
    assert info.mode & 0o777 == 0o600
    assert info.owner == "root" and info.uid == 0  # the HDFS owner name mapped to the local uid
    hdfs.chmod(path, 0o640)
    assert hdfs.info(path).mode & 0o777 == 0o640


def test_new_files_and_directories_honour_the_client_umask(hdfs_cluster, hdfs_options, hdfs_root, hdfs_admin):
    """Oracle: FsShell -mkdir with fs.permissions.umask-mode=077 makes the directory 700 (and Java
    creates files 666 less the umask). hdfs-native sends the mode it is given: the native driver
    made them 755 and 644, readable by everyone, where the site's umask said private."""
    run = _fsshell(hdfs_cluster, "-D", "fs.permissions.umask-mode=077", "-mkdir",
                   f"{hdfs_cluster.info.url}{hdfs_root}/by-fsshell")
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert hdfs_admin.info(f"{hdfs_root}/by-fsshell").mode & 0o777 == 0o700
    fs = hpcbridge.connect(hdfs_cluster.info.url, **hdfs_options, config={"fs.permissions.umask-mode": "077"})
    fs.mkdir(f"{hdfs_root}/d")
    fs.write_bytes(f"{hdfs_root}/d/f", b"private")
    with fs.open(f"{hdfs_root}/d/appended", "ab") as f:  # append creates a missing file
        f.write(b"x")
    assert fs.info(f"{hdfs_root}/d").mode & 0o777 == 0o700
    assert fs.info(f"{hdfs_root}/d/f").mode & 0o777 == 0o600
    assert fs.info(f"{hdfs_root}/d/appended").mode & 0o777 == 0o600
    default = hpcbridge.connect(hdfs_cluster.info.url, **hdfs_options)  # the testbed sets none: 022
    default.mkdir(f"{hdfs_root}/e")
    default.write_bytes(f"{hdfs_root}/e/f", b"shared")
    assert (default.info(f"{hdfs_root}/e").mode & 0o777, default.info(f"{hdfs_root}/e/f").mode & 0o777) == (0o755, 0o644)


def test_umask_settings_read_as_hadoop_documents_them(tmp_path, monkeypatch):
    from hpcbridge.fs.hdfs import configured_umask, parse_umask

    assert [parse_umask(t) for t in ("022", "077", "u=rwx,g=r-x,o=r-x", "u=rwx,g=rwx,o=", "a=rx")] == \
        [0o022, 0o077, 0o022, 0o007, 0o222]
    with pytest.raises(ValueError, match="umask-mode"):
        parse_umask("rwxr-x---")
    setting = "<property><name>fs.permissions.umask-mode</name><value>027</value></property>"
    (tmp_path / "core-site.xml").write_text(f"<configuration>{setting}</configuration>")
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    assert configured_umask() == 0o027
    assert configured_umask({"fs.permissions.umask-mode": "077"}) == 0o077
    monkeypatch.delenv("HADOOP_CONF_DIR")
    monkeypatch.delenv("HADOOP_HOME", raising=False)
    assert configured_umask() == 0o022


def test_url_user_owns_created_files(hdfs_cluster, hdfs_options):
    info = hdfs_cluster.info
    fs = hpcbridge.connect(f"hdfs://alice@127.0.0.1:{info.rpc_port}/", **hdfs_options)
    assert fs.user == "alice"
    root = hpcbridge.connect(info.url, **hdfs_options)
    root.mkdir("/user/alice", parents=True, exist_ok=True)
    root.chmod("/user/alice", 0o777)
    fs.write_bytes("/user/alice/mine.txt", b"hi")
    assert fs.info("/user/alice/mine.txt").owner == "alice"
    assert fs.info("/user/alice/mine.txt").uid == -1  # no local account named alice
    fs.rm("/user/alice/mine.txt")


def test_a_refusal_names_what_the_namenode_named(hdfs_cluster, hdfs_options, hdfs_admin, hdfs_root):
    """Oracle: WebHDFS LISTSTATUS's message for a directory its user may not read. hdfs-native
    escapes the quotes in it (inode=\\"/dir\\"...): the message was cut at the first one."""
    import json
    import urllib.error
    import urllib.request

    hdfs_admin.mkdir(f"{hdfs_root}/private")
    hdfs_admin.chmod(f"{hdfs_root}/private", 0o700)
    url = f"http://127.0.0.1:{hdfs_cluster.info.http_port}/webhdfs/v1{hdfs_root}/private?op=LISTSTATUS&user.name=alice"
    with pytest.raises(urllib.error.HTTPError) as web:
        urllib.request.urlopen(url, timeout=30)
    theirs = json.load(web.value)["RemoteException"]["message"]
    assert 'inode="' in theirs
    alice = hpcbridge.connect(f"hdfs://alice@127.0.0.1:{hdfs_cluster.info.rpc_port}/", **hdfs_options)
    with pytest.raises(PermissionError) as ours:
        alice.ls(f"{hdfs_root}/private")
    assert theirs in str(ours.value)


def test_a_file_reads_whole_right_after_it_is_closed(hdfs, hdfs_root):
    """At replication 2 the testbed's NameNode accepts a close before a DataNode reported the
    last block (num-committed-allowed): for a few milliseconds hdfs-native's reader left that
    block out, and 4 in 200 small files read back empty (a PLFS marker read as "not JSON")."""
    wrong = []
    for i in range(300):
        path = f"{hdfs_root}/f{i}"
        payload = bytes([i % 251]) * (165, 512, 4096)[i % 3]  # 512-multiples too
        hdfs.write_bytes(path, payload)
        got = hdfs.read_bytes(path)
        if got != payload:
            wrong.append((i, len(got), len(payload)))
    assert hdfs.info(f"{hdfs_root}/f0").replication == 2
    assert not wrong


def test_append_right_after_close_leaves_no_stale_replica(hdfs_cluster, hdfs, hdfs_root):
    """hdfs-native appends through the replicas the NameNode lists, without a new generation
    stamp: right after a close (before every DataNode reported), a replica missed the appended
    bytes and stayed counted live (3 of 20 files on the testbed). Every replica on the
    DataNodes' disks that carries the block's current generation stamp (its ``.meta`` file's
    name) must be as long as the NameNode's block; one with an older stamp is known stale to
    HDFS (the Java client's append bumps the stamp) and is deleted by it in its own time."""
    import glob
    import re
    import urllib.request

    info = hdfs_cluster.info
    stale = []
    for i in range(12):
        path = f"{hdfs_root}/a{i}"
        hdfs.write_bytes(path, b"a")
        with hdfs.open(path, "ab") as f:
            f.write(b"b" * (1 << 20))
        assert hdfs.read_bytes(path) == b"a" + b"b" * (1 << 20)
        fsck = urllib.request.urlopen(f"http://127.0.0.1:{info.http_port}/fsck?ugi=root&path={path}&files=1&blocks=1",
                                      timeout=30).read().decode()
        for block, stamp, length in re.findall(r"(blk_\d+)_(\d+) len=(\d+)", fsck):
            for replica in glob.glob(f"{info.base_dir}/data-*/current/*/current/finalized/**/{block}", recursive=True):
                current = os.path.exists(f"{replica}_{stamp}.meta")
                if current and os.path.getsize(replica) != int(length):
                    stale.append((path, replica, os.path.getsize(replica), int(length)))
    assert not stale


def test_append_right_after_a_close_keeps_every_byte_as_a_local_file(
        hdfs_cluster, hdfs_options, hdfs_root, tmp_path):
    """libhdfs, files replicated on every DataNode (3 here): Java's append right after a close
    built its pipeline from the replicas the NameNode listed; with one not yet reported, its
    datanode-replacement policy found no spare DataNode and failed the append's close with EIO
    ("Failed to replace a bad datanode": 3 of 5 on the testbed), the appended bytes lost.
    Oracle: the same opens on a local file."""
    import hpcbridge

    hdfs = hpcbridge.connect(hdfs_cluster.info.url, **hdfs_options, replication=3)
    results = []
    for root, fs in ((str(tmp_path), None), (hdfs_root, hdfs)):
        kept = []
        for i in range(6):
            path = f"{root}/c{i}"
            with (open(path, "wb") if fs is None else fs.open(path, "wb")) as f:
                f.write(b"a" * 5000)
            with (open(path, "ab") if fs is None else fs.open(path, "ab")) as f:
                f.write(b"b" * 5000)
            with (open(path, "rb") if fs is None else fs.open(path, "rb")) as f:
                kept.append(f.read() == b"a" * 5000 + b"b" * 5000)
        results.append(kept)
    assert results[1] == results[0] == [True] * 6


def test_names_beyond_the_basic_multilingual_plane_as_webhdfs(hdfs, hdfs_root, hdfs_cluster):
    """libhdfs takes Java's modified UTF-8: an emoji in standard UTF-8 named another file."""
    import json
    import urllib.parse
    import urllib.request

    name = "x\U0001F600y \u00fc"
    hdfs.write_bytes(f"{hdfs_root}/{name}", b"smile")
    assert hdfs.read_bytes(f"{hdfs_root}/{name}") == b"smile" and hdfs.info(f"{hdfs_root}/{name}").size == 5
    url = f"http://127.0.0.1:{hdfs_cluster.info.http_port}/webhdfs/v1{urllib.parse.quote(hdfs_root)}?op=LISTSTATUS"
    listed = json.loads(urllib.request.urlopen(url, timeout=30).read())["FileStatuses"]["FileStatus"]
    assert [s["pathSuffix"] for s in listed] == [name]
    assert [p.rsplit("/", 1)[1] for p in hdfs.ls(hdfs_root)] == [name]
    assert hdfs.info(hdfs_root).block_size == 0  # a directory, as HDFS says


def test_a_local_name_that_is_not_utf8_is_refused_before_anything_is_copied(
        hdfs_cluster, hdfs_driver, hdfs, hdfs_root, tmp_path, monkeypatch, capsys):
    """HDFS names are Unicode: a local name in another encoding cannot be named there. FsShell
    -put leaves such a file out and exits 0; the clients raised UnicodeEncodeError, after
    ``put -r`` had copied the rest of the tree. Now EILSEQ, and ``put -r`` copies nothing
    (WebHDFS: the destination does not exist)."""
    import urllib.error
    import urllib.request

    from hpcbridge.cli.main import main

    bad = os.fsdecode(b"bad\xffname")
    with pytest.raises(OSError) as ours:
        hdfs.write_bytes(f"{hdfs_root}/{bad}", b"x")
    assert ours.value.errno == errno.EILSEQ and "%FF" in str(ours.value)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "ok").write_bytes(b"y")
    (tree / bad).write_bytes(b"x")
    monkeypatch.setenv("HPCBRIDGE_HDFS_DRIVER", hdfs_driver)
    assert main(["put", "-r", str(tree), f"{hdfs_cluster.info.url}{hdfs_root}/copy"]) == 1
    assert "bad%FFname" in capsys.readouterr().err  # the error names the file
    with pytest.raises(urllib.error.HTTPError) as web:
        urllib.request.urlopen(f"http://127.0.0.1:{hdfs_cluster.info.http_port}/webhdfs/v1{hdfs_root}/copy"
                               "?op=GETFILESTATUS&user.name=root", timeout=30)
    assert web.value.code == 404


def test_a_file_being_written_opens_for_reading_at_once(hdfs, hdfs_root):
    """A file whose last block is still being written is not waited for beyond LAST_BLOCK_WAIT
    (hdfs-native reads its complete blocks only; libhdfs what the DataNodes hold)."""
    path = f"{hdfs_root}/open"
    with hdfs.open(path, "wb") as w:
        w.write(b"x" * 1000)
        w.sync()
        started = time.monotonic()
        data = hdfs.read_bytes(path)
        assert time.monotonic() - started < HdfsFileSystem.LAST_BLOCK_WAIT + 3
        assert data in (b"", b"x" * 1000)
    assert hdfs.read_bytes(path) == b"x" * 1000


def test_mkdir_is_posix_unless_parents(hdfs, hdfs_root):
    with pytest.raises(FileNotFoundError, match="Parent directory"):
        hdfs.mkdir(f"{hdfs_root}/a/b")
    hdfs.mkdir(f"{hdfs_root}/a/b", parents=True)
    with pytest.raises(FileExistsError):
        hdfs.mkdir(f"{hdfs_root}/a/b")  # HDFS itself would succeed silently


def test_a_path_through_a_file_is_missing(hdfs, hdfs_root, hdfs_cluster):
    """Oracle: WebHDFS OPEN (and FsShell -cat, -chmod) of /file/x answer "not found", as a stat
    does; the NameNode's AccessControlException "(is not a directory)" on open (native) and
    chmod (both drivers) came back as PermissionError."""
    import urllib.error
    import urllib.request

    hdfs.write_bytes(f"{hdfs_root}/f", b"data")
    through = f"{hdfs_root}/f/x"
    with pytest.raises(urllib.error.HTTPError) as web:
        urllib.request.urlopen(f"http://127.0.0.1:{hdfs_cluster.info.http_port}/webhdfs/v1{through}?op=OPEN&user.name=root",
                               timeout=30)
    assert web.value.code == 404
    for call in (lambda: hdfs.open(through), lambda: hdfs.pread(through, offset=0, length=1),
                 lambda: hdfs.chmod(through, 0o600), lambda: hdfs.info(through)):
        with pytest.raises(FileNotFoundError, match="hdfs://"):
            call()


def test_a_name_hdfs_refuses_is_einval(hdfs, hdfs_root, hdfs_cluster):
    """Oracle: WebHDFS MKDIRS of a name with ':' answers 400 InvalidPathException (FsShell: "not a
    valid DFS filename"), its GETFILESTATUS 404; native gave EIO for the first, libhdfs EINVAL
    for the second (``exists`` raised)."""
    import json
    import urllib.error
    import urllib.request

    url = f"http://127.0.0.1:{hdfs_cluster.info.http_port}/webhdfs/v1{hdfs_root}/a:b?op=MKDIRS&user.name=root"
    with pytest.raises(urllib.error.HTTPError) as web:
        urllib.request.urlopen(urllib.request.Request(url, method="PUT"), timeout=30)
    assert (web.value.code, json.load(web.value)["RemoteException"]["exception"]) == (400, "InvalidPathException")
    for call in (lambda: hdfs.mkdir(f"{hdfs_root}/a:b"), lambda: hdfs.write_bytes(f"{hdfs_root}/c:d", b"1")):
        with pytest.raises(OSError) as ours:
            call()
        assert ours.value.errno == errno.EINVAL, ours.value
    with pytest.raises(urllib.error.HTTPError) as web:
        urllib.request.urlopen(url.replace("op=MKDIRS", "op=GETFILESTATUS"), timeout=30)
    assert web.value.code == 404
    assert not hdfs.exists(f"{hdfs_root}/a:b")
    with pytest.raises(FileNotFoundError):
        hdfs.info(f"{hdfs_root}/a:b")


def test_rename_never_moves_into_an_existing_directory(hdfs, hdfs_root):
    hdfs.mkdir(f"{hdfs_root}/dir")
    hdfs.write_bytes(f"{hdfs_root}/f", b"1")
    with pytest.raises(FileExistsError, match="does not replace"):
        hdfs.rename(f"{hdfs_root}/f", f"{hdfs_root}/dir")
    assert hdfs.ls(f"{hdfs_root}/dir") == []
    hdfs.rename(f"{hdfs_root}/f", f"{hdfs_root}/g")
    assert hdfs.read_bytes(f"{hdfs_root}/g") == b"1"
    with pytest.raises(OSError, match="under itself") as exc:  # EINVAL on both drivers (libhdfs said EIO)
        hdfs.rename(f"{hdfs_root}/dir", f"{hdfs_root}/dir/inner")
    assert exc.value.errno == errno.EINVAL


def test_write_mode_recreates_and_positional_io_points_at_plfs(hdfs, hdfs_root):
    path = f"{hdfs_root}/t.bin"
    hdfs.write_bytes(path, b"a long first version")
    hdfs.write_bytes(path, b"short")
    assert hdfs.read_bytes(path) == b"short"
    with pytest.raises(io.UnsupportedOperation, match="PLFS container"):
        hdfs.pwrite(path, b"x", 0)
    with pytest.raises(io.UnsupportedOperation, match="PLFS"):
        hdfs.open(path, "r+b")
    with hdfs.open(path, "wb") as f:
        with pytest.raises(io.UnsupportedOperation, match="PLFS"):
            f.pwrite(b"x", 0)
        f.write(b"abc")
        with pytest.raises(io.UnsupportedOperation, match="sequential"):
            f.seek(0)


def test_large_listing_is_streamed(hdfs, hdfs_root):
    for i in range(1200):  # more than one NameNode listing batch (1000 entries)
        hdfs.mkdir(f"{hdfs_root}/d{i:05d}")
    iterator = hdfs.iterdir(hdfs_root)
    first = next(iterator)
    assert first.is_dir
    assert 1 + sum(1 for _ in iterator) == 1200
    assert len(hdfs.ls(hdfs_root)) == 1200


def test_readahead_serves_small_sequential_reads_and_skips_random_ones(hdfs, hdfs_root):
    path = f"{hdfs_root}/ra.bin"
    data = np.random.default_rng(1).integers(0, 256, 10 * MiB, dtype=np.uint8).tobytes()
    hdfs.write_bytes(path, data)
    with hdfs.open(path, "rb") as f:
        chunks = [f.read(4096) for _ in range(2048)]  # 8 MiB in 4 KiB reads
        assert b"".join(chunks) == data[:8 * MiB]
        assert f.stats.fills == 2 and f.stats.direct == 0
    with hdfs.open(path, "rb") as f:
        rng = np.random.default_rng(2)
        for offset in rng.integers(0, 10 * MiB - 4096, 50):
            f.seek(int(offset))
            assert f.read(4096) == data[offset:offset + 4096]
        assert f.stats.direct == 50 and f.stats.fills == 0
        assert f.stats.bytes_fetched == 50 * 4096  # random reads fetch what they ask, no window
    with hdfs.open(path, "rb", buffering=0) as raw:  # readahead off: the raw file
        assert raw.read(4096) == data[:4096]


def test_prefetch_fetches_whole_blocks_in_the_background(hdfs_cluster, hdfs_root, hdfs, hdfs_options):
    info = hdfs_cluster.info
    path = f"{hdfs_root}/pf.bin"
    data = os.urandom(9 * MiB)
    with hdfs.create(path, block_size=3 * MiB) as f:
        f.write(data)
    fs = hpcbridge.connect(info.url, **hdfs_options, prefetch=True, readahead=MiB)
    with fs.open(path) as f:
        out = b"".join(iter(lambda: f.read(65536), b""))
        # one 1 MiB fill, then windows of one block (3 MiB) fetched while the previous was read
        assert out == data and (f.stats.fills, f.stats.prefetched) == (4, 3)


def test_readline_and_text_mode(hdfs, hdfs_root):
    path = f"{hdfs_root}/lines.txt"
    lines = [f"line {i}\n" for i in range(20000)]
    hdfs.write_bytes(path, "".join(lines).encode())
    with hdfs.open(path, "r") as f:
        assert f.readlines() == lines
    with hdfs.open(path, "rb") as f:
        assert f.readline() == b"line 0\n" and f.readline() == b"line 1\n"


def test_transfers_larger_than_one_client_call(hdfs, hdfs_root):
    path = f"{hdfs_root}/big.bin"
    data = np.random.default_rng(3).integers(0, 256, 40 * MiB, dtype=np.uint8)
    with hdfs.open(path, "wb") as f:
        f.write(data)  # one 40 MiB write: three 16 MiB client calls
    out = np.empty_like(data)
    with hdfs.open(path, "rb") as f:
        assert f.readinto(out) == out.size
    assert np.array_equal(out, data)


def test_driver_selection(hdfs_cluster, monkeypatch, tmp_path):
    info = hdfs_cluster.info
    assert hpcbridge.connect(info.url, driver="auto").driver == "native"
    assert hpcbridge.connect(info.url, driver="libhdfs").driver == "libhdfs"  # set-up built it: no export
    with pytest.raises(ValueError, match="driver must be"):
        hpcbridge.connect(info.url, driver="jni")
    # Elsewhere: each missing part is named with where it is looked for.
    for name in ("ARROW_LIBHDFS_DIR", "HADOOP_HOME", "CLASSPATH", "HADOOP_CONF_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HPCBRIDGE_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(MissingDependencyError, match=r"libhdfs.so \(set ARROW_LIBHDFS_DIR or HADOOP_HOME.*"
                                                     r"Hadoop client jars \(set CLASSPATH, HADOOP_HOME.*"
                                                     r"driver='native'"):
        HdfsFileSystem(f"127.0.0.1:{info.rpc_port}", driver="libhdfs")  # not a shared connection
    assert hpcbridge.connect(info.url, driver="auto").driver == "native"


def test_libhdfs_honours_pyarrows_variables(monkeypatch, tmp_path):
    from hpcbridge.fs import libhdfs

    cached = libhdfs.libhdfs_location()
    assert cached is not None
    (tmp_path / "lib" / "native").mkdir(parents=True)
    (tmp_path / "lib" / "native" / "libhdfs.so").write_bytes(b"")
    monkeypatch.delenv("ARROW_LIBHDFS_DIR", raising=False)
    monkeypatch.setenv("HADOOP_HOME", str(tmp_path))
    assert libhdfs.libhdfs_location() == str(tmp_path / "lib" / "native")
    monkeypatch.setenv("ARROW_LIBHDFS_DIR", cached)
    assert libhdfs.libhdfs_location() == cached
    monkeypatch.setenv("CLASSPATH", "/x/*")
    assert libhdfs.hadoop_classpath() == "/x/*"
    monkeypatch.delenv("CLASSPATH")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "hadoop").write_text("#!/bin/sh\n[ \"$1 $2\" = \"classpath --glob\" ] && echo /from/hadoop/*\n")
    (tmp_path / "bin" / "hadoop").chmod(0o755)
    monkeypatch.setenv("HADOOP_CONF_DIR", "/conf")
    assert libhdfs.hadoop_classpath() == "/conf:/from/hadoop/*"


def test_bad_urls_and_options():
    with pytest.raises(hpcbridge.InvalidURLError, match="need a NameNode"):
        hpcbridge.connect("hdfs:///no/host")
    with pytest.raises(hpcbridge.InvalidURLError, match=r"invalid port 'http' \(a number 1-65535\)"):
        hpcbridge.connect("hdfs://nn:http/x")
    with pytest.raises(ValueError, match="invalid readahead"):
        hpcbridge.connect("hdfs://nn:1/", readahead=-1)


def test_namenode_that_does_not_listen_gives_backend_unavailable_quickly(hdfs_driver):
    started = time.monotonic()
    fs = HdfsFileSystem("127.0.0.1:1", webhdfs="http://127.0.0.1:1", timeout=5, driver=hdfs_driver)
    with pytest.raises(BackendUnavailable, match="did not answer"):
        fs.info("/")
    assert time.monotonic() - started < 10


def test_stopped_namenode_gives_backend_unavailable_within_10s(hdfs_cluster, hdfs):
    """A NameNode that hangs (SIGSTOP) must not hang the client."""
    hdfs.info("/")
    pid = hdfs_cluster.info.namenode_pid
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(BackendUnavailable):
            hdfs.ls("/")
        assert time.monotonic() - started < 10
    finally:
        os.kill(pid, signal.SIGCONT)
    time.sleep(0.5)
    assert hdfs.exists("/")


def test_replicated_read_survives_a_datanode_killed_mid_read(hdfs_cluster, hdfs, hdfs_root):
    path = f"{hdfs_root}/survive.bin"
    data = np.random.default_rng(4).integers(0, 256, 8 * MiB, dtype=np.uint8).tobytes()
    with hdfs.create(path, replication=3, block_size=MiB) as f:
        f.write(data)
    victim = _complete_layout(hdfs, path, 3)[5].hosts[0]
    got = []
    try:
        with hdfs.open(path, "rb") as f:
            got.append(f.read(2 * MiB))
            hdfs_cluster.kill_datanode(victim)
            while chunk := f.read(MiB):
                got.append(chunk)
        assert b"".join(got) == data
    finally:
        hdfs_cluster.restart_datanode(victim)
    assert hdfs_cluster.live_datanodes() == 3


def _fsshell(cluster, *args, **kwargs):
    command = java_command("org.apache.hadoop.fs.FsShell", cluster.info.conf_dir, list(args))
    return subprocess.run(command, capture_output=True, timeout=120, **kwargs)


def test_java_client_reads_what_hpcbridge_wrote(hdfs_cluster, hdfs, hdfs_root):
    data = os.urandom(3 * MiB + 17)
    with hdfs.create(f"{hdfs_root}/from-python.bin", block_size=MiB) as f:
        f.write(data)
    run = _fsshell(hdfs_cluster, "-cat", f"{hdfs_cluster.info.url}{hdfs_root}/from-python.bin")
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert run.stdout == data


def test_hpcbridge_reads_what_the_java_client_wrote(hdfs_cluster, hdfs, hdfs_root, tmp_path):
    data = os.urandom(2 * MiB + 5)
    (tmp_path / "local.bin").write_bytes(data)
    run = _fsshell(hdfs_cluster, "-put", str(tmp_path / "local.bin"), f"{hdfs_cluster.info.url}{hdfs_root}/from-java.bin")
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert hdfs.read_bytes(f"{hdfs_root}/from-java.bin") == data


def test_set_replication_of_a_missing_path_or_a_directory_is_an_error(hdfs, hdfs_root, hdfs_cluster):
    """Oracle: FsShell -setrep fails on a missing path and WebHDFS SETREPLICATION answers false
    for a directory; hdfs-native passed the NameNode's false on silently (no error at all)."""
    import json
    import urllib.request

    hdfs.mkdir(f"{hdfs_root}/d")
    hdfs.write_bytes(f"{hdfs_root}/d/x", b"1")
    url = (f"http://127.0.0.1:{hdfs_cluster.info.http_port}/webhdfs/v1{hdfs_root}/d"
           "?op=SETREPLICATION&replication=1&user.name=root")
    request = urllib.request.Request(url, method="PUT")
    assert json.loads(urllib.request.urlopen(request, timeout=30).read()) == {"boolean": False}
    with pytest.raises(FileNotFoundError):
        hdfs.set_replication(f"{hdfs_root}/missing", 1)
    with pytest.raises(IsADirectoryError):
        hdfs.set_replication(f"{hdfs_root}/d", 1)
    hdfs.set_replication(f"{hdfs_root}/d/x", 1)
    assert hdfs.info(f"{hdfs_root}/d/x").replication == 1


def test_a_second_writer_is_ebusy_on_both_drivers(hdfs, hdfs_root):
    """HDFS leases a file to one writer: the NameNode's AlreadyBeingCreatedException came back
    as EEXIST (hdfs-native) or EIO (libhdfs); it is EBUSY, as the RPC path maps it."""
    path = f"{hdfs_root}/busy.bin"
    with hdfs.open(path, "wb") as first:
        first.write(b"a")
        with pytest.raises(OSError) as second:
            hdfs.open(path, "ab")
        assert second.value.errno == errno.EBUSY, second.value


def test_an_exclusive_create_of_a_file_being_written_is_eexist(hdfs, hdfs_root, hdfs_cluster):
    """Oracle: WebHDFS GETFILESTATUS lists a file being written, so an exclusive create (xb,
    O_EXCL) must say it exists; the NameNode's AlreadyBeingCreated came back as EBUSY (native),
    which PLFS's races for a writer id or a merge generation (they catch FileExistsError) did not
    expect."""
    import json
    import urllib.request

    path = f"{hdfs_root}/claimed"
    url = f"http://127.0.0.1:{hdfs_cluster.info.http_port}/webhdfs/v1{path}?op=GETFILESTATUS&user.name=root"
    with hdfs.open(path, "xb") as first:
        first.write(b"a")
        assert json.loads(urllib.request.urlopen(url, timeout=30).read())["FileStatus"]["type"] == "FILE"
        with pytest.raises(FileExistsError):
            hdfs.open(path, "xb")
        with pytest.raises(FileExistsError):
            hdfs.create(path, overwrite=False)
    assert hdfs.read_bytes(path) == b"a"


def test_put_r_and_get_r_keep_directory_permissions(hdfs_cluster, hdfs_driver, hdfs, hdfs_root, tmp_path,
                                                    monkeypatch, capsys):
    """Copies into HDFS keep the source's permission bits (cli.md), directories too: a private
    local directory was uploaded as 0755 (its file 0600), and came back from HDFS as 0755."""
    from hpcbridge.cli.main import main

    src = tmp_path / "src"
    (src / "private").mkdir(parents=True)
    (src / "private" / "key").write_bytes(b"k")
    os.chmod(src / "private" / "key", 0o600)
    os.chmod(src / "private", 0o700)
    os.chmod(src, 0o750)
    monkeypatch.setenv("HPCBRIDGE_HDFS_DRIVER", hdfs_driver)
    url = f"{hdfs_cluster.info.url}{hdfs_root}/copy"
    assert main(["put", "-r", str(src), url]) == 0, capsys.readouterr().err
    assert {name: hdfs.info(f"{hdfs_root}/copy{name}").mode & 0o7777 for name in ("", "/private", "/private/key")} \
        == {"": 0o750, "/private": 0o700, "/private/key": 0o600}
    assert main(["get", "-r", url, str(tmp_path / "back")]) == 0, capsys.readouterr().err
    assert [os.stat(tmp_path / "back" / name).st_mode & 0o7777 for name in (".", "private", "private/key")] \
        == [0o750, 0o700, 0o600]


def test_ctrl_c_while_a_copy_replaces_a_file_never_loses_both(hdfs, hdfs_root, tmp_path, monkeypatch):
    """HDFS's plain rename does not replace, so a copy over an existing file removed it and then
    renamed the partial file into place; Ctrl-C between the two removed the partial file too,
    leaving neither the old file nor the new one. hdfs-native now replaces in one call (rename
    with OVERWRITE); libhdfs, which cannot, puts the complete copy in place."""
    from hpcbridge.fs.transfer import copy_file

    local = hpcbridge.connect("file://")
    (tmp_path / "new").write_bytes(b"new contents")
    hdfs.write_bytes(f"{hdfs_root}/dst", b"old contents")
    real_rename, calls = hdfs.rename, []

    def interrupted_once(src, dst):
        calls.append(src)
        if len(calls) == 1:
            raise KeyboardInterrupt  # Ctrl-C landing just before the rename call
        return real_rename(src, dst)

    monkeypatch.setattr(hdfs, "rename", interrupted_once)
    try:
        copy_file(local, str(tmp_path / "new"), hdfs, f"{hdfs_root}/dst")
    except KeyboardInterrupt:
        pass
    assert hdfs.read_bytes(f"{hdfs_root}/dst") in (b"old contents", b"new contents")
    assert [n for n in hdfs.ls(hdfs_root) if "partial" in n] == []


def test_no_overwrite_keeps_a_file_made_while_the_copy_runs(hdfs, hdfs_root, tmp_path):
    """copy_file(overwrite=False) (put -n) checked the destination only before copying, then
    removed what appeared there meanwhile to rename its copy into place; now HDFS's rename,
    which refuses an existing file, keeps it (FsShell -put without -f fails the same way)."""
    from hpcbridge.fs.transfer import copy_file

    (tmp_path / "src").write_bytes(b"x" * 100_000)

    def someone_else_writes(_n):
        if not hdfs.exists(f"{hdfs_root}/dst"):
            hdfs.write_bytes(f"{hdfs_root}/dst", b"theirs")

    with pytest.raises(FileExistsError):
        copy_file(hpcbridge.connect("file://"), str(tmp_path / "src"), hdfs, f"{hdfs_root}/dst", overwrite=False,
                  chunk_size=50_000, progress=someone_else_writes)
    assert hdfs.read_bytes(f"{hdfs_root}/dst") == b"theirs"
    assert hdfs.ls(hdfs_root) == [f"{hdfs_root}/dst"]
