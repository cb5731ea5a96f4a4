"""The POSIX backend against the conformance suite; the backdoor is the builtin open()."""

import os
import tempfile

import pytest

import hpcbridge
from hpcbridge.testing import Backdoor, FileSystemConformance, state_machine_for


class BuiltinOpenBackdoor(Backdoor):
    def write(self, path, data):
        with open(path, "wb") as f:
            f.write(data)

    def read(self, path):
        with open(path, "rb") as f:
            return f.read()

    def exists(self, path):
        return os.path.lexists(path)


class TestPosixConformance(FileSystemConformance):
    @pytest.fixture
    def fs(self):
        return hpcbridge.connect("file:///", block_size=1 << 20)

    @pytest.fixture
    def root(self, tmp_path):
        return str(tmp_path)

    @pytest.fixture
    def backdoor(self):
        return BuiltinOpenBackdoor()


TestPosixStateful = state_machine_for(
    lambda: (hpcbridge.connect("file:///"), tempfile.mkdtemp(prefix="hpcbridge-stateful-"))
).TestCase


def _maps_of(path: str) -> int:
    """How many mappings of ``path`` this process has (/proc/self/maps)."""
    with open("/proc/self/maps") as maps:
        return sum(1 for line in maps if line.rstrip().endswith(" " + path))


def _descriptors_of(path: str) -> int:
    """How many of this process's file descriptors are open on ``path`` (/proc/self/fd): not
    a count of all of them, which other tests' objects change as they are collected."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == path
        except OSError:  # closed meanwhile (the listing's own descriptor, a collected file)
            continue
    return count


def test_map_range_holds_no_descriptor_and_unmaps_with_its_last_view(tmp_path):
    """Mapped array blocks of a persisted Dask array may be many: each must not keep a file
    descriptor open (Python's mmap.mmap does, before 3.13), and the mapping must go with the
    last view of it -- the kernel's own tables are the oracle."""
    path = str(tmp_path / "m.bin")
    data = os.urandom(3 * 65536 + 17)
    with open(path, "wb") as f:
        f.write(data)
    fs = hpcbridge.connect("file://")
    real = os.path.realpath(path)
    with fs.open(path, "rb", buffering=0) as f:
        views = [f.map_range(i * 1000, 65536 * 2) for i in range(60)]
        assert _descriptors_of(real) == 1  # the handle's own, and no one per mapping
    assert _descriptors_of(real) == 0  # the handle is closed, 60 maps live
    assert _maps_of(os.path.realpath(path)) == 60
    assert all(bytes(v) == data[i * 1000:i * 1000 + 131072] for i, v in enumerate(views))
    child = views[7][5:9]  # a derived view keeps its mapping
    del views
    assert _maps_of(os.path.realpath(path)) == 1 and bytes(child) == data[7005:7009]
    del child
    assert _maps_of(os.path.realpath(path)) == 0
