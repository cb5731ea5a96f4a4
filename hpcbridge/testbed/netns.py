"""Emulated hosts on one machine: a network namespace per host, joined by a bridge, with shaped links.

The loopback testbed gives every DataNode its own address, so locality is visible in bytes, but a
"remote" read crosses no network and costs no more than a local one. Here every host (a DataNode
and its Dask worker) runs in its own network namespace with one address on a private subnet; the
hosts reach each other, and the machine's own shell reaches them, only through a bridge, and each
host's link to the bridge is rate-limited by a ``tbf`` qdisc in both directions. A worker reading
from its own host's DataNode stays inside the namespace (not shaped); every other transfer
crosses two shaped links, as on a cluster with one NIC per node.

Layout of a network tagged ``T`` (names fit the kernel's 15-character interface names)::

    bridge  hpcbT-br   10.213.N.1/24            (root namespace: the user's shell, tests)
    host    hpcb-T-head   10.213.N.2            NameNode, Dask scheduler (link not shaped)
    host    hpcb-T-h1     10.213.N.11           DataNode 1, its Dask worker   (link shaped)
    ...     veth hpcbTv1 (bridge side) <-> eth0 (inside the namespace)

No namespace gets a default route: nothing inside can reach beyond the subnet. :meth:`remove`
deletes every namespace and the bridge by name (the veth pairs go with their namespaces), so a
crashed start is cleaned up by name too.

Traffic is counted on the bridge side of each host's veth (``/sys/class/net/<veth>/statistics``):
``rx`` is what left the host, ``tx`` what reached it.
"""

from __future__ import annotations

import fcntl
import hashlib
import ipaddress
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field

__all__ = ["EmulatedNetwork", "NetnsError", "netns_unavailable", "parse_rate", "leftover_names", "PREFIX"]

#: Every namespace, bridge and veth this module makes starts with this.
PREFIX = "hpcb"
#: Subnets tried, 10.213.0.0/24 upwards (the first one no route of this machine overlaps).
SUBNETS = ipaddress.ip_network("10.213.0.0/16")
#: Host addresses: .2 the head (NameNode, scheduler), .11 upwards the DataNode hosts.
HEAD_HOST, FIRST_HOST = 2, 11


class NetnsError(RuntimeError):
    """A namespace, link or qdisc could not be made (the command and its message say why)."""


def _run(*argv: str) -> str:
    result = subprocess.run(list(argv), capture_output=True, text=True)
    if result.returncode:
        raise NetnsError(f"`{' '.join(argv)}` failed (exit {result.returncode}): {result.stderr.strip()}")
    return result.stdout


def netns_unavailable(*rates: str) -> str | None:
    """Why emulated hosts cannot be made here (None if they can): root, ``ip`` and ``tc``, and a
    namespace actually created and removed. ``rates``: link rates to check first (a bad one is a
    ValueError naming it, see :func:`parse_rate`)."""
    for rate in rates:
        parse_rate(rate)
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"the `{tool}` command (Debian: iproute2) is not installed"
    probe = f"{PREFIX}-probe-{os.getpid()}"
    try:
        _run("ip", "netns", "add", probe)
    except NetnsError as exc:
        return f"cannot create a network namespace: {exc}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(bit|bps)\s*$", re.IGNORECASE)


def parse_rate(text: str) -> int:
    """A link rate as tc writes it (``200mbit``, ``1gbit``, ``50mbps``) in bits per second."""
    m = _RATE.match(str(text))
    if not m:
        raise ValueError(f"link rate {text!r}: expected a number and a unit such as 200mbit, 1gbit, 100mbps")
    value = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2).lower()]
    bits = int(value * (8 if m.group(3).lower() == "bps" else 1))
    if bits < 8000:
        raise ValueError(f"link rate {text!r}: at least 8kbit")
    return bits


def leftover_names(prefix: str = PREFIX) -> list[str]:
    """Namespaces and links of this module's naming that exist now (what a clean run leaves: none)."""
    names = [n.split()[0] for n in _run("ip", "netns", "list").splitlines() if n.startswith(prefix)]
    links = json.loads(_run("ip", "-j", "link", "show") or "[]")
    names += [link["ifname"] for link in links if link.get("ifname", "").startswith(prefix)]
    return names


