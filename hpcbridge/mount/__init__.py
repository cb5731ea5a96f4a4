"""``hpcbridge mount``: any hpcbridge backend as a FUSE file system, for unmodified programs.

>>> import hpcbridge                                                          # doctest: +SKIP
>>> with hpcbridge.mount("plfs+hdfs://nn:9820/ckpt", "/mnt/ckpt") as m:     # doctest: +SKIP
...     subprocess.run(["mpirun", "-n", "4", "python", "flash_io.py", "--dir", m.path])

The daemon is a separate process (``python -m hpcbridge.mount.daemon``, FUSE via mfusepy over
libfuse3): :func:`mount` starts it and returns once the kernel lists the mount; :func:`unmount`
(``hpcbridge umount``) detaches it, also when the daemon was killed (the mount then answers
ENOTCONN until it is unmounted). See docs/mount.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
import types

from ..fs.layout.mountinfo import mount_table
from ..processes import alive

__all__ = ["mount", "unmount", "Mount", "MountError", "mounts", "FSTYPE"]

#: The type the kernel lists for these mounts in /proc/mounts.
FSTYPE = "fuse.hpcbridge"


class MountError(OSError):
    """Mounting or unmounting failed (the message says why, with the daemon's log)."""


def _run_dir() -> str:
    path = os.environ.get("HPCBRIDGE_RUN_DIR") or os.path.join(os.environ.get("TMPDIR", "/tmp"), "hpcbridge-mounts")
    os.makedirs(path, exist_ok=True)
    return path


def _files(mountpoint: str) -> tuple[str, str]:
    key = hashlib.sha1(os.fsencode(os.path.realpath(mountpoint))).hexdigest()[:16]  # any bytes
    base = os.path.join(_run_dir(), key)
    return base + ".pid", base + ".log"


def mounts() -> dict[str, str]:
    """``{mountpoint: source}`` of every hpcbridge FUSE mount of this machine (its mount table)."""
    # The mountinfo parser splits lines at "\n" and fields at " " only, as the kernel escapes
    # them, and keeps undecodable bytes as os.fsdecode does: a mount point holding "\r" or a
    # Latin-1 name (anyone's, anywhere on the machine) must not hide or break ours.
    return {m.mount_point: m.source for m in mount_table() if m.fstype == FSTYPE}


def is_mounted(mountpoint: str) -> bool:
    """Whether ``mountpoint`` is an hpcbridge mount."""
    return os.path.realpath(mountpoint) in mounts()


def _read_pid(pid_file: str) -> int | None:
    try:
        with open(pid_file, encoding="utf-8") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class Mount:
    """A live mount: ``path``, the daemon's ``pid`` and ``log`` file; a context manager that
    unmounts on exit."""

    def __init__(self, url: str, path: str, pid: int, log: str, process=None):
        self.url = url
        self.path = path
        self.pid = pid
        self.log = log
        self._process = process

    def unmount(self, timeout: float = 10.0) -> None:
        """Detach the mount and stop the daemon (see :func:`unmount`)."""
        unmount(self.path, timeout=timeout)
        if self._process is not None:
            try:
                self._process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self) -> "Mount":
        return self

    def __exit__(self, *exc) -> None:
        self.unmount()

    def __repr__(self) -> str:
        return f"<hpcbridge Mount {self.url} on {self.path} (pid {self.pid})>"


def daemon_command(url: str, mountpoint: str, options=()) -> list[str]:
    """The command line of a mount daemon (it stays in the foreground)."""
    cmd = [sys.executable, "-m", "hpcbridge.mount.daemon", url, mountpoint]
    for option in options:
        cmd += ["-o", option]
    return cmd


