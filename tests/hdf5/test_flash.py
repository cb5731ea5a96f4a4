"""The FLASH analytics job (hpcbridge.dask.flash_stats, ``hpcbridge dask flash``) over a checkpoint
written by benchmarks/flash_io.py, checked against a serial h5py + numpy computation."""

import json
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

h5py = pytest.importorskip("h5py", reason="HDF5 arrays need h5py: pip install 'hpcbridge[hdf5]'")
pytest.importorskip("dask.array")

import hpcbridge  # noqa: E402
import hpcbridge.dask as hd  # noqa: E402
import hpcbridge.dask.arrays as hd_arrays  # noqa: E402
from hpcbridge.cli.main import main  # noqa: E402
from hpcbridge.fs.transfer import copy_file  # noqa: E402
from hpcbridge.hdf5 import DatasetNotFoundError, NotHDF5Error  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VARIED = ["dens", "pres", "temp", "f1  "]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A FLASH-IO checkpoint (1 rank, 10 blocks of 8^3 zones, 24 variables) whose dens, pres, temp
    and f1 are overwritten with varied values (FLASH-IO's own fields are constant)."""
    d = tmp_path_factory.mktemp("flash")
    subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "flash_io.py"), "--nxb", "8", "--blocks", "10",
                    "--keep", "--dir", str(d), "--output", str(d / "flash_io.json")],
                   check=True, capture_output=True, timeout=300, env={**os.environ, "OMPI_MCA_btl": "self,vader"})
    path = d / "flash_io_test_hdf5_chk_0000"
    rng = np.random.default_rng(11)
    with h5py.File(path, "r+") as f:
        for i, name in enumerate(VARIED):
            f[name][...] = rng.lognormal(mean=i, sigma=1.0, size=f[name].shape)
    return str(path)


def serial_stats(path, histogram="dens", bins=50):
    """The oracle: every variable read whole with h5py, statistics with numpy."""
    with h5py.File(path, "r") as f:
        names = [n[0].decode() for n in f["unknown names"][()]]
        stats = {n.strip(): (f[n][()].min(), f[n][()].max(), f[n][()].mean()) for n in names}
        data = f[next(n for n in names if n.strip() == histogram)][()]
    lo, hi = stats[histogram][:2]
    counts, edges = np.histogram(data, bins=bins, range=(lo, hi) if lo < hi else (lo - 0.5, hi + 0.5))
    return stats, counts, edges


def check(value, path, histogram="dens", bins=50):
    stats, counts, edges = serial_stats(path, histogram, bins)
    assert set(value["variables"]) == set(stats) and len(stats) == 24
    for name, (lo, hi, mean) in stats.items():
        got = value["variables"][name]
        assert got["min"] == lo and got["max"] == hi, name
        assert got["mean"] == pytest.approx(mean, rel=1e-12), name
    assert value["histogram"]["variable"] == histogram
    assert value["histogram"]["counts"] == counts.tolist()
    np.testing.assert_allclose(value["histogram"]["edges"], edges, rtol=1e-15)
    assert value["blocks"] == 10 and value["cells"] == 10 * 8 ** 3


@pytest.mark.parametrize("kind", ["file", "plfs+file"])
def test_flash_stats_equal_serial_h5py(checkpoint, kind, tmp_path):
    url = f"file://{checkpoint}"
    if kind == "plfs+file":
        fs, target = hpcbridge.url_to_fs(f"plfs+file://{tmp_path}/chk")
        copy_file(hpcbridge.connect("file://"), checkpoint, fs, target)
        url = f"plfs+file://{tmp_path}/chk"
    result = hd.flash_stats(url)
    check(result.value, checkpoint)
    assert result.report.tasks >= 24 and result.report.bytes_read >= 24 * 10 * 8 ** 3 * 8
    pres = hd.flash_stats(url, ["pres", "f1"], histogram="f1", bins=7)
    assert set(pres.value["variables"]) == {"pres", "f1"}
    _, counts, _ = serial_stats(checkpoint, "f1", 7)
    assert pres.value["histogram"]["counts"] == counts.tolist()


