"""The human-readable summary of a replay or the demo: rebalances, member removals, diagnosis."""
from __future__ import annotations

import sys
from datetime import datetime, timezone
from typing import Any, TextIO


def _utc(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def _short(member: str | None, width: int = 30) -> str:
    if not member:
        return "-"
    return member if len(member) <= width else member[: width - 1] + "…"


def print_summary(collector: Any, out: TextIO = sys.stdout) -> None:
    rebalances = sorted(collector.rebalances + collector.in_progress_rebalances(),
                        key=lambda r: (r["cluster"], r["group"], r["started_at_ms"] or 0, r["generation"] or 0))
    header = f"{'cluster':<10} {'group':<34} {'proto':<8} {'gen':>7} {'start UTC':<12} " \
             f"{'join s':>7} {'sync s':>7} {'total s':>8} {'trigger':<17} {'outcome':<11} members"
    print(f"\nREBALANCES ({len(rebalances)})\n{header}\n{'-' * len(header)}", file=out)
    for r in rebalances:
        def sec(v):
            return "-" if v is None else f"{v:.3f}"
        previous, current = r["previous_generation"], r["generation"]
        gen = f"{'?' if previous is None else previous}->{'?' if current is None else current}"
        print(f"{r['cluster']:<10} {r['group'][:34]:<34} {r['protocol']:<8} {gen:>7} {_utc(r['started_at_ms']):<12} "
              f"{sec(r['join_seconds']):>7} {sec(r['sync_seconds']):>7} {sec(r['total_seconds']):>8} "
              f"{r['trigger']:<17} {r['outcome']:<11} {r['members'] if r['members'] is not None else '-'}", file=out)
    removals = sorted(collector.removals, key=lambda r: (r["cluster"], r["group"], r["removed_at_ms"]))
    header = f"{'cluster':<10} {'group':<34} {'member':<31} {'client':<22} {'removed UTC':<12} {'cause':<22} root_cause"
    print(f"\nMEMBER REMOVALS ({len(removals)})\n{header}\n{'-' * len(header)}", file=out)
    for r in removals:
        print(f"{r['cluster']:<10} {r['group'][:34]:<34} {_short(r['member_id']):<31} "
              f"{_short(r['client_id'], 22):<22} {_utc(r['removed_at_ms']):<12} {r['cause']:<22} {r['root_cause']}",
              file=out)
    print_diagnosis(collector, out)
    print(f"\n{len(collector.snapshots)} groups, {len(collector.quarantine)} quarantined inputs, "
          f"{len(collector.anomalies)} invalid transitions", file=out)


def print_diagnosis(collector: Any, out: TextIO = sys.stdout) -> None:
    """Removals by root cause with their evidence, and the rebalances that hit their timeout."""
    removals = sorted(collector.removals, key=lambda r: (r["cluster"], r["removed_at_ms"], r["group"]))
    by_root: dict[str, list[dict]] = {}
    for r in removals:
        by_root.setdefault(r["root_cause"], []).append(r)
    print(f"\nDIAGNOSIS ({len(removals)} removals)", file=out)
    order = ("process_crash", "process_pause", "slow_processing", "host_wide", "coordinator_wide",
             "graceful_shutdown", "unknown")
    for root in sorted(by_root, key=lambda k: order.index(k) if k in order else len(order)):
        rows = by_root[root]
        print(f"  {root} ({len(rows)})", file=out)
        shown = rows if root != "graceful_shutdown" else rows[:3]
        for r in shown:
            print(f"    {r['cluster']} {_utc(r['removed_at_ms'])} {r['group'][:34]} {r['cause']}: {r['evidence']}",
                  file=out)
        if len(shown) < len(rows):
            print(f"    ... {len(rows) - len(shown)} more", file=out)
    slow = [r for r in collector.rebalances if r.get("hit_rebalance_timeout")]
    if slow:
        print(f"  rebalances that ran into their rebalance timeout ({len(slow)})", file=out)
        for r in slow:
            print(f"    {r['cluster']} {r['group'][:34]} {r['previous_generation']}->{r['generation']}: JOIN "
                  f"{r['join_seconds']} s of {(r['rebalance_timeout_ms'] or 0) / 1000:.1f} s, waited for "
                  f"{_short(r['waited_for_member']) if r['waited_for_member'] else '?'}", file=out)
