"""NPB BT-IO's I/O pattern (MPI-IO): solution dumps of a 5-double-per-point N^3 grid.

Only the I/O pattern of BT-IO is reproduced: the BT solver is replaced by a deterministic fill
(each value encodes its dump, point and component) so that verification can check every byte.

Classes S, W, A, B, C (N = 12, 24, 64, 102, 162); a square number of ranks P = p^2; the
multi-partition decomposition (each rank owns p cells, one per z-slab); a dump every 5 of 200
steps (40 dumps; class S: 60 steps, 12 dumps). File layout: C-order (dumps, N, N, N, 5) float64.
Subtypes (../shared/BENCHMARKS.md):
* full   one collective write_at_all per dump through a file view of the rank's p cell subarrays;
* simple one independent write_at per (cell, z, y) row of 5*cell_x doubles;
* epio   file per process btio.epio.out.NNNN, one record per cell per dump.
After the timed loop, every dump is read back and compared (untimed). Reports I/O time
(harmonic mean over ranks), % of time in I/O, MB written and I/O MB/s.

Backends: the stock path is mpi4py's MPI.File on POSIX. With --url (file:///..., plfs+file:///...,
plfs+hdfs://...) every subtype runs through hpcbridge: full with hpcbridge.mpi.File (two-phase
collective I/O through the same file view), simple into a PLFS container, epio one file per rank.

    mpirun -n 4 python benchmarks/bt_io.py --class A --subtype full [--dir DIR]
"""

from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from _common import write_json  # noqa: E402

CLASSES = {"S": (12, 60), "W": (24, 200), "A": (64, 200), "B": (102, 200), "C": (162, 200)}
SUBTYPES = ("full", "simple", "epio")


def dumps_of(steps: int) -> int:
    """A write when step mod 5 == 0 or at the last step (steps counted from 1)."""
    return sum(1 for s in range(1, steps + 1) if s % 5 == 0 or s == steps)


def extent(coord: int, n: int, p: int) -> tuple[int, int]:
    """(start, size) of cell coordinate ``coord`` along one dimension."""
    base, extra = divmod(n, p)
    if coord < extra:
        return coord * (base + 1), base + 1
    return extra * (base + 1) + (coord - extra) * base, base


def cells_of(rank: int, p: int, n: int):
    """The rank's p cells: ((z0, nz), (y0, ny), (x0, nx)) for c = 0..p-1 (cell c in z-slab c)."""
    i, j = rank % p, rank // p
    return [(extent(c, n, p), extent((j - c) % p, n, p), extent((i + c) % p, n, p)) for c in range(p)]


def fill(cell, n: int, dump: int) -> np.ndarray:
    """Deterministic solution values of one cell: dump*1e9 + 5*linear point index + component."""
    (z0, nz), (y0, ny), (x0, nx) = cell
    z, y, x = np.meshgrid(np.arange(z0, z0 + nz), np.arange(y0, y0 + ny), np.arange(x0, x0 + nx), indexing="ij")
    point = (z * n + y) * n + x
    return (dump * 1e9 + 5.0 * point)[..., None] + np.arange(5, dtype=np.float64)


def rows(cell, n: int, dump: int):
    """The simple subtype's rows of one cell: ``(dz, dy, file offset)`` of each (z, y) row of
    5*cell_x doubles in dump ``dump``."""
    (z0, nz), (y0, ny), (x0, _) = cell
    for dz in range(nz):
        for dy in range(ny):
            yield dz, dy, 8 * 5 * (x0 + n * (y0 + dy + n * (z0 + dz + n * dump)))


def full_view_types(n, cells):
    """BT-IO full's etype (5 doubles) and filetype: the rank's p cell subarrays of one dump."""
    etype = MPI.DOUBLE.Create_contiguous(5).Commit()
    subarrays = [etype.Create_subarray([n, n, n], [c[0][1], c[1][1], c[2][1]], [c[0][0], c[1][0], c[2][0]],
                                       order=MPI.ORDER_C) for c in cells]
    combined = MPI.Datatype.Create_struct([1] * len(cells), [0] * len(cells), subarrays)
    filetype = combined.Create_resized(0, n ** 3 * 40).Commit()
    for t in subarrays + [combined]:
        t.Free()
    return etype, filetype


