"""`hpcbridge testbed up --dask`: a scheduler and one worker per DataNode host, stopped by pid."""

import json
import os

import pytest

pytest.importorskip("distributed", reason="the Dask testbed needs distributed: pip install 'hpcbridge[dask]'")

from hpcbridge.cli.main import main  # noqa: E402
from hpcbridge.processes import alive as _alive  # noqa: E402

pytestmark = pytest.mark.hdfs


def test_cli_up_dask_status_down(tmp_path, capsys):
    base = str(tmp_path / "tb")
    assert main(["testbed", "up", "--dir", base, "--datanodes", "2", "--dask", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    dask = info["dask"]
    pids = [info["namenode_pid"], *(d["pid"] for d in info["datanodes"]), dask["scheduler_pid"],
            *(w["pid"] for w in dask["workers"])]
    try:
        assert dask["scheduler"].startswith("tcp://127.0.0.1:")
        assert [w["host"] for w in dask["workers"]] == ["127.0.0.2", "127.0.0.3"]
        assert all(_alive(p) for p in pids)
        from distributed import Client

        with Client(dask["scheduler"], set_as_default=False, timeout=30) as client:
            hosts = sorted(w["host"] for w in client.scheduler_info(n_workers=-1)["workers"].values())
        assert hosts == ["127.0.0.2", "127.0.0.3"]
        assert main(["testbed", "status", "--dir", base]) == 0
        text = capsys.readouterr().out
        assert "Dask scheduler tcp://127.0.0.1:" in text and text.count("Dask worker tcp://127.0.0.") == 2
        assert "DEAD" not in text
    finally:
        assert main(["testbed", "down", "--dir", base]) == 0
    assert not any(_alive(p) for p in pids)
    assert not os.path.exists(base)
