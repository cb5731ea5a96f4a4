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

``--matrix`` runs, in ONE run, every pattern of the collective-I/O matrix (LANL strided 47001 B
one call per object and one call through a view, IOR segmented and strided 1 MiB, 4 KiB
strided, BT-IO class A full) in five modes each: hpcbridge collective with its default hints,
hpcbridge collective with tuned hints (``TUNED_HINTS``, or ``--tuned-hint``), Open MPI's
MPI-IO collective (stock, no hints), MPI-IO independent and file per process. Repetitions are
interleaved (repetition k runs every row and mode before k+1; mode order alternates); the first
is the warm-up, reported separately; the medians of the others give the ratios to Open MPI's
collective. Sizes are options (``--objects``, ``--mib``, ``--small``, ``--bt-class``).

Not reproduced from IOR: random offsets (-z), data checking other than --verify, the
timestamp signature in the data, -Q task-per-node offsets other than 1, intra-test barriers (-g).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import bt_io  # noqa: E402
from _common import read_shift, write_json  # noqa: E402

MiB = 1 << 20
APIS = ("POSIX", "MPIIO", "HDF5", "HPCBRIDGE")
#: What a checked read fills its buffer with first: a byte value the pattern never holds.
SENTINEL = 255


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
    p.add_argument("-C", dest="reorder", action="store_true",
                   help="reorder tasks on read: read the next node's data (the next task's on one node)")
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
    m = p.add_argument_group("--matrix")
    m.add_argument("--matrix", action="store_true",
                   help="one run over every pattern of the matrix, five modes each, interleaved; medians and ratios")
    m.add_argument("--rows", default=",".join(ROW_NAMES), metavar="ROW,...",
                   help=f"the matrix rows to run (default all: {','.join(ROW_NAMES)})")
    m.add_argument("--objects", type=int, default=1428, help="LANL rows: 47001-byte objects per task (1428)")
    m.add_argument("--mib", type=int, default=64, help="1 MiB rows: MiB per task (64)")
    m.add_argument("--small", type=int, default=4096, help="4 KiB row: transfers per task (4096)")
    m.add_argument("--bt-class", default="A", choices=list(bt_io.CLASSES), help="BT-IO row: class (A)")
    m.add_argument("--tuned-hint", action="append", default=[], metavar="NAME=VALUE",
                   help="hpcbridge-tuned mode: these hints on every row instead of TUNED_HINTS (repeatable)")
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
    if args.matrix and args.compare:
        p.error("--matrix and --compare are different runs: choose one")
    if args.matrix and (args.hint or args.url):
        p.error("--matrix runs hpcbridge with default and tuned hints (--tuned-hint), stock MPI-IO with none, "
                "on local files: --hint and --url do not apply")
    for name, value in (("--objects", args.objects), ("--mib", args.mib), ("--small", args.small)):
        if value <= 0:
            p.error(f"{name} must be positive")
    args.rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = sorted(set(args.rows) - set(ROW_NAMES))
    if unknown or not args.rows:
        p.error(f"--rows: unknown row(s) {', '.join(unknown) or '(none given)'}; rows: {', '.join(ROW_NAMES)}")

    def hint_items(items, option):
        out = {}
        for item in items:
            name, sep, value = item.partition("=")
            if not sep:
                p.error(f"{option} takes NAME=VALUE, got {item!r}")
            out[name] = value
        return out

    args.hints = hint_items(args.hint, "--hint")
    args.tuned_hints = hint_items(args.tuned_hint, "--tuned-hint") if args.tuned_hint else None
    return args


class Mode:
    """One IOR configuration: API, shared or per-process file, collective or not, view or not, and
    its hints (None: the ``--hint`` ones)."""

    def __init__(self, api: str, collective: bool = False, fpp: bool = False, file_view: bool = False,
                 one_call: bool = False, name: str | None = None, hints: dict | None = None):
        self.api, self.collective, self.fpp = api, collective, fpp
        self.file_view, self.one_call = file_view, one_call
        self.hints = hints
        self.name = name or "-".join([api.lower()] + (["coll"] if collective else ["indep"] if not fpp else [])
                                     + (["fpp"] if fpp else []) + (["view"] if file_view else []))

    def hints_of(self, args) -> dict:
        return args.hints if self.hints is None else self.hints


