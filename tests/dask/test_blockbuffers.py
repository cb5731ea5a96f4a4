"""The recycled block memory of array read tasks (hpcbridge.dask.blockbuffers): memory returns
to the pool only when nothing can reach it, and comes back for the next block of its size."""

import gc
import threading

import numpy as np
import pytest

from hpcbridge.dask import blockbuffers


@pytest.fixture
def pool(monkeypatch):
    """An empty pool for the test (the module's one is per process)."""
    monkeypatch.setattr(blockbuffers, "_free", {})
    monkeypatch.setattr(blockbuffers, "_free_bytes", 0)
    return blockbuffers


SHAPE = (256, 1024)  # 2 MiB of float64: pooled


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_memory_of_a_dropped_block_backs_the_next(pool):
    a = pool.empty(SHAPE, np.float64)
    first = address(a)
    del a
    assert pool.pooled_bytes() == 2 << 20
    b = pool.empty(SHAPE, np.float64)
    assert address(b) == first and pool.pooled_bytes() == 0
    assert b.shape == SHAPE and b.dtype == np.float64 and b.flags.c_contiguous and b.flags.writeable


@pytest.mark.parametrize("derive", [
    lambda a: a[3:7],
    lambda a: a[:, ::2],
    lambda a: a.T,
    lambda a: a.reshape(-1),
    lambda a: a.view(np.uint8),
    lambda a: np.asarray(a)[1],
    lambda a: memoryview(a),
    lambda a: np.frombuffer(memoryview(a), np.uint8),
], ids=["slice", "strided", "transpose", "reshape", "view", "asarray", "memoryview", "frombuffer"])
def test_memory_stays_while_any_view_lives(pool, derive):
    a = pool.empty(SHAPE, np.float64)
    a[...] = 7.0
    kept = derive(a)
    expected = np.ascontiguousarray(np.asarray(kept)).tobytes()
    del a
    gc.collect()
    assert pool.pooled_bytes() == 0  # still reachable through the view
    b = pool.empty(SHAPE, np.float64)  # must not reuse the viewed memory
    b[...] = -1.0
    assert np.ascontiguousarray(np.asarray(kept)).tobytes() == expected
    del kept, b
    assert pool.pooled_bytes() == 4 << 20


def test_small_and_object_blocks_are_plain_numpy(pool):
    small = pool.empty((10, 10), np.float64)
    objects = pool.empty((1 << 18,), object)
    assert small.flags.owndata and objects.flags.owndata
    del small, objects
    assert pool.pooled_bytes() == 0


def test_pool_keeps_at_most_keep_bytes(pool, monkeypatch):
    monkeypatch.setattr(pool, "KEEP_BYTES", 5 << 20)
    blocks = [pool.empty(SHAPE, np.float64) for _ in range(4)]
    del blocks
    assert pool.pooled_bytes() == 4 << 20  # two blocks of 2 MiB; the others were freed


def test_sizes_are_not_mixed(pool):
    a = pool.empty(SHAPE, np.float64)
    del a
    b = pool.empty((SHAPE[0] * 2, SHAPE[1]), np.float32)  # same bytes, other shape: reused
    assert pool.pooled_bytes() == 0
    c = pool.empty((SHAPE[0] + 1, SHAPE[1]), np.float64)  # other size: fresh
    assert address(c) != address(b)


def test_threads_never_share_a_live_block(pool):
    """Blocks taken concurrently by 4 threads and dropped at once: no two live blocks overlap."""
    live, errors = [], []
    lock = threading.Lock()

    def work(k):
        for i in range(200):
            a = pool.empty(SHAPE, np.float64)
            a[...] = k * 1000 + i
            with lock:
                live.append(address(a))
                if len(set(live)) != len(live):
                    errors.append("overlap")
            if not np.all(a == k * 1000 + i):
                errors.append("overwritten")
            with lock:
                live.remove(address(a))
            del a

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert pool.pooled_bytes() <= pool.KEEP_BYTES
