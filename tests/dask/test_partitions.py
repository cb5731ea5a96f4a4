"""Planning and record alignment without a cluster: every record exactly once, metablocks, errors."""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hpcbridge

dask = pytest.importorskip("dask", reason="hpcbridge.dask needs dask: pip install 'hpcbridge[dask]'")

import hpcbridge.dask as hd  # noqa: E402
from hpcbridge.dask.jobs import grep_serial  # noqa: E402
from hpcbridge.dask.partitions import RecordFormat, plan_partitions  # noqa: E402
from hpcbridge.dask.reader import read_chunk  # noqa: E402


def _records(data: bytes, delimiter: bytes) -> list[bytes]:
    """Reference split: each record ends after a delimiter (the last may not)."""
    parts = data.split(delimiter)
    out = [p + delimiter for p in parts[:-1]]
    return out + ([parts[-1]] if parts[-1] else [])


@settings(max_examples=200, deadline=None)
@given(data=st.one_of(st.binary(min_size=0, max_size=3000).map(lambda b: b.replace(b"\0", b"ab")),
                      st.text(alphabet="ab|\n", max_size=400).map(str.encode)),
       delimiter=st.sampled_from([b"\n", b"ab", b"aba", b"\r\n", b"||", b"\n\n", b"aa"]),
       blocksize=st.integers(1, 700))
def test_chunks_own_every_record_exactly_once(tmp_path_factory, data, delimiter, blocksize):
    """Every record of the reference split in exactly one block, whole; also for delimiters that
    overlap themselves (b"||" in b"a|||b": the records are b"a||", b"|b")."""
    path = tmp_path_factory.mktemp("align") / "f.txt"
    path.write_bytes(data)
    fs = hpcbridge.connect("file:///")
    fmt = RecordFormat.make(delimiter=delimiter)
    if not data:
        assert plan_partitions(fs, [str(path)], blocksize, fmt=fmt) == []
        return
    parts = plan_partitions(fs, [str(path)], blocksize, fmt=fmt)
    assert [c.start for p in parts for c in p.chunks] == list(range(0, len(data), blocksize))
    got = []
    with fs.open(str(path), "rb") as f:
        for part in parts:
            (chunk,) = part.chunks
            block = read_chunk(f, chunk, fmt, [])
            # whole records only: a block is empty, or ends with the delimiter, or ends the file
            assert not block or block.endswith(delimiter) or chunk.end >= len(data) or block == data[-len(block):]
            got.append(block)
    assert b"".join(got) == data
    # Records of the reference split: each in exactly one block (no record cut across blocks).
    assert [r for b in got for r in _records(b, delimiter)] == _records(data, delimiter)


def test_fixed_records_and_blocks(tmp_path):
    data = np.arange(1000 * 100, dtype=np.uint32).astype(np.uint8).tobytes()
    (tmp_path / "r.bin").write_bytes(data)
    (tmp_path / "short.bin").write_bytes(data[:2000])
    # 1-byte blocks over 20 records (2 000 partitions; over all 1 000 records they took 40 s).
    for name, blocksize in (("short", 1), ("r", 99), ("r", 100), ("r", 101), ("r", 4096), ("r", 10**6)):
        blocks = hd.read_blocks(f"file://{tmp_path}/{name}.bin", blocksize=blocksize, record_size=100)
        got = blocks.compute(scheduler="sync")
        assert b"".join(got) == (data if name == "r" else data[:2000]) and all(len(b) % 100 == 0 for b in got)
    records = hd.read_records(f"file://{tmp_path}/r.bin", blocksize=4096).compute(scheduler="sync")
    assert len(records) == 1000 and records[7] == data[700:800]


def test_read_text_and_csv(tmp_path):
    lines = [f"{i},{i * i},name{i}\n" for i in range(5000)]
    (tmp_path / "a.csv").write_text("".join(lines[:3000]))
    (tmp_path / "b.csv").write_text("".join(lines[3000:]))
    text = hd.read_text(f"file://{tmp_path}/*.csv", blocksize=4096).compute(scheduler="sync")
    assert text == lines
    frame = hd.read_csv(f"file://{tmp_path}/*.csv", names=["i", "sq", "name"], blocksize=8192)
    df = frame.compute(scheduler="sync")
    assert frame.npartitions > 4 and len(df) == 5000 and df["sq"].sum() == sum(i * i for i in range(5000))
    assert sorted(df["i"]) == list(range(5000))


