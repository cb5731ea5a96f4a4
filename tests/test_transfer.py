"""Atomic copies between backends: nothing half-written is ever left behind."""

import os

import pytest

import hpcbridge
from hpcbridge.fs.transfer import copy_file


def test_copy_between_backends(tmp_path):
    posix, memory = hpcbridge.connect("/"), hpcbridge.connect("memory://transfer")
    data = os.urandom(3 << 20)
    posix.write_bytes(f"{tmp_path}/a", data)
    seen = []
    assert copy_file(posix, f"{tmp_path}/a", memory, "/a", chunk_size=1 << 20, progress=seen.append) == len(data)
    assert seen == [1 << 20] * 3 and memory.read_bytes("/a") == data
    assert copy_file(memory, "/a", posix, f"{tmp_path}/b") == len(data)
    assert posix.read_bytes(f"{tmp_path}/b") == data
    assert posix.ls(str(tmp_path)) == [f"{tmp_path}/a", f"{tmp_path}/b"]  # no partial files left


def test_failed_copy_keeps_the_old_destination_and_removes_the_partial(tmp_path, monkeypatch):
    fs = hpcbridge.connect("/")
    fs.write_bytes(f"{tmp_path}/src", os.urandom(5 << 20))
    fs.write_bytes(f"{tmp_path}/dst", b"previous content")
    calls = []

    def explode(n):
        calls.append(n)
        if len(calls) == 2:
            raise RuntimeError("disk full (simulated by the progress callback)")

    with pytest.raises(RuntimeError, match="disk full"):
        copy_file(fs, f"{tmp_path}/src", fs, f"{tmp_path}/dst", chunk_size=1 << 20, progress=explode)
    assert fs.read_bytes(f"{tmp_path}/dst") == b"previous content"
    assert fs.ls(str(tmp_path)) == [f"{tmp_path}/dst", f"{tmp_path}/src"]


def test_copy_refusals(tmp_path):
    fs = hpcbridge.connect("/")
    fs.write_bytes(f"{tmp_path}/a", b"x")
    fs.mkdir(f"{tmp_path}/d")
    copy_file(fs, f"{tmp_path}/a", fs, f"{tmp_path}/a2", overwrite=False)
    with pytest.raises(FileExistsError, match="overwrite"):
        copy_file(fs, f"{tmp_path}/a", fs, f"{tmp_path}/a2", overwrite=False)
    with pytest.raises(IsADirectoryError):
        copy_file(fs, f"{tmp_path}/d", fs, f"{tmp_path}/e")
    with pytest.raises(IsADirectoryError):
        copy_file(fs, f"{tmp_path}/a", fs, f"{tmp_path}/d")
    with pytest.raises(ValueError, match="chunk_size"):
        copy_file(fs, f"{tmp_path}/a", fs, f"{tmp_path}/z", chunk_size=0)
    with pytest.raises(FileNotFoundError):
        copy_file(fs, f"{tmp_path}/missing", fs, f"{tmp_path}/z")


def test_copy_to_a_name_of_255_bytes(tmp_path):
    """The partial file beside the destination is ``.NAME.hpcbridge-partial-ID``: NAME is cut
    short, or a copy to a name over 227 bytes failed with ENAMETOOLONG, as open(2) does not."""
    fs = hpcbridge.connect("/")
    fs.write_bytes(f"{tmp_path}/src", b"data")
    name = "é" * 127 + "L"  # 255 bytes
    assert copy_file(fs, f"{tmp_path}/src", fs, f"{tmp_path}/{name}") == 4
    assert sorted(os.listdir(tmp_path)) == sorted(["src", name]) and fs.read_bytes(f"{tmp_path}/{name}") == b"data"


def test_no_overwrite_holds_for_a_file_made_while_the_copy_runs(tmp_path):
    """overwrite=False (put/get -n) checked the destination only before the copy; rename(2) then
    replaced a file made there meanwhile. As cp -n, that file is kept and the copy refused."""
    fs = hpcbridge.connect("file://")
    (tmp_path / "src").write_bytes(b"x" * 100_000)

    def someone_else_writes(_n):
        if not (tmp_path / "dst").exists():
            (tmp_path / "dst").write_bytes(b"theirs")

    with pytest.raises(FileExistsError):
        copy_file(fs, f"{tmp_path}/src", fs, f"{tmp_path}/dst", overwrite=False, chunk_size=10_000,
                  progress=someone_else_writes)
    assert (tmp_path / "dst").read_bytes() == b"theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst", "src"]
    assert copy_file(fs, f"{tmp_path}/src", fs, f"{tmp_path}/new", overwrite=False) == 100_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst", "new", "src"]
