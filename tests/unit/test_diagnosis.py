"""Diagnosis (issue 6): cause, root cause and evidence of every removal of the captured scenarios,
slow-rebalance fields, and synthetic host-wide / coordinator-wide bursts built from captured
records with other names and times. Plain-Python pipeline (== Spark, tests/spark/test_batching.py)."""
from __future__ import annotations

import copy
from functools import cache

import pytest

from state.diagnosis.correlate import Correlator, correlate_all
from state.diagnosis.rules import CONFIDENCES, DiagnosisSettings
from streaming.app.local import run_local
from tests.support.capture_expectations import capture_inputs


@cache
def _run(cluster: str) -> dict:
    return run_local(*capture_inputs(cluster))


def removals(cluster: str, group: str) -> list[tuple]:
    return [(r["client_id"], r["cause"], r["root_cause"])
            for r in sorted(_run(cluster)["removal"], key=lambda r: (r["removed_at_ms"], r["member_id"]))
            if r["group"] == group]


def G(cluster, group):
    return [r for r in _run(cluster)["removal"] if r["group"] == group]


CLOSE = "graceful_shutdown"


@pytest.mark.parametrize("cluster,prefix", [("kafka-2.7", ""), ("kafka-4.0", "k4-")])
def test_kill_is_a_crash_and_sigstop_a_pause(cluster, prefix):
    assert removals(cluster, f"{prefix}sc03-heartbeat-expiry") == [
        ("sc03-c2", "heartbeat_expiry", "process_crash"),
        ("sc03-c1", "leave_group", CLOSE), ("sc03-c3", "leave_group", CLOSE)]
    freeze = "sc04-sigstop-freeze" if cluster == "kafka-2.7" else "k4-sc04-process-freeze"
    assert removals(cluster, freeze) == [
        ("sc04-c2", "heartbeat_expiry", "process_pause"), ("sc04-c1", "leave_group", CLOSE),
        ("sc04-c2", "leave_group", CLOSE), ("sc04-c3", "leave_group", CLOSE)]
    [pause] = [r for r in G(cluster, freeze) if r["cause"] == "heartbeat_expiry"]
    assert "came back with a new member id" in pause["evidence"]


def test_kafka27_poll_timeout_inferred_from_the_rejoin():
    assert removals("kafka-2.7", "sc05-poll-timeout") == [
        ("sc05-slow", "poll_timeout", "slow_processing"), ("sc05-slow", "leave_group", CLOSE),
        ("sc05-normal", "leave_group", CLOSE)]
    first = min(G("kafka-2.7", "sc05-poll-timeout"), key=lambda r: r["removed_at_ms"])
    # left at 19:24:53.176, joined again 19:25:00.039 ("Adding new member sc05-slow-b488f3e3…")
    assert "joined again 6.9 s later" in first["evidence"] and "(inferred)" in first["evidence"]
    assert "no commit on its 1 partition(s)" in first["evidence"]


def test_kafka40_poll_timeout_rejoin_after_13_5_s_is_within_the_60_s_floor():
    assert removals("kafka-4.0", "k4-sc05-poll-timeout") == [
        ("sc05-c2", "poll_timeout", "slow_processing"), ("sc05-c1", "leave_group", CLOSE),
        ("sc05-c2", "leave_group", CLOSE)]
    first = min(G("kafka-4.0", "k4-sc05-poll-timeout"), key=lambda r: r["removed_at_ms"])
    assert "13.5 s later" in first["evidence"]


@pytest.mark.parametrize("group,member,timeout_ms,generation", [
    ("sc05b-poll-timeout-kafka-python", "sc05b-slow-8f5ff9ab", 8000, 3),
    ("sc11-stuck-in-rebalance", "sc11-stuck-fa728af1", 15000, 2),
])
def test_kafka27_rebalance_timeout_is_slow_processing_and_the_rebalance_waited_for_it(
        group, member, timeout_ms, generation):
    [rm] = [r for r in G("kafka-2.7", group) if r["cause"] == "rebalance_timeout"]
    assert rm["member_id"].startswith(member) and rm["root_cause"] == "slow_processing"
    [rb] = [r for r in _run("kafka-2.7")["rebalance"] if r["group"] == group and r["generation"] == generation]
    assert rb["waited_for_member"] == rm["member_id"]
    assert rb["hit_rebalance_timeout"] is True and rb["rebalance_timeout_ms"] == timeout_ms
    others = [r for r in _run("kafka-2.7")["rebalance"] if r["hit_rebalance_timeout"]]
    assert {r["group"] for r in others} == {"sc05b-poll-timeout-kafka-python", "sc11-stuck-in-rebalance"}


