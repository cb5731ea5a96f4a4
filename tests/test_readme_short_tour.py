"""The README's short tour, run as written: every block between "## A short tour" and the HDFS
tour, in order, in one bash script from the repository root (Python blocks as scripts, as a
user would save and run them), in an environment without the test session's variables."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_short_tour_runs_as_written(tmp_path):
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## A short tour"):text.index("The HDFS tour (runs as written")]
    lines = ["set -euo pipefail"]
    for i, (kind, body) in enumerate(re.findall(r"```(sh|python)\n(.*?)```", section, re.S)):
        if kind == "python":
            script = tmp_path / f"block{i}.py"
            script.write_text(body)
            lines.append(f"python {script}")
        else:
            lines.append(body)
    assert len(lines) >= 6 and "__main__" in section  # the Dask snippet shows its guard
    venv_bin = os.path.dirname(sys.executable)
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
           "LANG": "C.UTF-8"}
    subprocess.run(["rm", "-rf", "/tmp/hpcbridge-tour"], check=True)
    run = subprocess.run(["bash", "-c", "\n".join(lines)], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    if run.returncode != 0:  # the whole story, not pytest's shortened repr of it
        pytest.fail(f"the tour exited with {run.returncode}\n--- stdout (end) ---\n{run.stdout[-3000:]}\n"
                    f"--- stderr (end) ---\n{run.stderr[-6000:]}", pytrace=False)
    assert "bytearray(b'rank 3 data')" in run.stdout
    assert "\n30\n" in run.stdout and "3 block(s)" in run.stdout
    subprocess.run(["rm", "-rf", "/tmp/hpcbridge-tour"], check=True)