def test_read_csv_of_empty_files_is_an_empty_frame_as_pandas_reads_it(tmp_path):
    """Only empty files make no partition: dask.dataframe.from_delayed raised a TypeError."""
    import pandas as pd

    (tmp_path / "a.csv").write_bytes(b"")
    (tmp_path / "b.csv").write_bytes(b"")
    got = hd.read_csv(f"file://{tmp_path}/*.csv", names=["x", "y"]).compute(scheduler="sync")
    want = pd.read_csv(tmp_path / "a.csv", header=None, names=["x", "y"])
    assert got.columns.tolist() == want.columns.tolist() == ["x", "y"] and len(got) == len(want) == 0


def test_files_without_a_last_newline_stay_apart_in_a_partition(tmp_path):
    """Small files share a partition (metablocks): a file's unterminated last line ran into the
    next file's first (b"gamma" + b"delta"), in every job."""
    (tmp_path / "f1.txt").write_bytes(b"alpha beta\ngamma")
    (tmp_path / "f2.txt").write_bytes(b"delta\nepsilon\n")
    (tmp_path / "f3.csv").write_bytes(b"1,2\n3,4")
    (tmp_path / "f4.csv").write_bytes(b"5,6\n7,8\n")
    url = f"file://{tmp_path}/*.txt"
    assert hd.read_blocks(url).npartitions == 1
    assert hd.read_text(url).compute(scheduler="sync") == ["alpha beta\n", "gamma", "delta\n", "epsilon\n"]
    words = hd.wordcount(url, locality=False).value
    assert words == {b"alpha": 1, b"beta": 1, b"gamma": 1, b"delta": 1, b"epsilon": 1}
    assert hd.grep(url, rb"^\w+$", locality=False).value["matches"] == 3
    frame = hd.read_csv(f"file://{tmp_path}/*.csv", names=["x", "y"]).compute(scheduler="sync")
    assert frame.values.tolist() == [[1, 2], [3, 4], [5, 6], [7, 8]]


@pytest.mark.parametrize("pattern", [rb"^a", rb"b$", rb"^$", rb"z*", rb"a|b", rb"(a)(b)"])
def test_grep_counts_per_line_whatever_the_partitioning(tmp_path, pattern):
    """As Hadoop's grep, per line: anchors at line edges, empty matches not multiplied by
    partition edges, records counted with an unterminated last line."""
    import re

    data = b"ab\n\nab\nxab\n\n\nab"
    (tmp_path / "g.txt").write_bytes(data)
    lines = data.split(b"\n")
    oracle = sum(len(re.findall(pattern, line)) for line in lines)
    url = f"file://{tmp_path}/g.txt"
    serial = grep_serial(url, pattern)
    assert serial["matches"] == oracle and serial["records"] == len(lines) and serial["bytes"] == len(data)
    for blocksize in (1, 3, 6, 1 << 20):
        assert hd.grep(url, pattern, blocksize=blocksize, locality=False).value == serial


def test_wordcount_counts_whole_matches_of_patterns_with_groups(tmp_path):
    (tmp_path / "w.txt").write_bytes(b"foo=1 bar=2\nfoo=3\n")
    for word in (rb"(\w+)=\d", rb"(\w+)=(\d)", rb"\w+=\d"):
        assert hd.wordcount(f"file://{tmp_path}/w.txt", word=word, locality=False).value == \
            {b"foo=1": 1, b"bar=2": 1, b"foo=3": 1}


def test_metablocks_group_consecutive_small_blocks_of_one_host(tmp_path):
    fs = hpcbridge.connect("file:///", block_size=4096)  # local files: 4 KiB logical blocks, all on this host
    (tmp_path / "f").write_bytes(b"x\n" * 50_000)  # 100 000 bytes = 25 blocks
    parts = plan_partitions(fs, [str(tmp_path / "f")], partition_size=20_000)
    assert len(parts) == 6  # 4 blocks (16 KiB) per partition: a fifth would pass 20 000 bytes
    assert all(p.nbytes <= 20_000 for p in parts) and sum(p.nbytes for p in parts) == 100_000
    for p in parts:
        assert [c.start for c in p.chunks] == list(range(p.chunks[0].start, p.chunks[-1].end, 4096))
        assert len(p.hosts) == 1 and p.hosts[0][1] == p.nbytes
    single = plan_partitions(fs, [str(tmp_path / "f")], partition_size=4096)
    assert len(single) == 25


def test_host_hints_only_where_the_store_reports_placement(tmp_path):
    # memory:// cuts blocks but does not know hosts (capabilities.block_locations false): its
    # partitions carry no host to steer a task to; local files do (this host).
    mem = hpcbridge.connect("memory://hints", block_size=4096)
    mem.write_bytes("/f", b"x\n" * 50_000)
    assert not mem.capabilities.block_locations and mem.block_locations("/f")[0].hosts
    parts = plan_partitions(mem, ["/f"], partition_size=20_000)
    assert len(parts) == 6 and all(p.hosts == () for p in parts)
    posix = hpcbridge.connect("file:///", block_size=4096)
    (tmp_path / "f").write_bytes(b"x\n" * 50_000)
    assert all(p.hosts for p in plan_partitions(posix, [str(tmp_path / "f")], partition_size=20_000))


