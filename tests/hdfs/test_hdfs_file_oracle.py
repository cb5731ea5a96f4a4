"""File objects of ``hpcbridge.open`` on ``hdfs://`` (both drivers) and ``plfs+hdfs://`` against
Python's own ``open`` on a local file (the oracle), with tests/test_file_oracle.py's machinery.

The oracle is restricted to what HDFS can do. Where HDFS cannot (read-write modes, truncate,
seeking a writer away from its position), docs/hdfs.md promises ``io.UnsupportedOperation``
naming the URL, never other bytes; and HDFS names a path through a file ``FileNotFoundError``
(docs/hdfs.md, "a path through a file"), where ``open()`` says ``NotADirectoryError``.
"""

from __future__ import annotations

import builtins
import io
import os
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hpcbridge
from tests.test_file_oracle import _OPERATIONS, INITIAL, _apply, contents, outcome, place_both, run_both

pytestmark = pytest.mark.hdfs

BACKENDS = ("hdfs", "plfs+hdfs")


@pytest.fixture
def place(hdfs_cluster, hdfs_options, hdfs_root, tmp_path):
    """``make(backend, name, data)`` -> ``(url, oracle_path)``: the same file on the backend (with
    the driver under test) and as a plain local file; ``data=None`` leaves both missing."""

    def make(backend: str, name: str, data: bytes | None = INITIAL):
        oracle = str(tmp_path / name)
        url = f"{backend}://127.0.0.1:{hdfs_cluster.info.rpc_port}{hdfs_root}/{name}"
        return place_both(url, oracle, data, **hdfs_options)

    return make


def _open(url, mode, hdfs_options, **kwargs):
    return hpcbridge.open(url, mode, **kwargs, **hdfs_options)


# -- random operation sequences -------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["rb", "wb", "ab", "xb", "r", "w", "a"])
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(operations=st.lists(_OPERATIONS, max_size=12), buffering=st.sampled_from([0, -1, 5]))
def test_operation_sequences_match_the_builtin_open(place, hdfs_options, backend, mode, operations, buffering):
    """Every operation's value or exception class, and the bytes left, as open() on a local file.
    Truncate and seeks of writers are left out: HDFS cannot (tested below)."""
    text = "b" not in mode
    writing = mode[0] != "r"
    if text:
        buffering = -1
    operations = [o for o in operations if o[0] != "truncate" and not (writing and o[0] == "seek")]
    url, oracle = place(backend, "s", None if mode.startswith("x") else INITIAL)
    # PLFS writers are unbuffered (docs/plfs.md): compare them with the raw builtin file.
    oracle_buffering = 0 if backend.startswith("plfs") and writing and not text else buffering
    run_both(url, oracle, mode, operations, buffering, oracle_buffering, **hdfs_options)


# -- reads: EOF, seeks, lines, block boundaries ---------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("buffering", [0, -1, 7])
def test_reads_and_seeks_at_and_past_the_end(place, hdfs_options, backend, buffering):
    url, oracle = place(backend, "r")
    n = len(INITIAL)
    steps = [("read", -1), ("read", 0), ("read", 5), ("seek", 0, 0), ("read", n), ("read", 1), ("read", 0),
             ("read", -1), ("tell",), ("seek", n + 10, 0), ("tell",), ("read", 3), ("read", -1),
             ("readinto", 4), ("readline", -1), ("seek", -3, 2), ("read", 10), ("seek", -4, 1), ("read", 2),
             ("seek", 5, 2), ("tell",), ("read", 1), ("seek", 0, 0), ("readline", 3), ("readline", -1),
             ("readlines", -1), ("seek", 2, 0), ("readlines", 8), ("tell",), ("read", None), ("seek", 1, 0),
             ("readinto", 100), ("readinto", 0), ("readable",), ("writable",), ("seekable",)]
    with _open(url, "rb", hdfs_options, buffering=buffering) as f, builtins.open(oracle, "rb", buffering=buffering) as g:
        assert f.mode == g.mode == "rb"
        for step in steps:
            assert _apply(f, step, False) == _apply(g, step, False), step
        f.seek(0)
        g.seek(0)
        assert list(f) == list(g)
        # documented (docs/file-api.md, Errors): a negative position is ValueError (open(): EINVAL)
        for args in [(-1, 0), (-100, 1), (-100, 2)]:
            assert outcome(lambda: f.seek(*args)) == ("error", "ValueError")
            assert outcome(lambda: g.seek(*args)) == ("error", "OSError")
        assert f.tell() == g.tell()


