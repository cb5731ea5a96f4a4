"""TestDFSIO (as in HiBench) on HDFS: N processes each write, then read, their own file of S MiB,
with replication 1 and 3; aggregate MB/s. hpcbridge on each driver is compared, in the same run,
with the raw client under it (driver native: hdfs-native; driver libhdfs: pyarrow's
HadoopFileSystem on the same libhdfs.so) and with the Java client (FsShell -put / -cat, JVM start
included). Target: hpcbridge write and read >= 0.9x its raw client.

    python benchmarks/dfsio.py [--driver native|libhdfs|both] [--procs 2] [--size 128M]
                               [--repetitions 7] [--url ... --webhdfs ...]

Every client writes 1 MiB buffers and reads with read(1 MiB) returning bytes objects.
Phase bandwidth = N*S / (last end - first start) over the N processes (MB/s: HiBench's aggregate
view); Hadoop TestDFSIO's own figures (MiB/s: throughput = N*S / the sum of the processes' times,
average IO rate = the mean of each process's S / time, and its std dev) are reported beside it
(``testdfsio_MiBps``). Files are named ``/benchmarks/dfsio/<client>-r<replication>-<i>``
(TestDFSIO's: ``/benchmarks/TestDFSIO/io_data/test_io_<i>``). A warm-up round (every
client writes and reads once in every process: the JVM's JIT and the connections warm up there)
is reported apart; then the clients rotate which goes first in each repetition, and the medians
of the repetitions are compared (with the median of the per-repetition ratios beside them).
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


#: client name -> (the hpcbridge driver, or None for a raw client); raw clients by driver.
RAW = {"native": "raw-native", "libhdfs": "raw-pyarrow"}


def _hpcbridge(url, webhdfs, driver="native"):
    import hpcbridge

    key = ("hb", url, driver)
    if key not in _connections:
        _connections[key] = hpcbridge.connect(url, webhdfs=webhdfs, driver=driver)
    return _connections[key]


def _pyarrow(url, replication):
    """pyarrow's HadoopFileSystem on the libhdfs.so hpcbridge uses (its environment set as hpcbridge does)."""
    from hpcbridge.fs import libhdfs

    key = ("pa", url, replication)
    if key not in _connections:
        for name, value in libhdfs._start_environment().items():
            os.environ[name] = value
        from pyarrow import fs as pafs

        host, port = url.split("://", 1)[1].rstrip("/").rsplit(":", 1)
        # The client settings hpcbridge's drivers use (DataNodes are reached by name: the
        # testbed's listen on 127.0.0.2-4, not on the address the NameNode reports).
        _connections[key] = pafs.HadoopFileSystem(host, int(port), replication=replication,
                                                  default_block_size=64 << 20,
                                                  extra_conf={"dfs.client.use.datanode.hostname": "true"})
    return _connections[key]


def _raw(url):
    from hdfs_native import Client

    key = ("raw", url)
    if key not in _connections:
        _connections[key] = Client(url, config={"dfs.client.use.datanode.hostname": "true"})
    return _connections[key]


def warm_up(url: str, webhdfs: str, drivers: list, replications: list) -> None:
    """Pool initializer: connect every client measured (a JVM starts here, not in a timed phase)."""
    for d in drivers:
        _hpcbridge(url, webhdfs, d).info("/")
        if d == "native":
            _raw(url).get_file_info("/")
        else:
            for r in replications:
                _pyarrow(url, r).get_file_info("/")


def worker(mode: str, phase: str, url: str, webhdfs: str, path: str, size: int, replication: int):
    """One DFSIO task; returns (start, end) wall-clock times."""
    buffer = bytearray(os.urandom(TRANSFER))
    count = size // TRANSFER
    if mode.startswith("hpcbridge"):
        fs = _hpcbridge(url, webhdfs, mode.split("-")[1])
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
    elif mode == "raw-pyarrow":
        pa = _pyarrow(url, replication)
        start = time.time()
        if phase == "write":
            with pa.open_output_stream(path) as w:
                for _ in range(count):
                    w.write(buffer)
        else:
            with pa.open_input_stream(path) as reader:
                total = 0
                while chunk := reader.read(TRANSFER):
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


