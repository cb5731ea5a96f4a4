"""A Dask cluster beside the testbed's HDFS: one scheduler on 127.0.0.1 and one worker per
DataNode host, bound to that host's loopback address, so a worker's host equals the host that
block locations name for its DataNode. On emulated hosts (``testbed up --netns``) the scheduler
runs in the head namespace and each worker inside its DataNode's namespace.

The processes are plain ``dask scheduler`` / ``dask worker --no-nanny`` commands; their pids and
addresses are kept in :class:`DaskInfo` (saved in the testbed's ``cluster.json``) so they are
stopped by pid.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..processes import alive, stop_pid

__all__ = ["DaskInfo", "DaskWorkerInfo", "start_dask", "stop_dask", "dask_status", "WORK_STEALING"]

#: Work stealing on the testbed's scheduler: off. The locality plan already balances (at most 1.5
#: fair shares per worker, the rest unrestricted), and stealing only moves planned-local reads to
#: idle workers: measured with benchmarks/locality.py on 512 MiB, stealing on gave 93.7 % local
#: where off gave 100 % on the same kind of layout. Pass work_stealing=True for Dask's default.
WORK_STEALING = False


@dataclass
class DaskWorkerInfo:
    """One Dask worker: the host it is bound to, its address, pid and log."""

    host: str
    address: str
    pid: int
    log: str


@dataclass
class DaskInfo:
    """The testbed's Dask cluster: scheduler address and pid, workers."""

    scheduler: str
    scheduler_pid: int
    scheduler_log: str
    workers: list[DaskWorkerInfo] = field(default_factory=list)
    nthreads: int = 1

    def as_dict(self) -> dict:
        """JSON-ready description."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "DaskInfo":
        """Rebuild from :meth:`as_dict`."""
        data = dict(data)
        data["workers"] = [DaskWorkerInfo(**w) for w in data.get("workers", [])]
        return cls(**data)


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _spawn(command: list[str], log: str, env: dict, inside=None, host: str = "") -> int:
    if inside is not None:
        command = inside(host, command)
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env=env)
    return process.pid


def _dask_executable() -> str:
    candidate = os.path.join(os.path.dirname(sys.executable), "dask")
    if not os.path.exists(candidate):
        raise FileNotFoundError(f"the dask command is not installed next to {sys.executable}: "
                                "pip install 'hpcbridge[dask]'")
    return candidate


def start_dask(hosts: list[str], log_dir: str | os.PathLike, nthreads: int = 1, memory_limit: str = "2GiB",
               work_stealing: bool = WORK_STEALING, timeout: float = 120.0, env: dict | None = None,
               scheduler_host: str = "127.0.0.1", inside=None) -> DaskInfo:
    """Start a scheduler on ``scheduler_host`` and one worker per host in ``hosts``; return
    once every worker is connected. On failure, whatever was started is stopped again.
    ``env`` adds environment variables (e.g. ``HADOOP_CONF_DIR``) to the processes.
    ``inside(host, argv)``: the command that runs ``argv`` on an emulated host (its namespace);
    with it every process has an address of its own and Dask's usual ports (8786, 8787) are used."""
    dask = _dask_executable()
    log_dir = Path(log_dir)
    env = {**os.environ, **(env or {}), "DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING": str(work_stealing),
           "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    port = 8786 if inside is not None else _free_port(scheduler_host)
    address = f"tcp://{scheduler_host}:{port}"
    info = DaskInfo(address, 0, str(log_dir / "dask-scheduler.log"), nthreads=nthreads)
    try:
        info.scheduler_pid = _spawn([dask, "scheduler", "--host", scheduler_host, "--port", str(port),
                                     "--no-dashboard", "--no-show"], info.scheduler_log, env, inside, scheduler_host)
        for host in hosts:
            worker_port = 8787 if inside is not None else _free_port(host)
            log = str(log_dir / f"dask-worker-{host}.log")
            pid = _spawn([dask, "worker", address, "--host", host, "--worker-port", str(worker_port),
                          "--nthreads", str(nthreads), "--nworkers", "1", "--no-nanny", "--no-dashboard",
                          "--memory-limit", memory_limit, "--name", f"worker-{host}"], log, env, inside, host)
            info.workers.append(DaskWorkerInfo(host, f"tcp://{host}:{worker_port}", pid, log))
        _wait(info, timeout)
    except BaseException:
        stop_dask(info)
        raise
    return info


def _wait(info: DaskInfo, timeout: float) -> None:
    from distributed import Client

    deadline = time.monotonic() + timeout
    client = None
    try:
        while time.monotonic() < deadline:
            for name, pid, log in [("scheduler", info.scheduler_pid, info.scheduler_log),
                                   *[(f"worker {w.host}", w.pid, w.log) for w in info.workers]]:
                if not alive(pid):
                    tail = Path(log).read_text(errors="replace")[-3000:] if os.path.exists(log) else "(no log)"
                    raise RuntimeError(f"Dask {name} (pid {pid}) died during start-up; log tail ({log}):\n{tail}")
            try:
                if client is None:
                    client = Client(info.scheduler, timeout=5, set_as_default=False)
                if len(client.scheduler_info(n_workers=-1)["workers"]) >= len(info.workers):
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise TimeoutError(f"Dask workers not connected to {info.scheduler} after {timeout:.0f} s")
    finally:
        if client is not None:
            client.close()


def stop_dask(info: DaskInfo | None) -> None:
    """Stop the workers, then the scheduler, by pid."""
    if info is None:
        return
    for worker in info.workers:
        stop_pid(worker.pid)
    stop_pid(info.scheduler_pid)


def dask_status(info: DaskInfo | None) -> dict | None:
    """Which Dask processes run (None when the testbed has no Dask cluster)."""
    if info is None:
        return None
    return {"scheduler": info.scheduler, "scheduler_pid": info.scheduler_pid, "scheduler_alive": alive(info.scheduler_pid),
            "workers": [{"host": w.host, "address": w.address, "pid": w.pid, "alive": alive(w.pid)}
                        for w in info.workers]}
