"""IOR-like driver: IOR's option names and access pattern, over POSIX, MPI-IO, HDF5 and hpcbridge.

    mpirun -n 4 python benchmarks/ior.py -a HPCBRIDGE -c -b 16m -t 1m -s 4 -o /tmp/ior/testFile
    mpirun -n 4 python benchmarks/ior.py --compare -b 47001 -t 47001 -s 1428 -e -i 5 --json out.json

Pattern (hpc/ior src/): transfer ``j`` of segment ``s`` of task ``r`` lies at
``s·P·b + r·b + j·t`` in a shared file, at ``s·b + j·t`` in the task's own file with ``-F``
(``testFile.%08d``). Each transfer is one call (one collective call with ``-c``), as in IOR.
``-V`` (IOR's useFileView) gives each task a file view of its blocks; hpcbridge's extra
``--one-call`` then writes all of a task's transfers in a single (collective) call through that
view, the way N-1 strided checkpoints are written with MPI-IO views.

Timing per repetition as IOR: from the first open's start to the last close's end (``-e`` puts
an fsync before the close, inside the timing); bandwidth = aggregate bytes / that time. The
summary table follows IOR's "Summary of all tests"; ``--json`` writes every figure.

``--compare`` runs, in ONE run with the modes interleaved in every repetition:
MPIIO collective (the stock path), MPIIO independent, HPCBRIDGE collective, HPCBRIDGE
independent and POSIX file-per-process, and reports the ratios of hpcbridge collective to each.

Not reproduced from IOR: random offsets (-z), data checking other than --verify, the
timestamp signature in the data, -Q task-per-node offsets other than 1, intra-test barriers (-g).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from _common import write_json  # noqa: E402

MiB = 1 << 20
APIS = ("POSIX", "MPIIO", "HDF5", "HPCBRIDGE")


def parse_size(text: str) -> int:
    """IOR sizes: ``1m``, ``256k``, ``4g``, plain bytes."""
    text = str(text).strip().lower()
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    try:
        if text and text[-1] in units:
            return int(text[:-1]) * units[text[-1]]
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (bytes, or with k/m/g)") from None


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("-a", dest="api", default="POSIX", type=str.upper, choices=APIS, help="I/O API (default POSIX)")
    p.add_argument("-b", dest="block", type=parse_size, default=MiB, help="block size per task and segment (1m)")
    p.add_argument("-t", dest="transfer", type=parse_size, default=256 << 10, help="transfer size (256k)")
    p.add_argument("-s", dest="segments", type=int, default=1, help="segment count (1)")
    p.add_argument("-F", dest="fpp", action="store_true", help="file per process")
    p.add_argument("-C", dest="reorder", action="store_true", help="reorder tasks on read: read the next task's data")
    p.add_argument("-c", dest="collective", action="store_true", help="collective I/O (MPIIO, HDF5, HPCBRIDGE)")
    p.add_argument("-e", dest="fsync", action="store_true", help="fsync before close (timed)")
    p.add_argument("-w", dest="write", action="store_true", help="write phase")
    p.add_argument("-r", dest="read", action="store_true", help="read phase")
    p.add_argument("-i", dest="repetitions", type=int, default=1, help="repetitions (1)")
    p.add_argument("-o", dest="test_file", default=None, help="test file path (default: a directory under /tmp)")
    p.add_argument("-k", dest="keep", action="store_true", help="keep the files")
    p.add_argument("-V", dest="file_view", action="store_true", help="use a file view (MPIIO, HPCBRIDGE)")
    p.add_argument("--one-call", action="store_true",
                   help="with -V: one call per task for all its transfers (the view does the striding)")
    p.add_argument("--url", help="HPCBRIDGE: backend URL of the test file (default file:// + -o)")
    p.add_argument("--hint", action="append", default=[], metavar="NAME=VALUE",
                   help="MPI-IO / hpcbridge hint (repeatable), e.g. cb_buffer_size=16m")
    p.add_argument("--verify", action="store_true", help="check every byte read against the pattern written")
    p.add_argument("--compare", action="store_true",
                   help="one run: MPIIO -c, MPIIO, HPCBRIDGE -c, HPCBRIDGE, POSIX -F, interleaved; ratios")
    p.add_argument("--json", help="write the results as JSON here")
    args = p.parse_args(argv)
    if not (args.write or args.read):
        args.write = args.read = True
    for name, value in (("-b", args.block), ("-t", args.transfer), ("-s", args.segments), ("-i", args.repetitions)):
        if value <= 0:
            p.error(f"{name} must be positive")
    if args.block % args.transfer:
        p.error(f"block size ({args.block}) must be a multiple of the transfer size ({args.transfer})")
    if args.one_call and not args.file_view:
        p.error("--one-call needs -V (the view strides the transfers)")
    if args.collective and args.api == "POSIX":
        p.error("-c (collective) needs -a MPIIO, HDF5 or HPCBRIDGE")
    if args.fpp and args.collective and not args.compare:
        p.error("-F with -c: a file per process has nothing to aggregate")
    args.hints = {}
    for item in args.hint:
        name, sep, value = item.partition("=")
        if not sep:
            p.error(f"--hint takes NAME=VALUE, got {item!r}")
        args.hints[name] = value
    return args


class Mode:
    """One IOR configuration: API, shared or per-process file, collective or not, view or not."""

    def __init__(self, api: str, collective: bool = False, fpp: bool = False, file_view: bool = False,
                 one_call: bool = False, name: str | None = None):
        self.api, self.collective, self.fpp = api, collective, fpp
        self.file_view, self.one_call = file_view, one_call
        self.name = name or "-".join([api.lower()] + (["coll"] if collective else ["indep"] if not fpp else [])
                                     + (["fpp"] if fpp else []) + (["view"] if file_view else []))


class Pattern:
    """IOR offsets and the data of one task."""

    def __init__(self, comm, args):
        self.rank, self.size = comm.rank, comm.size
        self.b, self.t, self.s = args.block, args.transfer, args.segments
        self.per_task = self.b * self.s
        self.transfers = self.b // self.t

    def offsets(self, task: int, fpp: bool) -> np.ndarray:
        seg = np.arange(self.s, dtype=np.int64)[:, None]
        j = np.arange(self.transfers, dtype=np.int64)[None, :]
        if fpp:
            return (seg * self.b + j * self.t).reshape(-1)
        return (seg * self.size * self.b + task * self.b + j * self.t).reshape(-1)

    def transfer_data(self, task: int) -> np.ndarray:
        """The transfer buffer of ``task`` (IOR fills one buffer and writes it every transfer)."""
        return ((np.arange(self.t, dtype=np.int64) * 7 + task * 31 + 1) % 251).astype(np.uint8)

    def view_type(self):
        """A filetype selecting task r's blocks: s blocks of b bytes every P·b bytes."""
        vec = MPI.BYTE.Create_vector(self.s, self.b, self.size * self.b)
        typ = vec.Create_resized(0, self.s * self.size * self.b)
        vec.Free()
        typ.Commit()
        return typ


