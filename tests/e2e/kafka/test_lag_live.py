"""Consumer lag on real brokers (issue 54 items 1, 2): `rebalance-monitor run`'s
rebalance_monitor_group_topic_lag against Kafka's own `kafka-consumer-groups --describe`, run from
the same broker jars (testbed/bed/describe.py), before, during and after a rebalance, and once the
group has no members.

A producer writes RATE records a second to a 4-partition topic; member a consumes slower than
that (20 records per poll, 1 s after each), so the group's lag grows. Then a stops polling (alive:
its heartbeats go on) and b joins: the JOIN phase waits for a, commits stop, the end offsets grow.
a polls again and the rebalance ends (b catches up; compared once the monitor has read its
commits, see "catching up" below); both leave and the group is Empty. At each comparison
/metrics is scraped right before and right after --describe; Kafka's LAG per topic must lie
within one sampling interval of produced records (RATE x lag.sample_seconds) of the monitor's
two figures. The monitor samples at the default 10 s; its commits reach it through
__consumer_offsets a micro-batch later, and here without the commit hold (kafka.commit_hold_seconds
0; at its default of 5 s a group that catches up fast after a rebalance shows up to what it
consumed in those 5 s more than Kafka: docs/metrics.md, "Consumer lag"). The time lag must keep
growing while the group rebalances (not frozen).

The same phases with a KIP-848 consumer group (4.4.0, librdkafka): while a does not poll, its
revocation waits and the group is Reconciling. At its end b is killed instead of leaving, and
each of the group's rebalance_costs records (b's join, b's death) is compared, stop by stop, with
the records the producer wrote to each stopped partition over that stop (the producer writes to
the partitions in turn, so a partition's share is not a draw).

The rebalance b's join started is eager (kafka-python's range assignor): all 4 partitions stop
from its start to its end. Its rebalance_costs record's records_delayed must be within 5% of
the records the producer wrote in that window, counted by their timestamps on the topic."""
from __future__ import annotations

import bisect
import re
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from testbed.bed.describe import describe_group
from testbed.bed.members import MemberSpec
from testbed.bed.procs import wait_for
from testbed.bed.runner import Runner
from testbed.bed.scenarios import C_FENCED, C_LEFT, LEFT
from testbed.bed.workload import group_on
from testbed.lag_check import checking, record_figure
from testbed.metrics import parse
from testbed.monitor import MonitorProcess, MonitorSettings, ensure_offsets_topic, now_ms

from .conftest import CI_VERSIONS

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
RATE = 40.0                     # records a second, over the topic's 4 partitions
SAMPLE_S = 10.0                 # lag.sample_seconds: the default
TOLERANCE = RATE * SAMPLE_S     # one sampling interval of produced records
LAG, LAG_SECONDS = "rebalance_monitor_group_topic_lag", "rebalance_monitor_group_topic_lag_seconds"
GROUP, TOPIC = "lag-check", "lag-check-data"


def _lag(monitor: MonitorProcess, group: str, topic: str) -> tuple[float, float, str] | None:
    """(records, seconds, the group's state) on /metrics, or None without a lag series."""
    page = parse(monitor.scrape())
    records = page.value(LAG, cluster="bed", group=group, topic=topic)
    seconds = page.value(LAG_SECONDS, cluster="bed", group=group, topic=topic)
    states = [labels["state"] for labels, value in page.series("rebalance_monitor_group_state", group=group)
              if value == 1.0]
    if records is None or seconds is None:
        return None
    return records, seconds, states[0] if states else "none"


def _compare(monitor: MonitorProcess, cluster, phase: str, rows: list[dict], judged: bool = True,
             group: str = GROUP, topic: str = TOPIC) -> dict:
    before = _lag(monitor, group, topic)
    described = describe_group(cluster, group)
    after = _lag(monitor, group, topic)
    kafka = described.lag.get(topic)
    row = {"phase": phase, "judged": judged, "kafka": kafka, "before": before, "after": after, "describe_s":
           round(described.ended_s - described.started_s, 1), "text": described.text}
    if kafka is not None and before is not None and after is not None:
        low, high = min(before[0], after[0]) - TOLERANCE, max(before[0], after[0]) + TOLERANCE
        row["agrees"] = low <= kafka <= high
    else:
        row["agrees"] = False
    rows.append(row)
    print(f"lag {cluster.version} {phase}: kafka {kafka}, monitor before {before}, after {after}, "
          f"describe {row['describe_s']} s: {'agrees' if row['agrees'] else 'DISAGREES'}"
          f"{'' if judged else ' (not judged)'}", flush=True)
    return row


