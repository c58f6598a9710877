"""Inline SVG drawings of the report: the fleet timeline (rebalances per bin by trigger, storms) and
one timeline per group (phase bars, generations, members, removal markers). Every element that
stands for a record has a `<title>` (the browser's tooltip) with its details."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape

from sinks.report.data import GroupView, StormRules, fleet_bins, rebalance_start
from state.impact import cooperative_would_stop
from state.vocabulary import Outcome, Protocol, RootCause, Trigger

# One colour per member, by name (tests/unit/test_words.py: every trigger and root cause has its own).
TRIGGER_COLORS: dict[str, str] = {
    Trigger.MEMBER_JOIN: "#4e79a7", Trigger.MEMBER_LEAVE: "#f28e2b", Trigger.HEARTBEAT_EXPIRY: "#e15759",
    Trigger.POLL_TIMEOUT: "#b07aa1", Trigger.REBALANCE_TIMEOUT: "#9c755f", Trigger.METADATA_CHANGE: "#76b7b2",
    Trigger.LEADER_REJOIN: "#59a14f", Trigger.STATIC_MEMBER_REPLACED: "#edc948",
    Trigger.COORDINATOR_FAILOVER: "#ff9da7", Trigger.GROUP_EPOCH_BUMP: "#86bcb6",
    Trigger.GROUP_CONVERSION: "#d4a6c8", Trigger.ASSIGNMENT_STORE_FAILED: "#6b2d2d", Trigger.UNKNOWN: "#c8c8c8",
}
ROOT_CAUSE_COLORS: dict[str, str] = {
    RootCause.PROCESS_CRASH: "#d62728", RootCause.PROCESS_PAUSE: "#ff7f0e", RootCause.SLOW_PROCESSING: "#bcbd22",
    RootCause.GRACEFUL_SHUTDOWN: "#2ca02c", RootCause.HOST_WIDE: "#9467bd", RootCause.COORDINATOR_WIDE: "#1f77b4",
    RootCause.UNKNOWN: "#7f7f7f",
}
PHASE_COLORS = {"join": "#2b6cb0", "sync": "#90cdf4", "assignment": "#6b46c1", "reconciliation": "#c4b5fd",
                "open": "#e53e3e"}
PHASE_NAMES = {"join": "JOIN", "sync": "SYNC", "assignment": "assignment", "reconciliation": "reconciliation",
               "open": "still open"}
OTHER_COLOR = "#a0a0a0"
_TRIGGER_ORDER = {t: i for i, t in enumerate(Trigger)}

# Nice tick steps (ms) of a time axis.
_STEPS = [s * 1000 for s in (1, 2, 5, 10, 15, 30)] + [m * 60_000 for m in (1, 2, 5, 10, 15, 30)] + \
         [h * 3_600_000 for h in (1, 2, 3, 6, 12, 24)] + [d * 86_400_000 for d in (2, 7, 14, 30)]


def a(value: object) -> str:
    """An attribute or text value, escaped."""
    return escape(str(value), quote=True)


def utc(ms: int | None, date: bool = True) -> str:
    if ms is None:
        return "-"
    text = datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return text if date else text[11:]


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


@dataclass(frozen=True)
class Axis:
    """Event time [t0, t1] onto x pixels [x0, x1]."""
    t0: int
    t1: int
    x0: float
    x1: float

    def x(self, t: int) -> float:
        return self.x0 + (t - self.t0) * (self.x1 - self.x0) / max(1, self.t1 - self.t0)

    def ticks(self, min_gap_px: float = 110) -> list[int]:
        span = max(1, self.t1 - self.t0)
        most = max(1, int((self.x1 - self.x0) // min_gap_px))
        step = next((s for s in _STEPS if span / s <= most), _STEPS[-1])
        first = self.t0 - self.t0 % step + (step if self.t0 % step else 0)
        return list(range(first, self.t1 + 1, step))

    def draw(self, y: float, height: float) -> str:
        """Grid lines over `height` above y, tick labels below; the first label and each new day
        carry the date."""
        parts, last_day = [], None
        for t in self.ticks():
            x = self.x(t)
            day = utc(t)[:10]
            label = utc(t, date=False)[:8] if day == last_day else f"{day[5:]} {utc(t, date=False)[:8]}"
            last_day = day
            parts.append(f'<line class="grid" x1="{x:.1f}" y1="{y - height:.1f}" x2="{x:.1f}" y2="{y:.1f}"/>'
                         f'<text class="tick" x="{x:.1f}" y="{y + 13:.1f}" text-anchor="middle">{a(label)}</text>')
        return "".join(parts)


def padded(t0: int, t1: int, share: float = 0.03, minimum_ms: int = 10_000) -> tuple[int, int]:
    if t1 - t0 < minimum_ms:
        middle = (t0 + t1) // 2
        t0, t1 = middle - minimum_ms // 2, middle + minimum_ms // 2
    pad = int((t1 - t0) * share)
    return t0 - pad, t1 + pad


def bin_size(span_ms: int, width_px: float, min_bar_px: float = 6) -> int:
    """Bins of whole minutes (1, 2, 5, 10, 15, 30, 60, ...) with bars at least `min_bar_px` wide."""
    for minutes in (1, 2, 5, 10, 15, 30, 60, 120, 360, 720, 1440):
        if span_ms / (minutes * 60_000) * min_bar_px <= width_px:
            return minutes * 60_000
    return 1440 * 60_000


def fleet_chart(cluster: str, views: list[GroupView], rules: StormRules, width: int = 1360) -> str:
    """Rebalances of one cluster per bin, stacked by trigger; fleet bursts (at least
    `rules.burst_groups` groups in one bin) and group storms shaded behind the bars."""
    rebalances = [r for v in views for r in v.rebalances]
    starts = [t for r in rebalances if (t := rebalance_start(r)) is not None]
    if not starts:
        return '<p class="empty">No rebalance with a known start time.</p>'
    height, top, left, bottom = 190, 14, 46, 34
    t0, t1 = padded(min(starts), max(starts), share=0.0, minimum_ms=60_000)
    size = bin_size(t1 - t0, width - left - 10)
    t0, t1 = t0 - t0 % size, t1 - t1 % size + size
    axis = Axis(t0, t1, left, width - 10)
    bins = fleet_bins(rebalances, size)
    peak = max(sum(b["triggers"].values()) for b in bins.values())
    base = height - bottom
    scale = (base - top) / peak
    parts = [f'<svg class="fleet" viewBox="0 0 {width} {height}" width="100%" '
             f'data-cluster="{a(cluster)}" data-bin-ms="{size}" role="img">']
    for v in views:
        for first, last, count in v.storms:
            x0, x1 = axis.x(first - first % size), axis.x(last - last % size + size)
            tip = f"storm: {v.group} started {count} rebalances between {utc(first)} and {utc(last)} UTC"
            parts.append(f'<rect class="storm" x="{x0:.1f}" y="{top}" width="{max(2.0, x1 - x0):.1f}" '
                         f'height="{base - top}"><title>{a(tip)}</title></rect>')
    for start, b in sorted(bins.items()):
        if len(b["groups"]) >= rules.burst_groups:
            tip = f"{len(b['groups'])} groups started a rebalance in this bin"
            parts.append(f'<rect class="burst" x="{axis.x(start):.1f}" y="{top}" '
                         f'width="{axis.x(start + size) - axis.x(start):.1f}" height="{base - top}">'
                         f'<title>{a(tip)}</title></rect>')
    parts.append(axis.draw(base, base - top))
    for start, b in sorted(bins.items()):
        x, w = axis.x(start) + 1, max(1.0, axis.x(start + size) - axis.x(start) - 2)
        y = float(base)
        total = sum(b["triggers"].values())
        for trigger in sorted(b["triggers"], key=lambda t: _TRIGGER_ORDER.get(t, len(_TRIGGER_ORDER))):
            n = b["triggers"][trigger]
            y -= n * scale
            tip = (f"{utc(start)} UTC, {size // 60_000} min: {n} {trigger} of {total} rebalances in "
                   f"{len(b['groups'])} groups; they stopped {b['partition_seconds'] / 60:,.1f} partition-minutes")
            parts.append(f'<rect class="bin" data-trigger="{a(trigger)}" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" '
                         f'height="{n * scale:.1f}" fill="{TRIGGER_COLORS.get(trigger, OTHER_COLOR)}">'
                         f'<title>{a(tip)}</title></rect>')
    parts.append(_cost_line(bins, axis, size, top, base, width))
    for value in sorted({peak, (peak + 1) // 2}):
        y = base - value * scale
        parts.append(f'<text class="tick" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{value}</text>')
    parts.append(f'<text class="caption" x="{left}" y="{height - 4}">rebalances started per '
                 f'{size // 60_000} min, UTC</text></svg>')
    return "".join(parts)


def _cost_line(bins: dict, axis: Axis, size: int, top: int, base: int, width: int) -> str:
    """Partition-minutes the bin's rebalances stopped (docs/impact.md), a line on its own scale."""
    costs = {start: b["partition_seconds"] / 60 for start, b in bins.items()}
    peak = max(costs.values(), default=0.0)
    if peak <= 0:
        return ""
    points = " ".join(f"{axis.x(start + size / 2):.1f},{base - (base - top) * cost / peak:.1f}"
                      for start, cost in sorted(costs.items()))
    return (f'<polyline class="cost" points="{points}" fill="none" stroke="#c53030" stroke-width="1.5">'
            f'<title>{a(f"partition-minutes stopped per bin (peak {peak:,.1f})")}</title></polyline>'
            f'<text class="tick cost" x="{width - 12}" y="{top + 4}" text-anchor="end" fill="#c53030">'
            f'{peak:,.1f} partition-min</text>')


