"""The conformance suite over a mounted PLFS directory, used as a POSIX directory: the mount is
the backend under test, the library (hpcbridge.plfs on the backing store) is the backdoor."""

import os
import uuid

import pytest

import hpcbridge
import hpcbridge.plfs
from hpcbridge.fs.posix import PosixFileSystem
from hpcbridge.testing import Backdoor, FileSystemConformance


class MountedPlfs(PosixFileSystem):
    """A POSIX directory that is a PLFS mount: what the mount cannot do is declared, so the
    suite skips it (each skip says why) instead of expecting it."""

    capabilities = PosixFileSystem.capabilities.replace(
        xattrs=False,  # PLFS containers keep no extended attributes
        permissions=False,  # containers report the backing directory's bits; chmod is refused
        block_locations=False,  # placement is not visible through FUSE: ask the library (plfs+ URL)
    )


class LibraryBackdoor(Backdoor):
    """Reads and writes the same files through hpcbridge.plfs on the backing store."""

    def __init__(self, mount):
        self.mount = mount

    def _url(self, path):
        rel = os.path.relpath(path, self.mount.path)
        return self.mount.backing(rel)

    def write(self, path, data):
        with hpcbridge.plfs.open(self._url(path), "wb") as f:
            f.write(data)

    def read(self, path):
        with hpcbridge.plfs.open(self._url(path), "rb") as f:
            return f.read()

    def exists(self, path):
        fs, p = hpcbridge.url_to_fs(self._url(path))
        return fs.exists(p)


class _MountConformance(FileSystemConformance):
    @pytest.fixture
    def fs(self):
        return MountedPlfs("", block_size=1 << 20)

    @pytest.fixture
    def backdoor(self, mounted):
        return LibraryBackdoor(mounted)

    @pytest.fixture
    def root(self, mounted):
        path = os.path.join(mounted.path, f"c{uuid.uuid4().hex[:10]}")
        os.mkdir(path)
        return path


class TestPlfsOnPosixMountConformance(_MountConformance):
    @pytest.fixture
    def mounted(self, plfs_posix_mount):
        return plfs_posix_mount


class TestPlfsOnHdfsMountConformance(_MountConformance):
    @pytest.fixture
    def mounted(self, plfs_hdfs_mount):
        return plfs_hdfs_mount
