"""Write affinity on emulated hosts (seed 000 Fig. 5 in miniature): writers on DataNode hosts vs writers outside.

    python benchmarks/affinity.py [--datanodes 4] [--replication 3] [--size-per-writer 64M] [--block-size 8M]
                                  [--link-rate 200mbit] [--repetitions 3] [--plfs] [--output results/affinity.json]

A testbed on emulated hosts (``testbed up --netns``: a network namespace per DataNode host, links
shaped to ``--link-rate`` each way) is started for the run. Then, alternating, ``--repetitions``
times each:

* **on the DataNode hosts**: one writer process inside each DataNode host (``testbed exec``),
  each writing its own file of ``--size-per-writer`` bytes with ``--replication``;
* **outside**: as many writer processes on the head host (the NameNode's, which stores no
  blocks), each writing its own file the same way.

With ``--plfs`` the writers instead write one PLFS container on HDFS together (N-1, strided in
4 MiB units, ``hpcbridge.plfs.open(url, "wb", shared=True)``): each writer appends to its own
data log, which is the file whose blocks are counted.

HDFS's default placement puts a block's first replica on the writer's host when the writer runs on
a DataNode host, else on a random DataNode; the others go elsewhere. Reported per mode: aggregate
MB/s (all bytes over the slowest writer's time, each writer timing its own create-write-close),
the fraction of blocks stored on the writer's own host (from the block locations; the first
replica is the only one HDFS places there on purpose: with more DataNodes than replicas, random
placement would give ``replication / datanodes``), and the bytes that crossed the hosts' links
(interface counters of the bridge side of every host's veth).

The writers are this script run as ``--writer URL PATH SIZE`` inside the hosts.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hpcbridge.cli.main import parse_size  # noqa: E402

from _common import write_json  # noqa: E402

CHUNK = 4 << 20


def writer(url: str, size: int, replication: int, block_size: int, webhdfs: str, index: int, writers: int) -> None:
    """One writer: create ``url`` with ``replication`` and ``block_size``, write ``size`` bytes,
    close; print its seconds (and the file its bytes went to) as JSON. A ``plfs+hdfs://`` URL is
    one container shared by ``writers`` processes: this one writes units ``index``,
    ``index + writers``, ... (N-1 strided)."""
    import hpcbridge
    import hpcbridge.plfs

    options = {"webhdfs": webhdfs, "replication": replication, "block_size": block_size}
    chunk = memoryview(os.urandom(CHUNK))
    plfs = url.startswith("plfs+")
    started = time.perf_counter()
    if plfs:
        f = hpcbridge.plfs.open(url, "wb", shared=True, **options)
    else:
        fs, path = hpcbridge.url_to_fs(url, **options)
        f = fs.open(path, "wb")
    with f:
        done = unit = 0
        while done < size:
            n = min(CHUNK, size - done)
            if plfs:
                f.pwrite(chunk[:n], (unit * writers + index) * CHUNK)
            else:
                f.write(chunk[:n])
            done += n
            unit += 1
        stored = None
        if plfs:
            pfs, ppath = hpcbridge.url_to_fs(url, **options)
            stored = pfs.container(ppath).data_log(getattr(f, "raw", f).writer_id)[1]
    print(json.dumps({"seconds": time.perf_counter() - started, "bytes": size, "stored": stored}))


def run_mode(cluster, mode: str, repetition: int, args, webhdfs: str) -> dict:
    """All writers of one mode at once; their times, the link bytes, and where the blocks went."""
    import hpcbridge

    net = cluster.network
    hosts = net.names[1:] if mode == "on DataNode hosts" else ["head"] * len(net.names[1:])
    root = f"/bench-affinity/{'on' if mode.startswith('on') else 'out'}-{repetition}"
    scheme = "plfs+hdfs" if args.plfs else "hdfs"
    netloc = cluster.info.url.split("://", 1)[1]
    fs = hpcbridge.connect(cluster.info.url, webhdfs=webhdfs)
    fs.mkdir(root, parents=True, exist_ok=True)
    before = net.link_bytes()
    procs = []
    for i, host in enumerate(hosts):
        url = f"{scheme}://{netloc}{root}/" + ("ckpt" if args.plfs else f"w{i}")
        argv = [sys.executable, os.path.abspath(__file__), "--writer", url, str(args.size_per_writer),
                "--replication", str(args.replication), "--block-size", str(args.block_size), "--webhdfs", webhdfs,
                "--writer-index", str(i), "--writers", str(len(hosts))]
        procs.append((host, url, subprocess.Popen(net.command(host, argv), stdout=subprocess.PIPE,
                                                  stderr=subprocess.PIPE, text=True,
                                                  env={**os.environ, "HADOOP_CONF_DIR": cluster.info.conf_dir})))
    results = []
    for host, url, proc in procs:
        out, err = proc.communicate(timeout=1800)
        if proc.returncode:
            raise RuntimeError(f"writer on {host} failed ({proc.returncode}): {err[-2000:]}")
        done = json.loads(out.strip().splitlines()[-1])
        path = done.pop("stored") or "/" + url.split("://", 1)[1].split("/", 1)[1]
        results.append({"host": host, "address": net.addresses[host], "path": path, **done})
    after = net.link_bytes()
    crossed = sum(after[a]["in"] - before[a]["in"] for a in net.datanode_hosts)
    own = total = 0
    for r in results:
        for block in fs.block_locations(r["path"]):
            total += 1
            own += r["address"] in block.hosts
    fs.rm(root, recursive=True)
    slowest = max(r["seconds"] for r in results)
    nbytes = sum(r["bytes"] for r in results)
    return {"mode": mode, "repetition": repetition, "writers": len(results),
            "aggregate_MBps": round(nbytes / slowest / 1e6, 2), "slowest_seconds": round(slowest, 3),
            "writer_seconds": [round(r["seconds"], 3) for r in results],
            "blocks": total, "blocks_on_writer_host_fraction": round(own / total, 4) if total else None,
            "bytes_into_datanode_hosts": crossed, "bytes_written": nbytes}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datanodes", type=int, default=4, help="DataNode hosts, one writer each (default 4)")
    parser.add_argument("--replication", type=int, default=3, help="replication of the written files (default 3)")
    parser.add_argument("--size-per-writer", type=parse_size, default=parse_size("64M"),
                        help="bytes each writer writes (default 64M)")
    parser.add_argument("--block-size", type=parse_size, default=parse_size("8M"), help="HDFS block size (8M)")
    parser.add_argument("--link-rate", default="200mbit", help="rate of each DataNode host's link (200mbit)")
    parser.add_argument("--repetitions", type=int, default=3, help="runs of each mode, alternating (default 3)")
    parser.add_argument("--plfs", action="store_true",
                        help="the writers write one PLFS container on HDFS together (N-1) instead of a file each")
    parser.add_argument("--output", default="results/affinity.json")
    parser.add_argument("--writer", nargs=2, metavar=("URL", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--writer-index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--writers", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--webhdfs", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.writer:
        writer(args.writer[0], int(args.writer[1]), args.replication, args.block_size, args.webhdfs,
               args.writer_index, args.writers)
        return 0
    if not 1 <= args.replication <= args.datanodes:
        parser.error(f"--replication must be between 1 and --datanodes ({args.datanodes})")

    from hpcbridge.testbed import HdfsCluster
    from hpcbridge.testbed.netns import netns_unavailable

    try:
        why = netns_unavailable(args.link_rate)
    except ValueError as exc:
        parser.error(str(exc))
    if why:
        parser.error(f"emulated hosts: {why}")
    # A SIGTERM (a killed run) still stops the testbed: its namespaces and JVMs outlive us otherwise.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    cluster = HdfsCluster(tempfile.mkdtemp(prefix="hpcbridge-bench-affinity-"), datanodes=args.datanodes,
                          replication=args.replication, netns=True, link_rate=args.link_rate)
    started = time.perf_counter()
    runs = []
    try:
        cluster.up()
        webhdfs = f"http://{cluster.info.namenode_host}:{cluster.info.http_port}"
        print(f"# testbed on emulated hosts up in {time.perf_counter() - started:.1f} s: {args.datanodes} DataNode "
              f"hosts, links {args.link_rate}", flush=True)
        modes = ["on DataNode hosts", "outside (head host)"]
        for repetition in range(-1, args.repetitions):  # -1: warm-up, reported apart
            for mode in (modes if repetition % 2 else modes[::-1]):
                run = run_mode(cluster, mode, repetition, args, webhdfs)
                runs.append(run)
                print(f"{'warm-up' if repetition < 0 else f'rep {repetition}'}: {mode:20} "
                      f"{run['aggregate_MBps']:7.1f} MB/s, {100 * run['blocks_on_writer_host_fraction']:5.1f}% of "
                      f"blocks on the writer's host, {run['bytes_into_datanode_hosts'] / 2**20:7.1f} MiB into the "
                      f"DataNode hosts' links", flush=True)
    finally:
        cluster.down()

    def summary(mode):
        chosen = [r for r in runs if r["mode"] == mode and r["repetition"] >= 0]
        return {"aggregate_MBps_median": statistics.median(r["aggregate_MBps"] for r in chosen),
                "blocks_on_writer_host_fraction_min": min(r["blocks_on_writer_host_fraction"] for r in chosen),
                "bytes_into_datanode_hosts_median": statistics.median(r["bytes_into_datanode_hosts"] for r in chosen)}

    on, out = summary("on DataNode hosts"), summary("outside (head host)")
    result = {"benchmark": "affinity", "target": "one PLFS container on HDFS (N-1)" if args.plfs else "a file each",
              "datanodes": args.datanodes, "replication": args.replication,
              "size_per_writer": args.size_per_writer, "block_size": args.block_size, "link_rate": args.link_rate,
              "repetitions": args.repetitions, "runs": runs, "on_datanode_hosts": on, "outside": out,
              "rate_ratio_on_over_outside": round(on["aggregate_MBps_median"] / out["aggregate_MBps_median"], 3),
              "random_placement_fraction": round(args.replication / args.datanodes, 3),
              "targets": {"own_host_fraction_min": 0.95,
                          "own_host_met": on["blocks_on_writer_host_fraction_min"] >= 0.95,
                          "faster_on_hosts": on["aggregate_MBps_median"] > out["aggregate_MBps_median"]}}
    write_json(args.output, result)
    print(f"on DataNode hosts: {on['aggregate_MBps_median']:.1f} MB/s, "
          f"{100 * on['blocks_on_writer_host_fraction_min']:.1f}% (min) of blocks on the writer's host; outside: "
          f"{out['aggregate_MBps_median']:.1f} MB/s; ratio {result['rate_ratio_on_over_outside']}; "
          f"-> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
