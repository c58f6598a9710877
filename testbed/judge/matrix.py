"""`scripts/kafka-matrix [VERSION ...]`: on each Kafka version, a 2-broker cluster, its log
shipper and one `rebalance-monitor run` reading the log topic and __consumer_offsets; every
scenario runs with its own group (live_run.py) and is judged on the monitor's event sink and /metrics
against what the bed did (expect.py, verdict.py). Prints one table per version and ends with
`versions=N scenarios=K scenarios_passed=M`.

`--faults` also injects, while scenarios run, a kill -9 of the monitor (restarted from its
checkpoint), a broker restart and a move of the log topic's partition leaders, and compares the
monitor's final records and counters with a replay of the dumped topics (faults.py)."""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from testbed.bed.cluster import KafkaCluster
from testbed.bed.procs import BedError
from testbed.bed.running import java_libs
from testbed.bed.scenarios import BROKER_STOPS, applicable
from testbed.bed.shipper import LogShipper
from testbed.judge import faults
from testbed.judge.live_run import LiveRun, LiveScenario, Phases
from testbed.judge.verdict import Verdict
from testbed.monitor import MATRIX_LATENESS_S, MonitorSettings, now_ms

MATRIX = ["2.8.2", "3.9.2", "4.0.2", "4.2.2", "4.4.0"]
LOG_TOPIC = "kafkabed-broker-logs"


def plan_faults(selected: list) -> dict:
    """Where each fault fires: while a scenario runs (real traffic), by scenario name. The broker
    restart and the leader move come early, the monitor's kill -9 late (its restart delays every
    record still pending, so the latencies of those scenarios say "monitor down")."""
    names = [s.name for s in selected if s.name not in ("offset_expiry", *BROKER_STOPS)]
    if not names:
        return {}
    picks = {"restart_broker": names[min(1, len(names) - 1)], "move_log_leaders": names[min(3, len(names) - 1)],
             "kill_monitor": names[max(0, len(names) - 3)]}
    plan: dict = {}
    for fault, name in picks.items():
        plan.setdefault(name, fault)     # one fault per scenario; few scenarios: fewer faults
    return plan


class FaultInjector:
    """Fires the planned fault in a thread shortly after the n-th foreground scenario started."""

    def __init__(self, run: LiveRun, plan: dict, delay_s: float = 2.0):
        self.run, self.plan, self.delay_s = run, dict(plan), delay_s
        self.events: list[dict] = []
        self.threads: list[threading.Thread] = []
        self._n = 0

    def __call__(self, item: LiveScenario) -> None:
        """`plan` keys: the n-th foreground scenario (int) or a scenario's name."""
        fault = self.plan.get(self._n) or self.plan.get(item.scenario.name)
        self._n += 1
        if fault is None:
            return
        t = threading.Thread(target=self._fire, args=(fault, item), daemon=True)
        t.start()
        self.threads.append(t)

    def _fire(self, fault: str, item: LiveScenario) -> None:
        time.sleep(self.delay_s)       # the scenario is under way: its members are joining
        try:
            if fault == "kill_monitor":
                ev = faults.kill_monitor(self.run.require_monitor())
            elif fault == "restart_broker":
                ev = faults.restart_broker(self.run.cluster, avoid_group=item.ctx.group)
            else:
                ev = faults.move_log_leaders(self.run.cluster, self.run.shipper.topic)
        except Exception as exc:
            ev = {"fault": fault, "ts_ms": now_ms(), "error": f"{type(exc).__name__}: {exc}"}
        ev["during"] = item.scenario.name
        self.events.append(ev)

    def join(self) -> None:
        for t in self.threads:
            t.join(600)


def run_version(version: str, names: list | None, out_root: Path, quick: bool = False,
                library: str = "kafka-python", with_faults: bool = False,
                settings: MonitorSettings | None = None, log=print, fault_plan: dict | None = None,
                phases: Phases | None = None, selected: list | None = None) -> tuple[list, dict]:
    """Runs the selected scenarios on `version` with the monitor; (verdicts, info).

    `with_faults`: `plan_faults(selected)` and the comparison with a replay; `fault_plan` alone injects
    without the replay (the verdicts are the reference). `phases`: several versions at once
    (live.Phases: they start together, run their scenarios in turn, wait for the holds together)."""
    phases = phases or Phases([version])
    try:
        return _run_version(version, names, out_root, quick, library, with_faults, settings, log,
                            "auto" if with_faults else fault_plan, phases, selected)
    finally:
        phases.leave(version)


