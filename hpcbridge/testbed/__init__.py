"""Real storage services for tests, demos and benchmarks: a local HDFS (NameNode + DataNodes).

>>> from hpcbridge.testbed import HdfsCluster          # doctest: +SKIP
>>> with HdfsCluster(datanodes=3) as cluster:          # doctest: +SKIP
...     fs = hpcbridge.connect(cluster.info.url)
"""

from .cluster import ClusterInfo, DataNodeInfo, HdfsCluster, TestbedError, default_dir
from .hadoop import HADOOP_VERSION, ensure_hadoop

__all__ = ["HdfsCluster", "ClusterInfo", "DataNodeInfo", "TestbedError", "default_dir",
           "ensure_hadoop", "HADOOP_VERSION"]
