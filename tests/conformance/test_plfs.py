"""PLFS containers against the conformance suite, over POSIX; the backdoor is an independent
standard-library implementation of docs/plfs-format.md (tests/plfs/reference.py)."""

import os
import shutil
import tempfile

import pytest

import hpcbridge
from hpcbridge.testing import Backdoor, FileSystemConformance, state_machine_for

from ..plfs import reference


class ReferenceBackdoor(Backdoor):
    def write(self, path, data):
        if os.path.isdir(path):
            shutil.rmtree(path)
        reference.write_logical(path, data)

    def read(self, path):
        return reference.read_logical(path)

    def exists(self, path):
        return os.path.exists(path)


class TestPlfsOnPosixConformance(FileSystemConformance):
    @pytest.fixture
    def fs(self):
        return hpcbridge.connect("plfs+file:///")

    @pytest.fixture
    def root(self, tmp_path):
        return str(tmp_path)

    @pytest.fixture
    def backdoor(self):
        return ReferenceBackdoor()


TestPlfsStateful = state_machine_for(
    lambda: (hpcbridge.connect("plfs+file:///"), tempfile.mkdtemp(prefix="hpcbridge-plfs-stateful-"))
).TestCase
