"""Shared helpers of the benchmarks: a testbed when no cluster is given, JSON output."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import tempfile
import time


@contextlib.contextmanager
def hdfs_for_benchmark(url: str | None, webhdfs: str | None, datanodes: int = 3):
    """Yield ``(url, webhdfs, cluster_or_None)``: the given cluster, or a local testbed started
    for this run and stopped (by pid) afterwards."""
    if url:
        yield url, webhdfs, None
        return
    from hpcbridge.testbed import HdfsCluster

    cluster = HdfsCluster(tempfile.mkdtemp(prefix="hpcbridge-bench-hdfs-"), datanodes=datanodes)
    started = time.perf_counter()
    cluster.up()
    print(f"# testbed up in {time.perf_counter() - started:.1f} s: {cluster.info.url}", flush=True)
    try:
        yield cluster.info.url, f"http://127.0.0.1:{cluster.info.http_port}", cluster
    finally:
        cluster.down()


def write_json(path: str, result: dict) -> None:
    """Write a benchmark result (with host facts) as JSON, creating the directory."""
    result = {**result, "host": platform.node(), "cpus": os.cpu_count(),
              "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
