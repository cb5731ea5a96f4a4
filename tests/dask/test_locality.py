"""Locality-aware jobs on the real HDFS testbed with real Dask workers on the DataNode hosts.

What is asserted is measured by the read tasks themselves (the host they ran on, the hosts the
block locations of the bytes they fetched name), never taken from the plan.
"""

import uuid
import warnings

import pytest

pytest.importorskip("distributed", reason="locality tests need distributed: pip install 'hpcbridge[dask]'")

import hpcbridge.dask as hd  # noqa: E402
from hpcbridge.dask.jobs import grep_serial  # noqa: E402
from hpcbridge.dask.scheduling import LocalityWarning  # noqa: E402

pytestmark = pytest.mark.hdfs

RECORDS = 120_000  # 12 MB in 512 KiB blocks: 24+ blocks over 3 DataNodes


@pytest.fixture(scope="module")
def so(dask_testbed, hdfs_driver):
    """Storage options for the workers: the testbed's, on the HDFS driver under test (each worker
    process starts its own JVM for libhdfs)."""
    return {**dask_testbed.storage_options, "driver": hdfs_driver}


@pytest.fixture(scope="module")
def dataset(dask_testbed, so):
    root = f"/tests/dask-{uuid.uuid4().hex[:8]}"
    url = f"{dask_testbed.url}{root}/in"
    result = hd.teragen(url, RECORDS, files=3, block_size=512 << 10, replication=1, client=dask_testbed.client,
                        storage_options=so)
    assert result.details["bytes"] == RECORDS * 100
    yield url, root
    dask_testbed.fs().rm(root, recursive=True)


def test_teragen_spreads_blocks_over_the_datanodes(dask_testbed, dataset):
    url, root = dataset
    fs = dask_testbed.fs()
    hosts = [b.hosts for p in fs.find(f"{root}/in") for b in fs.block_locations(p)]
    assert len(hosts) >= 24 and all(len(h) == 1 for h in hosts)
    assert {h[0] for h in hosts} <= set(dask_testbed.hosts) and len({h[0] for h in hosts}) >= 2


def test_grep_reads_locally_and_counts_every_record_once(dask_testbed, dataset, so):
    url, _ = dataset
    serial = grep_serial(url, rb"Z[0-9]Z", storage_options=so)
    on = hd.grep(url, rb"Z[0-9]Z", client=dask_testbed.client, storage_options=so, partition_size=512 << 10)
    off = hd.grep(url, rb"Z[0-9]Z", client=dask_testbed.client, storage_options=so, partition_size=512 << 10,
                  locality=False)
    assert on.value == serial == off.value
    assert serial["records"] == RECORDS and serial["bytes"] == RECORDS * 100 and serial["matches"] > 0
    assert on.partitions >= 24 and on.report.tasks == on.partitions == off.report.tasks
    # The planner restricts every partition to its DataNode's worker, up to 1.25 fair shares per
    # worker (a skewed random layout leaves the rest to free workers): at least 1.25/3 of the bytes.
    placed = on.details["placed_fraction"]
    assert placed >= 0.41 and off.details["placed_fraction"] == 0.0
    # Measured: the placed bytes are read locally (less the overread that finishes a partition's
    # last record in the next block, and a task Dask may move to an idle worker); without
    # locality about one third is.
    assert on.report.local_fraction >= placed - 0.15, (placed, on.report.format())
    assert on.report.local_fraction > off.report.local_fraction + 0.15, (on.report.format(), off.report.format())
    assert sum(on.report.bytes_by_host.values()) == on.report.bytes_read >= RECORDS * 100
    assert set(on.report.tasks_by_worker_host) <= set(dask_testbed.hosts)
    # Served bytes per host cover what each DataNode stores of the dataset.
    fs = dask_testbed.fs()
    stored: dict = {}
    for path in fs.find(url):
        for b in fs.block_locations(path):
            stored[b.hosts[0]] = stored.get(b.hosts[0], 0) + b.length
    for host, n in stored.items():
        assert on.report.bytes_by_host.get(host, 0) >= n


def test_wordcount_and_dummy_read(dask_testbed, dataset, so):
    url, _ = dataset
    words = hd.wordcount(url, word=rb"[a-z]+", client=dask_testbed.client, storage_options=so)
    assert sum(words.value.values()) == RECORDS * 11
    assert all(len(w) == 4 for w in words.value) and len(words.value) <= 256
    read = hd.dummy_read(url, client=dask_testbed.client, storage_options=so, record_size=100)
    assert read.value == RECORDS * 100 and read.report.bytes_read == RECORDS * 100


