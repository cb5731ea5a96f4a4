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


def tasks_on_first_node(comm) -> int:
    """How many of ``comm``'s tasks share rank 0's node (IOR's ``CountTasksPerNode``)."""
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return comm.bcast(node.size, root=0)
    finally:
        node.Free()


def read_shift(comm) -> int:
    """How far the read phase shifts ranks so that no node reads back what it wrote: IOR's
    ``-C`` (``rankOffset = taskPerNodeOffset · tasksPerNode mod numTasks``, taskPerNodeOffset 1,
    block placement of ranks on nodes) and the LANL test's shift. Rank r then reads what rank
    ``(r + shift) mod P`` wrote.

    On one node that offset is 0 (IOR would read its own data back): the kernels shift by one
    task there instead, so no rank reads its own bytes (and drop the shared page cache where
    they can)."""
    return tasks_on_first_node(comm) % comm.size or 1
