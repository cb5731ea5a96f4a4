"""System calls on a mount against the oracle: the same calls, in the same order, on a local
directory (tmp_path, on ext4 or tmpfs). Each test failed before its fix (on at least one of
its mounts: the fallocate test's PLFS case pins down what was already right)."""

import ctypes
import ctypes.util
import errno
import os
import stat
import time
import uuid

import pytest

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2
AT_FDCWD = -100


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _utimensat(path, atime, mtime):
    """utimensat(2) with (seconds, nanoseconds) pairs, which may be UTIME_NOW or UTIME_OMIT."""
    times = (_Timespec * 2)(_Timespec(*atime), _Timespec(*mtime))
    if _libc.utimensat(AT_FDCWD, os.fsencode(path), times, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)


@pytest.fixture(params=["file", "plfs"])
def mounted_dir(request):
    """A fresh directory in a mounted ``file://`` or ``plfs+file://`` directory: ``(path, kind)``."""
    m = request.getfixturevalue("file_posix_mount" if request.param == "file" else "plfs_posix_mount")
    path = os.path.join(m.path, f"s{uuid.uuid4().hex[:10]}")
    os.mkdir(path)
    return path, request.param


def _times(path):
    st = os.stat(path)
    return st.st_atime_ns, st.st_mtime_ns


def test_utimensat_keeps_omitted_times_and_sets_now_as_a_local_directory(file_posix_mount, tmp_path):
    """``touch`` (UTIME_NOW) set the time to 1.07 s after the epoch, and ``touch -a``
    (UTIME_OMIT for mtime) the mtime: mfusepy read the special values as times. ``stat`` also
    showed mtime as atime."""
    mount_dir = os.path.join(file_posix_mount.path, f"u{uuid.uuid4().hex[:10]}")
    os.mkdir(mount_dir)
    seen = []
    for root in (str(tmp_path), mount_dir):
        path = os.path.join(root, "f")
        with open(path, "wb") as f:
            f.write(b"x")
        steps = []
        os.utime(path, ns=(1_000_000_123, 2_000_000_456))
        steps.append(_times(path))
        _utimensat(path, (0, UTIME_OMIT), (77, 7))  # touch -m -d @77.000000007
        steps.append(_times(path))
        _utimensat(path, (88, 8), (0, UTIME_OMIT))  # touch -a -d @88.000000008
        steps.append(_times(path))
        _utimensat(path, (0, UTIME_OMIT), (0, UTIME_NOW))  # touch -m
        atime, mtime = _times(path)
        steps.append((atime, abs(mtime / 1e9 - time.time()) < 60))
        os.utime(path)  # touch
        steps.append(tuple(abs(t / 1e9 - time.time()) < 60 for t in _times(path)))
        seen.append(steps)
    assert seen[1] == seen[0] == [(1_000_000_123, 2_000_000_456), (1_000_000_123, 77_000_000_007),
                                  (88_000_000_008, 77_000_000_007), (88_000_000_008, True), (True, True)]


@pytest.mark.parametrize("name", ["L" * 255, "é" * 127 + "L", "a b ü" * 42 + "abc"])
def test_names_up_to_255_bytes_work_and_256_is_enametoolong(mounted_dir, tmp_path, name):
    """A PLFS file with a name over 227 bytes could not be created, truncated or removed
    (ENAMETOOLONG): the container is built, and removed, under ``.NAME.plfs-new-HEX``."""
    mount_dir, _ = mounted_dir
    seen = []
    for root in (str(tmp_path), mount_dir):
        path = os.path.join(root, name)
        steps = []
        with open(path, "wb") as f:
            f.write(b"0123456789")
        steps.append(os.listdir(root))
        os.truncate(path, 4)  # shrink: a PLFS container is rewritten beside the file
        with open(path, "rb") as f:
            steps.append(f.read())
        with open(path, "wb") as f:  # O_TRUNC of a container: removed and made anew
            f.write(b"new")
        steps.append(os.stat(path).st_size)
        os.rename(path, os.path.join(root, "short"))
        os.rename(os.path.join(root, "short"), path)
        os.unlink(path)
        steps.append(os.listdir(root))
        try:
            open(os.path.join(root, "y" * 256), "wb").close()
        except OSError as exc:
            steps.append(exc.errno)
        seen.append(steps)
    assert len(name.encode()) == 255 and seen[1] == seen[0] == [[name], b"0123", 3, [], errno.ENAMETOOLONG]


FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE = 0x01, 0x02, 0x10


def _fallocate(fd, mode, offset, length):
    _libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    if _libc.fallocate(fd, mode, offset, length) != 0:
        code = ctypes.get_errno()
        return "EOPNOTSUPP" if code == errno.EOPNOTSUPP else errno.errorcode[code]  # ENOTSUP is its alias
    return os.fstat(fd).st_size, os.pread(fd, 30000, 0)