@dataclass
class EmulatedNetwork:
    """The namespaces, addresses and links of one emulated cluster (saved in ``cluster.json``).

    Parameters
    ----------
    tag:
        Short id in every name (4 hex digits; see :meth:`for_dir`).
    hosts:
        Number of DataNode hosts (``h1`` ... ``hN``).
    rate_bits:
        Rate of each host's link, each direction, in bit/s.
    """

    tag: str
    hosts: int
    rate_bits: int
    subnet: str = ""
    addresses: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_dir(cls, base_dir: str, hosts: int, rate: str) -> "EmulatedNetwork":
        """The network of the testbed in ``base_dir`` (its tag is derived from the path)."""
        tag = hashlib.sha1(os.path.abspath(str(base_dir)).encode()).hexdigest()[:4]
        return cls(tag, hosts, parse_rate(rate))

    @classmethod
    def from_dict(cls, data: dict) -> "EmulatedNetwork":
        """Rebuild from :meth:`as_dict`."""
        return cls(**data)

    def as_dict(self) -> dict:
        """JSON-ready description."""
        return asdict(self)

    # -- names ------------------------------------------------------------------------------------
    @property
    def bridge(self) -> str:
        """Name of the bridge (root namespace)."""
        return f"{PREFIX}{self.tag}-br"

    @property
    def names(self) -> list[str]:
        """Host names: ``head``, then ``h1`` ... ``hN``."""
        return ["head", *(f"h{i + 1}" for i in range(self.hosts))]

    def namespace(self, host: str) -> str:
        """The network namespace of ``host`` (a name from :attr:`names` or its address)."""
        return f"{PREFIX}-{self.tag}-{self.name_of(host)}"

    def veth(self, host: str) -> str:
        """The bridge side of ``host``'s link."""
        name = self.name_of(host)
        return f"{PREFIX}{self.tag}v{'0' if name == 'head' else name[1:]}"

    def name_of(self, host: str) -> str:
        """``host`` as a name: accepts a name, an address, or a DataNode index (``1``)."""
        if host in self.names:
            return host
        for name, address in self.addresses.items():
            if address == host:
                return name
        if str(host).isdigit() and f"h{host}" in self.names:
            return f"h{host}"
        raise KeyError(f"no emulated host {host!r}: hosts are {', '.join(f'{n} ({a})' for n, a in self.addresses.items())}")

    @property
    def head(self) -> str:
        """Address of the head host (NameNode, Dask scheduler)."""
        return self.addresses["head"]

    @property
    def datanode_hosts(self) -> list[str]:
        """Addresses of the DataNode hosts, in order."""
        return [self.addresses[n] for n in self.names[1:]]

    def command(self, host: str, argv: list[str]) -> list[str]:
        """``argv`` run inside ``host``'s namespace (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.namespace(host), *argv]

    # -- lifecycle -------------------------------------------------------------------------------
    def _pick_subnet(self) -> ipaddress.IPv4Network:
        routes = json.loads(_run("ip", "-j", "route", "show", "table", "all") or "[]")
        taken = []
        for route in routes:
            dst = route.get("dst", "")
            try:
                taken.append(ipaddress.ip_network(dst, strict=False))
            except ValueError:
                continue  # "default", multicast names...
        for candidate in SUBNETS.subnets(new_prefix=24):
            if not any(candidate.overlaps(t) for t in taken if t.prefixlen > 0):
                return candidate
        raise NetnsError(f"no free /24 in {SUBNETS} for the emulated hosts")

    def create(self) -> "EmulatedNetwork":
        """Make the bridge, one namespace and shaped veth pair per host; on failure remove what
        was made. Returns self, with :attr:`addresses` filled."""
        self.remove()  # a crashed run of the same testbed directory
        try:
            # Two testbeds starting at once would read the same free subnet: pick and claim it
            # (the bridge's address makes its route) under one machine-wide lock.
            with open(os.path.join(tempfile.gettempdir(), "hpcbridge-netns.lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                net = self._pick_subnet()
                self.subnet = str(net)
                hosts = list(net.hosts())
                _run("ip", "link", "add", self.bridge, "type", "bridge")
                _run("ip", "addr", "add", f"{hosts[0]}/{net.prefixlen}", "dev", self.bridge)
                _run("ip", "link", "set", self.bridge, "up")
            for i, name in enumerate(self.names):
                address = str(hosts[HEAD_HOST - 1] if name == "head" else hosts[FIRST_HOST - 1 + i - 1])
                ns, veth = self.namespace(name), self.veth(name)
                _run("ip", "netns", "add", ns)
                _run("ip", "-n", ns, "link", "set", "lo", "up")
                _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _run("ip", "link", "set", veth, "master", self.bridge)
                _run("ip", "link", "set", veth, "up")
                _run("ip", "-n", ns, "addr", "add", f"{address}/{net.prefixlen}", "dev", "eth0")
                _run("ip", "-n", ns, "link", "set", "eth0", "up")
                if name != "head":
                    self._shape(veth, None)  # toward the host
                    self._shape("eth0", ns)  # from the host
                self.addresses[name] = address
        except BaseException:
            self.remove()
            raise
        return self

    def _shape(self, dev: str, ns: str | None) -> None:
        # tbf: rate, a burst of at least one 64 KiB TSO segment (smaller bursts stall TCP at
        # high rates), and a queue of 50 ms at the rate.
        burst = max(64 << 10, self.rate_bits // 8 // 100)
        _run(*(["ip", "netns", "exec", ns] if ns else []), "tc", "qdisc", "add", "dev", dev, "root",
             "tbf", "rate", f"{self.rate_bits}bit", "burst", str(burst), "latency", "50ms")

    def remove(self) -> None:
        """Delete this network's namespaces and bridge, by name (missing ones are fine)."""
        present = set(n.split()[0] for n in _run("ip", "netns", "list").splitlines())
        for name in self.names:
            ns = self.namespace(name)
            if ns in present:
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for dev in [*(self.veth(n) for n in self.names), self.bridge]:
            if os.path.exists(f"/sys/class/net/{dev}"):
                subprocess.run(["ip", "link", "del", dev], capture_output=True)

    # -- counters --------------------------------------------------------------------------------
    def link_bytes(self) -> dict[str, dict[str, int]]:
        """Bytes that crossed each host's link so far: ``{address: {"out": n, "in": n}}``."""
        out = {}
        for name in self.names:
            base = f"/sys/class/net/{self.veth(name)}/statistics"
            with open(f"{base}/rx_bytes") as rx, open(f"{base}/tx_bytes") as tx:
                out[self.addresses[name]] = {"out": int(rx.read()), "in": int(tx.read())}
        return out
