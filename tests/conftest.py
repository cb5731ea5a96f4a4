"""Session fixtures: one real local HDFS (3 DataNodes on 127.0.0.2-4, two racks) for the run.

The cluster starts on first use and is stopped by pid at the end of the session, whatever
happened. Its client configuration is exported as HADOOP_CONF_DIR so fsspec, pandas and the
Java tools find the NameNode's HTTP address too.
"""

import os
import signal
import tempfile
import uuid

import pytest

# A test runner started in the background by a non-interactive shell (`bash .ci/run &`) inherits
# SIGINT ignored, and so would every CLI the tests start: the Ctrl-C tests would see copies that
# cannot be interrupted. Run them as from a terminal: a Python handler here resets to the default
# disposition in every child at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def hdfs_cluster():
    from hpcbridge.testbed import HdfsCluster

    base = tempfile.mkdtemp(prefix="hpcbridge-hdfs-")
    cluster = HdfsCluster(base, datanodes=3, racks=2)  # replication 2: see HdfsCluster
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


#: The HDFS backend's drivers; every test of the HDFS backend runs on each (ids ``[native]``,
#: ``[libhdfs]``, counted separately by scripts/test_summary.py).
HDFS_DRIVERS = ("native", "libhdfs")


@pytest.fixture(scope="session", params=HDFS_DRIVERS)
def hdfs_driver(request):
    """The HDFS driver under test (``native``: hdfs-native; ``libhdfs``: pyarrow + libhdfs + JVM)."""
    return request.param


@pytest.fixture
def hdfs_options(hdfs_cluster, hdfs_driver):
    """Options for ``hpcbridge.connect`` on the session cluster with the driver under test."""
    return {"webhdfs": f"http://127.0.0.1:{hdfs_cluster.info.http_port}", "driver": hdfs_driver}


@pytest.fixture
def hdfs(hdfs_cluster, hdfs_options):
    """The HDFS file system of the session cluster, on the driver under test."""
    import hpcbridge

    return hpcbridge.connect(hdfs_cluster.info.url, **hdfs_options)


@pytest.fixture(scope="session")
def hdfs_admin(hdfs_cluster):
    """A native-driver connection for set-up and clean-up (does not parametrise a test by driver)."""
    import hpcbridge

    return hpcbridge.connect(hdfs_cluster.info.url, webhdfs=f"http://127.0.0.1:{hdfs_cluster.info.http_port}")


@pytest.fixture
def hdfs_root(hdfs_admin):
    """A fresh directory in HDFS for one test, removed afterwards."""
    root = f"/tests/{uuid.uuid4().hex[:12]}"
    hdfs_admin.mkdir(root, parents=True)
    yield root
    try:
        hdfs_admin.rm(root, recursive=True)
    except FileNotFoundError:
        pass


class DaskTestbed:
    """The session HDFS plus a Dask scheduler and one worker per DataNode host (127.0.0.2-4)."""

    def __init__(self, cluster, dask_info, client):
        self.cluster = cluster
        self.dask = dask_info
        self.client = client
        self.url = cluster.info.url
        #: Options that make every process (workers included) find the testbed's WebHDFS.
        self.storage_options = {"webhdfs": f"http://127.0.0.1:{cluster.info.http_port}"}

    @property
    def hosts(self) -> list[str]:
        """The DataNode hosts, which are also the Dask workers' hosts."""
        return [d.host for d in self.cluster.info.datanodes]

    def fs(self):
        """The HDFS file system, with the testbed's WebHDFS address."""
        import hpcbridge

        return hpcbridge.connect(self.url, **self.storage_options)


@pytest.fixture(scope="session")
def dask_testbed(hdfs_cluster):
    """HDFS testbed + Dask cluster (scheduler on 127.0.0.1, workers bound to the DataNode hosts)
    + a ``distributed.Client``; the Dask processes are stopped by pid at the end of the session."""
    pytest.importorskip("distributed", reason="the Dask testbed needs distributed: pip install 'hpcbridge[dask]'")
    from distributed import Client

    info = hdfs_cluster.start_dask(nthreads=1)
    client = None
    try:
        client = Client(info.scheduler, set_as_default=False, timeout=30)
        yield DaskTestbed(hdfs_cluster, info, client)
    finally:
        if client is not None:
            client.close()
        hdfs_cluster.stop_dask()