def mount(url: str, mountpoint: str, options=(), timeout: float = 60.0) -> Mount:
    """Mount the backend URL ``url`` on the directory ``mountpoint``; returns once it is live.

    Parameters
    ----------
    url:
        Any hpcbridge URL of a directory: ``plfs+file:///dir``, ``plfs+hdfs://nn:port/dir``,
        ``hdfs://nn:port/dir``, ``file:///dir``.
    mountpoint:
        An existing empty directory.
    options:
        ``-o`` options: ``ro``, ``allow_other``, ``page_cache`` (use the kernel page cache
        instead of direct I/O: only where no one else writes the files), ``debug``, or backend
        options as ``key=value`` (``webhdfs=http://...``).
    timeout:
        Seconds to wait for the mount to appear.

    Raises
    ------
    MountError
        When the daemon exits or the mount does not appear in time; the daemon's log is quoted.
    """
    if isinstance(options, str):
        options = [o for o in options.split(",") if o]
    target = os.path.realpath(mountpoint)
    if not os.path.isdir(target):
        raise MountError(2, f"mount point {mountpoint!r} is not a directory", mountpoint)
    if target in mounts():
        raise MountError(16, f"{mountpoint!r} is already an hpcbridge mount ({mounts()[target]})", mountpoint)
    pid_file, log_file = _files(target)
    with open(log_file, "wb") as log:
        process = subprocess.Popen(daemon_command(url, target, options), stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
    with open(pid_file, "w", encoding="utf-8") as f:
        f.write(f"{process.pid}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if target in mounts():
            return Mount(url, target, process.pid, log_file, process)
        if process.poll() is not None:
            break
        time.sleep(0.02)
    if process.poll() is None:
        process.kill()
        process.wait()
        subprocess.run(["fusermount3", "-u", "-z", target], capture_output=True)
    try:
        os.unlink(pid_file)
    except FileNotFoundError:
        pass
    with open(log_file, encoding="utf-8", errors="replace") as f:
        text = f.read().strip()
    why = "did not appear in time" if process.returncode in (None, -9) else f"daemon exited ({process.returncode})"
    raise MountError(5, f"mounting {url} on {mountpoint} failed: {why}: {text[-2000:] or 'no output'}", mountpoint)


def unmount(mountpoint: str, timeout: float = 10.0) -> None:
    """Unmount an hpcbridge mount and stop its daemon, within ``timeout`` seconds.

    Works when the daemon is alive (it closes open writers, publishing their index), dead
    (killed: the kernel answers ENOTCONN until now) or hung (a lazy unmount detaches it and the
    daemon is killed).

    Raises
    ------
    MountError
        If ``mountpoint`` is not an hpcbridge mount, or it is still mounted after ``timeout``.
    """
    target = os.path.realpath(mountpoint)
    pid_file, _ = _files(target)
    pid = _read_pid(pid_file)
    if target not in mounts():
        if pid is not None and alive(pid):
            _stop(pid, time.monotonic() + 2)
        if pid is not None:
            _remove(pid_file)
            return
        raise MountError(22, f"{mountpoint!r} is not an hpcbridge mount", mountpoint)
    deadline = time.monotonic() + timeout
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    if tool:
        attempts = ([tool, "-u", target], [tool, "-u", "-z", target])
    else:
        attempts = (["umount", target], ["umount", "-l", target])
    for cmd in attempts:
        try:
            subprocess.run(cmd, capture_output=True, timeout=max(0.5, (deadline - time.monotonic()) / 2))
        except subprocess.TimeoutExpired:
            pass
        if target not in mounts():
            break
    if pid is not None:
        # The daemon leaves on its own once unmounted (after closing its writers); give it
        # most of the time left, then stop it.
        _stop(pid, deadline)
    _remove(pid_file)
    if target in mounts():
        raise MountError(16, f"{mountpoint!r} is still mounted after {timeout:g} s", mountpoint)


def _stop(pid: int, deadline: float) -> None:
    while alive(pid) and time.monotonic() < deadline - 1:
        time.sleep(0.02)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not alive(pid):
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        end = time.monotonic() + 0.5
        while alive(pid) and time.monotonic() < end:
            time.sleep(0.02)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class _CallableModule(types.ModuleType):
    """``hpcbridge.mount`` is this package and also the function :func:`mount`."""

    def __call__(self, url, mountpoint, options=(), timeout: float = 60.0) -> Mount:
        return mount(url, mountpoint, options, timeout)


sys.modules[__name__].__class__ = _CallableModule
