"""A rebalance started by a LeaveGroup that is later decided a poll timeout says `poll_timeout`
in every output (issue 27 item 2): the record is emitted with trigger_final false, a
rebalance_trigger record follows once the removal is decided, the replay files and the report
apply it, and rebalances_total counts the rebalance once, with its decided trigger.

Real input: the Kafka 2.7 capture's sc05-poll-timeout group (a Java consumer whose poll timed
out; brokers before 3.2 log no client reason) and the 4.0 capture's k4-sc05-poll-timeout."""
from __future__ import annotations

import pytest

from sinks.exposition import text
from sinks.event_sink import EventSink
from sinks.files import RECORD_FILES
from sinks.metrics import MetricsSink
from sinks.report.data import build
from state import events as E
from state.local import FAR_FUTURE_MS
from state.machine import GroupStateMachine
from state.model import GroupModel
from state.outputs import OutputKind, apply_trigger_decisions
from streaming.app.local import run_local
from tests.support.capture_expectations import capture_inputs
from tests.support.machine_events import C1, as_sorted_json, machine_outputs_in_batches

CASES = [("kafka-2.7", "sc05-poll-timeout", 3), ("kafka-4.0", "k4-sc05-poll-timeout", 2)]


@pytest.mark.parametrize(("capture", "group", "generation"), CASES)
def test_the_leave_decided_a_poll_timeout_gives_its_rebalance_the_trigger(capture, group, generation):
    outputs = machine_outputs_in_batches(capture, group)
    [emitted] = [r for k, r in outputs if k == OutputKind.REBALANCE and r["generation"] == generation]
    assert (emitted["trigger"], emitted["trigger_final"]) == ("member_leave", False)
    [decision] = [r for k, r in outputs if k == OutputKind.REBALANCE_TRIGGER]
    [removal] = [r for k, r in outputs if k == OutputKind.REMOVAL and r["cause"] == "poll_timeout"]
    assert decision["trigger_member"] == removal["member_id"] == emitted["trigger_member"]
    assert (decision["previous_trigger"], decision["trigger"], decision["generation"]) == \
        ("member_leave", "poll_timeout", generation)
    assert decision["decided_at_ms"] > removal["removed_at_ms"]
    # decided when the client came back, not a leave window (60 s) later
    assert decision["decided_at_ms"] - removal["removed_at_ms"] < 20_000
    # every other rebalance of the group is final when emitted
    assert all(r["trigger_final"] for k, r in outputs if k == OutputKind.REBALANCE and r is not emitted)
    [applied] = [r for r in apply_trigger_decisions([r for k, r in outputs if k == OutputKind.REBALANCE],
                                                    [decision]) if r["generation"] == generation]
    assert (applied["trigger"], applied["trigger_final"]) == ("poll_timeout", True)


@pytest.mark.parametrize("batches", [2, 5, 40])
def test_the_decision_does_not_depend_on_the_batching(batches):
    one = machine_outputs_in_batches("kafka-2.7", "sc05-poll-timeout")
    many = machine_outputs_in_batches("kafka-2.7", "sc05-poll-timeout", batches)
    assert as_sorted_json(many) == as_sorted_json(one)


