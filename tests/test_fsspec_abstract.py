"""fsspec's own abstract test suite (copy, get, put, pipe, open) on the hpcbridge+file protocol."""

import fsspec
import fsspec.tests.abstract as abstract
import pytest


class HpcbridgeFixtures(abstract.AbstractFixtures):
    @pytest.fixture
    def fs(self):
        fs = fsspec.filesystem("hpcbridge+file", skip_instance_cache=True)
        assert type(fs).__name__ == "FileFSSpec"
        return fs

    @pytest.fixture
    def fs_path(self, tmpdir):
        return str(tmpdir)


class TestHpcbridgeCopy(abstract.AbstractCopyTests, HpcbridgeFixtures):
    pass


class TestHpcbridgeGet(abstract.AbstractGetTests, HpcbridgeFixtures):
    pass


class TestHpcbridgePut(abstract.AbstractPutTests, HpcbridgeFixtures):
    pass


class TestHpcbridgePipe(abstract.AbstractPipeTests, HpcbridgeFixtures):
    pass


class TestHpcbridgeOpen(abstract.AbstractOpenTests, HpcbridgeFixtures):
    pass
