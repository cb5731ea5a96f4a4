"""The one-page example backend (tests/conformance/example_backend.py) passes the conformance
suite: the contract a new backend must meet is that small."""

import os
import tempfile

import pytest

from hpcbridge.testing import Backdoor, FileSystemConformance, state_machine_for

from .example_backend import DirectoryFileSystem


class DirectoryBackdoor(Backdoor):
    def __init__(self, root):
        self.root = root

    def _os(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def write(self, path, data):
        with open(self._os(path), "wb") as f:
            f.write(data)

    def read(self, path):
        with open(self._os(path), "rb") as f:
            return f.read()

    def exists(self, path):
        return os.path.lexists(self._os(path))


class TestExampleBackendConformance(FileSystemConformance):
    @pytest.fixture
    def fs(self, tmp_path):
        return DirectoryFileSystem(root=str(tmp_path))

    @pytest.fixture
    def root(self, fs):
        fs.mkdir("/test")
        return "/test"

    @pytest.fixture
    def backdoor(self, fs):
        return DirectoryBackdoor(fs.root)


#: Where the state machine's backends live: one directory per run of this module, which pytest's
#: temporary-directory retention removes (the machine's teardown removes only its "/root").
_stateful_base = None


@pytest.fixture(scope="module", autouse=True)
def _stateful_directory(tmp_path_factory):
    global _stateful_base
    _stateful_base = tmp_path_factory.mktemp("example-stateful")
    yield
    _stateful_base = None


def _fresh_example_fs():
    fs = DirectoryFileSystem(root=tempfile.mkdtemp(prefix="example-", dir=_stateful_base))
    fs.mkdir("/root")
    return fs, "/root"


TestExampleBackendStateful = state_machine_for(_fresh_example_fs).TestCase
