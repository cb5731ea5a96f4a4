"""Inspecting and maintaining containers: info, check, flatten, recover (the ``hpcbridge plfs``
commands). Each action is one function returning a JSON-able dict or list."""

from __future__ import annotations

import json
import secrets

import numpy as np

from .container import Container, Damage
from .format import FLAG_DATA_CRC, RECORD, data_crc, decode_records, encode_records, record_size
from .index import CHECK, Checks, GlobalIndex

__all__ = ["info", "check", "flatten", "recover", "FLAT_INDEX", "FLAT_META", "load_flat"]

FLAT_INDEX = "flat.index"
FLAT_META = "flat.json"
#: ``flags`` bit of flat.index records that are data checksums, not resolved runs.
FLAG_FLAT_CHECK = 2
_RUN_FIELDS = ("logical", "length", "physical", "stride", "count", "writer")


def _sources(container: Container) -> dict[str, int]:
    """What a resolved index depends on, by path and size: the index logs, and the metadata
    records (a close or a recovery changes which records count without growing a log)."""
    sources = {log: size for _, _, log, size in container.index_logs(sizes=True)}
    sources.update((m.path, m.size) for m in container.fs.iterdir(f"{container.path}/meta"))
    return sources


def _flat_records(index: GlobalIndex) -> np.ndarray:
    """The resolved runs followed by the data checksums, as format-2 records."""
    runs, checks = index.runs, index.checks.table
    records = np.zeros(len(runs["logical"]) + len(checks), dtype=RECORD)
    head, tail = records[:len(runs["logical"])], records[len(runs["logical"]):]
    for name in _RUN_FIELDS:
        head[name] = runs[name]
    for name in ("logical", "length", "stride", "count", "writer"):
        tail[name] = checks[name]
    tail["physical"], tail["data_crc"] = checks["start"], checks["crc"]
    tail["flags"] = FLAG_DATA_CRC | FLAG_FLAT_CHECK
    return records


def flatten(container: Container) -> dict:
    """Persist the resolved global index and its data checksums (``flat.index``; ``flat.json``
    names the index logs and metadata records, with sizes, it was built from and the CRC32C of
    ``flat.index``); later opens use it while those are unchanged."""
    from .reader import load_index

    # The logs' sizes before the index is built from them: a log that grows or a record added
    # meanwhile (a writer still open, closing) then makes this flattened index stale (ignored),
    # never wrong.
    sources = _sources(container)
    index, _ = load_index(container, "raise")
    data = encode_records(_flat_records(index))
    meta = {"version": 2, "sources": sources, "records": index.records, "checks": len(index.checks),
            "size": index.size, "crc32c": data_crc(data)}
    # Both files are written whole under other names first, and flat.json is removed before
    # flat.index is replaced and put back last: a flatten killed at any point leaves the old
    # pair, no flat.json (no flattened index), or the new pair, never a torn file that every
    # read and check would report as damage.
    fs, base = container.fs, container.path
    token = secrets.token_hex(6)
    partial = {name: f"{base}/.{name}.partial-{token}" for name in (FLAT_INDEX, FLAT_META)}
    fs.write_bytes(partial[FLAT_INDEX], data)
    fs.write_bytes(partial[FLAT_META], json.dumps(meta).encode())
    for name in (FLAT_META, FLAT_INDEX):
        try:
            fs.rm(f"{base}/{name}")  # (HDFS renames do not replace)
        except FileNotFoundError:
            pass
    fs.rename(partial[FLAT_INDEX], f"{base}/{FLAT_INDEX}")
    fs.rename(partial[FLAT_META], f"{base}/{FLAT_META}")
    return meta


def load_flat(container: Container) -> tuple[GlobalIndex | None, list[Damage]]:
    """The persisted flattened index if it is valid and current, else ``(None, damage)``:
    damage says why a present one was not used when it failed a check (a stale one, built
    before an index log grew, is not damage: it is ignored silently)."""
    fs = container.fs
    url = fs.url(f"{container.path}/{FLAT_INDEX}")
    try:
        meta = json.loads(fs.read_bytes(f"{container.path}/{FLAT_META}"))
        data = fs.read_bytes(f"{container.path}/{FLAT_INDEX}")
    except FileNotFoundError:
        return None, []
    except ValueError:
        return None, [Damage(url, -1, f"{FLAT_META} is not JSON")]
    if not isinstance(meta, dict) or meta.get("version") != 2 or meta.get("sources") != _sources(container):
        return None, []  # stale, or written by an older hpcbridge
    records, valid, torn = decode_records(data, 2)
    if data_crc(data) != meta.get("crc32c") or torn or not valid.all() \
            or len(records) != meta.get("records", -1) + meta.get("checks", -1):
        return None, [Damage(url, -1, f"flattened index fails its checksums ({FLAT_META} does not match it)")]
    is_check = (records["flags"] & FLAG_FLAT_CHECK) != 0
    runs = {k: records[~is_check][k].astype(np.uint64) for k in _RUN_FIELDS}
    mine = records[is_check]
    table = np.zeros(len(mine), CHECK)
    for name in ("logical", "length", "stride", "count", "writer"):
        table[name] = mine[name]
    table["start"], table["crc"] = mine["physical"], mine["data_crc"]
    table["end"] = mine["physical"] + mine["length"] * mine["count"].astype(np.uint64)
    return GlobalIndex(runs, int(meta["size"]), Checks(table)), []


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
    checksummed = int(((records["flags"] & FLAG_DATA_CRC) != 0).sum())
    return {
        "url": container.url,
        "format_version": container.version,
        "data_checks": "crc32c per index record" if container.version >= 2 else
        "none (format 1 containers have no data checksums)",
        "host_dirs": container.host_dirs,
        "volumes": len(container.volumes),
        "writers": len(logs),
        "index_records": int(len(records)),
        "checksummed_records": checksummed,
        "resolved_runs": index.records,
        "logical_size": index.size,
        "physical_bytes": physical,
        "open_writers": container.open_writers(),
        "metadata_records": len(container.metas()),
        "damaged_records": sum(1 for d in damage if d[3]),
    }


