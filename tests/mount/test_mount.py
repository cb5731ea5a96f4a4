"""POSIX semantics of a mounted PLFS directory (on POSIX and on HDFS), checked against the
library (hpcbridge.plfs reads the same containers) and against plain OS calls."""

import errno
import hashlib
import json
import multiprocessing
import os
import subprocess

import numpy as np
import pytest

import hpcbridge
import hpcbridge.plfs


def _payload(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def _library_read(m, rel):
    with hpcbridge.plfs.open(m.backing(rel), "rb") as f:
        return f.read()


def _strided_writer(path, rank, ranks, unit, count, seed, barrier):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        barrier.wait()
        block = _payload(unit, seed + rank)
        for i in range(count):
            os.pwrite(fd, block, (i * ranks + rank) * unit)
    finally:
        os.close(fd)


def test_n1_strided_processes_read_back_through_mount_and_library(workdir):
    m, d = workdir
    rel = f"{d}/n1.bin"
    path = os.path.join(m.path, rel)
    ranks, unit, count = 3, 47001, 5
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(ranks)
    procs = [ctx.Process(target=_strided_writer, args=(path, r, ranks, unit, count, 11, barrier)) for r in range(ranks)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    expected = bytearray(ranks * unit * count)
    for r in range(ranks):
        block = _payload(unit, 11 + r)
        for i in range(count):
            expected[(i * ranks + r) * unit:(i * ranks + r + 1) * unit] = block
    assert os.stat(path).st_size == len(expected)
    with open(path, "rb") as f:
        assert f.read() == expected
    assert _library_read(m, rel) == expected
    info = hpcbridge.plfs.open(m.backing(rel), "rb")
    info.close()
    container = m.backing(rel).split("+", 1)[1]
    fs, cpath = hpcbridge.url_to_fs(container)
    assert fs.isdir(cpath), "the file is a PLFS container on the backing store"


def test_reads_see_other_open_writers_and_stat_sizes_while_open(workdir):
    m, d = workdir
    path = os.path.join(m.path, d, "open.bin")
    a = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    b = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(a, b"A" * 1000, 0)
        os.pwrite(b, b"B" * 1000, 5000)
        assert os.stat(path).st_size == 6000  # both open writers counted
        assert os.fstat(a).st_size == 6000
        with open(path, "rb") as r:  # a reader sees both unclosed writers of this daemon
            data = r.read()
        assert data == b"A" * 1000 + bytes(4000) + b"B" * 1000
        os.fsync(a)
        os.fsync(b)
    finally:
        os.close(a)
        os.close(b)
    assert _library_read(m, f"{d}/open.bin") == data


def test_read_write_handle_sees_its_own_writes(workdir):
    m, d = workdir
    path = os.path.join(m.path, d, "rw.bin")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"hello world", 0)
        assert os.pread(fd, 5, 6) == b"world"
        os.pwrite(fd, b"W", 6)
        assert os.pread(fd, 11, 0) == b"hello World"
    finally:
        os.close(fd)
    assert _library_read(m, f"{d}/rw.bin") == b"hello World"


def test_ftruncate_grows_and_shrinks(workdir):
    m, d = workdir
    path = os.path.join(m.path, d, "trunc.bin")
    data = _payload(300_000, 3)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, 400_000)  # grow: zeros
        assert os.fstat(fd).st_size == 400_000
        assert os.pread(fd, 400_000, 0) == data + bytes(100_000)
        os.ftruncate(fd, 123_457)  # shrink while this handle's writer is open
        assert os.fstat(fd).st_size == 123_457
        os.pwrite(fd, b"tail", 123_457)  # the handle keeps writing after the shrink
        assert os.pread(fd, 200_000, 0) == data[:123_457] + b"tail"
    finally:
        os.close(fd)
    assert os.stat(path).st_size == 123_461
    assert _library_read(m, f"{d}/trunc.bin") == data[:123_457] + b"tail"
    os.truncate(path, 10)  # by path, no handle open
    assert _library_read(m, f"{d}/trunc.bin") == data[:10]
    with open(path, "wb") as f:  # O_TRUNC
        f.write(b"new")
    assert _library_read(m, f"{d}/trunc.bin") == b"new"


