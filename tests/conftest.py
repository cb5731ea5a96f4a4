"""Session fixtures: one real local HDFS (3 DataNodes on 127.0.0.2-4, two racks) for the run.

The cluster starts on first use and is stopped by pid at the end of the session, whatever
happened. Its client configuration is exported as HADOOP_CONF_DIR so fsspec, pandas and the
Java tools find the NameNode's HTTP address too.
"""

import os
import tempfile
import uuid

import pytest


@pytest.fixture(scope="session")
def hdfs_cluster():
    from hpcbridge.testbed import HdfsCluster

    base = tempfile.mkdtemp(prefix="hpcbridge-hdfs-")
    cluster = HdfsCluster(base, datanodes=3, racks=2, replication=1)
    cluster.up()
    saved = os.environ.get("HADOOP_CONF_DIR")
    os.environ["HADOOP_CONF_DIR"] = cluster.info.conf_dir
    try:
        yield cluster
    finally:
        cluster.down()
        if saved is None:
            os.environ.pop("HADOOP_CONF_DIR", None)
        else:
            os.environ["HADOOP_CONF_DIR"] = saved


@pytest.fixture
def hdfs(hdfs_cluster):
    """The HDFS file system of the session cluster."""
    import hpcbridge

    return hpcbridge.connect(hdfs_cluster.info.url, webhdfs=f"http://127.0.0.1:{hdfs_cluster.info.http_port}")


@pytest.fixture
def hdfs_root(hdfs):
    """A fresh directory in HDFS for one test, removed afterwards."""
    root = f"/tests/{uuid.uuid4().hex[:12]}"
    hdfs.mkdir(root, parents=True)
    yield root
    try:
        hdfs.rm(root, recursive=True)
    except FileNotFoundError:
        pass
