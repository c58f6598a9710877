"""`rebalance-monitor report` without a browser: what it reads (replay outputs, an event sink), its
filters and storm rules, its errors, and that the page is self-contained and escapes what it shows.
tests/e2e/test_report_chromium.py renders the page in Chromium."""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from html import escape

import pytest

from sinks.event_sink import EventSink
from sinks.report import Filters, ReportInputError, StormRules, build, render, write_report
from sinks.report.data import group_storms
from state.outputs import OutputKind
from streaming.app.cli import main
from tests.support.report_pages import GOLDEN, elements, records

def test_report_of_the_captures_has_every_group_rebalance_and_removal():
    rebalances, removals = records("rebalances.jsonl"), records("member_removals.jsonl")
    report = build(GOLDEN)
    assert len(report.rebalances) == len(rebalances) == 188
    assert len(report.removals) == len(removals) == 155
    groups = {(r["cluster"], r["group"]) for r in rebalances + removals}
    assert {g.key for g in report.groups} == groups
    page = elements(render(report))
    assert len(page.having("section", "group")) == len(groups)
    assert len(page.having("g", "rebalance")) == len(rebalances)
    assert len(page.having("path", "removal")) == len(removals) == len(page.having("tr", "removal-row"))
    # KIP-848 rebalances with a known assignment phase are drawn as two bars
    split = [r for r in rebalances if r["protocol"] == "consumer" and r["assigned_at_ms"] is not None
             and r["outcome"] != "in_progress" and r["started_at_ms"] <= r["assigned_at_ms"]
             <= (r["completed_at_ms"] or r["ended_at_ms"])]
    phases = [a["data-phase"] for a in page.having("rect", "phase")]
    assert phases.count("assignment") == len(split) > 20
    assert phases.count("join") == sum(1 for r in rebalances if r["protocol"] == "classic"
                                       and (r["join_completed_at_ms"] is not None or r["completed_at_ms"] is None))


def test_an_event_sink_gives_the_same_page_as_the_replay_outputs(tmp_path):
    """The same records read from a live event sink (no groups.jsonl there: no "last state")."""
    sink = EventSink(str(tmp_path / "events"))
    kinds = {OutputKind.REBALANCE: "rebalances.jsonl", OutputKind.REMOVAL: "member_removals.jsonl",
             OutputKind.CLOCK_SKEW: "clock_skew.jsonl"}
    for batch in range(3):       # records spread over micro-batches, as the live service writes them
        sink.write_batch(batch, {kind: records(name)[batch::3] for kind, name in kinds.items()})
    replay_dir = tmp_path / "replay"
    replay_dir.mkdir()
    for name in kinds.values():
        (replay_dir / name).write_text("".join(json.dumps(r) + "\n" for r in records(name)))
    from_sink = render(build([tmp_path / "events"]))
    from_replay = render(build([replay_dir]))
    assert from_sink.count('class="group-row') == 56
    sources = re.compile(r"From: [^<]*\.")
    assert sources.sub("", from_sink) == sources.sub("", from_replay)


def test_filters_keep_the_matching_groups_and_times():
    report = build(GOLDEN, Filters(group=re.compile("sc03-heartbeat")))
    assert sorted(g.group for g in report.groups) == ["k4-sc03-heartbeat-expiry", "sc03-heartbeat-expiry"]
    start = 1795288973772       # sc03-heartbeat-expiry (2.7): generation 1 starts here and lasts 6.004 s
    # a rebalance is kept when it overlaps [since, until]: 1 ended before, 2 and 3 start within;
    # removals at +20.022 s and +40.915 s are within, the last one (+41.106 s) is not
    report = build(GOLDEN, Filters(group=re.compile("^sc03"), since_ms=start + 7000, until_ms=start + 41_000))
    kept = report.groups[0].rebalances
    assert [r["generation"] for r in kept] == [2, 3] and len(report.groups[0].removals) == 2
    empty = build(GOLDEN, Filters(cluster="no-such-cluster"))
    assert empty.groups == [] and "No rebalance and no member removal" in render(empty)


def test_max_groups_keeps_the_groups_with_unplanned_removals_first():
    report = build(GOLDEN, max_groups=3)
    assert report.hidden_groups == 53
    assert all(g.attention()[0] > 0 for g in report.groups)
    assert "53 more groups matched and are not drawn" in render(report)


def test_group_storms_follow_the_storm_alert():
    rules = StormRules(window_ms=600_000, rebalances=10)
    minute = 60_000
    assert group_storms([i * minute for i in range(10)], rules) == []           # 10 is not more than 10
    assert group_storms([i * minute for i in range(11)], rules) == [(0, 10 * minute, 11)]
    spread = [i * 2 * minute for i in range(11)]                                 # 20 minutes apart
    assert group_storms(spread, rules) == []
    two = [i * 10_000 for i in range(11)] + [3_600_000 + i * 10_000 for i in range(12)]
    assert group_storms(two, rules) == [(0, 100_000, 11), (3_600_000, 3_710_000, 12)]


