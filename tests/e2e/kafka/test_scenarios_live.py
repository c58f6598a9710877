"""Quick scenarios on real brokers (2.8 ZooKeeper and the newest 4.x KRaft): each one drives
real consumer processes, then checks that the broker's own server.log has the coordinator
lines the scenario must cause, that __consumer_offsets has the group's records, and that the
monitor's parse-logs turns those lines into at least as many events. The full matrix is
scripts/kafka-matrix."""
from __future__ import annotations

import pytest

from tests.support.kafkabed import checks
from tests.support.kafkabed.matrix import run_scenario
from tests.support.kafkabed.scenarios import Ctx, applicable, with_group

from .conftest import CI_VERSIONS

pytestmark = pytest.mark.kafka


# Only the scenarios each version can run (KIP-848 needs 4.0): grouped by version, so pytest
# starts one cluster per version.
QUICK = [(v, s) for v in CI_VERSIONS for s in sorted(applicable(v, quick=True), key=lambda s: s.name)]


@pytest.mark.parametrize(("kafka_bed", "scenario"), QUICK, indirect=["kafka_bed"],
                         ids=[f"{v}-{s.name}" for v, s in QUICK])
def test_scenario(kafka_bed, scenario):
    bed = kafka_bed
    ctx = with_group(Ctx(bed.cluster.version, "", "", has_java=bed.java_lib is not None), scenario,
                     f"t{bed.cluster.version.replace('.', '')}")
    res = run_scenario(bed.cluster, bed.shipper, scenario, ctx, bed.out, bed.java_lib, bed.streams_lib)
    detail = "; ".join(f"{c['label']} {c['found']}/{c['expected']}" for c in res.lines)
    assert res.passed, f"{scenario.name} on Kafka {bed.cluster.version}: {res.error} [{detail}] (see {bed.out})"
    assert res.seconds < 60, f"{scenario.name} took {res.seconds} s (the CI budget wants well under a minute)"
    assert res.timeline and all(e["ts_ms"] > 0 for e in res.timeline)
    events, _ = checks.parse_logs(bed.cluster.server_log_paths())
    for kind, lines, found in checks.smoke(events, ctx.group, [checks.LineCheck(**c) for c in res.lines]):
        assert found >= lines, f"parse-logs found {found} {kind} events of {ctx.group}, the broker wrote {lines} lines"
