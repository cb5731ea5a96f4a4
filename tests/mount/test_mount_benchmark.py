"""benchmarks/mount.py at a tiny size: every mode runs, FLASH-IO at the size asked for, and the JSON
has every ratio (the figures themselves are in docs/benchmarks.md)."""

import json
import os
import shutil
import sys

import pytest

from .conftest import _skip_without_fuse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun (Debian openmpi-bin): FLASH-IO needs it")
def test_mount_benchmark_runs_every_mode(tmp_path, capsys):
    _skip_without_fuse()
    import mount as bench

    out = tmp_path / "mount.json"
    assert bench.main(["--no-hdfs", "-r", "2", "--procs", "2", "--per-rank", "256K", "--units", "47001,64K",
                       "--flash-nxb", "8", "--flash-blocks", "1", "--dir", str(tmp_path), "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    assert (result["flash_nxb"], result["flash_blocks"]) == (8, 1)
    for unit in ("47001", "65536"):
        entry = result["lanl"][unit]
        assert {"ratio mount/lib posix write", "ratio mount/lib posix read"} <= set(entry)
        assert all(entry[f"{mode} {phase}"]["median"] > 0 for mode in ("nn-ext4", "lib-posix", "mount-posix")
                   for phase in ("write", "read"))
        assert all(entry[f"{mode} {phase}"]["cpu_ms"]["median"] > 0 for mode in ("nn-ext4", "lib-posix", "mount-posix")
                   for phase in ("write", "read"))
    assert result["flash"]["ratio mount-posix/ext4"] > 0 and result["flash"]["mount-posix"]["median"] > 0
    assert os.listdir(tmp_path) == ["mount.json"]  # its scratch directory and mount are gone
    assert "ratio" in capsys.readouterr().out
