"""Inspecting and maintaining containers: info, check, flatten, export (the ``hpcbridge plfs``
commands)."""

from __future__ import annotations

import json

import numpy as np

from .container import Container
from .format import RECORD, encode_records
from .index import GlobalIndex
from .reader import load_index

__all__ = ["info", "check", "flatten", "recover", "FLAT_INDEX", "FLAT_META", "load_flat"]

FLAT_INDEX = "flat.index"
FLAT_META = "flat.json"


def _sources(container: Container) -> dict[str, int]:
    return {log: fs.info(log).size for _, fs, log in container.index_logs()}


def flatten(container: Container) -> dict:
    """Persist the resolved global index (``flat.index`` + ``flat.json`` naming the index logs
    and sizes it was built from); later opens use it while those logs are unchanged."""
    index, damage = load_index(container, "raise")
    runs = index.runs
    records = np.zeros(len(runs["logical"]), dtype=RECORD)
    for name in ("logical", "length", "physical", "stride", "count", "writer"):
        records[name] = runs[name]
    fs = container.fs
    fs.write_bytes(f"{container.path}/{FLAT_INDEX}", encode_records(records))
    meta = {"sources": _sources(container), "records": len(records), "size": index.size}
    fs.write_bytes(f"{container.path}/{FLAT_META}", json.dumps(meta).encode())
    return meta


def load_flat(container: Container) -> GlobalIndex | None:
    """The persisted flattened index if it is still valid, else None."""
    from .format import decode_records

    fs = container.fs
    try:
        meta = json.loads(fs.read_bytes(f"{container.path}/{FLAT_META}"))
        data = fs.read_bytes(f"{container.path}/{FLAT_INDEX}")
    except (FileNotFoundError, ValueError):
        return None
    if meta.get("sources") != _sources(container):
        return None
    records, valid, torn = decode_records(data)
    if torn or not valid.all():
        return None
    runs = {k: records[k].astype(np.uint64) for k in ("logical", "length", "physical", "stride", "count", "writer")}
    return GlobalIndex(runs, int(meta["size"]))


def info(container: Container) -> dict:
    """Writers, records, logical size, physical bytes, open writers, layout of a container."""
    logs = container.index_logs()
    records, damage = container.read_index_logs(logs, "skip")
    physical = 0
    for writer, _, _ in logs:
        fs, data = container.data_log(writer)
        try:
            physical += fs.info(data).size
        except FileNotFoundError:
            pass
    index = GlobalIndex.build(records)
    return {
        "url": container.url,
        "format_version": container.marker["version"],
        "host_dirs": container.host_dirs,
        "volumes": len(container.volumes),
        "writers": len(logs),
        "index_records": int(len(records)),
        "resolved_runs": index.records,
        "logical_size": index.size,
        "physical_bytes": physical,
        "open_writers": container.open_writers(),
        "metadata_records": len(container.metas()),
        "damaged_records": len(damage),
    }


def check(container: Container) -> dict:
    """Verify a container: checksums and torn records, data logs as long as their index says,
    holes, unclosed writers. ``problems`` lists what is wrong (empty: healthy)."""
    logs = container.index_logs()
    records, damage = container.read_index_logs(logs, "skip")
    problems = [f"{url}: record {n}: {why}" if n >= 0 else f"{url}: {why}" for url, n, why in damage]
    for writer, _, _ in logs:
        mine = records[records["writer"] == writer]
        if not len(mine):
            continue
        needed = int((mine["physical"] + mine["length"] * mine["count"]).max())
        fs, data = container.data_log(writer)
        try:
            have = fs.info(data).size
        except FileNotFoundError:
            have = -1
        if have < needed:
            problems.append(f"{fs.url(data)}: data log has {max(have, 0)} bytes, its index needs {needed}")
    for w in container.open_writers():
        problems.append(f"writer {w.get('writer', 0):08x} never closed (host {w.get('host', '?')}, "
                        f"pid {w.get('pid', '?')}): still writing, or it crashed")
    index = GlobalIndex.build(records)
    pieces = index.lookup(0, index.size)
    ends = pieces["logical"] + pieces["length"]
    gaps = pieces["logical"][1:] - ends[:-1]
    holes = int((gaps > 0).sum()) + (1 if len(pieces["logical"]) and pieces["logical"][0] > 0 else 0)
    hole_bytes = int(gaps[gaps > 0].sum()) + (int(pieces["logical"][0]) if len(pieces["logical"]) else 0)
    return {"url": container.url, "writers": len(logs), "logical_size": index.size, "holes": holes,
            "hole_bytes": hole_bytes, "problems": problems, "healthy": not problems}


def recover(container: Container) -> list[int]:
    """Declare the container's unclosed writers dead and make what they synced readable.

    On HDFS a crashed writer's logs stay "under construction" until lease recovery closes them
    (hdfs-native then reads them in full); on POSIX nothing needs closing. The open-writer records
    are removed. Only for writers known to be gone: recovery fences a live writer.
    """
    recovered = []
    for record in container.open_writers():
        writer = int(record.get("writer", 0))
        fs, hostdir = container.place(writer)
        for name in (f"data.{writer:08x}", f"index.{writer:08x}"):
            path = f"{hostdir}/{name}"
            if hasattr(fs, "recover_lease") and fs.exists(path):
                fs.recover_lease(path)
        container.mark_closed(writer)
        recovered.append(writer)
    return recovered