def impact_line(r: dict) -> str:
    """What the rebalance stopped (docs/impact.md), or why that is not known."""
    if r.get("partitions_stopped") is None:
        return f"impact not measured: {r.get('impact_unknown_reason') or 'unknown'}"
    line = (f"stopped {r['partitions_stopped']} partitions, {r['partition_seconds_stopped']:,.3f} partition-seconds")
    by_member = r.get("partition_seconds_by_departed_member") or {}
    if by_member:
        line += "; from removed members: " + ", ".join(f"{m} {s:,.3f}" for m, s in by_member.items())
    if r.get("partitions_unassigned"):
        line += f"; {r['partitions_unassigned']} partitions left without an owner"
    moved = cooperative_would_stop(r)
    if moved is not None:
        line += f"; cooperative-sticky would have stopped {moved}"
    if r.get("records_delayed") is not None:              # `run`'s rebalance_costs (docs/impact.md)
        line += f"; {r['records_delayed']:,} records arrived on them while stopped"
    if r.get("catch_up_seconds") is not None:
        line += f"; the group was back to its lag before it {r['catch_up_seconds']:,.1f} s after"
    elif r.get("catch_up_unknown_reason"):
        line += f"; catch-up: {r['catch_up_unknown_reason'].replace('_', ' ')}"
    return line