def test_namespace_rename_unlink_mkdir_p_and_large_listing(workdir):
    m, d = workdir
    base = os.path.join(m.path, d)
    os.makedirs(os.path.join(base, "a/b/c"))
    with open(os.path.join(base, "a/b/c/x.bin"), "wb") as f:
        f.write(b"x" * 10)
    os.rename(os.path.join(base, "a/b/c/x.bin"), os.path.join(base, "a/y.bin"))
    assert not os.path.exists(os.path.join(base, "a/b/c/x.bin"))
    assert _library_read(m, f"{d}/a/y.bin") == b"x" * 10
    with open(os.path.join(base, "a/z.bin"), "wb") as f:
        f.write(b"z")
    os.replace(os.path.join(base, "a/z.bin"), os.path.join(base, "a/y.bin"))  # replaces a file
    assert _library_read(m, f"{d}/a/y.bin") == b"z"
    names = {f"f{i:04d}" for i in range(300)}
    lib = hpcbridge.connect(m.url.split("/", 3)[0] + "//" + m.url.split("/", 3)[2])
    for name in names:
        lib.mkdir(f"{hpcbridge.url_to_fs(m.backing(d))[1]}/many/{name}", parents=True)
    assert set(os.listdir(os.path.join(base, "many"))) == names
    os.unlink(os.path.join(base, "a/y.bin"))
    assert not os.path.exists(os.path.join(base, "a/y.bin"))
    with pytest.raises(OSError) as exc:
        os.rmdir(os.path.join(base, "a"))
    assert exc.value.errno == errno.ENOTEMPTY
    os.rmdir(os.path.join(base, "a/b/c"))
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(base, "missing"))
    with pytest.raises(FileExistsError):
        os.open(os.path.join(base, "a"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)


def test_open_files_follow_a_renamed_directory_and_a_renamed_or_unlinked_file(workdir):
    """Found against ext4: after rename of its directory an open file's writes were lost (a new
    writer of the old container: ENOENT at fsync, the bytes dropped), fstat said 0 and reads
    said ENOENT; a reader built before a rename or unlink of its file read its logs by the old
    path (ENOENT)."""
    m, d = workdir
    base = os.path.join(m.path, d)
    os.mkdir(os.path.join(base, "dir"))
    fd = os.open(os.path.join(base, "dir/f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"A" * 100, 0)
        os.close(os.dup(fd))  # a close(2): the writer is closed, the next write opens one
        os.rename(os.path.join(base, "dir"), os.path.join(base, "moved"))
        assert os.pwrite(fd, b"B" * 100, 100) == 100
        os.fsync(fd)
        assert os.fstat(fd).st_size == 200 and os.pread(fd, 200, 0) == b"A" * 100 + b"B" * 100
        os.ftruncate(fd, 150)
    finally:
        os.close(fd)
    assert _library_read(m, f"{d}/moved/f") == b"A" * 100 + b"B" * 50
    for kind in ("rename", "unlink"):
        path = os.path.join(base, f"{kind}.bin")
        for offset, byte in ((0, b"a"), (100, b"b")):  # two writers: two data logs
            with open(path, "r+b" if offset else "wb") as f:
                f.seek(offset)
                f.write(byte * 100)
        fd = os.open(path, os.O_RDONLY)
        try:
            assert os.pread(fd, 10, 150) == b"b" * 10  # the reader is built (one log opened)
            if kind == "rename":
                os.rename(path, path + ".new")
            else:
                os.unlink(path)
            assert os.pread(fd, 10, 0) == b"a" * 10
        finally:
            os.close(fd)


def test_read_only_open_with_o_creat_makes_the_file(workdir):
    m, d = workdir
    path = os.path.join(m.path, d, "ro-created")
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        assert os.read(fd, 10) == b"" and os.fstat(fd).st_size == 0
    finally:
        os.close(fd)
    assert os.path.isfile(path) and _library_read(m, f"{d}/ro-created") == b""
    with pytest.raises(FileExistsError):
        os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL)


def test_file_locks_are_node_local(workdir):
    import fcntl

    m, d = workdir
    path = os.path.join(m.path, d, "lock.bin")
    with open(path, "wb") as f:
        fcntl.lockf(f, fcntl.LOCK_EX)  # what HDF5 and ROMIO do
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.lockf(f, fcntl.LOCK_UN)


def test_cp_dd_sha256sum(workdir, tmp_path):
    m, d = workdir
    src = tmp_path / "src.bin"
    src.write_bytes(_payload(5_000_001, 9))
    dest = os.path.join(m.path, d, "copy.bin")
    subprocess.run(["cp", str(src), dest], check=True)
    subprocess.run(["dd", f"if={src}", f"of={dest}.dd", "bs=1M", "status=none"], check=True)
    want = hashlib.sha256(src.read_bytes()).hexdigest()
    out = subprocess.run(["sha256sum", dest, dest + ".dd"], check=True, capture_output=True, text=True).stdout
    assert [line.split()[0] for line in out.splitlines()] == [want, want]
    assert hashlib.sha256(_library_read(m, f"{d}/copy.bin")).hexdigest() == want


def test_fio_n1_interleaved_jobs_verify(workdir, tmp_path):
    if subprocess.run(["which", "fio"], capture_output=True).returncode:
        pytest.skip("fio is not installed (Debian fio; scripts/setup.sh installs it)")
    m, d = workdir
    path = os.path.join(m.path, d, "fio.bin")
    jobs, bs, per_job = 4, 65536, 16
    # Job j writes blocks j, j + jobs, j + 2 jobs, ...: one file, interleaved offsets, then each
    # job reads its blocks back and checks their CRC32C.
    args = ["fio", "--name=n1", f"--filename={path}", "--ioengine=psync", f"--rw=write:{(jobs - 1) * bs}",
            f"--bs={bs}", f"--numjobs={jobs}", f"--offset_increment={bs}", f"--size={jobs * bs * per_job}",
            f"--io_size={bs * per_job}", "--verify=crc32c", "--do_verify=1", "--verify_fatal=1",
            "--verify_state_save=0", "--group_reporting", "--output-format=json"]
    run = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    job = json.loads(run.stdout[run.stdout.index("{"):])["jobs"][0]
    assert job["error"] == 0 and job["write"]["io_bytes"] == jobs * bs * per_job
    assert job["read"]["io_bytes"] == jobs * bs * per_job  # the verify pass read every block back
    assert os.stat(path).st_size == jobs * bs * per_job
    data = _library_read(m, f"{d}/fio.bin")
    assert len(data) == jobs * bs * per_job and data.count(0) < len(data) // 2


def test_unsupported_calls_return_their_errno(workdir):
    m, d = workdir
    path = os.path.join(m.path, d, "e.bin")
    with open(path, "wb") as f:
        f.write(b"1")
    with pytest.raises(OSError) as exc:
        os.symlink(path, path + ".lnk")
    assert exc.value.errno in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EPERM)
    with pytest.raises(OSError) as exc:
        os.link(path, path + ".hard")
    assert exc.value.errno in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EPERM)


