"""fsspec's abstract suite, pandas, Dask and pyarrow on hpcbridge+hdfs:// (the real cluster)."""

import posixpath

import fsspec
import fsspec.tests.abstract as abstract
import pytest

pytestmark = pytest.mark.hdfs


class HdfsFixtures(abstract.AbstractFixtures):
    @pytest.fixture
    def fs(self, hdfs_cluster, hdfs_driver):
        return fsspec.filesystem("hpcbridge+hdfs", netloc=f"127.0.0.1:{hdfs_cluster.info.rpc_port}",
                                 driver=hdfs_driver)

    @pytest.fixture
    def fs_join(self):
        return posixpath.join

    @pytest.fixture
    def fs_path(self, hdfs_root):
        return hdfs_root


class TestHdfsCopy(abstract.AbstractCopyTests, HdfsFixtures):
    pass


class TestHdfsGet(abstract.AbstractGetTests, HdfsFixtures):
    pass


class TestHdfsPut(abstract.AbstractPutTests, HdfsFixtures):
    pass


class TestHdfsPipe(abstract.AbstractPipeTests, HdfsFixtures):
    pass


class TestHdfsOpen(abstract.AbstractOpenTests, HdfsFixtures):
    pass


def test_pandas_dask_and_pyarrow_on_hdfs(hdfs_cluster, hdfs, hdfs_root):
    import dask.bag as db
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hpcbridge.arrow import filesystem_and_path

    base = f"hpcbridge+hdfs://127.0.0.1:{hdfs_cluster.info.rpc_port}{hdfs_root}"
    frame = pd.DataFrame({"x": range(100), "y": [f"v{i}" for i in range(100)]})
    frame.to_parquet(f"{base}/f.parquet")
    assert pd.read_parquet(f"{base}/f.parquet").equals(frame)
    hdfs.write_bytes(f"{hdfs_root}/lines.txt", b"".join(b"line %d\n" % i for i in range(50_000)))
    bag = db.read_text(f"{base}/lines.txt", blocksize=100_000)
    assert bag.npartitions > 1 and bag.count().compute(scheduler="sync") == 50_000
    afs, root = filesystem_and_path(f"{hdfs_cluster.info.url}{hdfs_root}")
    table = pa.table({"a": list(range(1000))})
    pq.write_table(table, f"{root}/t.parquet", filesystem=afs)
    assert pq.read_table(f"{root}/t.parquet", filesystem=afs).equals(table)