def _record_end(records: np.ndarray) -> np.ndarray:
    return records["physical"] + records["length"] * records["count"].astype(np.uint64)


def check(container: Container, deep: bool = False) -> dict:
    """Verify a container: index checksums and torn or missing records, data logs as long as
    their index says and no longer (unindexed bytes), unclosed writers, the flattened index;
    with ``deep``, the CRC32C of every record's data. ``problems`` lists what is wrong (empty:
    healthy); ``bad_ranges`` lists each data range that failed its checksum as (log, physical
    offset, length, logical start, logical end); ``notes`` what is worth knowing but not wrong."""
    # Logs, then open records, then metadata: a writer makes its open record before its logs
    # and its metadata record before it clears the open record, so every listed log's writer
    # is found in one or the other, unless that record was lost (:func:`_orphans`).
    logs = container.index_logs()
    open_writers = container.open_writers()
    open_ids = {int(w.get("writer", 0)) for w in open_writers}
    closed = container.closed_writers()
    records, damage = container.read_index_logs(logs, "skip", closed)
    problems = [d.text() for d in damage if d[3]]
    notes = [d.text() for d in damage if not d[3]]
    recovered = {w for w, summary in closed.items() if summary.get("recovered")}
    for writer, fs, path in _orphans(logs, open_ids, closed):
        problems.append(f"{fs.url(path)}: writer {writer:08x} has neither a metadata record nor an open record (its "
                        "metadata record is missing or damaged): its record count cannot be checked and the size "
                        "of the file is understated; `hpcbridge plfs recover` records what its log holds")
    for writer, _, _ in logs:
        mine = records[records["writer"] == writer]
        needed = int(_record_end(mine).max()) if len(mine) else 0
        fs, data = container.data_log(writer)
        try:
            have = fs.info(data).size
        except FileNotFoundError:
            have = -1
        if have < needed:
            problems.append(f"{fs.url(data)}: data log has {max(have, 0)} bytes, its index needs {needed}")
        elif have > needed:
            covered = int((mine["length"] * mine["count"].astype(np.uint64)).sum()) if len(mine) else 0
            text = (f"{fs.url(data)}: {have - needed} unindexed bytes at its end ({have} bytes, records cover "
                    f"{covered}): data no index record describes, never readable")
            if writer in open_ids:
                notes.append(text + " (the writer is open: it may still index them, or it crashed)")
            elif writer in recovered:
                notes.append(text + " (written after the dead writer's last flush: lost with it)")
            else:
                problems.append(text)
    for w in open_writers:
        problems.append(f"writer {w.get('writer', 0):08x} never closed (host {w.get('host', '?')}, "
                        f"pid {w.get('pid', '?')}): still writing, or it crashed; `hpcbridge plfs recover` "
                        "once it is gone")
    index = GlobalIndex.build(records)
    flat, flat_damage = load_flat(container)
    problems += [d.text() for d in flat_damage]
    if flat is not None and not _same_index(flat, index):
        problems.append(f"{container.fs.url(container.path + '/' + FLAT_INDEX)}: the flattened index disagrees "
                        "with the index logs (reads would use it): run `hpcbridge plfs flatten` again")
    elif flat is None and not flat_damage and container.fs.exists(f"{container.path}/{FLAT_INDEX}"):
        notes.append("flat.index is stale (index logs changed since it was built): reads ignore it")
    bad_ranges = _verify_data(container, records) if deep else []
    for log, physical, length, lo, hi in bad_ranges:
        problems.append(f"{log}: bytes {physical}..{physical + length} (logical {lo}..{hi}) fail their CRC32C")
    pieces = index.lookup(0, index.size)
    ends = pieces["logical"] + pieces["length"]
    gaps = pieces["logical"][1:] - ends[:-1]
    holes = int((gaps > 0).sum()) + (1 if len(pieces["logical"]) and pieces["logical"][0] > 0 else 0)
    hole_bytes = int(gaps[gaps > 0].sum()) + (int(pieces["logical"][0]) if len(pieces["logical"]) else 0)
    checked = int(((records["flags"] & FLAG_DATA_CRC) != 0).sum())
    return {"url": container.url, "format_version": container.version, "writers": len(logs),
            "logical_size": index.size, "holes": holes, "hole_bytes": hole_bytes, "deep": deep,
            "records_verified": checked if deep else 0, "bad_ranges": [list(b) for b in bad_ranges],
            "problems": problems, "notes": notes, "healthy": not problems}


