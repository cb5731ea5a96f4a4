"""Kernel (FUSE mount) vs library, the comparison of seed 003 (PLFS on HDFS, Figs. 5-6), in ONE run.

LANL N-1 strided checkpoint: P processes each write nobj objects of S bytes, object i of process r at
(i*P + r)*S, into one logical file, then read them back with processes shifted by one. Modes:

* lib-posix / lib-hdfs     : ``hpcbridge.plfs.open(url, "wb", shared=True)`` (one writer per process),
  pwrite; read with ``hpcbridge.plfs.open(url, "rb")`` and pread;
* mount-posix / mount-hdfs : plain ``os.pwrite`` / ``os.pread`` on the file in an ``hpcbridge mount`` of
  the same PLFS directory (each open(2) is its own PLFS writer);
* nn-ext4                  : N-N, a file per process on the local file system with ``os.pwrite``: the
  ceiling.

Then FLASH-IO (``mpirun -n P benchmarks/flash_io.py --dir D``, at its default size unless
``--flash-nxb`` / ``--flash-blocks`` say otherwise) into mounted PLFS on POSIX and on HDFS vs into a
plain ext4 directory. Modes are interleaved in every repetition (order rotated); the first
repetition is a warm-up reported apart; figures are medians over the rest (>= 7), ratios medians of
the per-repetition ratios. Bandwidth = bytes / (first open .. last close) over all processes. Each
LANL mode also reports ``cpu_ms``: the CPU of its processes and, through a mount, of the daemon
(not of HDFS's servers); ``fuse_ceiling.py`` turns such figures into ceilings for any daemon.

    python benchmarks/mount.py [--per-rank 64M] [--units 47001,1M] [--procs 4] [-r 8] [--hdfs URL]

Targets: mount/library write >= 0.7 (1 MiB) and >= 0.5 (47001 B) on PLFS-on-POSIX, >= 0.8 on PLFS-on-HDFS;
FLASH-IO through the mount >= 0.5x FLASH-IO on ext4.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hpcbridge  # noqa: E402
import hpcbridge.plfs  # noqa: E402
from hpcbridge.cli.main import parse_size  # noqa: E402

from _common import hdfs_for_benchmark, write_json  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _offsets(rank, nobj, unit, procs):
    return [(i * procs + rank) * unit for i in range(nobj)]


def _worker(kind, target, rank, procs, unit, nobj, phase, barrier, out, options):
    """One process of one phase; puts (start, end, bad, CPU seconds) on ``out``."""
    buf = bytearray(os.urandom(16)) + bytearray(unit - 16) if unit > 16 else bytearray(unit)
    view = memoryview(buf)
    source = (rank + 1) % procs  # reads: the objects another process wrote
    barrier.wait()
    cpu = time.process_time()
    start = time.perf_counter()
    bad = 0
    if phase == "write":
        if kind == "lib":
            f = hpcbridge.plfs.open(target, "wb", shared=True, **options)
            for off in _offsets(rank, nobj, unit, procs):
                f.pwrite(view, off)
            f.close()
        else:
            path = target if kind == "mount" else f"{target}.{rank}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            offs = _offsets(rank, nobj, unit, procs) if kind == "mount" else [i * unit for i in range(nobj)]
            for off in offs:
                os.pwrite(fd, view, off)
            os.close(fd)
    else:
        if kind == "lib":
            f = hpcbridge.plfs.open(target, "rb", **options)
            for off in _offsets(source, nobj, unit, procs):
                bad += f.preadinto(view, off) != unit
            f.close()
        else:
            path = target if kind == "mount" else f"{target}.{source}"
            fd = os.open(path, os.O_RDONLY)
            offs = _offsets(source, nobj, unit, procs) if kind == "mount" else [i * unit for i in range(nobj)]
            for off in offs:
                bad += os.preadv(fd, [view], off) != unit
            os.close(fd)
    out.put((start, time.perf_counter(), bad, time.process_time() - cpu))


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by every thread of process ``pid`` (Linux: its process CPU clock)."""
    # clock_getcpuclockid(3) for another process: CPUCLOCK_SCHED of the whole thread group.
    return time.clock_gettime(((~pid) << 3) | 2)