def _agreement_run(kafka_bed, tmp_path, group: str, topic: str, a_spec: MemberSpec, b_spec: MemberSpec,
                   rebalancing: str, a_after: str = "assigned",
                   after_empty: Callable[[MonitorProcess], Any] = lambda monitor: None,
                   b_goes: Callable[[Runner, Any, Any], None] | None = None) -> dict:
    """The phases above for one group: member a (slower than the producer) alone, then a stops
    polling and b joins (the group `rebalancing` until a polls again and prints `a_after`), both,
    and Empty. Its rows,
    the `during` rows, the `empty` row, the sink's rebalance_costs records, /metrics at the end and
    what `after_empty` found before the monitor stopped. `b_goes(runner, a, b)`: how b goes at
    the end (default: it leaves)."""
    cluster = kafka_bed.cluster
    ensure_offsets_topic(cluster)
    monitor = MonitorProcess(cluster.bootstrap, kafka_bed.shipper.topic, tmp_path / "monitor", MonitorSettings(),
                             extra_toml="commit_hold_seconds = 0\n")
    rows: list[dict] = []
    lag = partial(_lag, monitor, group, topic)
    compare = partial(_compare, monitor, cluster, rows=rows, group=group, topic=topic)
    try:
        monitor.start()
        with Runner(cluster, tmp_path / "runner", kafka_bed.shipper) as runner:
            runner.topic(topic, 4, 1, rate=RATE, in_turn=True)     # each partition RATE / 4 evenly
            a = runner.start(a_spec)
            wait_for(lag, 90, "the group's lag on /metrics", interval=0.5, alive=monitor.alive)
            # the lag builds up (a consumes about half of what comes) to more than the tolerance
            wait_for(lambda: (lag() or (0, 0, ""))[0] > TOLERANCE, 120,
                     "the group's lag to build up", interval=0.5, alive=monitor.alive)
            for _ in range(2):
                compare("before")
            # a rebalance that waits for a: it stops polling (its heartbeats go on), b joins
            runner.stop_polling(a)
            mark_a = a.mark()
            b = runner.start(b_spec, wait=False)
            wait_for(lambda: (lag() or (0, 0, ""))[2] == rebalancing, 60,
                     "the monitor to show the rebalance", interval=0.5, alive=monitor.alive)
            during = [compare("during")]
            for _ in range(2):      # each after a new sample: the lag moves while nobody consumes
                wait_for(lambda: (lag() or (0, 0, ""))[0] > during[-1]["after"][0],
                         3 * SAMPLE_S, "a new end-offset sample", interval=0.5, alive=monitor.alive)
                during.append(compare("during"))
            runner.resume_polling(a)
            runner.wait_joined(b, 60)
            a.wait_event(a_after, 60, mark_a)
            wait_for(lambda: (lag() or (0, 0, ""))[2] == "Stable", 60,
                     "the monitor to show the group Stable", interval=0.5, alive=monitor.alive)
            # Right after it, b catches up faster than records come while its commits are still on
            # their way to the monitor (a micro-batch): the monitor shows more lag than Kafka by
            # what b consumed meanwhile. Measured, not judged; judged once the monitor has read them.
            compare("catching up", judged=False)
            wait_for(lambda: (lag() or (1e9, 0, ""))[0] < during[-1]["after"][0] - TOLERANCE,
                     60, "the monitor to read the commits after the rebalance", interval=0.5, alive=monitor.alive)
            for _ in range(2):
                compare("after")
            (b_goes or (lambda runner, a, b: runner.leave(b)))(runner, a, b)
            runner.leave(a)
            wait_for(lambda: (lag() or (0, 0, ""))[2] == "Empty", 60,
                     "the monitor to show the group Empty", interval=0.5, alive=monitor.alive)
            empty = compare("empty")
            found = after_empty(monitor)
        # the sink's records first: the counter counts each one when it is written, so it has them all
        costs = monitor.records("rebalance_costs", group)
        page = parse(monitor.scrape())
    finally:
        code = monitor.stop()
    assert code == 0, monitor.log_tail()
    bad = [r for r in rows if r["judged"] and not r["agrees"]]
    record_figure("lag_agrees", not bad and len(rows) >= 8)
    assert not bad, "\n".join(f"{r['phase']}: kafka {r['kafka']}, monitor {r['before']} / {r['after']}\n{r['text']}"
                              for r in bad)
    # during the rebalance the lag went on: records and seconds grew, the group rebalancing throughout
    states = [r[k][2] for r in during for k in ("before", "after")]
    assert set(states) == {rebalancing}, states
    firsts, lasts = during[0]["before"], during[-1]["after"]
    assert lasts[0] > firsts[0] and lasts[1] > firsts[1], during
    assert empty["after"] is not None and empty["after"][0] > 0      # an Empty group keeps its lag
    assert page.total("rebalance_monitor_lag_sample_errors_total") == 0.0
    return {"costs": costs, "page": page, "found": found}