def test_bad_inputs_name_the_url(tmp_path):
    (tmp_path / "f.txt").write_bytes(b"abc\n" * 10)
    (tmp_path / "odd.bin").write_bytes(b"x" * 150)
    (tmp_path / "empty").mkdir()
    url = f"file://{tmp_path}/f.txt"
    for bad in (0, -5, "1M", 1.5, True):
        with pytest.raises(ValueError, match="blocksize.*f.txt"):
            hd.read_blocks(url, blocksize=bad)
    with pytest.raises(ValueError, match="partition_size.*f.txt"):
        hd.read_blocks(url, partition_size=0)
    with pytest.raises(ValueError, match="either delimiter or record_size.*f.txt"):
        hd.read_blocks(url, delimiter=b"\n", record_size=100)
    with pytest.raises(ValueError, match="delimiter must not be empty.*f.txt"):
        hd.read_blocks(url, delimiter=b"")
    with pytest.raises(TypeError, match="delimiter must be bytes.*f.txt"):
        hd.read_blocks(url, delimiter="\n")
    with pytest.raises(ValueError, match="record_size must be a positive integer.*f.txt"):
        hd.read_blocks(url, record_size=0)
    with pytest.raises(ValueError, match="odd.bin holds 150 bytes, not a whole number of 100-byte records"):
        hd.read_records(f"file://{tmp_path}/odd.bin", record_size=100)
    with pytest.raises(FileNotFoundError, match=r"no files match the glob file://.*/nothing-\*\.txt"):
        hd.read_blocks(f"file://{tmp_path}/nothing-*.txt")
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        hd.read_blocks(f"file://{tmp_path}/missing.txt")
    with pytest.raises(FileNotFoundError, match="no files in .*empty"):
        hd.read_blocks(f"file://{tmp_path}/empty")
    with pytest.raises(ValueError, match="needs the column names"):
        hd.read_csv(url, names=[])
    with pytest.raises(ValueError, match="records must be a positive integer.*out"):
        hd.teragen(f"file://{tmp_path}/out", 0)
    with pytest.raises(ValueError, match="files must be an integer between 1 and records"):
        hd.teragen(f"file://{tmp_path}/out", 10, files=11)
    with pytest.raises(FileExistsError, match="teragen output .*tmp.* exists"):
        hd.teragen(f"file://{tmp_path}", 10)

    with pytest.raises(ValueError, match=r"invalid grep regular expression '\(unclosed'"):
        hd.grep(url, "(unclosed")
    with pytest.raises(ValueError, match=r"invalid word regular expression '\['"):
        hd.wordcount(url, word="[")