def rebalance_tip(r: dict) -> str:
    gen = f"{'?' if r.get('previous_generation') is None else r['previous_generation']}->" \
          f"{'?' if r.get('generation') is None else r['generation']}"
    lines = [f"generation {gen} ({r['protocol']}): {r['outcome']}, trigger {r['trigger']}"
             + (f" ({r['trigger_member']})" if r.get("trigger_member") else ""),
             f"started {utc(r.get('started_at_ms'))} UTC"]
    if r["protocol"] == Protocol.CONSUMER:
        phases = [("assignment", r.get("started_at_ms"), r.get("assigned_at_ms")),
                  ("reconciliation", r.get("assigned_at_ms"), r.get("completed_at_ms"))]
        lines.append(", ".join(f"{name} {seconds((e - s) / 1000) if s is not None and e is not None else '-'}"
                               for name, s, e in phases) + f", total {seconds(r.get('total_seconds'))}")
    else:
        lines.append(f"JOIN {seconds(r.get('join_seconds'))}, SYNC {seconds(r.get('sync_seconds'))}, "
                     f"total {seconds(r.get('total_seconds'))}")
    if r.get("members") is not None:
        lines.append(f"{r['members']} members after it")
    if r["outcome"] != Outcome.IN_PROGRESS:
        lines.append(impact_line(r))
    if r.get("hit_rebalance_timeout"):
        lines.append(f"ran into the rebalance timeout ({(r.get('rebalance_timeout_ms') or 0) / 1000:.0f} s), "
                     f"waited for {r.get('waited_for_member') or '?'}")
    if r.get("removed_members"):
        lines.append("removed: " + ", ".join(r["removed_members"]))
    if r.get("reason_text"):
        lines.append(f"reason: {r['reason_text']}")
    return "\n".join(lines)


