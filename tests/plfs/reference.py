"""An independent reader and writer of PLFS containers on a POSIX directory, written from
docs/plfs-format.md with the standard library only (struct, zlib, json; no numpy, no hpcbridge,
and its own CRC32C): the backdoor of the conformance suite, and a cross-check of the format
specification."""

import json
import os
import struct
import zlib

RECORD_V1 = struct.Struct("<QQQQQIIII")  # logical length physical sequence stride count writer crc pad
RECORD_V2 = struct.Struct("<QQQQQIIIIII")  # ... count writer flags data_crc reserved crc
FLAG_DATA_CRC = 1


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1  # Castagnoli, reflected
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC32C (iSCSI, RFC 3720), one byte at a time: slow, and shares no code with hpcbridge."""
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


class CorruptData(Exception):
    """A record whose data does not match its CRC32C."""


def _records(raw: bytes, version: int):
    """Whole, valid records of an index log as tuples (logical, length, physical, sequence,
    stride, count, writer, flags, data_crc)."""
    size = RECORD_V2.size if version >= 2 else RECORD_V1.size
    for at in range(0, len(raw) - len(raw) % size, size):
        chunk = raw[at:at + size]
        if version >= 2:
            logical, length, physical, sequence, stride, count, w, flags, dcrc, _, crc = RECORD_V2.unpack(chunk)
            assert crc32c(chunk[:60]) == crc
        else:
            logical, length, physical, sequence, stride, count, w, crc, _ = RECORD_V1.unpack(chunk)
            assert zlib.crc32(chunk[:48]) == crc
            flags = dcrc = 0
        yield logical, length, physical, sequence, stride, count, w, flags, dcrc


def read_logical(container: str, verify_data: bool = True) -> bytes:
    """Paint every piece in (sequence, writer) order; holes stay zero. With ``verify_data``,
    every record's data is checked against its CRC32C first (CorruptData if it fails)."""
    marker = json.load(open(os.path.join(container, ".plfscontainer")))
    assert marker["format"] == "hpcbridge-plfs" and marker["version"] in (1, 2)
    assert marker["volumes"] == 1, "the reference reads single-volume containers"
    pieces = []
    for hostdir in os.listdir(container):
        if not hostdir.startswith("hostdir."):
            continue
        for name in os.listdir(os.path.join(container, hostdir)):
            if not name.startswith("index."):
                continue
            writer = int(name[6:], 16)
            with open(os.path.join(container, hostdir, f"data.{writer:08x}"), "rb") as f:
                data = f.read()
            raw = open(os.path.join(container, hostdir, name), "rb").read()
            for logical, length, physical, sequence, stride, count, w, flags, dcrc in _records(raw, marker["version"]):
                assert w == writer
                if verify_data and flags & FLAG_DATA_CRC:
                    if crc32c(data[physical:physical + count * length]) != dcrc:
                        raise CorruptData(f"{name}: bytes {physical}..{physical + count * length}")
                for i in range(count):
                    p = physical + i * length
                    pieces.append((sequence + i, writer, logical + i * stride, data[p:p + length]))
    size = max((lg + len(d) for _, _, lg, d in pieces), default=0)
    out = bytearray(size)
    for _, _, logical, payload in sorted(pieces, key=lambda x: (x[0], x[1])):
        out[logical:logical + len(payload)] = payload
    return bytes(out)


def write_logical(container: str, data: bytes, writer: int = 7, version: int = 2) -> None:
    """Create a container of format ``version`` holding ``data`` from one writer, one record."""
    os.makedirs(os.path.join(container, "hostdir.0"), exist_ok=True)
    os.makedirs(os.path.join(container, "meta"), exist_ok=True)
    os.makedirs(os.path.join(container, "openhosts"), exist_ok=True)
    with open(os.path.join(container, ".plfscontainer"), "w") as f:
        marker = {"format": "hpcbridge-plfs", "version": version, "host_dirs": 1, "volumes": 1}
        if version >= 2:
            marker.update({"volume_urls": [f"file://{container}"], "id": "reference", "checksum": "crc32c"})
        json.dump(marker, f)
    with open(os.path.join(container, "hostdir.0", f"data.{writer:08x}"), "wb") as f:
        f.write(data)
    record = b""
    if data and version >= 2:
        head = RECORD_V2.pack(0, len(data), 0, 1, 0, 1, writer, FLAG_DATA_CRC, crc32c(data), 0, 0)[:60]
        record = head + struct.pack("<I", crc32c(head))
    elif data:
        head = RECORD_V1.pack(0, len(data), 0, 1, 0, 1, writer, 0, 0)[:48]
        record = head + struct.pack("<II", zlib.crc32(head), 0)
    with open(os.path.join(container, "hostdir.0", f"index.{writer:08x}"), "wb") as f:
        f.write(record)
    meta = {"writers": [{"writer": writer, "bytes": len(data), "max_end": len(data), "max_sequence": 1,
                         "records": 1 if data else 0}], "closed": 0, "size": len(data), "max_sequence": 1}
    with open(os.path.join(container, "meta", f"w.{writer:08x}.json"), "w") as f:
        json.dump(meta, f)
