"""The live view (state/live_view.py through the stateful step): a group's snapshot reflects the events
of the batch that read them, before the watermark passes them, while the records stay final and
independent of batching. Driven on the Kafka 2.7 capture (both logs and the offsets dump) with
the stateful step called the way Spark calls it (tests/support/stateful_driver.py)."""
from __future__ import annotations

import json

import pytest

from sinks.metrics import MetricsSink
from state import events as E
from state.outputs import OutputKind
from streaming.app.local import capture_events
from tests.support.capture_expectations import capture_inputs, utc_ms
from tests.support.stateful_driver import StatefulDriver

FAR_FUTURE = E.END_OF_INPUT_TS_MS
SC01 = "sc01-single-join-leave"
RECORDS = (OutputKind.REBALANCE, OutputKind.REMOVAL, OutputKind.ANOMALY)


@pytest.fixture(scope="module")
def events():
    return sorted(capture_events(*capture_inputs("kafka-2.7")), key=lambda e: e.sort_key())


def _by_second(events, window_ms=1000):
    """Micro-batches of one second of event time each (the lines as they would arrive live)."""
    batches: dict[int, list] = {}
    for e in events:
        batches.setdefault(e.ts_ms // window_ms, []).append(e)
    return [batches[k] for k in sorted(batches)]


def _run(events, lateness_ms, batches):
    driver = StatefulDriver(lateness_ms)
    per_batch = [driver.batch(b) for b in batches]
    per_batch.append(driver.tick(FAR_FUTURE))
    per_batch.append(driver.batch([]))
    return driver, per_batch


def _records(per_batch):
    return sorted(json.dumps([k, r], sort_keys=True) for out in per_batch for k, r in out if k in RECORDS)


def _snap(out, group):
    snaps = [r for k, r in out if k == OutputKind.SNAPSHOT and r["group"] == group]
    return snaps[-1] if snaps else None


def test_a_rebalance_shorter_than_the_lateness_is_seen_in_progress(events):
    lateness = 30_000   # the old default; the sc01 rebalance lasts 3.0 s
    start, join_end, assigned = utc_ms("19:21:26.163"), utc_ms("19:21:29.177"), utc_ms("19:21:29.191")
    batches = _by_second(events, 10)   # the JOIN end and the assignment are 14 ms apart
    driver = StatefulDriver(lateness)
    seen: dict[str, int] = {}
    for batch in batches:
        newest = max(e.ts_ms for e in batch)
        out = driver.batch(batch)
        snap = _snap(out, SC01)
        if snap is None:
            continue
        o = snap.get("rebalance_in_progress") or {}
        if snap["state"] == "PreparingRebalance" and o.get("started_at_ms") == start:
            seen.setdefault("start", newest)
            assert snap["provisional_events"] >= 1 and snap["final_through_ms"] < start
        if snap["state"] == "CompletingRebalance" and snap["generation"] == 1:
            seen.setdefault("join_end", newest)
        if snap["state"] == "Stable" and snap["generation"] == 1:
            seen.setdefault("stable", newest)
            # nothing final yet: the watermark is 30 s behind
            assert not [r for k, r in out if k == OutputKind.REBALANCE and r["group"] == SC01]
    # each phase is visible in the batch whose event time contains its line
    assert set(seen) == {"start", "join_end", "stable"}
    assert seen["start"] // 10 == start // 10
    assert seen["join_end"] // 10 == join_end // 10
    assert seen["stable"] // 10 == assigned // 10


def test_a_removal_is_pending_with_its_cause_at_once_and_final_later(events):
    left = utc_ms("19:21:48.071")
    driver = StatefulDriver(30_000)
    pending_at = final_at = None
    for batch in _by_second(events):
        out = driver.batch(batch)
        snap = _snap(out, SC01)
        if pending_at is None and snap and any(p["cause"] == "leave_group" for p in snap.get("pending_removals") or []):
            pending_at = max(e.ts_ms for e in batch)
            p = snap["pending_removals"][0]
            assert (p["root_cause"], p["removed_at_ms"]) == ("pending", left)
        if final_at is None and any(k == OutputKind.REMOVAL and r["group"] == SC01 for k, r in out):
            final_at = max(e.ts_ms for e in batch)
    assert pending_at is not None and pending_at // 1000 == left // 1000
    # the final record waits for the watermark and the decision window (minutes of event time)
    assert final_at is not None and final_at - left >= 60_000


@pytest.mark.parametrize("lateness_ms", [2_000, 30_000])
def test_final_records_do_not_depend_on_batching_or_the_live_view(events, lateness_ms):
    _, one = _run(events, lateness_ms, [events])
    _, many = _run(events, lateness_ms, _by_second(events))
    assert _records(many) == _records(one)
    assert len([1 for out in many for k, _ in out if k == OutputKind.REBALANCE]) >= 80
    # at the end nothing is provisional: the last snapshot of each group is the final model
    last = {}
    for out in many:
        for k, r in out:
            if k == OutputKind.SNAPSHOT:
                last[r["group"]] = r
    assert not [g for g, s in last.items() if "provisional_events" in s or "pending_removals" in s]


def test_live_gauges_on_metrics(events):
    driver = StatefulDriver(30_000)
    sink = MetricsSink([1.0, 10.0])
    until = utc_ms("19:21:48.500")
    for batch in _by_second([e for e in events if e.ts_ms <= until]):
        for kind, record in driver.batch(batch):
            sink.observe(kind, record)
    from prometheus_client import generate_latest
    page = generate_latest(sink.registry).decode()
    assert f'rebalance_monitor_group_pending_removals{{cause="leave_group",cluster="default",group="{SC01}"}} 1.0' in page
    # not counted yet: counters see final records only
    assert not [line for line in page.splitlines()
                if line.startswith("rebalance_monitor_member_removals_total{") and f'group="{SC01}"' in line]
    # /metrics?name[]=...: a registry restricted to some names finds the group gauges by them
    restricted = generate_latest(sink.registry.restricted_registry(
        ["rebalance_monitor_group_pending_removals", "rebalance_monitor_group_state"])).decode()
    assert f'rebalance_monitor_group_pending_removals{{cause="leave_group",cluster="default",group="{SC01}"}} 1.0' \
        in restricted
    assert f'rebalance_monitor_group_state{{cluster="default",group="{SC01}"' in restricted
    assert "rebalance_monitor_group_members{" not in restricted


def test_a_replay_without_the_live_view_ends_in_the_same_records_and_snapshots(events):
    """`replay` turns the live view off (ReplaySettings.live_view): no snapshot applies held events
    (removals the final model holds for their decision window still show as pending), fewer
    snapshots are sent, and the records and each group's last snapshot equal those of a run with it."""
    from functools import partial

    from streaming.spark.stateful import process_group

    def run(live_view):
        driver = StatefulDriver(30_000)
        function = partial(process_group, live_view=live_view)
        per_batch = [driver.batch(b, function) for b in _by_second(events)]
        per_batch.append(driver.batch([], function))
        driver.newest_ms = FAR_FUTURE
        per_batch.append(driver.batch([], function))
        per_batch.append(driver.batch([], function))
        snaps = [r for out in per_batch for k, r in out if k == OutputKind.SNAPSHOT]
        last = {r["group"]: r for r in snaps}
        return _records(per_batch), snaps, last

    records_live, snaps_live, last_live = run(True)
    records_final, snaps_final, last_final = run(False)
    assert records_final == records_live and len(records_live) > 80
    assert last_final == last_live
    assert not [s for s in snaps_final if "provisional_events" in s]
    assert [s for s in snaps_live if "provisional_events" in s]
    assert len(snaps_final) < len(snaps_live)
