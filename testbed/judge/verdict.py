"""Compares what the monitor reported for one scenario (event sink and /metrics) with what the
bed did (expect.py), and tells known product gaps from new failures.

KNOWN_FAILURES is the one place where an expectation the monitor does not meet yet is named,
with the reason: such a scenario shows as KNOWN (failing) in the matrix, and CI (tests/e2e/kafka)
runs only the scenarios without a known failure on its versions. A known failure that no longer
fails is reported, so the table gets updated."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from state.impact import EAGER_ASSIGNORS

from testbed.bed import jars
from testbed.judge.expect import TIME_TOLERANCE_MS, Expected, ExpRebalance
from testbed.metrics import Samples


@dataclass(frozen=True)
class Known:
    scenario: str
    checks: tuple                   # failure categories (Verdict.failures) it explains; "*": all
    reason: str
    since: tuple = (0,)             # versions it applies to: since <= version < until
    until: tuple = (99,)

    def applies(self, version: str, scenario: str) -> bool:
        v = jars.parse_version(version)
        return self.scenario == scenario and self.since <= v < self.until


KNOWN_FAILURES: list[Known] = []


def known_for(version: str, scenario: str) -> list[Known]:
    return [k for k in KNOWN_FAILURES if k.applies(version, scenario)]


@dataclass
class Verdict:
    version: str
    scenario: str
    group: str
    rebalances_expected: int | None = 0          # None (also in *_right): not judged, e.g. "(cluster)"
    rebalances_found: int = 0
    triggers_right: int | None = 0
    removals_expected: int | None = 0
    removals_found: int = 0
    causes_right: int | None = 0
    rebalance_latency_s: float | None = None     # max over the scenario: broker line -> /metrics
    removal_latency_s: float | None = None
    failures: list = field(default_factory=list)  # (category, text)
    known: list = field(default_factory=list)     # reasons of the known failures that apply
    status: str = "FAIL"                          # PASS | FAIL | KNOWN | SKIP
    note: str = ""
    latency_span: tuple | None = None             # (first broker line, last first-scrape) epoch ms
    monitor_down: bool = False                    # the monitor was restarting within latency_span
    impact_checked: int = 0                       # killed members' stops checked against the bed
    impact_error_s: float | None = None           # the largest difference per partition
    stops_expected: int | None = None             # partitions the members' callbacks show stopped
    stops_found: int | None = None                # ... and the monitor's records

    @property
    def passed(self) -> bool:
        return self.status == "PASS"

    def fail(self, category: str, text: str) -> None:
        self.failures.append((category, text))

    def settle(self, known: list[Known]) -> Verdict:
        """PASS without failures; KNOWN when every failure is covered by a known one."""
        self.known = [k.reason for k in known]
        if not self.failures:
            self.status = "PASS"
            if known:
                self.note = "known failure no longer fails: update KNOWN_FAILURES"
        elif known and all(any("*" in k.checks or cat in k.checks for k in known) for cat, _ in self.failures):
            self.status = "KNOWN"
        else:
            self.status = "FAIL"
        return self

    def summary(self) -> str:
        return "; ".join(f"{c}: {t}" for c, t in self.failures[:8]) + (" …" if len(self.failures) > 8 else "")


def _near(a: int | None, b: int | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= TIME_TOLERANCE_MS


T = TypeVar("T")


def _take_first(expected: Iterable[T], left: list[dict],
                fits: Callable[[dict, T], bool]) -> Iterator[tuple[T, dict | None]]:
    """Each expected item with the first record in `left` that fits it (None: none does), taken out
    of `left`: a record answers one expectation only, and the records still in `left` are extra."""
    for e in expected:
        rec = next((r for r in left if fits(r, e)), None)
        if rec is not None:
            left.remove(rec)
        yield e, rec


def _match_rebalances(v: Verdict, exp: Expected, records: list) -> list[tuple[ExpRebalance, dict]]:
    left = sorted(records, key=lambda r: (r.get("started_at_ms") is None, r.get("started_at_ms") or 0))
    pairs = []
    for e, rec in _take_first(exp.rebalances, left, lambda r, e: _near(r.get("started_at_ms"), e.start_ms)):
        if rec is None:
            v.fail("rebalances", f"no record for the rebalance started {e.start_ms} by '{e.cause}' "
                                 f"(expected {e.trigger}/{'|'.join(e.outcomes)})")
            continue
        pairs.append((e, rec))
        v.rebalances_found += 1
        label = f"rebalance {e.start_ms} ('{e.cause}')"
        if rec.get("trigger") == e.trigger:
            assert v.triggers_right is not None, "judge() counts the triggers of a scenario's verdict"
            v.triggers_right += 1
        else:
            v.fail("trigger", f"{label}: trigger {rec.get('trigger')}, expected {e.trigger}")
        if rec.get("outcome") not in e.outcomes:
            v.fail("rebalances", f"{label}: outcome {rec.get('outcome')}, expected {'|'.join(e.outcomes)}")
        if e.generation is not None and rec.get("generation") != e.generation:
            v.fail("rebalances", f"{label}: generation {rec.get('generation')}, expected {e.generation}")
        if e.protocol != rec.get("protocol"):
            v.fail("rebalances", f"{label}: protocol {rec.get('protocol')}, expected {e.protocol}")
        end_field = "completed_at_ms" if "stable" in e.outcomes and rec.get("outcome") == "stable" else "ended_at_ms"
        if e.end_ms is not None and not _near(rec.get(end_field), e.end_ms):
            v.fail("rebalances", f"{label}: {end_field} {rec.get(end_field)}, the broker's line says {e.end_ms}")
    for rec in left:
        v.fail("extra", f"rebalance record not caused by the bed: gen {rec.get('generation')} "
                        f"{rec.get('trigger')}/{rec.get('outcome')} started {rec.get('started_at_ms')}")
    return pairs


def _match_removals(v: Verdict, exp: Expected, records: list) -> list[tuple]:
    left = sorted(records, key=lambda r: r["removed_at_ms"])
    pairs = []
    for e, rec in _take_first(sorted(exp.removals, key=lambda r: r.at_ms), left,
                              lambda r, e: (r.get("member_id") == e.member_id if e.member_id is not None
                                            else r.get("client_id") == e.client_id)
                              and r["removed_at_ms"] >= e.at_ms - 1000):
        if rec is None:
            v.fail("removals", f"no removal of {e.client_id} after '{e.action}' "
                               f"(expected {e.cause}/{e.root_cause})")
            continue
        pairs.append((e, rec))
        v.removals_found += 1
        if (rec.get("cause"), rec.get("root_cause")) == (e.cause, e.root_cause):
            assert v.causes_right is not None, "judge() counts the causes of a scenario's verdict"
            v.causes_right += 1
            if e.confidence is not None and rec.get("root_cause_confidence") != e.confidence:
                v.fail("cause", f"{e.client_id} after '{e.action}': {e.root_cause} rated "
                                f"{rec.get('root_cause_confidence')}, expected {e.confidence}: the brokers' records "
                                f"cannot tell it from another cause")
        else:
            v.fail("cause", f"{e.client_id} after '{e.action}': {rec.get('cause')}/{rec.get('root_cause')}, "
                            f"expected {e.cause}/{e.root_cause} ({rec.get('evidence')})")
        if e.evidence_has is not None and e.evidence_has not in (rec.get("evidence") or ""):
            v.fail("cause", f"{e.client_id} after '{e.action}': its evidence does not say {e.evidence_has!r} "
                            f"({rec.get('evidence')})")
        if rec.get("protocol") != exp.protocol:
            v.fail("removals", f"{e.client_id}: protocol {rec.get('protocol')}, expected {exp.protocol}")
        times = exp.removal_lines.get(rec.get("member_id"), [])
        if not any(_near(rec["removed_at_ms"], t) for t in times):
            v.fail("removals", f"{e.client_id}: removed_at_ms {rec['removed_at_ms']} matches no broker line "
                               f"removing {rec.get('member_id')} ({times})")
    for rec in left:
        v.fail("extra", f"removal record not caused by the bed: {rec.get('client_id')} {rec.get('member_id')} "
                        f"{rec.get('cause')}/{rec.get('root_cause')} at {rec['removed_at_ms']}")
    return pairs


def _check_metrics(v: Verdict, exp: Expected, reb_pairs: list, rem_pairs: list, samples: Samples) -> None:
    want: Counter = Counter()
    for e in exp.rebalances:
        rec = next((r for ee, r in reb_pairs if ee is e), None)
        outcome = rec["outcome"] if rec is not None and rec.get("outcome") in e.outcomes else e.outcomes[0]
        want[(e.trigger, outcome)] += 1
    for (trigger, outcome), n in sorted(want.items()):
        got = samples.total("rebalance_monitor_rebalances_total", group=exp.group, trigger=trigger, outcome=outcome)
        if got != n:
            v.fail("metrics", f"rebalances_total{{trigger={trigger},outcome={outcome}}} {got:g}, expected {n}")
    total = samples.total("rebalance_monitor_rebalances_total", group=exp.group)
    if total != sum(want.values()):
        v.fail("metrics", f"rebalances_total of the group {total:g}, expected {sum(want.values())}")
    rwant = Counter((e.cause, e.root_cause) for e in exp.removals)
    for (cause, root), n in sorted(rwant.items()):
        got = samples.total("rebalance_monitor_member_removals_total", group=exp.group, cause=cause,
                            root_cause=root)
        if got != n:
            v.fail("metrics", f"member_removals_total{{cause={cause},root_cause={root}}} {got:g}, expected {n}")
    rtotal = samples.total("rebalance_monitor_member_removals_total", group=exp.group)
    if rtotal != sum(rwant.values()):
        v.fail("metrics", f"member_removals_total of the group {rtotal:g}, expected {sum(rwant.values())}")
    # A Dead group has no gauge series (docs/metrics.md); its counters above stay for the retention.
    states = [labels.get("state") for labels, _ in samples.series("rebalance_monitor_group_state", group=exp.group)]
    if exp.dead and states:
        v.fail("dead", f"group_state{{state={','.join(map(str, states))}}} still exported after the group was "
                       "deleted / its offsets expired (a Dead group has no gauges)")


def _latencies(v: Verdict, exp: Expected, reb_pairs: list, rem_pairs: list, watch) -> None:
    if watch is None:
        return
    ends = sorted((e.end_ms or rec.get("ended_at_ms") or rec.get("started_at_ms") or 0) for e, rec in reb_pairs)
    lat = [watch.first_reached("rebalance_monitor_rebalances_total", exp.group, n + 1) for n in range(len(ends))]
    if ends and all(t is not None for t in lat):
        v.rebalance_latency_s = round(max(t - e for t, e in zip(lat, ends)) / 1000, 1)
        v.latency_span = (min(ends), max(lat))
    rends = sorted(rec["removed_at_ms"] for _, rec in rem_pairs)
    rlat = [watch.first_reached("rebalance_monitor_member_removals_total", exp.group, n + 1) for n in range(len(rends))]
    if rends and all(t is not None for t in rlat):
        v.removal_latency_s = round(max(t - e for t, e in zip(rlat, rends)) / 1000, 1)
        lo, hi = v.latency_span or (min(rends), max(rlat))
        v.latency_span = (min(lo, min(rends)), max(hi, max(rlat)))


def judge(version: str, scenario: str, exp: Expected, sink: dict, samples: Samples | dict, watch=None,
          quarantine: list | None = None) -> Verdict:
    """`sink`: kind -> the group's records; `samples`: a parsed /metrics page (testbed.metrics.parse);
    `quarantine`: quarantine records attributed to this scenario (naming its group, or logged during it)."""
    v = Verdict(version, scenario, exp.group, rebalances_expected=len(exp.rebalances),
                removals_expected=len(exp.removals))
    reb_pairs = _match_rebalances(v, exp, sink.get("rebalances", []))
    rem_pairs = _match_removals(v, exp, sink.get("member_removals", []))
    for a in sink.get("anomalies", []):
        v.fail("anomaly", f"{a.get('kind')}: {a}")
    for q in quarantine or []:
        v.fail("quarantine", f"{q.get('reason')}: {(q.get('raw') or q.get('detail') or '')[:160]}")
    _check_metrics(v, exp, reb_pairs, rem_pairs, Samples(samples))
    _check_impact(v, exp, rem_pairs, sink.get("rebalances", []))
    if scenario in IMPACT_SCENARIOS:
        _check_stops(v, exp, sink.get("rebalances", []))
    _latencies(v, exp, reb_pairs, rem_pairs, watch)
    _check_at_risk(v, exp, watch)
    return v.settle(known_for(version, scenario))


def _check_at_risk(v: Verdict, exp: Expected, watch) -> None:
    """Only a member whose poll loop the bed stopped (records waiting, no commit) heads for a poll
    timeout: a group without one never shows a member at risk (issue 54: none over the matrix)."""
    seen = None if watch is None else watch.most_at_risk(exp.group)
    if seen is not None and not any(r.action == "stop_polling" for r in exp.removals):
        v.fail("at_risk", f"{seen[0]:g} member(s) shown at risk of a poll timeout (first at {seen[1]} ms) in a "
                          "group whose members never stopped polling")


# How far the monitor's estimate of when a killed member's partitions stopped (its last heartbeat:
# its removal minus its session timeout) may be from the kill, per partition: the bed's members
# heartbeat every 0.5 s (member.py), and the survivors' clients log their assignment a moment after
# the rebalance's completion.
IMPACT_TOLERANCE_S = 1.5


def _check_impact(v: Verdict, exp: Expected, rem_pairs: list, rebalances: list) -> None:
    """docs/impact.md against the bed's ground truth: the partition-seconds the rebalance that
    reassigned a killed member's partitions charges to that member's removal, against the kill and
    the survivors' own assignment callbacks."""
    for stop in exp.stops:
        removal = next((rec for e, rec in rem_pairs if e.client_id == stop.client_id and e.action == "kill"), None)
        if removal is None or len(stop.reassigned_ms) < len(stop.partitions):
            continue          # the removal check failed already, or the bed did not see every reassignment
        member = removal["member_id"]
        record = next((r for r in rebalances if member in (r.get("partition_seconds_by_departed_member") or {})), None)
        if record is None:
            v.fail("impact", f"no rebalance record counts the stop of {stop.client_id}'s partitions")
            continue
        # what the protocol predicts: an eager assignor stops every partition of the group, a
        # cooperative one only the killed member's (a KIP-848 record, assignor null, may also carry
        # the stops of the superseded epochs before it: _check_stops judges those)
        predicted = stop.group_partitions if record.get("assignor") in EAGER_ASSIGNORS else len(stop.partitions)
        if record.get("assignor") is not None and record.get("partitions_stopped") != predicted:
            v.fail("impact", f"the rebalance after {stop.client_id}'s kill stopped {record.get('partitions_stopped')} "
                             f"partitions; {record.get('assignor')} predicts {predicted}")
        truth = sum(t - stop.stopped_ms for t in stop.reassigned_ms.values()) / 1000
        got = record["partition_seconds_by_departed_member"][member]
        v.impact_checked += 1
        v.impact_error_s = max(v.impact_error_s or 0.0, round(abs(got - truth) / len(stop.partitions), 3))
        if abs(got - truth) > IMPACT_TOLERANCE_S * len(stop.partitions):
            v.fail("impact", f"{stop.client_id}'s {len(stop.partitions)} partitions: the monitor counts "
                             f"{got:.3f} partition-seconds, the bed {truth:.3f} (kill to the survivors' assignment)")


