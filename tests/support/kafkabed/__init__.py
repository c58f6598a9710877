"""kafkabed: real Apache Kafka brokers (2.8 ZooKeeper, 3.9/4.x KRaft) from Maven jars on
loopback, a log shipper, consumer-group members as processes, and scenarios with a
ground-truth timeline. No pytest dependency: tests/e2e/kafka and scripts/kafka-* use it."""
from .cluster import KafkaCluster
from .jars import MavenError, fetch_broker, fetch_clients
from .log4jconf import LAYOUTS
from .members import Member, MemberSpec
from .procs import BedError, BedTimeout, kill_all, wait_for
from .runner import Runner
from .scenarios import SCENARIOS, Ctx, Expect, Scenario
from .shipper import LogShipper
from .tls import SaslSsl

__all__ = [
           "LAYOUTS",
           "SCENARIOS",
           "BedError",
           "BedTimeout",
           "Ctx",
           "Expect",
           "KafkaCluster",
           "LogShipper",
           "MavenError",
           "Member",
           "MemberSpec",
           "Runner",
           "SaslSsl",
           "Scenario",
           "fetch_broker",
           "fetch_clients",
           "kill_all",
           "wait_for",
]
