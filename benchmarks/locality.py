"""Locality-aware jobs on the HDFS testbed: locality on vs off in ONE run (seed 004 Table 1, seed 000 Fig. 3).

    python benchmarks/locality.py [--size 512M] [--files 8] [--block-size 16M] [--repetitions 2]
                                  [--jobs grep,wordcount,dummy_read] [--fig3]
                                  [--netns --link-rate 200mbit[,10gbit]]
                                  [--url hdfs://nn:port --webhdfs http://nn:port --scheduler tcp://...]

Without --url a testbed is started for the run (3 DataNodes on 127.0.0.2-4, replication 1, and
one Dask worker per DataNode host) and stopped by pid afterwards. With ``--netns`` the testbed's
hosts are emulated (a network namespace per DataNode host and its worker, links shaped to
``--link-rate``; one testbed per rate given): a remote read then costs network time, and the
bytes that crossed the hosts' links are read from the interface counters, not from the plan.

TeraGen writes the dataset into HDFS; each job (grep of a rare pattern by default; wordcount and
dummy_read on request) runs with locality off and on, alternating, a warm-up round (reported
apart) and then ``--repetitions`` times each. Every figure is measured: each read task reports the
host it ran on and the DataNode host that stores every byte range it fetched (block locations of
exactly that range; with replication 1 that host served it), and bytes are local when the two
hosts are equal. grep's counts are checked against a serial count of the same data (records,
bytes, matches, byte sum), dummy_read's against the dataset size, wordcount's between all runs:
every record exactly once.

``--fig3`` adds seed 000 Fig. 3's three bars: one task per block reads it in 4 KiB calls (as
Hadoop's file system calls did) through hpcbridge's HDFS client without readahead and placed
anywhere ("vanilla"), with its 4 MiB readahead, and with readahead on the block's own host
("readahead + layout"); every byte is counted once. Output: JSON (results/locality.json).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
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
def testbed_with_dask(args, link_rate=None):
    """Yield ``(hdfs url, webhdfs, scheduler address, network or None)``: given, or a testbed
    started for this run (on emulated hosts with links of ``link_rate`` when given)."""
    if args.url:
        yield args.url, args.webhdfs, args.scheduler, None
        return
    from hpcbridge.testbed import HdfsCluster

    netns = {"netns": True, "link_rate": link_rate} if link_rate else {}
    cluster = HdfsCluster(tempfile.mkdtemp(prefix="hpcbridge-bench-locality-"), datanodes=3, replication=1, **netns)
    started = time.perf_counter()
    try:
        cluster.up(dask=True, dask_threads=args.threads, dask_work_stealing=args.work_stealing == "on")
        print(f"# testbed + Dask up in {time.perf_counter() - started:.1f} s: {cluster.info.url}, "
              f"scheduler {cluster.info.dask['scheduler']}" + (f", links {link_rate}" if link_rate else ""),
              flush=True)
        yield (cluster.info.url, f"http://{cluster.info.namenode_host}:{cluster.info.http_port}",
               cluster.info.dask["scheduler"], cluster.network)
    finally:
        cluster.down()


def link_bytes_between_hosts(network, before: dict) -> int:
    """Bytes that left the DataNode hosts over their links since ``before`` (reads served to
    another host; the head's link carries only the jobs' control traffic)."""
    now = network.link_bytes()
    return sum(now[h]["out"] - before[h]["out"] for h in network.datanode_hosts)


JOBS = ("grep", "wordcount", "dummy_read")
#: Seed 000 Fig. 3: Hadoop's file system calls read 4 KB at a time.
FIG3_REQUEST = 4 << 10
#: Fig. 3's bars: (name, readahead of the HDFS client, tasks placed on the block's host).
FIG3_BARS = (("vanilla (no readahead, no layout)", 0, False), ("readahead 4 MiB", 4 << 20, False),
             ("readahead 4 MiB + layout", 4 << 20, True))


def read_in_small_requests(url: str, path: str, start: int, length: int, readahead: int, webhdfs: str) -> int:
    """A Fig. 3 map task: ``length`` bytes of ``path`` from ``start``, read in 4 KiB calls through
    hpcbridge's HDFS client with ``readahead`` (0: every call goes to the DataNode); bytes read."""
    import hpcbridge

    fs = hpcbridge.connect(url, webhdfs=webhdfs, readahead=readahead)
    buf = memoryview(bytearray(FIG3_REQUEST))
    done = 0
    with fs.open(path, "rb") as f:
        f.seek(start)
        while done < length:
            got = f.readinto(buf[:min(FIG3_REQUEST, length - done)])
            if not got:
                raise OSError(f"{path}: short read at {start + done}")
            done += got
    return done


