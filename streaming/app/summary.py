"""The printed summary of a replay or the demo, for a 100-column terminal: the diagnosis first
(removals that were not planned, with their evidence; rebalances that ran into their timeout),
then each group's rebalances and removals in time order, with dates. Full records stay in the
JSON-lines outputs; the summary says where they are.
"""
from __future__ import annotations

import sys
import textwrap
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any, TextIO

from state.impact import cooperative_would_stop
from state.vocabulary import Outcome, RemovalCause, RootCause

WIDTH = 100
ROOT_ORDER = (RootCause.PROCESS_CRASH, RootCause.PROCESS_PAUSE, RootCause.SLOW_PROCESSING, RootCause.HOST_WIDE,
              RootCause.COORDINATOR_WIDE, RootCause.UNKNOWN, RootCause.GRACEFUL_SHUTDOWN)


def utc(ms: int | None) -> str:
    """2026-11-21 19:22:53.772 (UTC), 23 characters; '-' padded when unknown."""
    if ms is None:
        return f"{'-':<23}"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def fit(line: str, width: int = WIDTH) -> str:
    """The line as it is when it fits; else cut, marked with '…' (names longer than a terminal)."""
    line = line.rstrip()
    return line if len(line) <= width else line[: width - 1] + "…"


def wrap(text: str, indent: int) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=" " * indent, subsequent_indent=" " * indent,
                         break_long_words=True, break_on_hyphens=False) or [""]


def who(r: dict) -> str:
    name = r.get("group_instance_id") or r.get("client_id") or r["member_id"]
    return f"{name}@{r['client_host'].lstrip('/')}" if r.get("client_host") else name


def generation(r: dict) -> str:
    previous, current = r.get("previous_generation"), r.get("generation")
    return f"{'?' if previous is None else previous}->{'?' if current is None else current}"


def start_ms(r: dict) -> int | None:
    return next((r.get(k) for k in ("started_at_ms", "join_completed_at_ms", "assigned_at_ms", "completed_at_ms",
                                    "ended_at_ms") if r.get(k) is not None), None)


def rebalance_line(r: dict, trigger_width: int = 17) -> str:
    total = "-" if r.get("total_seconds") is None else f"{r['total_seconds']:.3f} s"
    members = "" if r.get("members") is None else f"{r['members']} member{'' if r['members'] == 1 else 's'}"
    timeout = " TIMEOUT" if r.get("hit_rebalance_timeout") else ""
    return fit(f"  {utc(start_ms(r))} rebalance {generation(r):<7} {r['trigger']:<{trigger_width}} "
               f"{r['outcome']:<11} {total:>10}  {members}{timeout}")


def removal_line(r: dict, cause_width: int = 17, root_width: int = 17) -> str:
    return fit(f"  {utc(r['removed_at_ms'])} removed   {r['cause']:<{cause_width}} -> "
               f"{r.get('root_cause') or RootCause.UNKNOWN:<{root_width}} {who(r)}")


# The correlator appends each removal's own per-group evidence to a host-/coordinator-wide one; the
# summary keeps the shared part (the records keep both).
PER_GROUP_SUFFIX = " (per group: "


def diagnosis_lines(rebalances: list[dict], removals: list[dict], max_per_cause: int | None = None) -> list[str]:
    """Removals by root cause (planned leaves only counted) with their evidence, and the rebalances
    that ran into their rebalance timeout. `max_per_cause`: the first removals of each root cause
    listed, the rest counted (a fleet's day can hold tens of thousands of one cause)."""
    causes = Counter(r.get("root_cause") or RootCause.UNKNOWN for r in removals)
    groups = {(r["cluster"], r["group"]) for r in removals}
    slow = sorted((r for r in rebalances if r.get("hit_rebalance_timeout")), key=lambda r: start_ms(r) or 0)
    counts = ", ".join(f"{c} {causes[c]}" for c in sorted(causes, key=_root_rank))
    head = f"DIAGNOSIS: {len(removals)} member removals in {len(groups)} groups" + (f" ({counts})" if counts else "")
    lines = [*textwrap.wrap(head, WIDTH, subsequent_indent="  "),
             f"  {len(slow)} rebalance(s) ran into their rebalance timeout"]
    for root in sorted(causes, key=_root_rank):
        if root == RootCause.GRACEFUL_SHUTDOWN:
            lines.append(f"\n{root} ({causes[root]}): planned leaves, listed per group below")
            continue
        lines.append(f"\n{root} ({causes[root]})")
        previous = None
        listed = sorted((r for r in removals if (r.get("root_cause") or RootCause.UNKNOWN) == root),
                        key=lambda r: r["removed_at_ms"])
        for r in listed[:max_per_cause]:
            lines += removal_diagnosis(r, previous)
            previous = r
        if max_per_cause is not None and len(listed) > max_per_cause:
            lines.append(f"  ... {len(listed) - max_per_cause} more {root} removals: see the outputs")
    if slow:
        lines.append(f"\nrebalances that ran into their rebalance timeout ({len(slow)})")
    for r in slow[:max_per_cause]:
        lines.append(fit(f"  {utc(start_ms(r))}  {r['cluster']}  {r['group']}  {generation(r)}"))
        timeout = (r.get("rebalance_timeout_ms") or 0) / 1000
        lines += wrap(f"JOIN {r.get('join_seconds')} s of a {timeout:.1f} s rebalance timeout; waited for "
                      f"{r.get('waited_for_member') or '?'}", 6)
    if max_per_cause is not None and len(slow) > max_per_cause:
        lines.append(f"  ... {len(slow) - max_per_cause} more such rebalances: see the outputs")
    return lines


