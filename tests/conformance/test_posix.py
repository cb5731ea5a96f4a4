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