def fig3_bars(client, fs, url: str, webhdfs: str, network, repetitions: int) -> dict:
    """Seed 000 Fig. 3 in miniature: every block read by one task in 4 KiB calls, without
    readahead and without layout, with readahead, and with readahead and layout (each task on its
    block's host); a warm-up round first. Seconds, link bytes, and every byte read once."""
    workers = {}
    for address, info in client.scheduler_info(n_workers=-1)["workers"].items():
        workers.setdefault(info["host"], address)
    blocks = [(p, b.offset, b.length, b.hosts[0]) for p in fs.find("/bench-locality/teragen")
              for b in fs.block_locations(p)]
    total = sum(b[2] for b in blocks)
    runs = []
    for repetition in range(-1, repetitions):
        for name, readahead, layout in FIG3_BARS:
            before = network.link_bytes() if network is not None else None
            started = time.perf_counter()
            futures = [client.submit(read_in_small_requests, url, path, offset, length, readahead, webhdfs,
                                     pure=False, **({"workers": [workers[host]], "allow_other_workers": False}
                                                    if layout else {}))
                       for path, offset, length, host in blocks]
            got = sum(client.gather(futures))
            run = {"bar": name, "repetition": repetition, "seconds": round(time.perf_counter() - started, 3),
                   "every_byte_once": got == total}
            if network is not None:
                run["link_bytes_between_hosts"] = link_bytes_between_hosts(network, before)
            runs.append(run)
            print(f"{'warm-up' if repetition < 0 else f'rep {repetition}'}: Fig. 3 {name:34} {run['seconds']:7.2f} s"
                  + (f", {run['link_bytes_between_hosts'] / 2**20:6.1f} MiB crossed the links" if network else "")
                  + f", every byte once: {run['every_byte_once']}", flush=True)
    summary = {}
    for name, _, _ in FIG3_BARS:
        chosen = [r for r in runs if r["bar"] == name and r["repetition"] >= 0]
        summary[name] = {"seconds_median": statistics.median(r["seconds"] for r in chosen),
                         "warmup_seconds": next(r["seconds"] for r in runs if r["bar"] == name and r["repetition"] < 0),
                         "every_byte_once": all(r["every_byte_once"] for r in runs if r["bar"] == name)}
        if network is not None:
            summary[name]["link_bytes_median"] = statistics.median(r["link_bytes_between_hosts"] for r in chosen)
    vanilla = summary[FIG3_BARS[0][0]]["seconds_median"]
    for name in summary:
        summary[name]["time_vs_vanilla"] = round(summary[name]["seconds_median"] / vanilla, 3)
    print("Fig. 3: " + "; ".join(f"{n} {v['seconds_median']:.2f} s ({v['time_vs_vanilla']:.2f} of vanilla)"
                                 for n, v in summary.items()), flush=True)
    return {"request_bytes": FIG3_REQUEST, "runs": runs, "bars": summary}


