"""Record readers against the stock readers over the same local files: ``pandas.read_csv`` /
``dask.dataframe.read_csv``, ``dask.bag.read_text`` and plain Python decoding, with small
blocksizes so that every partition boundary case happens."""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

dask = pytest.importorskip("dask", reason="hpcbridge.dask needs dask: pip install 'hpcbridge[dask]'")
pd = pytest.importorskip("pandas")

import hpcbridge.dask as hd  # noqa: E402


def _csv(tmp_path, name: str, rows: int) -> str:
    (tmp_path / name).write_bytes(b"a,b\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(rows)))
    return str(tmp_path / name)


@pytest.mark.parametrize("blocksize", [1, 7, 20, None])
@pytest.mark.parametrize("options", [{"skiprows": 3}, {"header": 0}, {"skiprows": [0, 2]},
                                     {"skiprows": 1, "skipfooter": 2, "engine": "python"},
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


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-8-sig", "shift_jis", "cp037"])
@pytest.mark.parametrize("blocksize", [1, 3, 16, None])
def test_read_text_in_any_encoding_is_plain_pythons_decoding(tmp_path, encoding, blocksize):
    """Files were cut at the byte b"\\n": in UTF-16 it is also half of U+0A0A or U+010A and
    later blocks lack the BOM (a UnicodeDecodeError, or with errors="replace" garbled lines);
    in Shift JIS b"|" is the trail byte of "ポ"; in EBCDIC the newline is not b"\\n", and a
    b"\\n" byte cut a line in two. Oracle: plain Python (as dask.bag.read_text without
    blocksize)."""
    text = "héllo\nਊĊ\r\nポ|x\n\ufeffy\n\n" * 3 + "end"
    text = text if encoding != "cp037" else "ab\x8ecd\nef\n" * 4  # 0x8e is b"\n" in cp037
    text = text if encoding != "shift_jis" else text.replace("é", "e").replace("ਊĊ", "z").replace("\ufeff", "")
    (tmp_path / "a.txt").write_bytes(text.encode(encoding))
    (tmp_path / "b.txt").write_bytes(text[::-1].encode(encoding))
    url = f"file://{tmp_path}/*.txt"
    for errors in ("strict", "replace"):
        want = []
        for name in ("a.txt", "b.txt"):
            with open(tmp_path / name, encoding=encoding, errors=errors, newline=None) as f:
                want += list(f)
        assert hd.read_text(url, encoding=encoding, errors=errors, blocksize=blocksize).compute(scheduler="sync") == want
    if encoding == "shift_jis":
        want = [line for name in ("a.txt", "b.txt")
                for line in _split((tmp_path / name).read_bytes().decode(encoding), "|")]
        got = hd.read_text(url, encoding=encoding, delimiter="|".encode(encoding), blocksize=blocksize)
        assert got.compute(scheduler="sync") == want


def _split(text: str, sep: str) -> list[str]:
    parts = text.split(sep)
    return [p + sep for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def test_read_text_decoding_errors_name_the_file(tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"ok\n\xff\n")
    with pytest.raises(UnicodeDecodeError, match="invalid start byte in file://.*bad.txt"):
        hd.read_text(f"file://{tmp_path}/bad.txt", blocksize=2).compute(scheduler="sync")
    with pytest.raises(ValueError, match="bad.txt is not text in utf-8"):
        hd.read_text(f"file://{tmp_path}/bad.txt", delimiter=b"\xff")


@pytest.mark.parametrize("encoding", ["nope", "hex", "rot13"])
def test_an_unknown_encoding_is_a_lookup_error_naming_the_files_before_any_read(tmp_path, monkeypatch, encoding):
    """An unknown name raised codecs' LookupError naming only the encoding; a codec that is not
    a text encoding (hex, rot13) was an AssertionError (TypeError) from read_text. Oracle: the
    LookupError of pandas.read_csv and bytes.decode; ours names the glob and comes before the
    files are listed, planned or read."""
    _csv(tmp_path, "x.csv", 3)
    with pytest.raises(LookupError):
        pd.read_csv(tmp_path / "x.csv", names=["a", "b"], encoding=encoding)
    with pytest.raises(LookupError):
        b"a\n".decode(encoding)

    def no_read(*args, **kwargs):
        raise AssertionError("the files were planned before the encoding was checked")

    monkeypatch.setattr("hpcbridge.dask.core.read_blocks", no_read)
    url = f"file://{tmp_path}/*.csv"
    for reader, call in (("read_text", lambda: hd.read_text(url, encoding=encoding)),
                         ("read_csv", lambda: hd.read_csv(url, names=["a", "b"], encoding=encoding))):
        with pytest.raises(LookupError) as info:
            call()
        assert f"{reader} of {url}" in str(info.value) and repr(encoding) in str(info.value)


@pytest.mark.parametrize("blocksize", [1, 5, None])
def test_read_csv_rows_end_at_the_line_terminator_and_in_the_encoding_as_pandas(tmp_path, blocksize):
    """With lineterminator=";" the files were still cut at b"\\n" (a row "\\n"); UTF-16 files
    were cut at b"\\n" too (a UnicodeDecodeError). Oracle: pandas per file."""
    (tmp_path / "a.csv").write_bytes(b"1,a\n;2,b;3,c;")
    (tmp_path / "b.csv").write_bytes(b"4,d;5,e")
    got = hd.read_csv(f"file://{tmp_path}/*.csv", names=["x", "y"], lineterminator=";", blocksize=blocksize)
    want = pd.concat([pd.read_csv(tmp_path / n, names=["x", "y"], lineterminator=";") for n in ("a.csv", "b.csv")])
    assert got.compute(scheduler="sync").values.tolist() == want.values.tolist()
    for name, rows in (("a.csv", "1,é\n2,ਊ\n"), ("b.csv", "3,Ċ\n4,x")):
        (tmp_path / name).write_bytes(rows.encode("utf-16"))
    got = hd.read_csv(f"file://{tmp_path}/*.csv", names=["x", "y"], encoding="utf-16", blocksize=blocksize)
    want = pd.concat([pd.read_csv(tmp_path / n, names=["x", "y"], encoding="utf-16") for n in ("a.csv", "b.csv")])
    assert got.compute(scheduler="sync").values.tolist() == want.values.tolist()


def test_a_list_of_urls_is_read_in_its_order_as_dask_reads_it(tmp_path):
    """The files of a list were sorted: lines of c.txt came after a.txt's although listed first."""
    import dask.bag as db

    for name in "abcd":
        (tmp_path / f"{name}.txt").write_text(f"{name}1\n{name}2\n")
    paths = [str(tmp_path / "c.txt"), str(tmp_path / "[bd].txt"), str(tmp_path / "a.txt")]
    want = db.read_text(paths, blocksize=3).compute(scheduler="sync")
    got = hd.read_text([f"file://{p}" for p in paths], blocksize=3).compute(scheduler="sync")
    assert got == want == ["c1\n", "c2\n", "b1\n", "b2\n", "d1\n", "d2\n", "a1\n", "a2\n"]


def test_read_csv_refuses_a_column_of_text_and_numbers_as_dask_does(tmp_path):
    """A column of numbers in one partition and text in another was silently a column of mixed
    objects (1, 2, "x": pandas reads "1", "2", "x"); dask.dataframe.read_csv refuses mismatched
    dtypes. Numeric promotion (a missing value in a later partition) stays, as pandas reads it."""
    (tmp_path / "t.csv").write_bytes(b"1,a\n2,b\n3,c\n4.5,d\nx,e\n")
    with pytest.raises(ValueError, match=r"t.csv: column 'x' is .* give its dtype"):
        hd.read_csv(f"file://{tmp_path}/t.csv", names=["x", "y"], blocksize=4).compute(scheduler="sync")
    got = hd.read_csv(f"file://{tmp_path}/t.csv", names=["x", "y"], blocksize=4, dtype={"x": str})
    want = pd.read_csv(tmp_path / "t.csv", names=["x", "y"], dtype={"x": str})
    assert got.compute(scheduler="sync").values.tolist() == want.values.tolist()
    (tmp_path / "t.csv").write_bytes(b"a,1\nb,2\nc,\nd,4\n")
    got = hd.read_csv(f"file://{tmp_path}/t.csv", names=["x", "y"], blocksize=4).compute(scheduler="sync")
    want = pd.read_csv(tmp_path / "t.csv", names=["x", "y"])
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want)
    # A first partition of only the header row does not make every column text.
    (tmp_path / "t.csv").write_bytes(b"x,y\n1,2\n3,4\n")
    got = hd.read_csv(f"file://{tmp_path}/t.csv", names=["x", "y"], header=0, blocksize=1).compute(scheduler="sync")
    assert got.values.tolist() == [[1, 2], [3, 4]] and str(got["x"].dtype) == "int64"


def _universal(text: str) -> list[str]:
    import io

    return list(io.StringIO(text, newline=None))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(alphabet="ab|\r\n\u00e9\u20ac\U0001f600\u2028", max_size=60), min_size=1, max_size=3),
       delimiter=st.sampled_from([None, "\n", "\r\n", "\r", "||", "|", "\u20ac", "a|a"]),
       blocksize=st.integers(1, 64))
def test_read_text_of_several_files_is_plain_pythons_split(tmp_path_factory, texts, delimiter, blocksize):
    """Every line of every file once, in file order, whatever the cuts (multi-byte characters
    and delimiters straddling them, CRLF, lone CRs, empty files and lines). Oracle: Python's
    universal newlines (dask.bag.read_text's default) or str.split at the delimiter."""
    d = tmp_path_factory.mktemp("text")
    for i, text in enumerate(texts):
        (d / f"f{i}.txt").write_bytes(text.encode())
    want = [line for text in texts for line in (_universal(text) if delimiter is None else _split(text, delimiter))]
    got = hd.read_text(f"file://{d}/*.txt", blocksize=blocksize,
                       delimiter=delimiter.encode() if delimiter else None).compute(scheduler="sync")
    assert got == want


def test_read_csv_blank_columns_in_some_partitions_are_missing_values_as_pandas(tmp_path):
    """A text column left blank in a whole partition is float NaN there: not a dtype conflict."""
    (tmp_path / "t.csv").write_bytes(b"1,\n2,\n3,a\n4,b\n5,\n6,\n")
    for blocksize in (1, 8):
        got = hd.read_csv(f"file://{tmp_path}/t.csv", names=["x", "y"], blocksize=blocksize).compute(scheduler="sync")
        want = pd.read_csv(tmp_path / "t.csv", names=["x", "y"])
        assert got.fillna("NA").values.tolist() == want.fillna("NA").values.tolist()
