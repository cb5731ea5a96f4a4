"""The README's MPI programs (the blocks marked ``<!-- readme: mpirun -n 4 -->``), each saved as a
script and run as the README says, ``mpirun -n 4 python script.py``, from the repository root in
the shell the short tour prepares; what they wrote is read back by the reference PLFS reader
(tests/plfs/reference.py) and compared with the layout numpy builds."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .plfs import reference

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- readme: mpirun -n 4 -->"
TOUR = "/tmp/hpcbridge-tour"


def mpi_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(rf"^{re.escape(MARKER)}\n```python\n(.*?)^```\n", text, re.S | re.M)


def _expected(body: str) -> tuple[str, bytes]:
    """Where a block writes, and what 4 ranks write there."""
    (path,) = re.findall(r'"plfs\+file://(/tmp/hpcbridge-tour/\w+)"', body)
    S = 47001
    if "Create_vector" in body:  # object i of rank r at (i * 4 + r) * S
        nobj = int(re.search(r"S, nobj = MPI.COMM_WORLD, 47001, (\d+)", body).group(1))
        return path, np.repeat(np.tile(np.arange(1, 5, dtype=np.uint8), nobj), S).tobytes()
    return path, np.repeat(np.arange(1, 5, dtype=np.uint8), S).tobytes()  # rank r's block at r * S


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun (Debian openmpi-bin)")
def test_readme_mpi_programs_run_as_written(tmp_path):
    blocks = mpi_blocks()
    assert len(blocks) == 2
    text = (ROOT / "README.md").read_text()
    prepare = re.findall(r"```sh\n(.*?)```", text[text.index("## A short tour"):], re.S)[0]
    env = {"HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
           "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:  # a worktree's copy of hpcbridge, as the test session imports it
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    shutil.rmtree(TOUR, ignore_errors=True)
    try:
        for i, body in enumerate(blocks):
            script = tmp_path / f"mpi{i}.py"
            script.write_text(body)
            run = subprocess.run(["bash", "-c", f"set -euo pipefail\n{prepare}\nmpirun -n 4 python {script}\n"],
                                 cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
            assert run.returncode == 0, (body, run.stdout[-3000:], run.stderr[-3000:])
            path, expected = _expected(body)
            assert reference.read_logical(path) == expected, path
    finally:
        shutil.rmtree(TOUR, ignore_errors=True)


def test_readme_mpi_programs_write_where_no_other_tour_step_does():
    """Run in order, the README's steps share /tmp/hpcbridge-tour. An MPI program writing its
    container where the mount tour makes its mount point (``ckpt``) failed with IsADirectoryError
    for a reader following the README from the top; the other tests run each part on its own."""
    text = (ROOT / "README.md").read_text()
    blocks = mpi_blocks()
    targets = {os.path.basename(_expected(body)[0]) for body in blocks}
    for body in blocks:
        text = text.replace(body, "")
    used_elsewhere = set(re.findall(r"/tmp/hpcbridge-tour/([\w.-]+)", text))
    assert targets and not targets & used_elsewhere, targets & used_elsewhere