# Scenarios whose every stop the bed knows: members only join, leave and die, and a topic gets more
# partitions (a paused or stalled member may keep its partitions and consume again without a
# callback; a static member's wait for its return is no rebalance's cost).
IMPACT_SCENARIOS = frozenset({"join_leave", "kill", "cooperative", "kip848", "kip848_partitions"})
# A client hears of its new partitions after the broker completed the rebalance (classic: the
# SyncGroup response; KIP-848: the heartbeat response after its assignment record).
RESUME_SLACK_MS = 500


def record_window(ends: list[tuple[int, str]], t: int) -> int:
    """The index, in `ends` ((completion ms, protocol) of the measured records, in time order), of
    the record whose window a client's assignment callback at `t` closes; len(ends): none yet. A
    classic record completes on the broker's "Assignment received" line, before its members'
    callbacks: the latest such completion at or before t (TIME_TOLERANCE_MS for the line's
    rounding), so a rebalance that follows another within milliseconds (kafka-python's leader
    rejoining) takes the callbacks of its own generation. A KIP-848 record completes on an offsets
    record written after the member reported its assignment: the first completion from
    RESUME_SLACK_MS before t on."""
    first = next((n for n, (end, _) in enumerate(ends) if t <= end + RESUME_SLACK_MS), len(ends))
    if first < len(ends) and ends[first][1] == "classic":
        done = [n for n in range(first, len(ends)) if ends[n][1] == "classic" and ends[n][0] <= t + TIME_TOLERANCE_MS]
        return done[-1] if done else first
    return first


