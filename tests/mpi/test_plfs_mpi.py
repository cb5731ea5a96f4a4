"""PLFS under mpirun: N-1 strided and segmented checkpoints, collective opens, parallel index
merge, read back with a different number of ranks."""

import numpy as np
import pytest

import hpcbridge
import hpcbridge.plfs
from hpcbridge.plfs.format import RECORD_SIZE

from .conftest import PLFS_BACKENDS, backend_url, directory_for, make_directory

pytestmark = pytest.mark.mpi(min_size=2)


def piece(rank, i, size):
    return np.full(size, (rank * 13 + i) % 251 + 1, dtype=np.uint8)


@pytest.mark.parametrize("backend", PLFS_BACKENDS)
@pytest.mark.parametrize("pattern", ["strided", "segmented"])
def test_n1_checkpoint_and_read_back_with_fewer_ranks(comm, mpi_tmp_path, backing, pattern, backend):
    directory = directory_for(comm, mpi_tmp_path)
    url, options = backend_url(backend, directory, f"ckpt-{pattern}", backing)
    S, nobj, P = 47001, 12, comm.size

    def offset(rank, i):
        return i * P * S + rank * S if pattern == "strided" else rank * nobj * S + i * S

    make_directory(comm, backend, directory, backing)
    f = hpcbridge.plfs.open(url, "wb", comm=comm, **options)
    for i in range(nobj):
        f.pwrite(piece(comm.rank, i, S), offset(comm.rank, i))
    f.close()  # collective: one metadata record for the job

    fs, path = hpcbridge.url_to_fs(url, **options)
    container = fs.container(path)
    metas = container.metas()
    index_sizes = sorted(bfs.info(p).size for _, bfs, p in container.index_logs())
    # Read back with a different number of ranks: the lower half of the ranks (at least one).
    sub = comm.Split(0 if comm.rank < max(1, P // 2) else 1, comm.rank)
    got_ok = True
    if comm.rank < max(1, P // 2):
        with hpcbridge.plfs.open(url, "rb", comm=sub, **options) as r:
            for owner in range(P):  # every rank of the reading group checks every writer's data
                for i in range(nobj):
                    got_ok &= np.array_equal(np.frombuffer(r.pread(S, offset(owner, i)), np.uint8),
                                             piece(owner, i, S))
            got_ok &= r.pread(10, P * nobj * S) == b""
    sub.Free()
    ok = comm.allreduce(got_ok, op=__import__("mpi4py").MPI.LAND)
    assert ok
    assert len(metas) == 1 and len(metas[0]["writers"]) == P and metas[0]["size"] == P * nobj * S
    assert index_sizes == [RECORD_SIZE] * P  # one pattern record (or one merged extent) per rank


def test_collective_read_merges_the_index_in_parallel(comm, mpi_tmp_path):
    from hpcbridge.plfs.reader import load_index

    directory = directory_for(comm, mpi_tmp_path)
    url = f"plfs+file://{directory}/par"
    f = hpcbridge.plfs.open(url, "wb", comm=comm)
    f.pwrite(np.full(1000, comm.rank + 1, np.uint8), comm.rank * 1000)
    f.close()
    container = hpcbridge.connect("plfs+file:///").container(f"{directory}/par")
    calls = []
    original = container.read_index_logs

    def counting(logs, *args, **kwargs):
        calls.append(len(logs))
        return original(logs, *args, **kwargs)

    container.read_index_logs = counting
    index, damage = load_index(container, comm=comm)
    mine = sum(calls)
    total = comm.allreduce(mine)
    assert total == comm.size and mine <= 1  # each rank read its share, not everything
    assert index.size == comm.size * 1000 and not damage


def test_collective_open_errors_reach_every_rank(comm, mpi_tmp_path):
    url = f"plfs+file://{directory_for(comm, mpi_tmp_path)}/missing-dir/ckpt"
    with pytest.raises(FileNotFoundError):
        hpcbridge.plfs.open(url, "wb", comm=comm)
    comm.Barrier()


def test_collective_close_can_persist_a_flattened_index(comm, mpi_tmp_path):
    import os

    directory = directory_for(comm, mpi_tmp_path)
    url = f"plfs+file://{directory}/flat"
    f = hpcbridge.plfs.open(url, "wb", comm=comm, flatten=True)
    f.pwrite(np.full(500, comm.rank + 1, np.uint8), comm.rank * 500)
    f.close()
    exists = os.path.exists(f"{directory}/flat/flat.index")
    with hpcbridge.plfs.open(url, "rb", comm=comm) as r:
        data = r.read()
    comm.Barrier()
    assert exists
    assert data == b"".join(bytes([q + 1]) * 500 for q in range(comm.size))
