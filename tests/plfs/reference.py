"""An independent reader and writer of PLFS containers on a POSIX directory, written from
docs/plfs-format.md with the standard library only (struct, zlib, json; no numpy, no hpcbridge):
the backdoor of the conformance suite, and a cross-check of the format specification."""

import json
import os
import struct
import zlib

RECORD = struct.Struct("<QQQQQIIII")  # logical length physical sequence stride count writer crc pad


def read_logical(container: str) -> bytes:
    """Paint every piece in (sequence, writer) order; holes stay zero."""
    marker = json.load(open(os.path.join(container, ".plfscontainer")))
    assert marker["format"] == "hpcbridge-plfs" and marker["version"] == 1
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
            for at in range(0, len(raw) - len(raw) % RECORD.size, RECORD.size):
                chunk = raw[at:at + RECORD.size]
                logical, length, physical, sequence, stride, count, w, crc, _ = RECORD.unpack(chunk)
                assert zlib.crc32(chunk[:48]) == crc and w == writer
                for i in range(count):
                    p = physical + i * length
                    pieces.append((sequence + i, writer, logical + i * stride, data[p:p + length]))
    size = max((lg + len(d) for _, _, lg, d in pieces), default=0)
    out = bytearray(size)
    for _, _, logical, payload in sorted(pieces, key=lambda x: (x[0], x[1])):
        out[logical:logical + len(payload)] = payload
    return bytes(out)


def write_logical(container: str, data: bytes, writer: int = 7) -> None:
    """Create a container holding ``data`` from one writer with one record."""
    os.makedirs(os.path.join(container, "hostdir.0"), exist_ok=True)
    os.makedirs(os.path.join(container, "meta"), exist_ok=True)
    os.makedirs(os.path.join(container, "openhosts"), exist_ok=True)
    with open(os.path.join(container, ".plfscontainer"), "w") as f:
        json.dump({"format": "hpcbridge-plfs", "version": 1, "host_dirs": 1, "volumes": 1}, f)
    with open(os.path.join(container, "hostdir.0", f"data.{writer:08x}"), "wb") as f:
        f.write(data)
    record = b""
    if data:
        head = RECORD.pack(0, len(data), 0, 1, 0, 1, writer, 0, 0)[:48]
        record = head + struct.pack("<II", zlib.crc32(head), 0)
    with open(os.path.join(container, "hostdir.0", f"index.{writer:08x}"), "wb") as f:
        f.write(record)
    meta = {"writers": [{"writer": writer, "bytes": len(data), "max_end": len(data), "max_sequence": 1,
                         "records": 1}], "closed": 0, "size": len(data), "max_sequence": 1}
    with open(os.path.join(container, "meta", f"w.{writer:08x}.json"), "w") as f:
        json.dump(meta, f)