@pytest.mark.parametrize("newline", [None, "", "\n", "\r", "\r\n"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_text_reads_as_open(place, hdfs_options, backend, newline):
    data = "héllo\r\nwörld\rmore\n\nend".encode()
    url, oracle = place(backend, "t", data)
    with (_open(url, "r", hdfs_options, newline=newline) as f,
          builtins.open(oracle, "r", encoding="utf-8", newline=newline) as g):
        assert f.mode == g.mode == "r"
        assert f.readline() == g.readline()
        assert f.read(3) == g.read(3)
        assert f.readlines() == g.readlines()
        assert f.read() == g.read() == ""
        f.seek(0)
        g.seek(0)
        assert list(f) == list(g)
    with _open(url, "r", hdfs_options, encoding="latin-1") as f, builtins.open(oracle, "r", encoding="latin-1") as g:
        assert f.read() == g.read()
    with _open(url, "r", hdfs_options, encoding="ascii") as f:
        assert outcome(f.read) == ("error", "ValueError")  # UnicodeDecodeError, as open()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("buffering", [0, -1, 4096, 100_000, "prefetch"])
def test_big_reads_across_block_boundaries(hdfs_cluster, hdfs_options, hdfs_root, tmp_path, backend, buffering):
    """Files of several 64 KiB blocks: reads and readinto of every size around the boundaries,
    also with whole-block prefetch; and the other driver reads the same bytes."""
    block = 64 << 10
    data = random.Random(7).randbytes(5 * block + 1234)
    oracle = tmp_path / "big"
    oracle.write_bytes(data)
    url = f"{backend}://127.0.0.1:{hdfs_cluster.info.rpc_port}{hdfs_root}/big"
    extra = {"prefetch": True, "readahead": 4096} if buffering == "prefetch" else {}
    fs, path = hpcbridge.url_to_fs(url, block_size=block, **extra, **hdfs_options)
    buffering = -1 if buffering == "prefetch" else buffering
    with fs.open(path, "wb") as w:
        for start in range(0, len(data), 50_000):  # several writes, one crossing each boundary
            w.write(data[start:start + 50_000])
    if backend == "hdfs":
        assert fs.info(path).block_size == block
    rng = random.Random(3)
    with fs.open(path, "rb", buffering=buffering) as f, builtins.open(oracle, "rb", buffering=buffering) as g:
        for _ in range(60):
            kind = rng.choice(["seek", "read", "readinto", "read1"])
            if kind == "seek":
                target = rng.choice([k * block + d for k in range(6) for d in (-1, 0, 1)] + [len(data) + 5])
                step = ("seek", max(target, 0), 0)
            else:
                step = (kind, rng.choice([1, 511, block - 1, block, block + 1, 3 * block, 2 << 20]))
            if kind == "read1" and buffering == 0:
                continue
            if kind == "read1":
                assert len(f.read1(step[1])) <= step[1]
                g.seek(f.tell())
                continue
            assert _apply(f, step, False) == _apply(g, step, False), step
        f.seek(0)
        assert f.read() == data
    assert fs.read_bytes(path) == data
    other = {**hdfs_options, "driver": {"native": "libhdfs", "libhdfs": "native"}[hdfs_options["driver"]]}
    with hpcbridge.open(url, "rb", **other) as f:
        f.seek(block - 3)
        assert f.read(7) == data[block - 3:block + 4]
        f.seek(0)
        assert f.read() == data


# -- writes ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("text", [False, True])
def test_writes_and_appends_after_close_as_open(place, hdfs_options, backend, text):
    """wb replaces, xb creates, ab appends (also to a missing file): what a reader sees after
    each close is what a local file holds."""
    url, oracle = place(backend, "w")
    chunks = [b"first\n", b"sec\r\nond", b"", b"\xc3\xa9\n"]
    for mode, missing in [("wb", False), ("ab", False), ("ab", False), ("wb", False), ("ab", True), ("xb", True)]:
        if missing:
            url, oracle = place(backend, f"w-{mode}", None)
        mode = mode.replace("b", "") if text else mode
        kwargs = {"newline": "\r\n", "encoding": "utf-8"} if text else {}
        with _open(url, mode, hdfs_options, **kwargs) as f, builtins.open(oracle, mode, **kwargs) as g:
            assert f.mode == g.mode
            assert (f.readable(), f.writable(), f.seekable()) == (g.readable(), g.writable(), g.seekable())
            for chunk in chunks:
                chunk = chunk.decode() if text else chunk
                assert f.write(chunk) == g.write(chunk)
                if not text:
                    assert f.tell() == g.tell()
            assert outcome(f.read) == outcome(g.read)
        assert contents(url, **hdfs_options) == builtins.open(oracle, "rb").read(), mode
        with _open(url, "rb", hdfs_options) as f:
            assert f.read() == builtins.open(oracle, "rb").read()


@pytest.mark.parametrize("mode", ["wb", "ab"])
def test_hdfs_writer_seeks_only_to_its_position(place, hdfs_options, mode):
    """docs/hdfs.md: positional writes point at PLFS (io.UnsupportedOperation naming the URL);
    seeks to the position itself answer it, as open() does, and no byte changes."""
    url, oracle = place("hdfs", "p")
    with _open(url, mode, hdfs_options) as f, builtins.open(oracle, mode) as g:
        f.write(b"abc")
        g.write(b"abc")
        assert f.seek(0, io.SEEK_CUR) == g.seek(0, io.SEEK_CUR) == f.tell() == g.tell()
        assert f.seek(0, io.SEEK_END) == g.seek(0, io.SEEK_END)
        assert f.seek(f.tell()) == g.tell()
        for args in [(0,), (-1, io.SEEK_END), (1, io.SEEK_CUR)]:
            with pytest.raises(io.UnsupportedOperation, match=url):
                f.seek(*args)
        with pytest.raises(io.UnsupportedOperation, match=url):
            f.truncate(0)
        with pytest.raises(io.UnsupportedOperation, match=url):
            f.pwrite(b"x", 0)
        f.write(b"d")
        g.write(b"d")
    assert contents(url, **hdfs_options) == builtins.open(oracle, "rb").read()


# -- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_open_errors_as_open(place, hdfs_options, backend):
    url, oracle = place(backend, "e")
    missing, missing_oracle = place(backend, "missing", None)
    fs, path = hpcbridge.url_to_fs(url, **hdfs_options)
    fs.mkdir(path + "-dir")
    os.mkdir(oracle + "-dir")
    cases = [(url, oracle, "xb"), (url, oracle, "x"), (missing, missing_oracle, "rb"), (missing, missing_oracle, "r"),
             (url + "-dir", oracle + "-dir", "rb"),
             (url + "-dir", oracle + "-dir", "r"), (url + "-dir", oracle + "-dir", "xb"),
             (url + "-dir", oracle + "-dir", "wb"), (url + "-dir", oracle + "-dir", "ab"),
             (missing + "/below", missing_oracle + "/below", "rb"),
             (url, oracle, "rw"), (url, oracle, "rbx"), (url, oracle, "rt+b"), (url, oracle, "q")]
    for u, o, mode in cases:
        got = outcome(lambda: _open(u, mode, hdfs_options).close())
        assert got == outcome(lambda: builtins.open(o, mode).close()), (u, mode)
        if got[0] == "error" and mode[0] in "rwxa" and got[1] != "ValueError":
            with pytest.raises(OSError) as info:
                _open(u, mode, hdfs_options)
            assert info.value.filename == u, (u, mode)
    assert fs.read_bytes(path) == INITIAL  # nothing refused touched the file
    # documented: a path through a file is missing on HDFS (docs/hdfs.md); PLFS says ENOTDIR, as open()
    below = "FileNotFoundError" if backend == "hdfs" else "NotADirectoryError"
    assert outcome(lambda: _open(url + "/below", "rb", hdfs_options)) == ("error", below)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["r+b", "w+b", "a+b", "r+", "w+", "a+"])
def test_read_write_modes_are_refused_and_leave_the_file(place, hdfs_options, backend, mode):
    """docs/hdfs.md: r+b (any read-write mode) is io.UnsupportedOperation naming the URL, before
    anything is opened: w+ must not empty the file."""
    url, _ = place(backend, "rw")
    with pytest.raises(io.UnsupportedOperation, match=re.escape(url)):
        _open(url, mode, hdfs_options)
    assert contents(url, **hdfs_options) == INITIAL


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["rb", "wb", "r", "w"])
@pytest.mark.parametrize("buffering", [0, -1])
def test_every_operation_on_a_closed_file_is_a_value_error(place, hdfs_options, backend, mode, buffering):
    if "b" not in mode and buffering == 0:
        return
    """As open(): "I/O operation on closed file" (ValueError) for every call but write() of a
    reader (io.UnsupportedOperation, as io.BufferedReader: HDFS's readahead reader said
    ValueError, and UnsupportedOperation for truncate). Left out, cosmetic: fileno()
    (io.UnsupportedOperation: no descriptor)."""
    url, oracle = place(backend, "c")
    # PLFS writers are unbuffered (docs/plfs.md): their oracle is FileIO.
    oracle_buffering = 0 if backend.startswith("plfs") and mode == "wb" else buffering
    f, g = _open(url, mode, hdfs_options, buffering=buffering), builtins.open(oracle, mode, buffering=oracle_buffering)
    f.close()
    g.close()
    f.close()  # closing twice is fine
    for name, args in [("read", (1,)), ("readline", ()), ("readlines", ()), ("write", ("x" if "b" not in mode else b"x",)),
                       ("seek", (0,)), ("tell", ()), ("truncate", (0,)), ("flush", ()), ("readable", ()),
                       ("writable", ()), ("seekable", ()), ("isatty", ()), ("__iter__", ()), ("__enter__", ()),
                       ] + ([("readinto", (bytearray(1),))] if "b" in mode else []):
        assert outcome(lambda: getattr(f, name)(*args)) == outcome(lambda: getattr(g, name)(*args)), name
