"""Fixtures of the mount tests: a mounted PLFS-on-POSIX and PLFS-on-HDFS directory.

Every mount is unmounted (and its daemon stopped) by the fixture that made it, whatever the
test did; scripts/run-tests.sh fails the run if a ``fuse.hpcbridge`` mount or a daemon is left.
"""

import os
import shutil
import tempfile
import uuid

import pytest

fuse_missing = not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None


def _skip_without_fuse():
    if fuse_missing:
        pytest.skip("no /dev/fuse or fusermount3 (Debian fuse3): FUSE mounts cannot be tested here")
    pytest.importorskip("mfusepy", reason="hpcbridge mount needs mfusepy: pip install 'hpcbridge[mount]'")


class Mounted:
    """A live mount: ``path`` (the mount point), ``url`` (the backend URL of its root) and
    ``backing(name)``, the library URL of the same file."""

    def __init__(self, mount, url):
        self.mount = mount
        self.path = mount.path
        self.url = url

    def backing(self, name: str) -> str:
        return f"{self.url.rstrip('/')}/{name.lstrip('/')}"


def mounted(url, options=()):
    import hpcbridge

    mountpoint = tempfile.mkdtemp(prefix="hpcbridge-mnt-")
    m = hpcbridge.mount(url, mountpoint, options=list(options))
    try:
        yield Mounted(m, url)
    finally:
        try:
            m.unmount()
        finally:
            os.rmdir(mountpoint)


def _mounted_on_posix(prefix: str):
    """A fresh local directory mounted as ``prefix + file://...`` (removed after)."""
    _skip_without_fuse()
    backing = tempfile.mkdtemp(prefix="hpcbridge-mnt-back-")
    try:
        yield from mounted(f"{prefix}file://{backing}")
    finally:
        shutil.rmtree(backing, ignore_errors=True)


@pytest.fixture(scope="module")
def plfs_posix_mount():
    """PLFS on POSIX, mounted for the module."""
    yield from _mounted_on_posix("plfs+")


def _mounted_on_hdfs(hdfs_cluster, prefix: str):
    """A fresh directory of the session HDFS mounted as ``prefix + hdfs://...`` (removed after)."""
    _skip_without_fuse()
    import hpcbridge

    info = hdfs_cluster.info
    webhdfs = f"http://127.0.0.1:{info.http_port}"
    hdfs = hpcbridge.connect(info.url, webhdfs=webhdfs)
    root = f"/mount-tests/{uuid.uuid4().hex[:10]}"
    hdfs.mkdir(root, parents=True)
    try:
        yield from mounted(f"{prefix}{info.url}{root}", [f"webhdfs={webhdfs}"])
    finally:
        hdfs.rm(root, recursive=True)


@pytest.fixture(scope="module")
def plfs_hdfs_mount(hdfs_cluster):
    """PLFS on the session HDFS, mounted for the module."""
    yield from _mounted_on_hdfs(hdfs_cluster, "plfs+")


@pytest.fixture(scope="module")
def hdfs_plain_mount(hdfs_cluster):
    """The session HDFS itself (no PLFS), mounted for the module."""
    yield from _mounted_on_hdfs(hdfs_cluster, "")


@pytest.fixture(params=["posix", "hdfs"])
def plfs_mount(request):
    """Each PLFS mount in turn (PLFS on POSIX, PLFS on HDFS)."""
    return request.getfixturevalue(f"plfs_{request.param}_mount")


@pytest.fixture
def workdir(plfs_mount):
    """A fresh directory inside the mount, for one test: ``(mounted, name)``."""
    name = f"t{uuid.uuid4().hex[:10]}"
    os.mkdir(os.path.join(plfs_mount.path, name))
    return plfs_mount, name


@pytest.fixture(scope="module")
def file_posix_mount():
    """A plain local directory (``file://``, no PLFS), mounted for the module."""
    yield from _mounted_on_posix("")
