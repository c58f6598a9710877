"""Broker/controller/ZooKeeper properties for fast tests.

Group timeouts are short so that expiries happen in seconds: classic sessions may be 1 s
(`group.min.session.timeout.ms`), KIP-848 consumer/share/streams groups get 1-6 s sessions
and 500 ms heartbeats, and the offsets retention check runs every second (retention itself
is in whole minutes in every version, `offsets.retention.minutes` >= 1). Settings a version
does not know are only warned about by the broker, so one list serves all versions.
"""
from __future__ import annotations

from testbed.bed import jars

CONTROLLER_ID = 100

GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": 500,
    "group.min.session.timeout.ms": 1000,
    "group.max.session.timeout.ms": 300000,
    "offsets.topic.num.partitions": 10,
    "offsets.retention.check.interval.ms": 1000,
}
# KIP-848 (4.x); share groups (4.1 preview, 4.2 GA) and streams groups (4.1 early access, 4.2 GA).
KIP848_SETTINGS = {
    "group.consumer.session.timeout.ms": 6000,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.share.session.timeout.ms": 6000,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.heartbeat.interval.ms": 500,
    "group.share.min.heartbeat.interval.ms": 500,
    "group.streams.session.timeout.ms": 6000,
    "group.streams.min.session.timeout.ms": 1000,
    "group.streams.heartbeat.interval.ms": 500,
    "group.streams.min.heartbeat.interval.ms": 500,
    "group.streams.initial.rebalance.delay.ms": 500,
}
LEAN_SETTINGS = {   # small thread pools and buffers: 2 cores, 3-4 JVMs
    "num.network.threads": 2,
    "num.io.threads": 2,
    "background.threads": 2,
    "num.recovery.threads.per.data.dir": 1,
    "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
    "auto.create.topics.enable": "false",
    "delete.topic.enable": "true",
}
# Topic defaults: the controller's in KRaft (4.4 warns when a broker sets them), the broker's in ZK mode.
TOPIC_DEFAULTS = {"num.partitions": 1, "default.replication.factor": 1}

# Share and streams groups: nothing to set on 4.2+. Formatting at the latest metadata version
# turns on share.version (1 on 4.2, 2 on 4.4) and streams.version=1, and 4.4 deprecates
# group.coordinator.rebalance.protocols (it warns that share groups follow share.version).
# 4.0's share groups are early access (not enabled here).


def authorizer_properties(cluster) -> dict:
    """An ACL authorizer (`KafkaCluster(authorizer=True)`) that allows what no ACL names, so that
    a test's one DENY binding is the only refusal; the PLAINTEXT and CONTROLLER listeners'
    principal (ANONYMOUS: brokers, controller, the bed's clients) is a super user."""
    if not cluster.authorizer:
        return {}
    name = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer" if cluster.kraft
            else "kafka.security.authorizer.AclAuthorizer")
    return {"authorizer.class.name": name, "allow.everyone.if.no.acl.found": "true", "super.users": "User:ANONYMOUS"}


def broker_properties(cluster, node) -> dict:
    rf = min(2, cluster.n)
    props = {
        "log.dirs": str(node.home / "data"),
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": 1,
        "min.insync.replicas": 1,
        **GROUP_SETTINGS, **LEAN_SETTINGS,
    }
    if cluster.offsets_retention_minutes is not None:
        props["offsets.retention.minutes"] = cluster.offsets_retention_minutes
    listeners = [f"PLAINTEXT://127.0.0.1:{node.port}"]
    proto = {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT"}
    if "SASL_SSL" in node.extra_ports:
        listeners.append(f"SASL_SSL://127.0.0.1:{node.extra_ports['SASL_SSL']}")
        proto["SASL_SSL"] = "SASL_SSL"
    props["listeners"] = ",".join(listeners)
    props["advertised.listeners"] = props["listeners"]
    props["inter.broker.listener.name"] = "PLAINTEXT"
    if cluster.kraft:
        ctl = cluster.nodes[CONTROLLER_ID]
        props.update({"process.roles": "broker", "node.id": node.node_id,
                      "controller.quorum.voters": f"{CONTROLLER_ID}@127.0.0.1:{ctl.port}",
                      "controller.listener.names": "CONTROLLER"})
        if jars.parse_version(cluster.version) >= (4, 0):
            props.update(KIP848_SETTINGS)
            props.update({"share.coordinator.state.topic.replication.factor": rf,
                          "share.coordinator.state.topic.min.isr": 1,
                          "share.coordinator.state.topic.num.partitions": 3})
    else:
        zk = cluster.nodes[0]
        props.update({"broker.id": node.node_id, "zookeeper.connect": f"127.0.0.1:{zk.port}",
                      "zookeeper.session.timeout.ms": 6000, "zookeeper.connection.timeout.ms": 30000,
                      **TOPIC_DEFAULTS})
    props["listener.security.protocol.map"] = ",".join(f"{k}:{v}" for k, v in proto.items())
    if cluster.sasl is not None:
        props.update(cluster.sasl.broker_properties(node))
    props.update(authorizer_properties(cluster))
    props.update(cluster.overrides)
    return props


def node_properties(cluster, node) -> dict:
    if node.role == "broker":
        return broker_properties(cluster, node)
    if node.role == "controller":
        return {"process.roles": "controller", "node.id": node.node_id,
                "controller.quorum.voters": f"{node.node_id}@127.0.0.1:{node.port}",
                "listeners": f"CONTROLLER://127.0.0.1:{node.port}",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
                "log.dirs": str(node.home / "data"), "num.io.threads": 2, "num.network.threads": 2,
                **TOPIC_DEFAULTS, **authorizer_properties(cluster)}    # KRaft: ACLs are the controller's too
    return {"dataDir": str(node.home / "data"), "clientPort": node.port, "clientPortAddress": "127.0.0.1",
            "tickTime": 500, "maxClientCnxns": 0, "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr"}
