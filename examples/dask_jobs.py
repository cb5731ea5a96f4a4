"""The seeds' Hadoop jobs as locality-aware Dask jobs, on any hpcbridge URL.

Without --url, starts a local HDFS testbed with Dask (3 DataNodes on 127.0.0.2-4, replication 1,
one Dask worker per DataNode host), runs TeraGen into it, then grep and wordcount with
locality-aware scheduling, a TeraSort with validation, prints each job's locality report, and
stops everything it started (by pid).

    python examples/dask_jobs.py [--size 64M] [--block-size 4M]
    python examples/dask_jobs.py --url file:///scratch/tera          # any backend, local threads
    python examples/dask_jobs.py --url plfs+file:///scratch/tera --scheduler tcp://host:8786
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time

import hpcbridge.dask as hd
from hpcbridge.cli.main import parse_size
from hpcbridge.dask.jobs import grep_serial


@contextlib.contextmanager
def storage(args):
    """Yield ``(base URL, storage options, client or None)``."""
    if args.url:
        client = None
        if args.scheduler:
            from distributed import Client

            client = Client(args.scheduler, set_as_default=False)
        try:
            yield args.url.rstrip("/"), {}, client
        finally:
            if client is not None:
                client.close()
        return
    from distributed import Client

    from hpcbridge.testbed import HdfsCluster

    cluster = HdfsCluster(tempfile.mkdtemp(prefix="hpcbridge-demo-dask-"), datanodes=3, replication=1)
    started = time.perf_counter()
    info = cluster.up(dask=True)
    print(f"testbed up in {time.perf_counter() - started:.1f} s: HDFS {info.url}, Dask scheduler "
          f"{info.dask['scheduler']}, workers on " + ", ".join(w["host"] for w in info.dask["workers"]))
    try:
        with Client(info.dask["scheduler"], set_as_default=False) as client:
            yield f"{info.url}/demo", {"webhdfs": f"http://127.0.0.1:{info.http_port}"}, client
    finally:
        cluster.down()
        print("testbed stopped (HDFS and Dask processes, by pid)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="base URL for the data (default: a local HDFS testbed started here)")
    parser.add_argument("--scheduler", help="Dask scheduler address for --url (default: local threads)")
    parser.add_argument("--size", type=parse_size, default=parse_size("64M"), help="TeraGen bytes (default 64M)")
    parser.add_argument("--files", type=int, default=4, help="TeraGen files (default 4)")
    parser.add_argument("--block-size", type=parse_size, default=parse_size("4M"), help="HDFS block size (4M)")
    args = parser.parse_args(argv)
    ok = True
    with storage(args) as (base, options, client):
        data, out = f"{base}/teragen", f"{base}/terasort"
        gen = hd.teragen(data, args.size // 100, files=args.files, block_size=args.block_size, replication=1,
                         client=client, overwrite=True, storage_options=options)
        print(f"\n== teragen: {gen.details['records']} records ({gen.details['bytes'] / 2**20:.0f} MiB) into "
              f"{args.files} files in {gen.seconds:.2f} s")
        serial = grep_serial(data, rb"ZZZ", storage_options=options)
        for locality in (True, False):
            g = hd.grep(data, rb"ZZZ", client=client, locality=locality, storage_options=options)
            once = g.value == serial
            ok &= once
            print(f"\n== grep 'ZZZ', locality {'on' if locality else 'off'}: {g.value['matches']} matches in "
                  f"{g.value['records']} records, {g.seconds:.2f} s, {g.partitions} partitions; "
                  f"same as a serial count (every record once): {once}")
            print(g.report.format())
        w = hd.wordcount(data, word=rb"[a-z]+", client=client, storage_options=options)
        top = ", ".join(f"{word.decode()} {n}" for word, n in w.value.most_common(5))
        print(f"\n== wordcount: {sum(w.value.values())} words, {len(w.value)} distinct, top: {top}; "
              f"{w.seconds:.2f} s")
        print(w.report.format())
        s = hd.terasort(data, out, client=client, overwrite=True, storage_options=options)
        v = hd.validate_sort(out, data, client=client, storage_options=options)
        ok &= v.value["ok"]
        print(f"\n== terasort: {s.value['records']} records into {len(s.value['outputs'])} sorted files in "
              f"{s.seconds:.2f} s; validate: {'OK' if v.value['ok'] else v.value['problems']}")
        print(s.report.format())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
