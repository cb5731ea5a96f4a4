"""Overhead of the hpcbridge POSIX path against raw os.pwrite/os.pread, measured in one run.

Sequential 1 MiB writes and reads of a 1 GiB file, alternating the two paths repetition by
repetition (raw first on even repetitions, hpcbridge first on odd ones) so drift on a shared
machine hits both alike; every write phase starts from a removed file and a synced page cache.
Reports the median bandwidth of each path and the ratio hpcbridge / raw (target: >= 0.95 for
both write and read). By default data stays in the page
cache, which exposes software overhead the most; ``--fsync`` includes fsync in both paths.

    python benchmarks/posix_overhead.py [--size 1G] [--transfer 1M] [--repetitions 6] [--dir DIR]

Writes JSON to results/posix_overhead.json (or --output).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import hpcbridge
from hpcbridge.cli.main import parse_size


def raw_write(path, buffer, size, transfer, fsync):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for offset in range(0, size, transfer):
            os.pwrite(fd, buffer, offset)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def hpcbridge_write(url, buffer, size, transfer, fsync):
    with hpcbridge.open(url, "wb") as f:
        for _ in range(0, size, transfer):
            f.write(buffer)
        if fsync:
            f.sync()


def raw_read(path, buffer, size, transfer):
    fd = os.open(path, os.O_RDONLY)
    try:
        total = 0
        for offset in range(0, size, transfer):
            total += len(os.pread(fd, transfer, offset))
    finally:
        os.close(fd)
    assert total == size, (total, size)


def raw_preadv(path, buffer, size, transfer):
    fd = os.open(path, os.O_RDONLY)
    try:
        total = 0
        for offset in range(0, size, transfer):
            total += os.preadv(fd, [buffer], offset)
    finally:
        os.close(fd)
    assert total == size, (total, size)


def hpcbridge_read(url, buffer, size, transfer):
    total = 0
    with hpcbridge.open(url, "rb") as f:
        while n := f.readinto(buffer):
            total += n
    assert total == size, (total, size)


def timed(function, *args) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("1G"), help="file size (default 1G)")
    parser.add_argument("--transfer", type=parse_size, default=parse_size("1M"), help="I/O size (default 1M)")
    parser.add_argument("--repetitions", type=int, default=6,
                        help="repetitions per path (default 6: even, so each path goes first equally often)")
    parser.add_argument("--dir", default=None, help="directory on the file system to test (default: a temp dir)")
    parser.add_argument("--fsync", action="store_true", help="fsync at the end of each write phase")
    parser.add_argument("--output", default="results/posix_overhead.json", help="JSON output path")
    args = parser.parse_args(argv)
    if args.size % args.transfer:
        parser.error("--size must be a multiple of --transfer")
    if args.repetitions < 1:
        parser.error("--repetitions must be at least 1")

    workdir = tempfile.mkdtemp(prefix="hpcbridge-bench-", dir=args.dir)
    path = os.path.join(workdir, "data.bin")
    url = "file://" + path
    buffer = bytearray(os.urandom(args.transfer))
    times = {"raw_write": [], "hpcbridge_write": [], "raw_read": [], "raw_preadv": [], "hpcbridge_read": []}
    try:
        for rep in range(args.repetitions):
            writes = [("raw_write", raw_write, path), ("hpcbridge_write", hpcbridge_write, url)]
            reads = [("raw_read", raw_read, path), ("raw_preadv", raw_preadv, path),
                     ("hpcbridge_read", hpcbridge_read, url)]
            if rep % 2:
                writes.reverse()
                reads.reverse()
            for name, function, target in writes:
                # Start every write phase from the same state: no old file to truncate and no
                # dirty pages of the previous phase still being written back (both untimed).
                if os.path.exists(path):
                    os.unlink(path)
                os.sync()
                times[name].append(timed(function, target, buffer, args.size, args.transfer, args.fsync))
            for name, function, target in reads:
                times[name].append(timed(function, target, buffer, args.size, args.transfer))
            print(f"repetition {rep + 1}/{args.repetitions}: " + ", ".join(
                f"{k} {args.size / v[-1] / 1e6:.0f} MB/s" for k, v in times.items()), file=sys.stderr)
    finally:
        if os.path.exists(path):
            os.unlink(path)
        os.rmdir(workdir)

    bandwidth = {k: args.size / statistics.median(v) / 1e6 for k, v in times.items()}
    ratios = {
        "write": bandwidth["hpcbridge_write"] / bandwidth["raw_write"],
        "read": bandwidth["hpcbridge_read"] / bandwidth["raw_read"],
        "read_vs_zero_copy_preadv": bandwidth["hpcbridge_read"] / bandwidth["raw_preadv"],
    }
    result = {
        "benchmark": "posix_overhead",
        "size_bytes": args.size,
        "transfer_bytes": args.transfer,
        "repetitions": args.repetitions,
        "fsync": args.fsync,
        "filesystem_dir": os.path.dirname(workdir),
        "host": platform.node(),
        "median_MBps": {k: round(v, 1) for k, v in bandwidth.items()},
        "seconds": times,
        "ratios": {k: round(v, 3) for k, v in ratios.items()},
        "target": {"write": 0.95, "read": 0.95},
        "meets_target": ratios["write"] >= 0.95 and ratios["read"] >= 0.95,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(result, f, indent=2)
    print(f"POSIX overhead, {args.size / 2**30:.2f} GiB in {args.transfer / 2**20:.2f} MiB transfers, "
          f"median of {args.repetitions}{' with fsync' if args.fsync else ''}:")
    for k, v in bandwidth.items():
        print(f"  {k:<16} {v:9.1f} MB/s")
    print(f"  ratio write hpcbridge/raw os.pwrite: {ratios['write']:.3f}")
    print(f"  ratio read  hpcbridge/raw os.pread:  {ratios['read']:.3f}  "
          f"(vs zero-copy os.preadv: {ratios['read_vs_zero_copy_preadv']:.3f})")
    print(f"  target >= 0.95 for both: {'met' if result['meets_target'] else 'NOT met'}; JSON: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
