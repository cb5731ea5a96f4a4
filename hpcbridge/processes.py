"""Process helpers shared by the testbed and the mount (both manage daemons by pid): is a pid
alive, stop it by pid (TERM, then KILL). Knows nothing else of hpcbridge."""

from __future__ import annotations

import os
import signal
import time

__all__ = ["alive", "stop_pid"]


def alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie child counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def stop_pid(pid: int, grace: float = 10.0) -> None:
    """SIGTERM ``pid``, wait up to ``grace`` seconds, then SIGKILL; reap it if it is our child."""
    if not pid or not alive(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.05)
    if alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
