"""A real HDFS on one machine: a NameNode and N DataNodes as separate JVMs, each DataNode on its
own loopback address (127.0.0.2, .3, ...) so block locations name distinct hosts; or, with
``netns=True``, each in its own network namespace behind a shaped link (:mod:`.netns`), so a
remote read costs network time as on a cluster.

Everything lives under one directory (configuration, data, logs, ``cluster.json`` with the pids
and addresses). :meth:`HdfsCluster.up` waits until every DataNode is live and fails with the log
tail of a JVM that died; :meth:`HdfsCluster.down` stops only the pids it started and removes the
data. ``hpcbridge testbed up|down|status`` drives the same class from the shell.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from ..errors import HpcbridgeError
from ..fs.webhdfs import register_namenode, unregister_namenode
from .hadoop import ensure_hadoop, java_command
from .netns import EmulatedNetwork
from ..processes import alive, stop_pid

__all__ = ["HdfsCluster", "ClusterInfo", "DataNodeInfo", "TestbedError", "default_dir"]

NAMENODE_CLASS = "org.apache.hadoop.hdfs.server.namenode.NameNode"
DATANODE_CLASS = "org.apache.hadoop.hdfs.server.datanode.DataNode"


class TestbedError(HpcbridgeError, RuntimeError):
    """The test cluster could not be started or reached."""

    __test__ = False  # not a pytest test class, despite the name


def default_dir() -> Path:
    """Where ``hpcbridge testbed`` keeps its cluster (``$HPCBRIDGE_TESTBED_DIR`` or a temp dir)."""
    return Path(os.environ.get("HPCBRIDGE_TESTBED_DIR") or os.path.join(tempfile.gettempdir(), "hpcbridge-testbed"))


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _site_xml(properties: dict[str, object]) -> str:
    body = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(str(v))}</value></property>\n"
        for k, v in properties.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


@dataclass
class DataNodeInfo:
    """One DataNode: its host address (its identity), rack, ports, pid, and directories."""

    host: str
    rack: str
    xfer_port: int
    http_port: int
    ipc_port: int
    pid: int = 0
    data_dir: str = ""
    log: str = ""


@dataclass
class ClusterInfo:
    """What a running cluster is: addresses, pids and paths (saved as cluster.json)."""

    base_dir: str
    namenode_host: str
    rpc_port: int
    http_port: int
    namenode_pid: int = 0
    namenode_log: str = ""
    datanodes: list[DataNodeInfo] = field(default_factory=list)
    replication: int = 1
    block_size: int = 64 << 20
    #: The Dask cluster started with ``up(dask=True)`` / :meth:`HdfsCluster.start_dask` (a dict
    #: of :class:`~hpcbridge.testbed.dask.DaskInfo` fields), else None.
    dask: dict | None = None
    #: The emulated hosts of a ``netns=True`` cluster (a dict of
    #: :class:`~hpcbridge.testbed.netns.EmulatedNetwork` fields), else None.
    network: dict | None = None

    @property
    def url(self) -> str:
        """``hdfs://host:port`` of the NameNode."""
        return f"hdfs://{self.namenode_host}:{self.rpc_port}"

    @property
    def webhdfs(self) -> str:
        """Base URL of WebHDFS (``http://host:port/webhdfs/v1``)."""
        return f"http://{self.namenode_host}:{self.http_port}/webhdfs/v1"

    @property
    def conf_dir(self) -> str:
        """Client configuration directory (core-site.xml, hdfs-site.xml) for Java tools."""
        return os.path.join(self.base_dir, "conf", "client")

    def as_dict(self) -> dict:
        """JSON-ready description, including the derived URLs."""
        return {**asdict(self), "url": self.url, "webhdfs": self.webhdfs, "conf_dir": self.conf_dir}

    @classmethod
    def load(cls, base_dir: Path) -> "ClusterInfo":
        """Read ``cluster.json`` from ``base_dir``; FileNotFoundError if no cluster was started there."""
        data = json.loads((Path(base_dir) / "cluster.json").read_text())
        data["datanodes"] = [DataNodeInfo(**d) for d in data["datanodes"]]
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class HdfsCluster:
    """Start, inspect and stop a local HDFS.

    Parameters
    ----------
    base_dir:
        Directory for configuration, data and logs (created; removed by :meth:`down`).
    datanodes:
        Number of DataNodes (default 3), on 127.0.0.2, 127.0.0.3, ...
    racks:
        Number of racks the DataNodes are spread over round-robin (default 1: ``/default-rack``).
    replication:
        Cluster default replication of new files (a file may ask for another at create). Default
        2, or 1 with one DataNode: the NameNode closes a file whose last block a DataNode has not
        reported yet only when the file's replication is above the minimum (1) (HDFS-8999,
        ``num-committed-allowed``); at replication 1 the close waits for the report, and
        hdfs-native retries ``complete`` after 500 ms, so every close of a replication-1 file
        took ~0.5 s with the default driver (the Java client closes first time in ~35 ms).
    block_size:
        Cluster default block size of new files.
    netns:
        Emulated hosts: the NameNode (and Dask scheduler) in one network namespace, each
        DataNode (and its Dask worker) in its own, on a private subnet behind a bridge, every
        DataNode host's link limited to ``link_rate`` each way (:mod:`hpcbridge.testbed.netns`;
        needs root). Default False: loopback addresses.
    link_rate:
        Rate of each DataNode host's link with ``netns`` (tc notation: ``200mbit``, ``1gbit``).
    """

    def __init__(self, base_dir: str | os.PathLike | None = None, datanodes: int = 3, racks: int = 1,
                 replication: int | None = None, block_size: int = 64 << 20, heap: str = "512m",
                 netns: bool = False, link_rate: str = "1gbit"):
        if datanodes < 1 or datanodes > 250:
            raise ValueError(f"datanodes must be between 1 and 250, got {datanodes}")
        if racks < 1 or racks > datanodes:
            raise ValueError(f"racks must be between 1 and the number of DataNodes, got {racks}")
        if replication is None:
            replication = min(2, datanodes)
        if replication < 1 or replication > datanodes:
            raise ValueError(f"replication must be between 1 and {datanodes}, got {replication}")
        self.base_dir = Path(base_dir) if base_dir else default_dir()
        self.n_datanodes = datanodes
        self.n_racks = racks
        self.replication = replication
        self.block_size = block_size
        self.heap = heap
        self.info: ClusterInfo | None = None
        self.network: EmulatedNetwork | None = (EmulatedNetwork.for_dir(str(self.base_dir), datanodes, link_rate)
                                                if netns else None)

    # -- configuration ----------------------------------------------------------------------
    def _common_properties(self, info: ClusterInfo) -> dict[str, object]:
        table = ",".join(f"{d.host}={d.rack}" for d in info.datanodes)
        return {
            "fs.defaultFS": info.url,
            "dfs.namenode.rpc-address": f"{info.namenode_host}:{info.rpc_port}",
            "dfs.namenode.http-address": f"{info.namenode_host}:{info.http_port}",
            "dfs.replication": info.replication,
            "dfs.blocksize": info.block_size,
            "dfs.namenode.fs-limits.min-block-size": 4096,
            "dfs.client.use.datanode.hostname": "true",
            "dfs.datanode.use.datanode.hostname": "true",
            "dfs.webhdfs.enabled": "true",
            "dfs.permissions.enabled": "true",
            "dfs.heartbeat.interval": 1,
            # Let addBlock and complete proceed while earlier blocks are committed but their
            # DataNode has not reported them yet (HDFS-8999): addBlock checks the block
            # num-committed-allowed + 2 from the end. The Java client retries around
            # NotReplicatedYetException (locateFollowingBlock, ~12 s); hdfs-native 0.14 does not,
            # and under load (CI: make test on 2 cores) a 4-block write failed with it at
            # allowance 1, and with "Failed to complete file in time" at 0.
            "dfs.namenode.file.close.num-committed-allowed": 8,
            "dfs.namenode.heartbeat.recheck-interval": 5000,
            "net.topology.node.switch.mapping.impl": "hpcbridge.HostTableMapping",
            "hpcbridge.topology.table": table,
        }

    def _write_conf(self, name: str, properties: dict[str, object]) -> Path:
        conf = self.base_dir / "conf" / name
        conf.mkdir(parents=True, exist_ok=True)
        core = {k: v for k, v in properties.items() if k.startswith(("fs.", "net.", "hpcbridge.", "hadoop."))}
        (conf / "core-site.xml").write_text(_site_xml(core))
        (conf / "hdfs-site.xml").write_text(_site_xml(properties))
        return conf

    def _plan(self) -> ClusterInfo:
        net = self.network
        if net is not None:
            # Every host has an address of its own in its own namespace: Hadoop's usual ports.
            nn_host, hosts = net.head, net.datanode_hosts
            info = ClusterInfo(str(self.base_dir), nn_host, 9820, 9870, replication=self.replication,
                               block_size=self.block_size, network=net.as_dict())
        else:
            nn_host, hosts = "127.0.0.1", [f"127.0.0.{i + 2}" for i in range(self.n_datanodes)]
            info = ClusterInfo(str(self.base_dir), nn_host, _free_port(nn_host), _free_port(nn_host),
                               replication=self.replication, block_size=self.block_size)
        for i, host in enumerate(hosts):
            ports = (9866, 9864, 9867) if net is not None else (_free_port(host), _free_port(host), _free_port(host))
            info.datanodes.append(DataNodeInfo(
                host=host, rack=f"/rack{i % self.n_racks}" if self.n_racks > 1 else "/default-rack",
                xfer_port=ports[0], http_port=ports[1], ipc_port=ports[2],
                data_dir=str(self.base_dir / f"data-{host}"), log=str(self.base_dir / "logs" / f"datanode-{host}.log"),
            ))
        info.namenode_log = str(self.base_dir / "logs" / "namenode.log")
        return info

    # -- lifecycle ---------------------------------------------------------------------------
    def _spawn(self, command: list[str], log: str, host: str | None = None) -> int:
        """Start ``command`` in its own session (inside ``host``'s namespace on emulated hosts)."""
        if self.network is not None and host is not None:
            command = self.network.command(host, command)
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True, cwd=self.base_dir)
        return process.pid

    def up(self, timeout: float = 180.0, dask: bool = False, dask_threads: int = 1,
           dask_work_stealing: bool = False) -> ClusterInfo:
        """Format and start the NameNode and DataNodes; return once every DataNode is live.

        With ``dask=True`` also start a Dask scheduler and one worker per DataNode host, bound
        to that host's address (see :meth:`start_dask`).

        Ports are picked free and released before the JVMs bind them, so another process may take
        one in between: a start that fails with a ``BindException`` is retried (up to three
        times) with new ports.

        Raises
        ------
        TestbedError
            If a JVM dies (with its log tail) or the cluster is not ready within ``timeout``;
            whatever was started is stopped again.
        """
        for attempt in range(3):
            try:
                return self._up_once(timeout, dask, dask_threads, dask_work_stealing)
            except TestbedError as exc:
                if "BindException" not in str(exc) or attempt == 2:
                    raise

    def _up_once(self, timeout: float, dask: bool, dask_threads: int, dask_work_stealing: bool) -> ClusterInfo:
        if (self.base_dir / "cluster.json").exists():
            existing = ClusterInfo.load(self.base_dir)
            if alive(existing.namenode_pid):
                raise TestbedError(f"a testbed is already running in {self.base_dir} ({existing.url}); "
                                   "stop it with `hpcbridge testbed down` first")
            shutil.rmtree(self.base_dir)
        ensure_hadoop()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        if self.network is not None:
            try:
                self.network.create()
            except BaseException:
                shutil.rmtree(self.base_dir, ignore_errors=True)
                raise
        info = self.info = self._plan()
        common = self._common_properties(info)
        nn_conf = self._write_conf("namenode", {
            **common,
            "dfs.namenode.name.dir": f"file://{self.base_dir / 'name'}",
            "dfs.namenode.datanode.registration.ip-hostname-check": "false",
            "dfs.namenode.safemode.threshold-pct": 0,
            "dfs.namenode.safemode.extension": 0,
            "dfs.namenode.safemode.min.datanodes": 0,
        })
        self._write_conf("client", common)
        try:
            fmt = subprocess.run(java_command(NAMENODE_CLASS, nn_conf, ["-format", "-nonInteractive", "-force"],
                                              heap=self.heap), capture_output=True, text=True, cwd=self.base_dir)
            if fmt.returncode:
                raise TestbedError(f"NameNode format failed:\n{(fmt.stdout + fmt.stderr)[-3000:]}")
            info.namenode_pid = self._spawn(java_command(NAMENODE_CLASS, nn_conf, heap=self.heap), info.namenode_log,
                                            host=info.namenode_host)
            self._save()
            for dn in info.datanodes:
                self._start_datanode(dn, common)
            self._save()
            self._wait_ready(timeout)
            register_namenode(info.namenode_host, info.rpc_port, info.http_port, info.namenode_pid)
            if dask:
                self.start_dask(nthreads=dask_threads, work_stealing=dask_work_stealing)
        except BaseException:
            self.down()
            raise
        return info

    def start_dask(self, nthreads: int = 1, memory_limit: str = "2GiB", work_stealing: bool = False):
        """Start a Dask scheduler on 127.0.0.1 and one worker per DataNode host (``--host
        127.0.0.X``; ``work_stealing`` configures the scheduler), save their pids in ``cluster.json``, and return the
        :class:`~hpcbridge.testbed.dask.DaskInfo`. An already running one is returned as is."""
        from .dask import DaskInfo, start_dask

        if self.info.dask:
            return DaskInfo.from_dict(self.info.dask)
        net = self.network
        info = start_dask([d.host for d in self.info.datanodes], self.base_dir / "logs", nthreads=nthreads,
                          memory_limit=memory_limit, work_stealing=work_stealing,
                          env={"HADOOP_CONF_DIR": self.info.conf_dir},
                          scheduler_host=net.head if net is not None else "127.0.0.1",
                          inside=net.command if net is not None else None)
        self.info.dask = info.as_dict()
        self._save()
        return info

    def stop_dask(self) -> None:
        """Stop the testbed's Dask workers and scheduler (by pid)."""
        from .dask import DaskInfo, stop_dask

        if self.info is not None and self.info.dask:
            stop_dask(DaskInfo.from_dict(self.info.dask))
            self.info.dask = None
            if (self.base_dir / "cluster.json").exists():
                self._save()

    def _start_datanode(self, dn: DataNodeInfo, common: dict | None = None) -> None:
        common = common or self._common_properties(self.info)
        conf = self._write_conf(f"datanode-{dn.host}", {
            **common,
            "dfs.datanode.data.dir": f"file://{dn.data_dir}",
            "dfs.datanode.address": f"{dn.host}:{dn.xfer_port}",
            "dfs.datanode.http.address": f"{dn.host}:{dn.http_port}",
            "dfs.datanode.ipc.address": f"{dn.host}:{dn.ipc_port}",
            "dfs.datanode.hostname": dn.host,
        })
        dn.pid = self._spawn(java_command(DATANODE_CLASS, conf, heap=self.heap), dn.log, host=dn.host)

    def _save(self) -> None:
        (self.base_dir / "cluster.json").write_text(json.dumps(self.info.as_dict(), indent=2))

    def _jmx(self, query: str) -> dict:
        url = f"http://{self.info.namenode_host}:{self.info.http_port}/jmx?qry={query}"
        with urllib.request.urlopen(url, timeout=5) as response:
            beans = json.load(response).get("beans", [])
        return beans[0] if beans else {}

    def live_datanodes(self) -> int:
        """Number of DataNodes the NameNode currently counts as live (0 if it does not answer)."""
        try:
            return int(self._jmx("Hadoop:service=NameNode,name=FSNamesystemState").get("NumLiveDataNodes", 0))
        except (OSError, ValueError):
            return 0

    @staticmethod
    def datanode_registered(dn: DataNodeInfo) -> bool:
        """Whether a DataNode process reports itself registered and heartbeating to the NameNode
        (its own JMX; the NameNode may still count a killed instance as live for a while)."""
        url = f"http://{dn.host}:{dn.http_port}/jmx?qry=Hadoop:service=DataNode,name=DataNodeInfo"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                beans = json.load(response).get("beans", [])
            actors = json.loads(beans[0]["BPServiceActorInfo"]) if beans else []
        except (OSError, ValueError, KeyError):
            return False
        return bool(actors) and all(a.get("ActorState") == "RUNNING" and a.get("LastBlockReport", "") not in ("", "-1")
                                    and int(a.get("LastHeartbeat", "99")) < 10 for a in actors)

    def _check_processes(self) -> None:
        info = self.info
        for name, pid, log in [("NameNode", info.namenode_pid, info.namenode_log),
                               *[(f"DataNode {d.host}", d.pid, d.log) for d in info.datanodes]]:
            if not alive(pid):
                tail = Path(log).read_text(errors="replace")[-4000:] if os.path.exists(log) else "(no log)"
                raise TestbedError(f"{name} (pid {pid}) died during start-up; log tail ({log}):\n{tail}")

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_processes()
            if (self.live_datanodes() == len(self.info.datanodes) and self._webhdfs_ready()
                    and all(self.datanode_registered(d) for d in self.info.datanodes)):
                return
            time.sleep(0.5)
        raise TestbedError(f"only {self.live_datanodes()} of {len(self.info.datanodes)} DataNodes live after "
                           f"{timeout:.0f} s; logs in {self.base_dir / 'logs'}")

    def _webhdfs_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.info.webhdfs}/?op=GETFILESTATUS", timeout=5) as response:
                return response.status == 200
        except (OSError, urllib.error.HTTPError):
            return False

    @classmethod
    def attach(cls, base_dir: str | os.PathLike | None = None) -> "HdfsCluster":
        """The cluster already started in ``base_dir`` (FileNotFoundError if none)."""
        base = Path(base_dir) if base_dir else default_dir()
        info = ClusterInfo.load(base)
        cluster = cls(base, datanodes=len(info.datanodes), replication=info.replication, block_size=info.block_size)
        cluster.n_racks = len({d.rack for d in info.datanodes})
        cluster.info = info
        cluster.network = EmulatedNetwork.from_dict(info.network) if info.network else None
        return cluster

    def status(self) -> dict:
        """Which processes run and how many DataNodes the NameNode sees."""
        from .dask import DaskInfo, dask_status

        info = self.info
        return {
            "url": info.url,
            "webhdfs": info.webhdfs,
            "namenode": {"pid": info.namenode_pid, "alive": alive(info.namenode_pid)},
            "datanodes": [{"host": d.host, "rack": d.rack, "pid": d.pid, "alive": alive(d.pid)}
                          for d in info.datanodes],
            "live_datanodes": self.live_datanodes(),
            "dask": dask_status(DaskInfo.from_dict(info.dask)) if info.dask else None,
        }

    @staticmethod
    def _stop_pid(pid: int, grace: float = 10.0) -> None:
        stop_pid(pid, grace)

    def kill_datanode(self, host: str) -> None:
        """SIGKILL one DataNode (fault tests)."""
        dn = self._datanode(host)
        if alive(dn.pid):
            os.kill(dn.pid, signal.SIGKILL)
            for _ in range(100):
                if not alive(dn.pid):
                    break
                time.sleep(0.05)
            try:
                os.waitpid(dn.pid, os.WNOHANG)
            except ChildProcessError:
                pass

    def restart_datanode(self, host: str, timeout: float = 120.0) -> None:
        """Start a stopped DataNode again and wait until the NameNode counts every DataNode live."""
        dn = self._datanode(host)
        if alive(dn.pid):
            return
        self._start_datanode(dn)
        self._save()
        self._wait_ready(timeout)

    def _datanode(self, host: str) -> DataNodeInfo:
        for dn in self.info.datanodes:
            if dn.host == host:
                return dn
        raise KeyError(f"no DataNode {host} in {[d.host for d in self.info.datanodes]}")

    def down(self) -> None:
        """Stop the processes this cluster started (by pid), remove its emulated hosts (by
        name) and its directory."""
        if self.info is None:
            try:
                self.info = ClusterInfo.load(self.base_dir)
            except FileNotFoundError:
                if self.network is not None:
                    self.network.remove()
                return
            if self.info.network:
                self.network = EmulatedNetwork.from_dict(self.info.network)
        self.stop_dask()
        unregister_namenode(self.info.namenode_host, self.info.rpc_port)
        for dn in self.info.datanodes:
            self._stop_pid(dn.pid)
        self._stop_pid(self.info.namenode_pid)
        if self.network is not None:
            self.network.remove()
        shutil.rmtree(self.base_dir, ignore_errors=True)

    def exec(self, host: str, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        """Run ``argv`` inside emulated host ``host`` (``head``, ``h1``..., an address or a
        DataNode index) with ``HADOOP_CONF_DIR`` set; ``kwargs`` go to :func:`subprocess.run`."""
        if self.network is None:
            raise TestbedError(f"the testbed in {self.base_dir} has no emulated hosts (start it with --netns)")
        env = {**os.environ, "HADOOP_CONF_DIR": self.info.conf_dir, **kwargs.pop("env", {})}
        return subprocess.run(self.network.command(host, list(argv)), env=env, **kwargs)

    def __enter__(self) -> "HdfsCluster":
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()
