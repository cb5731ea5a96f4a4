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
from hpcbridge.dask.flash import flash_stats_h5py  # noqa: E402
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
    closers = [line.split(",", 1)[1].split()[0][-1] for line in text.splitlines() if line.startswith("    [")]
    # 20 bins (the default); only numpy's last bin is closed at its right edge
    assert closers == [")"] * 19 + ["]"], closers
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


def _flash_file(path, **variables):
    """A minimal FLASH-like file: ``unknown names`` and one dataset per variable."""
    with h5py.File(path, "w") as f:
        f.create_dataset("unknown names", data=np.array([[n.encode()] for n in variables], dtype="S4"))
        for name, data in variables.items():
            f.create_dataset(name, data=data)
    return f"file://{path}"


def numpy_value(path, histogram="dens", bins=20):
    """The oracle for any file: numpy's min/max/mean of each variable and numpy.histogram(data, bins)
    with its own range rule (autodetected, widened around a constant field)."""
    with h5py.File(path, "r") as f:
        names = [n[0].decode() for n in f["unknown names"][()]]
        stats = {n.strip(): {"min": float(f[n][()].min()), "max": float(f[n][()].max()),
                             "mean": float(f[n][()].mean())} for n in names}
        counts, edges = np.histogram(f[next(n for n in names if n.strip() == histogram)][()], bins=bins)
    return stats, counts.tolist(), edges.tolist()


def test_flash_plotfile_float32_histogram_is_numpys(checkpoint):
    """FLASH-IO's plotfile holds float32 variables: numpy.histogram bins them with float32 edges
    (linspace in float32 steps); float64 edges counted values near an edge into the next bin."""
    plot = checkpoint.replace("hdf5_chk_0000", "hdf5_plt_cnt_0000")
    with h5py.File(plot, "r+") as f:
        assert f["dens"].dtype == np.float32 and f["dens"].shape == (10, 8, 8, 8)
        grid = np.linspace(0, 1, 21, dtype=np.float32)  # values on numpy's float32 edges
        f["dens"][...] = np.resize(grid, f["dens"].shape)
        f["temp"][...] = np.random.default_rng(5).random(f["temp"].shape, dtype=np.float32)
    for variable in ("dens", "temp"):
        value = hd.flash_stats(f"file://{plot}", histogram=variable, bins=20).value
        stats, counts, edges = numpy_value(plot, variable)
        assert value["histogram"]["counts"] == counts, variable
        assert value["histogram"]["edges"] == edges, variable
        assert {k: v for k, v in value["variables"].items() if k != "f1"} == {
            k: v for k, v in stats.items() if k != "f1"}
        reference = flash_stats_h5py(plot, histogram=variable, bins=20)
        assert reference["histogram"]["counts"] == counts and reference["histogram"]["edges"] == edges


@pytest.mark.parametrize("case", ["constant", "one block", "big-endian", "big-endian float32"])
def test_flash_edge_fields_equal_numpy(case, tmp_path):
    rng = np.random.default_rng(3)
    data = {"constant": np.full((3, 4, 4, 4), 2.5), "one block": rng.normal(size=(1, 4, 4, 4)),
            "big-endian": rng.normal(size=(2, 4, 4, 4)).astype(">f8"),
            "big-endian float32": rng.normal(size=(2, 4, 4, 4)).astype(">f4")}[case]
    url = _flash_file(tmp_path / "f.h5", dens=data, pres=data[::-1].copy())
    value = hd.flash_stats(url, bins=20).value
    stats, counts, edges = numpy_value(tmp_path / "f.h5")
    assert value["histogram"]["counts"] == counts and value["histogram"]["edges"] == edges
    for name in stats:
        assert value["variables"][name]["min"] == stats[name]["min"]
        assert value["variables"][name]["max"] == stats[name]["max"]
        assert value["variables"][name]["mean"] == pytest.approx(stats[name]["mean"], rel=1e-6)
    assert value["blocks"] == data.shape[0] and value["cells"] == data.size


def test_flash_histogram_of_a_variable_not_among_variables(checkpoint):
    """histogram= names a variable left out of variables=: its bins still span its own min/max
    (the old code looked them up among the asked variables' statistics: KeyError)."""
    value = hd.flash_stats(f"file://{checkpoint}", ["pres"], histogram="dens", bins=9).value
    stats, counts, edges = numpy_value(checkpoint, "dens", bins=9)
    assert set(value["variables"]) == {"pres"} and value["variables"]["pres"] == stats["pres"]
    assert value["histogram"]["counts"] == counts
    np.testing.assert_allclose(value["histogram"]["edges"], edges, rtol=1e-15)


def test_flash_bad_fields_name_the_url(tmp_path):
    """Where numpy cannot answer (NaN/inf range, empty arrays, a listed variable with no dataset),
    the error names the file; the statistics are never silently partial."""
    nan = np.ones((1, 4, 4, 4))
    nan[0, 1, 2, 3] = np.nan
    inf = np.ones((1, 4, 4, 4))
    inf[0, 0, 0, 0] = np.inf
    for name, data in (("nan", nan), ("inf", inf)):
        url = _flash_file(tmp_path / f"{name}.h5", dens=data)
        with pytest.raises(ValueError, match=f"{url}: cannot histogram 'dens': .* not finite"):
            hd.flash_stats(url)
    url = _flash_file(tmp_path / "zero.h5", dens=np.zeros((0, 4, 4, 4)))
    with pytest.raises(ValueError, match=f"{url}: variable 'dens' has no cells"):
        hd.flash_stats(url)
    url = _flash_file(tmp_path / "two.h5", dens=np.ones((1, 4, 4, 4)), pres=np.ones((1, 4, 4, 4)))
    with h5py.File(tmp_path / "two.h5", "r+") as f:
        del f["pres"]  # listed in "unknown names", no dataset
    with pytest.raises(DatasetNotFoundError, match=f"{url} has no dataset for the unknown name.*'pres'"):
        hd.flash_stats(url)
    url = _flash_file(tmp_path / "one.h5", dens=np.ones((1, 4, 4, 4)))
    with pytest.raises(ValueError, match=f"no variables asked of {url}"):
        hd.flash_stats(url, [])
    with pytest.raises(FileNotFoundError, match=f"file://{tmp_path}/absent.h5"):
        hd.flash_stats(f"file://{tmp_path}/absent.h5")
