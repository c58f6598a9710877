"""One scenario on a started cluster: runs it, then checks the shipped broker lines and the
group's `__consumer_offsets` records (the bed's own checks; live_run.py adds the monitor's)."""
from __future__ import annotations

import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from testbed.bed import checks, jars
from testbed.bed.runner import Runner
from testbed.bed.scenarios import Ctx, Scenario


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
    """(clients lib, streams lib, notes). Streams is kafka-streams `version`; when Maven does not
    serve it (4.4.0's came weeks after the release), the newest served at or below it, and offline
    the newest in the cache."""
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
        cand = version if version in cached else (jars.newest_served(candidates, "kafka-streams")
                                                  or (cached[0] if cached else None))
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