def test_new_group_join_phase_is_initial_delay():
    [rb] = [r for r in _run("kafka-2.7")["rebalance"] if r["group"] == "sc05-poll-timeout" and r["generation"] == 1]
    assert rb["initial_delay_seconds"] == rb["join_seconds"] == 3.0   # group.initial.rebalance.delay.ms
    [rb2] = [r for r in _run("kafka-2.7")["rebalance"] if r["group"] == "sc05-poll-timeout" and r["generation"] == 2]
    assert rb2["initial_delay_seconds"] is None and rb2["waited_for_member"] is None


def _static_verdicts(cluster: str, group: str) -> list[tuple]:
    return [(r["client_id"], r["cause"], r["root_cause"], r["root_cause_confidence"])
            for r in sorted(G(cluster, group), key=lambda r: (r["removed_at_ms"], r["member_id"]))]


def test_static_members_closed_are_told_from_their_commits_where_the_commits_can_tell():
    """Every static member of the captures was closed (SIGTERM; librdkafka, auto-commit every 1-2 s).
    A close's commit off the member's schedule says so (medium); too few commits, or a last gap
    neither off nor on schedule, leave the restart reading at low. One close commits nothing
    (librdkafka commits only changed offsets, and nothing new had come in the 0.4 s since its last
    scheduled commit): its commits stop on schedule like a crash's, which is what the rule then
    says, at low (docs/diagnosis.md, static members)."""
    assert _static_verdicts("kafka-2.7", "sc06-static-membership") == [
        ("sc06-c1", "static_member_fenced", CLOSE, "low"), ("sc06-c1", "heartbeat_expiry", CLOSE, "low"),
        ("sc06-c2", "heartbeat_expiry", CLOSE, "medium")]
    assert _static_verdicts("kafka-4.0", "k4-sc06-static-membership") == [
        ("sc06-c2", "static_member_fenced", CLOSE, "low"), ("sc06-c3", "heartbeat_expiry", CLOSE, "low"),
        ("sc06-c1", "heartbeat_expiry", CLOSE, "low"), ("sc06-c2", "heartbeat_expiry", CLOSE, "low"),
        ("sc06-c3-restart", "heartbeat_expiry", "process_crash", "low")]
    expiry = [r for r in G("kafka-2.7", "sc06-static-membership") if r["cause"] == "heartbeat_expiry"][-1]
    assert "static members send no LeaveGroup" in expiry["evidence"]
    assert "off its schedule: the commit of a close" in expiry["evidence"]


def test_kafka40_kip848_leave_kill_and_sigstop():
    assert removals("kafka-4.0", "k4-sc09-consumer-protocol") == [
        ("sc09-c1", "leave_group", CLOSE), ("sc09-c2", "heartbeat_expiry", "process_crash"),
        ("sc09-c3", "heartbeat_expiry", "process_pause"), ("sc09-c3", "leave_group", CLOSE),
        ("sc09-c4-java", "leave_group", CLOSE)]
    [pause] = [r for r in G("kafka-4.0", "k4-sc09-consumer-protocol") if r["root_cause"] == "process_pause"]
    assert "with the same member id" in pause["evidence"]


@pytest.mark.parametrize("cluster,prefix,n", [("kafka-2.7", "sc10-storm-", 5), ("kafka-4.0", "k4-sc10-", 5)])
def test_storm_kills_next_to_live_members_of_their_host_are_crashes(cluster, prefix, n):
    """sc10: 5 of the host's processes SIGKILLed together while the other members of their groups,
    on the same host, kept heartbeating: the host was fine, each process died (the host-wide rule
    weighs the host's members that stayed, host_members)."""
    expired = [r for r in _run(cluster)["removal"]
               if r["group"].startswith(prefix) and r["cause"] == "heartbeat_expiry"]
    assert len(expired) == n and {r["root_cause"] for r in expired} == {"process_crash"}
    assert all(r["host_members"] >= 2 and r["root_cause_confidence"] == "medium" for r in expired)
    leaves = [r for r in _run(cluster)["removal"] if r["group"].startswith(prefix) and r["cause"] == "leave_group"]
    assert leaves and {r["root_cause"] for r in leaves} == {CLOSE}