def _run_version(version, names, out_root, quick, library, with_faults, settings, log, fault_plan, phases,
                 selected):
    selected = selected if selected is not None else applicable(version, names, quick)
    info: dict = {"version": version, "notes": []}
    out = out_root / version
    retention = 1 if any(s.name == "offset_expiry" for s in selected) else None
    t0 = time.monotonic()
    cluster = KafkaCluster(version, workdir=out / "cluster", offsets_retention_minutes=retention)
    try:
        cluster.start()
    except Exception as exc:
        info["error"] = str(exc).splitlines()[0]
        cluster.close(keep=True)
        return [Verdict(version, s.name, "", note=f"cluster: {info['error']}") for s in selected], info
    run = None
    shipper = None
    try:
        info["cluster_start_s"] = round(time.monotonic() - t0, 1)
        java_lib, streams_lib, notes = java_libs(version)
        info["notes"] += notes
        shipper = LogShipper(cluster, LOG_TOPIC).start()
        run = LiveRun(cluster, shipper, out, settings or MonitorSettings(lateness_s=MATRIX_LATENESS_S), java_lib,
                      streams_lib)
        t1 = time.monotonic()
        run.start()
        info["monitor_start_s"] = round(time.monotonic() - t1, 1)
        phases.started(version)
        phases.my_turn(version)
        plan = plan_faults(selected) if fault_plan == "auto" else fault_plan
        injector = FaultInjector(run, plan) if plan else None
        items = run.run(selected, f"m{version.replace('.', '')}", library, log=log, on_start=injector)
        if injector is not None:
            injector.join()
            info["faults"] = injector.events
        phases.leave(version)
        # the line checks of each scenario's own group (a scenario of several groups checks the
        # lines of its first; its other groups' rows, `follower_kill[cg]`, share that result)
        info["bed"] = {i.ctx.group: i.result.lines for i in items
                       if i.result is not None and not i.scenario.name.endswith("]")}
        info["server_logs"] = [str(n.server_log) for n in cluster.brokers.values()]   # cluster.with_rolled_files
        run.expectations(items)
        info["hold_wait_s"] = round(run.wait_quiet(items), 1)
        verdicts = run.judge(items)
        # Rows the watermark had passed (a shipper that held lines back): named in every failure.
        info["late_rows"] = late_rows(run)
        for ev in info.get("faults", []):
            if ev["fault"] == "kill_monitor" and "restart_s" in ev:
                down = (ev["ts_ms"], ev["ts_ms"] + int(ev["restart_s"] * 1000))
                for v in verdicts:
                    if v.latency_span and v.latency_span[0] <= down[1] and down[0] <= v.latency_span[1]:
                        v.monitor_down = True
        verdicts.append(run.cluster_verdict())
        if with_faults:
            verdicts.append(reference_verdict(run, items, out, info))
        _save(out, items, verdicts, info, run)
        return verdicts, info
    finally:
        if run is not None:
            run.close()
        if shipper is not None:
            shipper.stop(drain=False, timeout=10)
        cluster.close(keep=True)


def late_rows(run: LiveRun) -> float:
    """The monitor's rebalance_monitor_late_rows_total as last scraped."""
    return run.require_watch().samples().value("rebalance_monitor_late_rows_total") or 0


def reference_verdict(run: LiveRun, items: list, out: Path, info: dict) -> Verdict:
    """The monitor that went through the faults vs a replay of the dumped topics."""
    v = Verdict(run.cluster.version, "faults_vs_replay", "*", triggers_right=None, causes_right=None)
    for ev in info.get("faults", []):
        if ev.get("error"):
            v.fail("fault", f"{ev['fault']} during {ev['during']}: {ev['error']}")
    groups = {i.ctx.group for i in items if i.exp is not None}
    try:
        logs = faults.dump_log_topic(run.cluster.bootstrap, run.shipper.topic, out / "reference" / "logs")
        n = faults.dump_offsets(run.cluster.bootstrap, out / "reference" / "offsets.jsonl")
        ref = faults.replay_reference(run.settings, logs, out / "reference" / "offsets.jsonl",
                                      out / "reference" / "out", run.require_monitor().cluster)
    except Exception as exc:
        v.fail("reference", f"{type(exc).__name__}: {exc}")
        return v.settle([])
    info["reference"] = {"log_files": [str(p) for p in logs], "offsets_records": n, "out": str(ref)}
    diff = faults.compare(run.require_monitor(), ref, groups)
    info["reference"]["diff"] = diff
    for kind, d in diff.items():
        if kind == "rebalances":
            v.rebalances_expected, v.rebalances_found = d["reference"], d["live"]
        if kind == "member_removals":
            v.removals_expected, v.removals_found = d["reference"], d["live"]
        for rec in d["missing"]:
            v.fail("lost", f"{kind}: {rec[:300]}")
        for rec in d["extra"]:
            v.fail("twice", f"{kind}: {rec[:300]}")
    for line in faults.compare_metrics(run.require_monitor().scrape(), ref, groups):
        v.fail("metrics", line)
    late = late_rows(run)
    if late:
        v.fail("late", f"rebalance_monitor_late_rows_total {late:g}: rows dropped behind the watermark")
    return v.settle([])


