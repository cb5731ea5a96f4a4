"""The README's Dask, mount and array tour, run as written: every block from "The Dask, mount and
array tour" to "## Layout of the repository", in order, in one bash script from the repository root
(Python blocks saved as scripts and run), in a shell prepared by the short tour's first block,
against the session's testbed with its Dask cluster. Its first line (`hpcbridge testbed up --dask`)
and last (`hpcbridge testbed down`) are the only ones not run, as in the HDFS tour's test: the
session already runs the one testbed it uses, found through $HPCBRIDGE_TESTBED_DIR.

The results are checked against oracles: the TeraGen files read over WebHDFS and searched with
``re``; the checkpoint's bytes opened by h5py and averaged by numpy; the copied file's container
decoded by the reference PLFS reader (tests/plfs/reference.py)."""

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hpcbridge
import hpcbridge.plfs

from ..mount.conftest import fuse_missing
from ..plfs import reference
from ..webhdfs_backdoor import WebHdfsBackdoor

pytestmark = pytest.mark.hdfs

ROOT = Path(__file__).resolve().parents[2]
TOUR = "/tmp/hpcbridge-tour"
MARK = "=== README block {} ==="


def tour_blocks() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("The Dask, mount and array tour"):text.index("## Layout of the repository")]
    return re.findall(r"```(sh|python)\n(.*?)```", section, re.S)


def shell_preparation() -> str:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```sh\n(.*?)```", text[text.index("## A short tour"):], re.S)[0]


def _mounted(path: str) -> bool:
    with open("/proc/mounts") as f:
        return any(line.split()[1] == path for line in f)


def test_readme_dask_mount_array_tour_runs_as_written(dask_testbed, hdfs_admin, tmp_path):
    if fuse_missing:
        pytest.skip("no /dev/fuse or fusermount3 (Debian fuse3): the tour's mounts cannot run here")
    pytest.importorskip("h5py")
    blocks = tour_blocks()
    first, last = blocks[0][1].splitlines(), blocks[-1][1].splitlines()
    assert first[0].startswith("hpcbridge testbed up --dask") and last[-1] == "hpcbridge testbed down"
    blocks[0] = ("sh", "\n".join(first[1:]) + "\n")
    blocks[-1] = ("sh", "\n".join(last[:-1]) + "\n")
    lines = ["set -euo pipefail", shell_preparation()]
    for i, (kind, body) in enumerate(blocks):
        lines.append(f"echo '{MARK.format(i)}'; date +%s.%N >&2")
        if kind == "python":
            script = tmp_path / f"block{i}.py"
            script.write_text(body)
            lines.append(f"python {script}")
        else:
            lines.append(body)
    lines.append("date +%s.%N >&2")
    env = {"HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
           "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
           "HPCBRIDGE_TESTBED_DIR": str(dask_testbed.cluster.base_dir)}
    if "PYTHONPATH" in os.environ:  # a worktree's copy of hpcbridge, as the test session imports it
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    shutil.rmtree(TOUR, ignore_errors=True)
    try:
        run = subprocess.run(["bash", "-c", "\n".join(lines)], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=600)
        assert run.returncode == 0, (run.stdout[-4000:], run.stderr[-4000:])
        marks = [float(t) for t in re.findall(r"^(\d{9,}\.\d+)$", run.stderr, re.M)]
        print("README blocks took", [round(b - a, 1) for a, b in zip(marks, marks[1:])], "s")
        parts = re.split(r"^=== README block (\d+) ===$", run.stdout, flags=re.M)
        out = dict(zip(parts[1::2], (p.strip("\n") for p in parts[2::2])))
        print(run.stdout)
        web = WebHdfsBackdoor(dask_testbed.cluster.info.http_port)
        fs = dask_testbed.fs()

        # teragen + grep, from the command line and from Python: the counts the files hold
        tera = sorted(p for p in fs.find("/tour/tera") if not p.rsplit("/", 1)[1].startswith(("_", ".")))
        data = b"".join(web.read(p) for p in tera)
        assert len(data) == 102_400 * 100
        matches = len(re.findall(rb"ZZZZ", data))
        assert re.search(rf"^matches: {matches}$", out["0"], re.M) and f"bytes: {len(data)}" in out["0"], out["0"]
        value = out["1"].splitlines()
        assert re.search(rf"'matches': (np\.int64\()?{matches}\b", value[0]), value
        assert re.search(rf"'bytes': (np\.int64\()?{len(data)}\b", value[0]), value
        assert 0.0 <= float(value[0].rsplit(" ", 1)[1]) <= 1.0 and value[1] == "102400"

        # the checkpoint flash_io wrote through the mount: an HDF5 file in a PLFS container in HDFS
        assert not _mounted(f"{TOUR}/ckpt") and not _mounted(f"{TOUR}/mnt")
        assert "dens" in out["2"] and "HDF5" in out["2"]
        url = f"plfs+{dask_testbed.url}/tour/flash_io_test_hdf5_chk_0000"
        with hpcbridge.plfs.open(url, "rb") as f:
            checkpoint = f.read()
        import h5py

        with h5py.File(io.BytesIO(checkpoint), "r") as h5:
            dens, temp = h5["dens"][...], h5["temp"][...]
        printed = out["4"].splitlines()
        assert len(printed) == 2, printed
        assert np.isclose(float(printed[0].split()[0]), dens.mean(), rtol=1e-12)
        assert 0.0 <= float(printed[0].split()[1]) <= 1.0
        assert np.isclose(float(printed[1]), temp.mean(), rtol=1e-12)  # through xarray's engine
        with h5py.File(io.BytesIO(checkpoint), "r") as h5:  # the job's table: every variable's statistics
            variables = [k for k in h5 if h5[k].ndim == 4]  # (blocks, z, y, x) per variable
            table = {k.strip(): (h5[k][...].min(), h5[k][...].max(), h5[k][...].mean()) for k in variables}
            names = list(table)
        stats = out["5"][out["5"].index(" variable "):out["5"].index("histogram of")]
        rows = dict((m[0], tuple(map(float, m[1:]))) for m in re.findall(
            r"^\s+(\S+)\s+([-\d.e+]+)\s+([-\d.e+]+)\s+([-\d.e+]+)$", stats, re.M))
        assert set(rows) == set(names) and len(names) == 24, out["5"]
        for name, expected in table.items():
            assert np.allclose(rows[name], expected, rtol=1e-4), (name, rows[name], expected)
        assert Path(f"{TOUR}/dens.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        # the mount from Python: cp made a PLFS container holding README.md
        assert out["3"].strip() == "b'# hpcbridge'"
        assert reference.read_logical(f"{TOUR}/plfs/README.md") == (ROOT / "README.md").read_bytes()
    finally:
        for path in (f"{TOUR}/ckpt", f"{TOUR}/mnt"):
            if _mounted(path):
                subprocess.run([os.path.join(os.path.dirname(sys.executable), "hpcbridge"), "umount", path],
                               env={**os.environ}, capture_output=True, timeout=60)
        shutil.rmtree(TOUR, ignore_errors=True)
        try:
            hdfs_admin.rm("/tour", recursive=True)
        except FileNotFoundError:
            pass
