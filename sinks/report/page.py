"""The report's HTML page: one self-contained file (inline CSS and SVG, no script, no external
asset), readable offline and attachable to a post-mortem."""
from __future__ import annotations

import statistics
from collections import Counter

from sinks.report.data import GroupView, Report, rebalance_start
from sinks.report.svg import (
    OTHER_COLOR, PHASE_COLORS, PHASE_NAMES, ROOT_CAUSE_COLORS, TRIGGER_COLORS, a, fleet_chart, group_timeline,
    removal_tip, seconds, utc,
)
from state.diagnosis.rules import ROOT_CAUSES
from state.vocabulary import Protocol, RootCause

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0}
body{color:#1a202c;background:#f7f8fa}
main{max-width:1440px;margin:0 auto;padding:16px 24px}
h1{font-size:22px;margin:4px 0}
h2{font-size:18px;margin:22px 0 8px}
h3{font-size:15px;margin:0 0 6px}
.meta,.note,.caption{color:#4a5568;font-size:12px}
.chips span{display:inline-block;margin:2px 6px 2px 0;padding:1px 8px;border-radius:10px}
.chips span{background:#edf2f7;font-size:12px}
.sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:-1px}
.legend{font-size:12px;color:#2d3748;margin:4px 0}
.legend span{margin-right:12px;white-space:nowrap}
.card{background:#fff;border:1px solid #e2e8f0;border-radius:6px;padding:10px 12px;margin:10px 0}
.row{display:flex;gap:14px;align-items:flex-start;flex-wrap:wrap}
.row>.diag{flex:1 1 0;min-width:420px}
table.diagnosis td{white-space:nowrap}
table.diagnosis td.ev{white-space:normal;overflow-wrap:anywhere;width:100%}
table{border-collapse:collapse;font-size:12px;width:100%}
th,td{text-align:left;padding:2px 6px;border-bottom:1px solid #edf2f7;vertical-align:top}
th{background:#f7fafc;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.ev{max-width:420px}
tr.unplanned td:first-child{border-left:3px solid #e53e3e}
svg{display:block;overflow:visible}
svg text{font-family:inherit}
.tick{font-size:10px;fill:#4a5568}
.lane{font-size:11px;fill:#4a5568}
.gen{font-size:10px;fill:#1a202c}
.grid{stroke:#e2e8f0;stroke-width:1}
.caption{font-size:11px;fill:#4a5568}
.storm{fill:#fed7d7;opacity:.7}
.burst{fill:#feebc8;opacity:.8}
path.members{fill:none;stroke:#2d3748;stroke-width:1.5}
circle.members{fill:#2d3748}
path.removal{stroke:#1a202c;stroke-width:.6}
g.rebalance[data-outcome=superseded] rect{opacity:.45}
g.rebalance:hover rect,path.removal:hover{stroke:#000;stroke-width:1.5}
a{color:#2b6cb0;text-decoration:none}
details summary{cursor:pointer;color:#2b6cb0;font-size:12px}
"""


def _swatch(color: str) -> str:
    return f'<i class="sw" style="background:{color}"></i>'


def _legend(colors: dict[str, str], names: dict[str, str] | None = None) -> str:
    return '<div class="legend">' + "".join(
        f"<span>{_swatch(c)}{a((names or {}).get(k, k))}</span>" for k, c in colors.items()) + "</div>"


def anchor(view: GroupView) -> str:
    return "g-" + "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in f"{view.cluster}--{view.group}")


def _who(r: dict) -> str:
    return r.get("group_instance_id") or r.get("client_id") or r["member_id"]


def header(report: Report) -> str:
    rebalances, removals = report.rebalances, report.removals
    causes = Counter(r.get("root_cause") or RootCause.UNKNOWN for r in removals)
    chips = "".join(f"<span>{_swatch(ROOT_CAUSE_COLORS.get(c, OTHER_COLOR))}{a(c)}: {causes[c]}</span>"
                    for c in ROOT_CAUSES if causes[c])
    starts = [t for r in rebalances if (t := rebalance_start(r)) is not None] + \
        [r["removed_at_ms"] for r in removals]
    span = f"{utc(min(starts))} to {utc(max(starts))} UTC" if starts else "no events"
    timeouts = sum(1 for r in rebalances if r.get("hit_rebalance_timeout"))
    hidden = (f" {report.hidden_groups} more groups matched and are not drawn (the report keeps the ones with "
              f"the most unplanned removals and rebalances; `rebalance-monitor report --max-groups N` draws more, "
              f"--group or --since/--until narrow it).") \
        if report.hidden_groups else ""
    return (f"<h1>Kafka consumer-group rebalances</h1>"
            f'<p class="meta">{len(rebalances)} rebalances and {len(removals)} member removals in '
            f"{len(report.groups)} groups of {len(report.clusters)} cluster(s), {span}; "
            f"{timeouts} rebalance(s) ran into their rebalance timeout. From: {a(', '.join(report.sources))}."
            f"{a(hidden)}</p>"
            f'<div class="chips">removals by root cause: {chips or "<span>none</span>"}</div>')


def _health(report: Report, cluster: str) -> str:
    """What the inputs say about the monitor's view of this cluster: quarantined inputs, invalid
    transitions, source mismatches, the clock skew of each log source."""
    quarantined = Counter(q.get("reason") for q in report.quarantine if q.get("cluster") == cluster)
    kinds = Counter(x.get("kind") for x in report.anomalies if x.get("cluster") == cluster)
    skews: dict[str, list[int]] = {}
    for c in report.clock_skew:
        if c.get("cluster") == cluster:
            skews.setdefault(c["source"], []).append(c["skew_ms"])
    skew = ", ".join(f"{a(s)} {statistics.median(v) / 1000:+.3f} s" for s, v in sorted(skews.items())) or "no pairs"
    quarantine = ", ".join(f"{a(k)} {n}" for k, n in sorted(quarantined.items())) or "none"
    return (f'<p class="note">Inputs: quarantined {quarantine}; invalid transitions '
            f'{kinds["invalid_transition"]}; source mismatches {kinds["source_mismatch"]}; median clock skew '
            f"of the log sources against __consumer_offsets: {skew}.</p>")


def fleet(report: Report) -> str:
    parts = ["<h2>Fleet timeline</h2>", _legend(TRIGGER_COLORS),
             f'<p class="note">Shaded: a bin in which at least {report.storm_rules.burst_groups} groups started '
             f"a rebalance (orange), a group storm (red: more than {report.storm_rules.rebalances} rebalances of "
             f"one group within {report.storm_rules.window_ms // 60_000} min).</p>"]
    for cluster in report.clusters:
        views = [v for v in report.groups if v.cluster == cluster]
        parts.append(f'<div class="card fleet-card" data-cluster="{a(cluster)}"><h3>{a(cluster)}</h3>'
                     f"{fleet_chart(cluster, views, report.storm_rules)}{_health(report, cluster)}</div>")
    storms = [(v, s) for v in report.groups for s in v.storms]
    if storms:
        rows = "".join(f'<tr class="storm-row"><td>{a(v.cluster)}</td><td><a href="#{anchor(v)}">{a(v.group)}</a>'
                       f'</td><td>{utc(s[0])}</td><td>{utc(s[1])}</td><td class="num">{s[2]}</td></tr>'
                       for v, s in storms)
        parts.append('<h3>Group storms</h3><table class="storms"><tr><th>cluster</th><th>group</th>'
                     f"<th>first start UTC</th><th>last start UTC</th><th>rebalances</th></tr>{rows}</table>")
    return "".join(parts)


def groups_table(report: Report) -> str:
    """The diagnosis of the whole input: one row per group, the ones that need a look first."""
    rows: list[str] = []
    calm: list[str] = []
    for v in sorted(report.groups, key=lambda v: v.attention(), reverse=True):
        causes = Counter(r.get("root_cause") or RootCause.UNKNOWN for r in v.removals)
        cause_text = ", ".join(f"{_swatch(ROOT_CAUSE_COLORS.get(c, OTHER_COLOR))}{a(c)} {n}"
                               for c, n in causes.most_common())
        slowest = max(v.rebalances, key=lambda r: r.get("total_seconds") or 0.0, default=None)
        state = (v.snapshot or {}).get("state", "")
        unplanned = v.attention()[0] or any(r.get("hit_rebalance_timeout") for r in v.rebalances)
        (rows if unplanned else calm).append(
                    f'<tr class="group-row{" unplanned" if unplanned else ""}"><td>{a(v.cluster)}</td>'
                    f'<td><a href="#{anchor(v)}">{a(v.group)}</a></td><td>{a(", ".join(v.protocols))}</td>'
                    f'<td class="num">{len(v.rebalances)}</td>'
                    f'<td class="num">{sum(1 for r in v.rebalances if r.get("hit_rebalance_timeout"))}</td>'
                    f'<td class="num">{seconds(slowest.get("total_seconds") if slowest else None)}</td>'
                    f"<td>{cause_text or '-'}</td><td>{a(state)}</td></tr>")
    head = ("<tr><th>cluster</th><th>group</th><th>protocol</th><th>rebalances</th><th>hit timeout</th>"
            "<th>slowest</th><th>removals by root cause</th><th>last state</th></tr>")
    return (f"<h2>Diagnosis by group</h2><p class=\"note\">{len(rows)} groups with an unplanned removal or a "
            f"rebalance that ran into its timeout, most removals first.</p>"
            f'<table class="groups">{head}{"".join(rows)}</table>'
            + (f'<details><summary>{len(calm)} other groups (only planned leaves, or no removal)</summary>'
               f'<table class="groups">{head}{"".join(calm)}</table></details>' if calm else ""))


def _diagnosis(view: GroupView) -> str:
    if not view.removals:
        return '<p class="note">No member removals.</p>'
    rows = []
    for r in view.removals:
        root = r.get("root_cause") or RootCause.UNKNOWN
        unplanned = root != RootCause.GRACEFUL_SHUTDOWN
        rows.append(f'<tr class="removal-row{" unplanned" if unplanned else ""}" title="{a(removal_tip(r))}">'
                    f"<td>{a(utc(r['removed_at_ms'], date=False))}<br><b>{a(_who(r))}</b></td>"
                    f"<td>{a(r['cause'])}<br>{_swatch(ROOT_CAUSE_COLORS.get(root, OTHER_COLOR))}{a(root)}</td>"
                    f"<td>{_confidence(r)}</td>"
                    f'<td class="ev">{a(r.get("evidence") or "")}</td></tr>')
    return ('<table class="diagnosis"><tr><th>removed, member</th><th>cause, root cause</th><th>confidence</th>'
            f"<th>evidence</th></tr>{''.join(rows)}</table>")


def _confidence(r: dict) -> str:
    """The root cause's confidence and why (records of releases before it: not rated)."""
    sure = r.get("root_cause_confidence")
    if not sure:
        return '<span class="note">not rated</span>'
    return f'<b class="confidence-{a(sure)}">{a(sure)}</b><br>{a(r.get("root_cause_confidence_reason") or "")}'



def _rebalance_rows(view: GroupView) -> str:
    rows = []
    for r in view.rebalances:
        gen = f"{'?' if r.get('previous_generation') is None else r['previous_generation']}->" \
              f"{'?' if r.get('generation') is None else r['generation']}"
        if r["protocol"] == Protocol.CONSUMER:
            s, m, e = r.get("started_at_ms"), r.get("assigned_at_ms"), r.get("completed_at_ms")
            first = seconds((m - s) / 1000) if s is not None and m is not None else "-"
            second = seconds((e - m) / 1000) if m is not None and e is not None else "-"
        else:
            first, second = seconds(r.get("join_seconds")), seconds(r.get("sync_seconds"))
        rows.append(f"<tr><td>{a(gen)}</td><td>{a(utc(r.get('started_at_ms'), date=False))}</td>"
                    f'<td class="num">{first}</td><td class="num">{second}</td>'
                    f'<td class="num">{seconds(r.get("total_seconds"))}</td><td>{a(r["trigger"])}</td>'
                    f"<td>{a(r['outcome'])}</td>"
                    f"<td class=\"num\">{a('-' if r.get('members') is None else r['members'])}</td></tr>")
    return (f"<details><summary>{len(view.rebalances)} rebalances</summary><table class=\"rebalances\"><tr>"
            "<th>generation</th><th>start UTC</th><th>JOIN / assignment</th><th>SYNC / reconciliation</th>"
            f"<th>total</th><th>trigger</th><th>outcome</th><th>members</th></tr>{''.join(rows)}</table></details>")


def group_section(view: GroupView) -> str:
    removals = len(view.removals)
    return (f'<section class="card group" id="{anchor(view)}" data-cluster="{a(view.cluster)}" '
            f'data-group="{a(view.group)}"><h3>{a(view.group)} <span class="meta">{a(view.cluster)} · '
            f"{a(', '.join(view.protocols))} · {len(view.rebalances)} rebalances · {removals} removals · "
            f"{utc(view.first_ms())} UTC</span></h3>"
            f'<div class="row"><div class="tl">{group_timeline(view)}</div><div class="diag">{_diagnosis(view)}</div>'
            f"</div>{_rebalance_rows(view)}</section>")


COSTLIEST_SHOWN = 10


def costliest_table(report: Report) -> str:
    """The rebalances that cost the most, across the input: by the records they delayed (`run`'s
    rebalance_costs), then by the partition-seconds they stopped (docs/impact.md)."""
    measured = [(v, r) for v in report.groups for r in v.rebalances if r.get("partition_seconds_stopped")]
    if not measured:
        return ""
    ranked = sorted(measured, key=lambda vr: (vr[1].get("records_delayed") or 0,
                                              vr[1]["partition_seconds_stopped"]), reverse=True)[:COSTLIEST_SHOWN]

    def cell(value: object, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)
    rows = "".join(
        f'<tr class="cost-row"><td>{a(v.cluster)}</td><td><a href="#{anchor(v)}">{a(v.group)}</a></td>'
        f"<td>{cell(r.get('generation'), '')}</td><td>{utc(rebalance_start(r))}</td>"
        f"<td>{a(r.get('trigger') or '')}</td><td class=\"num\">{r['partition_seconds_stopped']:,.1f}</td>"
        f"<td class=\"num\">{cell(r.get('records_delayed'), ',')}</td>"
        f"<td class=\"num\">{cell(r.get('catch_up_seconds'), ',.1f')}</td></tr>" for v, r in ranked)
    return ("<h2>Costliest rebalances</h2><p class=\"note\">By the records that arrived on the partitions they "
            "stopped while stopped (<code>run</code> only), then by partition-seconds stopped; catch-up: seconds "
            "until the group's lag was back to its level before.</p><table class=\"costs\"><tr><th>cluster</th>"
            "<th>group</th><th>generation</th><th>start UTC</th><th>trigger</th><th>partition-seconds</th>"
            f"<th>records delayed</th><th>catch-up s</th></tr>{rows}</table>")


def render(report: Report) -> str:
    phase_legend = _legend(PHASE_COLORS, PHASE_NAMES)
    cause_legend = _legend({c: ROOT_CAUSE_COLORS[c] for c in ROOT_CAUSES})
    body = [header(report), fleet(report), groups_table(report), costliest_table(report), "<h2>Groups</h2>",
            f'<p class="note">Each rebalance is drawn as its phases (classic: JOIN then SYNC; KIP-848: '
            f"assignment then reconciliation; faded: superseded, red outline: ran into the rebalance timeout) "
            f"with the generation it produced above; the line is the member count after each rebalance; "
            f"triangles are member removals by root cause. Hover for details. Groups in the order of the table "
            f"above.</p>{phase_legend}{cause_legend}"]
    body += [group_section(v) for v in sorted(report.groups, key=lambda v: v.attention(), reverse=True)]
    if not report.groups:
        body = [header(report), '<p class="empty">No rebalance and no member removal in the input'
                + (" that matched the filters" if report.filters != type(report.filters)() else "") + ".</p>"]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>Rebalance report</title><style>{CSS}</style></head><body><main>"
            + "".join(body) + "</main></body></html>\n")
