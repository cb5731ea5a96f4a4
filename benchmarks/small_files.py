"""Many small files into HDFS: `hpcbridge put -r` of N files of S bytes against Java's
`FsShell -put` of the same directory, both as fresh processes (Python start, resp. JVM start,
included), in one run, alternating which goes first; and `hpcbridge get -r` back.

    python benchmarks/small_files.py [--files 200] [--size 10K] [--repetitions 3] [--jobs 8]
                                     [--url hdfs://nn:port --conf-dir DIR]

Target: hpcbridge put -r >= 1.0x FsShell -put (files per second, medians).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hpcbridge.cli.main import parse_size  # noqa: E402

from _common import hdfs_for_benchmark, write_json  # noqa: E402


def timed(command, env=None) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--size", type=parse_size, default=parse_size("10K"))
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=None, help="hpcbridge put -r -j (default: its default)")
    parser.add_argument("--url", help="hdfs://namenode:port of an existing cluster (default: start a testbed)")
    parser.add_argument("--webhdfs", help="http://host:port of its NameNode HTTP server")
    parser.add_argument("--conf-dir", help="Hadoop client configuration for FsShell (default: the testbed's)")
    parser.add_argument("--output", default="results/small_files.json")
    args = parser.parse_args(argv)

    from hpcbridge.testbed.hadoop import java_command

    samples: dict[str, list[float]] = {"hpcbridge_put": [], "java_put": [], "hpcbridge_get": []}
    with hdfs_for_benchmark(args.url, args.webhdfs) as (url, webhdfs, cluster), \
            tempfile.TemporaryDirectory() as tmp:
        import hpcbridge

        conf_dir = args.conf_dir or cluster.info.conf_dir
        fs = hpcbridge.connect(url, webhdfs=webhdfs)
        fs.mkdir("/benchmarks/small", parents=True, exist_ok=True)
        src = os.path.join(tmp, "src")
        os.mkdir(src)
        for i in range(args.files):
            with open(os.path.join(src, f"f{i:05d}"), "wb") as out:
                out.write(os.urandom(args.size))
        base = url.rstrip("/")
        jobs = ["-j", str(args.jobs)] if args.jobs else []
        hb = [sys.executable, "-m", "hpcbridge"]
        env = {**os.environ, "HADOOP_CONF_DIR": conf_dir}
        for rep in range(args.repetitions):
            order = ["hpcbridge", "java"] if rep % 2 == 0 else ["java", "hpcbridge"]
            for who in order:
                target = f"/benchmarks/small/{who}-{rep}"
                if who == "hpcbridge":
                    samples["hpcbridge_put"].append(timed([*hb, "put", "-r", *jobs, src, f"{base}{target}"], env))
                else:
                    samples["java_put"].append(timed(java_command("org.apache.hadoop.fs.FsShell", conf_dir,
                                                                  ["-put", src, f"{base}{target}"]), env))
                assert len(fs.ls(target)) == args.files, target
            back = os.path.join(tmp, f"back-{rep}")
            samples["hpcbridge_get"].append(timed([*hb, "get", "-r", *jobs, f"{base}/benchmarks/small/hpcbridge-{rep}",
                                                   back], env))
            assert len(os.listdir(back)) == args.files
        fs.rm("/benchmarks/small", recursive=True)

    medians = {k: statistics.median(v) for k, v in samples.items()}
    ratio = medians["java_put"] / medians["hpcbridge_put"]
    load = os.getloadavg()
    print(f"{args.files} files x {args.size} B, medians of {args.repetitions} (fresh processes: Python resp. "
          f"JVM start included), load {load[0]:.1f}:")
    for k, v in medians.items():
        print(f"  {k:14s} {v:6.2f} s  ({args.files / v:6.1f} files/s)  samples " +
              " ".join(f"{x:.2f}" for x in samples[k]))
    print(f"  hpcbridge put -r / FsShell -put speed: {ratio:.2f}x (target >= 1.0): {'met' if ratio >= 1 else 'NOT met'}")
    write_json(args.output, {"benchmark": "small_files", "files": args.files, "bytes_per_file": args.size,
                             "samples_s": samples, "medians_s": medians, "speed_ratio_vs_java": ratio,
                             "loadavg": load, "meets_target": ratio >= 1})
    return 0


if __name__ == "__main__":
    sys.exit(main())
