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


QUICK = {s.name: s for v in CI_VERSIONS for s in applicable(v, quick=True)}


# Two parametrizations (not one list of pairs): pytest then starts one cluster per version.
@pytest.mark.parametrize("name", sorted(QUICK))
@pytest.mark.parametrize("kafka_bed", CI_VERSIONS, indirect=True)
def test_scenario(kafka_bed, name):
    bed = kafka_bed
    scenario = QUICK[name]
    if scenario not in applicable(bed.cluster.version, quick=True):
        pytest.skip(f"{name} needs Kafka {'.'.join(map(str, scenario.min_version))}+")
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
