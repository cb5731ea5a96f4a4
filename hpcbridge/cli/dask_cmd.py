"""``hpcbridge dask JOB``: the seeds' jobs as locality-aware Dask jobs, with the locality report.

The Dask cluster is ``--scheduler ADDRESS``, else the testbed's (``hpcbridge testbed up --dask``)
when one runs, else local threads. URLs of the testbed's HDFS reach its WebHDFS on every worker.
"""

from __future__ import annotations

import contextlib
import heapq
import json

__all__ = ["add_dask_parser", "cmd_dask"]


def _size(text):
    from .main import parse_size

    return parse_size(text)


def add_dask_parser(add) -> None:
    """Add the ``dask`` command to the parser (``add`` as in :func:`hpcbridge.cli.main.build_parser`)."""
    p = add("dask", cmd_dask, "run the seeds' jobs (teragen, grep, wordcount, sort, validate, read) as "
                              "locality-aware Dask jobs and print their locality report")
    p.add_argument("job", choices=["teragen", "grep", "wordcount", "sort", "validate", "read", "flash"],
                   help="teragen URL: write 100-byte records; grep URL PATTERN: count regex matches; wordcount URL; "
                        "sort URL OUT: TeraSort; validate OUT [--input URL]: TeraValidate; read URL: read and discard; "
                        "flash URL: min/max/mean of every variable of a FLASH-IO checkpoint (HDF5) and a histogram")
    p.add_argument("url", help="input (output directory for teragen, sorted output for validate); globs allowed")
    p.add_argument("arg", nargs="?", help="grep: the pattern (Python regex); sort: the output directory URL")
    p.add_argument("--scheduler", help="Dask scheduler address (default: the testbed's, else local threads)")
    p.add_argument("--dir", default=None, help="testbed directory to take the scheduler and WebHDFS address from")
    p.add_argument("--no-locality", dest="locality", action="store_false",
                   help="schedule read tasks anywhere (the comparison run)")
    p.add_argument("--blocksize", type=_size, default=None, help="cut files into ranges of this size instead of blocks")
    p.add_argument("--partition-size", type=_size, default=None,
                   help="metablock target: group consecutive blocks on one host up to this size (default 32M)")
    p.add_argument("--records", type=_size, default=None, help="teragen: number of records (K/M/G suffixes)")
    p.add_argument("--files", type=int, default=4, help="teragen: number of files (default 4)")
    p.add_argument("--block-size", type=_size, default=None, help="teragen: HDFS block size of the files")
    p.add_argument("--replication", type=int, default=None, help="teragen: HDFS replication of the files")
    p.add_argument("--overwrite", action="store_true", help="teragen/sort: replace an existing output")
    p.add_argument("--outputs", type=int, default=None, help="sort: output files (default: one per input partition)")
    p.add_argument("--input", default=None, help="validate: the unsorted input, to compare the record multisets")
    p.add_argument("--word", default=None, help="wordcount: regex of a word (default: whitespace-separated tokens)")
    p.add_argument("--top", type=int, default=10, help="wordcount: how many of the most frequent words to print")
    p.add_argument("--variable", default=None, help="flash: the variable to histogram (default dens)")
    p.add_argument("--bins", type=int, default=20, help="flash: histogram bins (default 20)")
    p.add_argument("--plot", metavar="PNG", default=None, help="flash: write the histogram as a PNG")
    p.add_argument("--no-memory-map", dest="memory_map", action="store_false",
                   help="flash: read a local checkpoint into memory instead of mapping it (for a file that may be "
                        "rewritten while the job runs)")


@contextlib.contextmanager
def _cluster(args):
    """Yield ``(client or None, storage_options)``."""
    options: dict = {}
    address = args.scheduler
    try:
        from ..testbed import HdfsCluster

        cluster = HdfsCluster.attach(args.dir)
        if args.url.startswith(cluster.info.url) or (args.arg or "").startswith(cluster.info.url):
            options["webhdfs"] = f"http://{cluster.info.namenode_host}:{cluster.info.http_port}"
        if address is None and cluster.info.dask:
            address = cluster.info.dask["scheduler"]
    except FileNotFoundError:
        if args.dir:
            raise
    if address is None:
        yield None, options
        return
    from distributed import Client

    client = Client(address, timeout=30, set_as_default=False)
    try:
        yield client, options
    finally:
        client.close()


