"""The on-storage format of PLFS containers, version 2 (specified in docs/plfs-format.md).

A logical file is a container directory::

    <container>/.plfscontainer          marker: JSON {"format": "hpcbridge-plfs", "version": 2, ...}
    <container>/hostdir.<k>/data.<w>    writer w's data log: its bytes, appended in write order
    <container>/hostdir.<k>/index.<w>   writer w's index log: fixed-size records (RECORD below)
    <container>/meta/<name>.json        metadata written at close (writers, logical size, sequence)
    <container>/openhosts/<w>           present while writer w is open
    <volume k>/.plfsvolume              on every other volume: which container, which volume

``w`` is the writer id as 8 hex digits; ``k = w % host_dirs`` (host_dirs ~ sqrt(writers), chosen
at creation). With several backing volumes, ``hostdir.<k>`` lives on volume ``k % volumes``.

Version 2 adds a CRC32C of the data every index record describes; version 1 containers (56-byte
records without data checksums) stay readable and are decoded into the same in-memory records.
"""

from __future__ import annotations

import json
import zlib

import numpy as np
from fastcrc.crc32 import iscsi as _crc32c

__all__ = [
    "FORMAT", "VERSION", "MARKER", "VOLUME_MARKER", "RECORD", "RECORD_SIZE", "RECORD_V1", "FLAG_DATA_CRC",
    "encode_records", "decode_records", "record_size", "data_crc", "data_crcs", "data_log_name", "index_log_name",
    "host_dir", "merged_name", "merged_generation", "MERGED_PREFIX", "marker_json", "volume_marker_json", "parse_marker",
    "MAX_RECORD_SPAN",
]

FORMAT = "hpcbridge-plfs"
#: The version new containers are created with; readers accept 1 and 2.
VERSION = 2
SUPPORTED_VERSIONS = (1, 2)
MARKER = ".plfscontainer"
VOLUME_MARKER = ".plfsvolume"
#: Present in a multi-volume container's canonical directory until every volume is ready.
CREATING = ".plfscreating"
META_DIR = "meta"
OPEN_DIR = "openhosts"
#: Merged metadata records are ``meta/merged.<generation, 8 digits>.json``, generations 1, 2, ...
MERGED_PREFIX = "merged."

#: One version-2 index record, little-endian, 64 bytes. A record describes ``count`` pieces of
#: ``length`` bytes: piece i covers logical bytes [logical + i*stride, ... + length), lives in the
#: writer's data log at physical + i*length, and has sequence number sequence + i (count 1: a
#: plain extent). ``data_crc`` is the CRC32C of the data-log bytes [physical, physical +
#: count*length) when ``flags`` has FLAG_DATA_CRC; ``crc`` is the CRC32C of the record's first
#: 60 bytes (every field before it, ``reserved`` included as 0).
RECORD = np.dtype([
    ("logical", "<u8"),
    ("length", "<u8"),
    ("physical", "<u8"),
    ("sequence", "<u8"),
    ("stride", "<u8"),
    ("count", "<u4"),
    ("writer", "<u4"),
    ("flags", "<u4"),
    ("data_crc", "<u4"),
    ("reserved", "<u4"),
    ("crc", "<u4"),
])
RECORD_SIZE = RECORD.itemsize
assert RECORD_SIZE == 64
_CRC_SPAN = 60

#: ``flags`` bit: ``data_crc`` holds the CRC32C of the record's data.
FLAG_DATA_CRC = 1

#: Version-1 records (56 bytes, CRC-32 of the first 48 bytes, no data checksum).
RECORD_V1 = np.dtype([
    ("logical", "<u8"), ("length", "<u8"), ("physical", "<u8"), ("sequence", "<u8"), ("stride", "<u8"),
    ("count", "<u4"), ("writer", "<u4"), ("crc", "<u4"), ("pad", "<u4"),
])
_V1_CRC_SPAN = 48

#: A writer starts a new record once one would describe more data-log bytes than this, so a
#: checksum covers a bounded range: a read that wants it verified need not fetch more.
MAX_RECORD_SPAN = 8 << 20


def record_size(version: int) -> int:
    """Bytes per index record in a container of format ``version``."""
    return RECORD_SIZE if version >= 2 else RECORD_V1.itemsize


#: ``data_crc(data, value=0)``: CRC32C (iSCSI, RFC 3720) of ``data`` (any buffer) continuing
#: from ``value``. fastcrc folds with carry-less multiplication (VPCLMULQDQ where the CPU has
#: it): 45 GB/s on 47001-byte pieces here, against 20 GB/s for the crc32c package's CRC32
#: instruction loop. It is the C function itself, with no Python frame around it: a reader
#: calls it for every object it reads back, and the frame cost 0.1 of the 7 us such a read takes.
data_crc = _crc32c


def data_crcs(buffers) -> list[int]:
    """:func:`data_crc` of each of ``buffers``, by one C call each and no Python frame between
    them (a whole-file read sums thousands of records)."""
    return list(map(_crc32c, buffers))


def _record_crcs(raw: np.ndarray, span: int, function) -> np.ndarray:
    """Checksum of the first ``span`` bytes of each record. One call per record: index logs
    hold few records (a regular pattern is one record per writer and flush)."""
    rows = raw.view(np.uint8).reshape(len(raw), raw.dtype.itemsize)[:, :span]
    return np.fromiter((function(row.tobytes()) for row in rows), dtype=np.uint32, count=len(raw))