def test_every_removal_has_a_root_cause_and_evidence():
    for cluster in ("kafka-2.7", "kafka-4.0"):
        for r in _run(cluster)["removal"]:
            assert r["evidence"], r
            assert r["root_cause_confidence"] in CONFIDENCES and r["root_cause_confidence_reason"], r
            if r["cause"] != "group_deleted":
                assert r["root_cause"] != "unknown", r


# --- synthetic bursts from captured records -------------------------------------------------------
def _sc03_crash() -> dict:
    [r] = [r for r in G("kafka-2.7", "sc03-heartbeat-expiry") if r["cause"] == "heartbeat_expiry"]
    return r


def _copies(specs: list[tuple[str, str, int, int]]) -> list[dict]:
    """The captured sc03 crash record as if in other groups / hosts / coordinators / times."""
    base = _sc03_crash()
    out = []
    for group, host, coordinator, dt in specs:
        r = copy.deepcopy(base)
        r.update(group=group, client_host=host, coordinator=coordinator,
                 removed_at_ms=base["removed_at_ms"] + dt, member_id=f"{group}-c2-{dt}",
                 host_members=None)    # the host's other members unknown: the count alone decides
        out.append(r)
    return out


def test_synthetic_host_wide_burst():
    recs = _copies([("orders", "/10.1.0.7", 1, 0), ("billing", "/10.1.0.7", 2, 1200), ("audit", "/10.1.0.7", 1, 4000),
                    ("other", "/10.1.0.9", 1, 2000)])
    by_group = {r["group"]: r for r in correlate_all(recs)}
    assert {g: r["root_cause"] for g, r in by_group.items()} == {
        "orders": "host_wide", "billing": "host_wide", "audit": "host_wide", "other": "process_crash"}
    assert "3 members on host /10.1.0.7" in by_group["orders"]["evidence"]


def test_synthetic_coordinator_wide_burst_on_different_hosts():
    recs = _copies([("orders", "/10.1.0.1", 2, 0), ("billing", "/10.1.0.2", 2, 3000), ("audit", "/10.1.0.3", 2, 6000),
                    ("elsewhere", "/10.1.0.4", 1, 1000)])
    by_group = {r["group"]: r for r in correlate_all(recs)}
    assert {g: r["root_cause"] for g, r in by_group.items()} == {
        "orders": "coordinator_wide", "billing": "coordinator_wide", "audit": "coordinator_wide",
        "elsewhere": "process_crash"}
    assert "3 groups of coordinator broker 2" in by_group["billing"]["evidence"]


def test_synthetic_two_removals_are_below_the_thresholds():
    recs = _copies([("orders", "/10.1.0.7", 2, 0), ("billing", "/10.1.0.7", 2, 500)])
    assert {r["root_cause"] for r in correlate_all(recs)} == {"process_crash"}
    recs = _copies([("a", "/10.1.0.1", 2, 0), ("b", "/10.1.0.2", 2, 100), ("c", "/10.1.0.3", 2, 60_000)])
    assert {r["root_cause"] for r in correlate_all(recs)} == {"process_crash"}
    recs = _copies([("a", "/10.1.0.7", 1, 0), ("b", "/10.1.0.7", 2, 100), ("c", "/10.1.0.7", 3, 500)])
    assert {r["root_cause"] for r in correlate_all(recs, DiagnosisSettings(host_wide_min_removals=4))} \
        == {"process_crash"}


def _brute_force(recs: list[dict], settings: DiagnosisSettings) -> list[tuple]:
    """The cross-group rules by scanning every candidate for every removal (the correlator before
    its index): the reference the indexed pool must equal."""
    from state.diagnosis.correlate import _order, is_candidate
    c = Correlator(settings)
    pool = [r for r in recs if is_candidate(r)]
    out = []
    for rec in sorted(recs, key=_order):
        t = rec["removed_at_ms"]
        w = c._host_window(rec)
        same_host = [r for r in pool if r["cluster"] == rec["cluster"] and r.get("client_host") == rec.get("client_host")
                     and abs(r["removed_at_ms"] - t) <= w]
        same = [r for r in pool if r["cluster"] == rec["cluster"] and r.get("coordinator") == rec.get("coordinator")
                and abs(r["removed_at_ms"] - t) <= settings.coordinator_wide_window_ms]
        root = rec["root_cause"]
        # the coordinator's evidence first, then the host's (these copies carry no host census and
        # all crashed: the host rule is then the count alone)
        if is_candidate(rec) and len({r["group"] for r in same}) >= settings.coordinator_wide_min_groups \
                and len({r.get("client_host") for r in same}) >= settings.coordinator_wide_min_groups:
            root = "coordinator_wide"
        elif is_candidate(rec) and len(same_host) >= settings.host_wide_min_removals:
            root = "host_wide"
        out.append((rec["group"], root))
    return out


