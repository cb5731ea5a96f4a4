"""The few WebHDFS REST calls hpcbridge needs: block locations with hosts and racks.

hdfs-native speaks HDFS's native RPC but has no block-location call, and pyarrow never exposed
one; the NameNode answers ``GETFILEBLOCKLOCATIONS`` over WebHDFS with each block's hosts,
transfer addresses (``names``) and topology paths (``/rack/host:port``).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

from ..errors import BackendUnavailable, os_error
from .types import BlockLocation

__all__ = ["WebHdfs", "webhdfs_address", "register_namenode", "unregister_namenode", "registered_namenodes"]


def _registry() -> str:
    """Directory of the running NameNodes' HTTP addresses (``$HPCBRIDGE_NAMENODES`` or a per-user temp dir)."""
    return os.environ.get("HPCBRIDGE_NAMENODES") or os.path.join(
        tempfile.gettempdir(), f"hpcbridge-{os.getuid()}", "namenodes")


def _entry(host: str, port: int) -> str:
    return os.path.join(_registry(), f"{host.strip('[]').replace(':', '_')}_{int(port)}.json")


def register_namenode(host: str, rpc_port: int, http_port: int, pid: int) -> str:
    """Record that NameNode ``host:rpc_port`` (process ``pid``) serves HTTP on ``http_port``.

    ``hpcbridge testbed up`` calls this, so ``hdfs://host:rpc_port`` URLs find their WebHDFS in any
    shell without an export. Returns the file written.
    """
    os.makedirs(_registry(), exist_ok=True)
    path = _entry(host, rpc_port)
    partial = f"{path}.{os.getpid()}"
    with open(partial, "w") as out:
        json.dump({"host": host, "rpc_port": rpc_port, "http_port": http_port, "pid": pid}, out)
    os.replace(partial, path)
    return path


def unregister_namenode(host: str, rpc_port: int) -> None:
    """Forget NameNode ``host:rpc_port`` (``hpcbridge testbed down``)."""
    try:
        os.unlink(_entry(host, rpc_port))
    except FileNotFoundError:
        pass


def registered_namenodes() -> list[dict]:
    """The registered NameNodes whose process still runs (stale entries are removed)."""
    out = []
    try:
        names = sorted(os.listdir(_registry()))
    except FileNotFoundError:
        return out
    for name in names:
        if name.endswith(".json"):
            entry = _registered(os.path.join(_registry(), name))
            if entry:
                out.append(entry)
    return out


def _registered(path: str) -> dict | None:
    try:
        with open(path) as source:
            entry = json.load(source)
        os.kill(int(entry["pid"]), 0)
    except ProcessLookupError:
        try:
            os.unlink(path)
        except OSError:
            pass
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return entry


def webhdfs_address(host: str, explicit: str | None = None, port: int | None = None) -> str:
    """Base URL of the NameNode's HTTP server for NameNode ``host`` (RPC port ``port``).

    Order: ``explicit`` (the ``webhdfs=`` option), then a running ``hpcbridge testbed`` registered
    for exactly ``host:port``, then ``dfs.namenode.http-address`` in
    ``$HADOOP_CONF_DIR/hdfs-site.xml``, then ``http://<host>:9870`` (Hadoop 3's default).
    """
    if explicit:
        return explicit.rstrip("/")
    if port is not None:
        entry = _registered(_entry(host, port))
        if entry:
            return f"http://{host}:{entry['http_port']}"
    conf_dir = os.environ.get("HADOOP_CONF_DIR")
    if conf_dir and os.path.exists(os.path.join(conf_dir, "hdfs-site.xml")):
        for prop in ET.parse(os.path.join(conf_dir, "hdfs-site.xml")).getroot().iter("property"):
            if prop.findtext("name") == "dfs.namenode.http-address":
                return f"http://{prop.findtext('value')}"
    return f"http://{host}:9870"


class WebHdfs:
    """A WebHDFS client for metadata calls.

    Parameters
    ----------
    base:
        ``http://host:port`` of the NameNode's HTTP server.
    user:
        ``user.name`` sent with each call (simple authentication).
    timeout:
        Seconds per call; a NameNode that does not answer gives BackendUnavailable.
    url_of:
        Maps an HDFS path to the hpcbridge URL named in errors.
    """

    def __init__(self, base: str, user: str | None, timeout: float, url_of):
        self.base = base.rstrip("/")
        self.user = user
        self.timeout = timeout
        self.url_of = url_of

    def _get(self, path: str, op: str, **params) -> dict:
        query = {"op": op, **params}
        if self.user:
            query["user.name"] = self.user
        url = f"{self.base}/webhdfs/v1{urllib.parse.quote(path)}?{urllib.parse.urlencode(query)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            try:
                remote = json.load(exc).get("RemoteException", {})
            except ValueError:
                remote = {}
            name, message = remote.get("exception", ""), remote.get("message", str(exc))
            code = {"FileNotFoundException": errno.ENOENT, "AccessControlException": errno.EACCES,
                    "SecurityException": errno.EACCES}.get(name, errno.EIO)
            raise os_error(code, self.url_of(path), "hdfs", f"WebHDFS {op}: {message.splitlines()[0]}") from None
        except (urllib.error.URLError, socket.timeout, ConnectionError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BackendUnavailable(f"WebHDFS at {self.base} did not answer {op} for {self.url_of(path)}: "
                                     f"{reason}") from None

    def block_locations(self, path: str, offset: int, length: int) -> list[BlockLocation]:
        """Blocks overlapping ``[offset, offset+length)``, clipped to that range."""
        data = self._get(path, "GETFILEBLOCKLOCATIONS", offset=offset, length=length)
        blocks = data.get("BlockLocations", {}).get("BlockLocation", [])
        end = offset + length
        result = []
        for block in sorted(blocks, key=lambda b: b["offset"]):
            lo, hi = max(offset, block["offset"]), min(end, block["offset"] + block["length"])
            if lo >= hi:
                continue
            racks = tuple(p.rsplit("/", 1)[0] or "/" for p in block.get("topologyPaths", []))
            result.append(BlockLocation(lo, hi - lo, tuple(block.get("hosts", [])), racks,
                                        tuple(block.get("names", []))))
        return result