def encode_records(records: np.ndarray, version: int = VERSION) -> bytes:
    """The bytes of ``records`` (version-2 records in memory) in an index log of format
    ``version``, record checksums filled in (version 1 drops the data checksums)."""
    if version < 2:
        old = np.zeros(len(records), dtype=RECORD_V1)
        for name in ("logical", "length", "physical", "sequence", "stride", "count", "writer"):
            old[name] = records[name]
        old["crc"] = _record_crcs(old, _V1_CRC_SPAN, zlib.crc32)
        return old.tobytes()
    out = np.array(records, dtype=RECORD, copy=True)
    out["reserved"] = 0
    out["crc"] = _record_crcs(out, _CRC_SPAN, _crc32c)
    return out.tobytes()


def decode_records(data: bytes, version: int = VERSION) -> tuple[np.ndarray, np.ndarray, int]:
    """Decode an index log of format ``version``: ``(records, valid_mask, torn_bytes)``.

    ``records`` are version-2 records whatever the log's version (version-1 records get
    ``flags = 0``: no data checksum). ``valid_mask`` marks records whose checksum matches and
    whose fields are sane; a torn tail (a record cut short, e.g. by a crash mid-write) is not
    decoded and its size is returned.
    """
    size = record_size(version)
    whole = len(data) - len(data) % size
    if version >= 2:
        records = np.frombuffer(data[:whole], dtype=RECORD)
        valid = _record_crcs(records, _CRC_SPAN, _crc32c) == records["crc"]
    else:
        old = np.frombuffer(data[:whole], dtype=RECORD_V1)
        valid = _record_crcs(old, _V1_CRC_SPAN, zlib.crc32) == old["crc"]
        records = np.zeros(len(old), dtype=RECORD)
        for name in ("logical", "length", "physical", "sequence", "stride", "count", "writer", "crc"):
            records[name] = old[name]
    valid = valid & (records["count"] >= 1) & (records["length"] >= 1)
    valid &= (records["count"] == 1) | (records["stride"] >= records["length"])
    return records, valid & _addressable(records), len(data) - whole


def _addressable(records: np.ndarray) -> np.ndarray:
    """Whether every byte a record maps, logical and physical, lies below 2**63 - 1 (the bound of
    offset + length on every backend), computed without overflowing uint64."""
    limit = np.uint64(2**63 - 1)
    logical, length, physical, stride = (records[k] for k in ("logical", "length", "physical", "stride"))
    steps = records["count"].astype(np.uint64) - np.uint64(1)  # count >= 1 where it matters
    ok = (logical <= limit) & (physical <= limit) & (length >= 1) & (length <= limit) & (stride <= limit)
    with np.errstate(over="ignore", under="ignore"):
        count = steps + np.uint64(1)
        span_ok = ok & (length <= limit // np.maximum(count, np.uint64(1)))
        span = np.where(span_ok, length * count, limit)
        stride_ok = (steps == 0) | (stride <= (limit - np.minimum(logical, limit)) // np.maximum(steps, np.uint64(1)))
        last = np.where(ok & stride_ok, logical + stride * steps, limit)
        end_ok = length <= limit - last
        physical_ok = span <= limit - physical
    return span_ok & stride_ok & end_ok & physical_ok


def host_dir(writer: int, host_dirs: int) -> str:
    """Name of the host subdirectory of ``writer``."""
    return f"hostdir.{writer % host_dirs}"


def merged_name(generation: int) -> str:
    """File name of the merged metadata record of ``generation`` (1, 2, ...)."""
    return f"{MERGED_PREFIX}{generation:08d}.json"


def merged_generation(name: str) -> int | None:
    """The generation of a merged metadata record's file name (None: another record)."""
    if not (name.startswith(MERGED_PREFIX) and name.endswith(".json")):
        return None
    digits = name[len(MERGED_PREFIX):-len(".json")]
    return int(digits) if digits.isdigit() else None


def data_log_name(writer: int) -> str:
    """File name of a writer's data log."""
    return f"data.{writer:08x}"


def index_log_name(writer: int) -> str:
    """File name of a writer's index log."""
    return f"index.{writer:08x}"


def marker_json(host_dirs: int, volumes: list[str], container_id: str) -> bytes:
    """Content of a new container's marker file (``volumes``: the URL of every volume's
    directory, canonical first)."""
    return json.dumps({"format": FORMAT, "version": VERSION, "host_dirs": host_dirs, "volumes": len(volumes),
                       "volume_urls": volumes, "id": container_id, "checksum": "crc32c"}).encode()


def volume_marker_json(container_id: str, volume: int, canonical_url: str) -> bytes:
    """Content of the ``.plfsvolume`` file of a container's non-canonical volume ``volume``."""
    return json.dumps({"format": FORMAT, "id": container_id, "volume": volume, "canonical": canonical_url}).encode()


def parse_marker(data: bytes, url: str) -> dict:
    """Validate a marker file; ValueError naming ``url`` if it is not a supported container."""
    try:
        marker = json.loads(data)
    except ValueError:
        raise ValueError(f"{url}: {MARKER} is not JSON: not an hpcbridge PLFS container") from None
    if not isinstance(marker, dict) or marker.get("format") != FORMAT:
        found = marker.get("format") if isinstance(marker, dict) else marker
        raise ValueError(f"{url}: not an hpcbridge PLFS container (format {found!r})")
    if marker.get("version") not in SUPPORTED_VERSIONS:
        raise ValueError(f"{url}: PLFS container format version {marker.get('version')} is not supported "
                         f"(this hpcbridge reads versions {', '.join(map(str, SUPPORTED_VERSIONS))})")
    return marker
