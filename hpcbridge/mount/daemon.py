"""The mount daemon: ``python -m hpcbridge.mount.daemon URL MOUNTPOINT [-o opt[,opt]]...``.

Runs in the foreground until the mount is unmounted. :func:`hpcbridge.mount.mount` starts it
in its own session and waits for the kernel to list the mount.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

__all__ = ["main", "FUSE_OPTIONS", "split_options"]

#: FUSE options set by default: the mount listed as ``fuse.hpcbridge``; no attribute cache, so
#: ``stat`` sizes are the daemon's (open writers, truncations, other processes' writes) and not a
#: kernel copy up to a second old. (1 MiB requests are negotiated in ``init``.)
FUSE_OPTIONS = {"subtype": "hpcbridge", "attr_timeout": 0}
#: Options passed to FUSE as given; everything else ``key=value`` is a backend option.
PASS_THROUGH = {"ro", "rw", "allow_other", "allow_root", "default_permissions", "max_read",
                "attr_timeout", "entry_timeout", "negative_timeout", "max_idle_threads", "noatime", "async_read",
                "sync_read"}


def split_options(values) -> tuple[dict, dict, dict]:
    """``-o`` values -> (FUSE options, backend options, our flags: page_cache, debug)."""
    fuse, backend, flags = {}, {}, {"page_cache": False, "debug": False, "max_write": 1 << 20}
    for value in values:
        for item in (v.strip() for v in value.split(",")):
            if not item:
                continue
            key, _, val = item.partition("=")
            if key == "max_write":
                flags[key] = int(val)
            elif key in flags:
                flags[key] = val.lower() not in ("0", "false", "no") if val else True
            elif key in PASS_THROUGH:
                fuse[key] = int(val) if val.isdigit() else (val or True)
            elif val:
                backend[key] = int(val) if val.isdigit() else val
            else:
                raise ValueError(f"unknown mount option {item!r}: FUSE options {sorted(PASS_THROUGH)}, "
                                 "page_cache, debug, or backend options as key=value")
    return fuse, backend, flags


def main(argv=None) -> int:
    """Serve the mount in the foreground until it is unmounted; 1 (with the reason on stderr)
    if the URL, the options or the backend are unusable."""
    parser = argparse.ArgumentParser(prog="python -m hpcbridge.mount.daemon",
                                     description="FUSE daemon of `hpcbridge mount` (stays in the foreground)")
    parser.add_argument("url")
    parser.add_argument("mountpoint")
    parser.add_argument("-o", dest="options", action="append", default=[])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s hpcbridge-mount[%(process)d] %(levelname)s %(message)s")
    try:
        fuse_options, backend_options, flags = split_options(args.options)
        from ..fs.api import url_to_fs

        fs, root = url_to_fs(args.url, **backend_options)
        if not fs.capabilities.shared_between_processes:
            raise ValueError(f"{args.url}: {fs.backend_name} files live in one process; the mount's daemon would "
                             "serve a store of its own, empty (mount a file system other processes reach)")
        if fs.capabilities.log_structured and len(fs.volumes) > 1:
            raise ValueError(f"{args.url}: mounting multi-volume PLFS URLs is not supported; mount one volume root")
        root = fs._path(root)
        if not fs.isdir(root):
            if not fs.exists(root):
                raise FileNotFoundError(f"{args.url} does not exist (mount an existing directory of the backend)")
            raise NotADirectoryError(f"{args.url} is not a directory (mount a directory of the backend)")
        from .ops import BridgeFUSE, BridgeOperations
    except Exception as exc:  # reported by the parent, which quotes this output
        print(f"hpcbridge mount: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    if flags["debug"]:
        logging.getLogger("hpcbridge.mount").setLevel(logging.DEBUG)
    ops = BridgeOperations(fs, root, direct_io=not flags["page_cache"], max_write=flags["max_write"])
    options = dict(FUSE_OPTIONS, fsname=f"hpcbridge:{args.url}".replace(",", "\\,"), **fuse_options)
    os.chdir("/")
    BridgeFUSE(ops, args.mountpoint, raw_fi=True, foreground=True, nothreads=False, debug=flags["debug"], **options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
