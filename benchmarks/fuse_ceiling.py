"""How fast could any FUSE daemon write the LANL N-1 pattern on this machine? Wall time and CPU.

The write phase of ``mount.py`` (P processes, object i of process r at (i*P + r)*S, plain
``os.pwrite`` on the mount) in four modes, interleaved and rotated in every repetition (the
first a warm-up, reported apart), each file removed after its write:

* lib     : ``hpcbridge.plfs.open(url, "wb", shared=True)``, the library (mount.py's reference);
* nn-ext4 : N-N, a file per process on the local file system: the bytes copied into the page
  cache and nothing else;
* mount   : the hpcbridge daemon on the same kind of PLFS directory (PLFS on POSIX);
* noop    : the same daemon with its write handler replaced by a C function that answers every
  write at once and keeps nothing (``_noop_daemon.py``; built here with ``cc``): the transport.

For each mode: MiB/s, wall time (first open .. last close), CPU seconds of the writing processes
plus, for a mount, its daemon (their process CPU clocks; kernel threads and interrupts are not
counted), and the utilisation of the machine's cores (CPU / (cores x wall)). Two ceilings for
``mount / lib`` follow:

* transport = lib wall / noop wall: no daemon answers faster than one that does nothing;
* cpu = lib wall / ((noop CPU + nn-ext4 CPU) / cores): a daemon has to receive the bytes (the
  no-op's CPU) and also put them into its data log (at least what N-N's copy into the page cache
  costs; PLFS's checksum and index come on top), on the same cores as the writers.

Both are medians of the per-repetition values. The daemons inherit the environment, so FUSE
over io_uring is measured with ``FUSE_URING_ENABLE=1 FUSE_LIBRARY_PATH=<libfuse 3.18>`` and
``/sys/module/fuse/parameters/enable_uring`` set (docs/mount.md).

    python benchmarks/fuse_ceiling.py [--per-rank 64M] [--units 47001,1M] [--procs 4] [-r 8]
                                      [--output results/fuse_ceiling.json]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hpcbridge  # noqa: E402
import hpcbridge.mount as mount_module  # noqa: E402
from hpcbridge.cli.main import parse_size  # noqa: E402

from _common import write_json  # noqa: E402
from mount import _measure, add_lanl_arguments  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("lib", "nn-ext4", "mount", "noop")
NOOP_WRITE_C = """#include <stddef.h>
#include <sys/types.h>
int noop_write(const char *path, const char *buf, size_t size, off_t offset, void *fi) { return (int)size; }
"""


def build_noop_handler(directory: str) -> str:
    """Compile the no-op write handler into ``directory``; its path."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit("fuse_ceiling.py needs a C compiler (cc) for its no-op write handler "
                         "(Debian: build-essential)")
    source, library = os.path.join(directory, "noop_write.c"), os.path.join(directory, "noop_write.so")
    with open(source, "w", encoding="utf-8") as f:
        f.write(NOOP_WRITE_C)
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", library, source], check=True)
    return library


def noop_mount(handler: str, url: str, mountpoint: str) -> mount_module.Mount:
    """``hpcbridge.mount`` of ``url`` served by the no-op daemon (same start, log and unmount)."""
    def command(url, mountpoint, options=()):
        return [sys.executable, os.path.join(HERE, "_noop_daemon.py"), handler, url, mountpoint,
                *(x for o in options for x in ("-o", o))]

    # mount() starts whatever daemon_command() names: swap it for this one call, so the no-op
    # daemon gets the shipped one's start, pid file, log and unmount.
    shipped, mount_module.daemon_command = mount_module.daemon_command, command
    try:
        return hpcbridge.mount(url, mountpoint)
    finally:
        mount_module.daemon_command = shipped


def _median(values):
    return statistics.median(values[1:] if len(values) > 1 else values)


