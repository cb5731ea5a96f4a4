"""The hpcbridge demo: an MPI simulation checkpoints, and analytics read what it stored.

Run under MPI (``make demo`` runs ``mpirun -n 4 python examples/demo.py``)::

    mpirun -n 4 python examples/demo.py --storage file:///scratch/demo

1. HPC side: every rank writes its share of an N-1 strided checkpoint (the LANL pattern, 47001-byte
   objects) into ONE shared file through hpcbridge's positional writes, and a FLASH-like
   parallel HDF5 file with h5py's mpio driver.
2. Verification: every rank reads back a neighbour's objects (never its own, as the LANL test).
3. Layout: where the checkpoint's blocks are stored (hpcbridge ``block_locations``).
4. Analytics: per-rank I/O records go to Parquet through the pyarrow adapter and to text logs;
   pandas and Dask read them back through the ``hpcbridge+`` fsspec protocol.

Storage is any hpcbridge URL; the default is a local directory. Later issues add HDFS (a local
cluster started for the demo), PLFS containers and locality-aware Dask.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import zlib

import numpy as np

import hpcbridge


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage", default=f"file://{os.getcwd()}/.demo-data",
                        help="hpcbridge URL of the directory to use (default: ./.demo-data)")
    parser.add_argument("--object-size", type=int, default=47001,
                        help="bytes per checkpoint object (LANL's small unaligned size by default)")
    parser.add_argument("--objects", type=int, default=256, help="objects per rank (default 256)")
    return parser.parse_args(argv)


def object_bytes(rank: int, index: int, size: int) -> np.ndarray:
    """Deterministic content of one checkpoint object, so any rank can verify any other's."""
    return np.random.default_rng(rank * 1_000_003 + index).integers(0, 256, size, dtype=np.uint8)


def main(argv=None) -> int:
    from mpi4py import MPI

    args = parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, nranks = comm.rank, comm.size
    fs, root = hpcbridge.url_to_fs(args.storage)
    if rank == 0:
        if fs.exists(root):
            fs.rm(root, recursive=True)
        fs.mkdir(f"{root}/logs", parents=True)
        fs.write_bytes(f"{root}/checkpoint.bin", b"")
    comm.Barrier()

    # 1. N-1 strided checkpoint: object i of rank r at i*(P*S) + r*S.
    size, nobj = args.object_size, args.objects
    path = f"{root}/checkpoint.bin"
    log_lines = []
    comm.Barrier()
    started = time.perf_counter()
    with fs.open(path, "r+b") as f:
        for i in range(nobj):
            data = object_bytes(rank, i, size)
            offset = i * nranks * size + rank * size
            f.pwrite(data, offset)
            log_lines.append(f"rank={rank} object={i} offset={offset} crc={zlib.crc32(data):08x}\n")
        f.sync()
    write_seconds = time.perf_counter() - started
    comm.Barrier()
    fs.write_bytes(f"{root}/logs/rank-{rank:04d}.txt", "".join(log_lines).encode())

    # 2. Read a neighbour's objects back and verify them.
    neighbour = (rank + 1) % nranks
    started = time.perf_counter()
    buffer = np.empty(size, dtype=np.uint8)
    bad = 0
    with fs.open(path, "rb") as f:
        for i in range(nobj):
            f.preadinto(buffer, i * nranks * size + neighbour * size)
            bad += not np.array_equal(buffer, object_bytes(neighbour, i, size))
    read_seconds = time.perf_counter() - started
    bad_total = comm.allreduce(bad)

    # FLASH-like parallel HDF5 checkpoint (POSIX storage: HDF5 writes through the mount).
    h5_note = "skipped (storage is not a local mount)"
    try:
        local = fs.local_path(f"{root}/flash_like_chk.h5")
    except OSError:
        local = None
    if local is not None:
        import h5py

        blocks, nxb = 20, 8
        with h5py.File(local, "w", driver="mpio", comm=comm) as h5:
            first = comm.exscan(blocks) or 0
            total = comm.allreduce(blocks)
            for v, name in enumerate(["dens", "pres", "temp", "velx"]):
                dset = h5.create_dataset(name, (total, nxb, nxb, nxb), dtype="f8")
                with dset.collective:
                    dset[first:first + blocks] = float(v)
        h5_note = f"{fs.info(f'{root}/flash_like_chk.h5').size / 2**20:.1f} MiB, 4 variables, {nranks} ranks"

    records = comm.gather({"rank": rank, "bytes": nobj * size, "write_s": write_seconds,
                           "read_s": read_seconds, "bad_objects": bad}, root=0)
    if rank != 0:
        return 0 if bad_total == 0 else 1

    # 3. Layout and 4. analytics, on rank 0.
    import dask.bag as db
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hpcbridge.arrow import filesystem_and_path

    blocks = fs.block_locations(path)
    arrow_fs, arrow_root = filesystem_and_path(fs.url(root))
    pq.write_table(pa.Table.from_pylist(records), f"{arrow_root}/io_summary.parquet", filesystem=arrow_fs)
    summary = pq.read_table(f"{arrow_root}/io_summary.parquet", filesystem=arrow_fs).to_pandas()
    logs = db.read_text(f"hpcbridge+{fs.url(root)}/logs/*.txt")
    per_rank = logs.map(lambda line: line.split()[0]).frequencies().compute(scheduler="sync")
    frame = pd.read_parquet(f"hpcbridge+{fs.url(root)}/io_summary.parquet")

    total_bytes = int(summary["bytes"].sum())
    write_bw = total_bytes / summary["write_s"].max() / 1e6
    read_bw = total_bytes / summary["read_s"].max() / 1e6
    print("\n===== hpcbridge demo report =====")
    print(f"storage            {fs.url(root)} ({fs.backend_name} backend)")
    print(f"MPI ranks          {nranks}")
    print(f"N-1 checkpoint     {total_bytes / 2**20:.1f} MiB in {nobj} x {size} B objects per rank")
    print(f"  write            {write_bw:8.1f} MB/s (slowest rank {summary['write_s'].max():.3f} s)")
    print(f"  read back        {read_bw:8.1f} MB/s, verified by neighbours: "
          f"{'all objects correct' if bad_total == 0 else f'{bad_total} BAD objects'}")
    print(f"parallel HDF5      {h5_note}")
    hosts = sorted({h for b in blocks for h in b.hosts}) or ["(unknown)"]
    print(f"layout             {len(blocks)} block(s) of up to {max(b.length for b in blocks) / 2**20:.0f} MiB "
          f"on {', '.join(hosts)}")
    print(f"analytics          Parquet via pyarrow: {len(frame)} rank records; "
          f"Dask over text logs: {sum(c for _, c in per_rank)} object records from {len(per_rank)} ranks")
    ok = bad_total == 0 and sum(c for _, c in per_rank) == nobj * nranks and len(frame) == nranks
    print(f"result             {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
