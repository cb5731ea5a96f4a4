"""The HDFS benchmarks run small in make test, on the session's cluster: each finishes, checks
what it read, and writes the JSON its docs/benchmarks.md section quotes."""

import json
import os
import sys

import pytest

pytestmark = pytest.mark.hdfs

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))


def _cluster_args(cluster):
    return ["--url", cluster.info.url, "--webhdfs", f"http://127.0.0.1:{cluster.info.http_port}"]


def test_dfsio_small_run_reports_hibench_and_testdfsio_figures(hdfs_cluster, tmp_path):
    import dfsio

    out = tmp_path / "dfsio.json"
    assert dfsio.main(["--procs", "2", "--size", "1M", "--repetitions", "1", "--replication", "1", "--no-java",
                       *_cluster_args(hdfs_cluster), "--output", str(out)]) == 0
    cell = json.loads(out.read_text())["results"]["replication_1"]
    for key in ("hpcbridge-native_write", "hpcbridge-native_read", "raw-native_write", "raw-native_read"):
        assert cell[key] > 0
        hadoop = cell["testdfsio_MiBps"][key]
        assert hadoop["throughput"] > 0 and hadoop["average_io_rate"] >= hadoop["throughput"] * 0.999


def test_testdfsio_figures_are_hadoops():
    """Two tasks of 128 MiB in 1 s and 4 s: TestDFSIO's analyzeResult prints throughput
    256 MiB / 5 s, average IO rate (128 + 32) / 2, std dev sqrt(|(128² + 32²)/2 - 80²|)."""
    import dfsio

    assert dfsio.testdfsio_figures([(10.0, 11.0), (10.0, 14.0)], 128 << 20) == \
        {"throughput": 51.2, "average_io_rate": 80.0, "io_rate_std_dev": 48.0}


def test_small_files_small_run(hdfs_cluster, tmp_path):
    import small_files

    out = tmp_path / "small.json"
    assert small_files.main(["--files", "12", "--size", "1K", "--repetitions", "1", *_cluster_args(hdfs_cluster),
                             "--conf-dir", hdfs_cluster.info.conf_dir, "--output", str(out)]) == 0
    assert json.loads(out.read_text())["benchmark"] == "small_files"


def test_hdfs_drivers_small_run(hdfs_cluster, tmp_path):
    import hdfs_drivers

    out = tmp_path / "drivers.json"
    assert hdfs_drivers.main(["--files", "3", *_cluster_args(hdfs_cluster), "--output", str(out)]) == 0
    assert json.loads(out.read_text())["benchmark"] == "hdfs_drivers"
