"""The ``hpcbridge`` command (also ``python -m hpcbridge``).

Every command takes ``--json`` (anywhere on the command line) for scripts: the result goes to
stdout as one JSON document and errors, usage errors included, as ``{"error": ..., "type": ...}``.
Arguments without a scheme are local paths, relative to the current directory.

Exit status: 0 success, 1 a failed operation, 2 bad usage, 130 interrupted (SIGINT), 143
terminated (SIGTERM), 141 when the reader of stdout went away (``hpcbridge ls URL | head``), as
for the shell's own tools; an interrupted copy leaves no partial file.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import signal
import sys
import time

from .. import __version__
from ..errors import HpcbridgeError
from ..fs.api import connect, url_to_fs
from ..fs.base import FileSystem
from ..fs.transfer import copy_file, keeps_permissions
from .copyplan import LINK_MODES, copy_link, plan_copy
from .dask_cmd import add_dask_parser

__all__ = ["main", "build_parser", "parse_size"]

#: Files copied at once by put/get -r (bounded: each copy holds one open file per side).
COPY_JOBS = 8
#: Files smaller than this are the ones put/get -r copy several at a time.
SMALL_FILE = 8 << 20
#: Copies at least this large show a progress bar (when stderr is a terminal or --progress).
PROGRESS_THRESHOLD = 8 << 20

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Parse a byte count such as ``4096``, ``64M``, ``64MiB`` or ``1G`` (binary multiples)."""
    match = _SIZE.match(str(text))
    if not match:
        raise argparse.ArgumentTypeError(f"invalid size {text!r}: use e.g. 4096, 64M, 1GiB")
    number, unit = int(match.group(1)), match.group(2).lower()
    return number << (10 * " kmgtp".index(unit or " "))


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: a whole number >= 1")
    return value


def positive_size(text: str) -> int:
    """:func:`parse_size` for sizes that must be at least one byte (block sizes)."""
    size = parse_size(text)
    if size <= 0:
        raise argparse.ArgumentTypeError(f"invalid size {text!r}: must be at least 1 byte")
    return size


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def cli_url(text: str) -> str:
    """A command-line location as a URL: text without a scheme is a local path, made absolute
    (as ``put``/``get`` always took their local side), so ``hpcbridge ls data`` works like ``ls``.
    A ``name:`` prefix is a scheme only where hpcbridge knows it (``co:lon`` is a local name)."""
    if not text:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", text)
    match = _SCHEME.match(text)
    if match and (text[match.end():].startswith("//") or _known_scheme(match.group(0)[:-1])):
        return text
    return os.path.abspath(text)


def _known_scheme(name: str) -> bool:
    from ..fs.registry import known_schemes

    return name.lower() in known_schemes() or "+" in name


