"""`hpcbridge mount` / `hpcbridge umount` from the shell, and their errors."""

import json
import os
import subprocess
import sys


import hpcbridge
import hpcbridge.plfs
from hpcbridge.processes import alive

from .conftest import _skip_without_fuse


def _cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "hpcbridge", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_mount_returns_live_and_umount_detaches(tmp_path):
    _skip_without_fuse()
    back, mnt = tmp_path / "back", tmp_path / "mnt"
    back.mkdir()
    mnt.mkdir()
    run = _cli("mount", f"plfs+file://{back}", str(mnt), "--json")
    assert run.returncode == 0, run.stderr
    info = json.loads(run.stdout)
    try:
        assert str(mnt) in hpcbridge.mount.mounts()  # live when the command returned
        (mnt / "x.bin").write_bytes(b"through the mount")
        assert os.path.isdir(back / "x.bin")  # a PLFS container on the backing store
        again = _cli("mount", f"plfs+file://{back}", str(mnt))
        assert again.returncode == 1 and "already an hpcbridge mount" in again.stderr
    finally:
        run = _cli("umount", str(mnt))
    assert run.returncode == 0, run.stderr
    assert str(mnt) not in hpcbridge.mount.mounts()
    assert not alive(info["pid"])  # the daemon is gone (at most a zombie of its old parent)
    with hpcbridge.plfs.open(f"plfs+file://{back}/x.bin") as f:
        assert f.read() == b"through the mount"


def test_mount_errors_are_clear(tmp_path):
    _skip_without_fuse()
    run = _cli("mount", f"plfs+file://{tmp_path}", str(tmp_path / "missing"))
    assert run.returncode == 1 and "not a directory" in run.stderr
    (tmp_path / "mnt").mkdir()
    run = _cli("mount", f"plfs+file://{tmp_path}/nope", str(tmp_path / "mnt"))
    assert run.returncode == 1 and "nope does not exist" in run.stderr and "FileNotFoundError" in run.stderr
    (tmp_path / "f").write_bytes(b"x")
    run = _cli("mount", f"file://{tmp_path}/f", str(tmp_path / "mnt"))
    assert run.returncode == 1 and "f is not a directory" in run.stderr
    run = _cli("mount", "memory://m/", str(tmp_path / "mnt"))
    assert run.returncode == 1 and "memory files live in one process" in run.stderr
    run = _cli("mount", "nosuch://x/y", str(tmp_path / "mnt"))
    assert run.returncode == 1 and "nosuch" in run.stderr
    run = _cli("mount", f"file://{tmp_path}", str(tmp_path / "mnt"), "-o", "bogus")
    assert run.returncode == 1 and "unknown mount option" in run.stderr
    run = _cli("umount", str(tmp_path / "mnt"))
    assert run.returncode == 1 and "not an hpcbridge mount" in run.stderr
    assert not hpcbridge.mount.mounts().get(str(tmp_path / "mnt"))


def test_file_backend_mount_passes_through(tmp_path):
    _skip_without_fuse()
    back, mnt = tmp_path / "back", tmp_path / "mnt"
    back.mkdir()
    mnt.mkdir()
    with hpcbridge.mount(f"file://{back}", str(mnt)) as m:
        with open(os.path.join(m.path, "a.txt"), "w") as f:
            f.write("hello")
        os.truncate(os.path.join(m.path, "a.txt"), 4)
        os.chmod(os.path.join(m.path, "a.txt"), 0o600)
        assert sorted(os.listdir(m.path)) == ["a.txt"]
    assert (back / "a.txt").read_text() == "hell"
    assert (back / "a.txt").stat().st_mode & 0o777 == 0o600


def test_a_mount_point_holding_any_bytes_is_found(tmp_path):
    """``hpcbridge.mount`` finds its mount whatever the mount point's name holds: a "\\r" (the
    kernel does not escape it in the mount table; split there as whitespace, the mount stayed
    hidden and ``mount`` waited until its timeout) or bytes that are not UTF-8 (the table read as
    UTF-8 failed, for every mount of the machine)."""
    _skip_without_fuse()
    (tmp_path / "backing").mkdir()
    point = tmp_path / os.fsdecode(b"mnt\r\xff x")
    point.mkdir()
    with hpcbridge.mount(f"file://{tmp_path}/backing", str(point), timeout=10) as m:
        assert os.path.realpath(point) in hpcbridge.mount.mounts()
        with open(os.path.join(m.path, "f"), "wb") as f:
            f.write(b"through the mount")
    assert (tmp_path / "backing" / "f").read_bytes() == b"through the mount"
    assert os.path.realpath(point) not in hpcbridge.mount.mounts()
