"""The daemon killed during a write: the mount fails fast (ENOTCONN), `hpcbridge umount` works
within 10 s, and every byte flushed (fsync) before the kill reads back through the library."""

import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

import hpcbridge
import hpcbridge.plfs

from .conftest import _skip_without_fuse

WRITER = r"""
import os, sys
path, flushed = sys.argv[1], int(sys.argv[2])
block = bytes(range(256)) * 4096  # 1 MiB
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(flushed):
    os.pwrite(fd, block, i * len(block))
os.fsync(fd)
print("synced", flush=True)
i = flushed
while True:  # keeps writing until the daemon dies under it
    try:
        os.pwrite(fd, block, i * len(block))
    except OSError as exc:
        print("errno", exc.errno, flush=True)
        break
    i += 1
"""


@pytest.mark.parametrize("backing", ["posix", "hdfs"])
def test_sigkill_during_write(backing, request, tmp_path):
    _skip_without_fuse()
    options = []
    if backing == "posix":
        back = tempfile.mkdtemp(prefix="hpcbridge-kill-")
        url = f"plfs+file://{back}"
        cleanup = lambda: shutil.rmtree(back, ignore_errors=True)  # noqa: E731
    else:
        cluster = request.getfixturevalue("hdfs_cluster")
        root = request.getfixturevalue("hdfs_root")
        url = f"plfs+{cluster.info.url}{root}"
        options = [f"webhdfs=http://127.0.0.1:{cluster.info.http_port}"]
        cleanup = lambda: None  # noqa: E731
    mountpoint = tempfile.mkdtemp(prefix="hpcbridge-mnt-")
    m = hpcbridge.mount(url, mountpoint, options=options)
    writer = None
    try:
        writer = subprocess.Popen([sys.executable, "-c", WRITER, os.path.join(mountpoint, "ckpt"), "8"],
                                  stdout=subprocess.PIPE, text=True)
        assert writer.stdout.readline().strip() == "synced"
        time.sleep(0.3)  # unsynced writes in flight
        os.kill(m.pid, signal.SIGKILL)
        assert writer.stdout.readline().split()[:1] == ["errno"]  # the writer is not left hanging
        writer.wait(10)
        start = time.monotonic()
        with pytest.raises(OSError) as exc:
            os.stat(os.path.join(mountpoint, "ckpt"))
        assert exc.value.errno == errno.ENOTCONN
        assert time.monotonic() - start < 1
        run = subprocess.run([sys.executable, "-m", "hpcbridge", "umount", mountpoint], capture_output=True,
                             text=True, timeout=10)
        assert run.returncode == 0, run.stderr
        assert time.monotonic() - start < 10
        assert mountpoint not in hpcbridge.mount.mounts()
        block = bytes(range(256)) * 4096
        if backing == "hdfs":  # the dead writer's logs are still leased: recover them first
            with pytest.raises(OSError) as busy:  # until then a read would miss what it synced
                hpcbridge.plfs.open(f"{url}/ckpt").close()
            assert busy.value.errno == errno.EBUSY and "hpcbridge plfs recover" in str(busy.value)
            from hpcbridge.plfs import tools

            fs, path = hpcbridge.url_to_fs(f"{url}/ckpt")
            tools.recover(fs.container(path))
        with hpcbridge.plfs.open(f"{url}/ckpt", "rb") as f:
            data = f.read()
        assert len(data) >= 8 * len(block)
        assert data[:8 * len(block)] == block * 8
    finally:
        if writer is not None and writer.poll() is None:
            writer.kill()
            writer.wait()
        if os.path.realpath(mountpoint) in hpcbridge.mount.mounts():
            m.unmount()
        os.rmdir(mountpoint)
        cleanup()