def test_indexed_correlator_equals_the_brute_force_rules_on_a_random_fleet():
    import random
    rng = random.Random(15)
    specs = [(f"g{i}", f"/10.0.0.{rng.randrange(40)}", rng.randrange(1, 6), rng.randrange(600) * 1000)
             for i in range(1500)]
    recs = _copies(specs)
    for r in recs[::7]:
        r["cluster"] = "other"
    # a cluster where one host loses members of groups of different coordinators: host-wide
    burst = _copies([(f"h{i}", "/10.9.9.9", i + 1, 100_000 + i * 300) for i in range(3)])
    for r in burst:
        r["cluster"] = "third"
    recs += burst
    settings = DiagnosisSettings(coordinator_wide_background_factor=0)   # the rules without the background
    expected = _brute_force(copy.deepcopy(recs), settings)
    got = [(r["group"], r["root_cause"]) for r in correlate_all(copy.deepcopy(recs), settings)]
    assert got == expected
    assert {root for _, root in got} >= {"host_wide", "coordinator_wide", "process_crash"}


def test_independent_expiries_of_a_big_fleet_are_not_coordinator_wide_but_a_real_burst_is():
    """10,000 groups on 5 coordinators, one member each expiring at a random time within 3 minutes
    (each on its own host: about 220 groups per coordinator and 20 s), and in the middle of it a
    coordinator losing members of 1,000 more groups within 5 s (a broker in trouble)."""
    import random
    rng = random.Random(7)
    background = [(f"g{i}", f"/10.{i // 250}.{i % 250}.1", rng.randrange(1, 6), rng.randrange(180_000))
                  for i in range(10_000)]
    burst = [(f"burst{i}", f"/10.200.{i // 250}.{i % 250}", 3, 120_000 + i * 5) for i in range(1000)]
    out = {r["group"]: r for r in correlate_all(_copies(background + burst))}
    # background expiries of that coordinator within the burst's window are part of it
    in_burst = {g for g, _, coordinator, dt in background if coordinator == 3 and 110_000 <= dt <= 135_000}
    after_warmup = [g for g, _, _, dt in background if dt >= 30_000 and g not in in_burst]
    wide = [g for g in after_warmup if out[g]["root_cause"] == "coordinator_wide"]
    assert len(wide) <= len(after_warmup) // 100, len(wide)
    assert {out[g]["root_cause"] for g, *_ in burst} == {"coordinator_wide"}
    assert "background" in out["burst0"]["evidence"]
    # without the background check (the rule before issue 15) nearly every expiry was coordinator_wide
    plain = correlate_all(_copies(background[:2000]), DiagnosisSettings(coordinator_wide_background_factor=0))
    assert sum(r["root_cause"] == "coordinator_wide" for r in plain) > 1500


def _on_host(specs: list[tuple[str, str, int, int, int]], pause: set | frozenset = frozenset()) -> list[dict]:
    """Copies with the host's member count of their group (host_members); `pause`: groups whose
    member came back (process_pause in its group)."""
    recs = _copies([s[:4] for s in specs])
    for r, spec in zip(recs, specs):
        r["host_members"] = spec[4]
        if r["group"] in pause:
            r["root_cause"] = r["group_root_cause"] = "process_pause"
    return recs