def test_glob_patterns(tmp_path):
    for name in ("a1.txt", "a2.txt", "b1.txt", "sub/a3.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(name.encode() + b"\n")
    from hpcbridge.dask.partitions import expand_paths

    def names(pattern):
        return [p.rsplit("/", 1)[-1] for p in expand_paths(f"file://{tmp_path}/{pattern}")[1]]

    assert names("a*.txt") == ["a1.txt", "a2.txt"]
    assert names("[ab]1.txt") == ["a1.txt", "b1.txt"]
    assert names("[!a]?.txt") == ["b1.txt"]
    assert names("**/a*.txt") == ["a1.txt", "a2.txt", "a3.txt"]
    assert names("*/a*.txt") == ["a3.txt"]
    assert names("") == ["a1.txt", "a2.txt", "b1.txt", "a3.txt"]  # a directory: every file below it


def test_directories_skip_hidden_files_as_pyarrow_dataset_and_hadoop_do(tmp_path):
    """Oracle: ``pyarrow.dataset``'s discovery (``ignore_prefixes`` ``.`` and ``_``, Hadoop's
    FileInputFormat's hiddenFileFilter): a Hadoop job's output directory is read without its
    ``_SUCCESS``, TeraSort's ``_partition.lst`` and the ``.crc`` files; a hidden file named
    explicitly, or by a glob whose last part starts with ``_`` or ``.``, is read."""
    import pyarrow.dataset as pads

    from hpcbridge.dask.partitions import expand_paths

    for name in ("part-r-00000", "part-r-00001", "_SUCCESS", "_partition.lst", ".part-r-00000.crc", "a_b",
                 "sub/c.d", "sub/.hidden", "sub/_tmp/x", "_logs/history", ".staging/y"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"a,b\n1,2\n")
    oracle = sorted(pads.dataset(str(tmp_path), format="csv").files)
    assert oracle == [f"{tmp_path}/{n}" for n in ("a_b", "part-r-00000", "part-r-00001", "sub/c.d")]
    for url in (f"file://{tmp_path}", f"file://{tmp_path}/", str(tmp_path), f"file://{tmp_path}/**"):
        assert expand_paths(url)[1] == oracle, url
    assert expand_paths(f"file://{tmp_path}/*")[1] == oracle[:3]
    assert expand_paths(f"file://{tmp_path}/_*")[1] == [f"{tmp_path}/_SUCCESS", f"{tmp_path}/_partition.lst"]
    assert expand_paths(f"file://{tmp_path}/_SUCCESS")[1] == [f"{tmp_path}/_SUCCESS"]
    # validate of a TeraSort-like output directory: the _partition.lst is not a part
    hd.teragen(f"file://{tmp_path}/gen", 30, files=2)
    hd.terasort(f"file://{tmp_path}/gen", f"file://{tmp_path}/sorted", outputs=2, locality=False)
    (tmp_path / "sorted" / "_partition.lst").write_bytes(b"\xff" * 250)
    (tmp_path / "sorted" / "_SUCCESS").write_bytes(b"")
    check = hd.validate_sort(f"file://{tmp_path}/sorted", f"file://{tmp_path}/gen").value
    assert check["ok"] and check["records"] == 30 and check["files"] == 2, check
    (tmp_path / "empty" / "_logs").mkdir(parents=True)
    (tmp_path / "empty" / "_SUCCESS").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="names starting with _ or . are skipped"):
        expand_paths(f"file://{tmp_path}/empty")


def test_import_hpcbridge_does_not_import_dask():
    code = ("import sys, hpcbridge, hpcbridge.dask; "
            "assert not [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')], sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": os.getcwd()})


