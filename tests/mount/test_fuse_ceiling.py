"""benchmarks/fuse_ceiling.py at a tiny size: the no-op daemon is built and mounted, every mode
writes, the ceilings come out of the samples, and nothing is left behind."""

import json
import os
import shutil
import sys

import pytest

from .conftest import _skip_without_fuse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (Debian build-essential) for the no-op handler")
def test_fuse_ceiling_runs_every_mode(tmp_path, capsys):
    _skip_without_fuse()
    import fuse_ceiling as bench

    out = tmp_path / "ceiling.json"
    assert bench.main(["-r", "2", "--procs", "2", "--per-rank", "256K", "--units", "47001,64K",
                       "--dir", str(tmp_path), "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    for unit in ("47001", "65536"):
        entry = result["results"][unit]
        for mode in bench.MODES:
            assert entry[mode]["MiBps"] > 0 and entry[mode]["wall_ms"] > 0 and entry[mode]["cpu_ms"] > 0
        assert entry["ceiling transport"] > 0 and entry["ceiling cpu"] > 0 and entry["ratio mount/lib"] > 0
    assert os.listdir(tmp_path) == ["ceiling.json"]  # scratch, handler and both mounts are gone
    assert "ceilings for any daemon" in capsys.readouterr().out


def test_noop_daemon_discards_writes_and_answers_them(tmp_path):
    """The no-op daemon is what the ceiling measures: writes succeed in full and keep nothing."""
    _skip_without_fuse()
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (Debian build-essential)")
    import fuse_ceiling as bench

    handler = bench.build_noop_handler(str(tmp_path))
    (tmp_path / "backing").mkdir()
    (tmp_path / "mnt").mkdir()
    with bench.noop_mount(handler, f"plfs+file://{tmp_path}/backing", str(tmp_path / "mnt")) as m:
        fd = os.open(f"{m.path}/f", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            assert os.pwrite(fd, b"x" * 47001, 47001) == 47001
        finally:
            os.close(fd)
        assert os.path.getsize(f"{m.path}/f") == 0  # answered, not stored


def test_summarise_ceilings_from_samples():
    """The ceilings' arithmetic on known samples: (MiB/s, wall s, CPU s) per repetition, the
    first (warm-up) left out."""
    import fuse_ceiling as bench

    warm = (1.0, 1.0, 1.0)
    samples = {"lib": [warm, (100.0, 0.05, 0.09)], "nn-ext4": [warm, (100.0, 0.05, 0.09)],
               "mount": [warm, (20.0, 0.25, 0.30)], "noop": [warm, (50.0, 0.10, 0.11)]}
    entry = bench.summarise(samples, cores=2)
    assert entry["ratio mount/lib"] == 0.2
    assert entry["ceiling transport"] == 0.5  # 0.05 / 0.10
    assert entry["ceiling cpu"] == 0.5  # 0.05 / ((0.11 + 0.09) / 2)
    assert entry["mount"]["utilisation"] == 0.6  # 0.30 / (2 * 0.25)