class Pattern:
    """IOR offsets and the data of one task: ``b`` bytes per task and segment, ``t`` per transfer,
    ``s`` segments."""

    def __init__(self, comm, block: int, transfer: int, segments: int):
        self.rank, self.size = comm.rank, comm.size
        self.b, self.t, self.s = block, transfer, segments
        self.per_task = self.b * self.s
        self.transfers = self.b // self.t

    def offsets(self, task: int, fpp: bool) -> np.ndarray:
        seg = np.arange(self.s, dtype=np.int64)[:, None]
        j = np.arange(self.transfers, dtype=np.int64)[None, :]
        if fpp:
            return (seg * self.b + j * self.t).reshape(-1)
        return (seg * self.size * self.b + task * self.b + j * self.t).reshape(-1)

    def transfer_data(self, task: int) -> np.ndarray:
        """The transfer buffer of ``task`` (IOR fills one buffer and writes it every transfer),
        byte values below 251 (never ``SENTINEL``)."""
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
# Each API's ``call(writing)`` returns the function the timed loop calls as ``call(offset, buf)``
# once per transfer. For MPI-IO it is mpi4py's bound method itself (``File.Write_at_all``): the
# loop adds nothing to a C loop but the interpreter's dispatch of that one call.
class PosixIO:
    def __init__(self, comm, path, writing, mode, args, pattern, task):
        flags = (os.O_WRONLY | os.O_CREAT) if writing else os.O_RDONLY
        self.fd = os.open(path, flags, 0o644)

    def call(self, writing):
        fd = self.fd
        if writing:
            pwrite = os.pwrite
            return lambda offset, buf: pwrite(fd, buf, offset)
        preadv = os.preadv
        return lambda offset, buf: preadv(fd, [buf], offset)

    def fsync(self):
        os.fsync(self.fd)

    def close(self):
        os.close(self.fd)


class MpiioIO:
    def __init__(self, comm, path, writing, mode, args, pattern, task):
        info = MPI.Info.Create()
        for k, v in mode.hints_of(args).items():
            info.Set(k, str(v))
        amode = (MPI.MODE_WRONLY | MPI.MODE_CREATE) if writing else MPI.MODE_RDONLY
        self.fh = MPI.File.Open(MPI.COMM_SELF if mode.fpp else comm, path, amode, info)
        info.Free()
        self.collective = mode.collective
        self.view = None
        if mode.file_view and not mode.fpp:
            self.view = pattern.view_type()
            self.fh.Set_view(task * pattern.b, MPI.BYTE, self.view)

    def call(self, writing):
        fh = self.fh
        if writing:
            return fh.Write_at_all if self.collective else fh.Write_at
        return fh.Read_at_all if self.collective else fh.Read_at

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

    def call(self, writing):
        return lambda offset, buf: self.xfer(writing, offset, buf)

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
            url = file_name(args.url, task, True)  # -C: the read task's file, not this rank's
        self.fh = File.open(MPI.COMM_SELF if mode.fpp else comm, url, "w" if writing else "r",
                            hints=mode.hints_of(args))
        self.collective = mode.collective
        if mode.file_view and not mode.fpp:
            view = pattern.view_type()
            self.fh.set_view(task * pattern.b, MPI.BYTE, view)
            view.Free()

    def call(self, writing):
        fh = self.fh
        if writing:
            return fh.write_at_all if self.collective else fh.write_at
        return fh.read_at_all if self.collective else fh.read_at

    def fsync(self):
        self.fh.sync()

    def close(self):
        self.fh.close()


IO_CLASSES = {"POSIX": PosixIO, "MPIIO": MpiioIO, "HDF5": Hdf5IO, "HPCBRIDGE": HpcbridgeIO}