def testdfsio_figures(results, bytes_per_task: int) -> dict:
    """Hadoop TestDFSIO's figures of one phase, in MiB/s as it prints them (its
    ``analyzeResult``): ``throughput`` = all bytes / the sum of the tasks' times, ``average_io_rate``
    = the mean of each task's bytes / its time, ``io_rate_std_dev`` = sqrt(|mean(rate²) - mean²|)."""
    times = [end - start for start, end in results]
    rates = [bytes_per_task / 2**20 / t for t in times]
    mean = sum(rates) / len(rates)
    return {"throughput": len(times) * bytes_per_task / 2**20 / sum(times), "average_io_rate": mean,
            "io_rate_std_dev": abs(sum(r * r for r in rates) / len(rates) - mean * mean) ** 0.5}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--driver", choices=("native", "libhdfs", "both"), default="native",
                        help="hpcbridge's HDFS driver(s) measured, each against its raw client (default native)")
    parser.add_argument("--procs", type=int, default=2, help="concurrent processes (default 2)")
    parser.add_argument("--size", type=parse_size, default=parse_size("128M"), help="bytes per process (128M)")
    parser.add_argument("--repetitions", type=int, default=7,
                        help="timed repetitions after a warm-up round, rotating which client goes first "
                             "(default 7); medians compared")
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
    drivers = ["native", "libhdfs"] if args.driver == "both" else [args.driver]
    modes = [m for d in drivers for m in (f"hpcbridge-{d}", RAW[d])]
    context = multiprocessing.get_context("spawn")  # hdfs-native runs threads: never fork it
    with hdfs_for_benchmark(args.url, args.webhdfs) as (url, webhdfs, cluster), \
            context.Pool(args.procs, initializer=warm_up,
                         initargs=(url, webhdfs, drivers, args.replication)) as pool:
        import hpcbridge

        fs = hpcbridge.connect(url, webhdfs=webhdfs)
        fs.mkdir("/benchmarks/dfsio", parents=True, exist_ok=True)
        for replication in args.replication:
            samples = {f"{m}_{p}": [] for m in modes for p in ("write", "read")}
            hadoop = {k: [] for k in samples}  # TestDFSIO's own figures, per repetition
            warmup = {}
            for rep in range(-1, args.repetitions):  # -1: the warm-up round, reported apart
                order = modes[rep % len(modes):] + modes[:rep % len(modes)]
                for mode in order:
                    paths = [f"/benchmarks/dfsio/{mode}-r{replication}-{i}" for i in range(args.procs)]
                    for phase in ("write", "read"):
                        runs = pool.starmap(worker, [(mode, phase, url, webhdfs, p, args.size, replication)
                                                     for p in paths])
                        bandwidth = phase_bandwidth(runs, total)
                        if rep < 0:
                            warmup[f"{mode}_{phase}"] = bandwidth
                        else:
                            samples[f"{mode}_{phase}"].append(bandwidth)
                            hadoop[f"{mode}_{phase}"].append(testdfsio_figures(runs, args.size))
                    for p in paths:
                        fs.rm(p)
            cell = {k: statistics.median(v) for k, v in samples.items()}
            cell["samples_MBps"] = samples
            cell["warmup_MBps"] = warmup
            cell["testdfsio_MiBps"] = {k: {f: statistics.median(x[f] for x in v) for f in v[0]}
                                       for k, v in hadoop.items() if v}
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
            for d in drivers:
                for p in ("write", "read"):
                    cell[f"ratio_{d}_{p}"] = cell[f"hpcbridge-{d}_{p}"] / cell[f"{RAW[d]}_{p}"]
                    cell[f"paired_{d}_{p}"] = statistics.median(
                        a / b for a, b in zip(samples[f"hpcbridge-{d}_{p}"], samples[f"{RAW[d]}_{p}"]))
            results[f"replication_{replication}"] = cell
            print(f"replication {replication}: " + "  ".join(
                f"{k} {v:.1f}" + ("" if k.startswith("ratio") else " MB/s") for k, v in cell.items()
                if not k.startswith(("samples", "warmup", "paired", "testdfsio"))), flush=True)
            print("  as TestDFSIO prints them (MiB/s: throughput, average IO rate, std dev; medians): " + "; ".join(
                f"{k} {v['throughput']:.1f} {v['average_io_rate']:.1f} {v['io_rate_std_dev']:.1f}"
                for k, v in cell["testdfsio_MiBps"].items()), flush=True)
            spread = "; ".join(f"{k} " + " ".join(f"{x:.0f}" for x in v) for k, v in samples.items())
            print(f"  samples (MB/s): {spread}", flush=True)
            print("  warm-up round (MB/s): " + "; ".join(f"{k} {v:.0f}" for k, v in warmup.items()), flush=True)

    met = all(v >= 0.9 for c in results.values() for k, v in c.items() if k.startswith("ratio_"))
    print(f"DFSIO, {args.procs} processes x {args.size / 2**20:.0f} MiB, medians of {args.repetitions} "
          "(after a warm-up round):")
    for name, c in results.items():
        java = (f"; Java FsShell write {c['java_write']:.1f} / read {c['java_read']:.1f} MB/s (JVM start included)"
                if "java_write" in c else "")
        ratios = ", ".join(f"hpcbridge-{d}/{RAW[d]} write {c[f'ratio_{d}_write']:.3f} read "
                           f"{c[f'ratio_{d}_read']:.3f} (paired: {c[f'paired_{d}_write']:.3f} / "
                           f"{c[f'paired_{d}_read']:.3f})" for d in drivers)
        print(f"  {name}: {ratios}{java}")
    print(f"  target >= 0.9 for write and read: {'met' if met else 'NOT met'}; JSON: {args.output}")
    write_json(args.output, {"benchmark": "dfsio", "procs": args.procs, "bytes_per_proc": args.size,
                             "repetitions": args.repetitions, "drivers": drivers, "results": results, "meets_target": met})
    return 0


if __name__ == "__main__":
    sys.exit(main())
