"""How fast can P ranks write ONE shared file here, whatever the strategy? Measured in one run.

Collective I/O can only reorganise who writes what; it cannot make the storage under a shared
file faster. This benchmark measures the ceilings that bound every N-1 strategy on this machine,
next to file per process (N-N), with no MPI-IO and no hpcbridge code in the data path: plain
``os.pwrite``, ``mmap`` and ``O_DIRECT`` writes. Each rank writes ``-b`` bytes in ``-t``
transfers (IOR's offsets), and the modes are interleaved repetition by repetition so drift on a
shared machine hits all alike:

=====================  ========================================================================
``fpp``                each rank its own file (IOR ``-F``), buffered ``pwrite``
``shared-strided``     one file, transfer ``j`` of rank ``r`` at ``(j·P + r)·t`` (IOR ``-s``)
``shared-segmented``   one file, rank ``r``'s block contiguous at ``r·b`` (IOR ``-b``)
``shared-one-writer``  one file, rank 0 alone writes everything in ``--chunk`` writes (what a
                       single aggregator can do)
``shared-mmap``        one file, each rank ``memcpy``\\ s its block into a shared mapping
                       (``MADV_POPULATE_WRITE`` first where the kernel has it)
``shared-direct``      one file, ``O_DIRECT`` writes of ``--chunk`` from page-aligned buffers
``fpp-direct``         each rank its own file, ``O_DIRECT``
=====================  ========================================================================

Timing as IOR: from a barrier before the first open to a barrier after the last close; ``-e``
puts an ``fsync`` before each close, inside the timing. Reported: mean and median MiB/s per
mode and the ratio of every mode to ``fpp`` (means, and the median of the per-repetition
ratios). ``--verify`` reads every file back and checks every byte.

    mpirun -n 4 python benchmarks/shared_file_ceiling.py -b 64m -t 1m -i 5 [-e]

Writes JSON to results/shared_file_ceiling[-fsync].json (or --json).
"""

from __future__ import annotations

import argparse
import errno
import mmap
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import write_json  # noqa: E402

from hpcbridge.cli.main import parse_size  # noqa: E402

MODES = ("fpp", "shared-strided", "shared-segmented", "shared-one-writer", "shared-mmap", "shared-direct",
         "fpp-direct")
_ALIGN = 4096
_MADV_POPULATE_WRITE = 23  # Linux 5.14; older kernels refuse it with EINVAL and we just fault


def _aligned(nbytes: int) -> np.ndarray:
    """A page-aligned buffer (anonymous mmap), as O_DIRECT needs."""
    return np.frombuffer(mmap.mmap(-1, max(nbytes, 1)), dtype=np.uint8)


def _pattern(rank: int, nbytes: int) -> np.ndarray:
    """Rank-specific bytes, so --verify catches data written at another rank's offsets."""
    data = _aligned(nbytes)
    data[:] = (np.arange(nbytes, dtype=np.uint64) * 7 + 31 * rank + 1).astype(np.uint8)
    return data


