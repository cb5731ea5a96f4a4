"""The memory backend against the conformance suite; the backdoor reads its store directly."""

import itertools
import uuid

import pytest

import hpcbridge
from hpcbridge.testing import Backdoor, FileSystemConformance, state_machine_for


class StoreBackdoor(Backdoor):
    def __init__(self, fs):
        self.store = fs._store

    def write(self, path, data):
        self.store.files[path] = bytearray(data)
        self.store.mtimes[path] = 0.0

    def read(self, path):
        return bytes(self.store.files[path])

    def exists(self, path):
        return path in self.store.files or path in self.store.dirs


class TestMemoryConformance(FileSystemConformance):
    @pytest.fixture
    def fs(self):
        return hpcbridge.connect(f"memory://{uuid.uuid4().hex}", block_size=1 << 20)

    @pytest.fixture
    def root(self, fs):
        fs.mkdir("/test")
        return "/test"

    @pytest.fixture
    def backdoor(self, fs):
        return StoreBackdoor(fs)


_counter = itertools.count()


def _fresh_memory_fs():
    fs = hpcbridge.connect(f"memory://stateful-{next(_counter)}")
    fs.mkdir("/root")
    return fs, "/root"


TestMemoryStateful = state_machine_for(_fresh_memory_fs).TestCase
