"""The README's HDFS tour, run as written by bash in a fresh environment (no HADOOP_CONF_DIR, a new
working directory), against the session's testbed: its `hpcbridge testbed up` / `down` lines are
the only ones not run (the session has already started the one testbed it uses, and the CLI's up
and down are tested in test_testbed.py); `hpcbridge testbed url` finds the session's testbed
through $HPCBRIDGE_TESTBED_DIR, as it finds the default one in a user's shell."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.hdfs

README = Path(__file__).resolve().parents[2] / "README.md"


def tour_blocks() -> list[str]:
    text = README.read_text()
    start = text.index("The HDFS tour")
    return re.findall(r"```sh\n(.*?)```", text[start:], re.S)[:1]


def test_readme_hdfs_tour_runs_as_written(hdfs_cluster, tmp_path):
    (block,) = tour_blocks()
    lines = block.splitlines()
    assert lines[0].startswith("hpcbridge testbed up") and lines[-1].startswith("hpcbridge testbed down")
    script = "\n".join(lines[1:-1]) + "\n"
    assert "HADOOP_CONF_DIR" not in script and "PORT/" not in script
    env = {k: v for k, v in os.environ.items() if k not in ("HADOOP_CONF_DIR", "HPCBRIDGE_NAMENODES")}
    env["HPCBRIDGE_TESTBED_DIR"] = str(hdfs_cluster.base_dir)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    run = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    url = hdfs_cluster.info.url.rstrip("/")
    assert "tour.bin" in run.stdout and f"url: {url}/tour.bin" in run.stdout
    assert re.search(r"^0\s+0\s+3000000\s+127\.0\.0\.[234](,127\.0\.0\.[234])*\s", run.stdout, re.M), run.stdout
    assert (tmp_path / "back.bin").read_bytes() == (tmp_path / "tour.bin").read_bytes()