def test_terasort_and_validate(dask_testbed, dataset, so):
    url, root = dataset
    out = f"{dask_testbed.url}{root}/sorted"
    result = hd.terasort(url, out, outputs=3, client=dask_testbed.client, storage_options=so)
    assert result.value["records"] == result.value["input_records"] == RECORDS
    check = hd.validate_sort(out, url, client=dask_testbed.client, storage_options=so)
    assert check.value["ok"], check.value["problems"]
    assert check.value["checksum"] == result.value["input_checksum"] == check.value["input_checksum"]
    # The validator fails on a corrupted output: swap the first two records of one file.
    fs = dask_testbed.fs()
    path = f"{root}/sorted/part-00001"
    data = fs.read_bytes(path)
    fs.write_bytes(path, data[100:200] + data[:100] + data[200:])
    broken = hd.validate_sort(out, url, client=dask_testbed.client, storage_options=so)
    assert not broken.value["ok"] and any("part-00001 is not sorted" in p for p in broken.value["problems"])
    fs.write_bytes(path, data[:-100])
    lost = hd.validate_sort(out, url, client=dask_testbed.client, storage_options=so)
    assert any("records" in p and "input" in p for p in lost.value["problems"])


def test_no_matching_worker_falls_back_with_one_warning(dask_testbed, dataset, hdfs_driver):
    from distributed import Client, LocalCluster

    if hdfs_driver != "native":
        pytest.skip("planning only: does not depend on the HDFS driver")
    url, _ = dataset
    with LocalCluster(n_workers=1, threads_per_worker=1, host="127.0.0.1", processes=True,
                      dashboard_address=":0") as cluster, Client(cluster, set_as_default=False) as client:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = hd.grep(url, rb"ZZ", client=client, storage_options=dask_testbed.storage_options)
        locality = [w for w in caught if issubclass(w.category, LocalityWarning)]
        assert len(locality) == 1 and "no Dask worker runs on the hosts" in str(locality[0].message)
        assert result.value["records"] == RECORDS
        assert result.report.local_fraction == 0.0 and set(result.report.tasks_by_worker_host) == {"127.0.0.1"}


def test_cli_grep_prints_the_locality_report(dask_testbed, dataset, capsys, hdfs_driver):
    import json

    if hdfs_driver != "native":
        pytest.skip("the CLI's report: does not depend on the HDFS driver")
    from hpcbridge.cli.main import main

    url, _ = dataset
    base = str(dask_testbed.cluster.base_dir)
    assert main(["dask", "grep", url, "Z[0-9]Z", "--dir", base, "--partition-size", "1M", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["value"]["records"] == RECORDS and out["locality"]["tasks"] == out["partitions"]
    assert main(["dask", "grep", url, "Z[0-9]Z", "--dir", base]) == 0
    text = capsys.readouterr().out
    assert "locality of job" in text and "% local" in text and "127.0.0." in text
    assert main(["dask", "grep", url, "--dir", base]) == 1
    assert "needs a pattern" in capsys.readouterr().err


def test_uneven_layout_stays_balanced(dask_testbed, tmp_path):
    """Every block on one host (local files reported as stored on 127.0.0.2): with the default
    balance the other workers take part of the reads (remotely), without it all stay on the host."""
    client = dask_testbed.client
    options = {"hostname": "127.0.0.2", "block_size": 256 << 10}
    url = f"file://{tmp_path}/uneven"
    hd.teragen(url, 60_000, files=2, client=client, storage_options=options)  # 6 MB: 24 blocks
    balanced = hd.grep(url, rb"ZZ", client=client, storage_options=options, partition_size=256 << 10)
    pinned = hd.grep(url, rb"ZZ", client=client, storage_options=options, partition_size=256 << 10,
                     balance=None)
    assert balanced.value == pinned.value and balanced.value["records"] == 60_000
    assert balanced.partitions == pinned.partitions >= 20
    assert set(balanced.report.bytes_by_host) == {"127.0.0.2"}
    # The planner placed at most 1.25 fair shares on 127.0.0.2; the rest went to free workers.
    assert balanced.report.tasks_by_worker_host.get("127.0.0.2", 0) < balanced.partitions
    assert len(balanced.report.tasks_by_worker_host) >= 2, balanced.report.format()
    assert balanced.report.local_fraction < 1.0
    assert pinned.report.local_fraction > balanced.report.local_fraction, \
        (pinned.report.format(), balanced.report.format())
