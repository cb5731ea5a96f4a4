"""h5py reads through hpcbridge file objects never wait for a thread that garbage collection may
hold on h5py's lock (h5py #2019).

h5py holds its global lock ("phil") while it calls a Python file object's ``readinto``; freeing an
h5py object needs the same lock. The HDFS backends read on a connection's call pool: when a pool
thread's allocation started a cyclic garbage collection that freed h5py objects, the thread
waited for the lock the reader held while the reader waited for the thread, until the call's
60 s timeout (the README tour failed so, 2 runs in 6). Here a raw file reads through a
:class:`CallPool` as the HDFS backends do, and its worker collects garbage holding h5py objects
in a cycle at every call: without the fix the first read times out."""

import gc
import os
import threading

import numpy as np
import pytest

from hpcbridge.fs.pool import CallPool, calls_inline, calls_on_this_thread
from hpcbridge.hdf5 import BlockCacheFile, describe

h5py = pytest.importorskip("h5py")


class _PooledRaw:
    """A raw file whose reads run on a call pool (as ``_HdfsReadRaw`` does), and whose worker
    first runs a cyclic garbage collection that frees h5py objects."""

    def __init__(self, path, garbage_source):
        self._fd = os.open(path, os.O_RDONLY)
        self.pool = CallPool(2, "pooled")
        self.garbage_source = garbage_source
        self.threads = set()
        self.url = f"pooled://{path}"

    def _read(self, view, offset):
        self.threads.add(threading.get_ident())
        cycle = [self.garbage_source["data"].id]  # an h5py object in a reference cycle...
        cycle.append(cycle)
        del cycle
        gc.collect()  # ...freed by this thread: needs h5py's lock
        return os.preadv(self._fd, [view], offset)

    def preadinto(self, buffer, offset):
        return self.pool.call(3.0, f"read {self.url}", self._read, memoryview(buffer).cast("B"), offset)

    def close(self):
        os.close(self._fd)


@pytest.fixture
def files(tmp_path):
    target, other = tmp_path / "target.h5", tmp_path / "other.h5"
    with h5py.File(target, "w") as f:
        f.create_dataset("x", data=np.arange(4096.0), chunks=(512,), compression="gzip")
        f.create_group("g").attrs["a"] = 1
    with h5py.File(other, "w") as f:
        f["data"] = np.arange(10)
    with h5py.File(other, "r") as garbage_source:
        yield str(target), garbage_source


def test_h5py_reads_run_on_the_calling_thread(files):
    target, garbage_source = files
    raw = _PooledRaw(target, garbage_source)
    f = BlockCacheFile(raw, os.path.getsize(target), raw.url, block=4096)
    with h5py.File(f, "r") as h5:  # every read h5py makes holds its lock: would time out
        assert h5["g"].attrs["a"] == 1
        np.testing.assert_array_equal(h5["x"][...], np.arange(4096.0))
    assert raw.threads == {threading.get_ident()}
    f.close()


def test_the_parsers_reads_keep_the_pool_and_its_timeout(files):
    """``preadinto`` (this package's parsers, not h5py's lock) still goes through the pool."""
    target, garbage_source = files
    raw = _PooledRaw(target, garbage_source)
    f = BlockCacheFile(raw, os.path.getsize(target), raw.url, block=4096)
    assert f.pread(8, 0) == b"\x89HDF\r\n\x1a\n"
    assert threading.get_ident() not in raw.threads and raw.threads
    f.close()


def test_describe_through_a_pooled_backend(files, tmp_path, monkeypatch):
    """The dataset description (h5py over the block cache) through a pooled raw file."""
    import hpcbridge

    target, garbage_source = files
    fs, path = hpcbridge.url_to_fs(f"file://{target}")
    monkeypatch.setattr(fs, "open", lambda p, mode="rb", buffering=-1, **kw: _PooledRaw(p, garbage_source))
    info, index = describe(fs, path, "x")
    assert info.shape == (4096,) and index is not None


def test_calls_on_this_thread_runs_call_and_submit_here_and_nests():
    pool = CallPool(2, "svc")
    me = threading.get_ident()
    assert not calls_inline()
    with calls_on_this_thread():
        with calls_on_this_thread():
            assert calls_inline()
        assert calls_inline()
        assert pool.call(1, "who", threading.get_ident) == me
        done = pool.submit(threading.get_ident)
        assert done.done() and done.result() == me
        failed = pool.submit({}.__getitem__, "x")
        assert isinstance(failed.exception(), KeyError)
    assert not calls_inline()
    assert pool.call(1, "who", threading.get_ident) != me