def cmd_dask(args) -> object:
    """Run one job; print its value and locality report (or return them for ``--json``)."""
    from .. import dask as hd
    from .main import cli_url

    needs_arg = {"grep": "a pattern", "sort": "an output URL"}
    if args.job in needs_arg and not args.arg:
        raise ValueError(f"hpcbridge dask {args.job} needs {needs_arg[args.job]} after the URL")
    args.url = cli_url(args.url)
    if args.job == "sort":
        args.arg = cli_url(args.arg)
    if args.input:
        args.input = cli_url(args.input)
    with _cluster(args) as (client, options):
        common = dict(client=client, locality=args.locality, blocksize=args.blocksize,
                      partition_size=args.partition_size, storage_options=options)
        if args.job == "teragen":
            if not args.records:
                raise ValueError("hpcbridge dask teragen needs --records N")
            result = hd.teragen(args.url, args.records, files=args.files, block_size=args.block_size,
                                replication=args.replication, client=client, overwrite=args.overwrite,
                                storage_options=options)
        elif args.job == "grep":
            result = hd.grep(args.url, args.arg, **common)
        elif args.job == "wordcount":
            result = hd.wordcount(args.url, word=args.word, **common)
        elif args.job == "sort":
            result = hd.terasort(args.url, args.arg, outputs=args.outputs, overwrite=args.overwrite, **common)
        elif args.job == "validate":
            result = hd.validate_sort(args.url, args.input, client=client, storage_options=options)
        elif args.job == "flash":
            if args.blocksize:
                raise ValueError("hpcbridge dask flash takes --partition-size, not --blocksize (blocks follow the "
                                 "checkpoint's storage)")
            result = hd.flash_stats(args.url, histogram=args.variable, bins=args.bins, client=client,
                                    locality=args.locality, partition_size=args.partition_size,
                                    storage_options=options, memory_map=args.memory_map)
        else:
            result = hd.dummy_read(args.url, **common)
    if args.job == "wordcount":
        # Most frequent first; ties in the byte order of the words, the order of Hadoop
        # WordCount's output (Counter.most_common keeps the order the partitions were merged in).
        top = heapq.nsmallest(args.top, result.value.items(), key=lambda item: (-item[1], item[0]))
        summary = {"distinct_words": len(result.value), "words": sum(result.value.values()),
                   "top": [[w.decode(errors="replace"), n] for w, n in top]}
        result.value = summary
    if args.job == "validate" and not result.value["ok"]:
        args.exit_code = 1
    if args.job == "flash" and args.plot:
        from ..dask.flash import plot_histogram

        plot_histogram(result.value, args.plot, f"{result.value['histogram']['variable']} of {args.url}")
        result.details["plot"] = args.plot
    if args.job == "flash" and not args.json:
        _print_flash(args, result)
        return None
    if args.json:
        return result.as_dict()
    if args.job == "teragen":  # a writing job: no read partitions, no locality report
        details = result.details
        print(f"teragen into {args.url}: {details['records']} records, {details['bytes']} bytes in "
              f"{details['files']} file(s), {result.seconds:.2f} s")
        for url in result.value:
            print(f"  {url}")
        return None
    print(f"{result.name} of {args.url}: {result.seconds:.2f} s, {result.partitions} partitions")
    _print_value(result.value)
    if result.report is not None:
        print(result.report.format())
    return None


def _print_value(value, indent: str = "") -> None:
    """A job's value for people: ``key: value`` lines (JSON is what ``--json`` is for)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item and not all(isinstance(x, (int, float, str)) for x in item):
                print(f"{indent}{key}:")
                _print_value(item, indent + "  ")
            else:
                print(f"{indent}{key}: {json.dumps(item, default=str) if isinstance(item, (list, dict)) else item}")
    elif isinstance(value, list):
        for item in value:
            print(f"{indent}{json.dumps(item, default=str) if isinstance(item, (list, dict)) else item}")
    else:
        print(f"{indent}{value}")


def _print_flash(args, result) -> None:
    value = result.value
    print(f"flash statistics of {args.url}: {result.seconds:.2f} s, {result.report.tasks} read tasks, "
          f"{value['blocks']} blocks, {value['cells']} cells per variable, locality "
          f"{'on' if args.locality else 'off'}")
    print(f"  {'variable':<10} {'min':>14} {'max':>14} {'mean':>14}")
    for name, s in value["variables"].items():
        print(f"  {name:<10} {s['min']:>14.6g} {s['max']:>14.6g} {s['mean']:>14.6g}")
    hist = value["histogram"]
    peak = max(hist["counts"]) or 1
    print(f"  histogram of {hist['variable']} ({len(hist['counts'])} bins):")
    last = len(hist["counts"]) - 1
    for i, (lo, hi, n) in enumerate(zip(hist["edges"], hist["edges"][1:], hist["counts"])):
        # numpy.histogram's last bin is closed: it counts the values equal to the maximum
        print(f"    [{lo:>11.5g}, {hi:>11.5g}{']' if i == last else ')'}  {n:>10}  {'#' * round(40 * n / peak)}")
    if result.details.get("plot"):
        print(f"  histogram written to {result.details['plot']}")
    print(result.report.format())
