"""File objects of ``hpcbridge.open`` against Python's own ``open`` on a local file (the oracle).

The same operations run on a builtin file and on an hpcbridge file of each local backend
(``file://``, ``memory://``, ``plfs+file://``); return values, positions, exception types and
the bytes left in the file must agree. Differences documented as intended are left out:
negative seek positions and truncate sizes raise ``ValueError`` (docs/file-api.md, Errors), PLFS
handles are read-only or write-only, cannot truncate, and its writers are unbuffered
(docs/plfs.md), so their oracle is ``buffering=0``.
"""

from __future__ import annotations

import builtins
import io
import os
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hpcbridge

BACKENDS = ("file", "memory", "plfs")
INITIAL = b"line1\nline2\r\nline3\rlast"


@pytest.fixture
def place(tmp_path):
    """``make(backend, name, data)`` -> ``(url, oracle_path)``: the same file on the backend and
    as a plain local file; ``data=None`` leaves both missing."""
    (tmp_path / "oracle").mkdir()
    (tmp_path / "backend").mkdir()
    store = uuid.uuid4().hex

    def make(backend: str, name: str, data: bytes | None = INITIAL):
        oracle = str(tmp_path / "oracle" / name)
        url = {"file": f"file://{tmp_path}/backend/{name}",
               "memory": f"memory://{store}/{name}",
               "plfs": f"plfs+file://{tmp_path}/backend/{name}"}[backend]
        return place_both(url, oracle, data)

    return make


def place_both(url: str, oracle: str, data: bytes | None, **options) -> tuple[str, str]:
    """Make ``url`` and the local file ``oracle`` both hold ``data`` (both missing if None)."""
    fs, path = hpcbridge.url_to_fs(url, **options)
    if fs.exists(path):
        fs.rm(path, recursive=True)
    if os.path.exists(oracle):
        os.remove(oracle)
    if data is not None:
        with builtins.open(oracle, "wb") as f:
            f.write(data)
        fs.write_bytes(path, data)
    return url, oracle


def outcome(call):
    """What a call gave: ``("ok", value)`` or ``("error", the most telling builtin class)``."""
    try:
        value = call()
    except Exception as exc:
        kinds = (io.UnsupportedOperation, FileNotFoundError, FileExistsError, IsADirectoryError,
                 NotADirectoryError, ValueError, OSError, TypeError)
        return ("error", next((k.__name__ for k in kinds if isinstance(exc, k)), type(exc).__name__))
    return ("ok", bytes(value) if isinstance(value, (bytearray, memoryview)) else value)


def contents(url, **options) -> bytes:
    fs, path = hpcbridge.url_to_fs(url, **options)
    return fs.read_bytes(path)


# -- found by this comparison ---------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["file", "memory"])
@pytest.mark.parametrize("mode", ["ab", "a+b"])
def test_unbuffered_append_position_is_the_end_at_open(place, backend, mode):
    """open() puts an append handle at the end when it opens; a raw hpcbridge file found the end
    at its first use, so another writer growing the file in between moved it: tell() was wrong
    and a+b read the wrong bytes."""
    url, oracle = place(backend, "a.bin")
    ours, theirs = hpcbridge.open(url, mode, buffering=0), builtins.open(oracle, mode, buffering=0)
    with ours, theirs:
        for other in (hpcbridge.open(url, "r+b"), builtins.open(oracle, "r+b")):
            with other:  # another handle grows the file before the first tell()
                other.seek(0, io.SEEK_END)
                other.write(b"grown")
        assert ours.tell() == theirs.tell() == len(INITIAL)
        if "+" in mode:
            assert ours.read(3) == theirs.read(3) == b"gro"
        assert ours.write(b"!") == theirs.write(b"!")
        assert ours.tell() == theirs.tell()
    assert contents(url) == builtins.open(oracle, "rb").read()


@pytest.mark.parametrize("mode", ["ab", "a+b"])
def test_unbuffered_append_position_survives_truncate(place, mode):
    """truncate() does not move the position (ftruncate(2)): an append handle stays where it opened."""
    url, oracle = place("memory", "t.bin")
    ours, theirs = hpcbridge.open(url, mode, buffering=0), builtins.open(oracle, mode, buffering=0)
    with ours, theirs:
        assert outcome(lambda: ours.truncate(30)) == outcome(lambda: theirs.truncate(30))
        assert ours.tell() == theirs.tell() == len(INITIAL)
        if "+" in mode:
            assert ours.read(7) == theirs.read(7) == bytes(7)  # the zeros truncate added