def test_host_wide_weighs_the_hosts_members_their_fates_and_how_close_they_were():
    # two members killed together, every member the host had in their groups: host-wide, medium
    recs = _on_host([("orders", "/10.1.0.7", 1, 0, 1), ("billing", "/10.1.0.7", 2, 800, 1)])
    out = correlate_all(recs)
    assert [(r["root_cause"], r["root_cause_confidence"]) for r in out] == [("host_wide", "medium")] * 2
    assert [r["group_root_cause"] for r in out] == ["process_crash"] * 2
    assert "0 other member(s) of the host in these groups stayed" in out[0]["evidence"]
    # ... three of them: high
    recs = _on_host([("a", "/10.1.0.7", 1, 0, 1), ("b", "/10.1.0.7", 2, 800, 1), ("c", "/10.1.0.7", 3, 1500, 1)])
    assert {(r["root_cause"], r["root_cause_confidence"]) for r in correlate_all(recs)} == {("host_wide", "high")}
    # the same two, 8 s apart: independent crashes
    recs = _on_host([("orders", "/10.1.0.7", 1, 0, 1), ("billing", "/10.1.0.7", 2, 8000, 1)])
    assert {r["root_cause"] for r in correlate_all(recs)} == {"process_crash"}
    # two of a host that had more members in those groups, which stayed: independent
    recs = _on_host([("orders", "/10.1.0.7", 1, 0, 3), ("billing", "/10.1.0.7", 2, 300, 3)])
    assert {r["root_cause"] for r in correlate_all(recs)} == {"process_crash"}
    # three close together, but most of the host's members in those groups stayed: independent
    recs = _on_host([("a", "/10.1.0.7", 1, 0, 4), ("b", "/10.1.0.7", 2, 300, 4), ("c", "/10.1.0.7", 3, 600, 4)])
    assert {r["root_cause"] for r in correlate_all(recs)} == {"process_crash"}
    # a pause next to a crash: two fates, two causes
    recs = _on_host([("a", "/10.1.0.7", 1, 0, 1), ("b", "/10.1.0.7", 2, 300, 1), ("c", "/10.1.0.7", 3, 600, 1)],
                    pause={"b"})
    assert {r["group"]: r["root_cause"] for r in correlate_all(recs)} == {
        "a": "process_crash", "b": "process_pause", "c": "process_crash"}


def test_the_coordinators_evidence_wins_over_a_shared_address():
    """Members that expire while their coordinator moves the group are coordinator-wide, whatever
    host they share (a coordinator broker killed under clients on one machine)."""
    recs = _on_host([("a", "/10.1.0.7", 1, 0, 1), ("b", "/10.1.0.7", 1, 300, 1), ("c", "/10.1.0.7", 1, 600, 1)])
    for r in recs:
        r["root_cause"] = r["group_root_cause"] = "coordinator_wide"
    assert {r["root_cause"] for r in correlate_all(recs)} == {"coordinator_wide"}
    recs = _on_host([("a", "/10.1.0.7", 4, 0, 1), ("b", "/10.1.0.7", 4, 300, 1), ("c", "/10.1.0.7", 4, 600, 1)])
    for r, host in zip(recs, ("/10.1.0.7", "/10.1.0.8", "/10.1.0.9")):
        r["client_host"] = host
    recs += _on_host([("d", "/10.1.0.7", 4, 900, 1), ("e", "/10.1.0.7", 4, 1200, 1)])
    out = {r["group"]: r for r in correlate_all(recs)}
    assert {g: r["root_cause"] for g, r in out.items()} == dict.fromkeys("abcde", "coordinator_wide")


def test_correlator_is_independent_of_batching_and_survives_a_restart():
    recs = _copies([("orders", "/10.1.0.7", 1, 0), ("billing", "/10.1.0.7", 2, 1200), ("audit", "/10.1.0.7", 1, 4000)])
    t0 = recs[0]["removed_at_ms"]
    c = Correlator()
    c.add([copy.deepcopy(recs[0])])
    assert c.advance(t0 + 5000) == []                # held: the others may still come
    state = copy.deepcopy(c.to_state())
    restarted = Correlator()
    restarted.load_state(state)
    restarted.add([copy.deepcopy(r) for r in recs[1:]])
    out = restarted.advance(t0 + 4000 + c.hold_ms + 1)
    assert [r["root_cause"] for r in out] == ["host_wide"] * 3
    assert restarted.advance(t0 + 10 ** 7) == []     # emitted once


