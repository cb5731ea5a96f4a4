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


def test_rm_as_fsspec_local_does(tmp_path):
    """A missing path raises (it returned silently); a glob and a directory with its contents go."""
    ours = fsspec.filesystem("hpcbridge+file", skip_instance_cache=True)
    local = fsspec.filesystem("file")
    for fs in (ours, local):
        with pytest.raises(FileNotFoundError):
            fs.rm(str(tmp_path / "missing"))
    for name in ("a.txt", "b.txt", "d/c.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    ours.rm(str(tmp_path / "*.txt"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    ours.rm([str(tmp_path / "d"), str(tmp_path / "d" / "c.txt")], recursive=True)
    assert not (tmp_path / "d").exists()
