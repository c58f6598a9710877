"""An N-broker Apache Kafka cluster on loopback, started from the Maven jars.

KRaft (3.9, 4.x): one dedicated controller plus N brokers. Why not combined
`broker,controller` nodes: with two voters the quorum needs both, so stopping the coordinator
broker (the failover scenario) would also stop the controller quorum and no partition leader
could move. ZooKeeper mode (2.8): a ZooKeeper server from the zookeeper jar Kafka depends on.

Short group timeouts (settings.py) make expiries happen in seconds. JVMs log in UTC.
"""
from __future__ import annotations

import base64
import os
import shutil
import signal
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from testbed.bed import admin, jars, log4jconf, settings
from testbed.bed.procs import BedError, Proc, free_port, port_open, wait_for
from testbed.bed.tls import SaslSsl

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

JAVA_OPTS = ["-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Djava.awt.headless=true", "-Duser.timezone=UTC"]


def new_cluster_id() -> str:
    """Like Kafka's Uuid.randomUuid().toString(); never starting with '-' (the storage tool
    would read it as an option, as Kafka's own generator avoids too)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


@dataclass
class Node:
    node_id: int
    role: str                  # broker | controller | zookeeper
    port: int
    home: Path
    extra_ports: dict = field(default_factory=dict)
    proc: Proc | None = None
    starts: int = 0

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def server_log(self) -> Path:
        return self.log_dir / ("zookeeper.log" if self.role == "zookeeper" else "server.log")


class KafkaCluster:
    """`with KafkaCluster("4.4.0") as c: c.bootstrap ...`; brokers are numbered 1..N."""

    def __init__(self, version: str, brokers: int = 2, workdir: Path | None = None,
                 layout: str = "default", rotate_bytes: int | None = None,
                 overrides: dict | None = None, offsets_retention_minutes: int | None = None,
                 features: dict | None = None, sasl: SaslSsl | None = None,
                 start_timeout: float = 120.0, extra_layouts: tuple[str, ...] = (), authorizer: bool = False):
        self.version = version
        self.kraft = jars.is_kraft(version)
        self.family = jars.log4j_family(version)
        self.n = brokers
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"kafkabed-{version}-"))
        self.layout, self.rotate_bytes = layout, rotate_bytes
        self.extra_layouts = tuple(extra_layouts)   # brokers also write server-<layout>.log in these
        self.overrides = dict(overrides or {})
        self.offsets_retention_minutes = offsets_retention_minutes
        self.features = dict(features or {})
        self.sasl = sasl                 # tls.SaslSsl or None
        self.authorizer = authorizer     # ACLs checked (settings.authorizer_properties)
        self.start_timeout = start_timeout
        self.cluster_id = new_cluster_id()
        self.lib: Path | None = None
        self.nodes: dict[int, Node] = {}
        self.timings: dict[str, float] = {}
        self._admin: tuple[tuple[int, ...], AdminClient] | None = None   # (the brokers it knows, the client)

    # ---------------------------------------------------------------- layout of nodes
    @property
    def brokers(self) -> dict[int, Node]:
        return {i: n for i, n in self.nodes.items() if n.role == "broker"}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.brokers.values())

    @property
    def sasl_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.extra_ports['SASL_SSL']}" for n in self.brokers.values())

    def server_log_path(self, broker_id: int) -> Path:
        return self.nodes[broker_id].server_log

    def server_log_paths(self) -> list[Path]:
        return [n.server_log for n in self.brokers.values()]

    def extra_log_path(self, broker_id: int, layout: str) -> Path:
        """The broker's copy of server.log in another layout (`extra_layouts`)."""
        return self.nodes[broker_id].log_dir / log4jconf.extra_log_name(layout)

    def _plan(self) -> None:
        """Ports and directories; a workdir given by the caller starts empty (fresh cluster id)."""
        for sub in ("controller", "zookeeper", *(f"broker-{i}" for i in range(1, self.n + 1))):
            shutil.rmtree(self.workdir / sub, ignore_errors=True)
        aux_id = settings.CONTROLLER_ID if self.kraft else 0
        self.nodes[aux_id] = Node(aux_id, "controller" if self.kraft else "zookeeper", free_port(),
                                  self.workdir / ("controller" if self.kraft else "zookeeper"))
        for i in range(1, self.n + 1):
            node = Node(i, "broker", free_port(), self.workdir / f"broker-{i}")
            if self.sasl is not None:
                node.extra_ports["SASL_SSL"] = free_port()
            self.nodes[i] = node

    # ---------------------------------------------------------------- start / stop
    def start(self) -> KafkaCluster:
        t0 = time.monotonic()
        try:
            self.lib = jars.fetch_broker(self.version)
        except jars.MavenError as exc:
            raise BedError(f"Kafka {self.version}: {exc}") from None
        self.timings["fetch_s"] = time.monotonic() - t0
        self._plan()
        if self.sasl is not None:
            self.sasl.prepare(self.workdir / "tls")
        t1 = time.monotonic()
        for node in self.nodes.values():
            self._write_config(node)
        if self.kraft:
            self._format_all()
        self.timings["format_s"] = time.monotonic() - t1
        t2 = time.monotonic()
        aux = next(n for n in self.nodes.values() if n.role != "broker")
        self._launch(aux)
        self._await_port(aux)
        if not self.kraft and self.sasl is not None:
            self.sasl.create_zk_users(self)
        for node in self.brokers.values():
            self._launch(node)
        for node in self.brokers.values():
            self._await_port(node)
        self.await_brokers(set(self.brokers))
        self.timings["start_s"] = time.monotonic() - t2
        return self

    def _props(self, node: Node) -> dict:
        return settings.node_properties(self, node)

    def _write_config(self, node: Node) -> None:
        (node.home / "data").mkdir(parents=True, exist_ok=True)
        node.log_dir.mkdir(parents=True, exist_ok=True)
        conf = node.home / ("zookeeper.properties" if node.role == "zookeeper" else "server.properties")
        conf.write_text("".join(f"{k}={v}\n" for k, v in self._props(node).items()))
        family = "log4j1" if node.role == "zookeeper" else self.family
        layout = "default" if node.role != "broker" else self.layout
        broker = node.role == "broker"
        _, prop = log4jconf.write_config(family, node.home, node.log_dir, layout,
                                         self.rotate_bytes if broker else None,
                                         self.extra_layouts if broker else (), node.node_id)
        node.extra_ports["log4j_prop"] = prop

    def _lib_dir(self) -> Path:
        """The broker's jars (fetched by `start`)."""
        if self.lib is None:
            raise BedError(f"Kafka {self.version}: the broker jars are not fetched yet (start() has not run)")
        return self.lib

    def _java(self, main: str, args: list[str], node: Node) -> list[str]:
        return ["java", *JAVA_OPTS, f"-Dkafka.logs.dir={node.log_dir}", node.extra_ports["log4j_prop"],
                *(self.sasl.jvm_opts(node) if self.sasl is not None else []),
                "-cp", jars.classpath(self._lib_dir()), main, *args]

    def _format_all(self) -> None:
        """kafka-storage format on every node (in parallel: each is a JVM start)."""
        procs = []
        for node in self.nodes.values():
            args = ["format", "-t", self.cluster_id, "-c", str(node.home / "server.properties"),
                    "--ignore-formatted"]
            for name, level in self.features.items():
                args += ["--feature", f"{name}={level}"]
            if self.sasl is not None:    # SCRAM users go into the bootstrap metadata of every node
                args += self.sasl.format_args()
            procs.append(Proc(self._java("kafka.tools.StorageTool", args, node), "format",
                              node.home, env=self._env()))
        for p in procs:
            code = p.wait(120)
            p.close_files()
            if code != 0:
                errors = [ln.strip() for ln in p.tail(8000).splitlines()
                          if "Exception" in ln or "Error" in ln or "error" in ln][:3]
                raise BedError(f"Kafka {self.version}: storage format failed ({code}): "
                               + (" | ".join(errors) or p.tail(300).strip()))

    def _env(self) -> dict:
        env = dict(os.environ)
        for var in ("KAFKA_OPTS", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "JAVA_TOOL_OPTIONS", "CLASSPATH"):
            env.pop(var, None)
        return env

    def _launch(self, node: Node) -> None:
        node.starts += 1
        if node.role == "zookeeper":
            cmd = self._java("org.apache.zookeeper.server.quorum.QuorumPeerMain",
                             [str(node.home / "zookeeper.properties")], node)
        else:
            cmd = self._java("kafka.Kafka", [str(node.home / "server.properties")], node)
        node.proc = Proc(cmd, f"{node.role}-{node.node_id}", node.home, env=self._env())

    def _died(self, node: Node) -> None:
        if node.proc is not None and not node.proc.alive():
            text = node.proc.tail(4000)
            if node.server_log.exists():
                text += node.server_log.read_text(errors="replace")[-6000:]
            if "Address already in use" in text or "BindException" in text:
                raise BedError(f"Kafka {self.version}: {node.role} {node.node_id} could not bind port "
                               f"{node.port} (port in use)")
            last = [ln for ln in text.splitlines() if "ERROR" in ln or "Exception" in ln][-3:]
            raise BedError(f"Kafka {self.version}: {node.role} {node.node_id} exited with "
                           f"{node.proc.popen.returncode}: {' | '.join(last) or text[-500:]}"
                           f" (see {node.proc.stdout_path.parent})")

    def _await_port(self, node: Node) -> None:
        wait_for(lambda: port_open(node.port), self.start_timeout,
                 f"{node.role} {node.node_id} of Kafka {self.version} to listen on 127.0.0.1:{node.port}",
                 interval=0.1, alive=lambda: self._died(node))

    def await_brokers(self, ids: set, timeout: float | None = None) -> None:
        """Until the metadata lists exactly `ids` as live brokers (then unfenced in KRaft)."""
        def check():
            for node in self.nodes.values():
                if node.node_id in ids or node.role != "broker":
                    self._died(node)
            try:
                md = self.admin().list_topics(timeout=2)
            except Exception:
                return False
            return set(md.brokers) == ids
        wait_for(check, timeout or self.start_timeout, f"metadata of Kafka {self.version} to list brokers "
                 f"{sorted(ids)}", interval=0.2)

    def admin(self) -> AdminClient:
        """An AdminClient on the running brokers, made anew when that set changes (see
        admin.find_coordinator for why a client that knew a stopped broker is not reused)."""
        live = tuple(self.running_brokers()) or tuple(self.brokers)
        if self._admin is None or self._admin[0] != live:
            boot = ",".join(f"127.0.0.1:{self.nodes[i].port}" for i in live)
            self._admin = (live, admin.make_admin(boot))
        return self._admin[1]

    def stop_broker(self, broker_id: int, timeout: float = 60.0) -> float:
        """SIGTERM (controlled shutdown) and wait for the exit; returns the seconds it took."""
        node = self.nodes[broker_id]
        t0 = time.monotonic()
        if node.proc is not None:
            node.proc.signal(signal.SIGTERM)
            node.proc.wait(timeout)
            node.proc.close_files()
        return time.monotonic() - t0

    def kill_broker(self, broker_id: int) -> float:
        """SIGKILL (a crash: no controlled shutdown, the controller learns of it when the broker's
        session lapses) and wait for the exit; returns the seconds it took."""
        node = self.nodes[broker_id]
        t0 = time.monotonic()
        if node.proc is not None:
            node.proc.kill()
        return time.monotonic() - t0

    def await_in_sync(self, topic: str = "__consumer_offsets", timeout: float = 120.0) -> None:
        """Until every replica of every partition of `topic` is in sync: after a broker came back,
        before another one stops, so that no partition is left without an in-sync replica."""
        def check() -> bool:
            try:
                md = self.admin().list_topics(topic=topic, timeout=5).topics[topic]
            except Exception:
                return False
            return md.error is None and bool(md.partitions) and \
                all(set(p.isrs) == set(p.replicas) for p in md.partitions.values())
        wait_for(check, timeout, f"every replica of {topic} on Kafka {self.version} to be in sync", interval=0.5)

    def start_broker(self, broker_id: int, wait: bool = True) -> None:
        node = self.nodes[broker_id]
        if node.proc is not None and node.proc.alive():
            raise BedError(f"broker {broker_id} is already running (pid {node.proc.pid})")
        self._launch(node)
        if wait:
            self._await_port(node)
            self.await_brokers({i for i, n in self.brokers.items() if n.proc and n.proc.alive()})

    def running_brokers(self) -> list[int]:
        return [i for i, n in self.brokers.items() if n.proc is not None and n.proc.alive()]

    # ---------------------------------------------------------------- admin shortcuts
    def create_topic(self, name: str, partitions: int = 1, rf: int = 1, config: dict | None = None,
                     assignment: list[list[int]] | None = None) -> None:
        admin.create_topic(self.admin(), name, partitions, rf, config, assignment=assignment)

    def add_partitions(self, name: str, total: int) -> None:
        admin.add_partitions(self.admin(), name, total)

    def produce(self, topic: str, n: int, partition: int = -1) -> None:
        """`n` records (values "0".."n-1") to `topic`, delivered before it returns; -1: the
        client's partitioner picks (confluent-kafka's own default)."""
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": self.bootstrap, "log_level": 2})
        for i in range(n):
            producer.produce(topic, value=str(i).encode(), partition=partition)
        if producer.flush(30) != 0:
            raise BedError(f"{topic}: {n} records not all delivered within 30 s")

    def coordinator_of(self, group: str, timeout: float = 30.0) -> int:
        live = ",".join(f"127.0.0.1:{self.nodes[i].port}" for i in self.running_brokers())
        return admin.coordinator_of(live, group, timeout)

    def delete_group(self, group: str) -> None:
        admin.delete_group(self.admin(), group)

    # ---------------------------------------------------------------- teardown
    def close(self, keep: bool = False) -> None:
        """Stops the brokers together (SIGTERM: controlled shutdown needs the controller, so
        the controller/ZooKeeper goes only after them), SIGKILL after 20 s."""
        self._admin = None
        brokers = list(self.brokers.values())
        aux = [n for n in self.nodes.values() if n.role != "broker"]
        for group in (brokers, aux):
            for node in group:
                if node.proc is not None and node.proc.alive():
                    node.proc.signal(signal.SIGTERM)
            for node in group:
                if node.proc is not None:
                    node.proc.stop(20)
                    node.proc.close_files()
        if self._own_workdir and not keep and not os.environ.get("KAFKABED_KEEP"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
        try:
            return self.start()
        except BaseException:
            self.close(keep=True)
            raise

    def __exit__(self, *exc) -> None:
        self.close(keep=exc[0] is not None)


def with_rolled_files(logs: list) -> list[Path]:
    """Each log file (a broker's server.log) preceded by the files log4j has rolled it into so far
    (hourly by Kafka's default configuration: `server.log.2026-11-23-13`), oldest first. Listed
    when they are read, not before: a roll at the top of the hour moves what was written into a
    new file, and a list made before it names only the log that now holds what came after."""
    out: list[Path] = []
    for log in map(Path, logs):
        rolled = sorted(p for p in log.parent.glob(log.name + ".*") if p.is_file())
        out += rolled + [log]
    return out
