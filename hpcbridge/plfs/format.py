"""The on-storage format of PLFS containers, version 1 (specified in docs/plfs-format.md).

A logical file is a container directory::

    <container>/.plfscontainer          marker: JSON {"format": "hpcbridge-plfs", "version": 1, ...}
    <container>/hostdir.<k>/data.<w>    writer w's data log: its bytes, appended in write order
    <container>/hostdir.<k>/index.<w>   writer w's index log: fixed-size records (RECORD below)
    <container>/meta/<name>.json        metadata written at close (writers, logical size, sequence)
    <container>/openhosts/<w>           present while writer w is open

``w`` is the writer id as 8 hex digits; ``k = w % host_dirs`` (host_dirs ~ sqrt(writers), chosen
at creation). With several backing volumes, ``hostdir.<k>`` lives on volume ``k % volumes``.
"""

from __future__ import annotations

import json
import zlib

import numpy as np

__all__ = [
    "FORMAT", "VERSION", "MARKER", "RECORD", "RECORD_SIZE", "encode_records", "decode_records",
    "data_log_name", "index_log_name", "host_dir", "marker_json", "parse_marker",
]

FORMAT = "hpcbridge-plfs"
VERSION = 1
MARKER = ".plfscontainer"
META_DIR = "meta"
OPEN_DIR = "openhosts"

#: One index record, little-endian, 56 bytes. A record describes ``count`` pieces of ``length``
#: bytes: piece i covers logical bytes [logical + i*stride, ... + length), lives in the writer's
#: data log at physical + i*length, and has sequence number sequence + i (count 1: a plain extent).
#: ``crc`` is the CRC-32 of the record's first 48 bytes (every field before it, pad included as 0).
RECORD = np.dtype([
    ("logical", "<u8"),
    ("length", "<u8"),
    ("physical", "<u8"),
    ("sequence", "<u8"),
    ("stride", "<u8"),
    ("count", "<u4"),
    ("writer", "<u4"),
    ("crc", "<u4"),
    ("pad", "<u4"),
])
RECORD_SIZE = RECORD.itemsize
_CRC_SPAN = 48
assert RECORD_SIZE == 56


def _crc(raw: np.ndarray) -> np.ndarray:
    """CRC-32 of the first 48 bytes of each record (a Python loop over records: index logs are
    small, a few records per writer for regular patterns)."""
    as_bytes = raw.view(np.uint8).reshape(-1, RECORD_SIZE)[:, :_CRC_SPAN]
    return np.fromiter((zlib.crc32(row.tobytes()) for row in as_bytes), dtype=np.uint32, count=len(raw))


def encode_records(records: np.ndarray) -> bytes:
    """Fill in the checksums and return the records' bytes."""
    out = np.array(records, dtype=RECORD, copy=True)
    out["pad"] = 0
    out["crc"] = _crc(out)
    return out.tobytes()


def decode_records(data: bytes) -> tuple[np.ndarray, np.ndarray, int]:
    """Decode an index log: ``(records, valid_mask, torn_bytes)``.

    ``valid_mask`` marks records whose checksum matches (and whose fields are sane); a torn tail
    (a record cut short, e.g. by a crash mid-write) is not decoded and its size is returned.
    """
    whole = len(data) - len(data) % RECORD_SIZE
    records = np.frombuffer(data[:whole], dtype=RECORD)
    valid = (_crc(records) == records["crc"]) & (records["count"] >= 1) & (records["length"] >= 1)
    valid &= (records["count"] == 1) | (records["stride"] >= records["length"])
    return records, valid, len(data) - whole


def host_dir(writer: int, host_dirs: int) -> str:
    """Name of the host subdirectory of ``writer``."""
    return f"hostdir.{writer % host_dirs}"


def data_log_name(writer: int) -> str:
    """File name of a writer's data log."""
    return f"data.{writer:08x}"


def index_log_name(writer: int) -> str:
    """File name of a writer's index log."""
    return f"index.{writer:08x}"


def marker_json(host_dirs: int, volumes: int) -> bytes:
    """Content of a container's marker file."""
    return json.dumps({"format": FORMAT, "version": VERSION, "host_dirs": host_dirs,
                       "volumes": volumes}).encode()


def parse_marker(data: bytes, url: str) -> dict:
    """Validate a marker file; ValueError naming ``url`` if it is not a supported container."""
    try:
        marker = json.loads(data)
    except ValueError:
        raise ValueError(f"{url}: {MARKER} is not JSON: not an hpcbridge PLFS container") from None
    if marker.get("format") != FORMAT:
        raise ValueError(f"{url}: not an hpcbridge PLFS container (format {marker.get('format')!r})")
    if marker.get("version") != VERSION:
        raise ValueError(f"{url}: PLFS container format version {marker.get('version')} is not supported "
                         f"(this hpcbridge reads version {VERSION})")
    return marker