class UsageError(Exception):
    """Bad command-line usage (argparse's errors are raised as this, so ``--json`` can format them)."""

    def __init__(self, parser: argparse.ArgumentParser, message: str):
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints and exits; main() decides how to report it
        raise UsageError(self, message)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so copies clean up as for Ctrl-C (exit 143)."""


def _terminate(signum, frame):
    raise Terminated()


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip())


# -- commands ---------------------------------------------------------------------------------
def cmd_ls(args) -> object:
    fs, path = url_to_fs(cli_url(args.url))
    entries = fs.ls(path, detail=True)
    if args.json:
        return [e.as_dict() for e in entries]
    if not args.long:
        for e in entries:
            print(e.path.rsplit("/", 1)[-1] + ("/" if e.is_dir else ""))
        return None
    rows = [[e.permissions, e.owner, e.group, str(e.size),
             time.strftime("%Y-%m-%d %H:%M", time.localtime(e.mtime)),
             e.path.rsplit("/", 1)[-1] + ("/" if e.is_dir else "")] for e in entries]
    for row in rows:
        print("  ".join(row))
    return None


def cmd_stat(args) -> object:
    fs, path = url_to_fs(cli_url(args.url))
    info = fs.info(path)
    if args.json:
        return {**info.as_dict(), "backend": fs.backend_name, "capabilities": fs.capabilities.as_dict()}
    fields = [
        ("url", info.url), ("type", info.type), ("size", f"{info.size} ({_human(info.size)})"),
        ("mtime", time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.mtime))),
        ("mode", f"{info.permissions} ({info.mode & 0o7777:o})"),
        ("owner", f"{info.owner}:{info.group}"), ("replication", str(info.replication)),
        ("block size", _human(info.block_size)), ("backend", fs.backend_name),
    ]
    for name, value in fields:
        print(f"{name:>12}: {value}")
    return None


def cmd_layout(args) -> object:
    options = {"block_size": args.block_size} if args.block_size else {}
    fs, path = url_to_fs(cli_url(args.url), **options)
    blocks = fs.block_locations(path, args.start, args.length)
    if args.json:
        return {"url": fs.url(path), "blocks": [b.as_dict() for b in blocks]}
    rows = [[str(i), str(b.offset), str(b.length), ",".join(b.hosts) or "-", ",".join(b.racks) or "-",
             ",".join(b.targets) or "-"] for i, b in enumerate(blocks)]
    _print_table(rows, ["block", "offset", "length", "hosts", "racks", "targets"])
    print(f"{len(blocks)} block(s), {_human(sum(b.length for b in blocks))}")
    return None


def _make_directories(src_fs: FileSystem, dst_fs: FileSystem, plan) -> list[tuple[str, int]]:
    """Make the planned directories; returns ``(directory, mode)`` for those whose permission
    bits must still be set once their files are in.

    As ``cp -r``, a directory the copy makes gets its source's permission bits (an existing one
    keeps its own). A private directory is private from the start: it is made with the owner's
    bits added (so the copy can fill it) and the exact bits are set at the end (a read-only one).
    """
    keep = keeps_permissions(src_fs, dst_fs)
    pending = []
    for directory in plan.directories:
        try:
            dst_fs.mkdir(directory)
        except FileExistsError:
            dst_fs.mkdir(directory, exist_ok=True)  # a directory that is there is fine, a file is not
            continue
        mode = plan.directory_modes.get(directory)
        if keep and mode is not None:
            dst_fs.chmod(directory, mode | 0o700)
            if mode | 0o700 != mode:
                pending.append((directory, mode))
    return pending


def _refuse_clobbering(dst_fs: FileSystem, plan) -> None:
    """-n with -r: refuse the copy before the first byte moves when a file to copy exists.

    Copies stopped at the first existing file, after an unpredictable part of the tree (the
    small files copied at once) was copied. Only directories that exist can hold one: one call
    per planned directory, then one per file in an existing one."""
    def parent(path: str) -> str:
        return path.rstrip("/").rsplit("/", 1)[0] or "/"

    existing = {d.rstrip("/") or "/" for d in plan.directories if dst_fs.isdir(d)}
    for _, target, _ in plan.files:
        if parent(target) in existing and dst_fs.exists(target):
            raise FileExistsError(errno.EEXIST, "File exists (not replaced: -n/--no-clobber; nothing was copied)",
                                  dst_fs.url(target))


def _copy_tree(src_fs: FileSystem, src: str, dst_fs: FileSystem, dst: str, args) -> list[dict]:
    """Copy a file or (with -r) a directory tree; returns one record per file copied.

    As ``cp``: into an existing directory the source keeps its name; a destination written with
    a trailing ``/`` names a directory, which must exist for a single file."""
    info = src_fs.info(src)
    if dst_fs.isdir(dst):
        dst = f"{dst.rstrip('/')}/{src.rstrip('/').rsplit('/', 1)[-1]}"
    elif args.dst_is_dir and not info.is_dir:
        if dst_fs.exists(dst):
            raise NotADirectoryError(errno.ENOTDIR, "Not a directory (a destination ending in '/' names a "
                                     "directory)", dst_fs.url(dst))
        raise FileNotFoundError(errno.ENOENT, "No such directory (a destination ending in '/' names a directory)",
                                dst_fs.url(dst))
    skipped: list = []
    created: list[tuple[str, int]] = []
    if not info.is_dir:
        pairs = [(src, dst, info.size)]
    elif not args.recursive:
        raise IsADirectoryError(21, "Is a directory (use -r to copy a directory)", src_fs.url(src))
    else:
        plan = plan_copy(src_fs, src, dst_fs, dst, links=args.links)
        pairs, skipped = plan.files, plan.skipped
        if args.no_clobber:
            _refuse_clobbering(dst_fs, plan)
        # As cp -r: the tree's new root is made, its parent must exist (FileNotFoundError).
        created = _make_directories(src_fs, dst_fs, plan)
        for link, target in plan.links:
            copy_link(link, dst_fs.local_path(target), overwrite=not args.no_clobber)
        for source, reason in skipped:
            if not args.json:
                print(f"hpcbridge {args.command}: skipped {src_fs.url(source)}: {reason}", file=sys.stderr)
    total = sum(size for _, _, size in pairs)
    show = args.progress if args.progress is not None else (sys.stderr.isatty() and not args.json)
    bar = None
    if show and total >= PROGRESS_THRESHOLD:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="copy", file=sys.stderr)
    records = []
    started = time.perf_counter()

    def one(pair):
        source, target, _size = pair
        try:
            copied = copy_file(src_fs, source, dst_fs, target, overwrite=not args.no_clobber,
                               progress=bar.update if bar else None)
        except FileExistsError as exc:
            raise FileExistsError(errno.EEXIST, "File exists (not replaced: -n/--no-clobber)",
                                  dst_fs.url(target)) from exc
        return {"source": src_fs.url(source), "destination": dst_fs.url(target), "bytes": copied}

    jobs = max(1, min(getattr(args, "jobs", None) or COPY_JOBS, len(pairs)))
    try:
        indexed = list(enumerate(pairs))
        # Many small files: each copy waits mostly on the service (create, the close that completes
        # the file, rename), so up to `jobs` small files are copied at once, every client call still
        # on the connection's call pool. Large files go one after the other in this thread, so an
        # interrupt (Ctrl-C, SIGTERM) stops a large copy at once and removes its partial file; it
        # waits for the small copies under way (each completes or leaves nothing).
        small = [(n, pair) for n, pair in indexed if pair[2] < SMALL_FILE] if jobs > 1 else []
        done: dict[int, dict] = {}
        if len(small) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(jobs, thread_name_prefix="hpcbridge-copy") as executor:
                futures = [(n, executor.submit(one, pair)) for n, pair in small]
                try:
                    for n, future in futures:
                        done[n] = future.result()
                except BaseException:
                    for _, future in futures:
                        future.cancel()
                    raise
        for n, pair in indexed:
            if n not in done:
                done[n] = one(pair)
        records = [done[n] for n, _ in indexed]
        for directory, mode in reversed(created):  # deepest first: a read-only one was filled
            dst_fs.chmod(directory, mode)
    finally:
        if bar:
            bar.close()
    elapsed = time.perf_counter() - started
    records += [{"source": src_fs.url(source), "skipped": reason} for source, reason in skipped]
    if not args.json:
        print(f"copied {len(pairs)} file(s), {_human(total)} in {elapsed:.2f} s"
              f" ({total / max(elapsed, 1e-9) / 1e6:.1f} MB/s)")
    return records


def cmd_put(args) -> object:
    local = os.path.abspath(args.local)
    dst_fs, dst = url_to_fs(cli_url(args.url))
    args.dst_is_dir = args.url.endswith("/")
    return _copy_tree(connect("file://"), local, dst_fs, dst, args)


def cmd_get(args) -> object:
    src_fs, src = url_to_fs(cli_url(args.url))
    args.dst_is_dir = args.local.endswith(("/", os.sep))
    return _copy_tree(src_fs, src, connect("file://"), os.path.abspath(args.local), args)


def cmd_testbed(args) -> object:
    from ..testbed import HdfsCluster, TestbedError

    if args.action != "exec" and args.exec_argv:
        raise ValueError(f"testbed {args.action} takes no command (only `testbed exec HOST -- CMD` does)")
    if args.action == "up":
        if args.netns:
            from ..testbed.netns import netns_unavailable

            why = netns_unavailable(args.link_rate)  # a bad rate is a ValueError before anything starts
            if why:
                raise TestbedError(f"--netns: {why}")
        cluster = HdfsCluster(args.dir, datanodes=args.datanodes, racks=args.racks,
                              replication=args.replication, block_size=args.block_size,
                              netns=args.netns, link_rate=args.link_rate)
        started = time.perf_counter()
        info = cluster.up(dask=args.dask, dask_threads=args.dask_threads)
        if args.json:
            return info.as_dict()
        print(f"HDFS testbed up in {time.perf_counter() - started:.1f} s: {info.url}")
        print(f"  WebHDFS   {info.webhdfs}")
        net = cluster.network
        if net is not None:
            print(f"  hosts     network namespaces {net.namespace('head')} ... on {net.subnet}, DataNode links "
                  f"{args.link_rate} each way; run a command on one: hpcbridge testbed exec h1 -- CMD")
        for i, dn in enumerate(info.datanodes):
            print(f"  DataNode  {dn.host}  rack {dn.rack}  pid {dn.pid}" + (f"  (host h{i + 1})" if net else ""))
        if info.dask:
            print(f"  Dask      scheduler {info.dask['scheduler']}  pid {info.dask['scheduler_pid']}")
            for w in info.dask["workers"]:
                print(f"  Dask      worker {w['address']}  pid {w['pid']}")
        print(f"  for other tools: export HADOOP_CONF_DIR={info.conf_dir}")
        print(f"  stop with: hpcbridge testbed down{' --dir ' + args.dir if args.dir else ''}")
        return None
    try:
        cluster = HdfsCluster.attach(args.dir)
    except FileNotFoundError:
        raise TestbedError(f"no testbed in {args.dir or 'the default directory'} (start one: hpcbridge testbed up)")
    if args.action == "exec":
        if not args.exec_argv:
            raise ValueError("testbed exec needs a host and a command: hpcbridge testbed exec h1 -- CMD [ARGS]")
        host, command = args.exec_argv[0], args.exec_argv[1:]
        if not command:
            raise ValueError(f"testbed exec {host}: no command given (hpcbridge testbed exec {host} -- CMD [ARGS])")
        try:
            args.exit_code = cluster.exec(host, command).returncode  # the command's status is ours
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        return {"host": host, "returncode": args.exit_code}
    if args.action == "url":
        if args.json:
            return {"url": cluster.info.url, "webhdfs": cluster.info.webhdfs}
        print(cluster.info.url.rstrip("/"))  # for URL=$(hpcbridge testbed url)
        return None
    if args.action == "status":
        status = cluster.status()
        if args.json:
            return status
        print(f"{status['url']}  namenode pid {status['namenode']['pid']} "
              f"{'running' if status['namenode']['alive'] else 'DEAD'}; "
              f"{status['live_datanodes']}/{len(status['datanodes'])} DataNodes live")
        for dn in status["datanodes"]:
            print(f"  {dn['host']}  {dn['rack']}  pid {dn['pid']}  {'running' if dn['alive'] else 'DEAD'}")
        if status.get("dask"):
            d = status["dask"]
            print(f"  Dask scheduler {d['scheduler']}  pid {d['scheduler_pid']}  "
                  f"{'running' if d['scheduler_alive'] else 'DEAD'}")
            for w in d["workers"]:
                print(f"  Dask worker {w['address']}  pid {w['pid']}  {'running' if w['alive'] else 'DEAD'}")
        return None
    cluster.down()
    if not args.json:
        print("HDFS testbed stopped and removed")
    return {"stopped": True}


def _container(url):
    fs, path = url_to_fs(cli_url(url))
    if not fs.capabilities.log_structured:
        raise ValueError(f"{url!r} is not a PLFS URL (plfs+file:///..., plfs+hdfs://...)")
    container = fs.container(path)
    container.marker  # FileNotFoundError when there is no container
    return fs, path, container


def _plfs_info(args, fs, path, container) -> dict:
    from ..plfs import tools

    result = tools.info(container)
    if not args.json:
        for key, value in result.items():
            if key == "open_writers":
                value = ", ".join(f"{w.get('writer', 0):08x} (pid {w.get('pid', '?')})" for w in value) or "none"
            print(f"{key.replace('_', ' '):>19}: {value}")
    return result


def _plfs_check(args, fs, path, container) -> dict:
    from ..plfs import tools

    result = tools.check(container, deep=args.deep)
    if not args.json:
        print(f"{result['url']}: {result['writers']} writers, logical size {result['logical_size']}, "
              f"{result['holes']} hole(s) of {result['hole_bytes']} bytes"
              + (f", {result['records_verified']} records' data verified" if args.deep else ""))
        for log, physical, length, lo, hi in result["bad_ranges"]:
            print(f"  BAD DATA: {log} bytes {physical}..{physical + length} = logical {lo}..{hi}")
        for problem in result["problems"]:
            if "fail their CRC32C" not in problem:
                print(f"  PROBLEM: {problem}")
        for note in result["notes"]:
            print(f"  note: {note}")
        print("  healthy" if result["healthy"] else f"  {len(result['problems'])} problem(s)")
    if not result["healthy"]:
        args.exit_code = 1
    return result


def _plfs_recover(args, fs, path, container) -> dict:
    from ..plfs import tools

    writers = tools.recover(container)
    if not args.json:
        print(f"recovered {len(writers)} unclosed writer(s): " + (", ".join(f"{w:08x}" for w in writers) or "none"))
    return {"recovered": writers}


def _plfs_flatten(args, fs, path, container) -> dict:
    from ..plfs import tools

    result = tools.flatten(container)
    if not args.json:
        print(f"flattened {len(result['sources'])} index logs into {result['records']} records "
              f"({result['size']} logical bytes)")
    return result


def _plfs_export(args, fs, path, container) -> dict:
    """The logical file as a plain file."""
    dst_fs, dst = url_to_fs(cli_url(args.dest))
    size = fs.info(path).size
    show = args.progress if args.progress is not None else (sys.stderr.isatty() and not args.json)
    bar = None
    if show and size >= PROGRESS_THRESHOLD:
        from tqdm import tqdm

        bar = tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024, desc="export", file=sys.stderr)
    try:
        copied = copy_file(fs, path, dst_fs, dst, progress=bar.update if bar else None)
    finally:
        if bar:
            bar.close()
    if not args.json:
        print(f"exported {copied} bytes to {dst_fs.url(dst)}")
    return {"source": fs.url(path), "destination": dst_fs.url(dst), "bytes": copied}


_PLFS_ACTIONS = {"info": _plfs_info, "check": _plfs_check, "recover": _plfs_recover, "flatten": _plfs_flatten,
                 "export": _plfs_export}


def cmd_plfs(args) -> object:
    fs, path, container = _container(args.url)
    return _PLFS_ACTIONS[args.action](args, fs, path, container)


def cmd_mount(args) -> object:
    from .. import mount as mount_pkg

    if args.foreground:
        from ..mount.daemon import main as daemon_main

        argv = [args.url, args.mountpoint]
        for option in args.options:
            argv += ["-o", option]
        code = daemon_main(argv)
        if code:
            raise OSError(5, f"mounting {args.url} on {args.mountpoint} failed (see the messages above)")
        return {"url": args.url, "mountpoint": args.mountpoint, "unmounted": True} if args.json else None
    m = mount_pkg.mount(args.url, args.mountpoint, options=args.options, timeout=args.timeout)
    if args.json:
        return {"url": m.url, "mountpoint": m.path, "pid": m.pid, "log": m.log}
    print(f"mounted {m.url} on {m.path} (daemon pid {m.pid}, log {m.log}); `hpcbridge umount {m.path}` detaches it")
    return None


def cmd_umount(args) -> object:
    from .. import mount as mount_pkg

    mount_pkg.unmount(args.mountpoint, timeout=args.timeout)
    return {"mountpoint": args.mountpoint, "unmounted": True} if args.json else None


def cmd_bench(args) -> object:
    from .report import load_results, render_plot, render_table

    results = load_results(args.files)
    table = render_table(results)
    # --json is for scripts: a plot only when one was asked for with --plot.
    plot = args.plot if args.plot or args.json else "results/report.png"
    png = render_plot(results, plot) if plot else None
    if args.json:
        return {"rows": [dict(zip(table[0], row)) for row in table[1:]], "plot": png}
    _print_table(table[1:], table[0])
    print(f"plot: {png}")
    return None


# -- parser -------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``hpcbridge`` command."""
    parser = _Parser(
        prog="hpcbridge",
        description="Inspect and move data on HPC and Hadoop storage through one file API. "
                    "URLs: /abs/path or file:///abs/path (POSIX mounts), hdfs://[user@]namenode:port/path, "
                    "memory://name/path, plfs+file:///path, plfs+hdfs://namenode:port/path.",
    )
    parser.add_argument("--version", action="version", version=f"hpcbridge {__version__}")
    parser.add_argument("--json", action="store_true", help="print results and errors as JSON (for scripts)")
    sub = parser.add_subparsers(dest="command", metavar="command", required=True)

    def add(name, func, help_text):
        p = sub.add_parser(name, help=help_text, description=help_text)
        # SUPPRESS: a subcommand without --json must not reset a --json given before it.
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                       help="print the result as JSON (for scripts)")
        p.set_defaults(func=func)
        return p

    p = add("ls", cmd_ls, "list a directory")
    p.add_argument("url", help="directory (or file) URL")
    p.add_argument("-l", "--long", action="store_true", help="long listing: mode, owner, size, mtime")

    p = add("stat", cmd_stat, "show a file's metadata (size, type, mode, owner, replication, block size)")
    p.add_argument("url")

    p = add("layout", cmd_layout, "show where a file's blocks are stored (hosts, racks, storage targets)")
    p.add_argument("url")
    p.add_argument("--start", type=parse_size, default=0, help="first byte (default 0)")
    p.add_argument("--length", type=parse_size, default=None, help="bytes to cover (default: to the end)")
    p.add_argument("--block-size", type=positive_size, default=None,
                   help="logical block size for local file systems (default 64M)")

    p = add("testbed", cmd_testbed, "start, inspect or stop a real local HDFS (NameNode + DataNodes on 127.0.0.x, "
            "or on emulated hosts with --netns)")
    p.add_argument("action", choices=["up", "down", "status", "url", "exec"],
                   help="url: print the running testbed's hdfs:// URL (for URL=$(hpcbridge testbed url)); "
                        "exec HOST -- CMD: run CMD inside an emulated host (head, h1, h2..., or its address)")
    p.add_argument("exec_argv", nargs="*", metavar="HOST -- CMD",
                   help="exec: HOST -- CMD [ARGS] (the -- keeps the command's own options; give --dir before exec)")
    p.add_argument("--dir", default=None,
                   help="testbed directory (default $HPCBRIDGE_TESTBED_DIR or /tmp/hpcbridge-testbed)")
    p.add_argument("--datanodes", type=int, default=3, help="DataNodes, on 127.0.0.2, .3, ... (default 3)")
    p.add_argument("--racks", type=int, default=1, help="racks the DataNodes are spread over (default 1)")
    p.add_argument("--replication", type=int, default=None,
                   help="default replication of new files (default 2, or 1 with one DataNode: closes of "
                        "replication-1 files wait for the DataNode's report)")
    p.add_argument("--block-size", type=positive_size, default=parse_size("64M"), help="default block size (64M)")
    p.add_argument("--dask", action="store_true",
                   help="up: also start a Dask scheduler on 127.0.0.1 and one worker per DataNode host, bound to "
                        "that host's address (locality-aware jobs: hpcbridge dask ...)")
    p.add_argument("--dask-threads", type=int, default=1, help="threads per Dask worker (default 1)")
    p.add_argument("--netns", action="store_true",
                   help="up: emulated hosts: the NameNode in one network namespace, each DataNode (and its Dask "
                        "worker) in its own on a private subnet behind a bridge, links shaped (needs root)")
    p.add_argument("--link-rate", default="1gbit",
                   help="up --netns: rate of each DataNode host's link, each way, in tc notation (default 1gbit)")

    p = add("plfs", cmd_plfs, "inspect and maintain PLFS containers (plfs+file:///..., plfs+hdfs://...)")
    p.add_argument("action", choices=list(_PLFS_ACTIONS),
                   help="info: writers, records, sizes, format; check: index checksums, record counts, "
                        "unindexed bytes, holes, unclosed writers, the flattened index (exit 1 on problems); "
                        "recover: declare unclosed writers dead (HDFS lease recovery) so what they flushed "
                        "reads; flatten: persist the resolved index; export: write the logical file as a "
                        "plain file")
    p.add_argument("url", help="PLFS URL of the logical file")
    p.add_argument("dest", nargs="?", help="export destination (path or URL)")
    p.set_defaults(usage_error=p.error)
    p.add_argument("--deep", action="store_true",
                   help="check: also read every record's data and verify its CRC32C; each bad range is "
                        "reported as data log, physical offset, length and logical range")
    p.add_argument("--progress", dest="progress", action="store_true", default=None, help="progress bar on export")
    p.add_argument("--no-progress", dest="progress", action="store_false")

    add_dask_parser(add)

    p = add("mount", cmd_mount, "mount a backend URL as a FUSE file system for unmodified programs (returns once "
                                "the mount is live; PLFS URLs: every file is a container, every open a writer)")
    p.add_argument("url", help="directory URL: plfs+file:///dir, plfs+hdfs://nn:port/dir, hdfs://nn:port/dir, "
                               "file:///dir")
    p.add_argument("mountpoint", help="an existing empty directory")
    p.add_argument("-f", "--foreground", action="store_true", help="stay attached until unmounted")
    p.add_argument("-o", dest="options", action="append", default=[], metavar="OPT[,OPT]",
                   help="ro, allow_other, page_cache (kernel page cache instead of direct I/O), max_write=N, "
                        "debug, attr_timeout=S, or backend options as key=value (webhdfs=http://...)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the mount (default 60)")

    p = add("umount", cmd_umount, "unmount an hpcbridge mount and stop its daemon (also after the daemon died)")
    p.add_argument("mountpoint")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds before giving up (default 10)")

    p = add("bench", cmd_bench, "summarise benchmark results: a table and PNG plots")
    p.add_argument("action", choices=["report"])
    p.add_argument("files", nargs="+", help="JSON files written by the benchmarks (results/*.json)")
    p.add_argument("--plot", default=None,
                   help="PNG output (default results/report.png; with --json only when given)")

    for name, func, text, first, second in (
        ("put", cmd_put, "copy a local file or directory to a URL", "local", "url"),
        ("get", cmd_get, "copy a URL to a local file or directory", "url", "local"),
    ):
        p = add(name, func, text + " (atomic: written to a partial file, renamed into place)")
        p.add_argument(first)
        p.add_argument(second)
        p.add_argument("-r", "--recursive", action="store_true", help="copy directories recursively")
        p.add_argument("-j", "--jobs", type=_positive_int, default=COPY_JOBS, metavar="N",
                       help=f"files copied at once with -r (default {COPY_JOBS}; 1: one after the other)")
        p.add_argument("-n", "--no-clobber", action="store_true", help="fail instead of replacing files")
        p.add_argument("--links", choices=LINK_MODES, default="skip",
                       help="-r: symbolic links in a local source are skipped (default, each reported), "
                            "copied as links (local destinations), or followed (loops detected)")
        p.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help="always show a progress bar (default: on a terminal, for copies >= 8 MiB)")
        p.add_argument("--no-progress", dest="progress", action="store_false", help="never show one")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Called without ``argv`` (the ``hpcbridge`` command, ``python -m hpcbridge``), SIGINT and
    SIGTERM are ignored once the command has finished: a signal landing while the interpreter
    exits would otherwise kill a command that did its work (no status, no message).
    """
    console = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    for stream in (sys.stdout, sys.stderr) if console else ():
        # File names that are not UTF-8 (surrogate escapes) are printed as their bytes, as ls does.
        if hasattr(stream, "reconfigure") and stream.errors == "strict":
            stream.reconfigure(errors="surrogateescape")
    parser = build_parser()
    # Known before parsing, so that usage errors are JSON too under --json.
    json_mode = "--json" in argv[:argv.index("--")] if "--" in argv else "--json" in argv
    previous = signal.signal(signal.SIGTERM, _terminate) if _main_thread() else None
    try:
        return _run(parser, argv, json_mode)
    except BrokenPipeError:
        # The reader went away (``| head``): no traceback, the shell's status for SIGPIPE. Point
        # stdout at /dev/null so the interpreter's own flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    finally:
        if console and _main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _run(parser: argparse.ArgumentParser, argv: list[str], json_mode: bool) -> int:
    try:
        args = parser.parse_args(argv)
        if args.command == "plfs" and args.action == "export" and not args.dest:
            args.usage_error("plfs export needs a destination: hpcbridge plfs export URL DEST")
    except UsageError as exc:
        if json_mode:
            print(json.dumps({"error": f"{exc.parser.prog}: {exc}", "type": "UsageError"}))
        else:
            exc.parser.print_usage(sys.stderr)
            print(f"{exc.parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    try:
        result = args.func(args)
    except (OSError, ValueError, HpcbridgeError, TypeError) as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        if args.json:
            print(json.dumps({"error": str(exc), "type": type(exc).__name__}))
        else:
            print(f"hpcbridge {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        if not args.json:
            print(f"hpcbridge {args.command}: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        else:
            print(json.dumps({"error": "terminated" if terminated else "interrupted",
                              "type": type(exc).__name__}))
        return 128 + (signal.SIGTERM if terminated else signal.SIGINT)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    return getattr(args, "exit_code", 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