def _measure(kind, target, procs, unit, nobj, phase, options, daemon_pid=None):
    """``(MiB/s, seconds, CPU seconds)`` of one phase: the CPU of the worker processes between
    the barrier and their last call, plus the daemon's (``daemon_pid``) over the phase."""
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    ps = [ctx.Process(target=_worker, args=(kind, target, r, procs, unit, nobj, phase, barrier, out, options))
          for r in range(procs)]
    daemon_before = process_cpu_seconds(daemon_pid) if daemon_pid else 0.0
    for p in ps:
        p.start()
    results = [out.get(timeout=900) for _ in ps]
    for p in ps:
        p.join()
        if p.exitcode:
            raise RuntimeError(f"{kind} {phase} process failed ({p.exitcode})")
    daemon = process_cpu_seconds(daemon_pid) - daemon_before if daemon_pid else 0.0
    if sum(r[2] for r in results):
        raise RuntimeError(f"{kind} {phase}: short reads")
    seconds = max(r[1] for r in results) - min(r[0] for r in results)
    return procs * nobj * unit / seconds / 2**20, seconds, sum(r[3] for r in results) + daemon


def _flash(directory, procs, nxb, blocks, out):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1")
    cmd = ["mpirun", "-n", str(procs), sys.executable, os.path.join(HERE, "flash_io.py"), "--nxb", str(nxb),
           "--blocks", str(blocks), "--dir", directory, "--output", out]
    subprocess.run(cmd, check=True, env=env, capture_output=True, text=True, timeout=1800)
    with open(out) as f:
        result = json.load(f)
    if not result.get("verified"):
        raise RuntimeError(f"FLASH-IO in {directory} did not verify")
    return result["bandwidth_MiBps"]


def _summary(samples):
    rest = samples[1:] if len(samples) > 1 else samples
    return {"warmup": round(samples[0], 1), "median": round(statistics.median(rest), 1),
            "samples": [round(s, 1) for s in rest]}


def _ratios(a, b):
    pairs = list(zip(a, b))[1:] or list(zip(a, b))
    return round(statistics.median(x / y for x, y in pairs), 3)


