"""The bed's log layouts and its shipper's rotation path on real brokers: 4.x with the log4j2
ECS JSON layout, 2.8 with the Strimzi pattern on log4j 1.x, both rolling server.log by size so
the tailer must follow a renamed file without losing or repeating a line."""
from __future__ import annotations

import json
import re

import pytest

from tests.support.kafkabed import KafkaCluster, LogShipper, wait_for

from .conftest import NEWEST_4X

pytestmark = pytest.mark.kafka
STRIMZI = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (INFO|WARN|ERROR|DEBUG) +\[[^\]]+\] \S+:\d+ - ")


@pytest.mark.parametrize("version,layout", [(NEWEST_4X, "json"), ("2.8.2", "strimzi4")])
def test_layout_and_rotation(version, layout, tmp_path):
    with KafkaCluster(version, brokers=1, workdir=tmp_path / "cluster", layout=layout,
                      rotate_bytes=30_000) as cluster:
        with LogShipper(cluster, "kafkabed-broker-logs", envelope=True) as shipper:
            tailer = shipper.tailers[1]
            n = 0

            def rotated():
                nonlocal n
                n += 1
                cluster.create_topic(f"layout-{n}", 3, 1)   # each topic logs a few KB
                return tailer.rotations >= 1
            wait_for(rotated, 120, f"server.log of Kafka {version} to roll over (size policy)", interval=0.2)
            current: list = []

            def shipped_in_order():
                """Every line of the new file shipped, in order (the broker may still be writing)."""
                nonlocal current
                current = cluster.server_log_path(1).read_text().splitlines()
                return [ln.text for ln in shipper.lines(1)][-len(current):] == current
            wait_for(shipped_in_order, 30, "the shipper to have shipped the new server.log in order")
            shipper.wait_acked()
        texts = [ln.text for ln in shipper.lines(1)]
        files = list(cluster.server_log_path(1).parent.glob("server.log*"))
        written = [ln for p in files for ln in p.read_text().splitlines()]
        assert set(texts) <= set(written), "shipped a line that no server.log file holds"
        assert all(ln.acked_ms and ln.error is None for ln in shipper.lines(1))
        if layout == "json":
            docs = [json.loads(t) for t in current]
            assert all("message" in d and "log.logger" in d for d in docs), docs[:2]
        else:
            assert sum(1 for t in current if STRIMZI.match(t)) > 0.9 * len(current), current[:3]
