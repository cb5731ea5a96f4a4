"""The FLASH analytics job on the HDFS testbed: a FLASH-IO checkpoint staged into HDFS, then
``hpcbridge dask flash`` with locality on and off, checked against a serial h5py computation.

Starts a local HDFS testbed with Dask (3 DataNodes on 127.0.0.2-4, replication 1, one Dask worker
per DataNode host), copies the checkpoint into it in ``--block-size`` blocks, runs the job twice
(locality on, then off) through the command line, each printing its statistics and locality
report, writes the histogram as a PNG, compares the statistics with serial h5py + numpy on the
local file, and stops everything it started (by pid).

    mpirun -n 4 python benchmarks/flash_io.py --nxb 8 --blocks 20 --keep --dir /tmp/flash
    python examples/flash_analytics.py --checkpoint /tmp/flash/flash_io_test_hdf5_chk_0000 [--plot dens.png]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import sys
import tempfile
import time

import hpcbridge
from hpcbridge.cli.main import main as cli, parse_size
from hpcbridge.dask.flash import flash_stats_h5py
from hpcbridge.fs.transfer import copy_file


def same(value: dict, reference: dict) -> bool:
    """Statistics equal (means to 1e-12 relative: summation order differs) and histograms equal."""
    if set(value["variables"]) != set(reference["variables"]):
        return False
    for name, ref in reference["variables"].items():
        got = value["variables"][name]
        if (got["min"], got["max"]) != (ref["min"], ref["max"]):
            return False
        if not math.isclose(got["mean"], ref["mean"], rel_tol=1e-12):
            return False
    return value["histogram"]["counts"] == reference["histogram"]["counts"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a local FLASH-IO checkpoint (benchmarks/flash_io.py)")
    parser.add_argument("--block-size", type=parse_size, default=parse_size("1M"), help="HDFS block size (1M)")
    parser.add_argument("--bins", type=int, default=20, help="histogram bins (20)")
    parser.add_argument("--plot", default=None, help="write the histogram of dens as this PNG")
    args = parser.parse_args(argv)

    from hpcbridge.testbed import HdfsCluster

    base = tempfile.mkdtemp(prefix="hpcbridge-demo-flash-")
    cluster = HdfsCluster(base, datanodes=3, replication=1)
    started = time.perf_counter()
    info = cluster.up(dask=True)
    print(f"testbed up in {time.perf_counter() - started:.1f} s: HDFS {info.url}, Dask scheduler "
          f"{info.dask['scheduler']}, workers on {', '.join(d.host for d in info.datanodes)}", flush=True)
    ok = True
    try:
        url = f"{info.url}/demo/flash_chk_0000"
        options = {"webhdfs": f"http://127.0.0.1:{info.http_port}", "block_size": args.block_size,
                   "replication": 1}
        fs, path = hpcbridge.url_to_fs(url, **options)
        fs.mkdir("/demo", parents=True, exist_ok=True)
        copy_file(hpcbridge.connect("file://"), args.checkpoint, fs, path)
        blocks = fs.block_locations(path)
        print(f"staged {fs.info(path).size / 2**20:.1f} MiB into {url}: {len(blocks)} blocks on "
              f"{len({b.hosts[0] for b in blocks})} DataNodes", flush=True)
        reference = flash_stats_h5py(args.checkpoint, bins=args.bins)
        for locality in (True, False):
            print(f"\n$ hpcbridge dask flash {url}{'' if locality else ' --no-locality'}"
                  f"{' --plot ' + args.plot if args.plot and locality else ''}", flush=True)
            common = ["dask", "flash", url, "--dir", base, "--bins", str(args.bins)]
            cli(common + (["--plot", args.plot] if args.plot and locality else []) + ([] if locality else
                                                                                      ["--no-locality"]))
            # The same job as JSON, to compare with the serial computation.
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                cli(common + ["--json"] + ([] if locality else ["--no-locality"]))
            value = json.loads(out.getvalue())["value"]
            equal = same(value, reference)
            ok &= equal
            print(f"statistics equal to serial h5py (locality {'on' if locality else 'off'}): {equal}")
        fs.rm("/demo", recursive=True)
    finally:
        cluster.down()
        print("testbed stopped")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