def _orphans(logs, open_ids: set[int], closed: dict[int, dict]) -> list[tuple]:
    """The ``index_logs()`` entries of writers neither open nor in a metadata record (listed in
    that order: see :func:`check`): writers whose metadata record was lost or damaged."""
    return [log for log in logs if log[0] not in open_ids and log[0] not in closed]


def _same_index(a: GlobalIndex, b: GlobalIndex) -> bool:
    if a.size != b.size or a.records != b.records or len(a.checks) != len(b.checks):
        return False
    order_a, order_b = (np.lexsort((x.runs["logical"], x.runs["writer"])) for x in (a, b))
    same_runs = all(np.array_equal(a.runs[k][order_a], b.runs[k][order_b]) for k in _RUN_FIELDS)
    return same_runs and np.array_equal(a.checks.table, b.checks.table)


def _verify_data(container: Container, records: np.ndarray) -> list[tuple]:
    """Read every checksummed record's data and compare its CRC32C: the bad ones, as
    ``(data log URL, physical offset, length, logical start, logical end)``."""
    bad = []
    mine = records[(records["flags"] & FLAG_DATA_CRC) != 0]
    for writer in np.unique(mine["writer"]).tolist():
        rows = np.sort(mine[mine["writer"] == writer], order="physical")
        fs, path = container.data_log(writer)
        try:
            f = fs.open(path, "rb", buffering=0)
        except FileNotFoundError:
            continue  # reported above: the data log is shorter than its index
        with f:
            for row in rows:
                start, end = int(row["physical"]), int(_record_end(row[None])[0])
                buffer = bytearray(end - start)
                got = f.preadinto(buffer, start)
                if got != len(buffer) or data_crc(buffer) != int(row["data_crc"]):
                    last = int(row["logical"]) + int(row["stride"]) * (int(row["count"]) - 1) + int(row["length"])
                    bad.append((fs.url(path), start, end - start, int(row["logical"]), last))
    return bad


def recover(container: Container) -> list[int]:
    """Declare the container's unclosed writers dead and make what they flushed readable.

    On HDFS a crashed writer's logs stay "under construction" until lease recovery closes them
    (then their flushed length is final); elsewhere nothing needs closing. Each recovered
    writer gets a metadata record counting the index records it left whose data reached its
    data log, as a clean close would have written, so later checks hold it to them; its
    open-writer record is removed. Only for writers known to be gone. On HDFS recovery fences
    a live writer (its later writes fail); elsewhere one goes on writing, and the record of its
    own close, which counts everything it indexed, then holds over the recovered one.
    """
    recovered = []
    # Writers whose metadata record was lost (see check) are recovered too: their logs are all
    # that is left of them. Listed logs first, then open records, then metadata (see check).
    logs = container.index_logs()
    dead = container.open_writers()
    closed = container.closed_writers()
    dead += [{"writer": writer} for writer, _, _ in _orphans(logs, {int(r.get("writer", 0)) for r in dead}, closed)]
    for record in dead:
        writer = int(record.get("writer", 0))
        fs, hostdir = container.place(writer)
        for name in (f"data.{writer:08x}", f"index.{writer:08x}"):
            path = f"{hostdir}/{name}"
            if fs.exists(path):
                fs.recover_lease(path)
        summary = _recovered_summary(container, writer, record)
        container.write_meta(f"recovered.{writer:08x}", [summary])
        container.mark_closed(writer)
        recovered.append(writer)
    return recovered


def _recovered_summary(container: Container, writer: int, open_record: dict) -> dict:
    """The metadata of a dead writer, from what it left: its index records in order, up to the
    first that is damaged or describes bytes its data log does not hold."""
    fs, hostdir = container.place(writer)
    index_path = f"{hostdir}/index.{writer:08x}"
    data_fs, data_path = container.data_log(writer)
    try:
        raw = fs.read_bytes(index_path)
    except FileNotFoundError:
        raw = b""
    try:
        have = data_fs.info(data_path).size
    except FileNotFoundError:
        have = 0
    records, valid, _ = decode_records(raw, container.version)
    good = valid & (records["writer"] == writer) & (_record_end(records) <= np.uint64(have))
    count = int(np.argmin(good)) if not good.all() else len(records)
    kept = records[:count]
    ends = kept["logical"] + kept["stride"] * (kept["count"].astype(np.uint64) - 1) + kept["length"]
    last = kept["sequence"] + kept["count"].astype(np.uint64) - 1
    return {"writer": writer, "bytes": have, "max_end": int(ends.max()) if count else 0,
            "max_sequence": int(last.max()) if count else 0, "records": count,
            "recovered": True, "host": open_record.get("host"), "pid": open_record.get("pid"),
            "ignored_records": len(records) - count, "torn_bytes": len(raw) % record_size(container.version)}