@pytest.mark.parametrize("kafka_bed", list(reversed(CI_VERSIONS)), indirect=True)
def test_lag_agrees_with_kafka_consumer_groups(kafka_bed, tmp_path):
    a = MemberSpec("kafka-python", GROUP, [TOPIC], "lag-a", slow_ms=1000, extra={"max_poll_records": 20},
                   max_poll_interval_ms=120000)
    b = MemberSpec("kafka-python", GROUP, [TOPIC], "lag-b", max_poll_interval_ms=120000)
    run = _agreement_run(kafka_bed, tmp_path, GROUP, TOPIC, a, b, "PreparingRebalance",
                         after_empty=_cost_of_bs_join)
    rebalance, cost = run["found"]
    costs, page, cluster = run["costs"], run["page"], kafka_bed.cluster
    # what b's join cost: every partition stopped for the whole rebalance (eager), and the records
    # that arrived meanwhile, as the producer wrote them
    start, end = rebalance["started_at_ms"], rebalance["completed_at_ms"]
    assert rebalance["partitions_stopped"] == 4, rebalance
    assert rebalance["partition_seconds_stopped"] == pytest.approx(4 * (end - start) / 1000, abs=0.01), rebalance
    produced = _produced_between(cluster.bootstrap, TOPIC, start, end)
    error = abs(cost["records_delayed"] - produced) / produced
    print(f"records_delayed {cluster.version}: monitor {cost['records_delayed']}, producer {produced} over "
          f"{(end - start) / 1000:.1f} s: error {error:.2%}", flush=True)
    record_figure("records_delayed_error_max", round(error, 4))
    assert produced > RATE * 10 and error <= 0.05, (cost, produced)
    counted = page.value("rebalance_monitor_rebalance_records_delayed_total", cluster="bed", group=GROUP)
    assert counted is not None and counted >= sum(c["records_delayed"] or 0 for c in costs), costs


# KIP-848 groups exist from 4.0 on: the newest version. librdkafka (confluent-kafka) with
# group.protocol=consumer; a takes up to 100 records a poll and sleeps 5 s after each (20 a second,
# half of RATE). When b joins, the coordinator asks a to revoke half its partitions, which waits
# for a's next poll (its revoke callback): the group is Reconciling, nobody consumes, the end
# offsets grow. a gets nothing new: it prints "revoked", not "assigned".
@pytest.mark.parametrize("kafka_bed", [CI_VERSIONS[-1]], indirect=True)
def test_lag_agrees_with_kafka_consumer_groups_for_a_kip848_group(kafka_bed, tmp_path):
    group, topic = "lag-check-848", "lag-check-848-data"
    a = MemberSpec("confluent", group, [topic], "lag848-a", protocol="consumer", slow_ms=5000,
                   max_poll_interval_ms=120000)
    b = MemberSpec("confluent", group, [topic], "lag848-b", protocol="consumer", max_poll_interval_ms=120000)
    run = _agreement_run(kafka_bed, tmp_path, group, topic, a, b, "Reconciling", a_after="revoked",
                         after_empty=partial(_measured_costs, group=group, count=2), b_goes=_kill_b)
    # What each rebalance cost, stop by stop (each its own span: from the owner's release, or its
    # last heartbeat before its fence, until a member's record gained the partition), against the
    # records the producer wrote to that partition in that span. b's join: a released 2 partitions
    # and b gained them within a heartbeat (well under a second: a few records each, where one
    # record of rounding per stop end is more than 5%); b's death: its 2 partitions stopped from its
    # last heartbeat, 6 s (the session) before its fence, until a gained them (over 100 records).
    by_partition = _timestamps_by_partition(kafka_bed.cluster.bootstrap, topic)
    long_stops = 0
    for cost in run["found"]:
        produced = sum(bisect.bisect_right(by_partition[p], end) - bisect.bisect_left(by_partition[p], start)
                       for _, p, start, end in cost["stops"])
        error = abs(cost["records_delayed"] - produced) / max(produced, 1)
        print(f"records_delayed {kafka_bed.cluster.version} kip848: monitor {cost['records_delayed']}, producer "
              f"{produced} over {len(cost['stops'])} stops ({cost['stops']}): error {error:.2%}", flush=True)
        assert cost["stops_not_listed"] == 0, cost        # b's join's stops can be a few ms: no record
        if produced >= 100:
            long_stops += 1
            record_figure("records_delayed_error_max", round(error, 4))
            assert error <= 0.05, (cost, produced)
        else:
            assert abs(cost["records_delayed"] - produced) <= 2 * len(cost["stops"]), (cost, produced)
    assert long_stops >= 1, run["found"]


