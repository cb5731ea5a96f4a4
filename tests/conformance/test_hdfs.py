"""The HDFS backend against the conformance suite, on the real session cluster.

The backdoor is WebHDFS REST (the NameNode and DataNodes' own HTTP servers), so what hdfs-native
writes is checked by another client and vice versa.
"""

import itertools
import uuid

import pytest
from hypothesis import HealthCheck, settings

import hpcbridge
from hpcbridge.testing import FileSystemConformance, state_machine_for

from ..webhdfs_backdoor import WebHdfsBackdoor

pytestmark = pytest.mark.hdfs


class TestHdfsConformance(FileSystemConformance):
    @pytest.fixture
    def fs(self, hdfs):
        return hdfs

    @pytest.fixture
    def root(self, hdfs_root):
        return hdfs_root

    @pytest.fixture
    def backdoor(self, hdfs_cluster):
        return WebHdfsBackdoor(hdfs_cluster.info.http_port)


_counter = itertools.count()


@pytest.fixture(scope="module")
def stateful_cluster(hdfs_cluster):
    return hdfs_cluster


def test_hdfs_state_machine(stateful_cluster, hdfs_driver):
    info = stateful_cluster.info

    def factory():
        fs = hpcbridge.connect(info.url, webhdfs=f"http://127.0.0.1:{info.http_port}", driver=hdfs_driver)
        root = f"/stateful/{uuid.uuid4().hex[:8]}-{next(_counter)}"
        fs.mkdir(root, parents=True)
        return fs, root

    machine = state_machine_for(factory)
    machine.TestCase.settings = settings(max_examples=20, stateful_step_count=20, deadline=None,
                                         suppress_health_check=list(HealthCheck))
    machine.TestCase("runTest").runTest()
