"""Replay of the real Kafka 2.7 and 4.0 captures through the Spark query, checked against the
rebalances and removals each capture's README lists (and the raw log lines it quotes)."""
from __future__ import annotations

import json

import pytest

from tests.support.capture_expectations import assignment_received_ms, expected_trigger, readme_rebalances_40
from tests.support.readme_checks import assert_kafka27_rebalances, assert_kafka27_removals

pytestmark = pytest.mark.spark


def _by_key(records):
    out: dict[tuple[str, int], list[dict]] = {}
    for r in records:
        out.setdefault((r["group"], r["generation"]), []).append(r)
    return out


def _read(out_dir, name):
    return [json.loads(line) for line in (out_dir / name).read_text().splitlines()]


def test_kafka27_every_readme_rebalance(replay_capture):
    _, out = replay_capture("kafka-2.7")
    assert_kafka27_rebalances(_read(out, "rebalances.jsonl"))


def test_kafka27_every_readme_removal(replay_capture):
    _, out = replay_capture("kafka-2.7")
    assert_kafka27_removals(_read(out, "member_removals.jsonl"))


def test_kafka27_removal_details_from_offsets_topic(replay_capture):
    _, out = replay_capture("kafka-2.7")
    [expiry] = [r for r in _read(out, "member_removals.jsonl")
                if r["group"] == "sc03-heartbeat-expiry" and r["cause"] == "heartbeat_expiry"]
    # Client details come from the GroupMetadata record of the generation it belonged to.
    assert (expiry["client_id"], expiry["client_host"], expiry["session_timeout_ms"]) == ("sc03-c2", "/127.0.0.1", 6000)
    # Killed (kill -9) and never back: a crash; no other host/coordinator burst around it.
    assert expiry["root_cause"] == "process_crash"


def test_kafka27_final_group_states(replay_capture):
    _, out = replay_capture("kafka-2.7")
    groups = {g["group"]: g for g in _read(out, "groups.jsonl")}
    # Expired (README sc08 table) and deleted groups end Dead; sc10 and sc11 were still Empty.
    for dead in ("sc01-single-join-leave", "sc02-staggered-three", "sc08-offset-expiry", "sc08-delete-group",
                 "sc09-cooperative-sticky"):
        assert groups[dead]["state"] == "Dead", dead
    assert groups["sc11-stuck-in-rebalance"]["state"] == "Empty"
    assert groups["sc11-stuck-in-rebalance"]["generation"] == 4
    assert groups["sc10-storm-g05"]["state"] == "Empty"
    assert all(g["invalid_transitions"] == 0 for g in groups.values())
    assert (out / "quarantine.jsonl").read_text() == ""


def test_kafka40_every_readme_rebalance(replay_capture):
    _, out = replay_capture("kafka-4.0")
    got = _by_key(_read(out, "rebalances.jsonl"))
    completed = assignment_received_ms("kafka-4.0")
    expected = readme_rebalances_40()
    assert len(expected) == 106
    for exp in expected:
        [r] = got.pop((exp.group, exp.generation))
        assert r["protocol"] == exp.protocol, exp
        assert r["started_at_ms"] == exp.started_at_ms, exp
        if exp.protocol == "classic":
            assert r["join_completed_at_ms"] == exp.ended_at_ms, exp
            if exp.outcome == "stable" and (exp.group, exp.generation) not in completed:
                # The README's "end" is the Stabilized line; without an "Assignment received"
                # line the group never became Stable (k4-sc10-classic-04 gen 2: the last member
                # left during CompletingRebalance), so this generation was superseded.
                assert r["outcome"] == "superseded" and r["completed_at_ms"] is None, exp
                continue
            assert r["outcome"] == exp.outcome, exp
            if exp.outcome == "stable":
                assert r["completed_at_ms"] == completed[(exp.group, exp.generation)], exp
            if not exp.reason.startswith("Downgrade"):
                assert r["trigger"] == expected_trigger(exp.reason, exp.group, exp.generation), exp
            else:   # the downgrade was caused by the last consumer-protocol member leaving
                assert r["trigger"] == "member_leave"
            continue
        if (exp.group, exp.generation) == ("k4-sc10-consumer-03", 4):
            # README caveat: epoch 4 "converged" only because a member was removed in the
            # millisecond epoch 5 was bumped; the bump comes first, so it is superseded.
            assert r["outcome"] == "superseded"
            continue
        if exp.outcome == "stable":
            assert (r["outcome"], r["completed_at_ms"]) == ("stable", exp.ended_at_ms), exp
        else:
            assert r["outcome"] in ("superseded", "empty") and r["completed_at_ms"] is None, exp
    assert got == {}, "rebalances the README does not list"


def test_kafka40_every_readme_removal(replay_capture):
    _, out = replay_capture("kafka-4.0")
    removals = _read(out, "member_removals.jsonl")
    expected = [(exp.group, rm) for exp in readme_rebalances_40() for rm in exp.removals]
    assert len(expected) == 78
    unmatched = list(removals)
    for group, rm in expected:
        # KIP-848 members keep their id across a fence and rejoin (sc09-c3 is removed twice).
        # (a LeaveGroup refined to an inferred poll timeout counts as the README's LeaveGroup)
        match = [r for r in unmatched if r["group"] == group and r["member_id"] == rm.member_prefix
                 and (r["cause"] == rm.cause or (r["cause"] == "poll_timeout" and rm.cause == "leave_group"
                                                 and "(inferred)" in r["evidence"]))]
        assert match, (group, rm)
        unmatched.remove(match[0])
    [static] = unmatched   # k4-sc06 quick restart: static member replaced, no rebalance
    assert (static["group"], static["cause"]) == ("k4-sc06-static-membership", "static_member_fenced")