def test_cli_flash_json_text_and_plot(checkpoint, tmp_path, capsys, monkeypatch):
    url = f"file://{checkpoint}"
    png = tmp_path / "dens.png"
    monkeypatch.setenv("HPCBRIDGE_TESTBED_DIR", str(tmp_path / "no-testbed"))  # none there: local threads
    assert main(["dask", "flash", url, "--plot", str(png), "--bins", "50", "--json"]) in (0, None)
    out = json.loads(capsys.readouterr().out)
    check(out["value"], checkpoint)
    assert out["locality"]["tasks"] >= 24
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["dask", "flash", url, "--variable", "temp", "--no-locality"]) in (0, None)
    text = capsys.readouterr().out
    assert "flash statistics of " + url in text and "histogram of temp" in text and "locality of job" in text
    assert "locality off" in text
    # --no-memory-map reaches every read_hdf5 of the job; the statistics are the same
    seen = []
    real = hd_arrays.read_hdf5
    monkeypatch.setattr(hd_arrays, "read_hdf5", lambda *a, **kw: seen.append(kw["memory_map"]) or real(*a, **kw))
    assert main(["dask", "flash", url, "--no-memory-map", "--bins", "50", "--json"]) in (0, None)
    check(json.loads(capsys.readouterr().out)["value"], checkpoint)
    assert seen and not any(seen)


def test_flash_bad_inputs(checkpoint, tmp_path):
    url = f"file://{checkpoint}"
    with pytest.raises(DatasetNotFoundError, match=f"{url} has no variable 'nope'"):
        hd.flash_stats(url, ["dens", "nope"])
    with pytest.raises(DatasetNotFoundError, match=f"{url} has no variable 'xx' to histogram"):
        hd.flash_stats(url, histogram="xx")
    with pytest.raises(ValueError, match="bins must be a positive integer"):
        hd.flash_stats(url, bins=0)
    text = tmp_path / "t.txt"
    text.write_text("not hdf5\n" * 100)
    with pytest.raises(NotHDF5Error, match=f"file://{text} is not an HDF5 file"):
        hd.flash_stats(f"file://{text}")
    empty = tmp_path / "e.h5"
    with h5py.File(empty, "w") as f:
        f.create_dataset("x", data=np.zeros(3))
    with pytest.raises(ValueError, match="has no FLASH variables"):
        hd.flash_stats(f"file://{empty}")


@pytest.mark.hdfs
def test_flash_on_the_hdfs_testbed(dask_testbed, checkpoint, capsys):
    """From HDFS (128 KiB blocks, replication 1) with the testbed's workers: the same statistics,
    and locality measured by the read tasks with the placement on and off."""
    client = dask_testbed.client
    netloc = dask_testbed.url.split("://", 1)[1]
    root = f"/tests/flash-{uuid.uuid4().hex[:8]}"
    url = f"hdfs://{netloc}{root}/chk"
    options = {**dask_testbed.storage_options, "block_size": 128 << 10, "replication": 1}
    fs, path = hpcbridge.url_to_fs(url, **options)
    fs.mkdir(root, parents=True)
    try:
        copy_file(hpcbridge.connect("file://"), checkpoint, fs, path)
        on = hd.flash_stats(url, client=client, storage_options=options, balance=None)
        check(on.value, checkpoint)
        off = hd.flash_stats(url, client=client, storage_options=options, locality=False)
        check(off.value, checkpoint)
        assert on.report.local_fraction >= 0.9, on.report.format()
        assert off.report.local_fraction < on.report.local_fraction, off.report.format()
        assert main(["dask", "flash", url, "--dir", str(dask_testbed.cluster.base_dir)]) in (0, None)
        text = capsys.readouterr().out
        assert "locality of job" in text and "127.0.0." in text and "dens" in text
    finally:
        dask_testbed.fs().rm(root, recursive=True)
