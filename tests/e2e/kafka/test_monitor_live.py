"""`rebalance-monitor run` on real brokers (2.8 ZooKeeper and the newest 4.x KRaft), driven only
through its command line: per version one cluster, its log shipper and one monitor reading the
log topic and __consumer_offsets while the scenarios run, each with its own group.

Each scenario asserts, in the event sink and on /metrics, the rebalance records (generation,
trigger, outcome, start and end equal to the broker's own lines), the removals (client id,
cause, root cause) and no other record for its group, all derived from what the bed did
(testbed/judge/expect.py), never from the monitor's output. The scenarios run here are
the ones without a known product gap on the version (KNOWN_FAILURES in verdict.py) less
MATRIX_ONLY (the full matrix, everything included, is scripts/kafka-matrix). On the newest 4.x
the monitor is also killed with kill -9 between planning and committing a micro-batch while a
scenario runs and restarted from its checkpoint: the exact verdicts then show that nothing was lost or counted twice.

The versions share the machine (live.Phases): their clusters and monitors start together, then
each runs its scenarios in turn, and the waits for the removal holds (records are final 80 s
of event time after a removal with CI_SETTINGS) overlap."""
from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from testbed.bed import checks
from testbed.bed.cluster import with_rolled_files
from testbed.bed.scenarios import applicable
from testbed.judge.expect import group_lines
from testbed.judge.live_run import Phases
from testbed.judge.matrix import run_version
from testbed.judge.verdict import known_for
from testbed.monitor import MATRIX_LATENESS_S, MonitorSettings

from .conftest import CI_VERSIONS, NEWEST_4X

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


# Scenarios the full matrix (scripts/kafka-matrix) runs and CI leaves out, to keep CI under its
# 45 minutes: each is a minute or more of waiting, and what it adds to its neighbours here is told.
MATRIX_ONLY = {
    # a member frozen 35 s past its expiry beside the follower kill: follower_kill runs the stall,
    # pause the frozen member's comeback
    "rejoin_at_once": None,
    # a minute of offsets retention; the newest 4.x runs it (the expiry record is the same on both)
    "offset_expiry": "2.8.2",
}


def ci_scenarios(version: str) -> list:
    """What the monitor must pass today on `version`: every scenario without a known gap, less
    MATRIX_ONLY."""
    return [s for s in applicable(version) if not known_for(version, s.name)
            and not (s.name in MATRIX_ONLY and MATRIX_ONLY[s.name] in (None, version))]


CASES = [(v, s.name) for v in CI_VERSIONS for s in ci_scenarios(v)] + [(v, "(cluster)") for v in CI_VERSIONS]
# The monitor is killed -9 while this scenario runs (newest 4.x, the last version to run its
# scenarios: the restart overlaps the wait for the removal holds).
KILL_DURING = "kip848"
# Shorter decision windows than the defaults (60 s): the removal records are final after
# 60 s (correlation) + 40 s of event time instead of 120 s. The expectations use the same
# window (a member back within 40 s of its expiry was paused, not crashed; rejoin_at_once, when
# run here, brings its frozen member back 35 s after its expiry: testbed/bed/stall.py).
CI_SETTINGS = MonitorSettings(lateness_s=MATRIX_LATENESS_S,
                              diagnosis={"pause_rejoin_window_seconds": 40, "poll_rejoin_min_window_seconds": 20})


class LiveVersions:
    """Runs every CI version once (threads sharing a 'heavy phase' lock); tests read verdicts."""

    def __init__(self, out: Path):
        self.out = out
        self.phases = Phases(CI_VERSIONS)
        self.results: dict = {}
        self.done = {v: threading.Event() for v in CI_VERSIONS}
        self.threads = [threading.Thread(target=self._run, args=(v,), daemon=True) for v in CI_VERSIONS]
        for t in self.threads:
            t.start()

    def _run(self, version: str) -> None:
        try:
            selected = ci_scenarios(version)
            plan = {KILL_DURING: "kill_monitor"} if version == NEWEST_4X else None
            verdicts, info = run_version(version, None, self.out, fault_plan=plan, phases=self.phases,
                                         selected=selected, settings=CI_SETTINGS,
                                         log=lambda line: print(line, flush=True))
            self.results[version] = ({v.scenario: v for v in verdicts}, info)
        except BaseException as exc:      # reported by every test of the version
            self.results[version] = exc
        finally:
            self.done[version].set()

    def get(self, version: str, timeout: float = 1800.0):
        assert self.done[version].wait(timeout), f"Kafka {version}: the live run did not finish in {timeout:.0f} s"
        res = self.results[version]
        if isinstance(res, BaseException):
            raise AssertionError(f"Kafka {version}: the live run failed: {type(res).__name__}: {res}") from res
        return res


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    return LiveVersions(tmp_path_factory.mktemp("kafka-live"))


