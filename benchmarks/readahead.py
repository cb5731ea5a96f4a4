"""Sequential read throughput of one HDFS client vs request size, readahead off vs on (seed 000,
Fig. 4), measured in one run on a real HDFS (a local testbed unless --url is given).

For each request size from 4 KiB to 64 MiB the file is read sequentially with read(size):
* off: the raw HDFS file (buffering=0), one client call per request;
* on:  the default open, 4 MiB synchronous readahead (--prefetch adds asynchronous prefetch);
plus a whole-file read (one readinto of the full size) after every size, as the upper bound.
All modes and sizes are interleaved over --repetitions rounds and the medians compared.
Targets: 4 KiB reads with readahead >= 15x the unbuffered rate and >= 0.8x the whole-file rate.

    python benchmarks/readahead.py [--driver native|libhdfs|both] [--size 256M]
                                   [--url hdfs://nn:port --webhdfs http://nn:9870]

With --driver both, every mode runs on each HDFS driver (columns off-native, on-libhdfs, ...).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import hpcbridge  # noqa: E402
from hpcbridge.cli.main import parse_size  # noqa: E402

from _common import hdfs_for_benchmark, write_json  # noqa: E402

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def read_sequential(fs, path, request, limit, buffering):
    """Read up to ``limit`` bytes in ``request``-sized reads; returns (bytes, seconds)."""
    total = 0
    started = time.perf_counter()
    with fs.open(path, "rb", buffering=buffering) as f:
        while total < limit:
            chunk = f.read(request)
            if not chunk:
                break
            total += len(chunk)
    return total, time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--driver", choices=("native", "libhdfs", "both"), default="native",
                        help="hpcbridge's HDFS driver(s) measured (default native)")
    parser.add_argument("--size", type=parse_size, default=parse_size("256M"), help="file size (default 256M)")
    parser.add_argument("--unbuffered-limit", type=parse_size, default=parse_size("16M"),
                        help="bytes read per small-request measurement without readahead (default 16M: "
                             "unbuffered 4 KiB reads are slow)")
    parser.add_argument("--url", help="hdfs://namenode:port of an existing cluster (default: start a testbed)")
    parser.add_argument("--webhdfs", help="http://host:port of its NameNode HTTP server")
    parser.add_argument("--prefetch", action="store_true", help="also measure asynchronous prefetch")
    parser.add_argument("--repetitions", type=int, default=3, help="interleaved repetitions; medians reported")
    parser.add_argument("--output", default="results/readahead.json")
    args = parser.parse_args(argv)

    with hdfs_for_benchmark(args.url, args.webhdfs) as (url, webhdfs, _cluster):
        fs = hpcbridge.connect(url, webhdfs=webhdfs)
        path = f"/benchmarks/readahead-{os.getpid()}.bin"
        fs.mkdir("/benchmarks", exist_ok=True)
        with fs.create(path, replication=1, block_size=64 << 20) as f:
            f.write(np.random.default_rng(0).integers(0, 256, args.size, dtype=np.uint8))
        drivers = ["native", "libhdfs"] if args.driver == "both" else [args.driver]
        try:
            modes = []
            for d in drivers:
                fs_d = hpcbridge.connect(url, webhdfs=webhdfs, driver=d)
                suffix = f"-{d}" if len(drivers) > 1 else ""
                modes += [(f"off{suffix}", 0, fs_d), (f"on{suffix}", -1, fs_d)]
                if args.prefetch:
                    modes.append((f"prefetch{suffix}", -1,
                                  hpcbridge.connect(url, webhdfs=webhdfs, prefetch=True, driver=d)))
            buffer = np.empty(args.size, dtype=np.uint8)
            samples: dict[tuple, list[float]] = {}
            # Repetitions interleave every mode and size, so drift on a shared machine hits all alike.
            for rep in range(args.repetitions):
                for request in SIZES:
                    for name, buffering, target in modes:
                        limit = args.size if (not name.startswith("off") or request >= (1 << 20)) else args.unbuffered_limit
                        n, seconds = read_sequential(target, path, request, limit, buffering)
                        samples.setdefault((request, name), []).append(n / seconds / 1e6)
                    started = time.perf_counter()
                    with modes[0][2].open(path, "rb") as f:
                        assert f.readinto(buffer) == args.size
                    samples.setdefault(("whole", "whole"), []).append(args.size / (time.perf_counter() - started) / 1e6)
                print(f"# repetition {rep + 1}/{args.repetitions} done", flush=True)
            rows = []
            for request in SIZES:
                row = {"request": request}
                for name, _, _ in modes:
                    row[f"{name}_MBps"] = statistics.median(samples[(request, name)])
                rows.append(row)
                print(f"request {request:>9} B: " + "  ".join(
                    f"{k[:-5]} {v:8.1f} MB/s" for k, v in row.items() if k.endswith("MBps")), flush=True)
            whole = statistics.median(samples[("whole", "whole")])
        finally:
            fs.rm(path)

    small = rows[0]
    print(f"whole-file read ({drivers[0]}): {whole:.1f} MB/s")
    ratios, met = {}, True
    for d in drivers:
        suffix = f"-{d}" if len(drivers) > 1 else ""
        key = d if len(drivers) > 1 else ""
        on, off = small[f"on{suffix}_MBps"], small[f"off{suffix}_MBps"]
        ratios[f"4k_on_vs_off{suffix}"] = on / off
        ratios[f"4k_on_vs_whole_file{suffix}"] = on / whole
        print(f"4 KiB reads{' on ' + key if key else ''}: readahead on / off = {on / off:.1f}x (target >= 15); "
              f"on / whole-file = {on / whole:.2f} (target >= 0.8)")
        met = met and on / off >= 15 and on / whole >= 0.8
    print(f"targets {'met' if met else 'NOT met'}; JSON: {args.output}")
    write_json(args.output, {"benchmark": "readahead", "file_bytes": args.size, "rows": rows,
                             "drivers": drivers, "whole_file_MBps": whole, "ratios": ratios, "meets_target": met})
    return 0


if __name__ == "__main__":
    sys.exit(main())
