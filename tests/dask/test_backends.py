"""The same jobs over a POSIX directory, a PLFS container on POSIX and a PLFS container on HDFS,
run by the Dask workers of the testbed: exact-once counts, sorted output, measured locality."""

import uuid

import pytest

pytest.importorskip("distributed", reason="these tests need distributed: pip install 'hpcbridge[dask]'")

import hpcbridge.dask as hd  # noqa: E402
from hpcbridge.dask.jobs import grep_serial  # noqa: E402

pytestmark = pytest.mark.hdfs

RECORDS = 30_000


@pytest.fixture(params=["posix", "plfs+file", "plfs+hdfs-native", "plfs+hdfs-libhdfs"])
def backend(request, tmp_path, dask_testbed):
    """``(input URL, output URL, storage options, whether every worker is local to the data)``."""
    if request.param == "posix":
        yield f"file://{tmp_path}/in", f"file://{tmp_path}/out", {}, True
    elif request.param == "plfs+file":
        yield f"plfs+file://{tmp_path}/in", f"plfs+file://{tmp_path}/out", {}, True
    else:
        root = f"/tests/plfs-dask-{uuid.uuid4().hex[:8]}"
        base = f"plfs+hdfs://{dask_testbed.url.split('://', 1)[1]}{root}"
        driver = request.param.split("-")[1]
        options = {**dask_testbed.storage_options, "block_size": 256 << 10, "driver": driver}
        yield f"{base}/in", f"{base}/out", options, False
        dask_testbed.fs().rm(root, recursive=True)


def test_jobs_on_backend(backend, dask_testbed):
    url, out, options, all_local = backend
    client = dask_testbed.client
    hd.teragen(url, RECORDS, files=3, client=client, storage_options=options)
    serial = grep_serial(url, rb"[A-Z]Z[0-9]", storage_options=options)
    grep = hd.grep(url, rb"[A-Z]Z[0-9]", client=client, storage_options=options, blocksize=200_000)
    assert grep.value == serial and serial["records"] == RECORDS and serial["matches"] > 0
    assert grep.partitions >= 15 and grep.report.tasks == grep.partitions
    if all_local:  # local files: any worker on this machine reads them locally
        assert grep.report.local_fraction == 1.0, grep.report.format()
    else:  # PLFS data logs in HDFS blocks on the DataNodes
        assert set(grep.report.bytes_by_host) <= set(dask_testbed.hosts)
        assert grep.report.local_fraction > 0.5, grep.report.format()
    words = hd.wordcount(url, word=rb"[a-z]+", client=client, storage_options=options)
    assert sum(words.value.values()) == RECORDS * 11
    read = hd.dummy_read(url, client=client, storage_options=options, record_size=100)
    assert read.value == RECORDS * 100
    result = hd.terasort(url, out, outputs=4, client=client, storage_options=options, blocksize=300_000)
    assert result.value["records"] == RECORDS
    check = hd.validate_sort(out, url, client=client, storage_options=options)
    assert check.value["ok"], check.value["problems"]
    assert check.value["records"] == RECORDS and check.value["checksum"] == result.value["input_checksum"]