def _check_stops(v: Verdict, exp: Expected, rebalances: list) -> None:
    """docs/impact.md against the bed's ground truth, over the whole scenario: the partitions the
    monitor's rebalance records say stopped are the stops the members' own callbacks show (an eager
    rebalance stops every partition, a cooperative or KIP-848 one only those that move), and their
    partition-seconds are the bed's, within IMPACT_TOLERANCE_S per partition."""
    unmeasured = [r for r in rebalances if r.get("partitions_stopped") is None
                  and r.get("outcome") == "stable"]
    for r in unmeasured:
        v.fail("impact", f"rebalance of generation {r.get('generation')} ({r.get('trigger')}) not measured: "
                         f"{r.get('impact_unknown_reason')}")
    stopped = sum(r.get("partitions_stopped") or 0 for r in rebalances)
    seconds = sum(r.get("partition_seconds_stopped") or 0 for r in rebalances)
    truth = sum(g.resumed_ms - g.stopped_ms for g in exp.gaps) / 1000
    # A record counts a partition once, however often it stopped since the group's previous record
    # (a KIP-848 record also carries the stops of the superseded epochs before it): the partitions
    # whose stops ended in each record's window, from the previous measured completion on.
    ends = sorted((r["completed_at_ms"], r.get("protocol") or "classic") for r in rebalances
                  if r.get("partitions_stopped") is not None and r.get("completed_at_ms") is not None)
    windows: dict[int, set] = {}
    for g in exp.gaps:
        windows.setdefault(record_window(ends, g.resumed_ms), set()).add(g.partition)
    # A client that had not received its first assignment when an eager rebalance of a later
    # generation began (kafka-python's leader rejoining while another member still syncs, or the
    # leader itself rejoining before its own client took the assignment): its partitions waited
    # through that rebalance too, and the record counts them, though no callback shows a stop. On a
    # loaded machine the leader may rejoin more than once before that client takes one: the
    # partitions waited through each of those eager rebalances and each record counts them. They
    # count in every eager window up to the one where a client was first given them.
    eager_ends = {r["completed_at_ms"] for r in rebalances if r.get("assignor") in EAGER_ASSIGNORS
                  and (r.get("previous_generation") or 0) >= 1 and r.get("partitions_stopped") is not None
                  and r.get("completed_at_ms") is not None}
    for p, given in exp.first_given.items():
        k = record_window(ends, given)
        for n in range(min(k + 1, len(ends))):
            if ends[n][0] in eager_ends:
                windows.setdefault(n, set()).add(p)
    # The same for a partition the broker gave a client that never took it (kafka-python's leader
    # rejoining before its own client's callback, 4.2.2 kill): stopped since its owner died, it
    # waited through each eager rebalance that completed before its resume, and each record counts it.
    for g in exp.gaps:
        k = record_window(ends, g.resumed_ms)
        for n in range(min(k, len(ends))):
            if ends[n][0] in eager_ends and ends[n][0] > g.stopped_ms:
                windows.setdefault(n, set()).add(g.partition)
    expected = sum(len(parts) for parts in windows.values())
    v.stops_expected, v.stops_found = expected, stopped
    if stopped != expected:
        hows = ", ".join(sorted({g.how for g in exp.gaps})) or "none"
        v.fail("impact", f"the rebalance records stopped {stopped} partitions in all; the members' callbacks show "
                         f"{expected} ({len(exp.gaps)} stops: {hows})")
    elif exp.gaps:
        v.impact_error_s = max(v.impact_error_s or 0.0, round(abs(seconds - truth) / len(exp.gaps), 3))
        if abs(seconds - truth) > IMPACT_TOLERANCE_S * len(exp.gaps):
            v.fail("impact", f"the rebalance records count {seconds:.3f} partition-seconds stopped, the members' "
                             f"callbacks {truth:.3f} ({len(exp.gaps)} stops)")