def test_storms_and_bursts_are_drawn(tmp_path):
    base = dict(records("rebalances.jsonl")[0], cluster="c", protocol="classic")
    storm = [dict(base, group="busy", generation=i + 1, started_at_ms=1_000_000 + i * 20_000,
                  join_completed_at_ms=1_000_000 + i * 20_000 + 5, completed_at_ms=1_000_000 + i * 20_000 + 9,
                  ended_at_ms=1_000_000 + i * 20_000 + 9) for i in range(12)]
    burst = [dict(base, group=f"g{i}", started_at_ms=2_000_000 + i, join_completed_at_ms=2_000_010,
                  completed_at_ms=2_000_020, ended_at_ms=2_000_020) for i in range(6)]
    out = tmp_path / "out"
    out.mkdir()
    (out / "rebalances.jsonl").write_text("".join(json.dumps(r) + "\n" for r in storm + burst))
    page = elements(render(build([out])))
    assert len(page.having("tr", "storm-row")) == 1
    assert len(page.having("rect", "storm")) == 2          # fleet timeline and the group's own
    assert len(page.having("rect", "burst")) == 1          # six groups in one minute (>= 5)


def test_the_page_is_self_contained_and_escapes_what_it_shows(tmp_path):
    removal = dict(records("member_removals.jsonl")[0], group='<script>alert("x")</script>',
                   evidence='evil "quotes" & <b>tags</b>')
    out = tmp_path / "out"
    out.mkdir()
    (out / "rebalances.jsonl").write_text("")
    (out / "member_removals.jsonl").write_text(json.dumps(removal) + "\n")
    html = render(build([out]))
    assert "<script" not in html and "<b>tags</b>" not in html and "&lt;b&gt;tags" in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    full = render(build(GOLDEN))
    for page in (html, full):
        assert not re.search(r"<(script|link|img|iframe)\b", page)
        assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", page)      # only in-page anchors
        assert "url(" not in page and "@import" not in page and "//" not in page.replace("://", "")


@pytest.mark.parametrize("setup,message", [
    (lambda d: None, "neither a replay output directory (no rebalances.jsonl) nor an event sink"),
    (lambda d: (d / "rebalances.jsonl").write_text('{"cluster": "c"}\nnot json\n'), "rebalances.jsonl:2: not a JSON object"),
    (lambda d: (d / "rebalances.jsonl").write_bytes(b"\xff\xfe\x00binary"), "rebalances.jsonl:1: not UTF-8 text"),
    (lambda d: (d / "rebalances.jsonl").write_text('{"cluster": "c", "group": "g"}\n'),
     "a rebalances record without protocol, outcome, trigger"),
])
def test_unusable_inputs_are_one_message_naming_the_file(tmp_path, capsys, setup, message):
    folder = tmp_path / "in"
    folder.mkdir()
    setup(folder)
    with pytest.raises(ReportInputError, match=re.escape(message)):
        build([folder])
    assert main(["report", str(folder), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "r.html").exists()


def test_cli_writes_the_page_into_the_first_input_by_default(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    for name in ("rebalances.jsonl", "member_removals.jsonl"):
        (out / name).write_text((GOLDEN[0] / name).read_text())
    assert main(["report", str(out)]) == 0
    assert "82 rebalances, 76 member removals in 28 groups" in capsys.readouterr().err
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert not list(out.glob("*.tmp"))
    assert main(["report", str(out), "--since", "2026-11-21T19:30:00", "-o", str(tmp_path / "late.html")]) == 0
    since = int(datetime(2026, 11, 21, 19, 30, tzinfo=timezone.utc).timestamp() * 1000)   # no zone given: UTC
    late = build([out], Filters(since_ms=since))
    assert 0 < len(late.groups) < 28
    assert (f"{len(late.rebalances)} rebalances, {len(late.removals)} member removals in {len(late.groups)} groups"
            in capsys.readouterr().err)


def test_write_report_replaces_the_file_atomically(tmp_path):
    target = tmp_path / "deep" / "report.html"
    write_report(GOLDEN, target)
    first = target.read_text()
    write_report(GOLDEN, target, Filters(group=re.compile("sc01")))
    assert target.read_text() != first and not list(target.parent.glob("*.tmp"))


def test_each_rebalance_shows_its_cost_and_the_fleet_chart_the_partition_minutes(tmp_path):
    """docs/impact.md: a rebalance's tooltip says what it stopped (or why that is unknown), a mark
    under its bars grows with its cost, and the fleet chart draws partition-minutes per bin."""
    from sinks.report.svg import impact_line
    page = render(build(GOLDEN))
    costs = [float(c) for c in re.findall(r'<g class="rebalance"[^>]* data-partition-seconds="([0-9.]+)"', page)]
    rebalances = records("rebalances.jsonl")
    assert sorted(costs) == sorted(r["partition_seconds_stopped"] for r in rebalances
                                   if r["partition_seconds_stopped"] is not None)
    assert page.count('<rect class="cost"') == sum(1 for c in costs if c > 0) > 10
    assert '<polyline class="cost"' in page and "partition-minutes" in page
    stuck = next(r for r in rebalances if r["group"] == "sc11-stuck-in-rebalance" and r["generation"] == 2)
    assert impact_line(stuck) == ("stopped 3 partitions, 45.015 partition-seconds; from removed members: "
                                  f"{stuck['removed_members'][0]} 45.015")
    assert escape(impact_line(stuck)) in page
    superseded = next(r for r in rebalances if r["protocol"] == "consumer" and r["outcome"] == "superseded")
    assert impact_line(superseded) == ("impact not measured: the rebalance ended superseded: its stops count "
                                       "in the next one that completes")