def file_name(base: str, rank: int, fpp: bool) -> str:
    return f"{base}.{rank:08d}" if fpp else base


# -- the APIs ------------------------------------------------------------------------------------
class PosixIO:
    def __init__(self, comm, path, writing, mode, args, pattern, task):
        flags = (os.O_WRONLY | os.O_CREAT) if writing else os.O_RDONLY
        self.fd = os.open(path, flags, 0o644)

    def xfer(self, writing, offset, buf):
        if writing:
            os.pwrite(self.fd, buf, offset)
        else:
            os.preadv(self.fd, [buf], offset)

    def fsync(self):
        os.fsync(self.fd)

    def close(self):
        os.close(self.fd)


class MpiioIO:
    def __init__(self, comm, path, writing, mode, args, pattern, task):
        info = MPI.Info.Create()
        for k, v in args.hints.items():
            info.Set(k, str(v))
        amode = (MPI.MODE_WRONLY | MPI.MODE_CREATE) if writing else MPI.MODE_RDONLY
        self.fh = MPI.File.Open(MPI.COMM_SELF if mode.fpp else comm, path, amode, info)
        info.Free()
        self.collective = mode.collective
        self.view = None
        if mode.file_view and not mode.fpp:
            self.view = pattern.view_type()
            self.fh.Set_view(task * pattern.b, MPI.BYTE, self.view)

    def xfer(self, writing, offset, buf):
        call = (self.fh.Write_at_all if self.collective else self.fh.Write_at) if writing else \
            (self.fh.Read_at_all if self.collective else self.fh.Read_at)
        call(offset, buf)

    def fsync(self):
        self.fh.Sync()

    def close(self):
        self.fh.Close()
        if self.view is not None:
            self.view.Free()