def run_phase(comm, args, mode: Mode, pattern: Pattern, base: str, writing: bool) -> dict:
    """One write or read phase; returns timing and verification figures (same on every rank).

    Everything a transfer needs (its offset as a Python int, the buffer, the bound call) is made
    before the clock starts: the timed loop is ``call(offset, buf)`` and nothing else."""
    rank, P = comm.rank, comm.size
    # -C: read what the next node wrote (IOR's tasks-per-node shift; one task on one node).
    task = rank if writing or not args.reorder else (rank + read_shift(comm)) % P
    path = file_name(base, task if mode.fpp else rank, mode.fpp)
    data = pattern.transfer_data(task)
    offsets = pattern.offsets(task, mode.fpp)
    if mode.file_view and not mode.fpp:
        # Offsets inside the view: the task's own bytes are contiguous there.
        offsets = np.arange(offsets.size, dtype=np.int64) * pattern.t
    if mode.one_call:
        # One call for all transfers: at 0 in the view, or at 0 of the task's own file (contiguous).
        whole = np.tile(data, offsets.size)
        buf = whole if writing else np.empty_like(whole)
        offset_list = [0]
    else:
        buf = data if writing else np.empty(pattern.t, dtype=np.uint8)
        offset_list = offsets.tolist()
    checking = not writing and args.verify
    bad = 0
    if writing:
        # As IOR (without -E): every write phase starts from no file, -k or not; an existing
        # file (a kept one, a longer one) is not overwritten in place. Untimed.
        remove(comm, base, mode.fpp)
    comm.Barrier()
    t_open = MPI.Wtime()
    handle = IO_CLASSES[mode.api](comm, path, writing, mode, args, pattern, task)
    call = handle.call(writing)
    t_io = MPI.Wtime()
    if not checking:
        for offset in offset_list:
            call(offset, buf)
    # Checked reads start from a byte the pattern never holds (its values are below 251): a
    # short read (a truncated file) leaves it, and counts as bad bytes instead of passing
    # with the previous transfer's bytes still in the buffer.
    elif mode.one_call:
        buf.fill(SENTINEL)
        call(0, buf)
        bad += int(np.count_nonzero(buf != whole))
    else:
        for offset in offset_list:
            buf.fill(SENTINEL)
            call(offset, buf)
            bad += int(np.count_nonzero(buf != data))
    if writing and args.fsync:
        handle.fsync()
    t_io_end = MPI.Wtime()
    handle.close()
    t_close = MPI.Wtime()
    start = comm.allreduce(t_open, op=MPI.MIN)
    end = comm.allreduce(t_close, op=MPI.MAX)
    io_time = comm.allreduce(t_io_end - t_io, op=MPI.MAX)
    if writing and args.verify and mode.api != "HDF5" and not (args.url and mode.api == "HPCBRIDGE"):
        bad += check_written(comm, pattern, mode, base)
    bad = comm.allreduce(bad)
    total = pattern.per_task * P
    calls = len(offset_list)
    return {"seconds": end - start, "io_seconds": io_time, "bytes": total, "MiBps": total / MiB / (end - start),
            "ops_per_s": calls * P / (end - start), "bad_bytes": bad}


def check_written(comm, pattern: Pattern, mode: Mode, base: str) -> int:
    """Untimed, after a write phase: this task's bytes read back from the file with plain
    ``os.pread`` (not through the API under test) and compared with the pattern; returns the
    count of wrong or missing bytes. Raw local files only: not HDF5 (its data sit after its own
    metadata) nor ``--url`` (there the read phase with ``--verify`` checks)."""
    task = comm.rank
    path = file_name(base, task, mode.fpp)
    if not os.path.exists(path):
        return pattern.per_task
    expected = np.tile(pattern.transfer_data(task), pattern.transfers)
    bad = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        for seg in range(pattern.s):
            offset = seg * pattern.b if mode.fpp else (seg * pattern.size + task) * pattern.b
            got = np.frombuffer(os.pread(fd, pattern.b, offset), dtype=np.uint8)
            bad += pattern.b - got.size + int(np.count_nonzero(got != expected[:got.size]))
    finally:
        os.close(fd)
    return bad


def remove(comm, base: str, fpp: bool) -> None:
    comm.Barrier()
    if comm.rank == 0:
        for r in range(comm.size) if fpp else [0]:
            try:
                os.unlink(file_name(base, r, fpp))
            except FileNotFoundError:
                pass
    comm.Barrier()


