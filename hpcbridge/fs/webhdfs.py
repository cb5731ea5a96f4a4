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
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

from ..errors import BackendUnavailable, os_error
from .types import BlockLocation

__all__ = ["WebHdfs", "webhdfs_address"]


def webhdfs_address(host: str, explicit: str | None = None) -> str:
    """Base URL of the NameNode's HTTP server for NameNode ``host``.

    Order: ``explicit`` (the ``webhdfs=`` option), then ``dfs.namenode.http-address`` in
    ``$HADOOP_CONF_DIR/hdfs-site.xml``, then ``http://<host>:9870`` (Hadoop 3's default).
    """
    if explicit:
        return explicit.rstrip("/")
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
