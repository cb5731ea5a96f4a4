"""Record readers against the stock readers over the same local files: ``pandas.read_csv`` /
``dask.dataframe.read_csv``, ``dask.bag.read_text`` and plain Python decoding, with small
blocksizes so that every partition boundary case happens."""

import re

import pytest

dask = pytest.importorskip("dask", reason="hpcbridge.dask needs dask: pip install 'hpcbridge[dask]'")
pd = pytest.importorskip("pandas")

import hpcbridge.dask as hd  # noqa: E402


def _csv(tmp_path, name: str, rows: int) -> str:
    (tmp_path / name).write_bytes(b"a,b\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(rows)))
    return str(tmp_path / name)


@pytest.mark.parametrize("blocksize", [1, 7, 20, None])
@pytest.mark.parametrize("options", [{"skiprows": 3}, {"header": 0}, {"skiprows": [0, 2]},
                                     {"skipfooter": 2, "engine": "python"},
                                     {"header": 0, "skipfooter": 1, "engine": "python"}])
def test_read_csv_counts_skipped_rows_from_each_files_ends_as_pandas(tmp_path, blocksize, options):
    """skiprows/header/skipfooter were applied to every partition: rows at the start (end) of
    every block silently dropped. Oracle: pandas over each file, concatenated."""
    paths = [_csv(tmp_path, "x.csv", 30), _csv(tmp_path, "y.csv", 5)]
    want = pd.concat([pd.read_csv(p, names=["a", "b"], **{"header": None, **options}) for p in paths])
    try:
        got = hd.read_csv(f"file://{tmp_path}/*.csv", names=["a", "b"], blocksize=blocksize,
                          **options).compute(scheduler="sync")
    except ValueError as e:  # the first (last) partition of a file does not hold the rows to skip
        assert blocksize is not None and "larger blocksize" in str(e) and re.search(r"/[xy]\.csv[ ,]", str(e))
        return
    assert got.values.tolist() == want.values.tolist()


def test_read_csv_refuses_row_limits_as_dask_does(tmp_path):
    """nrows was applied to every partition (dask refuses it); chunksize made a TextFileReader."""
    _csv(tmp_path, "x.csv", 30)
    for key, value in (("nrows", 3), ("chunksize", 2), ("iterator", True)):
        with pytest.raises(ValueError, match=f"x.csv does not take {key}"):
            hd.read_csv(f"file://{tmp_path}/x.csv", names=["a", "b"], blocksize=20, **{key: value})