def add_lanl_arguments(parser: argparse.ArgumentParser) -> None:
    """The LANL N-1 options (size, units, processes, repetitions), shared with fuse_ceiling.py."""
    parser.add_argument("--per-rank", type=parse_size, default=parse_size("64M"), help="bytes per process (64M)")
    parser.add_argument("--units", default="47001,1M", help="object sizes, comma separated (47001,1M)")
    parser.add_argument("--procs", type=int, default=4, help="processes (4)")
    parser.add_argument("-r", "--repetitions", type=int, default=8, help="repetitions incl. the warm-up (8)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_lanl_arguments(parser)
    parser.add_argument("--hdfs", default=None, help="HDFS URL (default: start a local testbed)")
    parser.add_argument("--webhdfs", default=None)
    parser.add_argument("--no-hdfs", action="store_true", help="PLFS on POSIX only")
    parser.add_argument("--flash-nxb", type=int, choices=[8, 16], default=16,
                        help="FLASH-IO zones per block edge (16, flash_io.py's default: the issue's command)")
    parser.add_argument("--flash-blocks", type=int, default=80,
                        help="FLASH-IO blocks per rank (80, flash_io.py's default; --flash-nxb 8 --flash-blocks 20 "
                             "is the small, metadata-bound case)")
    parser.add_argument("--no-flash", action="store_true")
    parser.add_argument("--no-lanl", action="store_true", help="FLASH-IO only")
    parser.add_argument("--dir", default=None, help="scratch directory on the local file system")
    parser.add_argument("--output", default="results/mount.json")
    args = parser.parse_args(argv)
    units = [parse_size(u) for u in args.units.split(",")]
    scratch = tempfile.mkdtemp(prefix="hpcbridge-bench-mount-", dir=args.dir)
    result = {"benchmark": "mount", "procs": args.procs, "per_rank": args.per_rank, "units": units,
              "repetitions": args.repetitions, "flash_nxb": args.flash_nxb, "flash_blocks": args.flash_blocks,
              "load_before": os.getloadavg(), "lanl": {}, "flash": {}}
    import contextlib

    with contextlib.ExitStack() as stack:
        backings = {"posix": (f"plfs+file://{scratch}/plfs", {})}
        os.mkdir(f"{scratch}/plfs")
        if not args.no_hdfs:
            url, webhdfs, _ = stack.enter_context(hdfs_for_benchmark(args.hdfs, args.webhdfs))
            root = f"/bench-mount/{uuid.uuid4().hex[:8]}"
            # The HDFS client lives in the worker processes and the daemon only: one made here
            # would be inherited, threads and all, by every forked worker.
            _hdfs_call(url, webhdfs, f"fs.mkdir({root!r}, parents=True)")
            stack.callback(_hdfs_call, url, webhdfs, f"fs.rm({root!r}, recursive=True)")
            backings["hdfs"] = (f"plfs+{url}{root}", {"webhdfs": webhdfs})
        mounts = {}
        for name, (url, options) in backings.items():
            mp = tempfile.mkdtemp(prefix=f"mnt-{name}-", dir=scratch)
            opts = [f"{k}={v}" for k, v in options.items()]
            mounts[name] = stack.enter_context(hpcbridge.mount(url, mp, options=opts))
        ext4 = f"{scratch}/ext4"
        os.mkdir(ext4)
        for unit in ([] if args.no_lanl else units):
            nobj = max(1, args.per_rank // unit)
            modes = [("nn-ext4", "nn", lambda i: f"{ext4}/nn{i}", {})]
            for name, (url, options) in backings.items():
                modes.append((f"lib-{name}", "lib", lambda i, u=url: f"{u}/lib{i}", options))
                modes.append((f"mount-{name}", "mount", lambda i, m=mounts[name].path: f"{m}/mnt{i}", {}))
            samples = {(m[0], ph): [] for m in modes for ph in ("write", "read")}
            # CPU of the worker processes and, for a mount, its daemon (not HDFS's servers).
            cpu_ms = {key: [] for key in samples}
            for rep in range(args.repetitions):
                order = modes[rep % len(modes):] + modes[:rep % len(modes)]
                for label, kind, target, options in order:
                    t = target(f"{unit}-{rep}")
                    for phase in ("write", "read"):
                        pid = mounts[label.split("-", 1)[1]].pid if kind == "mount" else None
                        mibps, _, cpu = _measure(kind, t, args.procs, unit, nobj, phase, options, pid)
                        samples[(label, phase)].append(mibps)
                        cpu_ms[(label, phase)].append(1e3 * cpu)
                    _remove(kind, t, args.procs, mounts)
                print(f"# unit {unit} rep {rep}: " + ", ".join(
                    f"{k[0]} {k[1]} {v[-1]:.0f}" for k, v in samples.items()), flush=True)
            entry = {f"{label} {phase}": dict(_summary(v), cpu_ms=_summary(cpu_ms[(label, phase)]))
                     for (label, phase), v in samples.items()}
            for name in backings:
                for phase in ("write", "read"):
                    mounted = samples[(f"mount-{name}", phase)]
                    entry[f"ratio mount/lib {name} {phase}"] = _ratios(mounted, samples[(f"lib-{name}", phase)])
                    entry[f"ratio mount/nn-ext4 {name} {phase}"] = _ratios(mounted, samples[("nn-ext4", phase)])
            result["lanl"][str(unit)] = entry
        if not args.no_flash:
            dirs = {"ext4": f"{scratch}/flash-ext4"}
            os.mkdir(dirs["ext4"])
            for name, m in mounts.items():
                dirs[f"mount-{name}"] = m.path
            flash = {k: [] for k in dirs}
            keys = list(dirs)
            for rep in range(args.repetitions):
                for k in keys[rep % len(keys):] + keys[:rep % len(keys)]:
                    flash[k].append(_flash(dirs[k], args.procs, args.flash_nxb, args.flash_blocks,
                                           f"{scratch}/flash.json"))
                print(f"# flash rep {rep}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in flash.items()), flush=True)
            result["flash"] = {k: _summary(v) for k, v in flash.items()}
            for k in keys[1:]:
                result["flash"][f"ratio {k}/ext4"] = _ratios(flash[k], flash["ext4"])
    shutil.rmtree(scratch, ignore_errors=True)
    result["load_after"] = os.getloadavg()
    write_json(args.output, result)
    print(json.dumps(result, indent=1))
    return 0


def _remove(kind, target, procs, mounts):
    if kind == "nn":
        for r in range(procs):
            os.unlink(f"{target}.{r}")
    elif kind == "mount":
        os.unlink(target)
    else:  # a library file: the same directory is mounted, remove it there
        for m in mounts.values():
            if target.startswith(m.url + "/"):
                os.unlink(m.path + target[len(m.url):])
                return
        raise ValueError(f"{target} is not under a mount")


def _hdfs_call(url, webhdfs, statement):
    code = f"import hpcbridge; fs = hpcbridge.connect({url!r}, webhdfs={webhdfs!r}); {statement}"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


if __name__ == "__main__":
    sys.exit(main())
