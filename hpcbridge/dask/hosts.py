"""Host identity: which Dask worker host reads which storage host's bytes locally.

A storage host matches a worker host when the names are equal, resolve to the same address,
or the storage host is this machine (``socket.gethostname()``, as local POSIX files report it)
and the worker runs on this machine (a loopback or local address).
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import socket

__all__ = ["host_of_address", "host_matches", "placement_blocks"]


def host_of_address(address: str) -> str:
    """The host part of a Dask address (``tcp://127.0.0.2:40123`` -> ``127.0.0.2``,
    ``inproc://10.0.0.5/4630/4`` -> ``10.0.0.5``)."""
    rest = address.split("://", 1)[-1].split("/", 1)[0]
    if rest.startswith("["):
        return rest[1:rest.index("]")]
    return rest.rsplit(":", 1)[0] if ":" in rest else rest


@functools.lru_cache(maxsize=1024)
def _addresses(host: str) -> frozenset[str]:
    try:
        ipaddress.ip_address(host)
        return frozenset({host})
    except ValueError:
        pass
    try:
        return frozenset(socket.gethostbyname_ex(host)[2]) | {host}
    except OSError:
        return frozenset({host})


@functools.lru_cache(maxsize=1)
def _this_machine() -> tuple[frozenset[str], frozenset[str]]:
    names = {socket.gethostname(), socket.getfqdn(), "localhost"}
    addresses: set[str] = set()
    for name in names:
        addresses |= _addresses(name) - {name}
    # The name may resolve to loopback only while workers listen on an interface's address.
    addresses |= _interface_addresses()
    return frozenset(names), frozenset(addresses)


def _interface_addresses() -> set[str]:
    """The addresses of this machine's network interfaces (psutil, which ``distributed`` needs)."""
    try:
        import psutil
    except ImportError:
        return set()
    return {a.address.split("%", 1)[0] for entries in psutil.net_if_addrs().values() for a in entries
            if a.family in (socket.AF_INET, socket.AF_INET6)}


def _is_local_address(host: str) -> bool:
    names, addresses = _this_machine()
    if host in names or host in addresses:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return bool(_addresses(host) & addresses)


def host_matches(data_host: str, worker_host: str) -> bool:
    """Whether a worker on ``worker_host`` reads bytes stored on ``data_host`` locally."""
    if not data_host or not worker_host:
        return False
    if data_host == worker_host:
        return True
    names, _ = _this_machine()
    if data_host in names:  # local files report this machine's name: any worker here reads them locally
        return _is_local_address(worker_host)
    return bool(_addresses(data_host) & _addresses(worker_host))


def placement_blocks(fs, path: str, start: int = 0, length: int | None = None) -> list:
    """``fs.block_locations`` for planning: where the store does not report real placement
    (``capabilities.block_locations`` false, e.g. memory), the hosts are dropped, so no task
    is steered by a guess."""
    blocks = fs.block_locations(path, start, length)
    if fs.capabilities.block_locations:
        return blocks
    return [dataclasses.replace(b, hosts=(), racks=()) for b in blocks]