def removal_diagnosis(r: dict, previous: dict | None) -> list[str]:
    """A removal's line and its evidence, wrapped; the evidence is left out when it is the previous
    removal's (one host-wide burst)."""
    head = f"  {utc(r['removed_at_ms'])}  {r['cluster']}  {r['group']}  {r['cause']}"
    evidence = (r.get("evidence") or "(no evidence recorded)").split(PER_GROUP_SUFFIX)[0]
    name = r.get("group_instance_id") or r.get("client_id") or r["member_id"]
    if len(head) + 2 + len(who(r)) <= WIDTH:
        head += f"  {who(r)}"
    elif name not in evidence:
        evidence = f"{who(r)}: {evidence}"
    if previous is not None and evidence == (previous.get("evidence") or "").split(PER_GROUP_SUFFIX)[0]:
        return [fit(head)]
    sure = r.get("root_cause_confidence")
    if sure:
        evidence += f" [confidence {sure}: {r.get('root_cause_confidence_reason')}]"
    return [fit(head), *wrap(evidence, 6)]


def cost_lines(rebalances: list[dict], removals: list[dict], top: int = 5) -> list[str]:
    """The rebalances that stopped the most consumption (docs/impact.md), each with why."""
    measured = [r for r in rebalances if r.get("partition_seconds_stopped") is not None]
    unmeasured = sum(1 for r in rebalances
                     if r.get("partitions_stopped") is None and r["outcome"] != Outcome.IN_PROGRESS)
    total = sum(r["partition_seconds_stopped"] for r in measured)
    head = (f"COST: the rebalances stopped {total:,.1f} partition-seconds of consumption"
            f" ({len(measured)} rebalances measured, {unmeasured} not: impact_unknown_reason says why)")
    lines = ["", *textwrap.wrap(head, WIDTH, subsequent_indent="  ")]
    members = {r["member_id"]: r for r in removals}
    # by the records they delayed (`run`'s rebalance_costs), then by partition-seconds
    for r in sorted(measured, key=lambda r: (-(r.get("records_delayed") or 0), -r["partition_seconds_stopped"]))[:top]:
        if r["partition_seconds_stopped"] <= 0:
            break
        lines.append(fit(f"  {utc(start_ms(r))}  {r['cluster']}  {r['group']}  {generation(r)}  {r['trigger']}"))
        why = cost_reason(r, members)
        delayed = "" if r.get("records_delayed") is None else f", {r['records_delayed']:,} records delayed"
        if r.get("catch_up_seconds") is not None:
            delayed += f", caught up {r['catch_up_seconds']:,.1f} s after"
        lines += wrap(f"{r['partitions_stopped']} partitions stopped, {r['partition_seconds_stopped']:,.1f} "
                      f"partition-seconds{delayed}" + (f": {why}" if why else ""), 6)
    return lines


_STOPPED_AT: dict[str, str] = {
    RemovalCause.HEARTBEAT_EXPIRY: "its partitions stopped at its last heartbeat, a session timeout before its expiry",
    RemovalCause.POLL_TIMEOUT: "its partitions stopped at its last poll, max.poll.interval.ms before it left",
    RemovalCause.REBALANCE_TIMEOUT: "it did not rejoin, and its partitions stopped for the whole JOIN phase",
    RemovalCause.SYNC_TIMEOUT: "it did not sync, and its partitions stopped for the whole rebalance",
}


def cost_reason(r: dict, removals: dict[str, dict]) -> str | None:
    """Why a rebalance cost what it did: the removal that cost most, an eager assignor, a long JOIN."""
    by_member = r.get("partition_seconds_by_departed_member") or {}
    total = r["partition_seconds_stopped"]
    if by_member:
        member, seconds = max(by_member.items(), key=lambda kv: kv[1])
        if seconds >= total / 2:
            removal = removals.get(member)
            name = who(removal) if removal else member
            cause = f" ({removal['cause']})" if removal else ""
            how = _STOPPED_AT.get(removal["cause"] if removal else "", "its partitions stopped when it left")
            return f"{seconds / total:.0%} of it from the removal of {name}{cause}: {how}"
    moved = cooperative_would_stop(r)
    if moved is not None:
        stopped = r["partitions_stopped"]
        return (f"{r['assignor']} (eager) stopped all {stopped} partitions for the whole rebalance; "
                f"cooperative-sticky would have stopped {moved} of {stopped}")
    if r.get("waited_for_member"):
        return f"the JOIN phase waited {r.get('join_seconds')} s for {r['waited_for_member']}"
    return None