class Hdf5IO:
    def __init__(self, comm, path, writing, mode, args, pattern, task):
        import h5py

        self.h5 = h5py.File(path, "w" if writing else "r", driver="mpio", comm=MPI.COMM_SELF if mode.fpp else comm)
        size = pattern.per_task * (1 if mode.fpp else comm.size)
        self.dset = self.h5.create_dataset("data", (size,), dtype="u1") if writing else self.h5["data"]
        self.collective = mode.collective

    def xfer(self, writing, offset, buf):
        n = len(buf)
        if self.collective:
            with self.dset.collective:
                self._io(writing, offset, n, buf)
        else:
            self._io(writing, offset, n, buf)

    def _io(self, writing, offset, n, buf):
        if writing:
            self.dset[offset:offset + n] = buf
        else:
            self.dset.read_direct(buf, np.s_[offset:offset + n])

    def fsync(self):
        self.h5.flush()

    def close(self):
        self.h5.close()


class HpcbridgeIO:
    def __init__(self, comm, path, writing, mode, args, pattern, task):
        from hpcbridge.mpi import File

        url = args.url if args.url and not mode.fpp else ("file://" + os.path.abspath(path))
        if args.url and mode.fpp:
            url = file_name(args.url, comm.rank, True)
        self.fh = File.open(MPI.COMM_SELF if mode.fpp else comm, url, "w" if writing else "r", hints=args.hints)
        self.collective = mode.collective
        if mode.file_view and not mode.fpp:
            view = pattern.view_type()
            self.fh.set_view(task * pattern.b, MPI.BYTE, view)
            view.Free()

    def xfer(self, writing, offset, buf):
        if writing:
            (self.fh.write_at_all if self.collective else self.fh.write_at)(offset, buf)
        else:
            (self.fh.read_at_all if self.collective else self.fh.read_at)(offset, buf)

    def fsync(self):
        self.fh.sync()

    def close(self):
        self.fh.close()


IO_CLASSES = {"POSIX": PosixIO, "MPIIO": MpiioIO, "HDF5": Hdf5IO, "HPCBRIDGE": HpcbridgeIO}


def run_phase(comm, args, mode: Mode, pattern: Pattern, base: str, writing: bool) -> dict:
    """One write or read phase; returns timing and verification figures (same on every rank)."""
    rank, P = comm.rank, comm.size
    task = rank if writing or not args.reorder else (rank + 1) % P  # -C: read the neighbour's data
    path = file_name(base, task if mode.fpp else rank, mode.fpp)
    data = pattern.transfer_data(task)
    offsets = pattern.offsets(task, mode.fpp)
    if mode.file_view and not mode.fpp:
        # Offsets inside the view: the task's own bytes are contiguous there.
        offsets = np.arange(offsets.size, dtype=np.int64) * pattern.t
    if mode.one_call:
        whole = np.tile(data, offsets.size)
    buf = data if writing else np.empty(pattern.t, dtype=np.uint8)
    bad = 0
    comm.Barrier()
    t_open = MPI.Wtime()
    handle = IO_CLASSES[mode.api](comm, path, writing, mode, args, pattern, task)
    t_io = MPI.Wtime()
    if mode.one_call:
        target = whole if writing else np.empty_like(whole)
        handle.xfer(writing, 0, target)
        if not writing and args.verify:
            bad += int(np.count_nonzero(target != whole))
    else:
        for offset in offsets.tolist():
            handle.xfer(writing, offset, buf)
            if not writing and args.verify:
                bad += int(np.count_nonzero(buf != data))
    if writing and args.fsync:
        handle.fsync()
    t_io_end = MPI.Wtime()
    handle.close()
    t_close = MPI.Wtime()
    start = comm.allreduce(t_open, op=MPI.MIN)
    end = comm.allreduce(t_close, op=MPI.MAX)
    io_time = comm.allreduce(t_io_end - t_io, op=MPI.MAX)
    bad = comm.allreduce(bad)
    total = pattern.per_task * P
    calls = 1 if mode.one_call else offsets.size
    return {"seconds": end - start, "io_seconds": io_time, "bytes": total, "MiBps": total / MiB / (end - start),
            "ops_per_s": calls * P / (end - start), "bad_bytes": bad}


