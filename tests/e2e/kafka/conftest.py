"""Fixtures for the real-Kafka tests: one cluster (plus log shipper) per Kafka version and
test module, torn down even when a test fails. The bed lives in testbed/bed."""
from __future__ import annotations

import os

import pytest

from testbed.bed import KafkaCluster, LogShipper, kill_all
from testbed.bed.running import java_libs
from testbed.monitor import kill_monitors

# The CI selection: the ZooKeeper-era 2.8 and the newest 4.x served by Maven Central.
NEWEST_4X = os.environ.get("KAFKABED_NEWEST", "4.4.0")
CI_VERSIONS = os.environ.get("KAFKABED_VERSIONS", f"2.8.2,{NEWEST_4X}").split(",")


class Bed:
    def __init__(self, cluster, shipper, java_lib, streams_lib, out):
        self.cluster, self.shipper = cluster, shipper
        self.java_lib, self.streams_lib, self.out = java_lib, streams_lib, out


@pytest.fixture(scope="module")
def kafka_bed(request, tmp_path_factory):
    """request.param = Kafka version; yields a Bed with a started cluster and shipper."""
    version = request.param
    out = tmp_path_factory.mktemp(f"kafka-{version}")
    cluster = KafkaCluster(version, workdir=out / "cluster")
    shipper = None
    try:
        cluster.start()
        java_lib, streams_lib, _ = java_libs(version)
        shipper = LogShipper(cluster, "kafkabed-broker-logs").start()
        yield Bed(cluster, shipper, java_lib, streams_lib, out)
    finally:
        if shipper is not None:
            shipper.stop(drain=False, timeout=10)
        cluster.close(keep=True)


@pytest.fixture(scope="session", autouse=True)
def _kill_strays():
    yield
    kill_monitors()
    kill_all()
