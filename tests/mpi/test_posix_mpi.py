"""Real MPI ranks (mpirun -n 4) sharing files through the POSIX backend.

Run with ``mpirun -n 4 python -m pytest --with-mpi -m mpi tests/mpi`` (``make test`` does).
Assertions come after the last collective call of each test, so a failing rank reports a
failure instead of leaving the others waiting in a collective.
"""

import shutil
import subprocess

import numpy as np
import pytest

import hpcbridge

from .conftest import directory_for

pytestmark = pytest.mark.mpi(min_size=2)


def _object(rank: int, index: int, size: int) -> bytes:
    """The deterministic content of object ``index`` written by ``rank``."""
    return np.full(size, (rank * 31 + index) % 251, dtype=np.uint8).tobytes()


def test_ranks_really_run_in_parallel(world):
    hosts = world.allgather(world.rank)
    assert hosts == list(range(world.size)) and world.size >= 2


def test_filesystem_travels_to_every_rank(comm, mpi_tmp_path):
    directory = directory_for(comm, mpi_tmp_path)
    fs = comm.bcast(hpcbridge.connect("file:///", block_size=1 << 20) if comm.rank == 0 else None)
    assert fs.block_size == 1 << 20
    path = f"{directory}/from-rank-{comm.rank}"
    fs.write_bytes(path, str(comm.rank).encode())
    comm.Barrier()
    seen = sorted(p for p in fs.ls(directory) if "/from-rank-" in p)
    comm.Barrier()
    assert seen == sorted(f"{directory}/from-rank-{r}" for r in range(comm.size))


@pytest.mark.parametrize("object_size", [47001, 48 << 10])
def test_n1_strided_checkpoint_read_back_by_another_rank(comm, mpi_tmp_path, object_size):
    """The LANL N-1 strided pattern: object i of rank r at i*(P*S) + r*S, read by rank r+1."""
    fs = hpcbridge.connect("file:///")
    path = f"{directory_for(comm, mpi_tmp_path)}/ckpt-{object_size}.bin"
    nobj, size, rank = 8, comm.size, comm.rank
    if rank == 0:
        fs.write_bytes(path, b"")
    comm.Barrier()
    with fs.open(path, "r+b") as f:
        for i in range(nobj):
            f.pwrite(_object(rank, i, object_size), i * size * object_size + rank * object_size)
        f.sync()
    comm.Barrier()
    reader_of = (rank + 1) % size  # as the LANL test: no rank reads what it wrote
    with fs.open(path, "rb") as f:
        got = [f.pread(object_size, i * size * object_size + reader_of * object_size) for i in range(nobj)]
    total = fs.info(path).size
    comm.Barrier()
    assert total == nobj * size * object_size
    assert got == [_object(reader_of, i, object_size) for i in range(nobj)]


def test_parallel_hdf5_file_on_the_posix_mount(comm, mpi_tmp_path):
    """h5py's mpio driver writes a shared file where hpcbridge resolves it; h5ls can read it."""
    import h5py

    directory = directory_for(comm, mpi_tmp_path)
    fs = hpcbridge.connect(f"file://{directory}")
    path = fs.local_path(f"{directory}/shared.h5")
    rows = 100
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        dset = f.create_dataset("dens", (comm.size * rows, 16), dtype="f8")
        with dset.collective:
            dset[comm.rank * rows:(comm.rank + 1) * rows] = comm.rank + np.arange(16)
    comm.Barrier()
    with h5py.File(path, "r", driver="mpio", comm=comm) as f:
        neighbour = (comm.rank + 1) % comm.size
        block = f["dens"][neighbour * rows:(neighbour + 1) * rows]
    listing = ""
    if comm.rank == 0 and shutil.which("h5ls"):
        listing = subprocess.run(["h5ls", path], capture_output=True, text=True, check=True).stdout
    blocks = fs.block_locations(path)
    comm.Barrier()
    assert (block == neighbour + np.arange(16)).all()
    if comm.rank == 0:
        assert "dens" in listing and f"{{{comm.size * rows}, 16}}" in listing
    assert blocks and blocks[-1].end == fs.info(path).size


def test_mpiio_write_at_all_agrees_with_hpcbridge_pread(comm, mpi_tmp_path):
    from mpi4py import MPI

    fs = hpcbridge.connect("file:///")
    path = f"{directory_for(comm, mpi_tmp_path)}/mpiio.bin"
    piece = np.arange(1000, dtype=np.int64) + comm.rank * 1000
    fh = MPI.File.Open(comm, fs.local_path(path), MPI.MODE_CREATE | MPI.MODE_WRONLY)
    fh.Write_at_all(comm.rank * piece.nbytes, piece)
    fh.Close()
    comm.Barrier()
    data = np.frombuffer(fs.pread(path, offset=0, length=comm.size * piece.nbytes), dtype=np.int64)
    comm.Barrier()
    assert (data == np.arange(comm.size * 1000)).all()
