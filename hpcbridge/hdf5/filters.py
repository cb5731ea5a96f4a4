"""Decode HDF5 filter pipelines with numpy and zlib: deflate (gzip), shuffle, Fletcher-32.

A chunk is filtered on write in pipeline order; :func:`decode` undoes the filters in reverse
order, skipping those whose bit is set in the chunk's filter mask. Any other filter (szip, LZF,
scale-offset, n-bit, plugins) raises :class:`~hpcbridge.hdf5.errors.UnsupportedFilterError`
naming it, at planning time (:func:`check_pipeline`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from .errors import ChecksumError, UnsupportedFilterError

__all__ = ["Filter", "check_pipeline", "decode", "fletcher32", "DEFLATE", "SHUFFLE", "FLETCHER32", "SUPPORTED"]

DEFLATE, SHUFFLE, FLETCHER32 = 1, 2, 3
#: Filters this module decodes.
SUPPORTED = {DEFLATE: "deflate (gzip)", SHUFFLE: "shuffle", FLETCHER32: "fletcher32"}
#: Names of well-known filters hpcbridge does not decode (for error messages).
KNOWN = {4: "szip", 5: "nbit", 6: "scaleoffset", 32000: "lzf", 32001: "blosc", 32004: "lz4", 32008: "bitshuffle",
         32013: "zfp", 32015: "zstd"}


@dataclass(frozen=True)
class Filter:
    """One filter of a pipeline: id, flags, client data values and the name stored in the file."""

    id: int
    flags: int = 0
    values: tuple[int, ...] = ()
    name: str = ""

    @property
    def label(self) -> str:
        """A human-readable name (``"lzf (id 32000)"``)."""
        name = SUPPORTED.get(self.id) or KNOWN.get(self.id) or self.name or "unknown"
        return f"{name} (id {self.id})"


def check_pipeline(filters, url: str, dataset: str) -> None:
    """Raise :class:`UnsupportedFilterError` naming the first filter :func:`decode` cannot undo."""
    for f in filters:
        if f.id not in SUPPORTED:
            raise UnsupportedFilterError(
                f"dataset {dataset!r} of {url} uses the {f.label} filter, which hpcbridge cannot decode "
                f"(supported: {', '.join(SUPPORTED.values())}); read it with h5py and the filter's plugin")


def fletcher32(data) -> int:
    """HDF5's Fletcher-32 checksum (H5_checksum_fletcher32) of ``data``, vectorised.

    Big-endian 16-bit words (an odd last byte is the high byte of a last word); the sums are
    taken modulo 65535 in ones'-complement form, so a non-zero sum that is a multiple of 65535 is
    0xffff.
    """
    raw = np.frombuffer(data, dtype=np.uint8)
    if len(raw) % 2:
        raw = np.concatenate([raw, np.zeros(1, np.uint8)])
    words = raw.view(">u2").astype(np.int64)
    n = len(words)
    if n == 0:
        return 0
    s1 = int(words.sum()) % 65535
    weights = (n - np.arange(n, dtype=np.int64)) % 65535
    s2 = int((words * weights % 65535).sum()) % 65535
    if s1 == 0 and words.any():
        s1 = 65535
    if s2 == 0 and words.any():
        s2 = 65535
    return (s2 << 16) | s1


def _unshuffle(data: bytes, size: int) -> bytes:
    if size <= 1:
        return data
    n = len(data) // size
    raw = np.frombuffer(data, dtype=np.uint8)
    out = raw[:n * size].reshape(size, n).T.tobytes()
    return out + bytes(raw[n * size:]) if len(data) % size else out


def decode(data, filters, mask: int, url: str, dataset: str, address: int) -> bytes:
    """Undo ``filters`` on one stored chunk (``mask``: the chunk's filter mask)."""
    for i in range(len(filters) - 1, -1, -1):
        if mask >> i & 1:
            continue
        f = filters[i]
        if f.id == DEFLATE:
            try:
                data = zlib.decompress(data)
            except zlib.error as exc:
                raise ChecksumError(f"chunk at {address} of dataset {dataset!r} in {url} does not inflate: {exc}") \
                    from None
        elif f.id == SHUFFLE:
            data = _unshuffle(bytes(data), f.values[0] if f.values else 1)
        elif f.id == FLETCHER32:
            body, stored = memoryview(data)[:-4], int.from_bytes(bytes(data[-4:]), "little")
            computed = fletcher32(body)
            # HDF5 also accepts its old byte order: the bytes of each 16-bit half swapped.
            swapped = ((computed & 0xFF00FF00) >> 8) | ((computed & 0x00FF00FF) << 8)
            if stored not in (computed, swapped):
                raise ChecksumError(f"Fletcher-32 checksum mismatch in the chunk at {address} of dataset "
                                    f"{dataset!r} in {url} (stored {stored:#010x}, computed {computed:#010x})")
            data = body
        else:
            check_pipeline([f], url, dataset)
    return data