def test_read_only_mount_refuses_writes_with_erofs(plfs_posix_mount, tmp_path):
    from .conftest import mounted

    gen = mounted(plfs_posix_mount.url, ["ro"])
    ro = next(gen)
    try:
        with pytest.raises(OSError) as exc:
            open(os.path.join(ro.path, "new.bin"), "wb")
        assert exc.value.errno == errno.EROFS
    finally:
        gen.close()


def test_plain_hdfs_mount_write_once_semantics(hdfs_cluster, hdfs_admin, hdfs_root):
    hdfs = hdfs_admin  # the mount daemon uses the default driver
    from .conftest import _skip_without_fuse, mounted

    _skip_without_fuse()
    url = f"{hdfs_cluster.info.url}{hdfs_root}"
    gen = mounted(url, [f"webhdfs=http://127.0.0.1:{hdfs_cluster.info.http_port}"])
    m = next(gen)
    try:
        path = os.path.join(m.path, "seq.bin")
        data = _payload(3_000_000, 5)
        with open(path, "wb") as f:  # sequential: fine on HDFS
            f.write(data)
        assert hdfs.read_bytes(f"{hdfs_root}/seq.bin") == data
        with open(path, "rb") as f:
            assert f.read() == data
        fd = os.open(path + ".2", os.O_WRONLY | os.O_CREAT)
        try:
            os.pwrite(fd, b"x" * 10, 0)
            with pytest.raises(OSError) as exc:
                os.pwrite(fd, b"y", 0)  # rewriting: HDFS cannot
            assert exc.value.errno == errno.EOPNOTSUPP
        finally:
            os.close(fd)
        with pytest.raises(OSError) as exc:
            os.open(path, os.O_RDWR)
        assert exc.value.errno == errno.EOPNOTSUPP
        with pytest.raises(OSError) as exc:
            os.truncate(path, 5)
        assert exc.value.errno == errno.EOPNOTSUPP
    finally:
        gen.close()


def test_o_rdonly_o_trunc_truncates_as_linux_does(workdir, tmp_path):
    """Oracle: the same calls on a local directory. Linux truncates an O_RDONLY|O_TRUNC open the
    caller may write; the mount ignored the flag, and an O_APPEND writer elsewhere then wrote
    over the file's first bytes (the kernel believed the file empty)."""
    m, d = workdir
    results = []
    for root in (str(tmp_path), os.path.join(m.path, d)):
        with open(os.path.join(root, "f"), "wb") as f:
            f.write(b"x" * 1000)
        appender = os.open(os.path.join(root, "f"), os.O_WRONLY | os.O_APPEND)
        fd = os.open(os.path.join(root, "f"), os.O_RDONLY | os.O_TRUNC)
        seen = (os.fstat(fd).st_size, os.pread(fd, 2000, 0))
        os.close(fd)
        os.write(appender, b"A" * 10)
        os.close(appender)
        with open(os.path.join(root, "f"), "rb") as f:
            results.append((seen, f.read()))
    assert results[1] == results[0] == ((0, b""), b"A" * 10)
    assert _library_read(m, f"{d}/f") == b"A" * 10
