"""Stage the demo's checkpoint into HDFS and show where its blocks landed.

Starts a local HDFS testbed (3 DataNodes on 127.0.0.2-4) unless --hdfs names a cluster, copies
the files written by examples/demo.py into it through hpcbridge (atomic copies), prints the
block layout table HDFS reports (hosts and racks per block), verifies the copy byte for byte,
and stops the testbed it started.

    python examples/stage_to_hdfs.py --source file://$PWD/.demo-data
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time

import hpcbridge
from hpcbridge.fs.transfer import copy_file


def digest(fs, path: str) -> str:
    h = hashlib.sha256()
    with fs.open(path, "rb") as f:
        while chunk := f.read(4 << 20):
            h.update(chunk)
    return h.hexdigest()


def stage(source: str, hdfs_url: str, webhdfs: str | None, block_size: int) -> bool:
    src_fs, src_root = hpcbridge.url_to_fs(source)
    hdfs = hpcbridge.connect(hdfs_url, webhdfs=webhdfs, block_size=block_size, replication=1)
    hdfs.mkdir("/staged", parents=True, exist_ok=True)
    ok = True
    for path in src_fs.find(src_root):
        target = "/staged" + path[len(src_root.rstrip("/")):]
        hdfs.mkdir(target.rsplit("/", 1)[0] or "/", parents=True, exist_ok=True)
        started = time.perf_counter()
        size = copy_file(src_fs, path, hdfs, target)
        seconds = time.perf_counter() - started
        same = digest(src_fs, path) == digest(hdfs, target)
        ok &= same
        print(f"{src_fs.url(path)} -> {hdfs.url(target)}: {size / 2**20:.1f} MiB in {seconds:.2f} s, "
              f"{'verified' if same else 'MISMATCH'}")
    biggest = max(hdfs.find("/staged"), key=lambda p: hdfs.info(p).size)
    blocks = hdfs.block_locations(biggest)
    print(f"\nblock layout of {hdfs.url(biggest)} (block size {block_size >> 20} MiB):")
    print(f"{'block':>5}  {'offset':>10}  {'length':>9}  hosts (racks)")
    for i, b in enumerate(blocks):
        where = ", ".join(f"{h} ({r})" for h, r in zip(b.hosts, b.racks or ("?",) * len(b.hosts)))
        print(f"{i:>5}  {b.offset:>10}  {b.length:>9}  {where}")
    per_host: dict[str, int] = {}
    for b in blocks:
        for h in b.hosts:
            per_host[h] = per_host.get(h, 0) + b.length
    print("bytes per DataNode: " + ", ".join(f"{h} {n / 2**20:.1f} MiB" for h, n in sorted(per_host.items())))
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="hpcbridge URL of the directory to stage")
    parser.add_argument("--hdfs", help="hdfs://namenode:port of a running cluster (default: start a testbed)")
    parser.add_argument("--webhdfs", help="its NameNode HTTP address (http://host:port)")
    parser.add_argument("--block-size", type=int, default=4 << 20, help="HDFS block size (default 4 MiB)")
    args = parser.parse_args(argv)
    if args.hdfs:
        return 0 if stage(args.source, args.hdfs, args.webhdfs, args.block_size) else 1
    from hpcbridge.testbed import HdfsCluster

    cluster = HdfsCluster(tempfile.mkdtemp(prefix="hpcbridge-demo-hdfs-"), datanodes=3, racks=2)
    started = time.perf_counter()
    info = cluster.up()
    print(f"HDFS testbed up in {time.perf_counter() - started:.1f} s: {info.url} "
          f"(DataNodes {', '.join(d.host for d in info.datanodes)})")
    try:
        ok = stage(args.source, info.url, f"http://127.0.0.1:{info.http_port}", args.block_size)
    finally:
        cluster.down()
        print("HDFS testbed stopped")
    print(f"staging result: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