def summarise(samples: dict, cores: int) -> dict:
    """Medians per mode and the two ceilings, from ``{mode: [(MiB/s, wall s, CPU s), ...]}``
    (repetition 0, the warm-up, left out of every median)."""
    entry = {}
    for mode, rows in samples.items():
        entry[mode] = {"MiBps": round(_median([r[0] for r in rows]), 1), "warmup_MiBps": round(rows[0][0], 1),
                       "wall_ms": round(1e3 * _median([r[1] for r in rows]), 2),
                       "cpu_ms": round(1e3 * _median([r[2] for r in rows]), 2),
                       "utilisation": round(_median([r[2] / (cores * r[1]) for r in rows]), 3)}
    lib, nn, noop, mounted = (samples[m] for m in ("lib", "nn-ext4", "noop", "mount"))
    reps = range(len(lib))
    entry["ratio mount/lib"] = round(_median([lib[i][1] / mounted[i][1] for i in reps]), 3)
    entry["ratio noop/lib"] = round(_median([lib[i][1] / noop[i][1] for i in reps]), 3)
    entry["ceiling transport"] = entry["ratio noop/lib"]
    entry["ceiling cpu"] = round(_median([lib[i][1] / ((noop[i][2] + nn[i][2]) / cores) for i in reps]), 3)
    return entry


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_lanl_arguments(parser)
    parser.add_argument("--dir", default=None, help="scratch directory on the local file system")
    parser.add_argument("--output", default="results/fuse_ceiling.json")
    args = parser.parse_args(argv)
    if args.repetitions < 1 or args.procs < 1:
        parser.error("--repetitions and --procs must be at least 1")
    units = [parse_size(u) for u in args.units.split(",")]
    cores = os.cpu_count() or 1
    scratch = tempfile.mkdtemp(prefix="hpcbridge-bench-fuse-ceiling-", dir=args.dir)
    result = {"benchmark": "fuse_ceiling", "procs": args.procs, "per_rank": args.per_rank, "units": units,
              "repetitions": args.repetitions, "cores": cores, "load_before": os.getloadavg(),
              "uring": os.environ.get("FUSE_URING_ENABLE") == "1", "results": {}}
    try:
        with contextlib.ExitStack() as stack:
            handler = build_noop_handler(scratch)
            dirs = {m: os.path.join(scratch, m) for m in MODES}
            for d in dirs.values():
                os.mkdir(d)
            mounts = {}
            for mode, start in (("mount", hpcbridge.mount), ("noop", lambda u, p: noop_mount(handler, u, p))):
                point = tempfile.mkdtemp(prefix=f"mnt-{mode}-", dir=scratch)
                mounts[mode] = stack.enter_context(start(f"plfs+file://{dirs[mode]}", point))
            for unit in units:
                nobj = max(1, args.per_rank // unit)
                samples = {m: [] for m in MODES}
                for rep in range(args.repetitions):
                    for mode in MODES[rep % len(MODES):] + MODES[:rep % len(MODES)]:
                        name = f"{unit}-{rep}"
                        if mode == "lib":
                            target, kind, pid = f"plfs+file://{dirs['lib']}/{name}", "lib", None
                        elif mode == "nn-ext4":
                            target, kind, pid = f"{dirs['nn-ext4']}/{name}", "nn", None
                        else:
                            target, kind, pid = f"{mounts[mode].path}/{name}", "mount", mounts[mode].pid
                        samples[mode].append(_measure(kind, target, args.procs, unit, nobj, "write", {}, pid))
                        _remove(kind, target, args.procs)
                    print(f"# unit {unit} rep {rep}: " + ", ".join(
                        f"{m} {v[-1][0]:.0f} MiB/s" for m, v in samples.items()), flush=True)
                result["results"][str(unit)] = summarise(samples, cores)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result["load_after"] = os.getloadavg()
    write_json(args.output, result)
    print(f"LANL N-1 write, {args.procs} processes x {args.per_rank} B, {cores} cores, medians of "
          f"{max(1, args.repetitions - 1)}{' (FUSE over io_uring)' if result['uring'] else ''}:")
    for unit, entry in result["results"].items():
        for mode in MODES:
            e = entry[mode]
            print(f"  {unit:>8} {mode:<8} {e['MiBps']:8.0f} MiB/s [warm-up {e['warmup_MiBps']:.0f}]  "
                  f"wall {e['wall_ms']:7.1f} ms  CPU {e['cpu_ms']:7.1f} ms  utilisation {e['utilisation']:.2f}")
        print(f"  {unit:>8} mount/lib {entry['ratio mount/lib']:.2f}; ceilings for any daemon: "
              f"transport {entry['ceiling transport']:.2f}, cpu {entry['ceiling cpu']:.2f}")
    print(f"JSON: {args.output}")
    return 0


def _remove(kind: str, target: str, procs: int) -> None:
    if kind == "nn":
        for r in range(procs):
            os.unlink(f"{target}.{r}")
    elif kind == "lib":
        fs, path = hpcbridge.url_to_fs(target)
        fs.rm(path)
    else:
        os.unlink(target)


if __name__ == "__main__":
    sys.exit(main())
