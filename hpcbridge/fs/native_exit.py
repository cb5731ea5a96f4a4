"""At interpreter exit, wait for native threads that may still call into Python.

pyarrow reads hpcbridge files through Python file objects (pandas and Dask over the
``hpcbridge+<scheme>://`` fsspec protocols, :mod:`hpcbridge.arrow`) on its own I/O threads, and
releases the buffers those reads returned after the call that used them has returned. A release
that takes the GIL while the interpreter finalizes ends its thread with ``pthread_exit``, whose
unwinding through Arrow's C++ frames calls ``std::terminate``: the process aborts after its work
is done ("terminate called without an active exception"; 2 of 40 runs of a
``pandas.read_parquet("hpcbridge+file://...")`` script here, pyarrow 26.0.1). pyarrow checks for
finalization before such a release (apache/arrow#49942), but a release already waiting for the
GIL when finalization starts passes that check.

:func:`wait_at_exit` registers, once, an exit handler (exit handlers run before finalization)
that sleeps, letting such threads take the GIL and finish, until every other thread of the
process has used no CPU for :data:`QUIET` seconds, at most :data:`EXIT_WAIT` seconds.
"""

from __future__ import annotations

import atexit
import os
import threading
import time

__all__ = ["wait_at_exit", "wait_for_quiet_threads", "QUIET", "EXIT_WAIT"]

#: How long every other thread must have used no CPU before the interpreter may finalize, s.
QUIET = 0.01
#: Longest wait at exit for other threads to go quiet, seconds (a thread that never stops
#: computing, a user's, must not hold the exit longer).
EXIT_WAIT = 2.0

_registered = False
_lock = threading.Lock()


def _cpu_of_other_threads() -> dict[int, int] | None:
    """CPU time used so far by each thread of this process but the calling one (ns from the
    scheduler's statistics; clock ticks where those are missing), or None off Linux."""
    me = threading.get_native_id()
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    used = {}
    for tid in tids:
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat", "rb") as f:
                used[int(tid)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            try:  # no scheduler statistics: utime + stime of stat (after the command's ")")
                with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[-1].split()
                used[int(tid)] = (int(fields[11]) + int(fields[12])) * 10_000_000
            except (OSError, ValueError, IndexError):
                continue  # the thread ended meanwhile
    return used


def wait_for_quiet_threads(quiet: float = QUIET, timeout: float = EXIT_WAIT) -> bool:
    """Sleep until no other thread of the process has used CPU for ``quiet`` seconds; False
    if that did not happen within ``timeout`` seconds (or cannot be seen: not Linux)."""
    deadline = time.monotonic() + timeout
    before = _cpu_of_other_threads()
    if before is None:
        return False
    if not before:
        return True  # no other thread
    while True:
        time.sleep(quiet)  # releases the GIL: a thread waiting for it runs now
        after = _cpu_of_other_threads()
        if all(after.get(tid, used) == used for tid, used in before.items()) and after.keys() <= before.keys():
            return True
        if time.monotonic() > deadline:
            return False
        before = after


def wait_at_exit() -> None:
    """Register (once per process) the exit handler that waits for other threads to go quiet."""
    global _registered
    if _registered:
        return
    with _lock:
        if not _registered:
            atexit.register(wait_for_quiet_threads)
            _registered = True