def phases(r: dict, end_of_view: int) -> list[tuple[str, int, int]]:
    """(phase, from, to) of one rebalance record; an open one runs to the end of the view."""
    start = rebalance_start(r)
    end = r.get("completed_at_ms") or r.get("ended_at_ms")
    if start is None:
        return []
    if r["outcome"] == Outcome.IN_PROGRESS:
        return [("open", start, end_of_view)]
    if end is None:
        end = start
    if r["protocol"] == Protocol.CONSUMER:
        middle = r.get("assigned_at_ms")
        if middle is None or not start <= middle <= end:
            return [("reconciliation", start, end)]
        return [("assignment", start, middle), ("reconciliation", middle, end)]
    middle = r.get("join_completed_at_ms")
    if middle is None or not start <= middle <= end:
        return [("join" if r.get("completed_at_ms") is None else "sync", start, end)]
    return [("join", start, middle), ("sync", middle, end)]


def removal_tip(r: dict) -> str:
    who = r.get("group_instance_id") or r.get("client_id") or r["member_id"]
    host = f" {r['client_host']}" if r.get("client_host") else ""
    return (f"{utc(r['removed_at_ms'])} UTC: {who}{host} removed, {r['cause']} -> "
            f"{r.get('root_cause') or RootCause.UNKNOWN}\nmember {r['member_id']}\n{r.get('evidence') or ''}").rstrip()


def members_points(view: GroupView) -> list[tuple[int, int]]:
    """(time, members) after each rebalance that says how many members it left, from 0 before a
    group's first generation."""
    points: list[tuple[int, int]] = []
    for r in view.rebalances:
        start = rebalance_start(r)
        if not points and r.get("previous_generation") == 0 and start is not None:
            points.append((start, 0))
        end = r.get("completed_at_ms") or r.get("ended_at_ms")
        if r.get("members") is not None and end is not None:
            points.append((end, r["members"]))
    return points


def _members_lane(view: GroupView, axis: Axis, y0: float, height: float) -> str:
    points = members_points(view)
    if not points:
        return f'<text class="note" x="{axis.x0 + 4}" y="{y0 + height / 2 + 4:.1f}">member counts not known</text>'
    peak = max(1, max(n for _, n in points))
    def y(n: int) -> float:
        return y0 + height - n * height / peak
    path, last_y = [f"M{axis.x(points[0][0]):.1f},{y(points[0][1]):.1f}"], y(points[0][1])
    for t, n in points[1:]:
        x = axis.x(t)
        path.append(f"L{x:.1f},{last_y:.1f}L{x:.1f},{y(n):.1f}")
        last_y = y(n)
    path.append(f"L{axis.x1:.1f},{last_y:.1f}")
    dots = "".join(f'<circle class="members" cx="{axis.x(t):.1f}" cy="{y(n):.1f}" r="2.5">'
                   f'<title>{a(f"{utc(t)} UTC: {n} members")}</title></circle>' for t, n in points)
    return (f'<path class="members" d="{"".join(path)}"/>{dots}'
            f'<text class="tick" x="{axis.x0 - 6}" y="{y(peak) + 4:.1f}" text-anchor="end">{peak}</text>'
            f'<text class="tick" x="{axis.x0 - 6}" y="{y(0) + 4:.1f}" text-anchor="end">0</text>')


