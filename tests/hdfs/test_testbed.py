"""`hpcbridge testbed up|status|down`: a real cluster of its own, stopped by pid, nothing left."""

import json
import os

import pytest

from hpcbridge.cli.main import main
from hpcbridge.testbed import HdfsCluster, TestbedError
from hpcbridge.testbed.cluster import _alive

pytestmark = pytest.mark.hdfs


def test_cli_up_status_down(tmp_path, capsys):
    base = str(tmp_path / "tb")
    assert main(["testbed", "up", "--dir", base, "--datanodes", "2", "--racks", "2", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    pids = [info["namenode_pid"], *(d["pid"] for d in info["datanodes"])]
    try:
        assert [d["host"] for d in info["datanodes"]] == ["127.0.0.2", "127.0.0.3"]
        assert all(_alive(p) for p in pids)
        assert main(["testbed", "status", "--dir", base, "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["live_datanodes"] == 2 and [d["rack"] for d in status["datanodes"]] == ["/rack0", "/rack1"]
        assert main(["testbed", "up", "--dir", base]) == 1
        assert "already running" in capsys.readouterr().err
    finally:
        assert main(["testbed", "down", "--dir", base]) == 0
    assert not any(_alive(p) for p in pids)
    assert not os.path.exists(base)
    assert main(["testbed", "status", "--dir", base]) == 1
    assert "no testbed" in capsys.readouterr().err


def test_failed_start_reports_the_log_and_leaves_nothing(tmp_path):
    cluster = HdfsCluster(tmp_path / "bad", datanodes=1, heap="1m")  # too small a heap: the JVM refuses
    with pytest.raises(TestbedError, match="(?s)format failed.*heap"):
        cluster.up()
    assert not (tmp_path / "bad").exists()


def test_invalid_cluster_shapes():
    with pytest.raises(ValueError, match="datanodes"):
        HdfsCluster(datanodes=0)
    with pytest.raises(ValueError, match="racks"):
        HdfsCluster(datanodes=2, racks=3)
    with pytest.raises(ValueError, match="replication"):
        HdfsCluster(datanodes=2, replication=3)