def _counts(page: str, group: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in page.splitlines():
        if line.startswith("rebalance_monitor_rebalances_total{") and f'group="{group}"' in line:
            trigger = line.split('trigger="')[1].split('"')[0]
            outcome = line.split('outcome="')[1].split('"')[0]
            out[f"{trigger}/{outcome}"] = out.get(f"{trigger}/{outcome}", 0) + float(line.rsplit(" ", 1)[1])
    return out


@pytest.mark.parametrize(("capture", "group", "generation"), CASES)
def test_rebalances_total_counts_it_once_with_the_decided_trigger(tmp_path, capture, group, generation):
    outputs = machine_outputs_in_batches(capture, group)
    rebalances = [r for k, r in outputs if k == OutputKind.REBALANCE]
    metrics = MetricsSink([1.0])
    for kind, record in outputs:
        metrics.observe(kind, record)
    counts = _counts(text(metrics.registry), group)
    assert sum(counts.values()) == len(rebalances)
    final = apply_trigger_decisions(rebalances, [r for k, r in outputs if k == OutputKind.REBALANCE_TRIGGER])
    expected: dict[str, float] = {}
    for r in final:
        expected[f"{r['trigger']}/{r['outcome']}"] = expected.get(f"{r['trigger']}/{r['outcome']}", 0) + 1
    assert counts == expected and expected.get("poll_timeout/stable") == 1
    # A restarted monitor rebuilds its counters from the event sink: the same counts.
    sink = EventSink(str(tmp_path))
    by_kind: dict[str, list[dict]] = {}
    for kind, record in outputs:
        by_kind.setdefault(kind, []).append(record)
    sink.write_batch(0, by_kind)
    again = MetricsSink([1.0])
    for kind in RECORD_FILES:
        for record in sink.records(kind):
            again.observe(kind, record)
    assert _counts(text(again.registry), group) == counts
    # `report` on the event sink shows the decided trigger
    report = build([tmp_path])
    [view] = [v for v in report.groups if v.group == group]
    assert [r["trigger"] for r in view.rebalances if r["generation"] == generation] == ["poll_timeout"]


def test_the_replay_reference_carries_the_decided_trigger():
    out = run_local(*capture_inputs("kafka-2.7"))
    [r] = [r for r in out[OutputKind.REBALANCE] if r["group"] == "sc05-poll-timeout" and r["generation"] == 3]
    assert (r["trigger"], r["trigger_final"]) == ("poll_timeout", True)
    assert all(r["trigger_final"] for r in out[OutputKind.REBALANCE])


# ----------------------------------------------------------------------------- synthetic
def _leave_after(gap_ms: int, *, rejoin: bool):
    """Generation 1 of C1 and C2 (max.poll.interval.ms 8 s, no commits), then C2 leaves without a
    client reason `gap_ms` after the generation's rebalance started, the group rebalances to
    generation 2 without it, and (rejoin) the same client joins again 3 s later."""
    from tests.support.machine_events import C2, CLIENT_IDS, ev, md_member, metadata, prepare, stable_group
    evs, _ = stable_group([C1, C2], t0=1000)
    evs = [e for e in evs if e.kind != E.GROUP_METADATA]
    evs.append(metadata(4012, 1, [md_member(C1, rebalance=8000), md_member(C2, rebalance=8000)]))
    leave = 1000 + gap_ms
    evs += [ev(leave, E.MEMBER_LEFT, 1, C2, data={}),
            prepare(leave + 1, 1, "member_leave", C2, f"removing member {C2} on LeaveGroup"),
            ev(leave + 20, E.JOIN_COMPLETE, 2), ev(leave + 30, E.ASSIGNMENT_RECEIVED, 2, C1, data={"members": 1}),
            metadata(leave + 32, 2, [md_member(C1, rebalance=8000)])]
    back = "consumer-orders-2-9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
    if rejoin:
        evs += [prepare(leave + 3000, 2, "member_join", back, f"Adding new member {back} with group instance id None"),
                ev(leave + 3000, E.MEMBER_CREATED, 2, back, data={"client_id": CLIENT_IDS[C2],
                                                                  "client_host": "/10.0.0.2"})]
    machine = GroupStateMachine(GroupModel(cluster="default", group="orders-app"))
    machine.apply_all(evs)
    machine.advance_to(FAR_FUTURE_MS)
    return machine.outputs


def test_a_leave_soon_after_its_generation_started_is_final_at_once():
    """Members join and sync inside poll(): 5 s after its generation's rebalance started (8 s
    interval), the member cannot have stopped polling for 8 s. Its rebalance's trigger is final."""
    outputs = _leave_after(5000, rejoin=True)
    [leave] = [r for k, r in outputs if k == OutputKind.REBALANCE and r["generation"] == 2]
    assert (leave["trigger"], leave["trigger_final"]) == ("member_leave", True)
    assert not [r for k, r in outputs if k == OutputKind.REBALANCE_TRIGGER]
    [removal] = [r for k, r in outputs if k == OutputKind.REMOVAL]
    assert (removal["cause"], removal["root_cause"]) == ("leave_group", "graceful_shutdown")
    assert "it joined generation 1, whose rebalance started 5.0 s before the leave" in removal["evidence"]


def test_a_leave_long_after_its_generation_waits_for_the_decision():
    outputs = _leave_after(20000, rejoin=True)
    [leave] = [r for k, r in outputs if k == OutputKind.REBALANCE and r["generation"] == 2]
    assert (leave["trigger"], leave["trigger_final"]) == ("member_leave", False)
    [decision] = [r for k, r in outputs if k == OutputKind.REBALANCE_TRIGGER]
    assert (decision["trigger"], decision["decided_at_ms"]) == ("poll_timeout", 1000 + 20000 + 3000)
    closed = _leave_after(20000, rejoin=False)
    [decision] = [r for k, r in closed if k == OutputKind.REBALANCE_TRIGGER]
    # not back within max(8 s, 60 s): a close, decided at the end of the leave window
    assert (decision["trigger"], decision["decided_at_ms"]) == ("member_leave", 1000 + 20000 + 60000)
