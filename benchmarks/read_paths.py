"""Read paths at memory speed: the same bytes read through hpcbridge from a PLFS container and from
a plain file, page cache warm (restarts and analytics read checkpoints still in cache).

The container holds the LANL N-1 layout: 4 writers interleaved in 47001-byte objects (object i of
writer w at logical (i*4 + w) * 47001), written by 4 writer handles in this process; the plain
file holds the same logical bytes. Modes, interleaved over the repetitions (the first one, the
warm-up, reported separately):

* whole-plfs / whole-posix : ``readinto`` of the whole logical file in 16 MiB calls;
* whole-plfs-1t : the same PLFS read on the calling thread only (``PlfsReader.SHARED_READS``
  off: each large read is otherwise shared with one pool thread; no target);
* objects-plfs / objects-posix : one ``preadinto`` per 47001-byte object;
* chunks-plfs / chunks-posix : ``readinto`` of the whole file in 1 MiB calls (``shutil``- and
  Dask-sized reads; no target);
* whole-plfs-hdfs : the whole-file read from a container on HDFS (``--hdfs URL|testbed``);
* read_blocks / fromfile : ``hpcbridge.dask.read_blocks(url, locality=False)`` with its default
  partitions, ``.map_partitions(len)`` on the threaded scheduler, of the plain file, against
  ``numpy.fromfile`` of it;
* bound-1t / bound-2t (``--bounds``): what copying the bytes and checking them costs with no
  bookkeeping at all, the floor under a verified whole-file read: ``os.preadv`` of 8 objects at a
  time straight into their places, then fastcrc of each, on one thread and split over two.

Targets: whole PLFS >= 0.8x whole POSIX, objects >= 0.7x, read_blocks >= 0.7x fromfile.

    python benchmarks/read_paths.py [--size 128M] [--repetitions 7] [--hdfs testbed] [--bounds]
                                    [--output results/read_paths.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import hpcbridge  # noqa: E402
from hpcbridge.cli.main import parse_size  # noqa: E402

from _common import hdfs_for_benchmark, write_json  # noqa: E402

UNIT = 47001
WRITERS = 4
CALL = 16 << 20
CHUNK = 1 << 20


def logical_bytes(size: int) -> np.ndarray:
    rng = np.random.default_rng(42)
    return rng.integers(0, 256, size, dtype=np.uint8)


def write_container(url: str, data: np.ndarray, **options) -> None:
    """The LANL N-1 strided layout: ``WRITERS`` writers, object i of writer w at (i*W + w)*UNIT."""
    fs, path = hpcbridge.url_to_fs(url, **options)
    writers = [fs.open_writer(path) for _ in range(WRITERS)]
    objects = (len(data) + UNIT - 1) // UNIT
    for i in range(objects):
        start = i * UNIT
        writers[i % WRITERS].pwrite(data[start:start + UNIT], start)
    for w in writers:
        w.close()


def whole(url: str, size: int, buffer: memoryview, call: int = CALL, **options) -> None:
    with hpcbridge.open(url, "rb", buffering=0, **options) as f:
        done = 0
        while done < size:
            n = f.readinto(buffer[done:done + call])
            if not n:
                raise IOError(f"{url}: short read at {done}")
            done += n


def whole_one_thread(url: str, size: int, buffer: memoryview, **options) -> None:
    from hpcbridge.plfs.reader import PlfsReader

    shared, PlfsReader.SHARED_READS = PlfsReader.SHARED_READS, False
    try:
        whole(url, size, buffer, **options)
    finally:
        PlfsReader.SHARED_READS = shared


def objects(url: str, size: int, buffer: memoryview, **options) -> None:
    with hpcbridge.open(url, "rb", buffering=0, **options) as f:
        for start in range(0, size, UNIT):
            f.preadinto(buffer[start:start + UNIT], start)


def read_blocks(url: str, size: int, buffer: memoryview, **options) -> None:
    import hpcbridge.dask as hd

    bag = hd.read_blocks(url, locality=False)  # the default partitions (metablocks), as a user gets them
    total = sum(bag.map_partitions(lambda blocks: [sum(len(b) for b in blocks)]).compute(scheduler="threads"))
    if total != size:
        raise IOError(f"{url}: read_blocks saw {total} of {size} bytes")


def bound(path: str, size: int, buffer: memoryview, threads: int = 1) -> None:
    """Copy ``path`` into ``buffer`` 8 objects per ``preadv`` and CRC32C each object as it
    arrives (PLFS's checksum, fastcrc), over ``threads`` threads: no index, no records."""
    import threading

    from hpcbridge.plfs.format import data_crc

    fd = os.open(path, os.O_RDONLY)
    try:
        group = 8 * UNIT

        def part(lo: int, hi: int) -> None:
            for at in range(lo, hi, group):
                views = [buffer[o:min(o + UNIT, hi)] for o in range(at, min(at + group, hi), UNIT)]
                os.preadv(fd, views, at)
                for view in views:
                    data_crc(view)
        cuts = [size * i // threads // group * group for i in range(threads)] + [size]
        workers = [threading.Thread(target=part, args=(cuts[i], cuts[i + 1])) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        os.close(fd)


def fromfile(path: str, size: int, buffer: memoryview, **options) -> None:
    if np.fromfile(path, dtype=np.uint8).size != size:
        raise IOError(f"{path}: short")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("128M"), help="logical bytes (128M)")
    parser.add_argument("--repetitions", type=int, default=7, help="measured repetitions after the warm-up (7)")
    parser.add_argument("--dir", default=None, help="directory for the container and the plain file (a temp dir)")
    parser.add_argument("--hdfs", default=None, help="add whole-plfs-hdfs: hdfs://nn:port URL or 'testbed'")
    parser.add_argument("--webhdfs", default=None)
    parser.add_argument("--bounds", action="store_true",
                        help="add bound-1t/bound-2t: copy + CRC with no bookkeeping, the floor of a verified read")
    parser.add_argument("--output", default="results/read_paths.json")
    args = parser.parse_args(argv)
    if args.repetitions < 1:
        parser.error("--repetitions must be at least 1")

    base = args.dir or tempfile.mkdtemp(prefix="hpcbridge-read-paths-")
    data = logical_bytes(args.size)
    plain = os.path.join(base, "plain.bin")
    data.tofile(plain)
    container = f"plfs+file://{base}/ckpt"
    write_container(container, data)
    buffer = memoryview(bytearray(args.size))
    modes = {
        "whole-plfs": (whole, container, {}), "whole-posix": (whole, f"file://{plain}", {}),
        "whole-plfs-1t": (whole_one_thread, container, {}),
        "objects-plfs": (objects, container, {}), "objects-posix": (objects, f"file://{plain}", {}),
        "chunks-plfs": (whole, container, {"call": CHUNK}), "chunks-posix": (whole, f"file://{plain}", {"call": CHUNK}),
        "read_blocks": (read_blocks, f"file://{plain}", {}), "fromfile": (fromfile, plain, {}),
    }
    if args.bounds:
        modes["bound-1t"] = (lambda p, n, b: bound(p, n, b, 1), plain, {})
        modes["bound-2t"] = (lambda p, n, b: bound(p, n, b, 2), plain, {})
    stack = hdfs_for_benchmark(None if args.hdfs == "testbed" else args.hdfs, args.webhdfs) if args.hdfs else None
    try:
        if stack is not None:
            url, webhdfs, _ = stack.__enter__()
            hdfs_container = f"plfs+{url.rstrip('/')}/read-paths-{os.getpid()}"
            write_container(hdfs_container, data, webhdfs=webhdfs)
            modes["whole-plfs-hdfs"] = (whole, hdfs_container, {"webhdfs": webhdfs})
        seconds: dict[str, list[float]] = {m: [] for m in modes}
        warmup: dict[str, float] = {}
        for rep in range(args.repetitions + 1):
            order = list(modes) if rep % 2 == 0 else list(reversed(modes))
            for mode in order:
                function, url, options = modes[mode]
                started = time.perf_counter()
                function(url, args.size, buffer, **options)
                elapsed = time.perf_counter() - started
                checked = mode.startswith(("whole", "objects", "chunks", "bound"))
                if checked and not np.array_equal(np.frombuffer(buffer, np.uint8), data):
                    raise SystemExit(f"{mode}: the bytes read differ from the bytes written")
                if rep == 0:
                    warmup[mode] = elapsed
                else:
                    seconds[mode].append(elapsed)
    finally:
        if stack is not None:
            stack.__exit__(None, None, None)

    mbps = {m: args.size / statistics.median(s) / 1e6 for m, s in seconds.items()}
    ratios = {
        "whole_plfs_vs_posix": mbps["whole-plfs"] / mbps["whole-posix"],
        "objects_plfs_vs_posix": mbps["objects-plfs"] / mbps["objects-posix"],
        "read_blocks_vs_fromfile": mbps["read_blocks"] / mbps["fromfile"],
    }
    targets = {"whole_plfs_vs_posix": 0.8, "objects_plfs_vs_posix": 0.7, "read_blocks_vs_fromfile": 0.7}
    ratios_untargeted = {"chunks_plfs_vs_posix": mbps["chunks-plfs"] / mbps["chunks-posix"],
                         "whole_plfs_1t_vs_posix": mbps["whole-plfs-1t"] / mbps["whole-posix"]}
    bounds = {f"{m}_vs_whole_posix": mbps[m] / mbps["whole-posix"] for m in ("bound-1t", "bound-2t") if m in mbps}
    print(f"read paths, {args.size} logical bytes, page cache warm, medians of {args.repetitions} (MB/s):")
    for mode in modes:
        print(f"  {mode:<16} {mbps[mode]:9.1f}   (warm-up {args.size / warmup[mode] / 1e6:9.1f})")
    for name, value in ratios.items():
        print(f"  {name:<24} {value:5.2f}  (>= {targets[name]})")
    notes = {"chunks_plfs_vs_posix": "1 MiB calls", "whole_plfs_1t_vs_posix": "calling thread only"}
    for name, value in ratios_untargeted.items():
        print(f"  {name:<24} {value:5.2f}  ({notes[name]}, no target)")
    for name, value in bounds.items():
        print(f"  {name:<24} {value:5.2f}  (copy + CRC alone)")
    met = all(ratios[k] >= v for k, v in targets.items())
    write_json(args.output, {"benchmark": "read_paths", "size": args.size, "unit": UNIT, "writers": WRITERS,
                             "repetitions": args.repetitions, "median_MBps": mbps,
                             "warmup_MBps": {m: args.size / s / 1e6 for m, s in warmup.items()},
                             "seconds": seconds, "warmup_seconds": warmup,
                             "ratios": ratios, "untargeted": ratios_untargeted, "bounds": bounds, "targets": targets,
                             "targets_met": met})
    print(f"  targets {'met' if met else 'NOT met'}; JSON: {args.output}")
    if not args.dir:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
