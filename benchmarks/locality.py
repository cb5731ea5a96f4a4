"""Locality-aware grep on the HDFS testbed: locality on vs off in ONE run (seed 004 Table 1, seed 000 Fig. 3).

    python benchmarks/locality.py [--size 512M] [--files 8] [--block-size 16M] [--repetitions 2]
                                  [--url hdfs://nn:port --webhdfs http://nn:port --scheduler tcp://...]

Without --url a testbed is started for the run (3 DataNodes on 127.0.0.2-4, replication 1, and
one Dask worker per DataNode host) and stopped by pid afterwards. TeraGen writes the dataset into
HDFS; grep (a rare pattern) runs with locality off and on, alternating, ``--repetitions`` times
each. Every figure is measured: each read task reports the host it ran on and the DataNode host
that stores every byte range it fetched (block locations of exactly that range; with
replication 1 that host served it), and bytes are local when the two hosts are equal. Every run's
counts are checked against a serial count of the same data (records, bytes, matches, byte sum):
every record exactly once. Output: JSON (results/locality.json).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hpcbridge.cli.main import parse_size  # noqa: E402

from _common import write_json  # noqa: E402

PATTERN = rb"ZZZZ"


@contextlib.contextmanager
def testbed_with_dask(args):
    """Yield ``(hdfs url, webhdfs, scheduler address)``: given, or a testbed started for this run."""
    if args.url:
        yield args.url, args.webhdfs, args.scheduler
        return
    from hpcbridge.testbed import HdfsCluster

    cluster = HdfsCluster(tempfile.mkdtemp(prefix="hpcbridge-bench-locality-"), datanodes=3, replication=1)
    started = time.perf_counter()
    cluster.up(dask=True, dask_threads=args.threads, dask_work_stealing=args.work_stealing == "on")
    print(f"# testbed + Dask up in {time.perf_counter() - started:.1f} s: {cluster.info.url}, "
          f"scheduler {cluster.info.dask['scheduler']}", flush=True)
    try:
        yield cluster.info.url, f"http://127.0.0.1:{cluster.info.http_port}", cluster.info.dask["scheduler"]
    finally:
        cluster.down()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("512M"), help="dataset size (default 512M)")
    parser.add_argument("--files", type=int, default=8, help="TeraGen files (default 8)")
    parser.add_argument("--block-size", type=parse_size, default=parse_size("16M"), help="HDFS block size (16M)")
    parser.add_argument("--partition-size", type=parse_size, default=None,
                        help="metablock target (default: the block size: one task per block)")
    parser.add_argument("--repetitions", type=int, default=2, help="runs of each mode (default 2)")
    parser.add_argument("--threads", type=int, default=1, help="threads per Dask worker of the testbed (1)")
    parser.add_argument("--work-stealing", choices=["on", "off"], default="off",
                        help="work stealing of the testbed's scheduler (default off, as the testbed: the "
                             "locality plan balances; stealing only trades locality)")
    parser.add_argument("--url", help="an existing HDFS (hdfs://nn:port); needs --webhdfs and --scheduler")
    parser.add_argument("--webhdfs", help="http://nn:port of the existing HDFS")
    parser.add_argument("--scheduler", help="Dask scheduler whose workers run on the DataNode hosts")
    parser.add_argument("--output", default="results/locality.json")
    args = parser.parse_args(argv)
    if args.url and not (args.webhdfs and args.scheduler):
        parser.error("--url needs --webhdfs and --scheduler")

    import hpcbridge
    import hpcbridge.dask as hd
    from distributed import Client
    from hpcbridge.dask.jobs import grep_serial

    records = args.size // 100
    partition_size = args.partition_size or args.block_size
    with testbed_with_dask(args) as (url, webhdfs, scheduler), \
            Client(scheduler, set_as_default=False, timeout=30) as client:
        options = {"webhdfs": webhdfs}
        data = f"{url}/bench-locality/teragen"
        gen = hd.teragen(data, records, files=args.files, block_size=args.block_size, replication=1,
                         client=client, overwrite=True, storage_options=options)
        print(f"# teragen: {gen.details['bytes'] / 2**20:.0f} MiB in {args.files} files, {gen.seconds:.1f} s",
              flush=True)
        fs = hpcbridge.connect(url, **options)
        blocks = [b for p in fs.find("/bench-locality/teragen") for b in fs.block_locations(p)]
        layout = Counter(b.hosts[0] for b in blocks)
        started = time.perf_counter()
        serial = grep_serial(data, PATTERN, storage_options=options)
        serial_seconds = time.perf_counter() - started
        print(f"# {len(blocks)} blocks, per DataNode {dict(sorted(layout.items()))}; serial grep {serial} "
              f"in {serial_seconds:.1f} s", flush=True)
        runs = []
        for repetition in range(args.repetitions):
            for locality in (False, True):
                result = hd.grep(data, PATTERN, client=client, locality=locality, storage_options=options,
                                 partition_size=partition_size)
                run = {"locality": locality, "repetition": repetition, "seconds": round(result.seconds, 3),
                       "exactly_once": result.value == serial, "value": result.value,
                       "partitions": result.partitions, "placed_fraction": result.details["placed_fraction"],
                       **result.report.as_dict()}
                runs.append(run)
                print(f"locality {'on ' if locality else 'off'}: {result.seconds:6.2f} s, "
                      f"{100 * result.report.local_fraction:5.1f}% local, served per host "
                      f"{ {h: round(n / 2**20) for h, n in result.report.bytes_by_host.items()} } MiB, "
                      f"tasks per worker host {result.report.tasks_by_worker_host}, exactly once: "
                      f"{run['exactly_once']}", flush=True)
        fs.rm("/bench-locality", recursive=True)

    def summary(mode: bool) -> dict:
        chosen = [r for r in runs if r["locality"] is mode]
        return {"seconds_median": statistics.median(r["seconds"] for r in chosen),
                "local_fraction_median": statistics.median(r["local_fraction"] for r in chosen),
                "local_fraction_min": min(r["local_fraction"] for r in chosen),
                "all_exactly_once": all(r["exactly_once"] for r in chosen)}

    on, off = summary(True), summary(False)
    result = {
        "benchmark": "locality", "dataset_bytes": gen.details["bytes"], "records": records, "files": args.files,
        "block_size": args.block_size, "blocks": len(blocks), "partition_size": partition_size,
        "datanodes": len(layout), "replication": 1, "blocks_per_datanode": dict(sorted(layout.items())),
        "teragen_seconds": round(gen.seconds, 3), "serial": serial, "serial_seconds": round(serial_seconds, 3),
        "pattern": PATTERN.decode(), "threads_per_worker": args.threads, "runs": runs,
        "work_stealing": args.work_stealing if not args.url else "as configured on the given scheduler",
        "locality_on": on, "locality_off": off,
        "time_ratio_off_over_on": round(off["seconds_median"] / on["seconds_median"], 3),
        "targets": {"local_fraction_on_min": 0.95, "local_fraction_on_met": on["local_fraction_min"] >= 0.95,
                    "exactly_once": on["all_exactly_once"] and off["all_exactly_once"]},
        "measured_how": "each read task logs its worker host (distributed.get_worker().address) and, for every byte "
                        "range it fetched, the host of that range's block locations; local = same host",
    }
    write_json(args.output, result)
    print(f"locality on: {100 * on['local_fraction_median']:.1f}% local (min {100 * on['local_fraction_min']:.1f}%), "
          f"{on['seconds_median']:.2f} s; off: {100 * off['local_fraction_median']:.1f}% local, "
          f"{off['seconds_median']:.2f} s; exactly once: {result['targets']['exactly_once']}; -> {args.output}")
    return 0 if result["targets"]["exactly_once"] else 1


if __name__ == "__main__":
    sys.exit(main())
