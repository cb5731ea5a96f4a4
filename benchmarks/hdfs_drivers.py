"""Per-call costs of the two HDFS drivers (what driver="auto" is chosen by): the first call in a
process (libhdfs: JVM start), info(), a 10 KiB file written and closed, a 10 KiB file read.
Each driver twice, alternating; every figure is a mean over the loop.

    python benchmarks/hdfs_drivers.py [--stats 200] [--files 20] [--url hdfs://nn:port --webhdfs ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import hdfs_for_benchmark, write_json  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stats", type=int, default=200)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--url", help="hdfs://namenode:port of an existing cluster (default: start a testbed)")
    parser.add_argument("--webhdfs", help="http://host:port of its NameNode HTTP server")
    parser.add_argument("--output", default="results/hdfs_drivers.json")
    args = parser.parse_args(argv)
    rows = []
    with hdfs_for_benchmark(args.url, args.webhdfs) as (url, webhdfs, _cluster):
        import hpcbridge

        for rnd, driver in enumerate(["native", "libhdfs", "native", "libhdfs"]):
            started = time.perf_counter()
            fs = hpcbridge.connect(url, webhdfs=webhdfs, driver=driver)
            fs.info("/")
            row = {"driver": driver, "round": rnd // 2, "first_call_s": time.perf_counter() - started}
            root = f"/benchmarks/drivers-{os.getpid()}-{rnd}"
            fs.mkdir(root, parents=True, exist_ok=True)
            started = time.perf_counter()
            for _ in range(args.stats):
                fs.info("/")
            row["info_ms"] = (time.perf_counter() - started) / args.stats * 1e3
            started = time.perf_counter()
            for i in range(args.files):
                fs.write_bytes(f"{root}/f{i}", b"x" * 10240)
            row["small_write_ms"] = (time.perf_counter() - started) / args.files * 1e3
            started = time.perf_counter()
            for i in range(args.files):
                fs.read_bytes(f"{root}/f{i}")
            row["small_read_ms"] = (time.perf_counter() - started) / args.files * 1e3
            fs.rm(root, recursive=True)
            rows.append(row)
            print(f"{driver:8s} first call {row['first_call_s']:6.2f} s  info {row['info_ms']:5.2f} ms  "
                  f"10 KiB write+close {row['small_write_ms']:6.1f} ms  10 KiB read {row['small_read_ms']:5.2f} ms",
                  flush=True)
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} (first call: the first of its driver in this process)")
    write_json(args.output, {"benchmark": "hdfs_drivers", "rows": rows, "loadavg": load})
    return 0


if __name__ == "__main__":
    sys.exit(main())