@pytest.mark.parametrize("backend", ["file", "memory"])
@pytest.mark.parametrize("buffering", [0, -1])
def test_rename_and_remove_while_open(place, backend, buffering):
    """A handle keeps its file when the name goes (POSIX: the inode): writes buffered before a
    rename land in the renamed file, and a removed file stays readable and writable until
    closed. The memory backend looked its bytes up by name, so the close after a rename failed
    with FileNotFoundError and lost everything written."""
    url, oracle = place(backend, "r.bin", None)
    fs, path = hpcbridge.url_to_fs(url)
    with hpcbridge.open(url, "wb", buffering=buffering) as f, builtins.open(oracle, "wb", buffering=buffering) as g:
        for handle in (f, g):
            handle.write(b"abc")
        fs.rename(path, path + ".moved")
        os.rename(oracle, oracle + ".moved")
        for handle in (f, g):
            handle.write(b"def")
    assert fs.read_bytes(path + ".moved") == builtins.open(oracle + ".moved", "rb").read() == b"abcdef"
    assert fs.info(path + ".moved").mtime > 0
    f, g = hpcbridge.open(url + ".moved", "r+b", buffering=buffering), builtins.open(oracle + ".moved", "r+b")
    with f, g:
        fs.rm(path + ".moved")
        os.remove(oracle + ".moved")
        assert f.read() == g.read() == b"abcdef"
        assert f.write(b"!") == g.write(b"!")
        assert f.seek(0) == g.seek(0) == 0
        assert f.read() == g.read() == b"abcdef!"
    assert not fs.exists(path + ".moved")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["rb", "r"])
@pytest.mark.parametrize("below", ["x", "x/y"])
def test_open_below_a_file_is_not_a_directory(place, backend, mode, below):
    """open(2) of a path under a file fails with ENOTDIR; memory and PLFS said ENOENT."""
    url, oracle = place(backend, "f")
    ours = outcome(lambda: hpcbridge.open(f"{url}/{below}", mode).close())
    assert ours == outcome(lambda: builtins.open(f"{oracle}/{below}", mode).close()) == ("error", "NotADirectoryError")
    missing = outcome(lambda: hpcbridge.open(f"{url}-missing/{below}", mode).close())
    assert missing == outcome(lambda: builtins.open(f"{oracle}-missing/{below}", mode).close())


@pytest.mark.parametrize("backend", BACKENDS)
def test_mode_that_is_not_a_string(place, backend):
    url, oracle = place(backend, "m")
    assert outcome(lambda: hpcbridge.open(url, 5)) == outcome(lambda: builtins.open(oracle, 5)) == ("error", "TypeError")


_TEXT_ARGUMENTS = [{"encoding": "nope"}, {"encoding": "hex"}, {"encoding": 5}, {"encoding": "utf-8\0"},
                   {"errors": 5}, {"newline": "zz"}, {"newline": 5}, {"buffering": 0},
                   {"encoding": "locale"}, {"encoding": "latin-1", "newline": "\r\n"}]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["r", "w", "a", "x", "r+"])
