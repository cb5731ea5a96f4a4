"""FLASH-IO: the I/O kernel of the FLASH code on parallel HDF5 (h5py, driver='mpio').

Writes, as the original kernel does (../shared/BENCHMARKS.md, seed 001 section 5.3.1):
* <base>hdf5_chk_0000      checkpoint: header datasets, mesh/tree datasets, 24 float64 variables
                           of shape (B, nzb, nyb, nxb);
* <base>hdf5_plt_cnt_0000  plotfile without corners: dens temp pres f1 as float32;
* <base>hdf5_plt_crn_0000  plotfile with corners: (B, nzb+1, nyb+1, nxb+1), each value the mean of
                           the 8 cells around the corner (guard cells included).
Rank r holds 80 + (r mod 3) blocks (a deliberate imbalance) and writes them as one hyperslab
along dimension 0 of every block-indexed dataset; header datasets are written by rank 0; all
ranks create all datasets. Independent (the kernel's default) or collective transfers.
Reports per file the slowest rank's time and MiB, and MiB/s = total MiB / sum of slowest times.
Then reads everything back and verifies it (untimed).

Parallel HDF5 writes through MPI-IO, which has no HDFS or PLFS driver: the files reach HDFS or
PLFS through a POSIX path, either an ``hpcbridge mount`` of the store (``--dir`` in the mount: each
rank's open is a PLFS writer of the N-1 file, no staging copy) or a local directory staged after
with ``hpcbridge put`` (docs/kernels.md, docs/mount.md).

    mpirun -n 4 python benchmarks/flash_io.py [--nxb 16] [--blocks 80] [--collective] [--dir DIR]
    hpcbridge mount plfs+hdfs://nn:9820/flash /mnt/flash && \
        mpirun -n 4 python benchmarks/flash_io.py --dir /mnt/flash
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import h5py  # noqa: E402
import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from _common import write_json  # noqa: E402

NAMES = ["dens", "velx", "vely", "velz", "pres", "ener", "temp", "gamc", "game", "enuc", "gpot"] + [
    f"f{i}".ljust(4) for i in range(1, 14)]
PLOT_NAMES = ["dens", "temp", "pres", "f1  "]
GUARD = 4


def sim_params_dtype(real):
    return np.dtype([("total blocks", "<i4"), ("time", real), ("timestep", real), ("number of steps", "<i4"),
                     ("nxb", "<i4"), ("nyb", "<i4"), ("nzb", "<i4")])


def corner_values(value: float, nxb: int) -> np.ndarray:
    """The corner field of one block: mean of the 8 cells around each corner, guard cells included
    (computed for real from a block with guards, although FLASH-IO's dummy fields are constant)."""
    n = nxb + 2 * GUARD
    cells = np.full((n, n, n), value, dtype=np.float64)
    lo, hi = GUARD - 1, GUARD + nxb + 1  # the cells touching the corners 0..nxb
    c = cells[lo:hi, lo:hi, lo:hi]
    corners = (c[:-1, :-1, :-1] + c[1:, :-1, :-1] + c[:-1, 1:, :-1] + c[:-1, :-1, 1:]
               + c[1:, 1:, :-1] + c[1:, :-1, 1:] + c[:-1, 1:, 1:] + c[1:, 1:, 1:]) / 8.0
    return corners.astype(np.float32)


def write_file(path, comm, nxb, local, first, total, plot, corners, collective):
    """One FLASH-IO file; returns the seconds this rank spent in it."""
    real = np.float32 if plot else np.float64
    names = PLOT_NAMES if plot else NAMES
    n = nxb + 1 if corners else nxb
    comm.Barrier()
    started = MPI.Wtime()
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        header = {
            "file creation time": f.create_dataset("file creation time", (1,), dtype="S40"),
            "FLASH version": f.create_dataset("FLASH version", (1,), dtype="S20"),
            "simulation parameters": f.create_dataset("simulation parameters", (1,), dtype=sim_params_dtype(real)),
            "unknown names": f.create_dataset("unknown names", (len(names), 1), dtype="S4"),
        }
        mesh = {
            "refine level": (f.create_dataset("refine level", (total,), dtype="<i4"), 1),
            "node type": (f.create_dataset("node type", (total,), dtype="<i4"), 1),
            "gid": (f.create_dataset("gid", (total, 15), dtype="<i4"), -1),
            "coordinates": (f.create_dataset("coordinates", (total, 3), dtype=real), 0.25),
            "block size": (f.create_dataset("block size", (total, 3), dtype=real), 0.5),
            "bounding box": (f.create_dataset("bounding box", (total, 3, 2), dtype=real), 0.0),
        }
        variables = [f.create_dataset(name, (total, n, n, n), dtype=real) for name in names]
        if comm.rank == 0:
            header["file creation time"][0] = time.strftime("%Y-%m-%d %H:%M:%S").encode()
            header["FLASH version"][0] = b"FLASH 2.0 (I/O kernel)"
            params = np.zeros(1, dtype=sim_params_dtype(real))
            params[0] = (total, 0.0, 0.0, 0, n, n, n)
            header["simulation parameters"][0] = params[0]
            header["unknown names"][:, 0] = [name.encode() for name in names]

        def hyperslab(dset, data):
            if collective:
                with dset.collective:
                    dset[first:first + local] = data
            else:
                dset[first:first + local] = data

        for dset, value in mesh.values():
            hyperslab(dset, np.full((local,) + dset.shape[1:], value, dtype=dset.dtype))
        for name, dset in zip(names, variables):
            value = float(NAMES.index(name) + 1)  # variable i holds i (Fortran numbering)
            block = corner_values(value, nxb) if corners else np.full((n, n, n), value, dtype=real)
            hyperslab(dset, np.broadcast_to(block, (local, n, n, n)))
    return MPI.Wtime() - started


def verify_file(path, comm, nxb, local, first, total, plot, corners) -> int:
    """Read every dataset back (this rank's hyperslab, and the header on rank 0); count errors."""
    names = PLOT_NAMES if plot else NAMES
    n = nxb + 1 if corners else nxb
    bad = 0
    with h5py.File(path, "r", driver="mpio", comm=comm) as f:
        bad += list(f.keys()) != sorted(["file creation time", "FLASH version", "simulation parameters",
                                         "unknown names", "refine level", "node type", "gid", "coordinates",
                                         "block size", "bounding box", *names])
        for name, value in (("refine level", 1), ("node type", 1), ("gid", -1), ("coordinates", 0.25),
                            ("block size", 0.5), ("bounding box", 0.0)):
            bad += not np.all(f[name][first:first + local] == value)
        for name in names:
            data = f[name][first:first + local]
            bad += data.shape != (local, n, n, n) or not np.all(data == NAMES.index(name) + 1)
        if comm.rank == 0:
            params = f["simulation parameters"][0]
            bad += int(params["total blocks"]) != total or int(params["nxb"]) != n
            bad += [x[0].decode() for x in f["unknown names"][:]] != names
    return bad


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="HDF5 files are written through a POSIX path: a local directory, or "
                                            "an `hpcbridge mount` of HDFS or PLFS (see the module text).")
    parser.add_argument("--nxb", type=int, choices=[8, 16], default=16, help="zones per block edge (16; 8 as option)")
    parser.add_argument("--blocks", type=int, default=80, help="blocks per rank before the imbalance (80)")
    parser.add_argument("--collective", action="store_true", help="collective transfers (default: independent)")
    parser.add_argument("--dir", default=".", help="directory of the output files (default: current)")
    parser.add_argument("--base", default="flash_io_test_", help="file base name")
    parser.add_argument("--keep", action="store_true", help="keep the files")
    parser.add_argument("--output", default="results/flash_io.json")
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    if args.blocks < 1:
        parser.error("--blocks must be at least 1")
    local = args.blocks + comm.rank % 3
    first = comm.exscan(local) or 0
    total = comm.allreduce(local)
    nxb = args.nxb
    files = [
        ("checkpoint", f"{args.base}hdf5_chk_0000", False, False, total * (nxb ** 3 * 192 + 164)),
        ("plotfile (no corners)", f"{args.base}hdf5_plt_cnt_0000", True, False, total * (nxb ** 3 * 16 + 116)),
        ("plotfile (corners)", f"{args.base}hdf5_plt_crn_0000", True, True,
         total * ((nxb + 1) ** 3 * 16 + 116)),
    ]
    report, bad = [], 0
    for label, name, plot, corners, raw_bytes in files:
        path = os.path.join(args.dir, name)
        seconds = comm.allreduce(write_file(path, comm, nxb, local, first, total, plot, corners, args.collective),
                                 op=MPI.MAX)
        bad += comm.allreduce(verify_file(path, comm, nxb, local, first, total, plot, corners))
        report.append({"file": path, "label": label, "seconds": seconds, "raw_MiB": raw_bytes / 2**20,
                       "file_MiB": os.path.getsize(path) / 2**20})
        comm.Barrier()
        if comm.rank == 0 and not args.keep:
            os.unlink(path)
    if comm.rank == 0:
        total_mib = sum(r["raw_MiB"] for r in report)
        total_s = sum(r["seconds"] for r in report)
        print(" " + "-" * 66)
        print(f"  FLASH-IO on {comm.size} ranks: {total} blocks of {nxb}^3 zones, "
              f"{'collective' if args.collective else 'independent'} transfers")
        for r in report:
            print(f"  {r['label']:<24} {r['raw_MiB']:9.2f} MiB  {r['seconds']:8.3f} s  "
                  f"{r['raw_MiB'] / r['seconds']:9.2f} MiB/s   ({os.path.basename(r['file'])}, "
                  f"{r['file_MiB']:.2f} MiB on disk)")
        print(f"  {'total':<24} {total_mib:9.2f} MiB  {total_s:8.3f} s  {total_mib / total_s:9.2f} MiB/s")
        print(f"  verification: {'all datasets correct' if bad == 0 else f'{bad} ERRORS'}")
        print(" " + "-" * 66)
        write_json(args.output, {"benchmark": "flash_io", "ranks": comm.size, "nxb": nxb, "blocks": total,
                                 "mode": "collective" if args.collective else "independent", "backend": "posix",
                                 "files": report, "total_MiB": total_mib, "seconds": total_s,
                                 "bandwidth_MiBps": total_mib / total_s, "verified": bad == 0})
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
