"""Fresh bytes filled in place (hpcbridge.fs.buffers) and the preads built on them."""

import os

import numpy as np
import pytest

import hpcbridge
from hpcbridge.fs import buffers
from hpcbridge.fs.buffers import bytes_of, empty_bytes


@pytest.mark.parametrize("size", [0, 1, 4097, buffers.SMALL, buffers.HUGE + 12345])
def test_a_read_lands_in_the_bytes_returned(tmp_path, size):
    payload = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    path = tmp_path / "f"
    path.write_bytes(payload)
    data, view = empty_bytes(size)
    assert len(data) == len(view) == size and not view.readonly
    fd = os.open(path, os.O_RDONLY)
    try:
        filled = os.preadv(fd, [view], 0) if size else 0
    finally:
        os.close(fd)
    got = bytes_of(data, filled)
    assert type(got) is bytes and got == payload
    if size >= buffers.SMALL:
        assert got is data  # filled whole: the object itself, no copy
    assert bytes_of(data, size // 2) == payload[:size // 2]  # short: the prefix


@pytest.mark.parametrize("scheme", ["file", "plfs+file"])
@pytest.mark.parametrize("size", [47001, buffers.HUGE + 4096])
def test_pread_whole_short_and_past_the_end(tmp_path, scheme, size):
    # Large preads go through empty_bytes on POSIX (huge pages) and on every backend built on
    # preadinto (PLFS); each returns exactly the bytes there, short at the end of the file.
    payload = np.random.default_rng(7).integers(0, 256, size, dtype=np.uint8).tobytes()
    url = f"{scheme}://{tmp_path}/data"
    with hpcbridge.open(url, "wb") as f:
        f.write(payload)
    with hpcbridge.open(url, "rb", buffering=0) as f:
        for offset, length in [(0, size), (1000, size), (size - 10, size), (size, size), (0, 0)]:
            got = f.pread(length, offset)
            assert type(got) is bytes and got == payload[offset:offset + length], (offset, length)


def test_read_to_the_end_of_a_large_file_that_grew_after_the_open(tmp_path):
    # POSIX read() to the end: one bytes object sized by fstat when read() is called (from HUGE
    # up), so bytes appended after the open are read too; from a position inside the file.
    size = buffers.HUGE + 999
    payload = np.random.default_rng(3).integers(0, 256, size, dtype=np.uint8).tobytes()
    path = tmp_path / "big"
    path.write_bytes(payload)
    fs, p = hpcbridge.url_to_fs(f"file://{path}")
    assert fs.read_bytes(p) == payload
    with fs.open(p, "rb", buffering=0) as f:
        f.seek(5)
        with open(path, "ab") as grow:
            grow.write(b"tail")
        assert f.read() == payload[5:] + b"tail" and f.tell() == size + 4
        assert f.read() == b""


def test_the_view_keeps_its_bytes_alive():
    # A read that fills the view after its caller dropped the bytes (a call that timed out and
    # finished late) must write into live memory, as with a bytearray's view.
    import gc

    size = buffers.SMALL
    data, view = empty_bytes(size)
    assert type(data) is bytes
    del data
    gc.collect()
    view[:] = b"x" * size
    assert view.obj.data == b"x" * size