@pytest.mark.parametrize("arguments", _TEXT_ARGUMENTS, ids=repr)
def test_text_arguments_raise_what_open_raises_naming_the_url(place, backend, mode, arguments):
    """An unknown encoding was codecs' LookupError naming neither the file nor the backend; an
    encoding, errors or newline that is not a str (TypeError, which open() raises before
    opening) had already emptied a file opened "w". Oracle: the builtin open's exception type.
    open() itself checks the encoding, newline and buffering=0 values only once the file is
    open, so it empties (or creates) the file before raising: a writing mode here checks them
    first and leaves the file as it was (docs/file-api.md, Errors)."""
    if backend == "plfs" and mode not in ("r", "w"):
        return  # read-only or write-only handles (docs/plfs.md)
    url, oracle = place(backend, "t.txt", None if mode == "x" else INITIAL)
    ours = outcome(lambda: hpcbridge.open(url, mode, **arguments).close())
    assert ours == outcome(lambda: builtins.open(oracle, mode, **arguments).close())
    fs, path = hpcbridge.url_to_fs(url)
    if ours[0] == "ok":
        assert contents(url) == builtins.open(oracle, "rb").read()
        return
    assert (contents(url) if fs.exists(path) else None) == (None if mode == "x" else INITIAL)
    if ours[1] == "LookupError":
        with pytest.raises(LookupError) as info:
            hpcbridge.open(url, mode, **arguments)
        assert fs.url(path) in str(info.value) and repr(arguments["encoding"]) in str(info.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_missing_file_with_an_unknown_encoding_is_not_found_as_in_open(place, backend):
    """A read-only open keeps open()'s order: the file is looked up before the encoding."""
    url, oracle = place(backend, "gone.txt", None)
    ours = outcome(lambda: hpcbridge.open(url, "r", encoding="nope"))
    assert ours == outcome(lambda: builtins.open(oracle, "r", encoding="nope")) == ("error", "FileNotFoundError")


# -- random operation sequences -------------------------------------------------------------------
_DATA = st.sampled_from([b"ab", b"x\n", b"\r\nq", b"hello\nworld\n", "é\n".encode(), b"zz\r"])
_OPERATIONS = st.one_of(
    st.tuples(st.just("read"), st.sampled_from([-1, 0, 1, 3, 7, 50, None])),
    st.tuples(st.just("readinto"), st.sampled_from([0, 1, 4, 30])),
    st.tuples(st.just("readline"), st.sampled_from([-1, 0, 1, 3, 10])),
    st.tuples(st.just("readlines"), st.sampled_from([-1, 0, 1, 5])),
    st.tuples(st.just("seek"), st.sampled_from([0, 1, 2, 5, 40]), st.sampled_from([0, 1, 2])),
    st.tuples(st.just("tell")),
    st.tuples(st.just("write"), _DATA),
    st.tuples(st.just("truncate"), st.sampled_from([None, 0, 2, 10, 30])),
    st.tuples(st.just("flush")),
    st.tuples(st.sampled_from(["readable", "writable", "seekable"])),
    st.tuples(st.just("close")),
)


def _apply(f, operation, text: bool):
    name, *args = operation
    if name == "readinto":
        if text:
            return ("skip",)
        buffer = bytearray(args[0])
        return outcome(lambda: (f.readinto(buffer), bytes(buffer)))
    if text and name == "write":
        args = [args[0].decode()]
    if text and name == "seek" and (args[1] != 0 or args[0] != 0):
        args = [0, args[1]]  # text files seek to 0 or to cookies from tell()
    if name == "tell" and text:
        return outcome(lambda: f.tell() >= 0)  # cookies, not byte positions
    return outcome(lambda: getattr(f, name)(*args))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["rb", "wb", "ab", "xb", "r+b", "w+b", "a+b", "r", "w", "a", "r+", "a+"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=st.lists(_OPERATIONS, max_size=12), buffering=st.sampled_from([0, -1, 5]))
def test_operation_sequences_match_the_builtin_open(place, backend, mode, operations, buffering):
    text = "b" not in mode
    if text or backend == "plfs" and mode != "rb":
        buffering = -1 if text or buffering != 0 else 0
    if backend == "plfs":
        if "+" in mode:
            return  # read-only or write-only handles (docs/plfs.md)
        operations = [o for o in operations if o[0] != "truncate"]  # capabilities.truncate is False
    url, oracle = place(backend, "s", None if mode.startswith("x") else INITIAL)
    # PLFS writers are unbuffered (docs/plfs.md): compare them with the raw builtin file.
    oracle_buffering = 0 if backend == "plfs" and not text and mode != "rb" else buffering
    run_both(url, oracle, mode, operations, buffering, oracle_buffering)


def run_both(url: str, oracle: str, mode: str, operations: list, buffering: int, oracle_buffering: int,
             **options) -> None:
    """Open ``url`` and the local ``oracle`` in ``mode``, apply ``operations`` to both and
    compare every outcome, then the files' bytes."""
    text = "b" not in mode
    ours = outcome(lambda: hpcbridge.open(url, mode, buffering=buffering, **options))
    theirs = outcome(lambda: builtins.open(oracle, mode, buffering=oracle_buffering))
    assert ours[0] == theirs[0]
    if ours[0] != "ok":
        return
    f, g = ours[1], theirs[1]
    with f, g:
        for operation in operations:
            got, expected = _apply(f, operation, text), _apply(g, operation, text)
            assert got == expected, (operation, operations)
    assert contents(url, **options) == builtins.open(oracle, "rb").read(), operations


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["rb", "wb"])
def test_every_operation_on_a_closed_unbuffered_file_is_a_value_error(place, backend, mode):
    """As FileIO: "I/O operation on closed file" (ValueError), also for truncate, which the
    raw files of backends that cannot truncate refused as unsupported even once closed."""
    url, oracle = place(backend, "c")
    f, g = hpcbridge.open(url, mode, buffering=0), builtins.open(oracle, mode, buffering=0)
    f.close()
    g.close()
    f.close()  # closing twice is fine
    for name, args in [("read", (1,)), ("readinto", (bytearray(1),)), ("readline", ()), ("readlines", ()),
                       ("write", (b"x",)), ("seek", (0,)), ("tell", ()), ("truncate", (0,)), ("flush", ()),
                       ("readable", ()), ("writable", ()), ("seekable", ()), ("isatty", ()), ("__iter__", ()),
                       ("__enter__", ())]:
        expected = outcome(lambda: getattr(g, name)(*args))
        assert outcome(lambda: getattr(f, name)(*args)) == expected == ("error", "ValueError"), name