def summary(results: dict, P: int) -> list[str]:
    """IOR's "Summary of all tests" table; ``results`` maps ``(row, mode, op)`` to the runs."""
    lines = ["", "Summary of all tests:",
             f"{'Operation':<10}{'Max(MiB)':>10}{'Min(MiB)':>10}{'Mean(MiB)':>10}{'StdDev':>9}"
             f"{'Max(OPs)':>11}{'Min(OPs)':>11}{'Mean(OPs)':>11}{'StdDev':>9}{'Mean(s)':>10}"
             f"  {'#Tasks':>6} {'segcnt':>6} {'blksiz':>10} {'xsize':>9}  API"]
    for (row, mode_name, op), runs in results.items():
        bw = [r["MiBps"] for r in runs]
        ops = [r["ops_per_s"] for r in runs]
        secs = [r["seconds"] for r in runs]
        sd = statistics.pstdev(bw) if len(bw) > 1 else 0.0
        sd_ops = statistics.pstdev(ops) if len(ops) > 1 else 0.0
        lines.append(f"{op:<10}{max(bw):10.2f}{min(bw):10.2f}{statistics.mean(bw):10.2f}{sd:9.2f}"
                     f"{max(ops):11.2f}{min(ops):11.2f}{statistics.mean(ops):11.2f}{sd_ops:9.2f}"
                     f"{statistics.mean(secs):10.5f}  {P:6d} {row.s:6d} {row.b:10d} {row.t:9d}  {mode_name}")
    writes = [max(r["MiBps"] for r in runs) for (_, m, op), runs in results.items() if op == "write"]
    reads = [max(r["MiBps"] for r in runs) for (_, m, op), runs in results.items() if op == "read"]
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


# -- the matrix ----------------------------------------------------------------------------------
class Row:
    """One pattern of ``--matrix``: an IOR pattern (``b``, ``t``, ``s``, view or not) run by
    :func:`run_phase`, or BT-IO (``btio`` = its class) run by :func:`bt_io.run`."""

    def __init__(self, name: str, label: str, block: int = 0, transfer: int = 1, segments: int = 0,
                 view: bool = False, tuned: dict | None = None, btio: str | None = None):
        self.name, self.label = name, label
        self.b, self.t, self.s = block, transfer, segments
        self.view, self.btio = view, btio
        self.tuned = tuned or {}

    def modes(self, tuned: dict) -> list[Mode]:
        view = self.view
        return [Mode("HPCBRIDGE", collective=True, file_view=view, one_call=view, name="hpcbridge-default", hints={}),
                Mode("HPCBRIDGE", collective=True, file_view=view, one_call=view, name="hpcbridge-tuned",
                     hints=tuned),
                Mode("MPIIO", collective=True, file_view=view, one_call=view, name="mpiio-coll", hints={}),
                Mode("MPIIO", file_view=view, one_call=view, name="mpiio-indep", hints={}),
                Mode("POSIX", fpp=True, one_call=view, name="posix-fpp", hints={})]

    def run(self, comm, args, mode: Mode, base: str, writing: bool) -> dict:
        if self.btio is None:
            return run_phase(comm, args, mode, Pattern(comm, self.b, self.t, self.s), base, writing)
        # BT-IO: full through hpcbridge or Open MPI (collective), its "simple" subtype as the
        # independent mode, "epio" as file per process. Its own timing: the harmonic mean over
        # ranks of the time in write calls, the final sync and the close.
        subtype = {"mpiio-indep": "simple", "posix-fpp": "epio"}.get(mode.name, "full")
        url = "file://" + os.path.abspath(base) if mode.api == "HPCBRIDGE" else None
        r = bt_io.run(comm, self.btio, subtype, path=base, url=url, hints=mode.hints_of(args),
                      verify=args.verify, keep=args.keep)
        return {"seconds": r["io_seconds"], "io_seconds": r["io_seconds"], "bytes": r["bytes"],
                "MiBps": r["bytes"] / MiB / r["io_seconds"], "ops_per_s": r["dumps"] / r["io_seconds"],
                "bad_bytes": 0 if r["verified"] in (True, None) else 8 * r["bad_values"], "subtype": subtype}