@pytest.mark.parametrize(("version", "scenario"), CASES, ids=[f"{v}-{s}" for v, s in CASES])
def test_scenario_as_the_monitor_reports_it(live, version, scenario):
    verdicts, info = live.get(version)
    # a scenario of several groups has a row per other group (`follower_kill[py]`, ...)
    rows = [verdicts[scenario]] + [v for name, v in verdicts.items() if name.startswith(f"{scenario}[")]
    for v in rows:
        detail = "\n  ".join(f"{c}: {t}" for c, t in v.failures)
        assert v.status == "PASS", (f"{v.scenario} on Kafka {version}: {v.status} {v.note}\n  {detail}\n"
                                    f"(monitor's late rows: {info.get('late_rows', 0):g}; records and "
                                    f"timelines under {live.out / version})\n{group_lines_of(info, v.group)}\n"
                                    f"{bed_actions_of(live.out / version / scenario, v.group)}")
        if scenario != "(cluster)":
            assert v.rebalances_expected > 0 and v.rebalances_found == v.rebalances_expected


# The coordinator's lines of a failed group kept in the failure's message: CI keeps no files.
EVIDENCE_LINES = 80


def group_lines_of(info: dict, group: str) -> str:
    """The coordinator lines naming `group` in every broker's server.log, as the judge reads them
    (testbed/judge/expect.group_lines), in time order."""
    logs = [SimpleNamespace(text=ln.rstrip(), broker_id=None, read_ms=None)
            for log in with_rolled_files(info.get("server_logs", []))
            for ln in Path(log).read_text(errors="replace").splitlines()]
    lines = [g.text for g in group_lines(logs, group)]
    shown = lines[-EVIDENCE_LINES:]
    return (f"the brokers' lines of {group} ({len(shown)} of {len(lines)}):\n  " + "\n  ".join(shown)) if lines else ""


def bed_actions_of(scenario_dir: Path, group: str) -> str:
    path = scenario_dir / "timeline.jsonl"
    if not path.is_file():
        return ""
    entries = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    mine = [f"{e['ts_ms']} {e['action']} {e.get('client_id') or e.get('broker_id') or ''}".rstrip()
            for e in entries if e.get("group") == group or group in (e.get("groups") or ())]
    return "the bed's actions on it:\n  " + "\n  ".join(mine[-EVIDENCE_LINES:])


def test_monitor_kill_lands_between_plan_and_commit(live):
    """The fault of the newest 4.x run: kill -9 after Spark planned a batch, before it committed."""
    _, info = live.get(NEWEST_4X)
    (ev,) = [e for e in info.get("faults", []) if e["fault"] == "kill_monitor"]
    assert "error" not in ev, ev
    assert ev["during"] == KILL_DURING and ev["uncommitted_batches"], ev


@pytest.mark.parametrize("version", CI_VERSIONS)
def test_parse_logs_finds_the_broker_lines(live, version):
    """`parse-logs` over the brokers' server.log files turns every coordinator line the scenarios
    had to cause (the bed's own line checks) into an event of its kind."""
    _, info = live.get(version)
    bed = info["bed"]
    events, _ = checks.parse_logs(with_rolled_files(info["server_logs"]))
    for group, lines in bed.items():
        for kind, expected, found in checks.smoke(events, group, [checks.LineCheck(**c) for c in lines]):
            assert found >= expected, f"parse-logs found {found} {kind} events of {group}, the broker wrote {expected}"
