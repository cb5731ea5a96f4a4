"""The conformance suite over a mounted PLFS directory, used as a POSIX directory: the mount is
the backend under test, the library (hpcbridge.plfs on the backing store) is the backdoor."""

import os
import shutil
import tempfile
import uuid

import hypothesis
import pytest

import hpcbridge
import hpcbridge.plfs
from hpcbridge.fs.posix import PosixFileSystem
from hpcbridge.testing import Backdoor, FileSystemConformance, state_machine_for


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


_live = {}


def _mounted_backend():
    return MountedPlfs("", block_size=1 << 20), tempfile.mkdtemp(prefix="stateful-", dir=_live["mount"].path)


class TestPlfsOnPosixMountStateful(state_machine_for(_mounted_backend).TestCase):
    """The Hypothesis state machine (random operation sequences against a model) over the mount;
    fewer examples than on the library backends: every step is several FUSE round trips."""

    settings = hypothesis.settings(max_examples=15, stateful_step_count=20, deadline=None)

    @classmethod
    def setUpClass(cls):
        from .conftest import _skip_without_fuse

        _skip_without_fuse()
        _live["backing"] = tempfile.mkdtemp(prefix="hpcbridge-mnt-stateful-")
        _live["mountpoint"] = tempfile.mkdtemp(prefix="hpcbridge-mnt-")
        _live["mount"] = hpcbridge.mount(f"plfs+file://{_live['backing']}", _live["mountpoint"])
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        try:
            _live.pop("mount").unmount()
        finally:
            os.rmdir(_live.pop("mountpoint"))
            shutil.rmtree(_live.pop("backing"), ignore_errors=True)