def _rebalance_lane(view: GroupView, axis: Axis, y0: float, height: float) -> str:
    """Phase bars; under each, a mark whose height is the rebalance's cost (partition-seconds
    stopped) against the group's costliest rebalance."""
    parts, last_label_x = [], -1e9
    costliest = max((r.get("partition_seconds_stopped") or 0.0 for r in view.rebalances), default=0.0)
    for r in view.rebalances:
        spans = phases(r, axis.t1)
        if not spans:
            continue
        outcome = r["outcome"]
        bars = []
        for name, s, e in spans:
            x0, x1 = axis.x(s), axis.x(e)
            bars.append(f'<rect class="phase" data-phase="{name}" x="{x0:.1f}" y="{y0:.1f}" '
                        f'width="{max(3.0, x1 - x0):.1f}" height="{height}" fill="{PHASE_COLORS[name]}"/>')
        label = ""
        x_label = axis.x(spans[0][1])
        if r.get("generation") is not None and x_label - last_label_x >= 22:
            label = f'<text class="gen" x="{x_label:.1f}" y="{y0 - 3:.1f}">{r["generation"]}</text>'
            last_label_x = x_label
        cost = r.get("partition_seconds_stopped")
        if cost and costliest > 0:
            x0, x1 = axis.x(spans[0][1]), axis.x(spans[-1][2])
            bars.append(f'<rect class="cost" x="{x0:.1f}" y="{y0 + height + 1:.1f}" width="{max(3.0, x1 - x0):.1f}" '
                        f'height="{max(1.0, 6 * cost / costliest):.1f}" fill="#c53030"/>')
        mark = ' stroke="#c53030" stroke-width="1.5"' if r.get("hit_rebalance_timeout") else ""
        parts.append(f'<g class="rebalance" data-outcome="{a(outcome)}" data-generation="{a(r.get("generation"))}"'
                     f' data-partition-seconds="{a("" if cost is None else cost)}"'
                     f'{mark}><title>{a(rebalance_tip(r))}</title>{"".join(bars)}{label}</g>')
    return "".join(parts)


def _removal_lane(view: GroupView, axis: Axis, y0: float) -> str:
    parts = []
    for r in view.removals:
        x = axis.x(r["removed_at_ms"])
        color = ROOT_CAUSE_COLORS.get(r.get("root_cause") or RootCause.UNKNOWN, OTHER_COLOR)
        parts.append(f'<path class="removal" data-cause="{a(r["cause"])}" data-root-cause="{a(r.get("root_cause"))}" '
                     f'd="M{x - 6:.1f},{y0:.1f}L{x + 6:.1f},{y0:.1f}L{x:.1f},{y0 + 11:.1f}Z" fill="{color}">'
                     f'<title>{a(removal_tip(r))}</title></path>')
    return "".join(parts)


def group_timeline(view: GroupView, width: int = 700) -> str:
    """Lanes, top to bottom: rebalances (phase bars, generation above), members, removals."""
    left, top = 70, 18
    lanes = {"rebalances": (top + 12, 22), "members": (top + 50, 34), "removals": (top + 98, 12)}
    height = top + 98 + 12 + 24
    t0, t1 = padded(view.first_ms(), view.last_ms())
    axis = Axis(t0, t1, left, width - 12)
    base = height - 22
    parts = [f'<svg class="timeline" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">',
             axis.draw(base, base - top)]
    for name, (y, h) in lanes.items():
        parts.append(f'<text class="lane" x="4" y="{y + h / 2 + 4:.1f}">{name}</text>')
    for first, last, count in view.storms:
        tip = f"storm: {count} rebalances between {utc(first)} and {utc(last)} UTC"
        parts.append(f'<rect class="storm" x="{axis.x(first):.1f}" y="{top}" '
                     f'width="{max(2.0, axis.x(last) - axis.x(first)):.1f}" height="{base - top}">'
                     f'<title>{a(tip)}</title></rect>')
    parts.append(_rebalance_lane(view, axis, *lanes["rebalances"]))
    parts.append(_members_lane(view, axis, *lanes["members"]))
    parts.append(_removal_lane(view, axis, lanes["removals"][0]))
    parts.append("</svg>")
    return "".join(parts)
