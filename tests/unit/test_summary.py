"""The printed summary of the demo and replay (100 columns, diagnosis first, events per group in
time order with dates) and the replay's progress line (streaming/app/progress.py)."""
from __future__ import annotations

import io
import json
import re

from sinks.health import BatchReport
from streaming.app.batch_report import batch_report
from streaming.app.progress import LOG_AFTER_S, LOG_EVERY_S, ReplayProgress
from streaming.app.summary import WIDTH, cost_reason, summary_lines
from tests.support.report_pages import records

DATED = re.compile(r"^  (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}) (rebalance|removed) ")


def demo_records() -> tuple[list[dict], list[dict]]:
    """The golden replays' records with the demo's cluster labels (both goldens say "default")."""
    rebalances, removals = [], []
    for r in records("rebalances.jsonl"):
        rebalances.append(dict(r, cluster="kafka-4.0" if r["group"].startswith("k4-") else "kafka-2.7"))
    for r in records("member_removals.jsonl"):
        removals.append(dict(r, cluster="kafka-4.0" if r["group"].startswith("k4-") else "kafka-2.7"))
    return rebalances, removals


def test_summary_fits_100_columns_with_the_diagnosis_first():
    rebalances, removals = demo_records()
    lines = "\n".join(summary_lines(rebalances, removals, "56 groups", ["full records: /x/*.jsonl"])).splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    # 14: the 4.0 capture's sc06-c3-restart, a static member whose close committed nothing (test_diagnosis)
    assert lines[0].startswith("DIAGNOSIS: 155 member removals in 56 groups (process_crash 14, process_pause 3,")
    assert "[confidence medium: it did not come back" in "\n".join(lines)
    events_at = next(i for i, line in enumerate(lines) if line.startswith("EVENTS BY GROUP"))
    diagnosis = "\n".join(lines[:events_at])
    for r in removals:                   # every unplanned removal is in the diagnosis with its evidence
        if r["root_cause"] != "graceful_shutdown":
            assert f"{r['group']}  {r['cause']}" in diagnosis
    assert "sc11-stuck-in-rebalance  1->2" in diagnosis and "rebalances that ran into their rebalance timeout (2)" \
        in diagnosis
    assert lines[-1] == "full records: /x/*.jsonl"


def test_events_are_per_group_in_time_order_with_dates():
    rebalances, removals = demo_records()
    lines = summary_lines(rebalances, removals, "")
    text = "\n".join(lines).splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("EVENTS BY GROUP"))
    groups: dict[str, list[str]] = {}
    current = None
    for line in text[start + 1:]:
        if line.startswith(("kafka-2.7  ", "kafka-4.0  ")):
            current = line.split("  (")[0]
            assert current not in groups, f"{current} listed twice"
            groups[current] = []
        elif line.startswith("  ") and current is not None:
            match = DATED.match(line)
            assert match, line
            groups[current].append(match.group(1))
    assert len(groups) == 56
    assert sum(len(v) for v in groups.values()) == len(rebalances) + len(removals)
    for name, times in groups.items():
        assert times == sorted(times), name
    firsts = [times[0] for times in groups.values()]
    assert firsts == sorted(firsts)       # groups in the order of their first event


def test_long_names_are_cut_at_the_width_and_big_inputs_are_capped():
    rebalances, removals = demo_records()
    long_group = "x" * 240
    rebalances.append(dict(rebalances[0], group=long_group))
    removals.append(dict(next(r for r in removals if r["root_cause"] == "process_crash"), group=long_group,
                         removed_at_ms=min(r["removed_at_ms"] for r in removals) - 1))   # listed first
    lines = "\n".join(summary_lines(rebalances, removals, "", max_groups=5, max_events=2)).splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    assert any(line.endswith("…") for line in lines)
    assert "... 52 more groups (fewer unplanned removals and rebalances): see the outputs" in lines
    assert sum(1 for line in lines if re.match(r"  \.\.\. \d+ more events of this group", line)) == 5


def _report(lines: int, lines_of: int, records_read: int, of: int) -> BatchReport:
    return batch_report({"sources": [
        {"endOffset": {"source": "broker_log", "i": 1, "lines": lines, "of": lines_of, "eof": False}},
        {"endOffset": json.dumps({"source": "offsets", "i": 1, "lines": records_read, "of": of, "eof": False})},
    ]})


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_line_in_a_log_only_for_long_replays():
    clock, out = Clock(), io.StringIO()
    meter = ReplayProgress(stream=out, clock=clock, tty=False)
    clock.now += LOG_AFTER_S - 1
    meter.update(_report(100, 400, 500, 2000))
    assert out.getvalue() == ""                    # a short replay prints nothing
    clock.now += 1
    meter.update(_report(200, 400, 1000, 2000))
    # half the lines and half the records: 1200 of 2400 rows, in 10 s
    assert out.getvalue() == "replay: 1,200 rows read, 120 rows/s, 50%, ETA 0:00:10\n"
    clock.now += LOG_EVERY_S - 1
    meter.update(_report(300, 400, 1500, 2000))
    assert out.getvalue().count("\n") == 1         # not more often than every LOG_EVERY_S
    clock.now += 1
    meter.update(_report(400, 400, 2000, 2000))
    assert out.getvalue().splitlines()[-1] == "replay: 2,400 rows read, 60 rows/s, 100%"
    meter.finish()
    assert out.getvalue().count("\n") == 2