#: The hpcbridge-tuned mode's hints: many small collective calls gain from write-behind across
#: calls, and every synced checkpoint from O_DIRECT.
TUNED_PER_CALL = {"cb_write_behind": "true", "direct_write": "true"}
TUNED_ONE_CALL = {"direct_write": "true"}
TUNED_HINTS = {"lanl-per-object": TUNED_PER_CALL, "lanl-view": TUNED_ONE_CALL, "ior-segmented-1m": TUNED_PER_CALL,
               "ior-strided-1m": TUNED_PER_CALL, "strided-4k": TUNED_PER_CALL, "bt-io-full": TUNED_ONE_CALL}
ROW_NAMES = tuple(TUNED_HINTS)


def matrix_rows(args) -> list[Row]:
    rows = {
        "lanl-per-object": Row("lanl-per-object", "LANL strided 47001 B, one call per object",
                               47001, 47001, args.objects),
        "lanl-view": Row("lanl-view", "LANL strided 47001 B, one call through a view (-V --one-call)",
                         47001, 47001, args.objects, view=True),
        "ior-segmented-1m": Row("ior-segmented-1m", "IOR segmented 1 MiB (-b {mib}m -t 1m -s 1)",
                                args.mib * MiB, MiB, 1),
        "ior-strided-1m": Row("ior-strided-1m", "IOR strided 1 MiB (-b 1m -t 1m -s {mib})", MiB, MiB, args.mib),
        "strided-4k": Row("strided-4k", "4 KiB strided (-b 4k -t 4k -s {small})", 4096, 4096, args.small),
        "bt-io-full": Row("bt-io-full", f"BT-IO class {args.bt_class} full", btio=args.bt_class),
    }
    for row in rows.values():
        row.label = row.label.format(mib=args.mib, small=args.small)
        row.tuned = args.tuned_hints if args.tuned_hints is not None else TUNED_HINTS[row.name]
    return [rows[name] for name in args.rows]


def run_all(comm, args, jobs: list, base: str) -> dict:
    """The repetitions: ``jobs`` is a list of ``(row, modes)``; repetition k runs every row and
    mode before k+1, the mode order alternating so no mode always follows another. Returns
    ``{(row, mode name, op): [figures of each repetition]}``."""
    results: dict = {}
    for rep in range(args.repetitions):
        for row, modes in jobs:
            for mode in (modes if rep % 2 == 0 else modes[::-1]):
                phases = [True] if row.btio else [w for w, on in ((True, args.write), (False, args.read)) if on]
                for writing in phases:
                    r = row.run(comm, args, mode, base, writing)
                    op = "write" if writing else "read"
                    results.setdefault((row, mode.name, op), []).append(r)
                    if comm.rank == 0:
                        print(f"rep {rep} {row.name + ' ' if args.matrix else ''}{mode.name:17s} {op:5s} "
                              f"{r['MiBps']:9.1f} MiB/s  ({r['seconds']:.3f} s)"
                              + (f"  BAD BYTES {r['bad_bytes']}" if r["bad_bytes"] else ""), flush=True)
                if not args.keep and not row.btio:
                    remove(comm, base, mode.fpp)
    return results


def matrix_report(results: dict, rows: list[Row]) -> dict:
    """Per row and mode: the warm-up (first repetition) and the median of the others; per row,
    hpcbridge default and tuned over Open MPI's collective (ratios of the medians)."""
    out = {}
    for row in rows:
        entry = {"label": row.label, "block": row.b, "transfer": row.t, "segments": row.s, "view": row.view,
                 "btio_class": row.btio, "tuned_hints": row.tuned, "modes": {}, "ratios": {}}
        for (r, mode_name, op), runs in results.items():
            if r is not row:
                continue
            bw = [x["MiBps"] for x in runs]
            steady = bw[1:] or bw
            entry["modes"].setdefault(mode_name, {})[op] = {
                "warmup_MiBps": bw[0], "median_MiBps": statistics.median(steady), "MiBps": bw,
                "bad_bytes": sum(x["bad_bytes"] for x in runs), "runs": runs}
        for op in ("write", "read"):
            base = entry["modes"].get("mpiio-coll", {}).get(op)
            if not base:
                continue
            for mine in ("hpcbridge-default", "hpcbridge-tuned"):
                got = entry["modes"].get(mine, {}).get(op)
                if got:
                    entry["ratios"][f"{op}: {mine} / mpiio-coll"] = got["median_MiBps"] / base["median_MiBps"]
        out[row.name] = entry
    return out