def _fallocate_steps(root):
    fd = os.open(os.path.join(root, "f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"x" * 10000, 0)
        os.posix_fallocate(fd, 0, 20000)  # glibc writes the zeros where fallocate(2) cannot
        steps = [(os.fstat(fd).st_size, os.pread(fd, 30000, 0))]
        for mode, offset, length in ((0, 20000, 100), (FALLOC_FL_KEEP_SIZE, 0, 40000),
                                     (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 4096),
                                     (FALLOC_FL_ZERO_RANGE, 0, 100), (FALLOC_FL_ZERO_RANGE, 25000, 10)):
            steps.append(_fallocate(fd, mode, offset, length))
    finally:
        os.close(fd)
    return steps


def test_fallocate_modes_as_a_local_directory_or_eopnotsupp(mounted_dir, tmp_path):
    """file:// mounts answered EOPNOTSUPP to every fallocate(2) (the daemon had no fallocate):
    they pass it to the disk now; PLFS refuses every mode with EOPNOTSUPP and never changes the
    data (posix_fallocate still works: glibc writes the zeros)."""
    mount_dir, kind = mounted_dir
    local, mounted = _fallocate_steps(str(tmp_path)), _fallocate_steps(mount_dir)
    assert local[0] == (20000, b"x" * 10000 + bytes(10000))
    assert local[3][1][4096:8192] == bytes(4096)  # the hole punched
    if kind == "file":
        assert mounted == local
    else:
        assert mounted == [local[0]] + ["EOPNOTSUPP"] * 5


def _creation_steps(root):
    steps = []
    old = os.umask(0o022)
    try:
        for i, mode in enumerate((0o600, 0o640, 0o777, 0o400)):
            path = os.path.join(root, f"f{i}")
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
            os.mkdir(os.path.join(root, f"d{i}"), mode | 0o700)
            steps.append((oct(os.stat(path).st_mode), oct(os.stat(os.path.join(root, f"d{i}")).st_mode)))
        os.close(os.open(os.path.join(root, "f0"), os.O_RDWR | os.O_CREAT, 0o666))  # exists: bits kept
        steps.append(oct(os.stat(os.path.join(root, "f0")).st_mode))
        try:
            os.open(os.path.join(root, "f0"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            steps.append("EEXIST")
        with open(os.path.join(root, "new"), "xb") as f:  # O_EXCL of a new file: written as usual
            f.write(b"data")
        with open(os.path.join(root, "new"), "rb") as f:
            steps.append(f.read())
    finally:
        os.umask(old)
    return steps


def test_open_o_creat_and_mkdir_keep_the_callers_permission_bits(file_posix_mount, tmp_path):
    """On file:// mounts a file made with open(O_CREAT, 0o600) was 0o644 (the daemon's own
    0o666 less its umask: private data readable by all) and mkdir's mode was ignored."""
    mount_dir = os.path.join(file_posix_mount.path, f"c{uuid.uuid4().hex[:10]}")
    os.mkdir(mount_dir)
    local = _creation_steps(str(tmp_path))
    assert local[0] == ("0o100600", "0o40700")
    assert _creation_steps(mount_dir) == local


def test_link_counts_and_blocks_are_the_disks_on_a_file_mount(file_posix_mount, tmp_path):
    """A directory's st_nlink was always 2 and a sparse file's st_blocks its size / 512."""
    mount_dir = os.path.join(file_posix_mount.path, f"n{uuid.uuid4().hex[:10]}")
    os.mkdir(mount_dir)
    seen = []
    for root in (str(tmp_path), mount_dir):
        os.makedirs(os.path.join(root, "a/b"))
        os.mkdir(os.path.join(root, "a/c"))
        with open(os.path.join(root, "sparse"), "wb") as f:
            f.truncate(1 << 30)
        seen.append((os.stat(os.path.join(root, "a")).st_nlink, os.stat(os.path.join(root, "sparse")).st_blocks))
    assert seen[1] == seen[0] == (4, 0)


def _access_steps(root, chmod):
    steps = []
    for i, mode in enumerate((0o644, 0o755, 0o444, 0o000)):
        path = os.path.join(root, f"a{i}")
        open(path, "wb").close()
        if chmod:
            os.chmod(path, mode)
        steps.append([os.access(path, k) for k in (os.F_OK, os.R_OK, os.W_OK, os.X_OK)])
    os.mkdir(os.path.join(root, "d"))
    steps.append(os.access(os.path.join(root, "d"), os.R_OK | os.W_OK | os.X_OK))
    steps.append(os.access(os.path.join(root, "missing"), os.F_OK))
    return steps


def test_access_follows_the_permission_bits(mounted_dir, tmp_path):
    """access(2) said yes to everything (mfusepy's default): ``test -x`` of a 0o644 file was
    true, and so was ``test -w`` of a read-only file for its owner."""
    mount_dir, kind = mounted_dir
    chmod = kind == "file"  # PLFS files have no bits of their own: 0o644, as a local file made so
    local = _access_steps(str(tmp_path), chmod)
    assert [row[3] for row in local[:4]] == ([False, True, False, False] if chmod else [False] * 4)
    assert _access_steps(mount_dir, chmod) == local


def test_nodes_the_backends_cannot_store_are_eperm_and_mknod_makes_regular_files(mounted_dir):
    """symlink, mkfifo and mknod of devices answered ENOSYS ("Function not implemented"); the
    man pages' errno for a file system without that kind of node is EPERM (as link was)."""
    mount_dir, kind = mounted_dir
    path = os.path.join(mount_dir, "reg")
    os.mknod(path, stat.S_IFREG | 0o600)
    assert os.stat(path).st_size == 0 and os.listdir(mount_dir) == ["reg"]
    if kind == "file":
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with pytest.raises(FileExistsError):
        os.mknod(path, stat.S_IFREG | 0o600)
    for call in (lambda: os.symlink("reg", path + ".sym"), lambda: os.link(path, path + ".hard"),
                 lambda: os.mkfifo(path + ".fifo"), lambda: os.mknod(path + ".null", stat.S_IFCHR | 0o600,
                                                                     os.makedev(1, 3))):
        with pytest.raises(PermissionError):
            call()
    assert os.listdir(mount_dir) == ["reg"]
