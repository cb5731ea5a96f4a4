"""The mount daemon with its write handler replaced by a compiled C function that answers every
write at once and keeps nothing: what the kernel's FUSE transport costs on its own, with no
Python and no storage behind the writes. Every other request is the shipped daemon's.

    python benchmarks/_noop_daemon.py HANDLER.so URL MOUNTPOINT [-o opt]...

``HANDLER.so`` exports ``int noop_write(const char *path, const char *buf, size_t size, off_t
offset, void *fi)`` (``fuse_ceiling.py`` builds it). Written data is lost: for measurements only.
"""

from __future__ import annotations

import ctypes
import sys

import mfusepy

from hpcbridge.mount import daemon


def main(argv: list[str]) -> int:
    handler = ctypes.CDLL(argv[0]).noop_write
    start = mfusepy.fuse_main_real

    def with_noop_write(argc, args, operations, size, context):
        # mfusepy has filled the operations with its Python callbacks; swap the write's for C.
        prototype = dict(mfusepy.fuse_operations._fields_)["write"]
        operations.contents.write = ctypes.cast(handler, prototype)
        return start(argc, args, operations, size, context)

    mfusepy.fuse_main_real = with_noop_write
    return daemon.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