def matrix_table(report: dict, op: str) -> list[str]:
    names = ("hpcbridge-default", "hpcbridge-tuned", "mpiio-coll", "mpiio-indep", "posix-fpp")
    short = ("hpcb-default", "hpcb-tuned", "ompi-coll", "ompi-indep", "fpp")
    lines = [f"\nMatrix, {op} (MiB/s: median of the repetitions after the first [warm-up, in brackets]):",
             f"{'row':<18}" + "".join(f"{s:>22}" for s in short) + f"{'default/coll':>14}{'tuned/coll':>12}"]
    for name, entry in report.items():
        cells = []
        for mode in names:
            fig = entry["modes"].get(mode, {}).get(op)
            cells.append(f"{fig['median_MiBps']:10.1f} [{fig['warmup_MiBps']:8.1f}]" if fig else f"{'-':>21}")
        if all(c.strip() == "-" for c in cells):
            continue  # no such phase in this row (BT-IO has no read phase)
        d = entry["ratios"].get(f"{op}: hpcbridge-default / mpiio-coll")
        t = entry["ratios"].get(f"{op}: hpcbridge-tuned / mpiio-coll")
        lines.append(f"{name:<18}" + "".join(f"{c:>22}" for c in cells)
                     + (f"{d:14.2f}" if d is not None else f"{'-':>14}") + (f"{t:12.2f}" if t is not None else f"{'-':>12}"))
    return lines


def main(argv=None) -> int:
    args = parse_args(argv)
    comm = MPI.COMM_WORLD
    if args.matrix:
        rows = matrix_rows(args)
        if any(r.btio for r in rows) and math.isqrt(comm.size) ** 2 != comm.size:
            if comm.rank == 0:
                print(f"ior.py --matrix: the BT-IO row needs a square number of ranks, got {comm.size} "
                      "(leave it out with --rows)", file=sys.stderr)
            return 2
        jobs = [(row, row.modes(row.tuned)) for row in rows]
    else:
        row = Row("ior", "IOR", args.block, args.transfer, args.segments, view=args.file_view)
        modes = compare_modes(args) if args.compare else \
            [Mode(args.api, args.collective, args.fpp, args.file_view, args.one_call)]
        rows, jobs = [row], [(row, modes)]
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
        if args.matrix:
            print(f"IOR-like matrix: {comm.size} tasks, -e={args.fsync}, -i {args.repetitions}, rows: "
                  + "; ".join(f"{r.name} ({r.label}, tuned {r.tuned})" for r in rows), flush=True)
        else:
            print(f"IOR-like: {comm.size} tasks, -b {row.b} -t {row.t} -s {row.s} "
                  f"({row.b * row.s * comm.size / MiB:.1f} MiB aggregate), -e={args.fsync}, "
                  f"-C={args.reorder}, -i {args.repetitions}, modes: {', '.join(m.name for m in modes)}", flush=True)
    results = run_all(comm, args, jobs, base)
    out = {"benchmark": "ior", "tasks": comm.size, "fsync": args.fsync, "reorder": args.reorder,
           "repetitions": args.repetitions, "verify": args.verify}
    if args.matrix:
        out.update({"matrix": matrix_report(results, rows), "load": os.getloadavg()})
    else:
        out.update({"block": row.b, "transfer": row.t, "segments": row.s, "file_view": args.file_view,
                    "one_call": args.one_call, "hints": args.hints,
                    "results": {f"{m}/{op}": runs for (_, m, op), runs in results.items()}})
    if args.compare:
        ratios = {}
        for op in ("write", "read"):
            def per_rep(name):
                return [r["MiBps"] for r in results.get((row, name, op), [])]

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
        if args.matrix:
            for op in ("write", "read"):
                if any(key[2] == op for key in results):
                    print("\n".join(matrix_table(out["matrix"], op)))
            print(f"load average: {' '.join(f'{x:.2f}' for x in out['load'])}")
        else:
            print("\n".join(summary(results, comm.size)))
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