def test_progress_line_on_a_terminal_is_rewritten_in_place():
    clock, out = Clock(), io.StringIO()
    meter = ReplayProgress(label="demo", stream=out, clock=clock, tty=True)
    clock.now += 2
    meter.update(batch_report({"sources": [{"endOffset": {"source": "offsets", "i": 1, "lines": 10, "of": 40,
                                                          "eof": False}}]}))
    clock.now += 0.1
    meter.update(batch_report({"sources": [{"endOffset": {"source": "offsets", "i": 2, "lines": 20, "of": 40,
                                                          "eof": False}}]}))
    assert out.getvalue() == "\r\x1b[Kdemo: 10 rows read, 5 rows/s, 25%, ETA 0:00:06"
    meter.finish()
    assert out.getvalue().endswith("\r\x1b[Kdemo: 20 rows read, 10 rows/s, 50%, ETA 0:00:02\n")


def test_the_first_stage_says_what_it_reads_on_a_terminal_and_in_a_log_when_it_is_long():
    clock, out = Clock(), io.StringIO()
    meter = ReplayProgress(stream=out, clock=clock, tty=True)
    meter.staging(3, 45_600_000)
    assert out.getvalue() == "\r\x1b[Kreplay: reading, parsing and decoding 3 input(s), 45.6 MB ..."
    meter.staged(1_234_567, 7, 12.34)
    assert out.getvalue().endswith("\r\x1b[Kreplay: read 1,234,567 event rows in 12.3 s, replayed in 7 micro-batch(es)\n")
    log = io.StringIO()
    quiet = ReplayProgress(stream=log, clock=clock, tty=False)
    quiet.staging(3, 1000)
    quiet.staged(10, 1, LOG_AFTER_S - 1)
    assert log.getvalue() == ""                     # a short first stage says nothing in a log
    quiet.staged(10, 1, LOG_AFTER_S)
    assert log.getvalue() == "replay: read 10 event rows in 10.0 s, replayed in 1 micro-batch(es)\n"


def test_the_diagnosis_lists_the_first_removals_of_each_root_cause_and_counts_the_rest():
    rebalances, removals = demo_records()
    crash = next(r for r in removals if r["root_cause"] == "process_crash")
    many = [dict(crash, member_id=f"m{i}", removed_at_ms=crash["removed_at_ms"] + i) for i in range(30)]
    crashes = sum(1 for r in removals if r["root_cause"] == "process_crash") + len(many)
    lines = summary_lines(rebalances, removals + many, "", max_groups=5, max_events=4)
    section = lines[next(i for i, line in enumerate(lines) if line.startswith("\nprocess_crash")):]
    section = section[:next(i for i, line in enumerate(section[1:], 1) if line.startswith("\n"))]
    assert section[0] == f"\nprocess_crash ({crashes})"
    assert sum(1 for line in section if " removed " not in line and line.startswith("  20")) == 4
    assert section[-1] == f"  ... {crashes - 4} more process_crash removals: see the outputs"
    uncapped = summary_lines(rebalances, removals + many, "")
    assert not any("more process_crash removals" in line for line in uncapped)


def test_the_cost_section_names_the_costliest_rebalances_and_why():
    """docs/impact.md: the rebalances that stopped the most consumption, each with the removal that
    cost most or what an eager assignor cost."""
    rebalances, removals = demo_records()
    lines = summary_lines(rebalances, removals, "")
    start = next(i for i, line in enumerate(lines) if line.startswith("COST: "))
    measured = [r for r in rebalances if r["partition_seconds_stopped"] is not None]
    assert lines[start].startswith(f"COST: the rebalances stopped "
                                   f"{sum(r['partition_seconds_stopped'] for r in measured):,.1f} partition-seconds")
    section = " ".join("\n".join(lines[start:start + 20]).split())     # wrapped lines joined
    costliest = max(measured, key=lambda r: r["partition_seconds_stopped"])
    assert costliest["group"] == "sc11-stuck-in-rebalance" and costliest["group"] in lines[start + 2]
    assert "100% of it from the removal of sc11-stuck" in section and "(rebalance_timeout)" in section
    assert start < next(i for i, line in enumerate(lines) if line.startswith("\nEVENTS BY GROUP"))
    eager = next(r for r in rebalances if r["group"] == "sc05b-poll-timeout-kafka-python" and r["generation"] == 3)
    assert cost_reason(eager, {}) == ("range (eager) stopped all 3 partitions for the whole rebalance; "
                                      f"cooperative-sticky would have stopped {eager['partitions_moved']} of 3")
    assert eager["partitions_moved"] < 3