def epio_name(path: str, rank: int) -> str:
    """The epio file of ``rank`` beside ``path`` (``.../btio.out``): ``.../btio.epio.out.NNNN``,
    NPB's name."""
    stem = path[:-len(".out")] if path.endswith(".out") else path
    return f"{stem}.epio.out.{rank:04d}"


class StockIO:
    """mpi4py MPI.File on a POSIX path."""

    def __init__(self, comm, path, subtype, n, cells, ndumps):
        self.comm, self.subtype, self.n, self.cells = comm, subtype, n, cells
        self.dump_bytes = n ** 3 * 40
        if subtype == "epio":
            self.path = epio_name(path, comm.rank)
            self.fh = MPI.File.Open(MPI.COMM_SELF, self.path, MPI.MODE_CREATE | MPI.MODE_RDWR)
        else:
            self.path = path
            self.fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_RDWR)
        if subtype == "full":
            self.etype, self.filetype = full_view_types(n, cells)

    def write(self, dump, blocks):
        if self.subtype == "full":
            self.fh.Set_view(dump * self.dump_bytes, self.etype, self.filetype)
            self.fh.Write_at_all(0, np.concatenate([b.ravel() for b in blocks]))
        elif self.subtype == "simple":
            for cell, block in zip(self.cells, blocks):
                for dz, dy, off in rows(cell, self.n, dump):
                    self.fh.Write_at(off, block[dz, dy])
        else:
            # One record per cell per dump, as NPB's epio (one Fortran write per cell): the
            # records of a dump follow one another, cell 0 first.
            offset = dump * sum(b.size for b in blocks) * 8
            for block in blocks:
                self.fh.Write_at(offset, block)
                offset += block.nbytes

    def read(self, dump, shapes):
        if self.subtype == "full":
            self.fh.Set_view(dump * self.dump_bytes, self.etype, self.filetype)
            out = np.empty(sum(math.prod(s) for s in shapes))
            self.fh.Read_at_all(0, out)
        elif self.subtype == "simple":
            parts = []
            for cell, shape in zip(self.cells, shapes):
                block = np.empty(shape)
                for dz, dy, off in rows(cell, self.n, dump):
                    self.fh.Read_at(off, block[dz, dy])
                parts.append(block.ravel())
            out = np.concatenate(parts)
        else:
            out = np.empty(sum(math.prod(s) for s in shapes))
            self.fh.Read_at(dump * out.nbytes, out)
        return out

    def sync(self):
        self.fh.Sync()

    def close(self):
        self.fh.Close()

    def reopen_for_read(self):
        self.fh = MPI.File.Open(MPI.COMM_SELF if self.subtype == "epio" else self.comm, self.path, MPI.MODE_RDONLY)

    def release(self):
        """Free the view datatypes (full): after the last close."""
        if self.subtype == "full":
            self.etype.Free()
            self.filetype.Free()

    def size(self):
        return self.fh.Get_size()