def test_storm_and_stuck_gauges_from_snapshots():
    from prometheus_client import CollectorRegistry

    from sinks.exposition import text
    from sinks.metrics import MetricsSink
    sink = MetricsSink([1.0], registry=CollectorRegistry())
    base = 1_795_288_000_000
    sink.observe("snapshot", {"cluster": "c", "group": "stuck", "protocol": "classic",
                              "state": "PreparingRebalance", "state_since_ms": base, "member_count": 2,
                              "last_event_ms": base, "rebalance_timeout_ms": 15000,
                              "recent_rebalance_starts_ms": [base - 700_000, base - 20_000, base]})
    sink.observe("snapshot", {"cluster": "c", "group": "busy", "protocol": "classic", "state": "Stable",
                              "state_since_ms": base + 12_000, "member_count": 3, "last_event_ms": base + 12_000})
    sink.observe("rebalance", {"cluster": "c", "group": "stuck", "protocol": "classic", "trigger": "member_join",
                               "outcome": "stable", "join_seconds": 15.0, "sync_seconds": 0.0, "total_seconds": 15.0,
                               "hit_rebalance_timeout": True})
    page = text(sink.registry)
    # 12 s of cluster event time since "stuck" entered PreparingRebalance; "busy" is not rebalancing.
    assert 'rebalance_monitor_group_rebalance_in_progress_seconds{cluster="c",group="stuck",protocol="classic"} 12.0' in page
    assert 'group_rebalance_in_progress_seconds{cluster="c",group="busy"' not in page
    assert 'rebalance_monitor_group_rebalance_timeout_seconds{cluster="c",group="stuck",protocol="classic"} 15.0' in page
    # 700 s ago is outside the 10-minute window; the other two starts are inside it.
    assert 'rebalance_monitor_group_rebalances_in_window{cluster="c",group="stuck",protocol="classic"} 2.0' in page
    assert 'rebalance_monitor_rebalance_timeouts_total{cluster="c",group="stuck"} 1.0' in page




@cache
def _sc11_events() -> tuple:
    from streaming.app.local import capture_events
    return tuple(ev for ev in capture_events(*capture_inputs("kafka-2.7"))
                 if ev.group == "sc11-stuck-in-rebalance")


@pytest.mark.parametrize("cut,hit", [("19:31:25.000", False), ("19:31:35.191", True)])
def test_in_progress_records_carry_the_slow_rebalance_fields(cut, hit):
    """An open rebalance written at the end of the input: the real sc11 JOIN phase cut before and
    right after the coordinator removed the member that did not rejoin within the 15 s timeout
    (19:31:35,191; Stable followed 1 ms later)."""
    from state.machine import GroupStateMachine
    from state.model import GroupModel
    from state.outputs import snapshot
    from streaming.app.collector import RunCollector
    from tests.support.capture_expectations import utc_ms
    machine = GroupStateMachine(GroupModel(cluster="kafka-2.7", group="sc11-stuck-in-rebalance"))
    machine.apply_all([ev for ev in _sc11_events() if ev.ts_ms <= utc_ms(cut)])
    collector = RunCollector(metrics=None, keep_records=True)  # type: ignore[arg-type]  # in_progress_rebalances needs no metrics
    collector.snapshots[("kafka-2.7", "sc11-stuck-in-rebalance")] = snapshot(machine.m)
    [rec] = collector.in_progress_rebalances()
    assert rec["outcome"] == "in_progress" and rec["previous_generation"] == 1
    assert rec["started_at_ms"] == utc_ms("19:31:20.189")
    assert rec["rebalance_timeout_ms"] == 15000 and rec["initial_delay_seconds"] is None
    assert rec["hit_rebalance_timeout"] is hit
    if hit:
        assert rec["waited_for_member"] == "sc11-stuck-fa728af1-fd34-46da-8c0c-05fac1adface"
    else:
        assert rec["waited_for_member"] is None
    [done] = [r for r in _run("kafka-2.7")["rebalance"]
              if r["group"] == "sc11-stuck-in-rebalance" and r["generation"] == 2]
    assert set(rec) == set(done)     # the same fields as the finished record