def remove(comm, base: str, fpp: bool) -> None:
    comm.Barrier()
    if comm.rank == 0:
        for r in range(comm.size) if fpp else [0]:
            try:
                os.unlink(file_name(base, r, fpp))
            except FileNotFoundError:
                pass
    comm.Barrier()


def summary(results: dict, pattern: Pattern, P: int) -> list[str]:
    """IOR's "Summary of all tests" table."""
    lines = ["", "Summary of all tests:",
             f"{'Operation':<10}{'Max(MiB)':>10}{'Min(MiB)':>10}{'Mean(MiB)':>10}{'StdDev':>9}"
             f"{'Max(OPs)':>11}{'Min(OPs)':>11}{'Mean(OPs)':>11}{'StdDev':>9}{'Mean(s)':>10}"
             f"  {'#Tasks':>6} {'segcnt':>6} {'blksiz':>10} {'xsize':>9}  API"]
    for (mode_name, op), runs in results.items():
        bw = [r["MiBps"] for r in runs]
        ops = [r["ops_per_s"] for r in runs]
        secs = [r["seconds"] for r in runs]
        sd = statistics.pstdev(bw) if len(bw) > 1 else 0.0
        sd_ops = statistics.pstdev(ops) if len(ops) > 1 else 0.0
        lines.append(f"{op:<10}{max(bw):10.2f}{min(bw):10.2f}{statistics.mean(bw):10.2f}{sd:9.2f}"
                     f"{max(ops):11.2f}{min(ops):11.2f}{statistics.mean(ops):11.2f}{sd_ops:9.2f}"
                     f"{statistics.mean(secs):10.5f}  {P:6d} {pattern.s:6d} {pattern.b:10d} {pattern.t:9d}  {mode_name}")
    writes = [max(r["MiBps"] for r in runs) for (m, op), runs in results.items() if op == "write"]
    reads = [max(r["MiBps"] for r in runs) for (m, op), runs in results.items() if op == "read"]
    if writes:
        lines.append(f"Max Write: {max(writes):.2f} MiB/sec ({max(writes) * MiB / 1e6:.2f} MB/sec)")
    if reads:
        lines.append(f"Max Read:  {max(reads):.2f} MiB/sec ({max(reads) * MiB / 1e6:.2f} MB/sec)")
    return lines


def compare_modes(args) -> list[Mode]:
    view = args.file_view
    return [Mode("MPIIO", collective=True, file_view=view, one_call=args.one_call, name="mpiio-coll"),
            Mode("MPIIO", file_view=view, name="mpiio-indep"),
            Mode("HPCBRIDGE", collective=True, file_view=view, one_call=args.one_call, name="hpcbridge-coll"),
            Mode("HPCBRIDGE", file_view=view, name="hpcbridge-indep"),
            Mode("POSIX", fpp=True, name="posix-fpp")]