def _root_rank(root: str) -> int:
    return ROOT_ORDER.index(root) if root in ROOT_ORDER else len(ROOT_ORDER) - 1


def group_lines(rebalances: list[dict], removals: list[dict], max_groups: int | None = None,
                max_events: int | None = None) -> list[str]:
    """Per group (in the order of its first event): a header, then its events in time order."""
    # (time, 1 rebalance | 0 removal, index): a line is formatted only if it is shown (a replay of
    # 10,000 groups lists 40 of them).
    events: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    trigger_width = max((len(r["trigger"]) for r in rebalances), default=0)
    cause_width = max((len(r["cause"]) for r in removals), default=0)
    root_width = max((len(r.get("root_cause") or RootCause.UNKNOWN) for r in removals), default=0)
    for i, r in enumerate(rebalances):
        events.setdefault((r["cluster"], r["group"]), []).append((start_ms(r) or 0, 1, i))
    for i, r in enumerate(removals):
        events.setdefault((r["cluster"], r["group"]), []).append((r["removed_at_ms"], 0, i))

    def line(event: tuple[int, int, int]) -> str:
        _, is_rebalance, i = event
        return (rebalance_line(rebalances[i], trigger_width) if is_rebalance
                else removal_line(removals[i], cause_width, root_width))
    keys = sorted(events, key=lambda k: (min(e[0] for e in events[k]), k))
    hidden = 0
    if max_groups is not None and len(keys) > max_groups:
        # Counted in one pass: counting per group over every removal was quadratic (minutes at
        # 10,000 groups).
        unplanned: dict[tuple[str, str], int] = {}
        for r in removals:
            if r.get("root_cause") != RootCause.GRACEFUL_SHUTDOWN:
                key = (r["cluster"], r["group"])
                unplanned[key] = unplanned.get(key, 0) + 1

        def weight(k: tuple[str, str]) -> tuple[int, int]:
            return unplanned.get(k, 0), len(events[k])
        kept = set(sorted(keys, key=weight, reverse=True)[:max_groups])
        hidden, keys = len(keys) - len(kept), [k for k in keys if k in kept]
    protocols: dict[tuple[str, str], set[str]] = {}
    for r in [*rebalances, *removals]:
        protocols.setdefault((r["cluster"], r["group"]), set()).add(r["protocol"])
    lines = []
    for key in keys:
        rows = sorted((e[0], e[1], line(e)) for e in events[key])
        n_rb, n_rm = sum(1 for e in rows if e[1] == 1), sum(1 for e in rows if e[1] == 0)
        lines.append(fit(f"\n{key[0]}  {key[1]}  ({', '.join(sorted(protocols[key]))}; {n_rb} rebalance"
                         f"{'' if n_rb == 1 else 's'}, {n_rm} removal{'' if n_rm == 1 else 's'})", WIDTH + 1))
        shown = rows if max_events is None else rows[:max_events]
        lines += [text for _, _, text in shown]
        if len(shown) < len(rows):
            lines.append(f"  ... {len(rows) - len(shown)} more events of this group")
    if hidden:
        lines.append(f"\n... {hidden} more groups (fewer unplanned removals and rebalances): see the outputs")
    return lines


def summary_lines(rebalances: list[dict], removals: list[dict], totals: str, outputs: Iterable[str] = (),
                  max_groups: int | None = None, max_events: int | None = None) -> list[str]:
    """`max_events` caps the events listed per group and the removals listed per root cause."""
    rebalances = list(rebalances)
    groups = {(r["cluster"], r["group"]) for r in [*rebalances, *removals]}
    lines = diagnosis_lines(rebalances, list(removals), max_events)
    lines += cost_lines(rebalances, list(removals))
    lines.append(f"\nEVENTS BY GROUP: {len(rebalances)} rebalances, {len(removals)} member removals in "
                 f"{len(groups)} groups, UTC")
    lines += group_lines(rebalances, list(removals), max_groups, max_events)
    lines.append(f"\n{totals}")
    lines += [fit(line) for line in outputs]
    return lines


def summary_text(collector: Any, outputs: Iterable[str] = (), max_groups: int | None = None,
                 max_events: int | None = None) -> str:
    """The summary of what `collector` holds. `outputs`: lines saying where the full records (and
    the report) were written."""
    rebalances = collector.rebalances + collector.in_progress_rebalances()
    totals = (f"{len(collector.snapshots)} groups, {len(collector.quarantine)} quarantined inputs, "
              f"{len(collector.anomalies)} anomalies (invalid transitions, source mismatches)")
    return "\n".join(summary_lines(rebalances, collector.removals, totals, outputs, max_groups, max_events))


def print_summary(collector: Any, out: TextIO = sys.stdout, outputs: Iterable[str] = (),
                  max_groups: int | None = None, max_events: int | None = None) -> None:
    """summary_text, printed."""
    print(summary_text(collector, outputs, max_groups, max_events), file=out)
