"""The locality report of a job: bytes read locally and remotely, bytes served per host.

Built from the measurements the read tasks record (:mod:`hpcbridge.dask.reader`): each task
reports the host it ran on and, for every byte range it fetched, the host that stored it. Bytes
are *local* when the serving host is the worker's host. Nothing here is inferred from the plan:
a task that Dask ran elsewhere than planned shows up as remote bytes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from .hosts import host_matches
from .reader import EVENT_TOPIC, local_events

__all__ = ["LocalityReport", "collect_report"]


@dataclass
class LocalityReport:
    """Where one job's read tasks ran and where the bytes they read were stored.

    Attributes
    ----------
    job:
        The job id (``job=`` of :func:`~hpcbridge.dask.read_blocks`).
    tasks:
        Read tasks that reported (a partition read twice, e.g. after a worker loss, counts twice).
    bytes_local, bytes_remote:
        Bytes fetched from storage on the worker's own host, and from other hosts.
    bytes_by_host:
        Bytes each storage host served.
    bytes_by_worker_host, tasks_by_worker_host:
        Bytes read and read tasks run by the workers of each host.
    tasks_on_preferred_host:
        Read tasks that ran on the host storing most of their partition's bytes.
    """

    job: str
    tasks: int = 0
    bytes_local: int = 0
    bytes_remote: int = 0
    bytes_by_host: dict[str, int] = field(default_factory=dict)
    bytes_by_worker_host: dict[str, int] = field(default_factory=dict)
    tasks_by_worker_host: dict[str, int] = field(default_factory=dict)
    tasks_on_preferred_host: int = 0
    read_seconds: float = 0.0

    @property
    def bytes_read(self) -> int:
        """All bytes the read tasks fetched (including the overread that finishes records)."""
        return self.bytes_local + self.bytes_remote

    @property
    def local_fraction(self) -> float:
        """Share of the bytes read from the worker's own host (0.0 when nothing was read)."""
        return self.bytes_local / self.bytes_read if self.bytes_read else 0.0

    @classmethod
    def from_events(cls, job: str, events) -> "LocalityReport":
        """Sum the measurements of ``job`` among ``events`` (dicts recorded by the read tasks)."""
        report = cls(job)
        by_host: dict[str, int] = defaultdict(int)
        by_worker: dict[str, int] = defaultdict(int)
        tasks_by_worker: dict[str, int] = defaultdict(int)
        for e in events:
            if e.get("job") != job:
                continue
            report.tasks += 1
            report.bytes_local += e["bytes_local"]
            report.bytes_remote += e["bytes_remote"]
            report.read_seconds += e.get("seconds", 0.0)
            for host, n in e["bytes_by_host"].items():
                by_host[host] += n
            by_worker[e["worker_host"]] += e["bytes_local"] + e["bytes_remote"]
            tasks_by_worker[e["worker_host"]] += 1
            report.tasks_on_preferred_host += bool(e.get("preferred")) and host_matches(e["preferred"], e["worker_host"])
        report.bytes_by_host = dict(sorted(by_host.items()))
        report.bytes_by_worker_host = dict(sorted(by_worker.items()))
        report.tasks_by_worker_host = dict(sorted(tasks_by_worker.items()))
        return report

    def as_dict(self) -> dict:
        """JSON-ready fields, with ``bytes_read`` and ``local_fraction``."""
        return {
            "job": self.job, "tasks": self.tasks, "bytes_read": self.bytes_read,
            "bytes_local": self.bytes_local, "bytes_remote": self.bytes_remote,
            "local_fraction": round(self.local_fraction, 4), "bytes_by_host": self.bytes_by_host,
            "bytes_by_worker_host": self.bytes_by_worker_host, "tasks_by_worker_host": self.tasks_by_worker_host,
            "tasks_on_preferred_host": self.tasks_on_preferred_host, "read_seconds": round(self.read_seconds, 3),
        }

    def format(self) -> str:
        """A few human-readable lines (what the CLI prints)."""
        mib = 1 << 20
        lines = [f"locality of job {self.job}: {self.tasks} read tasks, {self.bytes_read / mib:.1f} MiB read, "
                 f"{100 * self.local_fraction:.1f}% local ({self.bytes_local / mib:.1f} MiB local, "
                 f"{self.bytes_remote / mib:.1f} MiB remote)",
                 f"  {'host':<16} {'served MiB':>10} {'read MiB':>10} {'tasks':>6}"]
        for host in sorted(set(self.bytes_by_host) | set(self.bytes_by_worker_host)):
            lines.append(f"  {host:<16} {self.bytes_by_host.get(host, 0) / mib:>10.1f} "
                         f"{self.bytes_by_worker_host.get(host, 0) / mib:>10.1f} "
                         f"{self.tasks_by_worker_host.get(host, 0):>6}")
        lines.append("  (served: bytes the host's storage served; read: bytes read by workers on the host; "
                     "local = served by the reading worker's own host)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def collect_report(job: str, client=None) -> LocalityReport:
    """The :class:`LocalityReport` of ``job`` from the scheduler's event log of ``client``
    (and from reads run in this process without ``distributed``)."""
    events = [e for e in local_events() if e.get("job") == job]
    if client is not None:
        events += [msg for _, msg in client.get_events(EVENT_TOPIC) if isinstance(msg, dict) and msg.get("job") == job]
    return LocalityReport.from_events(job, events)