def main(argv=None) -> int:
    args = parse_args(argv)
    comm = MPI.COMM_WORLD
    pattern = Pattern(comm, args)
    if args.compare:
        modes = compare_modes(args)
    else:
        modes = [Mode(args.api, args.collective, args.fpp, args.file_view, args.one_call)]
    base = args.test_file
    if base is None:
        directory = comm.bcast(os.path.join("/tmp", f"hpcbridge-ior-{os.getpid()}") if comm.rank == 0 else None)
        if comm.rank == 0:
            os.makedirs(directory, exist_ok=True)
        base = os.path.join(directory, "testFile")
    elif comm.rank == 0:
        os.makedirs(os.path.dirname(os.path.abspath(base)) or ".", exist_ok=True)
    comm.Barrier()
    if comm.rank == 0:
        print(f"IOR-like: {comm.size} tasks, -b {pattern.b} -t {pattern.t} -s {pattern.s} "
              f"({pattern.per_task * comm.size / MiB:.1f} MiB aggregate), -e={args.fsync}, "
              f"-C={args.reorder}, -i {args.repetitions}, modes: {', '.join(m.name for m in modes)}", flush=True)
    results: dict = {}
    for rep in range(args.repetitions):
        # Alternate the order every repetition so no mode always runs right after another.
        ordered = modes if rep % 2 == 0 else modes[::-1]
        for mode in ordered:
            if args.write:
                r = run_phase(comm, args, mode, pattern, base, writing=True)
                results.setdefault((mode.name, "write"), []).append(r)
                if comm.rank == 0:
                    print(f"rep {rep} {mode.name:16s} write {r['MiBps']:9.1f} MiB/s  ({r['seconds']:.3f} s)", flush=True)
            if args.read:
                r = run_phase(comm, args, mode, pattern, base, writing=False)
                results.setdefault((mode.name, "read"), []).append(r)
                if comm.rank == 0:
                    print(f"rep {rep} {mode.name:16s} read  {r['MiBps']:9.1f} MiB/s  ({r['seconds']:.3f} s)"
                          + (f"  BAD BYTES {r['bad_bytes']}" if r["bad_bytes"] else ""), flush=True)
            if not args.keep:
                remove(comm, base, mode.fpp)
    out = {"benchmark": "ior", "tasks": comm.size, "block": pattern.b, "transfer": pattern.t, "segments": pattern.s,
           "fsync": args.fsync, "reorder": args.reorder, "file_view": args.file_view, "one_call": args.one_call,
           "hints": args.hints, "repetitions": args.repetitions, "verify": args.verify,
           "results": {f"{m}/{op}": runs for (m, op), runs in results.items()}}
    if args.compare:
        ratios = {}
        for op in ("write", "read"):
            def per_rep(name):
                return [r["MiBps"] for r in results.get((name, op), [])]

            mine = per_rep("hpcbridge-coll")
            if not mine:
                continue
            for other in ("mpiio-coll", "mpiio-indep", "hpcbridge-indep", "posix-fpp"):
                theirs = per_rep(other)
                if theirs:
                    ratios[f"{op}: hpcbridge-coll / {other}"] = {
                        "of_max": max(mine) / max(theirs), "of_mean": statistics.mean(mine) / statistics.mean(theirs),
                        "median_paired": statistics.median(a / b for a, b in zip(mine, theirs))}
        out["ratios"] = ratios
    if comm.rank == 0:
        print("\n".join(summary(results, pattern, comm.size)))
        if args.compare:
            print("\nRatios (hpcbridge collective / other; max of reps, mean, median of paired reps):")
            for key, value in out["ratios"].items():
                print(f"  {key:42s} {value['of_max']:6.2f}  {value['of_mean']:6.2f}  {value['median_paired']:6.2f}")
        bad = sum(r["bad_bytes"] for runs in results.values() for r in runs)
        if args.verify:
            print(f"verify: {'OK' if not bad else f'{bad} BAD BYTES'}")
        if args.json:
            write_json(args.json, out)
        sys.stdout.flush()
    if args.test_file is None and comm.rank == 0 and not args.keep:
        try:
            os.rmdir(os.path.dirname(base))
        except OSError:
            pass
    bad = sum(r["bad_bytes"] for runs in results.values() for r in runs)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
