"""Locality in seconds: grep on an HDFS testbed whose hosts are emulated (network namespaces, shaped links).

Starts ``HdfsCluster(netns=True)``: the NameNode and Dask scheduler in one network namespace, each
of 3 DataNodes with its Dask worker in its own, every DataNode host's link limited to
``--link-rate`` each way. TeraGen writes the dataset (each worker its own files, on its own
host); grep then runs with locality off and on, alternating, and each run's locality report is
printed with its seconds and the bytes that crossed the hosts' links (interface counters).
Everything started is stopped and removed (processes by pid, namespaces and links by name).
Where namespaces cannot be made (not root, no iproute2), prints why and exits 0.

    python examples/emulated_cluster.py [--size 96M] [--link-rate 200mbit] [--repetitions 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

from hpcbridge.cli.main import parse_size

PATTERN = rb"ZZZZ"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("96M"), help="dataset size (default 96M)")
    parser.add_argument("--link-rate", default="200mbit", help="rate of each host's link (default 200mbit)")
    parser.add_argument("--repetitions", type=int, default=2, help="grep runs with locality off and on (default 2)")
    args = parser.parse_args(argv)

    from hpcbridge.testbed.netns import netns_unavailable

    try:
        why = netns_unavailable(args.link_rate)
    except ValueError as exc:
        parser.error(str(exc))
    if why:
        print(f"skipped: emulated hosts are not possible here ({why})")
        return 0

    import hpcbridge.dask as hd
    from distributed import Client
    from hpcbridge.dask.jobs import grep_serial
    from hpcbridge.testbed import HdfsCluster

    cluster = HdfsCluster(tempfile.mkdtemp(prefix="hpcbridge-demo-netns-"), datanodes=3, replication=1,
                          netns=True, link_rate=args.link_rate)
    started = time.perf_counter()
    try:
        info = cluster.up(dask=True)
        net = cluster.network
        print(f"emulated cluster up in {time.perf_counter() - started:.1f} s: NameNode and scheduler on {net.head}, "
              f"DataNode hosts {', '.join(net.datanode_hosts)} (network namespaces on {net.subnet}), "
              f"links {args.link_rate} each way")
        options = {"webhdfs": f"http://{info.namenode_host}:{info.http_port}"}
        data = f"{info.url}/demo/teragen"
        with Client(info.dask["scheduler"], set_as_default=False, timeout=30) as client:
            gen = hd.teragen(data, args.size // 100, files=6, block_size=16 << 20, replication=1, client=client,
                             storage_options=options)
            print(f"teragen: {gen.details['bytes'] / 2**20:.0f} MiB in {gen.seconds:.1f} s")
            serial = grep_serial(data, PATTERN, storage_options=options)
            times = {False: [], True: []}
            for repetition in range(args.repetitions):
                for locality in (False, True):
                    before = net.link_bytes()
                    result = hd.grep(data, PATTERN, client=client, locality=locality, storage_options=options)
                    after = net.link_bytes()
                    crossed = sum(after[h]["out"] - before[h]["out"] for h in net.datanode_hosts)
                    times[locality].append(result.seconds)
                    print(f"\ngrep, locality {'on' if locality else 'off'}: {result.seconds:.2f} s, "
                          f"{crossed / 2**20:.1f} MiB crossed the hosts' links, same counts as a serial grep: "
                          f"{result.value == serial}")
                    print(result.report.format())
        off, on = statistics.median(times[False]), statistics.median(times[True])
        print(f"\nmedian grep time: locality off {off:.2f} s, on {on:.2f} s: {off / on:.1f}x faster with locality "
              f"over {args.link_rate} links")
    finally:
        cluster.down()
        print("emulated cluster stopped (processes by pid, namespaces and links by name)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
