"""Collective-I/O hints: the ROMIO names, validated once at open.

MPI implementations silently ignore hints they do not know, so a misspelt ``cb_node`` leaves a
job running with defaults nobody asked for. hpcbridge refuses instead: an unknown or malformed
hint is a ``ValueError`` that lists the valid ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Mapping

__all__ = ["Hints", "parse_hints", "parse_size", "parse_config_list"]

_MODES = ("auto", "enable", "disable")
# ROMIO spells "auto" as "automatic"; accept both so hint files written for ROMIO work here.
_MODE_SYNONYMS = {"automatic": "auto", "true": "enable", "false": "disable"}
_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
#: Alltoallv counts and displacements are C ints (MPI-3): one round must stay below 2 GiB so
#: no count overflows whatever the buffer (the failure of mpich issue #1742).
MAX_CB_BUFFER_SIZE = 1 << 30


def parse_size(value, name: str) -> int:
    """A byte count from an int or a string such as ``"16777216"``, ``"16m"``, ``"4MiB"``."""
    if isinstance(value, bool):
        raise ValueError(f"hint {name}: expected a byte count, got {value!r}")
    if isinstance(value, int):
        number = value
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise ValueError(f"hint {name}: expected a byte count such as 16777216 or 16m, got {value!r}")
        number = int(match.group(1)) * _UNITS[(match.group(2) or "")[:1].lower()]
    if number <= 0:
        raise ValueError(f"hint {name}: must be positive, got {value!r}")
    return number


def _parse_mode(value, name: str) -> str:
    text = str(value).strip().lower()
    text = _MODE_SYNONYMS.get(text, text)
    if text not in _MODES:
        raise ValueError(f"hint {name}: expected one of {', '.join(_MODES)}, got {value!r}")
    return text


def parse_config_list(value) -> tuple[tuple[str, int], ...]:
    """ROMIO's ``cb_config_list``: ``"host:n,*:m"`` -> ``(("host", n), ("*", m))``.

    ``n`` is the most aggregators placed on that host; ``*`` matches every other host; a bare
    name means one aggregator; ``*:*`` means every process of the host.
    """
    entries = []
    for item in str(value).split(","):
        item = item.strip()
        if not item:
            raise ValueError(f"hint cb_config_list: empty entry in {value!r}")
        host, _, count = item.partition(":")
        if not host:
            raise ValueError(f"hint cb_config_list: entry {item!r} has no host name")
        if not count:
            number = 1
        elif count == "*":
            number = -1  # every process on the host
        elif count.isdigit() and int(count) > 0:
            number = int(count)
        else:
            raise ValueError(f"hint cb_config_list: entry {item!r}: count must be a positive integer or *")
        entries.append((host, number))
    return tuple(entries)


@dataclass(frozen=True)
class Hints:
    """The collective-buffering hints of an open file (ROMIO names, same meaning).

    Attributes
    ----------
    cb_buffer_size:
        Bytes each aggregator exchanges and writes per round (default 16 MiB, at most 1 GiB).
    cb_nodes:
        Number of aggregators (default: see :func:`hpcbridge.mpi.aggregators.choose_aggregators`).
    cb_config_list:
        Where aggregators go, ROMIO syntax ``"host:n,*:m"`` (default ``"*:1"`` widened on wide nodes).
    striping_unit:
        Alignment of the file domains in bytes (default: the backend's stripe or block size).
    cb_write, cb_read:
        ``auto`` (aggregate unless every rank's access is already large and contiguous),
        ``enable`` or ``disable``.
    romio_ds_write, romio_ds_read:
        Data sieving inside a file domain: ``auto`` (read-modify-write / read-through holes where
        the backend supports it and the holes are small), ``enable`` or ``disable``.
    direct_write:
        ``true``: write the block-aligned middle of every large write with ``O_DIRECT`` (POSIX
        mounts), straight from the aggregator's buffer to storage, bypassing the page cache. For
        checkpoints that are synced anyway; ROMIO's XFS hint of the same name.
    cb_write_behind:
        ``true``: collective writes are copied into a per-rank stage and return at once; the
        ranks write the staged data together, in large aggregated rounds, once any rank has
        staged about 4 × ``cb_buffer_size`` bytes, and at ``sync``, ``close`` and collective
        reads (see :mod:`hpcbridge.mpi.behind`). For many small collective calls, such as a
        checkpoint written one object per ``write_at_all``. Like ROMIO's E10 cache hints.
    """

    cb_buffer_size: int = 16 << 20
    cb_nodes: int | None = None
    cb_config_list: tuple[tuple[str, int], ...] | None = None
    striping_unit: int | None = None
    cb_write: str = "auto"
    cb_read: str = "auto"
    romio_ds_write: str = "auto"
    romio_ds_read: str = "auto"
    direct_write: bool = False
    cb_write_behind: bool = False

    @classmethod
    def names(cls) -> list[str]:
        """The valid hint names."""
        return [f.name for f in fields(cls)]

    def as_dict(self) -> dict[str, str]:
        """The effective hints as MPI_Info-style strings (unset ones omitted)."""
        out = {}
        for name in self.names():
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool):
                value = str(value).lower()
            elif name == "cb_config_list":
                value = ",".join(f"{h}:{'*' if n < 0 else n}" for h, n in value)
            out[name] = str(value)
        return out


_PARSERS = {
    "cb_buffer_size": parse_size,
    "cb_nodes": lambda v, n: _positive_int(v, n),
    "cb_config_list": lambda v, n: parse_config_list(v),
    "striping_unit": parse_size,
    "cb_write": _parse_mode,
    "cb_read": _parse_mode,
    "romio_ds_write": _parse_mode,
    "romio_ds_read": _parse_mode,
    "direct_write": lambda v, n: _parse_bool(v, n),
    "cb_write_behind": lambda v, n: _parse_bool(v, n),
}


#: File hints the MPI standard reserves (MPI-4.0 section 14.2.8) that mean nothing here:
#: accepted and ignored, as portable programs pass them (Lustre codes set striping_factor).
IGNORED = frozenset({"access_style", "collective_buffering", "cb_block_size", "chunked", "chunked_item",
                     "chunked_size", "filename", "file_perm", "io_node_list", "nb_proc", "num_io_nodes",
                     "striping_factor"})
#: ROMIO's names of hints hpcbridge calls otherwise.
ALIASES = {"romio_cb_write": "cb_write", "romio_cb_read": "cb_read"}


def _parse_bool(value, name: str) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "enable", "1", "yes"):
        return True
    if text in ("false", "disable", "0", "no"):
        return False
    raise ValueError(f"hint {name}: expected true or false, got {value!r}")


def _positive_int(value, name: str) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"hint {name}: expected a positive integer, got {value!r}") from None
    if number <= 0 or isinstance(value, bool):
        raise ValueError(f"hint {name}: expected a positive integer, got {value!r}")
    return number


def parse_hints(hints: Mapping | "Hints" | None) -> Hints:
    """Validate ``hints`` (a mapping, an ``MPI.Info``, a :class:`Hints` or None).

    Raises
    ------
    ValueError
        For an unknown hint name (the message lists the valid ones) or a malformed value. The
        names the MPI standard reserves are accepted (:data:`IGNORED` ones ignored), ROMIO's
        ``romio_cb_write``/``romio_cb_read`` too (:data:`ALIASES`).
    """
    if hints is None:
        return Hints()
    if isinstance(hints, Hints):
        return hints
    if hasattr(hints, "Get_nkeys") and hasattr(hints, "items"):  # mpi4py MPI.Info
        hints = dict(hints.items())
    if not isinstance(hints, Mapping):
        raise TypeError(f"hints must be a mapping of hint name to value, got {type(hints).__name__}")
    hints = {ALIASES.get(name, name): value for name, value in hints.items() if name not in IGNORED}
    unknown = sorted(set(hints) - set(_PARSERS))
    if unknown:
        raise ValueError(f"unknown hint{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                         f"valid hints: {', '.join(Hints.names())}")
    values = {name: _PARSERS[name](value, name) for name, value in hints.items()}
    if values.get("cb_buffer_size", 0) > MAX_CB_BUFFER_SIZE:
        raise ValueError(f"hint cb_buffer_size: at most {MAX_CB_BUFFER_SIZE} bytes (1 GiB) per round, "
                         f"got {values['cb_buffer_size']}")
    return Hints(**values)
