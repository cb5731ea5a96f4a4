"""Other processes acting at the worst moment: each test puts one step of another writer, closer
or reader exactly where a race would make a container return wrong data or a wrong size, and
checks what a user then reads. Each failed before its fix."""

import ctypes
import itertools
import os

import mfusepy
import pytest

import hpcbridge
from hpcbridge.mount.ops import BridgeOperations
from hpcbridge.plfs import api, reader, tools
from hpcbridge.plfs import writer as plfs_writer
from hpcbridge.plfs.container import Container


@pytest.fixture()
def fs():
    return hpcbridge.connect("plfs+file://")


def _pwrite_through_mount(ops, path, data, offset, flags=os.O_WRONLY):
    fi = mfusepy.fuse_file_info()
    fi.flags = flags
    ops.open(path, fi)
    buffer = ctypes.create_string_buffer(data, len(data))
    assert ops.write_from(fi.fh, ctypes.cast(buffer, ctypes.POINTER(ctypes.c_char)), len(data), offset) == len(data)
    ops.flush(path, fi)
    ops.release(path, fi)


def test_a_write_through_the_mount_wins_over_what_another_process_wrote_before(fs, tmp_path, monkeypatch):
    """The daemon's writers take their sequence numbers from the daemon's counter: opening a
    file must first raise it above the container's, or a daemon started before another process
    wrote the file gives the user's newer bytes lower numbers, and they lose."""
    with fs.open(f"{tmp_path}/f", "wb") as f:  # another process, many writes
        for _ in range(50):
            f.pwrite(b"o" * 100, 0)
    monkeypatch.setattr(plfs_writer, "_sequence", itertools.count(1))  # the daemon has drawn none
    ops = BridgeOperations(fs, str(tmp_path))
    _pwrite_through_mount(ops, "/f", b"N" * 10, 0)
    assert fs.read_bytes(f"{tmp_path}/f") == b"N" * 10 + b"o" * 90
