"""The conformance suite every hpcbridge backend must pass.

A backend's test module subclasses :class:`FileSystemConformance` and provides three pytest
fixtures:

``fs``
    the :class:`~hpcbridge.fs.base.FileSystem` under test;
``root``
    an empty directory path on it, private to the test;
``backdoor``
    a :class:`Backdoor` that reads and writes the same storage *without* going through ``fs``
    (builtin ``open`` for POSIX, the store for memory, the Java CLI or WebHDFS for HDFS), so a
    test does not only check the backend against itself.

Expectations switch on ``fs.capabilities``: for example, where ``positional_write`` is false
``pwrite`` must raise ``io.UnsupportedOperation`` rather than work.
"""

from __future__ import annotations

import abc
import errno
import io
import pickle
import re
import stat
import threading
import time

import numpy as np
import pytest

from ..errors import InvalidURLError
from ..fs.types import BlockLocation, FileInfo

__all__ = ["FileSystemConformance", "Backdoor"]


class Backdoor(abc.ABC):
    """Reads and writes a backend's storage without using the backend under test."""

    @abc.abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Create or replace the file at ``path`` with ``data``."""

    @abc.abstractmethod
    def read(self, path: str) -> bytes:
        """The content of the file at ``path``."""

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """Whether ``path`` exists."""


def _payload(size: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


class FileSystemConformance:
    """Behaviour every backend shares; see the module docstring for the fixtures it needs."""

    # -- reading and writing ---------------------------------------------------------------------
    @pytest.mark.parametrize("size", [0, 1, 4095, (1 << 20) + 7, 3 << 20])
    def test_write_then_read_roundtrip(self, fs, root, backdoor, size):
        data = _payload(size, size)
        path = f"{root}/roundtrip.bin"
        with fs.open(path, "wb") as f:
            assert f.write(data) == size
        assert backdoor.read(path) == data
        with fs.open(path, "rb") as f:
            assert f.read() == data
        assert fs.info(path).size == size

    def test_read_what_the_backdoor_wrote(self, fs, root, backdoor):
        data = _payload(100_000, 1)
        backdoor.write(f"{root}/door.bin", data)
        assert fs.read_bytes(f"{root}/door.bin") == data
        assert fs.pread(f"{root}/door.bin", offset=99_990, length=100) == data[99_990:]

    def test_readinto_fills_a_numpy_array_in_place(self, fs, root):
        data = _payload(3 << 20, 2)
        fs.write_bytes(f"{root}/a.bin", data)
        target = np.zeros(len(data), dtype=np.uint8)
        with fs.open(f"{root}/a.bin", "rb") as f:
            assert f.readinto(target) == len(data)
            assert f.preadinto(memoryview(target)[:10], 5) == 10
        assert target.tobytes()[10:] == data[10:]
        assert target[:10].tobytes() == data[5:15]

    def test_sequential_small_reads_and_seek(self, fs, root):
        data = _payload(50_000, 3)
        fs.write_bytes(f"{root}/s.bin", data)
        with fs.open(f"{root}/s.bin", "rb") as f:
            chunks = []
            while chunk := f.read(4096):
                chunks.append(chunk)
            assert b"".join(chunks) == data
            assert f.seek(-10, io.SEEK_END) == len(data) - 10
            assert f.read() == data[-10:]
            f.seek(100)
            assert f.tell() == 100
            assert f.read(5) == data[100:105]

    def test_pread_does_not_move_the_position_and_is_short_at_eof(self, fs, root):
        data = _payload(1000, 4)
        fs.write_bytes(f"{root}/p.bin", data)
        with fs.open(f"{root}/p.bin", "rb") as f:
            f.read(10)
            assert f.pread(20, 500) == data[500:520]
            assert f.tell() == 10
            assert f.pread(100, 950) == data[950:]
            assert f.pread(10, 5000) == b""

    def test_preadvinto_scatters_consecutive_bytes(self, fs, root):
        data = _payload(100_000, 9)
        fs.write_bytes(f"{root}/v.bin", data)
        for buffering in (0, -1):
            with fs.open(f"{root}/v.bin", "rb", buffering=buffering) as f:
                parts = [bytearray(7), bytearray(0), bytearray(40_000), memoryview(bytearray(3000))]
                assert f.preadvinto(parts, 1234) == 43_007
                assert b"".join(bytes(p) for p in parts) == data[1234:1234 + 43_007]
                tail = [bytearray(10), bytearray(10)]  # short at end of file: filled in turn
                assert f.preadvinto(tail, 99_985) == 15
                assert bytes(tail[0]) == data[99_985:99_995] and bytes(tail[1][:5]) == data[99_995:]
                assert f.preadvinto([bytearray(4)], 200_000) == 0
                with pytest.raises(TypeError):
                    f.preadvinto([b"immutable"], 0)

    def test_map_range_where_memory_map(self, fs, root, backdoor):
        data = _payload(300_000, 11)
        path = f"{root}/mapped.bin"
        fs.write_bytes(path, data)
        for buffering in (0, -1):
            with fs.open(path, "rb", buffering=buffering) as f:
                if not fs.capabilities.memory_map:
                    with pytest.raises(io.UnsupportedOperation, match=re.escape(fs.url(path))):
                        f.map_range(0, 10)
                    continue
                view = f.map_range(70_001, 200_000)  # not page-aligned on purpose
                assert len(view) == 200_000 and not view.readonly
                assert bytes(view) == data[70_001:270_001]
                view[:3] = b"xyz"  # copy-on-write: this process's copy changes, the file does not
                assert bytes(view[:3]) == b"xyz" and backdoor.read(path) == data
                assert bytes(f.map_range(299_990, 10)) == data[-10:] and len(f.map_range(5, 0)) == 0
                with pytest.raises(ValueError, match=re.escape(fs.url(path))):
                    f.map_range(299_990, 11)  # past the end
                with pytest.raises(ValueError, match=re.escape(fs.url(path))):
                    f.map_range(-1, 10)
        if fs.capabilities.memory_map:
            with fs.open(f"{root}/write-only.bin", "wb") as f:
                with pytest.raises(io.UnsupportedOperation, match="write-only"):
                    f.map_range(0, 0)

    def test_pwrite_at_offsets_leaves_zero_holes(self, fs, root, backdoor):
        path = f"{root}/holes.bin"
        if not fs.capabilities.positional_write:
            with pytest.raises(io.UnsupportedOperation, match="pwrite|positional"):
                fs.pwrite(path, b"abc", 10)
            return
        assert fs.pwrite(path, b"abc", 10) == 3
        assert fs.pwrite(path, b"xy", 2) == 2
        assert backdoor.read(path) == b"\0\0xy" + b"\0" * 6 + b"abc"
        if not fs.capabilities.read_write:
            return
        with fs.open(path, "r+b") as f:
            f.read(2)
            f.pwrite(b"Z", 0)
            assert f.read(2) == b"xy"  # position unchanged by pwrite
            assert f.pread(1, 0) == b"Z"

    def test_pwrite_through_handle_drops_stale_read_buffer(self, fs, root):
        if not (fs.capabilities.positional_write and fs.capabilities.read_write):
            pytest.skip(f"{fs.backend_name}: no positional write on read-write handles")
        fs.write_bytes(f"{root}/r.bin", b"0123456789")
        with fs.open(f"{root}/r.bin", "r+b") as f:
            assert f.read(2) == b"01"  # fills the read buffer with the whole file
            f.pwrite(b"AB", 2)
            assert f.read(2) == b"AB"

    def test_append_mode(self, fs, root):
        path = f"{root}/log.txt"
        fs.write_bytes(path, b"one\n")
        if not fs.capabilities.append:
            with pytest.raises(io.UnsupportedOperation):
                fs.open(path, "ab")
            return
        with fs.open(path, "ab") as f:
            f.write(b"two\n")
            with pytest.raises(io.UnsupportedOperation, match="append"):
                f.pwrite(b"x", 0)
        assert fs.read_bytes(path) == b"one\ntwo\n"

    def test_append_modes_start_at_the_end(self, fs, root):
        """As open(): the position is the end at open ("a+b" read and truncate() start there)."""
        path = f"{root}/a.bin"
        fs.write_bytes(path, b"0123456789")
        if not fs.capabilities.append:
            return
        with fs.open(path, "ab") as f:
            assert f.tell() == 10
            f.write(b"A")
            assert f.tell() == 11
        if fs.capabilities.read_write:
            with fs.open(path, "a+b") as f:
                assert f.tell() == 11 and f.read() == b""
                f.write(b"B")
                if fs.capabilities.truncate:
                    assert f.truncate() == 12  # at the position: nothing lost
            with fs.open(path, "a+") as f:
                assert f.tell() == 12 and f.read() == ""
        assert fs.read_bytes(path) == (b"0123456789AB" if fs.capabilities.read_write else b"0123456789A")

    def test_exclusive_create(self, fs, root):
        path = f"{root}/x.bin"
        with fs.open(path, "xb") as f:
            f.write(b"1")
        with pytest.raises(FileExistsError, match=re.escape(fs.url(path))):
            fs.open(path, "xb")

    def test_write_mode_truncates(self, fs, root):
        path = f"{root}/t.bin"
        fs.write_bytes(path, b"long content")
        fs.write_bytes(path, b"short")
        assert fs.read_bytes(path) == b"short"

    def test_read_write_mode(self, fs, root):
        path = f"{root}/rw.bin"
        fs.write_bytes(path, b"hello world")
        if not fs.capabilities.read_write:
            with pytest.raises(io.UnsupportedOperation):
                fs.open(path, "r+b")
            return
        with fs.open(path, "r+b") as f:
            f.seek(6)
            f.write(b"WORLD")
            f.seek(0)
            assert f.read() == b"hello WORLD"

    def test_text_mode(self, fs, root):
        path = f"{root}/t.txt"
        with fs.open(path, "w") as f:
            f.write("grüße\nzwei\n")
        with fs.open(path, "r") as f:
            assert f.readlines() == ["grüße\n", "zwei\n"]

    def test_unbuffered_open_returns_raw_file(self, fs, root):
        fs.write_bytes(f"{root}/u.bin", b"abcdef")
        with fs.open(f"{root}/u.bin", "rb", buffering=0) as raw:
            buf = bytearray(4)
            assert raw.readinto(buf) == 4 and bytes(buf) == b"abcd"
            assert raw.pread(2, 4) == b"ef"

    def test_unbuffered_read_of_none_or_minus_one_reads_to_the_end(self, fs, root):
        fs.write_bytes(f"{root}/u.bin", b"abcdef")
        for size in (None, -1):
            with fs.open(f"{root}/u.bin", "rb", buffering=0) as raw:
                raw.seek(2)
                assert raw.read(size) == b"cdef" and raw.read(size) == b""

    def test_readline_limits_are_exact_across_buffer_edges(self, fs, root):
        data = bytes(_payload(3 * 4096 + 100, 11)).replace(b"\n", b"-")
        data = b"\n".join(data[i:i + 1000] for i in range(0, len(data), 1000))  # lines crossing every edge
        fs.write_bytes(f"{root}/lines.bin", data)
        oracle = io.BytesIO(data)
        with fs.open(f"{root}/lines.bin", "rb", buffering=4096) as f:
            for limit in [7, 1000, 1001, 4096, -1, 3, None] * 4:
                assert f.readline(limit) == oracle.readline(limit)
                assert f.tell() == oracle.tell()

    def test_line_buffering_in_text_mode(self, fs, root):
        with fs.open(f"{root}/l.txt", "w", buffering=1) as f:
            assert f.line_buffering
        with fs.open(f"{root}/l.txt", "w") as f:
            assert not f.line_buffering

    def test_nothing_is_made_inside_a_file(self, fs, root):
        """A regular file is no directory (PLFS: its container is one, on the backing store)."""
        fs.write_bytes(f"{root}/plain", b"x")
        with pytest.raises(NotADirectoryError):
            fs.open(f"{root}/plain/x", "wb")
        with pytest.raises(NotADirectoryError):
            fs.mkdir(f"{root}/plain/sub")
        with pytest.raises(NotADirectoryError):
            fs.mkdir(f"{root}/plain/sub/deeper", parents=True)
        assert not fs.exists(f"{root}/plain/x") and fs.read_bytes(f"{root}/plain") == b"x"

    def test_sync_after_write(self, fs, root):
        with fs.open(f"{root}/durable.bin", "wb") as f:
            f.write(b"data")
            f.sync()
        assert fs.read_bytes(f"{root}/durable.bin") == b"data"

    def test_read_ranges(self, fs, root):
        data = _payload(10_000, 5)
        fs.write_bytes(f"{root}/rr.bin", data)
        assert fs.read_ranges(f"{root}/rr.bin", [(0, 10), (9_995, 10), (500, 0)]) == [
            data[:10], data[9_995:], b""]

    def test_concurrent_writers_on_disjoint_ranges(self, fs, root):
        if not fs.capabilities.concurrent_writers or not fs.capabilities.positional_write:
            pytest.skip(f"{fs.backend_name}: one writer per file")
        path = f"{root}/n1.bin"
        piece, writers = 64 << 10, 4
        fs.write_bytes(path, b"")

        def write(rank):
            for i in range(8):
                fs.pwrite(path, bytes([rank]) * piece, (i * writers + rank) * piece)

        threads = [threading.Thread(target=write, args=(r,)) for r in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        data = np.frombuffer(fs.read_bytes(path), dtype=np.uint8).reshape(-1, piece)
        assert (data == (np.arange(len(data)) % writers)[:, None]).all()

    # -- metadata and namespace ----------------------------------------------------------------
    def test_info_of_file_and_directory(self, fs, root):
        before = time.time()
        fs.write_bytes(f"{root}/f.bin", b"12345")
        info = fs.info(f"{root}/f.bin")
        assert isinstance(info, FileInfo)
        assert (info.type, info.size, info.is_file, info.is_dir) == ("file", 5, True, False)
        assert info.path == f"{root}/f.bin" and info.url == fs.url(f"{root}/f.bin")
        assert before - 5 <= info.mtime <= time.time() + 5
        assert stat.S_ISREG(info.mode)
        assert info.replication >= 1 and info.block_size > 0
        d = fs.info(root)
        assert d.is_dir and stat.S_ISDIR(d.mode)

    def test_info_accepts_full_urls(self, fs, root):
        fs.write_bytes(f"{root}/u.bin", b"x")
        assert fs.info(fs.url(f"{root}/u.bin")).size == 1

    def test_ls_sorted_names_and_details(self, fs, root):
        for name in ("b.txt", "a.txt"):
            fs.write_bytes(f"{root}/{name}", b"x")
        fs.mkdir(f"{root}/sub")
        assert fs.ls(root) == [f"{root}/a.txt", f"{root}/b.txt", f"{root}/sub"]
        details = fs.ls(root, detail=True)
        assert [d.type for d in details] == ["file", "file", "directory"]
        assert fs.ls(f"{root}/a.txt") == [f"{root}/a.txt"]
        assert sorted(e.path for e in fs.iterdir(root)) == fs.ls(root)

    def test_walk_and_find(self, fs, root):
        fs.mkdir(f"{root}/a/b", parents=True)
        fs.write_bytes(f"{root}/a/1", b"")
        fs.write_bytes(f"{root}/a/b/2", b"")
        assert list(fs.walk(root)) == [(root, ["a"], []), (f"{root}/a", ["b"], ["1"]),
                                       (f"{root}/a/b", [], ["2"])]
        assert fs.find(root) == [f"{root}/a/1", f"{root}/a/b/2"]

    def test_mkdir_semantics(self, fs, root):
        fs.mkdir(f"{root}/d")
        assert fs.isdir(f"{root}/d") and not fs.isfile(f"{root}/d")
        with pytest.raises(FileExistsError):
            fs.mkdir(f"{root}/d")
        fs.mkdir(f"{root}/d", exist_ok=True)
        with pytest.raises(FileNotFoundError, match="missing"):
            fs.mkdir(f"{root}/missing/child")
        fs.mkdir(f"{root}/p/q/r", parents=True)
        assert fs.isdir(f"{root}/p/q/r")
        fs.write_bytes(f"{root}/file", b"")
        with pytest.raises(FileExistsError):
            fs.mkdir(f"{root}/file", exist_ok=True)

    def test_rm_semantics(self, fs, root, backdoor):
        fs.write_bytes(f"{root}/f", b"x")
        fs.rm(f"{root}/f")
        assert not fs.exists(f"{root}/f") and not backdoor.exists(f"{root}/f")
        with pytest.raises(FileNotFoundError):
            fs.rm(f"{root}/f")
        fs.mkdir(f"{root}/d/e", parents=True)
        fs.write_bytes(f"{root}/d/e/f", b"x")
        with pytest.raises(IsADirectoryError, match="recursive"):
            fs.rm(f"{root}/d")
        with pytest.raises(OSError) as excinfo:
            fs.rmdir(f"{root}/d")
        assert excinfo.value.errno == errno.ENOTEMPTY
        fs.rm(f"{root}/d", recursive=True)
        assert not fs.exists(f"{root}/d")

    def test_rename_file_replaces_destination(self, fs, root):
        fs.write_bytes(f"{root}/a", b"A")
        fs.write_bytes(f"{root}/b", b"B")
        if fs.capabilities.rename_replaces:
            fs.rename(f"{root}/a", f"{root}/b")
            assert fs.read_bytes(f"{root}/b") == b"A" and not fs.exists(f"{root}/a")
        else:
            with pytest.raises(FileExistsError):
                fs.rename(f"{root}/a", f"{root}/b")

    def test_rename_directory_and_errors(self, fs, root):
        fs.mkdir(f"{root}/d")
        fs.write_bytes(f"{root}/d/f", b"1")
        fs.rename(f"{root}/d", f"{root}/e")
        assert fs.read_bytes(f"{root}/e/f") == b"1" and not fs.exists(f"{root}/d")
        with pytest.raises(FileNotFoundError):
            fs.rename(f"{root}/nope", f"{root}/x")
        with pytest.raises(OSError):
            fs.rename(f"{root}/e", f"{root}/e/inside")
        fs.mkdir(f"{root}/full")
        fs.write_bytes(f"{root}/full/x", b"")
        with pytest.raises(OSError):
            fs.rename(f"{root}/e", f"{root}/full")
        fs.rename(f"{root}/e", f"{root}/e")  # same path: no-op
        assert fs.isdir(f"{root}/e")

    def test_exists_isdir_isfile(self, fs, root):
        fs.write_bytes(f"{root}/f", b"")
        assert fs.exists(f"{root}/f") and fs.isfile(f"{root}/f") and not fs.isdir(f"{root}/f")
        assert not fs.exists(f"{root}/nope") and not fs.isdir(f"{root}/nope")
        assert not fs.exists(f"{root}/f/child")

    # -- block locations -----------------------------------------------------------------------
    def test_block_locations_cover_the_range_exactly(self, fs, root):
        size = 3 * fs.info(root).block_size // 2 if fs.info(root).block_size <= (8 << 20) else 5_000_000
        size = max(size, 1_000_000)
        fs.write_bytes(f"{root}/big.bin", bytes(size))
        blocks = fs.block_locations(f"{root}/big.bin")
        assert blocks and all(isinstance(b, BlockLocation) for b in blocks)
        assert blocks[0].offset == 0 and blocks[-1].end == size
        assert all(a.end == b.offset for a, b in zip(blocks, blocks[1:]))
        assert all(b.length > 0 for b in blocks)
        if fs.capabilities.block_locations:
            assert all(b.hosts or b.targets for b in blocks)
        part = fs.block_locations(f"{root}/big.bin", 1000, 2000)
        assert part[0].offset == 1000 and part[-1].end == 3000
        assert fs.block_locations(f"{root}/big.bin", size + 10) == []
        assert fs.block_locations(f"{root}/big.bin", 0, 0) == []

    def test_block_locations_errors(self, fs, root):
        fs.write_bytes(f"{root}/f", b"x")
        with pytest.raises(ValueError, match="negative start"):
            fs.block_locations(f"{root}/f", -1)
        with pytest.raises(ValueError, match="negative length"):
            fs.block_locations(f"{root}/f", 0, -5)
        with pytest.raises(IsADirectoryError):
            fs.block_locations(root)
        with pytest.raises(FileNotFoundError):
            fs.block_locations(f"{root}/missing")

    # -- errors name the URL -------------------------------------------------------------------
    def test_missing_file_error_names_url_and_backend(self, fs, root):
        url = fs.url(f"{root}/missing.bin")
        with pytest.raises(FileNotFoundError) as excinfo:
            fs.open(f"{root}/missing.bin", "rb")
        assert url in str(excinfo.value) and fs.backend_name in str(excinfo.value)
        with pytest.raises(FileNotFoundError, match="missing.bin"):
            fs.info(f"{root}/missing.bin")
        with pytest.raises(FileNotFoundError, match="missing"):
            fs.ls(f"{root}/missing")

    def test_directory_opened_as_file(self, fs, root):
        for mode in ("rb", "wb"):
            with pytest.raises(IsADirectoryError, match=re.escape(fs.url(root))):
                fs.open(root, mode)

    def test_wrong_direction_on_handles(self, fs, root):
        path = f"{root}/h.bin"
        url = fs.url(path)
        with fs.open(path, "wb") as f:
            with pytest.raises(io.UnsupportedOperation, match="write-only"):
                f.read()
            with pytest.raises(io.UnsupportedOperation, match="write-only"):
                f.pread(1, 0)
        with fs.open(path, "rb") as f:
            with pytest.raises(io.UnsupportedOperation, match=f"{re.escape(url)}.*read-only"):
                f.write(b"x")
            with pytest.raises(io.UnsupportedOperation, match="read-only"):
                f.pwrite(b"x", 0)
        with fs.open(path, "rb", buffering=0) as raw:
            with pytest.raises(io.UnsupportedOperation):
                raw.write(b"x")

    def test_negative_offsets_and_lengths(self, fs, root):
        path = f"{root}/n.bin"
        fs.write_bytes(path, b"abc")
        with pytest.raises(ValueError, match="negative offset"):
            fs.pread(path, offset=-1, length=1)
        with pytest.raises(ValueError, match="negative length"):
            fs.pread(path, offset=0, length=-1)
        with pytest.raises(ValueError, match="negative offset"):
            fs.pwrite(path, b"x", -3)
        with fs.open(path, "rb") as f:
            with pytest.raises(ValueError, match="negative offset"):
                f.pread(1, -2)
            with pytest.raises(ValueError, match="negative size"):
                f.pread(-1, 0)

    def test_offsets_past_2_63_are_refused_naming_the_url(self, fs, root):
        """Every byte an access touches must have an offset <= 2**63-1 (off_t, Java's long)."""
        path = f"{root}/big.bin"
        fs.write_bytes(path, b"abc")
        url = re.escape(fs.url(path))
        for offset in (2**63, 2**64, 2**64 + 5):
            with pytest.raises(ValueError, match=f"past the largest file offset.*{url}"):
                fs.pread(path, offset=offset, length=1)
            if fs.capabilities.positional_write:
                with pytest.raises(ValueError, match=f"past the largest file offset.*{url}"):
                    fs.pwrite(path, b"x", offset)
        with pytest.raises(ValueError, match=f"end past the largest file offset.*{url}"):
            fs.pread(path, offset=2**63 - 1, length=2)
        with fs.open(path, "rb") as f, fs.open(path, "rb", buffering=0) as raw:
            for handle in (f, raw):
                with pytest.raises(ValueError, match=f"past the largest file offset.*{url}"):
                    handle.pread(1, 2**63)
                with pytest.raises(ValueError, match=f"past the largest file offset.*{url}"):
                    handle.preadinto(bytearray(2), 2**63 - 1)
            with pytest.raises(ValueError, match="past the largest file offset"):
                raw.seek(2**63)
            assert f.pread(1, 2**63 - 2) == b""  # addressable, past the end: nothing

    def test_bad_buffers_are_type_errors_naming_the_url(self, fs, root):
        """The same exception type and a message naming the URL on every backend, buffered or
        raw handle: reads into immutable or non-buffers, writes of non-buffers, float offsets."""
        path = f"{root}/buffers.bin"
        fs.write_bytes(path, b"abcdef")
        url = re.escape(fs.url(path))
        with fs.open(path, "rb") as f, fs.open(path, "rb", buffering=0) as raw:
            for handle in (f, raw):
                for bad in (b"xyz", "text", 42):
                    with pytest.raises(TypeError, match=url):
                        handle.preadinto(bad, 0)
                with pytest.raises(TypeError, match="must be an int"):
                    handle.pread(2, 1.0)
                with pytest.raises(ValueError, match=f"negative offset.*{url}"):
                    handle.preadinto(bytearray(2), -1)
                view = np.zeros(3, dtype=np.uint16)  # any writable buffer works, whatever its format
                assert handle.preadinto(view, 0) == 6 and view.tobytes() == b"abcdef"
        with fs.open(f"{root}/w.bin", "wb") as f, fs.open(f"{root}/w2.bin", "wb", buffering=0) as raw:
            for handle in (f, raw):
                for bad in ("text", 42, None):
                    with pytest.raises(TypeError):
                        handle.write(bad)
        with pytest.raises(TypeError, match=url):
            fs.pwrite(path, "text", 0)

    def test_bad_seeks_name_the_url(self, fs, root):
        path = f"{root}/seek.bin"
        fs.write_bytes(path, b"abc")
        url = re.escape(fs.url(path))
        with fs.open(path, "rb") as f, fs.open(path, "rb", buffering=0) as raw:
            for handle in (f, raw):
                with pytest.raises(ValueError, match=f"negative seek position.*{url}"):
                    handle.seek(-5)
                with pytest.raises(ValueError, match=f"negative seek position.*{url}"):
                    handle.seek(-10, io.SEEK_END)
                with pytest.raises(ValueError, match="whence"):
                    handle.seek(0, 7)

    def test_bad_open_arguments_leave_the_file_alone(self, fs, root):
        """As open(): arguments are checked before the file is opened; a truncating open with a
        bad ``buffering`` emptied the file, then failed."""
        path = f"{root}/precious.bin"
        fs.write_bytes(path, b"precious data")
        for mode in ("wb", "w"):
            for buffering in (1.5, "8", None):
                with pytest.raises(TypeError):
                    fs.open(path, mode, buffering=buffering)
        for name in ("encoding", "errors", "newline"):
            with pytest.raises(ValueError, match=f"binary mode doesn't take an? {name} argument"):
                fs.open(path, "wb", **{name: "utf-8" if name == "encoding" else "strict" if name == "errors" else ""})
        assert fs.read_bytes(path) == b"precious data"
        with fs.open(path, "rb", buffering=-2) as f:  # any negative size is the default, as open()
            assert f.read() == b"precious data"

    def test_seek_takes_integers_as_io_does(self, fs, root):
        """numpy integers are integers (the next read failed); floats are refused (tell gave 1.5)."""
        import numpy as np

        path = f"{root}/seek-int.bin"
        fs.write_bytes(path, b"0123456789")
        with fs.open(path, "rb") as f, fs.open(path, "rb", buffering=0) as raw:
            for handle in (f, raw):
                assert handle.seek(np.int64(3)) == 3 and handle.read(2) == b"34"
                with pytest.raises(TypeError):
                    handle.seek(1.5)
                assert handle.tell() == 5
            with pytest.raises(ValueError):  # as BufferedReader
                f.read(-3)
            with pytest.raises(TypeError):
                f.readline(3.0)

    def test_text_files_have_their_mode(self, fs, root):
        path = f"{root}/mode.txt"
        with fs.open(path, "w") as f:
            assert f.mode == "w"
            f.write("x")
        with fs.open(path, "r") as f:
            assert f.mode == "r"

    def test_closed_handles_refuse_every_call(self, fs, root):
        path = f"{root}/closed.bin"
        fs.write_bytes(path, b"0123456789")
        for mode in ("rb", "wb"):
            for buffering in (-1, 0):
                f = fs.open(path, mode, buffering=buffering)
                f.close()
                for call in (lambda: f.pread(1, 0), lambda: f.preadinto(bytearray(1), 0),
                             lambda: f.pwrite(b"x", 0), lambda: f.read(), lambda: f.write(b"x"),
                             lambda: f.seek(0), lambda: f.tell(), lambda: f.flush(), lambda: f.sync(),
                             lambda: f.seekable()) + ((lambda: f.readable(),) if mode == "rb" else ()):
                    with pytest.raises(ValueError, match="closed"):
                        call()

    def test_visible_writes(self, fs, root):
        """Where ``visible_writes`` holds, bytes written through an unbuffered handle can be read
        by another handle before any flush or close."""
        if not fs.capabilities.visible_writes:
            pytest.skip(f"{fs.backend_name}: writes are published by sync/close only")
        path = f"{root}/visible.bin"
        with fs.open(path, "wb", buffering=0) as w:
            w.write(b"seen before close")
            with fs.open(path, "rb") as r:
                assert r.read() == b"seen before close"

    def test_relative_and_foreign_paths_are_refused(self, fs):
        with pytest.raises(InvalidURLError, match="relative"):
            fs.info("relative/path")
        with pytest.raises(InvalidURLError, match="not on this file system"):
            fs.info("otherscheme://somewhere/x")

    def test_invalid_mode(self, fs, root):
        for mode in ("rw", "rbt", "z", "", "rr"):
            with pytest.raises(ValueError, match="invalid mode"):
                fs.open(f"{root}/m", mode)

    def test_closed_file(self, fs, root):
        f = fs.open(f"{root}/c.bin", "wb")
        f.close()
        with pytest.raises(ValueError):
            f.write(b"x")

    # -- travelling to MPI ranks and Dask workers ---------------------------------------------
    def test_pickle_roundtrip(self, fs, root):
        fs.write_bytes(f"{root}/p", b"pickled")
        clone = pickle.loads(pickle.dumps(fs))
        assert clone == fs and hash(clone) == hash(fs)
        assert clone.read_bytes(f"{root}/p") == b"pickled"

    def test_capabilities_are_declared(self, fs):
        caps = fs.capabilities.as_dict()
        assert {"positional_write", "concurrent_writers", "append", "block_locations", "xattrs"} <= set(caps)
        assert all(isinstance(v, bool) for v in caps.values())

    # -- storage settings at create; collective opens ----------------------------------------
    def test_create_with_storage_settings(self, fs, root):
        # Replication and block size apply where files have them (HDFS); elsewhere the file is
        # written as any other. overwrite=False refuses an existing file.
        with fs.create(f"{root}/c", replication=1, block_size=1 << 20) as f:
            f.write(b"created")
        assert fs.read_bytes(f"{root}/c") == b"created"
        with pytest.raises(FileExistsError, match=re.escape(fs.url(f"{root}/c"))):
            fs.create(f"{root}/c", overwrite=False)
        with fs.create(f"{root}/c") as f:
            f.write(b"again")
        assert fs.read_bytes(f"{root}/c") == b"again"

    def test_collective_open_only_where_log_structured(self, fs, root):
        if fs.capabilities.log_structured:
            pytest.skip(f"{fs.backend_name}: collective opens run under MPI (tests/mpi)")
        with pytest.raises(io.UnsupportedOperation, match=re.escape(fs.url(f"{root}/x"))):
            fs.open_collective(f"{root}/x", "wb", comm=None)

    def test_owners_and_modes_where_permissions(self, fs, root):
        fs.write_bytes(f"{root}/perm", b"x")
        info = fs.info(f"{root}/perm")
        if not fs.capabilities.permissions:
            pytest.skip(f"{fs.backend_name}: no permission bits or owners")
        assert info.owner and info.uid >= 0 and stat.S_IMODE(info.mode) != 0

    def test_truncate_where_supported(self, fs, root):
        path = f"{root}/trunc"
        fs.write_bytes(path, b"0123456789")
        if not fs.capabilities.truncate:
            with fs.open(path, "wb") as f:
                f.write(b"abc")
                with pytest.raises(io.UnsupportedOperation):
                    f.truncate(1)
            return
        with fs.open(path, "r+b") as f:
            assert f.truncate(4) == 4
        assert fs.read_bytes(path) == b"0123"
        with fs.open(path, "r+b") as f:
            f.truncate(6)  # zero-extends
        assert fs.read_bytes(path) == b"0123\0\0"