@pytest.mark.skipif(not hasattr(os, "SEEK_DATA"), reason="no SEEK_DATA/SEEK_HOLE on this platform")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("buffering", [0, -1, "readahead"])
def test_seek_data_and_hole(place, backend, buffering):
    """os.SEEK_DATA/SEEK_HOLE as FileIO answers them on a file without holes: the offset itself
    (data), the end (hole), ENXIO at or past the end. hpcbridge's files refused the whence."""
    from hpcbridge.fs.file import OpenMode
    from hpcbridge.fs.readahead import ReadaheadReader

    url, oracle = place(backend, "h")
    for offset, whence in [(0, os.SEEK_DATA), (4, os.SEEK_DATA), (0, os.SEEK_HOLE), (7, os.SEEK_HOLE),
                           (len(INITIAL), os.SEEK_DATA), (len(INITIAL), os.SEEK_HOLE), (99, os.SEEK_DATA)]:
        if buffering == "readahead":  # HDFS's reader, over this backend's raw file
            fs, path = hpcbridge.url_to_fs(url)
            f = ReadaheadReader(fs._open_raw(path, OpenMode.parse("rb", url)), readahead=8)
        else:
            f = hpcbridge.open(url, "rb", buffering=buffering)
        with f, builtins.open(oracle, "rb", buffering=0) as g:
            expected = outcome(lambda: (g.seek(offset, whence), g.tell()))
            assert outcome(lambda: (f.seek(offset, whence), f.tell())) == expected, (offset, whence)


def test_hdfs_writer_seek_arguments_as_fileio():
    """An HDFS write handle reaches only its position; other arguments fail as a buffered
    builtin file's do, and as hpcbridge's other raw files (ValueError for a whence it does not
    know, TypeError for a float), rather than KeyError. On stubs: no cluster needed."""
    from hpcbridge.fs.file import OpenMode
    from hpcbridge.fs.hdfs import _HdfsWriteRaw

    class Writer:
        def close(self):
            pass

    class StubFs:
        def url(self, path):
            return "hdfs://nn:9820" + path

        def _call(self, name, path, function, *args, io_call=False):
            return function(*args)

    with _HdfsWriteRaw(StubFs(), "/w", Writer(), OpenMode.parse("wb", "hdfs://nn:9820/w"), start=5) as raw:
        with builtins.open(os.devnull, "wb") as oracle:
            for offset, whence in [(0, 7), (1.0, 0), (0, 1.0)]:
                assert outcome(lambda: raw.seek(offset, whence)) == outcome(lambda: oracle.seek(offset, whence))
        assert raw.seek(0, io.SEEK_END) == raw.seek(5) == raw.seek(0, io.SEEK_CUR) == 5
        assert outcome(lambda: raw.seek(0)) == ("error", "UnsupportedOperation")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["xb", "x", "wb", "ab"])
def test_exclusive_create_of_a_directory_exists(place, backend, mode):
    """open(2) with O_CREAT|O_EXCL fails with EEXIST on any existing name, a directory included;
    memory and PLFS said EISDIR (right for w and a, which still say it)."""
    url, oracle = place(backend, "d", None)
    fs, path = hpcbridge.url_to_fs(url)
    fs.mkdir(path)
    os.mkdir(oracle)
    assert outcome(lambda: hpcbridge.open(url, mode)) == outcome(lambda: builtins.open(oracle, mode))
