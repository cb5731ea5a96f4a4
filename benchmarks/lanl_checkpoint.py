"""The LANL MPI-IO Test's N-1 strided checkpoint (the PLFS papers, seed 003 section 4.1), all modes
in ONE run under mpirun:

* mpiio-indep  : MPI-IO, one shared file, independent write_at / read_at;
* mpiio-coll   : MPI-IO, one shared file, collective write_at_all / read_at_all;
* plfs-posix   : hpcbridge PLFS container on the POSIX directory (collective open, pwrite);
* plfs-hdfs    : the same over HDFS (with --hdfs URL, or --hdfs testbed to start one);
* n-n          : file per process (the upper bound);
* plfs-posix-nocrc : PLFS on POSIX with data checksums off (with --checksums both: what the
  CRC32C of every record costs, written and verified on read, as a ratio to plfs-posix).

Each rank writes nobj objects of S bytes; object i of rank r at i*(P*S) + r*S. Phases as the LANL
test: barrier, open, writes, barrier, sync, close, barrier; the read phase reads with ranks shifted by the
tasks of a node (by one on a single node) so no node reads what it wrote, and verifies each
object's stamp (its rank and index) as it reads, then every byte of every object in an untimed
pass (a short read shows too; an object PLFS's checksums refuse is a failed object, not a hung job). On one machine all ranks
share a page cache, so by default (as root) it is dropped before each read phase: reads come
from storage, as the LANL shift intends (--cache keep measures cached reads). Effective bandwidth =
total bytes / (first open .. last close), in MB/s; the LANL test's own figures are printed per
repetition and kept in the JSON ("lanl_MiBps"): effective (open .. close) and I/O-only (first
to last I/O call) bandwidth of each rank, min/avg/max over ranks, and aggregate, in MiB/s.
Modes are interleaved over --repetitions (alternating order); targets use the median over
repetitions of the paired ratio (both modes of a repetition ran back to back).
Targets (4 ranks, 64 MiB per rank, 47001 B): PLFS write >= 0.9x N-N and >= 1.3x MPI-IO
independent; PLFS read >= 0.8x N-N; with checksums >= 0.95x without, write and read.

    mpirun -n 4 python benchmarks/lanl_checkpoint.py [--per-rank 64M] [--unit 47001] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import hpcbridge  # noqa: E402
import hpcbridge.plfs  # noqa: E402
from hpcbridge.plfs.container import PlfsCorruptionError  # noqa: E402
from hpcbridge.cli.main import parse_size  # noqa: E402

from _common import read_shift, write_json  # noqa: E402


class Checkpoint:
    """The objects of one rank: one buffer, stamped per object (rank, index)."""

    def __init__(self, rank: int, size: int):
        self.buffer = np.full(size, rank % 251 + 1, dtype=np.uint8)
        self.stamp = self.buffer[:16].view(np.int64)

    def object(self, rank: int, index: int) -> np.ndarray:
        self.stamp[0], self.stamp[1] = rank, index
        return self.buffer


def _failed(buf: np.ndarray, owner: int, index: int, expected: "Checkpoint | None") -> bool:
    """Whether the object read is not ``owner``'s ``index``-th: in the timed read its 16-byte
    stamp (a misplaced object); in the untimed check (``expected``: the owner's checkpoint)
    every byte."""
    if expected is None:
        return tuple(buf[:16].view(np.int64)) != (owner, index)
    return not np.array_equal(buf, expected.object(owner, index))


def _fresh(buf: np.ndarray, expected) -> None:
    """Before a checked read: a byte no object holds (fills are 1..251), so a short read shows."""
    if expected is not None:
        buf.fill(0)


def offsets(rank, nobj, size, nranks):
    return [i * nranks * size + rank * size for i in range(nobj)]


# -- writers and readers of each mode ------------------------------------------------------------
def write_mpiio(comm, path, ckpt, rank, nobj, size, collective):
    fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_WRONLY)
    CLOCK.mark("io")
    for i, off in enumerate(offsets(rank, nobj, size, comm.size)):
        buf = ckpt.object(rank, i)
        if collective:
            fh.Write_at_all(off, buf)
        else:
            fh.Write_at(off, buf)
    CLOCK.mark("io_end")
    comm.Barrier()  # the LANL phases: writes, barrier, sync, close
    fh.Sync()
    fh.Close()


def read_mpiio(comm, path, owner, nobj, size, collective, expected=None):
    fh = MPI.File.Open(comm, path, MPI.MODE_RDONLY)
    buf = np.empty(size, np.uint8)
    bad = 0
    CLOCK.mark("io")
    for i, off in enumerate(offsets(owner, nobj, size, comm.size)):
        _fresh(buf, expected)
        if collective:
            fh.Read_at_all(off, buf)
        else:
            fh.Read_at(off, buf)
        bad += _failed(buf, owner, i, expected)
    CLOCK.mark("io_end")
    fh.Close()
    return bad


def write_plfs(comm, url, ckpt, rank, nobj, size, checksums=True):
    f = hpcbridge.plfs.open(url, "wb", comm=comm, checksums=checksums)
    CLOCK.mark("io")
    for i, off in enumerate(offsets(rank, nobj, size, comm.size)):
        f.pwrite(ckpt.object(rank, i), off)
    CLOCK.mark("io_end")
    comm.Barrier()
    f.sync()
    f.close()


def read_plfs(comm, url, owner, nobj, size, checksums=True, expected=None):
    f = hpcbridge.plfs.open(url, "rb", comm=comm, verify="auto" if checksums else "never")
    buf = np.empty(size, np.uint8)
    bad = 0
    CLOCK.mark("io")
    for i, off in enumerate(offsets(owner, nobj, size, comm.size)):
        _fresh(buf, expected)
        try:
            f.preadinto(buf, off)
        except PlfsCorruptionError:  # its checksum caught it: a failed object, not a hung job
            bad += 1
            continue
        bad += _failed(buf, owner, i, expected)
    CLOCK.mark("io_end")
    f.close()
    return bad


def _write_all(f, buf) -> None:
    """One write call per object as the LANL test (a raw file; a short write goes on)."""
    view = memoryview(buf).cast("B")
    while view:
        view = view[f.write(view):]


# N-N files are unbuffered: the LANL test issues one write()/read() per object, and a buffered
# file would join small objects into fewer, larger system calls than the other modes make.
def write_nn(comm, directory, ckpt, rank, nobj, size):
    with hpcbridge.open(f"{directory}/nn.{rank:04d}", "wb", buffering=0) as f:
        CLOCK.mark("io")
        for i in range(nobj):
            _write_all(f, ckpt.object(rank, i))
        CLOCK.mark("io_end")
        comm.Barrier()
        f.sync()


def read_nn(comm, directory, owner, nobj, size, expected=None):
    buf = np.empty(size, np.uint8)
    bad = 0
    with hpcbridge.open(f"{directory}/nn.{owner:04d}", "rb", buffering=0) as f:
        CLOCK.mark("io")
        for i in range(nobj):
            _fresh(buf, expected)
            f.readinto(buf)
            bad += _failed(buf, owner, i, expected)
        CLOCK.mark("io_end")
    return bad


DROP_CACHES = "/proc/sys/vm/drop_caches"


def can_drop_caches() -> bool:
    return os.geteuid() == 0 and os.path.exists(DROP_CACHES)


def drop_caches(comm, enabled: bool) -> None:
    """Empty the page cache between the write and read phases (rank 0, then everyone waits).

    The LANL test shifts ranks so that no node reads back what it wrote, i.e. reads come from
    storage, not from the writer's cache; on one machine every rank shares one page cache, so the
    cache is dropped instead.
    """
    comm.Barrier()
    if enabled and comm.rank == 0:
        os.sync()
        with open(DROP_CACHES, "w") as f:
            f.write("3\n")
    comm.Barrier()


class Clock:
    """The times a phase marks on this rank: ``io`` before its first I/O call (after the open),
    ``io_end`` after its last (before the barrier, sync and close)."""

    def __init__(self):
        self.marks = {}

    def mark(self, name: str) -> None:
        self.marks[name] = MPI.Wtime()


CLOCK = Clock()
MiB = 1 << 20


def _spread(values) -> dict:
    return {"min": min(values), "avg": sum(values) / len(values), "max": max(values)}


def _triple(spread: dict) -> str:
    return f"{spread['min']:.1f}/{spread['avg']:.1f}/{spread['max']:.1f}"


def timed(comm, function, *args, rank_bytes: int = 0):
    """Run one phase between barriers. Returns its time (first open .. last close), the
    function's result and the LANL test's figures in MiB/s: effective (open .. close) and I/O
    only (first to last I/O call) bandwidth, each min/avg/max over ranks of the rank's bytes
    over its own time, and aggregate (all bytes over first start .. last end)."""
    comm.Barrier()
    started = MPI.Wtime()
    CLOCK.marks = {}
    result = function(comm, *args)
    ended = MPI.Wtime()
    comm.Barrier()
    elapsed = MPI.Wtime() - started
    rows = comm.allgather((started, ended, CLOCK.marks.get("io", started), CLOCK.marks.get("io_end", ended)))
    total = rank_bytes * comm.size
    figures = {
        "effective_MiBps": _spread([rank_bytes / MiB / max(e - s, 1e-9) for s, e, _, _ in rows]),
        "io_only_MiBps": _spread([rank_bytes / MiB / max(e - s, 1e-9) for _, _, s, e in rows]),
        "aggregate_effective_MiBps": total / MiB / max(max(r[1] for r in rows) - min(r[0] for r in rows), 1e-9),
        "aggregate_io_only_MiBps": total / MiB / max(max(r[3] for r in rows) - min(r[2] for r in rows), 1e-9),
    }
    return elapsed, result, figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-rank", type=parse_size, default=parse_size("64M"), help="bytes per rank (64M)")
    parser.add_argument("--unit", type=int, default=47001, help="access unit S in bytes (47001)")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--dir", default=None, help="directory on the file system under test (default: a temp dir)")
    parser.add_argument("--hdfs", default=None,
                        help="add plfs-hdfs: an hdfs://nn:port URL, or 'testbed' to start a local one")
    parser.add_argument("--webhdfs", default=None, help="NameNode HTTP address for --hdfs URL")
    parser.add_argument("--cache", choices=["drop", "keep"], default="drop" if can_drop_caches() else "keep",
                        help="drop the page cache before each read phase (default when root), so reads come "
                             "from storage as in the LANL test, or keep it")
    parser.add_argument("--checksums", choices=["on", "off", "both"], default="on",
                        help="PLFS data checksums (CRC32C per record, verified on read): on (default), off, "
                             "or both (adds mode plfs-posix-nocrc and the cost ratios)")
    parser.add_argument("--output", default="results/lanl_checkpoint.json")
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, nranks = comm.rank, comm.size
    size = args.unit
    nobj = args.per_rank // size
    total = nobj * size * nranks
    rb = nobj * size  # bytes per rank

    base = None
    cluster = None
    hdfs = None
    if rank == 0:
        base = tempfile.mkdtemp(prefix="hpcbridge-lanl-", dir=args.dir)
        if args.hdfs == "testbed":
            from hpcbridge.testbed import HdfsCluster

            cluster = HdfsCluster(tempfile.mkdtemp(prefix="hpcbridge-lanl-hdfs-"), datanodes=3)
            info = cluster.up()
            hdfs = (info.url, f"http://127.0.0.1:{info.http_port}")
        elif args.hdfs:
            hdfs = (args.hdfs, args.webhdfs)
    base, hdfs = comm.bcast((base, hdfs), root=0)
    ckpt = Checkpoint(rank, size)
    owner = (rank + read_shift(comm)) % nranks  # read what the next node (one node: rank) wrote
    expected = Checkpoint(owner, size)  # what it wrote, for the untimed check of every byte
    # Each paired ratio compares neighbours (plfs-posix beside n-n and beside plfs-posix-nocrc),
    # which swap places every repetition: neither side always runs after the other.
    modes = ["mpiio-indep", "mpiio-coll", "n-n", "plfs-posix"] \
        + (["plfs-posix-nocrc"] if args.checksums == "both" else []) + (["plfs-hdfs"] if hdfs else [])
    checksums = args.checksums != "off"
    samples = {m: {"write": [], "read": []} for m in modes}
    lanl_figures = {m: {"write": [], "read": []} for m in modes}  # MiB/s per repetition, as fs_test
    bad_total = 0
    try:
        if hdfs and rank == 0:
            hpcbridge.connect(hdfs[0], webhdfs=hdfs[1]).mkdir("/lanl", exist_ok=True)
        comm.Barrier()
        for rep in range(args.repetitions):
            order = modes if rep % 2 == 0 else list(reversed(modes))
            for mode in order:
                tag = f"{mode}-{rep}"
                if mode.startswith("mpiio"):
                    coll = mode == "mpiio-coll"
                    path = f"{base}/{tag}.shared"
                    w, _, wfig = timed(comm, lambda c: write_mpiio(c, path, ckpt, rank, nobj, size, coll), rank_bytes=rb)
                    drop_caches(comm, args.cache == "drop")
                    r, bad, rfig = timed(comm, lambda c: read_mpiio(c, path, owner, nobj, size, coll), rank_bytes=rb)
                    checked = read_mpiio(comm, path, owner, nobj, size, coll, expected)
                elif mode.startswith("plfs-posix"):
                    url = f"plfs+file://{base}/{tag}.plfs"
                    crc = checksums and mode == "plfs-posix"
                    w, _, wfig = timed(comm, lambda c: write_plfs(c, url, ckpt, rank, nobj, size, crc), rank_bytes=rb)
                    drop_caches(comm, args.cache == "drop")
                    r, bad, rfig = timed(comm, lambda c: read_plfs(c, url, owner, nobj, size, crc), rank_bytes=rb)
                    checked = read_plfs(comm, url, owner, nobj, size, crc, expected)
                elif mode == "plfs-hdfs":
                    url = hdfs[0].replace("hdfs://", "plfs+hdfs://") + f"/lanl/{tag}"
                    w, _, wfig = timed(comm, lambda c: write_plfs(c, url, ckpt, rank, nobj, size, checksums), rank_bytes=rb)
                    drop_caches(comm, args.cache == "drop")
                    r, bad, rfig = timed(comm, lambda c: read_plfs(c, url, owner, nobj, size, checksums), rank_bytes=rb)
                    checked = read_plfs(comm, url, owner, nobj, size, checksums, expected)
                else:
                    directory = f"{base}/{tag}.nn"
                    if rank == 0:
                        os.mkdir(directory)
                    comm.Barrier()
                    w, _, wfig = timed(comm, lambda c: write_nn(c, directory, ckpt, rank, nobj, size), rank_bytes=rb)
                    drop_caches(comm, args.cache == "drop")
                    r, bad, rfig = timed(comm, lambda c: read_nn(c, directory, owner, nobj, size), rank_bytes=rb)
                    checked = read_nn(comm, directory, owner, nobj, size, expected)
                # The timed read checks each object's stamp; the untimed pass after it every
                # byte (an object failing both counts once).
                bad_total += comm.allreduce(max(bad, checked))
                samples[mode]["write"].append(total / w / 1e6)
                samples[mode]["read"].append(total / r / 1e6)
                lanl_figures[mode]["write"].append(wfig)
                lanl_figures[mode]["read"].append(rfig)
                if rank == 0:
                    print(f"# rep {rep + 1} {mode:12} write {total / w / 1e6:8.1f} MB/s  "
                          f"read {total / r / 1e6:8.1f} MB/s   MiB/s per rank min/avg/max: "
                          + "; ".join(f"{ph} effective {_triple(fig['effective_MiBps'])}, "
                                      f"I/O only {_triple(fig['io_only_MiBps'])}"
                                      for ph, fig in (("write", wfig), ("read", rfig))), flush=True)
                    for entry in os.listdir(base):  # keep the disk footprint to one run
                        p = os.path.join(base, entry)
                        shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
                comm.Barrier()
    finally:
        if rank == 0:
            shutil.rmtree(base, ignore_errors=True)
            if cluster is not None:
                cluster.down()
    if rank != 0:
        return 0 if bad_total == 0 else 1
    # The first repetition is the warm-up (first JIT of the code paths, cold metadata): reported
    # apart, the medians are of the others.
    skip = 1 if args.repetitions > 1 else 0
    med = {m: {k: statistics.median(v[skip:]) for k, v in d.items()} for m, d in samples.items()}
    warmup = {m: {k: v[0] for k, v in d.items()} for m, d in samples.items()}

    def paired(a, b, phase):
        """Median over repetitions of a/b: modes of one repetition ran back to back (alternating
        order), so pairing them cancels the drift of a shared machine's disk."""
        return statistics.median(x / y for x, y in list(zip(samples[a][phase], samples[b][phase]))[skip:])

    ratios = {
        "plfs_write_vs_nn": paired("plfs-posix", "n-n", "write"),
        "plfs_write_vs_mpiio_indep": paired("plfs-posix", "mpiio-indep", "write"),
        "plfs_read_vs_nn": paired("plfs-posix", "n-n", "read"),
        "plfs_write_vs_mpiio_coll": paired("plfs-posix", "mpiio-coll", "write"),
    }
    if "plfs-posix-nocrc" in samples:
        ratios["checksums_write_vs_off"] = paired("plfs-posix", "plfs-posix-nocrc", "write")
        ratios["checksums_read_vs_off"] = paired("plfs-posix", "plfs-posix-nocrc", "read")
    ratios_of_medians = {
        "plfs_write_vs_nn": med["plfs-posix"]["write"] / med["n-n"]["write"],
        "plfs_write_vs_mpiio_indep": med["plfs-posix"]["write"] / med["mpiio-indep"]["write"],
        "plfs_read_vs_nn": med["plfs-posix"]["read"] / med["n-n"]["read"],
    }
    met = (ratios["plfs_write_vs_nn"] >= 0.9 and ratios["plfs_write_vs_mpiio_indep"] >= 1.3
           and ratios["plfs_read_vs_nn"] >= 0.8 and bad_total == 0
           and all(ratios[k] >= 0.95 for k in ("checksums_write_vs_off", "checksums_read_vs_off") if k in ratios))
    print(f"LANL N-1 strided, {nranks} ranks x {nobj * size / 2**20:.1f} MiB, unit {size} B, "
          f"medians of repetitions {skip + 1}..{args.repetitions}, page cache "
          f"{'dropped' if args.cache == 'drop' else 'kept'} before reads (MB/s):")
    for m in modes:
        print(f"  {m:12} write {med[m]['write']:8.1f}   read {med[m]['read']:8.1f}   "
              f"(warm-up: write {warmup[m]['write']:8.1f}   read {warmup[m]['read']:8.1f})")
    print(f"  paired ratios (median over repetitions): PLFS/N-N write {ratios['plfs_write_vs_nn']:.2f} (>= 0.9), "
          f"PLFS/MPI-IO indep write {ratios['plfs_write_vs_mpiio_indep']:.2f} (>= 1.3), "
          f"PLFS/N-N read {ratios['plfs_read_vs_nn']:.2f} (>= 0.8)")
    print("  ratios of the medians: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios_of_medians.items()))
    if "plfs-hdfs" in med:
        print(f"  PLFS on HDFS: write {med['plfs-hdfs']['write']:.1f}, read {med['plfs-hdfs']['read']:.1f} MB/s")
    if "checksums_write_vs_off" in ratios:
        print(f"  checksums on/off (paired): write {ratios['checksums_write_vs_off']:.3f}, "
              f"read {ratios['checksums_read_vs_off']:.3f} (>= 0.95)")
    print(f"  objects failing verification: {bad_total}")
    print(f"  targets {'met' if met else 'NOT met'}; JSON: {args.output}")
    write_json(args.output, {"benchmark": "lanl_checkpoint", "ranks": nranks, "cache": args.cache,
                             "checksums": args.checksums,
                             "unit": size, "objects": nobj,
                             "bytes": total, "samples_MBps": samples, "median_MBps": med, "warmup_MBps": warmup,
                             "lanl_MiBps": lanl_figures,
                             "ratios": ratios,
                             "ratios_of_medians": ratios_of_medians,
                             "verification_failures": bad_total, "meets_target": met})
    return 0 if bad_total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