def _kill_b(runner: Runner, a: Any, b: Any) -> None:
    """b killed (-9): fenced when its session expires; a takes over its partitions."""
    owned, mark = b.owned(), a.mark()
    runner.kill(b)
    runner.wait_taken_over(owned, [a], [mark], 60)


def _measured_costs(monitor: MonitorProcess, group: str, count: int = 1) -> list[dict]:
    """The group's rebalance_costs records with a records_delayed (they follow their rebalance by
    about one sampling interval); at least `count`."""
    def found() -> list[dict]:
        return [c for c in monitor.records("rebalance_costs", group) if c["records_delayed"] is not None]
    wait_for(lambda: len(found()) >= count, 60, f"{count} measured rebalance_costs records", interval=0.5,
             alive=monitor.alive)
    return found()


def _cost_of_bs_join(monitor: MonitorProcess) -> tuple[dict, dict]:
    """The rebalance b's join started (the newest member_join one) and its rebalance_costs record,
    which follows once the end offsets after its completion are sampled."""
    def found() -> tuple[dict, dict] | None:
        joins = [r for r in monitor.records("rebalances", GROUP) if r["trigger"] == "member_join"]
        if not joins:
            return None
        rebalance = max(joins, key=lambda r: r["generation"])
        costs = [c for c in monitor.records("rebalance_costs", GROUP)
                 if (c["generation"], c["started_at_ms"]) == (rebalance["generation"], rebalance["started_at_ms"])]
        return (rebalance, costs[0]) if costs else None
    wait_for(found, 60, "the rebalance_costs record of b's join", interval=0.5, alive=monitor.alive)
    pair = found()
    assert pair is not None
    return pair


def _produced_between(bootstrap: str, topic: str, start_ms: int, end_ms: int) -> int:
    """The records of `topic` whose (producer) timestamp lies in [start_ms, end_ms]."""
    return sum(start_ms <= t <= end_ms for t in _timestamps(bootstrap, topic))


def _timestamps(bootstrap: str, topic: str) -> list[int]:
    """The (producer) timestamps of every record of `topic`, sorted."""
    return sorted(t for times in _timestamps_by_partition(bootstrap, topic).values() for t in times)