def test_locality_plan_balances_uneven_layouts_and_warns_once():
    import warnings

    from hpcbridge.dask.partitions import Chunk, Partition
    from hpcbridge.dask.scheduling import LocalityWarning, locality_plan

    workers = {f"tcp://127.0.0.{i}:4000": f"127.0.0.{i}" for i in (2, 3, 4)}
    # Uneven: half of 12 equal partitions on 127.0.0.4.
    parts = [Partition(i, (Chunk("/f", i * 10, i * 10 + 10, 120),),
                       ((("127.0.0.4" if i < 6 else f"127.0.0.{2 + i % 2}"), 10),)) for i in range(12)]
    plan = locality_plan(parts, workers, balance=1.25)
    on_4 = [i for i, w in plan.items() if w == ["tcp://127.0.0.4:4000"]]
    assert len(on_4) == 5 and len(plan) == 11  # 1.25 fair shares = 5 partitions; the 6th runs anywhere
    # The default, 1.5 fair shares, keeps all six of 127.0.0.4's partitions there.
    assert len(locality_plan(parts, workers)) == 12
    assert len(locality_plan(parts, workers, balance=None)) == 12
    with pytest.raises(ValueError, match="balance must be at least 1"):
        locality_plan(parts, workers, balance=0.5)
    # Replicas: the listed workers are every host holding a copy.
    replicated = [Partition(0, (Chunk("/f", 0, 10, 10),), (("127.0.0.2", 10), ("127.0.0.3", 10)))]
    assert locality_plan(replicated, workers) == {0: ["tcp://127.0.0.2:4000", "tcp://127.0.0.3:4000"]}
    # No worker on the data's hosts: one warning, no placement.
    elsewhere = {"tcp://10.9.9.9:4000": "10.9.9.9"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert locality_plan(parts, elsewhere, "hdfs://nn/data") == {}
    assert [w.category for w in caught] == [LocalityWarning] and "hdfs://nn/data" in str(caught[0].message)


def test_report_sums_the_measurements_of_one_job():
    from hpcbridge.dask.report import LocalityReport

    events = [
        {"job": "a", "worker_host": "127.0.0.2", "preferred": "127.0.0.2", "bytes_local": 90, "bytes_remote": 10,
         "bytes_by_host": {"127.0.0.2": 90, "127.0.0.3": 10}, "seconds": 0.5},
        {"job": "a", "worker_host": "127.0.0.3", "preferred": "127.0.0.2", "bytes_local": 0, "bytes_remote": 100,
         "bytes_by_host": {"127.0.0.2": 100}, "seconds": 0.25},
        {"job": "b", "worker_host": "127.0.0.4", "preferred": "127.0.0.4", "bytes_local": 7, "bytes_remote": 0,
         "bytes_by_host": {"127.0.0.4": 7}},
    ]
    report = LocalityReport.from_events("a", events)
    assert (report.tasks, report.bytes_local, report.bytes_remote, report.bytes_read) == (2, 90, 110, 200)
    assert report.local_fraction == 0.45 and report.tasks_on_preferred_host == 1
    assert report.bytes_by_host == {"127.0.0.2": 190, "127.0.0.3": 10}
    assert report.bytes_by_worker_host == {"127.0.0.2": 100, "127.0.0.3": 100}
    assert report.as_dict()["local_fraction"] == 0.45 and "45.0% local" in report.format()
    assert LocalityReport.from_events("none", events).local_fraction == 0.0


def test_workers_on_this_machines_interface_addresses_are_local():
    """Found by an audit: a worker listening on this machine's interface address (Dask's
    default host, and inproc addresses) counted as remote where DNS knows the machine's name
    only as loopback: locality fell back and reports said 0 % local."""
    import socket

    import psutil

    from hpcbridge.dask.hosts import host_matches, host_of_address

    assert host_of_address("inproc://10.1.2.3/4630/4") == "10.1.2.3"
    assert host_of_address("tcp://[fe80::1]:8786") == "fe80::1" and host_of_address("tcp://h:1") == "h"
    here = socket.gethostname()
    for entries in psutil.net_if_addrs().values():
        for a in entries:
            if a.family == socket.AF_INET:
                assert host_matches(here, a.address), a.address
    assert not host_matches(here, "192.0.2.254") or "192.0.2.254" in {
        a.address for entries in psutil.net_if_addrs().values() for a in entries}


def test_read_report_counts_each_byte_a_task_reads_once(tmp_path):
    """A record boundary's window was counted again when the task read its records."""
    data = b"".join(b"%09d\n" % i for i in range(10_500))  # 105,000 bytes
    (tmp_path / "r.txt").write_bytes(data)
    bag = hd.read_blocks(f"file://{tmp_path}/r.txt", blocksize=10_000, locality=False)
    assert b"".join(bag.compute(scheduler="sync")) == data
    report = bag.report()
    # Each cut is searched for twice, by the two tasks beside it (4 KiB windows): no more.
    assert report.bytes_read <= len(data) + (bag.npartitions - 1) * 4096


_HADOOP_WORDCOUNT_MAP = """
import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.util.StringTokenizer;
import java.util.TreeMap;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.util.LineReader;

public class WordCountMap {
    public static void main(String[] args) throws Exception {
        TreeMap<String, Integer> counts = new TreeMap<>();
        try (FileInputStream in = new FileInputStream(args[0])) {
            LineReader lines = new LineReader(in);
            Text line = new Text();
            while (lines.readLine(line) > 0) {
                StringTokenizer tokens = new StringTokenizer(line.toString());  // WordCount's mapper
                while (tokens.hasMoreTokens()) counts.merge(tokens.nextToken(), 1, Integer::sum);
            }
        }
        StringBuilder out = new StringBuilder();
        for (var e : counts.entrySet()) {
            for (byte b : e.getKey().getBytes(StandardCharsets.UTF_8)) out.append(String.format("%02x", b));
            out.append(' ').append(e.getValue()).append('\\n');
        }
        System.out.print(out);
    }
}
"""


_HADOOP_GREP_MAP = """
import java.io.FileInputStream;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.util.LineReader;

public class GrepMap {
    public static void main(String[] args) throws Exception {
        for (int p = 1; p < args.length; p++) {  // one "matches records" line per pattern
            long matches = 0, records = 0;
            Pattern pattern = Pattern.compile(args[p]);
            try (FileInputStream in = new FileInputStream(args[0])) {
                LineReader lines = new LineReader(in);
                Text line = new Text();
                while (lines.readLine(line) > 0) {
                    records++;
                    Matcher m = pattern.matcher(line.toString());  // RegexMapper: every find() of a line
                    while (m.find()) matches++;
                }
            }
            System.out.println(matches + " " + records);
        }
    }
}
"""


def _run_java(tmp_path, source: str, name: str, *args) -> str:
    import shutil

    from hpcbridge.testbed.hadoop import ensure_hadoop

    if shutil.which("java") is None:
        pytest.skip("no java: make test installs the JDK")
    (tmp_path / f"{name}.java").write_text(source)
    run = subprocess.run(["java", "-cp", f"{ensure_hadoop() / 'lib'}/*", str(tmp_path / f"{name}.java"), *args],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def test_grep_lines_are_hadoop_linereader_lines(tmp_path):
    """Oracle: Hadoop grep's map (hadoop-common's LineReader, java.util.regex per line) run by the
    JVM. Lines end at \\n, \\r\\n or a lone \\r: ``$`` before a CRLF matched only there."""
    rng = np.random.default_rng(5)
    pieces = [b"ab", b"b", b"a", b"\n", b"\r\n", b"\r", b"x", b" ", b"\n\n"]
    data = b"".join(pieces[i] for i in rng.integers(0, len(pieces), 3000)) + b"ab\r"
    path = tmp_path / "lines.txt"
    path.write_bytes(data)
    url = f"file://{path}"
    for pattern in ("b$", "^a", "a|b", "^$", "x*"):
        matches, records = map(int, _run_java(tmp_path, _HADOOP_GREP_MAP, "GrepMap", str(path), pattern).split())
        for blocksize in (64, 1 << 20):
            value = hd.grep(url, pattern, blocksize=blocksize, locality=False).value
            assert (value["matches"], value["records"]) == (matches, records), (pattern, blocksize)
        assert grep_serial(url, pattern, chunk=100)["matches"] == matches


def test_read_text_lines_are_dask_read_text_lines(tmp_path):
    """Oracle: dask.bag.read_text, universal newlines by default; with a delimiter, dask's
    ``linedelimiter``."""
    import dask.bag as db

    rng = np.random.default_rng(6)
    pieces = ["a", "b\r\n", "\n", "\u00e9", "\r", "x y\n", "\u2028", "\x85", "\x0c", "z"]
    for k in range(3):
        text = "".join(pieces[i] for i in rng.integers(0, len(pieces), 2000))
        (tmp_path / f"f{k}.txt").write_bytes(text.encode())
    glob = str(tmp_path / "*.txt")
    stock = db.read_text(glob, encoding="utf-8").compute(scheduler="sync")
    stock_lf = db.read_text(glob, encoding="utf-8", linedelimiter="\n").compute(scheduler="sync")
    assert stock != stock_lf  # the CRs make the two differ
    for blocksize in (128, None):
        assert hd.read_text(f"file://{glob}", blocksize=blocksize).compute(scheduler="sync") == stock
        assert hd.read_text(f"file://{glob}", delimiter=b"\n", blocksize=blocksize).compute(scheduler="sync") == stock_lf
    (tmp_path / "bad.txt").write_bytes(b"ok\n\xff\n")
    with pytest.raises(UnicodeDecodeError):
        hd.read_text(f"file://{tmp_path}/bad.txt").compute(scheduler="sync")
    assert hd.read_text(f"file://{tmp_path}/bad.txt", errors="replace").compute(scheduler="sync") == \
        db.read_text(str(tmp_path / "bad.txt"), encoding="utf-8", errors="replace").compute(scheduler="sync")
    with pytest.raises(ValueError, match="delimiter"):
        hd.read_text(f"file://{glob}", delimiter=b"")


def test_wordcount_tokens_are_hadoop_wordcounts(tmp_path):
    """Oracle: Hadoop WordCount's map (hadoop-common's LineReader and Text, StringTokenizer) run
    by the JVM over the same file. bytes.split() also split at a vertical tab."""
    from collections import Counter

    rng = np.random.default_rng(3)
    pieces = [b"alpha", b"b\xc3\xa9ta", b"\xe2\x82\xac", b"x\x0by", b"a\xc2\xa0b", b"q\x1cr", b"\x00z",
              b" ", b"\t", b"\n", b"\r", b"\r\n", b"\f", b"\x0b", b"  \n\n"]
    data = b"".join(pieces[i] for i in rng.integers(0, len(pieces), 4000)) + b"tail"
    path = tmp_path / "words.txt"
    path.write_bytes(data)
    out = _run_java(tmp_path, _HADOOP_WORDCOUNT_MAP, "WordCountMap", str(path))
    hadoop = Counter({bytes.fromhex(word): int(n) for word, n in (line.split() for line in out.splitlines())})
    assert hadoop[b"x\x0by"] > 0  # the case that differed
    url = f"file://{path}"
    for blocksize in (97, 1 << 20):
        assert hd.wordcount(url, blocksize=blocksize, locality=False).value == hadoop


def test_grep_matches_are_java_regex_matches_per_line(tmp_path):
    """Oracle: Hadoop grep's map (LineReader lines, ``Text.toString``, ``java.util.regex``
    ``find()`` per line) run by the JVM. Found by an audit: the search ran over the partition's
    bytes, so a character class or ``.`` saw UTF-8 bytes, not characters (``[é]`` counted each é
    twice, ``a.b`` missed ``aéb``), ``\\s+`` ran across line ends (one match for two lines),
    ``\\A`` matched once per partition instead of once per line, and a non-empty match right
    after an empty one counted where Java moves on (``|a``). An encoded surrogate (``ED A0 80``)
    is one U+FFFD in Java, three in Python's decoder."""
    rng = np.random.default_rng(8)
    pieces = [b"a", b"b", b"x", b" ", b"\t", b"\xc3\xa9", b"\xe2\x82\xac", b"\xff", b"\n", b"\r\n", b"\n\n", b"ab",
              b"\xed\xa0\x80", b"\xed\xbf", b"\xe2\x82"]
    data = b"".join(pieces[i] for i in rng.integers(0, len(pieces), 3000)) + b" a\xc3\xa9"
    path = tmp_path / "u.txt"
    path.write_bytes(data)
    url = f"file://{path}"
    patterns = ["é+", "[é]", "a.b", "[^ ]+", r"\s+", r"\Ax", r"\W", r"\s$", "|a", "a*?", r"\u00e9", "(?<=b)a",
                "ab", "x*", ".", "\ufffd"]
    out = _run_java(tmp_path, _HADOOP_GREP_MAP, "GrepMap", str(path), *patterns).splitlines()
    for pattern, line in zip(patterns, out, strict=True):
        matches, records = map(int, line.split())
        for blocksize in (300, 1 << 20):
            value = hd.grep(url, pattern, blocksize=blocksize, locality=False).value
            assert (value["matches"], value["records"]) == (matches, records), (pattern, blocksize)
        assert grep_serial(url, pattern, chunk=100)["matches"] == matches, pattern


def test_validate_names_misorders_with_their_keys(tmp_path):
    """As TeraValidate's "misorder in FILE between KEY and KEY" (keys compared as unsigned
    bytes, as TeraSort's Text keys): the report gives the count of misordered neighbours and
    the first pair's keys whole (numpy's S10 values drop trailing NUL bytes), and the keys
    where one file ends after the next starts."""
    def record(key: bytes) -> bytes:
        return key + bytes(range(90))

    keys0 = [b"\x01" * 10, b"\x80abc\x00\x00\x00\x00\x00\x01", b"\x80abc\x00\x00\x00\x00\x00\x00", b"\xff" * 10,
             b"\xfe" * 10]
    keys1 = [b"\x80" + b"\x00" * 9, b"\x90" * 10]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "part-00000").write_bytes(b"".join(map(record, keys0)))
    (tmp_path / "out" / "part-00001").write_bytes(b"".join(map(record, keys1)))
    problems = hd.validate_sort(f"file://{tmp_path}/out").value["problems"]
    misorders = sum(b < a for a, b in zip(keys0, keys0[1:]))  # TeraValidate: key.compareTo(lastKey) < 0
    assert problems == [
        f"file://{tmp_path}/out/part-00000 is not sorted: {misorders} misorder(s), the first between records 1 and 2 "
        "(keys 80616263000000000001 and 80616263000000000000)",
        f"file://{tmp_path}/out/part-00000 ends after file://{tmp_path}/out/part-00001 starts (last key "
        "fefefefefefefefefefe, first key 80000000000000000000)"]


def test_grep_serial_reads_on_through_lines_longer_than_its_chunk(tmp_path):
    """Found by an audit: a chunk without a delimiter was counted as a record of its own (a
    500-byte line read in 100-byte chunks made 5 records), and for a delimiter that overlaps
    itself the last occurrence rfind finds is not always one of the records' (``b"a|||b"``
    is ``b"a||"``, ``b"|b"``). Oracle: Hadoop's LineReader run by the JVM; ``grep`` for ``||``."""
    data = b"ab" * 250 + b"\nx\n" + b"b" * 333 + b"\r" + b"a" * 150
    path = tmp_path / "long.txt"
    path.write_bytes(data)
    (line,) = _run_java(tmp_path, _HADOOP_GREP_MAP, "GrepMap", str(path), "ab|^").splitlines()
    matches, records = map(int, line.split())
    assert (matches, records) == (253, 4)
    serial = grep_serial(f"file://{path}", "ab|^", chunk=100)
    assert (serial["matches"], serial["records"]) == (matches, records)
    (tmp_path / "bars.txt").write_bytes(b"a|||b" * 40 + b"||||" * 30 + b"|b")
    url = f"file://{tmp_path}/bars.txt"
    partitioned = hd.grep(url, "b", delimiter=b"||", locality=False).value
    for chunk in (3, 4, 7, 100):
        assert grep_serial(url, "b", delimiter=b"||", chunk=chunk) == partitioned, chunk


def test_grep_non_boundary_matches_on_empty_lines_as_in_java(tmp_path):
    """Python's ``\\B`` never matches in an empty string, Java's does: an empty line searched on
    its own (a partition holding just ``\\n``, or the line-by-line search) counted no match."""
    path = tmp_path / "empty-lines.txt"
    path.write_bytes(b"\n\n\na b\n\nab\n\n")
    patterns = [r"\B", r"x|\B\B", r"\\B|\B"]
    out = _run_java(tmp_path, _HADOOP_GREP_MAP, "GrepMap", str(path), *patterns).splitlines()
    for pattern, line in zip(patterns, out, strict=True):
        matches, _ = map(int, line.split())
        for blocksize in (1, 4, 1 << 20):
            assert hd.grep(f"file://{path}", pattern, blocksize=blocksize, locality=False).value["matches"] == \
                matches, (pattern, blocksize)
        assert grep_serial(f"file://{path}", pattern, chunk=1)["matches"] == matches, pattern


def test_overwriting_an_output_directory_behind_a_link_writes_into_it(tmp_path):
    """overwrite=True emptied the output with rm, which raised EIO for a link to a directory
    (and, once rm unlinks links, would have moved the output beside the link's target)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "old").write_bytes(b"old")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep").write_bytes(b"keep")
    os.symlink("other", tmp_path / "real" / "inner")  # a link inside: unlinked, its target kept
    os.symlink("real", tmp_path / "out")
    hd.teragen(f"file://{tmp_path}/out", 10, files=1, overwrite=True)
    assert os.path.islink(tmp_path / "out")
    assert os.listdir(tmp_path / "real") == ["part-00000"]
    assert (tmp_path / "other" / "keep").read_bytes() == b"keep"


def test_metablocks_group_replicated_blocks_sharing_a_host_whatever_the_listed_order():
    # HDFS lists a block's replicas in its own order (shuffled among equally near DataNodes, as
    # `hdfs fsck -locations` shows them): blocks on {a, b} then {c, a} are both stored on a and
    # group, and the plan must not depend on which replica the NameNode listed first.
    import dataclasses

    from hpcbridge.fs.memory import MemoryFileSystem
    from hpcbridge.fs.types import BlockLocation

    class Replicated(MemoryFileSystem):
        """memory:// reporting four 10-byte blocks on two replicas each, in a given order."""

        capabilities = dataclasses.replace(MemoryFileSystem.capabilities, block_locations=True)
        orders = ()

        def _block_locations(self, path, info, start, length):
            layout = [("a", "b"), ("c", "a"), ("b", "c"), ("c", "b")]
            return [BlockLocation(i * 10, 10, self.orders[i % 2](hosts)) for i, hosts in enumerate(layout)]

    plans = set()
    for orders in [(tuple, tuple), (lambda h: h[::-1], tuple), (tuple, lambda h: h[::-1])]:
        fs = Replicated("replicated")
        fs.write_bytes("/f", b"x" * 40)
        fs.orders = orders
        parts = plan_partitions(fs, ["/f"], partition_size=30)
        plans.add(tuple((tuple((c.start, c.end) for c in p.chunks), p.hosts) for p in parts))
    assert plans == {((((0, 10), (10, 20)), (("a", 20), ("b", 10), ("c", 10))),
                      (((20, 30), (30, 40)), (("b", 20), ("c", 20))))}


def test_read_tasks_fuse_with_their_consumer_as_dask_read_text_does(tmp_path):
    """Read tasks placed on no worker are plain tasks, fused with a map as dask fuses
    ``dask.bag.read_text``'s, so each partition is freed by the thread that read it (a
    LocalReadTask is never fused: it left every 64 MiB partition to the scheduler's thread, and
    a worker on the other core then read into memory the VM had to fault back in)."""
    import dask.bag as db

    path = tmp_path / "lines.txt"
    path.write_bytes(b"a line\n" * 50_000)
    bag = hd.read_blocks(f"file://{path}", blocksize=100_000, locality=False)
    counted = bag.map_partitions(lambda blocks: [sum(map(len, blocks))])
    (optimized,) = dask.optimize(counted)
    assert not [k for k in optimized.__dask_graph__() if k[0] == bag.name]  # no read of its own

    stock = db.read_text(str(path), blocksize=100_000)
    (stock_optimized,) = dask.optimize(stock.map_partitions(len))
    assert not [k for k in stock_optimized.__dask_graph__() if k[0] == stock.name]  # the oracle fuses too
    assert sum(counted.compute(scheduler="threads")) == path.stat().st_size
    assert counted.npartitions == bag.npartitions == -(-path.stat().st_size // 100_000)