class HpcbridgeIO:
    """BT-IO through hpcbridge on any backend URL: full with hpcbridge.mpi.File (two-phase
    collective writes through the same file view as MPI-IO), simple into a PLFS container, epio
    as one hpcbridge file per rank."""

    def __init__(self, comm, url, subtype, n, cells, ndumps, hints=None):
        import hpcbridge
        import hpcbridge.plfs

        self.comm, self.subtype, self.n, self.cells = comm, subtype, n, cells
        self.dump_bytes = n ** 3 * 40
        self._hpcbridge = hpcbridge
        self.hints = hints
        if subtype == "full":
            from hpcbridge.mpi import File

            self.url = url
            self.etype, self.filetype = full_view_types(n, cells)
            self.f = File.open(comm, url, "w", hints=hints)
            return
        if subtype == "simple":
            self.url = url
            self.f = hpcbridge.plfs.open(url, "wb", comm=comm)
        else:
            self.url = epio_name(url, comm.rank)
            self.f = hpcbridge.open(self.url, "wb")

    def write(self, dump, blocks):
        if self.subtype == "full":
            self.f.set_view(dump * self.dump_bytes, self.etype, self.filetype)
            self.f.write_at_all(0, np.concatenate([b.ravel() for b in blocks]))
        elif self.subtype == "simple":
            for cell, block in zip(self.cells, blocks):
                for dz, dy, off in rows(cell, self.n, dump):
                    self.f.pwrite(block[dz, dy], off)
        else:
            for block in blocks:
                self.f.write(block)

    def sync(self):
        self.f.sync()

    def close(self):
        self.f.close()

    def release(self):
        """Free the view datatypes (full): after the last close."""
        if self.subtype == "full":
            self.etype.Free()
            self.filetype.Free()

    def reopen_for_read(self):
        import hpcbridge.plfs

        if self.subtype == "full":
            from hpcbridge.mpi import File

            self.f = File.open(self.comm, self.url, "r", hints=self.hints)
            return
        self.f = (hpcbridge.plfs.open(self.url, "rb", comm=self.comm) if self.subtype == "simple"
                  else self._hpcbridge.open(self.url, "rb"))

    def read(self, dump, shapes):
        total = sum(math.prod(s) for s in shapes)
        if self.subtype == "full":
            self.f.set_view(dump * self.dump_bytes, self.etype, self.filetype)
            out = np.empty(total)
            self.f.read_at_all(0, out)
            return out
        if self.subtype == "epio":
            out = np.empty(total)
            self.f.preadinto(out, dump * out.nbytes)
            return out
        parts = []
        for cell, shape in zip(self.cells, shapes):
            block = np.empty(shape)
            for dz, dy, off in rows(cell, self.n, dump):
                self.f.preadinto(block[dz, dy], off)
            parts.append(block.ravel())
        return np.concatenate(parts)

    def size(self):
        fs, path = self._hpcbridge.url_to_fs(self.url)
        return fs.info(path).size


def run(comm, cls: str = "A", subtype: str = "full", path: str | None = None, url: str | None = None,
        hints=None, verify: bool = True, keep: bool = False) -> dict:
    """One BT-IO run (collective over ``comm``): the timed dumps, then (``verify``) the untimed
    read-back of every dump. The stock path (mpi4py MPI.File at ``path``) unless ``url`` is given
    (hpcbridge; ``hints`` go to hpcbridge.mpi.File for the full subtype). Returns the figures,
    the same on every rank (``verified`` is None without ``verify``)."""
    p = math.isqrt(comm.size)
    if p * p != comm.size:
        raise ValueError(f"BT-IO needs a square number of ranks (1, 4, 9, 16, ...), got {comm.size}")
    if cls not in CLASSES:
        raise ValueError(f"BT-IO class must be one of {', '.join(CLASSES)}, got {cls!r}")
    if subtype not in SUBTYPES:
        raise ValueError(f"BT-IO subtype must be one of {', '.join(SUBTYPES)}, got {subtype!r}")
    n, steps = CLASSES[cls]
    ndumps = dumps_of(steps)
    cells = cells_of(comm.rank, p, n)
    shapes = [(c[0][1], c[1][1], c[2][1], 5) for c in cells]
    path = url if url is not None else path
    if comm.rank == 0 and url is None and subtype != "epio" and os.path.exists(path):
        os.unlink(path)
    comm.Barrier()
    io = StockIO(comm, path, subtype, n, cells, ndumps) if url is None else \
        HpcbridgeIO(comm, path, subtype, n, cells, ndumps, hints)

    comm.Barrier()
    started = MPI.Wtime()
    io_time = 0.0
    for dump in range(ndumps):
        blocks = [fill(c, n, dump) for c in cells]  # stands in for the solver steps
        t = MPI.Wtime()
        io.write(dump, blocks)
        io_time += MPI.Wtime() - t
    t = MPI.Wtime()
    io.sync()
    io.close()  # NPB times its btio_cleanup (the close) as I/O too
    io_time += MPI.Wtime() - t
    comm.Barrier()
    total_time = MPI.Wtime() - started

    bad = 0
    if verify:
        io.reopen_for_read()
        for dump in range(ndumps):  # verification, untimed
            expected = np.concatenate([fill(c, n, dump).ravel() for c in cells])
            bad += int(np.count_nonzero(io.read(dump, shapes) != expected))
        size = io.size() if subtype != "epio" else None
        io.close()
    elif subtype == "epio":
        size = None
    else:
        size = _size_of(url) if url is not None else os.path.getsize(path)
    io.release()
    bad = comm.allreduce(bad)
    written = n ** 3 * 40 * ndumps
    if subtype == "epio":
        size = comm.allreduce(_size_of(io.url) if url is not None else os.path.getsize(io.path))
    harmonic = comm.size / comm.allreduce(1.0 / max(io_time, 1e-9))
    comm.Barrier()
    if comm.rank == 0 and not keep:
        if url is None:
            for name in ([path] if subtype != "epio" else [epio_name(path, r) for r in range(comm.size)]):
                if os.path.exists(name):
                    os.unlink(name)
        else:
            import hpcbridge

            for name in ([url] if subtype != "epio" else [epio_name(url, r) for r in range(comm.size)]):
                fs, fpath = hpcbridge.url_to_fs(name)
                if fs.exists(fpath):
                    fs.rm(fpath, recursive=True)
    comm.Barrier()
    backend = "mpi-io/posix" if url is None else url.split("://")[0]
    return {"benchmark": "bt_io", "class": cls, "n": n, "dumps": ndumps, "subtype": subtype, "ranks": comm.size,
            "backend": backend, "io_seconds": harmonic, "total_seconds": total_time, "bytes": written,
            "file_bytes": size, "io_MBps": written / harmonic / 1e6, "verified": (bad == 0) if verify else None,
            "bad_values": bad}


