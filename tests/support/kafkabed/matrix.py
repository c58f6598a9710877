"""Runs scenarios on Kafka versions and reports, per scenario, the broker lines expected vs
found, `__consumer_offsets` records, and what the monitor's `parse-logs` made of the logs.
`scripts/kafka-matrix [VERSION ...]` is `main`; the pytest tests call `run_scenario`."""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import checks, jars
from .cluster import KafkaCluster
from .procs import BedError
from .runner import Runner
from .scenarios import Ctx, Scenario, applicable, with_group
from .shipper import LogShipper

MATRIX = ["2.8.2", "3.9.2", "4.0.2", "4.2.2", "4.4.0"]


@dataclass
class ScenarioResult:
    version: str
    scenario: str
    group: str
    seconds: float = 0.0
    status: str = "FAIL"             # PASS | FAIL | SKIP
    error: str | None = None
    lines: list = field(default_factory=list)      # checks.LineCheck as dicts
    offsets_records: int = 0
    smoke: list = field(default_factory=list)      # (kind, expected, found)
    timeline: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "PASS"


def java_libs(version: str) -> tuple[Path | None, Path | None, list]:
    """(clients lib, streams lib, notes). Streams falls back to the newest kafka-streams
    served at or below `version` (4.4.0's is not on Maven Central)."""
    notes = []
    try:
        clients = jars.fetch_clients(version)
    except jars.MavenError as exc:
        return None, None, [str(exc)]
    streams = None
    if jars.parse_version(version) >= (4, 2):
        v = jars.parse_version(version)
        candidates = [version] + [f"{v[0]}.{m}.{p}" for m in range(v[1], 1, -1) for p in range(3, -1, -1)
                                  if (v[0], m, p) < v]
        cached = [c for c in candidates if (jars.cache_root() / "kafka" / c / ".streams.complete").exists()]
        cand = cached[0] if cached else jars.newest_served(candidates, "kafka-streams")
        if cand is None:
            notes.append(f"kafka-streams not served for {version} or any 4.2+ version below it")
        else:
            try:
                streams = jars.fetch_clients(cand, streams=True)
                if cand != version:
                    notes.append(f"kafka-streams {version} is not served; the streams app runs kafka-streams {cand}")
            except jars.MavenError as exc:
                notes.append(str(exc))
    return clients, streams, notes


def run_scenario(cluster, shipper, scenario: Scenario, ctx: Ctx, out_dir: Path,
                 java_lib: Path | None = None, streams_lib: Path | None = None,
                 line_timeout: float = 20.0) -> ScenarioResult:
    """Runs one scenario on a started cluster with a running shipper; never raises for a
    scenario failure (the result says FAIL and why)."""
    res = ScenarioResult(cluster.version, scenario.name, ctx.group)
    missing = [n for n in scenario.needs if (n == "java" and java_lib is None)
               or (n == "streams" and streams_lib is None)
               or (n == "retention" and cluster.offsets_retention_minutes is None)]
    if missing:
        res.status, res.error = "SKIP", f"needs {', '.join(missing)}"
        return res
    since = shipper.mark()
    t0 = time.monotonic()
    runner = Runner(cluster, out_dir / scenario.name, shipper, java_lib, streams_lib)
    try:
        runner.topic(ctx.topic, scenario.partitions, 1)
        scenario.run(runner, ctx)
        res.status = "PASS"
    except Exception as exc:
        res.error = f"{type(exc).__name__}: {exc}"
        (out_dir / scenario.name).mkdir(parents=True, exist_ok=True)
        (out_dir / scenario.name / "error.txt").write_text(traceback.format_exc())
    finally:
        runner.close()
    res.timeline = runner.timeline
    found = checks.check_lines(shipper, since, ctx.group, scenario.expect(ctx), line_timeout)
    res.lines = [asdict(c) for c in found]
    try:
        res.offsets_records = checks.offsets_records(cluster.bootstrap, [ctx.group])[ctx.group]
    except Exception as exc:
        res.error = res.error or f"__consumer_offsets: {exc}"
    if res.status == "PASS":
        bad = [f"{c.label} {c.found}/{c.expected}" for c in found if not c.ok]
        if bad:
            res.status, res.error = "FAIL", "missing broker lines: " + ", ".join(bad)
        elif res.offsets_records == 0:
            res.status, res.error = "FAIL", f"no __consumer_offsets record for group {ctx.group}"
    res.seconds = round(time.monotonic() - t0, 1)
    return res