@pytest.mark.parametrize("times,closed,root,sure", [
    ([10_300, 10_000, 9_000], True, CLOSE, "medium"),            # 0.3 s after a 1 s schedule: a close's commit
    ([11_000, 10_000, 9_000], False, "process_crash", "low"),    # on schedule, then none
    ([10_650, 10_000, 9_000], None, CLOSE, "low"),               # neither
    ([11_000, 10_000], None, CLOSE, "low"),                      # too few for a schedule
])
def test_a_static_members_last_commits_tell_its_close_from_its_crash(times, closed, root, sure):
    from state.diagnosis.holding import hold_removal, release_removals
    from state.diagnosis.rules import DEFAULT_SETTINGS
    from state.model import GroupModel, Member
    model = GroupModel(cluster="c", group="g")
    # an auto-commit writes every partition of the member at once
    model.partition_commits = {"t:0": times[0], "t:1": times[0]}
    model.partition_prior_commits = {"t:0": times[1:], "t:1": times[1:]}
    model.partition_commits["t:9"] = 99_999          # after the removal: another member's, not read
    rec = {"member_id": "m1", "client_id": "c1", "client_host": "/h", "group_instance_id": "i1",
           "cause": "static_member_fenced", "removed_at_ms": 20_000, "protocol": "classic"}
    hold_removal(model, rec, Member(member_id="m1", partitions=["t:0", "t:1", "t:9"]), DEFAULT_SETTINGS)
    [held] = release_removals(model, 20_000 + DEFAULT_SETTINGS.static_commit_window_ms + 1, DEFAULT_SETTINGS)
    assert held.closed is closed
    assert (rec["root_cause"], rec["root_cause_confidence"]) == (root, sure)


def test_a_static_members_commits_packed_after_its_removal_still_count():
    """Seen live on 4.4.0: the source held the killed member's last commit (05.102) back and the
    decoder packed it with the replacement's first (08.674), after the expiry (08.102). The pack's
    earlier times, up to the removal, join the ones the model had (04.099, 03.103) while the
    removal is held: on schedule, then none."""
    from state import events as E
    from state.diagnosis.rules import DEFAULT_SETTINGS
    from state.machine import GroupStateMachine
    from state.model import GroupModel, Member
    machine = GroupStateMachine(GroupModel(cluster="c", group="g"))
    m = machine.m
    m.partition_commits, m.partition_prior_commits = {"t:0": 4_099}, {"t:0": [3_103]}
    rec = {"member_id": "m1", "client_id": "c1", "client_host": "/h", "group_instance_id": "i1",
           "cause": "heartbeat_expiry", "removed_at_ms": 8_102, "protocol": "classic", "session_timeout_ms": 3000}
    machine.hold(rec, Member(member_id="m1", partitions=["t:0"]))
    machine.apply(E.Event(group="g", ts_ms=8_674, source=E.SOURCE_OFFSETS, source_id="o-0", seq=1,
                          kind=E.OFFSET_COMMITS, data={"commits": [["t", 0, 50, 8_674, 3, 5_102, 4_099]]},
                          cluster="c"))
    [held] = m.held_removals
    assert held.commit_times == [5_102, 4_099, 3_103]
    from state.diagnosis.holding import release_removals
    release_removals(m, held.decide_at + 1, DEFAULT_SETTINGS)
    assert (rec["root_cause"], rec["root_cause_confidence"]) == ("process_crash", "low")


def test_a_static_members_schedule_survives_its_replacements_commits_in_the_same_pack():
    """CI on 4.4.0 (static_within): a slow micro-batch held the killed member's commits and five
    of its replacement's, after the replacement (04.532). The pack carries 8 times, so the removal
    still reads the member's last three: on schedule (1 s apart), then none: a crash."""
    from state import events as E
    from state.diagnosis.holding import release_removals
    from state.diagnosis.rules import DEFAULT_SETTINGS
    from state.machine import GroupStateMachine
    from state.model import GroupModel, Member
    machine = GroupStateMachine(GroupModel(cluster="c", group="g"))
    m = machine.m
    m.partition_commits = {"t:0": 1_000}
    rec = {"member_id": "m1", "client_id": "c1", "client_host": "/h", "group_instance_id": "i1",
           "cause": "static_member_fenced", "removed_at_ms": 4_532, "protocol": "classic"}
    machine.hold(rec, Member(member_id="m1", partitions=["t:0"]))
    entry = ["t", 0, 9, 9_600, 9, 8_600, 7_600, 6_600, 5_600, 4_600, 3_000, 2_000]
    machine.apply(E.Event(group="g", ts_ms=9_600, source=E.SOURCE_OFFSETS, source_id="o-0", seq=1,
                          kind=E.OFFSET_COMMITS, data={"commits": [entry]}, cluster="c"))
    [held] = m.held_removals
    assert held.commit_times == [3_000, 2_000, 1_000]
    assert m.partition_commits["t:0"] == 9_600 and m.partition_prior_commits["t:0"] == [8_600, 7_600]
    release_removals(m, held.decide_at + 1, DEFAULT_SETTINGS)
    assert (rec["root_cause"], rec["root_cause_confidence"]) == ("process_crash", "low")
