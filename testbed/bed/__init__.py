"""The bed: real Apache Kafka brokers (2.8 ZooKeeper, 3.9/4.x KRaft) from Maven jars on
loopback, a log shipper, consumer-group members as processes, and scenarios with a
ground-truth timeline. No pytest dependency: tests/e2e/kafka, the benches and scripts/kafka-*
use it; the judge of the monitor on it is testbed/judge."""
from testbed.bed.cluster import KafkaCluster
from testbed.bed.jars import MavenError, fetch_broker, fetch_clients
from testbed.bed.log4jconf import LAYOUTS
from testbed.bed.members import Member, MemberSpec
from testbed.bed.procs import BedError, BedTimeout, kill_all, wait_for
from testbed.bed.runner import Runner
from testbed.bed.scenarios import SCENARIOS, Ctx, Expect, Scenario
from testbed.bed.shipper import LogShipper
from testbed.bed.tls import SaslSsl

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
