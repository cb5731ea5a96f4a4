"""TestDFSIO (as in HiBench) on HDFS: N processes each write, then read, their own file of S MiB,
with replication 1 and 3; aggregate MB/s. In the same run, for comparison: raw hdfs-native
(the client library under hpcbridge) and the Java client (FsShell -put / -cat, JVM start
included). Target: hpcbridge write and read >= 0.9x raw hdfs-native.

    python benchmarks/dfsio.py [--procs 2] [--size 128M] [--repetitions 2] [--url ... --webhdfs ...]

Both clients write 1 MiB buffers and read with read(1 MiB) returning bytes objects.
Phase bandwidth = N*S / (last end - first start) over the N processes. hpcbridge and raw
alternate which goes first in each repetition; medians are compared.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hpcbridge.cli.main import parse_size  # noqa: E402

from _common import hdfs_for_benchmark, write_json  # noqa: E402

TRANSFER = 1 << 20
_connections: dict = {}


def _hpcbridge(url, webhdfs):
    import hpcbridge

    key = ("hb", url)
    if key not in _connections:
        _connections[key] = hpcbridge.connect(url, webhdfs=webhdfs)
    return _connections[key]


def _raw(url):
    from hdfs_native import Client

    key = ("raw", url)
    if key not in _connections:
        _connections[key] = Client(url, config={"dfs.client.use.datanode.hostname": "true"})
    return _connections[key]


def worker(mode: str, phase: str, url: str, webhdfs: str, path: str, size: int, replication: int):
    """One DFSIO task; returns (start, end) wall-clock times."""
    buffer = bytearray(os.urandom(TRANSFER))
    count = size // TRANSFER
    if mode == "hpcbridge":
        fs = _hpcbridge(url, webhdfs)
        start = time.time()
        if phase == "write":
            with fs.create(path, replication=replication, block_size=64 << 20) as f:
                for _ in range(count):
                    f.write(buffer)
        else:
            with fs.open(path, "rb") as f:  # read(1 MiB) returning bytes, as the raw client below
                total = 0
                while chunk := f.read(TRANSFER):
                    total += len(chunk)
                assert total == size, (total, size)
    else:
        from hdfs_native import WriteOptions

        client = _raw(url)
        start = time.time()
        if phase == "write":
            with client.create(path, WriteOptions(replication=replication, block_size=64 << 20,
                                                  overwrite=True)) as w:
                for _ in range(count):
                    w.write(buffer)
        else:
            reader = client.read(path)
            total = 0
            while chunk := reader.read(TRANSFER):
                total += len(chunk)
            assert total == size, (total, size)
    return start, time.time()


def java_worker(phase: str, conf_dir: str, url: str, path: str, local: str):
    from hpcbridge.testbed.hadoop import java_command

    start = time.time()
    if phase == "write":
        args = ["-put", "-f", local, f"{url}{path}"]
        out = subprocess.DEVNULL
    else:
        args = ["-cat", f"{url}{path}"]
        out = subprocess.DEVNULL
    subprocess.run(java_command("org.apache.hadoop.fs.FsShell", conf_dir, args), check=True,
                   stdout=out, stderr=subprocess.DEVNULL)
    return start, time.time()


def phase_bandwidth(results, total_bytes):
    starts, ends = zip(*results)
    return total_bytes / (max(ends) - min(starts)) / 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", type=int, default=2, help="concurrent processes (default 2)")
    parser.add_argument("--size", type=parse_size, default=parse_size("128M"), help="bytes per process (128M)")
    parser.add_argument("--repetitions", type=int, default=6,
                        help="repetitions, alternating which client goes first (default 6); medians compared")
    parser.add_argument("--replication", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--no-java", action="store_true", help="skip the Java FsShell comparison")
    parser.add_argument("--url", help="hdfs://namenode:port of an existing cluster (default: start a testbed)")
    parser.add_argument("--webhdfs", help="http://host:port of its NameNode HTTP server")
    parser.add_argument("--conf-dir", help="Hadoop client configuration for FsShell (default: the testbed's)")
    parser.add_argument("--output", default="results/dfsio.json")
    args = parser.parse_args(argv)
    if args.size % TRANSFER:
        parser.error("--size must be a multiple of 1 MiB")

    total = args.procs * args.size
    results = {}
    context = multiprocessing.get_context("spawn")  # hdfs-native runs threads: never fork it
    with hdfs_for_benchmark(args.url, args.webhdfs) as (url, webhdfs, cluster), \
            context.Pool(args.procs) as pool:
        import hpcbridge

        fs = hpcbridge.connect(url, webhdfs=webhdfs)
        fs.mkdir("/benchmarks/dfsio", parents=True, exist_ok=True)
        for replication in args.replication:
            samples = {f"{m}_{p}": [] for m in ("hpcbridge", "raw") for p in ("write", "read")}
            for rep in range(args.repetitions):
                order = ["hpcbridge", "raw"] if rep % 2 == 0 else ["raw", "hpcbridge"]
                for mode in order:
                    paths = [f"/benchmarks/dfsio/{mode}-r{replication}-{i}" for i in range(args.procs)]
                    for phase in ("write", "read"):
                        runs = pool.starmap(worker, [(mode, phase, url, webhdfs, p, args.size, replication)
                                                     for p in paths])
                        samples[f"{mode}_{phase}"].append(phase_bandwidth(runs, total))
                    for p in paths:
                        fs.rm(p)
            cell = {k: statistics.median(v) for k, v in samples.items()}
            cell["samples_MBps"] = samples
            if not args.no_java and (cluster is not None or args.conf_dir):
                conf_dir = args.conf_dir or cluster.info.conf_dir
                with tempfile.TemporaryDirectory() as tmp:
                    local = os.path.join(tmp, "data.bin")
                    with open(local, "wb") as f:
                        f.write(os.urandom(args.size))
                    with context.Pool(args.procs) as java_pool:
                        paths = [f"/benchmarks/dfsio/java-r{replication}-{i}" for i in range(args.procs)]
                        fs_rep = hpcbridge.connect(url, webhdfs=webhdfs, replication=replication)
                        for p in paths:  # FsShell -put uses the cluster default replication: preset it
                            fs_rep.write_bytes(p, b"")
                            fs_rep.set_replication(p, replication)
                        runs = java_pool.starmap(java_worker, [("write", conf_dir, url, p, local) for p in paths])
                        cell["java_write"] = phase_bandwidth(runs, total)
                        runs = java_pool.starmap(java_worker, [("read", conf_dir, url, p, local) for p in paths])
                        cell["java_read"] = phase_bandwidth(runs, total)
                        for p in paths:
                            fs.rm(p)
            cell["ratio_write"] = cell["hpcbridge_write"] / cell["raw_write"]
            cell["ratio_read"] = cell["hpcbridge_read"] / cell["raw_read"]
            results[f"replication_{replication}"] = cell
            print(f"replication {replication}: " + "  ".join(
                f"{k} {v:.1f}" + ("" if k.startswith("ratio") else " MB/s") for k, v in cell.items()
                if not k.startswith("samples")), flush=True)
            spread = "; ".join(f"{k} " + " ".join(f"{x:.0f}" for x in v) for k, v in samples.items())
            print(f"  samples (MB/s): {spread}", flush=True)

    met = all(c["ratio_write"] >= 0.9 and c["ratio_read"] >= 0.9 for c in results.values())
    print(f"DFSIO, {args.procs} processes x {args.size / 2**20:.0f} MiB, medians of {args.repetitions}:")
    for name, c in results.items():
        java = (f"; Java FsShell write {c['java_write']:.1f} / read {c['java_read']:.1f} MB/s (JVM start included)"
                if "java_write" in c else "")
        print(f"  {name}: hpcbridge/raw hdfs-native write {c['ratio_write']:.3f}, read {c['ratio_read']:.3f}{java}")
    print(f"  target >= 0.9 for write and read: {'met' if met else 'NOT met'}; JSON: {args.output}")
    write_json(args.output, {"benchmark": "dfsio", "procs": args.procs, "bytes_per_proc": args.size,
                             "repetitions": args.repetitions, "results": results, "meets_target": met})
    return 0


if __name__ == "__main__":
    sys.exit(main())