def test_kafka27_clock_skew_metric_per_log_source(replay_capture):
    """The capture's brokers log in UTC (the default zone): every line sits within milliseconds of
    the offsets record of the same action, and the gauge says so for both log files."""
    import re
    collector, out = replay_capture("kafka-2.7")
    pairs = _read(out, "clock_skew.jsonl")
    assert len(pairs) == 82 and all(abs(p["skew_ms"]) <= 10 for p in pairs)
    page = (out / "metrics.prom").read_text()
    values = dict(re.findall(r'rebalance_monitor_log_clock_skew_seconds\{cluster="default",source="([^"]+)"\} (\S+)', page))
    assert set(values) == {"default:broker1-server.log", "default:broker2-server.log"}
    assert all(abs(float(v)) <= 0.01 for v in values.values())


def _log_lines(capture, pattern):
    """(epoch ms, match) for every line of the capture's logs matching `pattern` (plain regex)."""
    import re

    from tests.support.capture_expectations import FIXTURES, LOG_FILES, utc_ms
    header, rx = re.compile(r"^\[\d{4}-\d\d-\d\d (\d\d:\d\d:\d\d,\d{3})\] "), re.compile(pattern)
    out = []
    for name in LOG_FILES[capture]:
        for line in (FIXTURES / capture / name).read_text().splitlines():
            h, m = header.match(line), rx.search(line)
            if h and m:
                out.append((utc_ms(h.group(1)), m))
    return out


def test_kafka40_consumer_protocol_epochs_fences_leaves_and_conversions(replay_capture):
    """KIP-848 facts of the 4.0 capture, each derived from its raw log line with a plain regex."""
    _, out = replay_capture("kafka-4.0")
    rebalances = _read(out, "rebalances.jsonl")
    removals = _read(out, "member_removals.jsonl")
    # one consumer-protocol rebalance per "Bumped group epoch to N", starting at that line
    bumps = _log_lines("kafka-4.0", r"\[GroupId (\S+)\] Bumped group epoch to (\d+)\.")
    assert len(bumps) == 45
    consumer = {(r["group"], r["generation"]): r for r in rebalances if r["protocol"] == "consumer"}
    assert set(consumer) == {(m.group(1), int(m.group(2))) for _, m in bumps}
    for ts, m in bumps:
        assert consumer[(m.group(1), int(m.group(2)))]["started_at_ms"] == ts, m.group(0)
    # every fence and every leave is a removal of that member at that time
    fences = _log_lines("kafka-4.0", r"\[GroupId (\S+)\] Member (\S+) fenced from the group because the member session expired")
    leaves = _log_lines("kafka-4.0", r"\[GroupId (\S+)\] Member (\S+) left the consumer group\.")
    assert (len(fences), len(leaves)) == (4, 19)
    got = {(r["group"], r["member_id"], r["removed_at_ms"], r["cause"]) for r in removals if r["protocol"] == "consumer"}
    expected = {(m.group(1), m.group(2), ts, "heartbeat_expiry") for ts, m in fences} | \
        {(m.group(1), m.group(2), ts, "leave_group") for ts, m in leaves}
    assert expected <= got
    # conversions: the group's rebalances change protocol at the "Converted the ..." lines
    conversions = _log_lines("kafka-4.0", r"\[GroupId (\S+)\] Converted the (?:empty )?(classic|consumer) group to a")
    assert [(m.group(1), m.group(2)) for _, m in conversions] == [
        ("k4-sc11-mixed-classic-first", "classic"), ("k4-sc11-mixed-classic-first", "consumer"),
        ("k4-sc11b-mixed-consumer-first", "consumer")]
    for group in ("k4-sc11-mixed-classic-first", "k4-sc11b-mixed-consumer-first"):
        switch = sorted(ts for ts, m in conversions if m.group(1) == group)
        history = sorted((r["started_at_ms"], r["protocol"]) for r in rebalances if r["group"] == group)
        for started, protocol in history:
            before = sum(1 for ts in switch if ts <= started)     # conversions up to this start
            first = "classic" if group.endswith("classic-first") else "consumer"
            other = "consumer" if first == "classic" else "classic"
            assert protocol == (first if before % 2 == 0 else other), (group, started, protocol)
        # the downgrade rebalance was caused by the last consumer-protocol member leaving
        downgrade = [r for r in rebalances if r["group"] == group and (r["reason_text"] or "").startswith("Downgrade")]
        [leaver] = [m.group(2) for ts, m in leaves if m.group(1) == group and ts <= downgrade[0]["started_at_ms"]][-1:]
        assert (downgrade[0]["protocol"], downgrade[0]["trigger"], downgrade[0]["trigger_member"]) == \
            ("classic", "member_leave", leaver)
