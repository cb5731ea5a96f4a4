"""A PLFS container on one or more backing volumes: where its parts live, its metadata."""

from __future__ import annotations

import errno
import json
import math
import os
import socket
import time

import numpy as np

from ..errors import os_error
from ..fs.base import FileSystem
from .format import MARKER, META_DIR, OPEN_DIR, decode_records, host_dir, marker_json, parse_marker

__all__ = ["Container", "Damage", "PlfsCorruptionError"]


class PlfsCorruptionError(OSError):
    """A container's index holds records that fail their checksum (named, with the log)."""


class Damage(tuple):
    """(index log URL, record number or -1 for a torn tail, description)."""


class Container:
    """The parts of one logical file: ``volumes`` are ``(file system, container path)`` pairs, the
    first being canonical (marker, metadata, open-writer records)."""

    def __init__(self, volumes: list[tuple[FileSystem, str]], url: str):
        self.volumes = volumes
        self.url = url
        self._marker: dict | None = None

    # -- paths --------------------------------------------------------------------------------
    @property
    def fs(self) -> FileSystem:
        """The canonical volume's file system."""
        return self.volumes[0][0]

    @property
    def path(self) -> str:
        """The canonical container directory."""
        return self.volumes[0][1]

    @property
    def host_dirs(self) -> int:
        """Number of host subdirectories (fixed at creation)."""
        return int(self.marker["host_dirs"])

    def place(self, writer: int) -> tuple[FileSystem, str]:
        """``(file system, host directory)`` holding a writer's logs."""
        name = host_dir(writer, self.host_dirs)
        fs, path = self.volumes[(writer % self.host_dirs) % len(self.volumes)]
        return fs, f"{path}/{name}"

    # -- existence and creation ---------------------------------------------------------------
    @staticmethod
    def is_container(fs: FileSystem, path: str) -> bool:
        """Whether ``path`` is a container directory (it holds the marker)."""
        return fs.exists(f"{path.rstrip('/')}/{MARKER}")

    @property
    def marker(self) -> dict:
        """The parsed marker file."""
        if self._marker is None:
            try:
                data = self.fs.read_bytes(f"{self.path}/{MARKER}")
            except FileNotFoundError:
                raise os_error(errno.ENOENT, self.url, "plfs", "no PLFS container here") from None
            self._marker = parse_marker(data, self.url)
        return self._marker

    def create(self, writers_hint: int = 4) -> None:
        """Create the container (all volumes); host subdirectories ~ sqrt(writers)."""
        host_dirs = max(1, math.isqrt(max(1, writers_hint - 1)) + 1)
        for fs, path in self.volumes:
            fs.mkdir(path, exist_ok=True)
        self.fs.mkdir(f"{self.path}/{META_DIR}", exist_ok=True)
        self.fs.mkdir(f"{self.path}/{OPEN_DIR}", exist_ok=True)
        self.fs.write_bytes(f"{self.path}/{MARKER}", marker_json(host_dirs, len(self.volumes)))
        self._marker = None

    def remove(self) -> None:
        """Remove every part of the container on every volume."""
        for fs, path in self.volumes:
            if fs.exists(path):
                fs.rm(path, recursive=True)

    # -- writers ------------------------------------------------------------------------------
    def index_logs(self) -> list[tuple[int, FileSystem, str]]:
        """Every writer's index log: ``(writer id, file system, path)``, sorted by writer."""
        found = []
        for fs, path in self.volumes:
            for entry in fs.iterdir(path):
                name = entry.path.rsplit("/", 1)[-1]
                if not (entry.is_dir and name.startswith("hostdir.")):
                    continue
                for log in fs.iterdir(entry.path):
                    log_name = log.path.rsplit("/", 1)[-1]
                    if log_name.startswith("index."):
                        found.append((int(log_name[6:], 16), fs, log.path))
        return sorted(found, key=lambda item: item[0])

    def data_log(self, writer: int) -> tuple[FileSystem, str]:
        """``(file system, path)`` of a writer's data log."""
        fs, hostdir = self.place(writer)
        return fs, f"{hostdir}/data.{writer:08x}"

    def mark_open(self, writer: int) -> None:
        """Record that ``writer`` is open (removed at close; left behind by a crash)."""
        record = json.dumps({"writer": writer, "host": socket.gethostname(), "pid": os.getpid(),
                             "opened": time.time()}).encode()
        with self.fs.open(f"{self.path}/{OPEN_DIR}/{writer:08x}", "xb") as f:
            f.write(record)

    def mark_closed(self, writer: int) -> None:
        """Remove the open-writer record."""
        try:
            self.fs.rm(f"{self.path}/{OPEN_DIR}/{writer:08x}")
        except FileNotFoundError:
            pass

    def open_writers(self) -> list[dict]:
        """Writers that opened and did not close (still writing, or crashed)."""
        out = []
        for entry in self.fs.iterdir(f"{self.path}/{OPEN_DIR}"):
            try:
                out.append(json.loads(self.fs.read_bytes(entry.path)))
            except (ValueError, OSError):
                out.append({"writer": int(entry.path.rsplit("/", 1)[-1], 16)})
        return out

    # -- metadata ------------------------------------------------------------------------------
    def write_meta(self, name: str, writers: list[dict]) -> None:
        """One metadata record for a set of writers (one per writer, or one per MPI job)."""
        meta = {"writers": writers, "closed": time.time(),
                "size": max((w["max_end"] for w in writers), default=0),
                "max_sequence": max((w["max_sequence"] for w in writers), default=0)}
        self.fs.write_bytes(f"{self.path}/{META_DIR}/{name}.json", json.dumps(meta).encode())

    def metas(self) -> list[dict]:
        """All metadata records."""
        out = []
        for entry in self.fs.iterdir(f"{self.path}/{META_DIR}"):
            try:
                out.append(json.loads(self.fs.read_bytes(entry.path)))
            except (ValueError, OSError):
                continue
        return out

    def summary_size(self) -> int | None:
        """Logical size from metadata alone, or None when a writer is open (or crashed): then
        only the index logs can tell."""
        if self.open_writers():
            return None
        metas = self.metas()
        return max((m["size"] for m in metas), default=0)

    def max_sequence(self) -> int:
        """Highest sequence number any closed writer used."""
        return max((m.get("max_sequence", 0) for m in self.metas()), default=0)

    # -- index ------------------------------------------------------------------------------------
    def read_index_logs(self, logs, on_corruption: str = "raise") -> tuple[np.ndarray, list[Damage]]:
        """Read and check the given index logs: ``(valid records, damage found)``.

        ``on_corruption="raise"`` raises PlfsCorruptionError naming the first damaged log;
        ``"skip"`` drops damaged records and keeps everything else.
        """
        from .format import RECORD

        parts, damage = [], []
        for writer, fs, path in logs:
            data = fs.read_bytes(path)
            records, valid, torn = decode_records(data)
            bad = np.flatnonzero(~valid)
            url = fs.url(path)
            for i in bad:
                damage.append(Damage((url, int(i), "checksum mismatch or invalid fields")))
            if torn:
                damage.append(Damage((url, -1, f"torn record at the end ({torn} bytes)")))
            wrong_writer = valid & (records["writer"] != writer)
            for i in np.flatnonzero(wrong_writer):
                damage.append(Damage((url, int(i), f"record names writer {records['writer'][i]:08x}")))
            parts.append(records[valid & ~wrong_writer])
        serious = [d for d in damage if d[1] >= 0]
        if serious and on_corruption == "raise":
            url, number, why = serious[0]
            raise PlfsCorruptionError(
                errno.EIO, f"corrupt index record {number} in {url} ({why}); run `hpcbridge plfs check` "
                f"or open with on_corruption='skip' to read the other writers' data", self.url)
        return (np.concatenate(parts) if parts else np.zeros(0, RECORD)), damage