def run_jobs(args, url: str, webhdfs: str, scheduler: str, network) -> dict:
    """TeraGen, the serial count, then every job with locality off and on, alternating (a
    warm-up round first, reported apart); the result."""
    import hpcbridge
    import hpcbridge.dask as hd
    from distributed import Client
    from hpcbridge.dask.jobs import grep_serial

    records = args.size // 100
    partition_size = args.partition_size or args.block_size
    with Client(scheduler, set_as_default=False, timeout=30) as client:
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
        # What each job must return: grep the serial count, dummy_read every byte, wordcount the
        # same counts with locality on and off (the first run's).
        expected = {"grep": serial, "dummy_read": gen.details["bytes"], "wordcount": None}
        jobs = {"grep": lambda **kw: hd.grep(data, PATTERN, **kw),
                "wordcount": lambda **kw: hd.wordcount(data, **kw),
                "dummy_read": lambda **kw: hd.dummy_read(data, **kw)}
        runs = []
        for repetition in range(-1, args.repetitions):  # -1: the warm-up round
            for job in args.jobs:
                for locality in ((False, True) if repetition % 2 else (True, False)):
                    before = network.link_bytes() if network is not None else None
                    result = jobs[job](client=client, locality=locality, storage_options=options,
                                       partition_size=partition_size)
                    if expected[job] is None:
                        expected[job] = result.value
                    run = {**result.report.as_dict(), "dask_job": result.report.job,  # the report's job is an id
                           "job": job, "locality": locality, "repetition": repetition, "warmup": repetition < 0,
                           "seconds": round(result.seconds, 3), "exactly_once": result.value == expected[job],
                           "partitions": result.partitions, "placed_fraction": result.details["placed_fraction"]}
                    if job == "grep":
                        run["value"] = result.value
                    crossed = ""
                    if network is not None:
                        run["link_bytes_between_hosts"] = link_bytes_between_hosts(network, before)
                        crossed = f", {run['link_bytes_between_hosts'] / 2**20:6.1f} MiB crossed the links"
                    runs.append(run)
                    print(f"{'warm-up' if repetition < 0 else f'rep {repetition}'}: {job:10} locality "
                          f"{'on ' if locality else 'off'}: {result.seconds:6.2f} s, "
                          f"{100 * result.report.local_fraction:5.1f}% local{crossed}, tasks per worker host "
                          f"{result.report.tasks_by_worker_host}, exactly once: {run['exactly_once']}", flush=True)
        fig3 = fig3_bars(client, fs, url, webhdfs, network, args.repetitions) if args.fig3 else None
        fs.rm("/bench-locality", recursive=True)

    def summary(job: str, mode: bool) -> dict:
        chosen = [r for r in runs if r["job"] == job and r["locality"] is mode and not r["warmup"]]
        warmup = [r for r in runs if r["job"] == job and r["locality"] is mode and r["warmup"]]
        out = {"seconds_median": statistics.median(r["seconds"] for r in chosen),
               "warmup_seconds": warmup[0]["seconds"] if warmup else None,
               "local_fraction_median": statistics.median(r["local_fraction"] for r in chosen),
               "local_fraction_min": min(r["local_fraction"] for r in chosen),
               "all_exactly_once": all(r["exactly_once"] for r in chosen + warmup)}
        if network is not None:
            out["link_bytes_median"] = statistics.median(r["link_bytes_between_hosts"] for r in chosen)
        return out

    per_job = {}
    for job in args.jobs:
        on, off = summary(job, True), summary(job, False)
        entry = {"locality_on": on, "locality_off": off,
                 "time_ratio_off_over_on": round(off["seconds_median"] / on["seconds_median"], 3)}
        if network is not None:
            entry["link_bytes_saved_fraction"] = (round(1 - on["link_bytes_median"] / off["link_bytes_median"], 5)
                                                  if off["link_bytes_median"] else None)
        per_job[job] = entry
        print(f"{job}: locality on {100 * on['local_fraction_median']:.1f}% local (min "
              f"{100 * on['local_fraction_min']:.1f}%), {on['seconds_median']:.2f} s; off "
              f"{100 * off['local_fraction_median']:.1f}% local, {off['seconds_median']:.2f} s; off/on time "
              f"{entry['time_ratio_off_over_on']}"
              + (f"; link bytes on/off {on['link_bytes_median'] / 2**20:.2f} / {off['link_bytes_median'] / 2**20:.1f} "
                 f"MiB (saved {100 * entry['link_bytes_saved_fraction']:.2f}%)"
                 if entry.get("link_bytes_saved_fraction") is not None else "")
              + f"; exactly once: {on['all_exactly_once'] and off['all_exactly_once']}", flush=True)
    first = per_job[args.jobs[0]]
    result = {
        "benchmark": "locality", "dataset_bytes": gen.details["bytes"], "records": records, "files": args.files,
        "block_size": args.block_size, "blocks": len(blocks), "partition_size": partition_size,
        "datanodes": len(layout), "replication": 1, "blocks_per_datanode": dict(sorted(layout.items())),
        "teragen_seconds": round(gen.seconds, 3), "serial": serial, "serial_seconds": round(serial_seconds, 3),
        "pattern": PATTERN.decode(), "threads_per_worker": args.threads, "repetitions": args.repetitions,
        "runs": runs, "jobs": per_job,
        "work_stealing": args.work_stealing if not args.url else "as configured on the given scheduler",
        # The first job's summary at the top level (the shape `hpcbridge bench report` reads).
        "job": args.jobs[0], "locality_on": first["locality_on"], "locality_off": first["locality_off"],
        "time_ratio_off_over_on": first["time_ratio_off_over_on"],
        "targets": {"local_fraction_on_min": 0.95,
                    "local_fraction_on_met": all(j["locality_on"]["local_fraction_min"] >= 0.95
                                                 for j in per_job.values()),
                    "exactly_once": all(j[f"locality_{m}"]["all_exactly_once"] for j in per_job.values()
                                        for m in ("on", "off"))},
        "measured_how": "each read task logs its worker host (distributed.get_worker().address) and, for every byte "
                        "range it fetched, the host of that range's block locations; local = same host",
    }
    if fig3 is not None:
        result["fig3"] = fig3
    if network is not None:
        result["link_rate_bits"] = network.rate_bits
        result["measured_how"] += ("; link bytes: rx_bytes (bytes leaving the host) of the bridge side of each "
                                   "DataNode host's veth, summed over the hosts")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("512M"), help="dataset size (default 512M)")
    parser.add_argument("--files", type=int, default=8, help="TeraGen files (default 8)")
    parser.add_argument("--block-size", type=parse_size, default=parse_size("16M"), help="HDFS block size (16M)")
    parser.add_argument("--partition-size", type=parse_size, default=None,
                        help="metablock target (default: the block size: one task per block)")
    parser.add_argument("--repetitions", type=int, default=2,
                        help="runs of each mode after a warm-up round (default 2)")
    parser.add_argument("--jobs", default="grep",
                        help=f"comma-separated jobs, from {', '.join(JOBS)} (default grep)")
    parser.add_argument("--threads", type=int, default=1, help="threads per Dask worker of the testbed (1)")
    parser.add_argument("--work-stealing", choices=["on", "off"], default="off",
                        help="work stealing of the testbed's scheduler (default off, as the testbed: the "
                             "locality plan balances; stealing only trades locality)")
    parser.add_argument("--fig3", action="store_true",
                        help="also seed 000 Fig. 3's bars: every block read in 4 KiB calls without readahead, with "
                             "readahead, and with readahead on the block's host")
    parser.add_argument("--netns", action="store_true",
                        help="emulated hosts: each DataNode and its worker in a network namespace, links shaped "
                             "(needs root)")
    parser.add_argument("--link-rate", default="200mbit",
                        help="with --netns: rate of each host's link, or several comma-separated, one testbed "
                             "each (default 200mbit)")
    parser.add_argument("--url", help="an existing HDFS (hdfs://nn:port); needs --webhdfs and --scheduler")
    parser.add_argument("--webhdfs", help="http://nn:port of the existing HDFS")
    parser.add_argument("--scheduler", help="Dask scheduler whose workers run on the DataNode hosts")
    parser.add_argument("--output", default="results/locality.json")
    args = parser.parse_args(argv)
    if args.url and not (args.webhdfs and args.scheduler):
        parser.error("--url needs --webhdfs and --scheduler")
    args.jobs = [j.strip() for j in args.jobs.split(",") if j.strip()]
    unknown = sorted(set(args.jobs) - set(JOBS))
    if unknown or not args.jobs:
        parser.error(f"--jobs: unknown {unknown or 'none given'}; choose from {', '.join(JOBS)}")
    if args.url and args.netns:
        parser.error("--netns starts its own testbed: it does not combine with --url")
    rates = [r.strip() for r in args.link_rate.split(",") if r.strip()] if args.netns else [None]
    if args.netns:
        from hpcbridge.testbed.netns import netns_unavailable

        try:
            why = netns_unavailable(*rates)
        except ValueError as exc:
            parser.error(str(exc))
        if why:
            parser.error(f"--netns: {why}")

    # A SIGTERM (a killed run) still stops the testbed: its namespaces and JVMs outlive us otherwise.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    results = []
    for rate in rates:
        with testbed_with_dask(args, rate) as (url, webhdfs, scheduler, network):
            results.append(run_jobs(args, url, webhdfs, scheduler, network))
    if args.netns:
        out = {"benchmark": "locality", "netns": True, "by_link_rate": dict(zip(rates, results))}
        ok = all(r["targets"]["exactly_once"] for r in results)
    else:
        out, ok = results[0], results[0]["targets"]["exactly_once"]
    write_json(args.output, out)
    print(f"-> {args.output}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