def run_version(version: str, names: list | None, out_root: Path, quick: bool = False,
                envelope: bool = False, library: str = "kafka-python") -> tuple[list, dict]:
    selected = applicable(version, names, quick)
    info = {"version": version, "notes": []}
    out = out_root / version
    retention = 1 if any(s.name == "offset_expiry" for s in selected) else None
    t0 = time.monotonic()
    results: list[ScenarioResult] = []
    cluster = KafkaCluster(version, workdir=out / "cluster", offsets_retention_minutes=retention)
    try:
        cluster.start()
    except Exception as exc:
        info["error"] = str(exc).splitlines()[0]
        cluster.close(keep=True)
        return [ScenarioResult(version, s.name, "", status="FAIL", error=f"cluster: {info['error']}")
                for s in selected], info
    try:
        info["cluster_start_s"] = round(time.monotonic() - t0, 1)
        info["timings"] = {k: round(v, 2) for k, v in cluster.timings.items()}
        java_lib, streams_lib, notes = java_libs(version)
        info["notes"] += notes
        shipper = LogShipper(cluster, "kafkabed-broker-logs", envelope=envelope).start()
        try:
            for s in selected:
                ctx = with_group(Ctx(version, "", "", library=library, has_java=java_lib is not None),
                                 s, f"m{version.replace('.', '')}")
                res = run_scenario(cluster, shipper, s, ctx, out, java_lib, streams_lib)
                results.append(res)
                print(f"  {version} {s.name:<14} {res.status} {res.seconds:6.1f} s"
                      + (f"  {res.error}" if res.error else ""), flush=True)
        finally:
            shipper.stop()
        events, summary = checks.parse_logs(cluster.server_log_paths())
        info["parse_logs"] = summary.splitlines()[0] if summary else ""
        for res in results:
            if res.status != "SKIP":
                res.smoke = checks.smoke(events, res.group, [checks.LineCheck(**c) for c in res.lines])
    finally:
        cluster.close(keep=True)
    (out / "results.json").write_text(json.dumps({"info": info, "results": [asdict(r) for r in results]},
                                                 indent=1, default=str))
    return results, info


def print_table(version: str, results: list, info: dict) -> None:
    print(f"\nKafka {version}: cluster start {info.get('cluster_start_s', '-')} s "
          f"{info.get('timings', '')} {info.get('error', '')}")
    for note in info.get("notes", []):
        print(f"  note: {note}")
    print(f"  {'scenario':<14} {'result':<6} {'secs':>6}  {'broker lines found/expected':<44} "
          f"{'offsets':>7}  parse-logs events found/lines")
    for r in results:
        lines = " ".join(f"{c['label']} {c['found']}/{c['expected']}" for c in r.lines)
        smoke = " ".join(f"{k} {found}/{exp}" for k, exp, found in r.smoke)
        print(f"  {r.scenario:<14} {r.status:<6} {r.seconds:6.1f}  {lines:<44} {r.offsets_records:>7}  {smoke}")
        if r.error and r.status != "PASS":
            print(f"    {r.status.lower()}: {r.error}")
    if info.get("parse_logs"):
        print(f"  {info['parse_logs']}")


def main(argv: list | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafka-matrix", description=__doc__)
    p.add_argument("versions", nargs="*", default=MATRIX)
    p.add_argument("--scenario", action="append", help="only these scenarios (repeatable)")
    p.add_argument("--quick", action="store_true", help="only the quick (CI) scenarios")
    p.add_argument("--envelope", action="store_true", help="ship Filebeat-style JSON envelopes")
    p.add_argument("--library", default="kafka-python", choices=["kafka-python", "confluent"])
    p.add_argument("--out", default=None, help="where clusters, timelines and results go")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out_root = Path(args.out or f"/tmp/kafka-matrix-{time.strftime('%Y%m%d-%H%M%S')}")
    total = passed = 0
    for version in args.versions:
        print(f"== Kafka {version}", flush=True)
        try:
            results, info = run_version(version, args.scenario, out_root, args.quick, args.envelope, args.library)
        except BedError as exc:
            results, info = [], {"error": str(exc)}
        print_table(version, results, info)
        total += sum(1 for r in results if r.status != "SKIP")
        passed += sum(1 for r in results if r.passed)
    print(f"\nresults under {out_root}")
    print(f"versions={len(args.versions)} scenarios={total} scenarios_passed={passed}")
    return 0 if total and passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