def _timestamps_by_partition(bootstrap: str, topic: str) -> dict[int, list[int]]:
    """The (producer) timestamps of every record of `topic`, per partition."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lag-check-counter", "enable.auto.commit": False,
                         "log_level": 2})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        seen = dict.fromkeys(partitions, 0)
        times: dict[int, list[int]] = {p: [] for p in partitions}
        deadline = now_ms() + 60_000
        while any(seen[p] < ends[p] for p in partitions) and now_ms() < deadline:
            for msg in consumer.consume(500, timeout=1.0):
                if msg.error():
                    continue
                seen[msg.partition() or 0] = (msg.offset() or 0) + 1
                times[msg.partition() or 0].append(msg.timestamp()[1])
        assert all(seen[p] >= ends[p] for p in partitions), (seen, ends)
        return times
    finally:
        consumer.close()


# Catch-up (issue 54 item 3) against the members' own consumption: two kafka-python members that
# consume faster than RATE (committing every second); a stops polling and b joins, so an eager
# rebalance stops all 4 partitions for about one sampling interval; then both drain what waited.
# The truth: the group's lag is what the producer wrote (record timestamps) minus what the members
# consumed (their own running totals, printed about every second); it caught up at the first
# total after the completion that brings it back to its level at the rebalance's start. The
# monitor goes by commits (one a second) and its end-offset samples: within CATCH_UP_SLACK_S.
# It sees each partition's newest commit per micro-batch (docs/impact.md), so on a busy machine
# it may also be as late as the first batch planned after the members' commits showed it
# (CI at e691fc2: 4.08 s against 1.06 s, batches of a few seconds there; 1.02 s against 1.13 s here).
CATCH_UP_SLACK_S = 3.0
COMMIT_S = 1.0                  # the members' auto.commit.interval.ms


@pytest.mark.parametrize("kafka_bed", [CI_VERSIONS[-1]], indirect=True)
def test_the_catch_up_after_a_rebalance_is_the_members_own(kafka_bed, tmp_path):
    cluster = kafka_bed.cluster
    ensure_offsets_topic(cluster)
    group, topic = "lag-catch-up", "lag-catch-up-data"
    monitor = MonitorProcess(cluster.bootstrap, kafka_bed.shipper.topic, tmp_path / "monitor", MonitorSettings(),
                             extra_toml="commit_hold_seconds = 0\n")
    try:
        monitor.start()
        with Runner(cluster, tmp_path / "runner", kafka_bed.shipper) as runner:
            runner.topic(topic, 4, 1, rate=RATE)
            a = runner.start(MemberSpec("kafka-python", group, [topic], "catch-a", max_poll_interval_ms=120000))
            wait_for(partial(_lag, monitor, group, topic), 90, "the group's lag on /metrics", interval=0.5,
                     alive=monitor.alive)
            runner.stop_polling(a)
            mark_a = a.mark()
            b = runner.start(MemberSpec("kafka-python", group, [topic], "catch-b", max_poll_interval_ms=120000),
                             wait=False)
            wait_for(lambda: (_lag(monitor, group, topic) or (0, 0, ""))[2] == "PreparingRebalance", 60,
                     "the monitor to show the rebalance", interval=0.5, alive=monitor.alive)
            for _ in range(2):      # what waits: records of at least one sampling interval
                wait_for(partial(_lag_above, monitor, group, topic, (_lag(monitor, group, topic) or (0, 0, ""))[0]),
                         3 * SAMPLE_S, "a new end-offset sample", interval=0.5, alive=monitor.alive)
            runner.resume_polling(a)
            runner.wait_joined(b, 60)
            a.wait_event("assigned", 60, mark_a)

            def found() -> tuple[dict, dict, dict] | None:
                joins = [r for r in monitor.records("rebalances", group) if r["trigger"] == "member_join"
                         and r.get("completed_at_ms")]
                if not joins:
                    return None
                r = max(joins, key=lambda r: r["generation"])
                key = (r["generation"], r["started_at_ms"])
                costs = [c for c in monitor.records("rebalance_costs", group)
                         if (c["generation"], c["started_at_ms"]) == key]
                ups = [c for c in monitor.records("rebalance_catch_ups", group)
                       if (c["generation"], c["started_at_ms"]) == key]
                return (r, costs[0], ups[0]) if costs and ups else None
            wait_for(found, 90, "the catch-up record of b's join", interval=0.5, alive=monitor.alive)
            rebalance, cost, caught = found() or ({}, {}, {})
            runner.leave(b)
            runner.leave(a)
            consumed = [(e["ts_ms"], m.spec.client_id, e["total"]) for m in (a, b) for e in m.events
                        if e.get("event") == "consumed"]
    finally:
        code = monitor.stop()
    assert code == 0, monitor.log_tail()
    produced = _timestamps(cluster.bootstrap, topic)
    start, end = rebalance["started_at_ms"], rebalance["completed_at_ms"]
    truth_before = _truth_lag(produced, consumed, start)
    truth_at = next((t for t, _, _ in sorted(consumed) if t >= end
                     and _truth_lag(produced, consumed, t) <= truth_before), None)
    print(f"catch-up {cluster.version}: monitor lag_before {cost['lag_before']}, {caught['catch_up_seconds']} s "
          f"(lag after {caught['lag_after']}); members: lag {truth_before} at the start, back to it "
          f"{None if truth_at is None else (truth_at - end) / 1000} s after the completion", flush=True)
    assert cost["records_delayed"] > RATE * SAMPLE_S / 2, cost
    assert abs(cost["lag_before"] - truth_before) <= 2 * RATE, (cost, truth_before)
    assert truth_at is not None and caught["catch_up_seconds"] is not None, (caught, consumed)
    late_s = caught["catch_up_seconds"] - (truth_at - end) / 1000
    planned = monitor.planned_at_s()
    # the first batch planned after a commit that shows the catch-up (a commit interval and a
    # print of the members' totals after truth_at)
    seen_by = next((t for t in planned if t >= truth_at / 1000 + 2 * COMMIT_S), None)
    allowed_s = max(CATCH_UP_SLACK_S, 0.0 if seen_by is None else seen_by + 0.05 - truth_at / 1000)
    assert -CATCH_UP_SLACK_S <= late_s <= allowed_s, (caught, truth_at, end, "batches planned at",
                                                      [t for t in planned if end / 1000 - 5 <= t <= truth_at / 1000 + 15])
    # the report made of that event sink lists the rebalance among the costliest, with both figures
    page = tmp_path / "report.html"
    made = subprocess.run([sys.executable, "-m", "streaming.app.cli", "report", str(monitor.events_dir), "-o",
                           str(page)], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]
    rows = [row for row in page.read_text().split('<tr class="cost-row">')[1:] if f">{group}</a>" in row]
    assert rows and rows[0].split("</tr>")[0].endswith(
        f'<td class="num">{cost["records_delayed"]:,}</td><td class="num">{caught["catch_up_seconds"]:,.1f}</td>'), rows


def _lag_above(monitor: MonitorProcess, group: str, topic: str, records: float) -> bool:
    return (_lag(monitor, group, topic) or (0, 0, ""))[0] > records


def _truth_lag(produced: list[int], consumed: list[tuple[int, str, int]], at_ms: int) -> int:
    """What the producer had written by `at_ms` minus what the members had consumed by then (each
    member's newest running total at or before it)."""
    totals: dict[str, int] = {}
    for t, member, total in sorted(consumed):
        if t <= at_ms:
            totals[member] = total
    return bisect.bisect_right(produced, at_ms) - sum(totals.values())


DOWN, GONE = "lag-down-data", "lag-gone-data"
UNKNOWN_SAMPLE_S = 3.0          # short rounds: a lag is unknown after 3 of them
UNKNOWN, ERRORS = "rebalance_monitor_group_lag_unknown", "rebalance_monitor_lag_sample_errors_total"


PARTITION_LAG = "rebalance_monitor_group_partition_lag"


# The newest version only in CI (45 minutes in all); both passed on 2.8.2 and 4.4.0 (KAFKABED_VERSIONS).
@pytest.mark.parametrize("kafka_bed", [CI_VERSIONS[-1]], indirect=True)
def test_lag_unknown_when_the_end_offsets_cannot_be_had(kafka_bed, tmp_path):
    """Issue 54 item 5 on real brokers: a group commits to a topic whose only replicas are on
    broker 2 and to one on broker 1, and leaves (Empty, its offsets kept). Broker 2 stops: that
    topic's lag is unknown (reason broker_unavailable, counted, one log line), the other's is still
    shown (one request per leader). The other topic is deleted: its lag goes, never shown stale.
    Broker 2 comes back: the lag with it, and after a restart of the monitor too (the Empty group's
    committed offsets fetched from the cluster). Before all that, 2 partitions are added to the
    first topic while the member consumes it (placed by the cluster, on either broker): their lag appears (per partition, opted in) as the
    member commits them, and matches what the producer wrote. The monitor neither crashes nor logs
    a traceback."""
    cluster = kafka_bed.cluster
    ensure_offsets_topic(cluster)
    group = group_on(cluster, 1, "lag-unknown")        # its coordinator stays up
    monitor = MonitorProcess(cluster.bootstrap, kafka_bed.shipper.topic, tmp_path / "monitor", MonitorSettings(),
                             extra_toml=f"\n[lag]\nsample_seconds = {UNKNOWN_SAMPLE_S}\n"
                                        f"partition_groups = '^{re.escape(group)}$'\n")
    stopped = False
    try:
        monitor.start()
        with Runner(cluster, tmp_path / "runner", kafka_bed.shipper) as runner:
            cluster.create_topic(DOWN, 2, assignment=[[2], [2]])
            cluster.create_topic(GONE, 2, assignment=[[1], [1]])
            # librdkafka commits only the partitions it consumed from: a record on each
            for topic in (DOWN, GONE):
                for partition in (0, 1):
                    cluster.produce(topic, 1, partition=partition)
            # the member looks for new partitions every 2 s (librdkafka's default: 5 minutes). Not
            # kafka-python: 3.0.12 once did not rejoin for the added partitions within 60 s (CI).
            member = runner.start(MemberSpec("confluent", group, [DOWN, GONE], "lag-u",
                                             extra={"topic.metadata.refresh.interval.ms": 2000}))
            for topic in (DOWN, GONE):
                wait_for(partial(_lag, monitor, group, topic), 90, f"the lag of {topic}", interval=0.5,
                         alive=monitor.alive)
            # partitions added: 7 records on the new partition 2 before the member has it (no commit
            # there: it reads from the start, auto.offset.reset earliest), then 9 on it and 4 on 3
            mark = member.mark()
            runner.add_partitions(DOWN, 4, [group])
            cluster.produce(DOWN, 7, partition=2)
            runner.wait_given(member, mark, 60)
            cluster.produce(DOWN, 9, partition=2)
            cluster.produce(DOWN, 4, partition=3)

            def new_partitions() -> dict[str, float]:
                page = parse(monitor.scrape())
                return {labels["partition"]: value for labels, value in page.series(PARTITION_LAG, group=group, topic=DOWN)}
            wait_for(lambda: {"2", "3"} <= set(new_partitions()) and not any(new_partitions().values()),
                     6 * UNKNOWN_SAMPLE_S + 60, "the lag of the added partitions, consumed", interval=0.5,
                     alive=monitor.alive)
            assert set(new_partitions()) == {"0", "1", "2", "3"}, new_partitions()
            runner.leave(member)
        cluster.stop_broker(2)
        stopped = True

        def unknown(reason: str, topic_shown: str | None) -> bool:
            page = parse(monitor.scrape())
            shown = {labels["topic"] for labels, _ in page.series(LAG, group=group)}
            return (page.value(UNKNOWN, cluster="bed", group=group, reason=reason) == 1.0
                    and shown == ({topic_shown} if topic_shown else set()))
        wait_for(lambda: unknown("broker_unavailable", GONE), 6 * UNKNOWN_SAMPLE_S + 30, "broker_unavailable",
                 interval=0.5, alive=monitor.alive)
        page = parse(monitor.scrape())
        assert (page.value(ERRORS, cluster="bed", reason="broker_unavailable") or 0) > 0
        cluster.admin().delete_topics([GONE], operation_timeout=30)[GONE].result(30)
        wait_for(lambda: unknown("broker_unavailable", None), 6 * UNKNOWN_SAMPLE_S + 30, f"the lag of {GONE} to go",
                 interval=0.5, alive=monitor.alive)
        cluster.start_broker(2)
        stopped = False
        wait_for(lambda: _lag(monitor, group, DOWN), 6 * UNKNOWN_SAMPLE_S + 60, f"the lag of {DOWN} back", interval=0.5,
                 alive=monitor.alive)
        assert parse(monitor.scrape()).series(UNKNOWN, group=group) == []
        # 25 records nobody consumes, then a restart: the query does not read the Empty group's
        # commits again; its offsets come from the cluster (OffsetFetch), its lag with them
        cluster.produce(DOWN, 25)
        wait_for(lambda: (_lag(monitor, group, DOWN) or (0, 0, ""))[0] == 25, 6 * UNKNOWN_SAMPLE_S + 30,
                 "a lag of 25 records", interval=0.5, alive=monitor.alive)
        monitor.restart()
        wait_for(lambda: (_lag(monitor, group, DOWN) or (0, 0, ""))[0] == 25, 6 * UNKNOWN_SAMPLE_S + 60,
                 "the lag of 25 records after the restart", interval=0.5, alive=monitor.alive)
    finally:
        if stopped:
            cluster.start_broker(2)
        code = monitor.stop()
    log = monitor.log_path.read_text()
    assert code == 0, monitor.log_tail()
    assert log.count("end offsets unavailable (broker_unavailable) for") == 1, monitor.log_tail()
    assert "end offsets unavailable (broker_unavailable) ended" in log, monitor.log_tail()
    assert "Traceback" not in log, monitor.log_tail()
    # every group known at the start with no commit read since: this one, and the groups the
    # module's earlier tests left on the same cluster (Empty, their offsets kept)
    fetched = re.search(r"lag: the committed offsets of (\d+) of (\d+) group\(s\) known at the start fetched", log)
    assert fetched and fetched[1] == fetched[2] and int(fetched[1]) >= 1, monitor.log_tail()
    cluster.await_in_sync()


AT_RISK = "rebalance_monitor_group_members_at_risk"
RISK_POLL_MS = 40_000           # the slow member's max.poll.interval.ms: at risk after 20 s without a commit
LEAD_S = 10.0                   # issue 54: flagged at least this long before the poll-timeout removal


# kafka-python and librdkafka's KIP-848 consumer on the newest version in CI; under scripts/lag-check
# kafka-python on every version, and the Java client and librdkafka (which commits only changed
# offsets: an idle member commits nothing) classic on the newest.
KIP848_RISK = (CI_VERSIONS[-1], "confluent", "consumer")
RISK_CASES = ([(v, "kafka-python", "classic") for v in CI_VERSIONS]
              + [(CI_VERSIONS[-1], lib, "classic") for lib in ("confluent", "java")] + [KIP848_RISK]
              if checking() else [(CI_VERSIONS[-1], "kafka-python", "classic"), KIP848_RISK])


@pytest.mark.parametrize(("kafka_bed", "library", "protocol"), RISK_CASES, indirect=["kafka_bed"])
def test_a_slow_consumer_is_at_risk_before_its_poll_timeout_and_an_idle_one_never(kafka_bed, library, protocol,
                                                                                   tmp_path):
    """Issue 54 item 4 on real brokers: a kafka-python member with records waiting stops polling
    (a slow batch; its heartbeats go on) until its max.poll.interval.ms (40 s) removes it. The
    monitor must count it in rebalance_monitor_group_members_at_risk at least 10 s before the
    broker's line of its leave (or fence), and log it once. A member of another group on a topic nobody
    writes to polls on and commits nothing new: never at risk. A KIP-848 member's assignment names
    its topics by id: the monitor names them from the metadata."""
    cluster = kafka_bed.cluster
    ensure_offsets_topic(cluster)
    name = library if protocol == "classic" else f"{library}-{protocol}"
    slow_group, idle_group = f"risk-slow-{name}", f"risk-idle-{name}"
    data, idle_data = f"risk-data-{name}", f"risk-idle-data-{name}"
    monitor = MonitorProcess(cluster.bootstrap, kafka_bed.shipper.topic, tmp_path / "monitor", MonitorSettings(),
                             extra_toml="commit_hold_seconds = 0\n")
    seen: list[tuple[float, float, float]] = []       # (wall s, slow group's gauge, idle group's gauge)

    def gauges() -> tuple[float, float]:
        page = parse(monitor.scrape())
        slow = page.value(AT_RISK, cluster="bed", group=slow_group)
        idle = page.value(AT_RISK, cluster="bed", group=idle_group)
        seen.append((now_ms() / 1000, -1.0 if slow is None else slow, -1.0 if idle is None else idle))
        return seen[-1][1], seen[-1][2]
    try:
        monitor.start()
        with Runner(cluster, tmp_path / "runner", kafka_bed.shipper, java_lib=kafka_bed.java_lib) as runner:
            runner.topic(data, 2, 1, rate=RATE)
            runner.topic(idle_data, 2, 1, rate=0)
            slow = runner.start(MemberSpec(library, slow_group, [data], "risk-a", max_poll_interval_ms=RISK_POLL_MS,
                                           protocol=protocol))
            runner.start(MemberSpec(library, idle_group, [idle_data], "risk-i", max_poll_interval_ms=RISK_POLL_MS,
                                    protocol=protocol))
            cluster.produce(idle_data, 10)          # consumed once, then idle
            # both groups judged: their commits read, their end offsets sampled
            wait_for(lambda: min(gauges()) == 0.0, 120, "both groups' at-risk series at 0", interval=0.5,
                     alive=monitor.alive)
            since = kafka_bed.shipper.mark()
            runner.stop_polling(slow)
            flagged = wait_for(lambda: gauges()[0] == 1.0 and seen[-1][0], RISK_POLL_MS / 1000 + 30,
                               "the slow member at risk", interval=0.5, alive=monitor.alive)
            # librdkafka's KIP-848 consumer "leaves" on its poll timeout by no longer heartbeating: 4.4
            # fences it when its session expires
            left_line = LEFT if protocol == "classic" else f"({C_LEFT}|{C_FENCED})"
            (left,) = runner.wait_log(left_line.replace("{g}", re.escape(slow_group)), RISK_POLL_MS / 1000 + 30,
                                      since)[:1]
            runner.resume_polling(slow)
            wait_for(lambda: gauges()[0] == 0.0, 60, "the slow member no longer at risk", interval=0.5,
                     alive=monitor.alive)
    finally:
        code = monitor.stop()
    assert code == 0, monitor.log_tail()
    lead_s = left.read_ms / 1000 - flagged
    print(f"at risk {lead_s:.1f} s before the poll-timeout leave (flagged {flagged:.1f}, left "
          f"{left.read_ms / 1000:.1f})", flush=True)
    record_figure("at_risk_lead_seconds_min", round(lead_s, 1))
    record_figure("idle_at_risk", sum(1 for _, _, idle in seen[1:] if idle > 0))
    assert lead_s >= LEAD_S, seen
    assert all(idle == 0.0 for _, _, idle in seen[1:] if idle >= 0), seen          # never at risk
    log = monitor.log_path.read_text()
    assert log.count(f"of group {slow_group} is at risk of a poll timeout") == 1, monitor.log_tail()
    assert f"of group {idle_group} is at risk" not in log