def _size_of(url: str) -> int:
    import hpcbridge

    fs, path = hpcbridge.url_to_fs(url)
    return fs.info(path).size


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Only BT-IO's I/O pattern is reproduced: the solver is replaced by a deterministic fill "
               "that verification checks.")
    parser.add_argument("--class", dest="cls", choices=list(CLASSES), default="A", help="problem class (A)")
    parser.add_argument("--subtype", choices=list(SUBTYPES), default="full")
    parser.add_argument("--dir", default=".", help="directory of the output file (stock MPI-IO path)")
    parser.add_argument("--url", default=None, help="an hpcbridge URL (plfs+file:///..., plfs+hdfs://..., file:///...)"
                                                    " to write through hpcbridge instead")
    parser.add_argument("--keep", action="store_true", help="keep the output")
    parser.add_argument("--output", default="results/bt_io.json")
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    p = math.isqrt(comm.size)
    if p * p != comm.size:
        parser.error(f"BT-IO needs a square number of ranks (1, 4, 9, 16, ...), got {comm.size}")
    result = run(comm, args.cls, args.subtype, path=os.path.join(args.dir, "btio.out"), url=args.url,
                 keep=args.keep)
    ok = result["verified"]
    if comm.rank != 0:
        return 0 if ok else 1
    harmonic, total_time, written = result["io_seconds"], result["total_seconds"], result["bytes"]
    print(f" BT-IO class {args.cls} ({result['n']}^3, {result['dumps']} dumps), subtype {args.subtype}, "
          f"{comm.size} ranks, {result['backend']}")
    print(f"   I/O time (harmonic mean)  {harmonic:10.3f} s")
    print(f"   total time                {total_time:10.3f} s   ({100 * harmonic / total_time:.1f}% in I/O)")
    print(f"   data written              {written / 1e6:10.2f} MB   (file size {result['file_bytes'] / 1e6:.2f} MB)")
    print(f"   I/O bandwidth             {written / harmonic / 1e6:10.2f} MB/s")
    verdict = "SUCCESSFUL" if ok else f"FAILED ({result['bad_values']} values)"
    print(f"   verification              {verdict}")
    write_json(args.output, {k: v for k, v in result.items() if k != "bad_values"})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