class Run:
    """One rank's view of the benchmark: sizes, paths and its data."""

    def __init__(self, comm, block: int, transfer: int, chunk: int, directory: str, fsync: bool):
        self.comm, self.rank, self.size = comm, comm.rank, comm.size
        self.block, self.transfer, self.chunk = block, transfer, chunk
        self.directory, self.fsync = directory, fsync
        self.data = _pattern(self.rank, block)
        self.shared = os.path.join(directory, "shared")

    def own_file(self, rank: int) -> str:
        return os.path.join(self.directory, f"file.{rank:08d}")

    # -- the modes: each returns after this rank's close ------------------------------------
    def _finish(self, fd: int) -> None:
        try:
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _pwrite_all(self, fd: int, offsets) -> None:
        view = memoryview(self.data)
        t = self.transfer
        for j, offset in enumerate(offsets):
            os.pwrite(fd, view[j * t:(j + 1) * t], int(offset))

    def fpp(self) -> None:
        fd = os.open(self.own_file(self.rank), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            self._pwrite_all(fd, range(0, self.block, self.transfer))
        finally:
            self._finish(fd)

    def shared_strided(self) -> None:
        fd = os.open(self.shared, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            n = self.block // self.transfer
            self._pwrite_all(fd, (np.arange(n) * self.size + self.rank) * self.transfer)
        finally:
            self._finish(fd)

    def shared_segmented(self) -> None:
        fd = os.open(self.shared, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            self._pwrite_all(fd, range(self.rank * self.block, (self.rank + 1) * self.block, self.transfer))
        finally:
            self._finish(fd)

    def shared_one_writer(self) -> None:
        if self.rank != 0:
            return
        fd = os.open(self.shared, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            # Rank 0 writes every rank's block (its own data stands in for theirs: same bytes
            # moved, and verify knows to expect rank 0's pattern everywhere).
            view = memoryview(self.data)
            for r in range(self.size):
                for start in range(0, self.block, self.chunk):
                    os.pwrite(fd, view[start:start + self.chunk], r * self.block + start)
        finally:
            self._finish(fd)

    def shared_mmap(self) -> None:
        fd = os.open(self.shared, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            mapping = mmap.mmap(fd, self.block, offset=self.rank * self.block)
            try:
                try:
                    mapping.madvise(_MADV_POPULATE_WRITE, 0, self.block)
                except OSError:
                    pass
                target = np.frombuffer(mapping, dtype=np.uint8)
                target[:] = self.data
                del target
                if self.fsync:
                    mapping.flush()
            finally:
                mapping.close()
        finally:
            self._finish(fd)

    def _direct(self, path: str, base: int, flags: int) -> None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT | flags, 0o644)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            raise OSError(exc.errno, f"O_DIRECT is not supported for {path}; leave out the direct modes "
                          "with --modes", path) from exc
        try:
            view = memoryview(self.data)
            for start in range(0, self.block, self.chunk):
                os.pwrite(fd, view[start:start + self.chunk], base + start)
        finally:
            self._finish(fd)

    def shared_direct(self) -> None:
        self._direct(self.shared, self.rank * self.block, 0)

    def fpp_direct(self) -> None:
        self._direct(self.own_file(self.rank), 0, os.O_TRUNC)

    # -- driver -----------------------------------------------------------------------------
    def prepare(self, mode: str) -> None:
        """Fresh files for every repetition, outside the timing; the mmap mode needs the file sized."""
        if self.rank == 0:
            for name in os.listdir(self.directory):
                os.unlink(os.path.join(self.directory, name))
            if mode == "shared-mmap":
                with open(self.shared, "wb") as f:
                    f.truncate(self.size * self.block)

    def timed(self, mode: str) -> float:
        self.prepare(mode)
        self.comm.Barrier()  # files prepared, and every rank starts together
        started = time.perf_counter()
        getattr(self, mode.replace("-", "_"))()
        self.comm.Barrier()
        return time.perf_counter() - started

    def verify(self, mode: str) -> int:
        """Bytes that differ from what the mode wrote (rank 0 reads everything)."""
        if self.rank != 0:
            return 0
        expected = [_pattern(0 if mode == "shared-one-writer" else r, self.block) for r in range(self.size)]
        bad = 0
        if mode.startswith("fpp"):
            for r in range(self.size):
                got = np.fromfile(self.own_file(r), dtype=np.uint8)
                bad += int(np.count_nonzero(got != expected[r])) if got.size == self.block else self.block
            return bad
        got = np.fromfile(self.shared, dtype=np.uint8)
        if got.size != self.size * self.block:
            return self.size * self.block
        if mode == "shared-strided":
            n, t = self.block // self.transfer, self.transfer
            got = got.reshape(n, self.size, t).transpose(1, 0, 2).reshape(self.size, self.block)
        else:
            got = got.reshape(self.size, self.block)
        return sum(int(np.count_nonzero(got[r] != expected[r])) for r in range(self.size))


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("-b", dest="block", default="64m", help="bytes per rank (64m)")
    parser.add_argument("-t", dest="transfer", default="1m", help="transfer size of the pwrite modes (1m)")
    parser.add_argument("--chunk", default="16m", help="write size of the one-writer and O_DIRECT modes (16m)")
    parser.add_argument("-e", dest="fsync", action="store_true", help="fsync before close (timed)")
    parser.add_argument("-i", dest="repetitions", type=int, default=5, help="repetitions (5)")
    parser.add_argument("-o", dest="directory", help="directory for the files (default: a new one under /tmp)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {', '.join(MODES)}")
    parser.add_argument("--verify", action="store_true", help="read back and check every byte after each mode")
    parser.add_argument("--json", help="JSON output (default results/shared_file_ceiling[-fsync].json)")
    args = parser.parse_args(argv)
    try:
        args.block, args.transfer, args.chunk = (parse_size(v) for v in (args.block, args.transfer, args.chunk))
    except ValueError as exc:
        parser.error(str(exc))
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in args.modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; valid: {', '.join(MODES)}")
    if args.repetitions < 1:
        parser.error("-i must be at least 1")
    if args.transfer <= 0 or args.block % args.transfer:
        parser.error(f"-b ({args.block}) must be a positive multiple of -t ({args.transfer})")
    if args.chunk <= 0 or args.chunk % _ALIGN or args.block % _ALIGN:
        parser.error(f"--chunk ({args.chunk}) and -b ({args.block}) must be multiples of {_ALIGN} "
                     "bytes (O_DIRECT and mmap offsets)")
    return args


def main(argv=None) -> int:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    args = _parse(argv)
    made = None
    if args.directory is None:
        made = comm.bcast(tempfile.mkdtemp(prefix="hpcbridge-ceiling-") if comm.rank == 0 else None)
        directory = made
    else:
        directory = args.directory
        if comm.rank == 0:
            os.makedirs(directory, exist_ok=True)
        comm.Barrier()
    run = Run(comm, args.block, args.transfer, args.chunk, directory, args.fsync)
    total = comm.size * args.block
    seconds = {mode: [] for mode in args.modes}
    bad = {mode: 0 for mode in args.modes}
    if comm.rank == 0:
        print(f"shared-file ceiling: {comm.size} ranks x {args.block} B (-t {args.transfer}, --chunk {args.chunk}), "
              f"fsync={args.fsync}, {args.repetitions} repetitions, in {directory}", flush=True)
    try:
        for rep in range(args.repetitions):
            order = args.modes if rep % 2 == 0 else args.modes[::-1]
            for mode in order:
                elapsed = run.timed(mode)
                seconds[mode].append(elapsed)
                if args.verify:
                    bad[mode] += comm.bcast(run.verify(mode))
                if comm.rank == 0:
                    print(f"rep {rep} {mode:18s} {total / elapsed / 2**20:9.1f} MiB/s ({elapsed:.3f} s)", flush=True)
    finally:
        comm.Barrier()
        if made and comm.rank == 0:
            shutil.rmtree(made, ignore_errors=True)
    if comm.rank != 0:
        return 0 if not any(bad.values()) else 1
    mibps = {mode: [total / s / 2**20 for s in seconds[mode]] for mode in args.modes}
    result = {"benchmark": "shared_file_ceiling", "ranks": comm.size, "block": args.block,
              "transfer": args.transfer, "chunk": args.chunk, "fsync": args.fsync,
              "repetitions": args.repetitions, "directory": directory,
              "MiBps": mibps, "bad_bytes": bad if args.verify else None, "summary": {}}
    print(f"\n{'mode':18s} {'mean MiB/s':>11s} {'median':>9s} {'/fpp mean':>10s} {'/fpp paired':>12s}")
    for mode in args.modes:
        entry = {"mean": statistics.fmean(mibps[mode]), "median": statistics.median(mibps[mode])}
        if "fpp" in mibps:
            entry["of_fpp_mean"] = entry["mean"] / statistics.fmean(mibps["fpp"])
            entry["of_fpp_paired_median"] = statistics.median(a / b for a, b in zip(mibps[mode], mibps["fpp"]))
        result["summary"][mode] = entry
        ratios = (f"{entry['of_fpp_mean']:10.2f} {entry['of_fpp_paired_median']:12.2f}" if "fpp" in mibps else "")
        print(f"{mode:18s} {entry['mean']:11.1f} {entry['median']:9.1f} {ratios}")
    shared = [m for m in args.modes if m.startswith("shared")]
    if shared:
        best = max(shared, key=lambda m: result["summary"][m]["mean"])
        result["shared_ceiling"] = {"mode": best, "MiBps": result["summary"][best]["mean"]}
        print(f"\nfastest way to write one shared file here: {best}, "
              f"{result['summary'][best]['mean']:.1f} MiB/s (mean)")
    if args.verify:
        print("verify: " + ", ".join(f"{m} {n} bad bytes" for m, n in bad.items()))
    out = args.json or os.path.join("results", f"shared_file_ceiling{'-fsync' if args.fsync else ''}.json")
    write_json(out, result)
    print(f"JSON: {out}")
    return 0 if not any(bad.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