def _save(out: Path, items: list, verdicts: list, info: dict, run: LiveRun) -> None:
    doc = {"info": info,
           "scenarios": [{"scenario": i.scenario.name, "group": i.ctx.group,
                          "bed": asdict(i.result) if i.result else None,
                          "expected": asdict(i.exp) if i.exp else None} for i in items],
           "verdicts": [asdict(v) for v in verdicts]}
    (out / "results.json").write_text(json.dumps(doc, indent=1, default=str))
    for kind in ("rebalances", "member_removals", "anomalies", "quarantine"):
        (out / f"monitor-{kind}.json").write_text(json.dumps(run.require_monitor().records(kind), indent=0))


def _cell(a, b) -> str:
    return "-" if a is None else f"{a}/{b}"


def _secs(x, down: bool = False) -> str:
    return "-" if x is None else f"{x:.1f}" + (" *" if down else "")


def table(version: str, verdicts: list, info: dict) -> str:
    """The per-version table (markdown, also readable as text)."""
    head = (f"Kafka {version}: cluster start {info.get('cluster_start_s', '-')} s, monitor start "
            f"{info.get('monitor_start_s', '-')} s, waited {info.get('hold_wait_s', '-')} s for the removal holds"
            + (f"; {info['error']}" if info.get("error") else ""))
    rows = [head, "",
            "| scenario | rebalances exp/found | removals exp/found | triggers right | causes right | "
            "line→/metrics s (rebalance, max) | line→/metrics s (removal, max) | stops exp/found | "
            "stop error s/partition | passed |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for v in verdicts:
        passed = {"PASS": "yes", "KNOWN": "no (known)", "SKIP": "skip"}.get(v.status, "**no**")
        rows.append(f"| {v.scenario} | {_cell(v.rebalances_expected, v.rebalances_found)} | "
                    f"{_cell(v.removals_expected, v.removals_found)} | "
                    f"{_cell(v.triggers_right, v.rebalances_expected)} | "
                    f"{_cell(v.causes_right, v.removals_expected)} | {_secs(v.rebalance_latency_s, v.monitor_down)} | "
                    f"{_secs(v.removal_latency_s, v.monitor_down)} | {_cell(v.stops_expected, v.stops_found)} | "
                    f"{'-' if v.impact_error_s is None else v.impact_error_s} | {passed} |")
    notes = []
    for v in verdicts:
        if v.status in ("FAIL", "KNOWN") and v.failures:
            notes.append(f"- {v.scenario}: {v.summary()}")
        for reason in v.known if v.status == "KNOWN" else []:
            notes.append(f"  - known: {reason}")
        if v.note:
            notes.append(f"- {v.scenario}: {v.note}")
    for n in info.get("notes", []):
        notes.append(f"- note: {n}")
    for ev in info.get("faults", []):
        notes.append(f"- fault: {json.dumps(ev, default=str)}")
    if any(v.monitor_down for v in verdicts):
        notes.append("- \\* the monitor was being killed and restarted (kill -9) while these records were pending")
    return "\n".join(rows + ([""] + notes if notes else []))


def main(argv: list | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafka-matrix", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("versions", nargs="*", default=MATRIX)
    p.add_argument("--scenario", action="append", help="only these scenarios (repeatable)")
    p.add_argument("--quick", action="store_true", help="only the quick scenarios")
    p.add_argument("--faults", action="store_true",
                   help="inject a monitor kill -9, a broker restart and a log-leader move; compare with a replay")
    p.add_argument("--library", default="kafka-python", choices=["kafka-python", "confluent"])
    p.add_argument("--out", default=None, help="where clusters, timelines, records and results go")
    p.add_argument("--markdown", default=None, help="also write the tables to this file")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out_root = Path(args.out or f"/tmp/kafka-matrix-{time.strftime('%Y%m%d-%H%M%S')}")
    total = passed = 0
    tables = []
    t0 = time.monotonic()
    for version in args.versions:
        print(f"== Kafka {version}", flush=True)
        try:
            verdicts, info = run_version(version, args.scenario, out_root, args.quick, args.library, args.faults)
        except BedError as exc:
            verdicts, info = [], {"error": str(exc)}
        text = table(version, verdicts, info)
        tables.append(text)
        print("\n" + text + "\n", flush=True)
        total += sum(1 for v in verdicts if v.status != "SKIP")
        passed += sum(1 for v in verdicts if v.passed)
    last = f"versions={len(args.versions)} scenarios={total} scenarios_passed={passed}"
    if args.markdown:
        Path(args.markdown).write_text("\n\n".join(tables) + f"\n\n`{last}` ({time.monotonic() - t0:.0f} s)\n")
    print(f"results under {out_root}")
    print(last)
    return 0 if total and passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
