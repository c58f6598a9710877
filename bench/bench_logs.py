"""Broker-log throughput bench: lines/s through the replay source, the JVM filter and the parse step.

What it does, in order:

1. Builds large `server.log` files from the four bundled capture logs (Kafka 2.7 and 4.0). Each
   output file is one capture log repeated with its timestamps shifted forward by the capture's
   span per repetition, and padded with copies of that log's own non-coordinator entries (whole
   entries, stack traces included) until coordinator lines make up `--coordinator-share` of all
   lines. The files are cached under `--work-dir` and reused when the parameters match.
2. Reads the files once so both measurements start from a warm page cache.
3. `grep -c GroupCoordinator` over the same files (best of 3 runs, wall time).
4. The replay's read stage (streaming/spark/replay_stage.py read_events), timed from the write's
   start to its end: one read task per file (sources/replay_files.py: the bulk marker scan) ->
   JVM coordinator-marker filter -> mapInArrow parse (catalog) -> noop sink. Spark session
   start-up is not counted. Lines/s = raw lines in the files / wall time.
   The query runs `--runs` times (default 4) over the same files. The first is the first query of
   a fresh JVM (JIT compilation, Python worker start-up) and is printed only. The summary line uses
   the median of the others: the steady state of a long-running job. One second run alone is
   not that: the JVM is still compiling the query's hot paths then (docs/benchmarks.md: second
   runs took 5.4-5.6 s where the third and fourth took 4.0-4.5 s, same JVM, same files).
5. With `--static`: the parse path over a static DataFrame (`spark.read.text` -> filter -> parse),
   for comparison. It has no time merge and no line numbers, so it is not the replay path.

The last line of the output is `lines_per_second=N grep_lines_per_second=M ratio=R`
(N = step 4, M = step 3, R = N / M).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from testbed.proc import tree_cpu_seconds
from streaming.logs.layout import COORDINATOR_LOGGER_MARKERS
from streaming.logs.timeutil import header_timestamp_ms

ROOT = Path(__file__).resolve().parents[1]

CAPTURES = [ROOT / "tests/fixtures/kafka-2.7/broker1-server.log",
            ROOT / "tests/fixtures/kafka-2.7/broker2-server.log",
            ROOT / "tests/fixtures/kafka-4.0/node1-server.log",
            ROOT / "tests/fixtures/kafka-4.0/node2-server.log"]
GENERATOR_VERSION = 1


# ----------------------------------------------------------------------------- building the logs
def _entries(path: Path) -> list[tuple[int, list[str], bool]]:
    """(ts_ms, lines, is_coordinator) per log entry: a header line plus its continuation lines."""
    entries: list[tuple[int, list[str], bool]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        ts = header_timestamp_ms(line)
        if ts is None and entries:
            entries[-1][1].append(line)
            continue
        coordinator = any(m in line for m in COORDINATOR_LOGGER_MARKERS)
        entries.append((ts if ts is not None else 0, [line], coordinator))
    return entries


class _Clock:
    """epoch ms -> `yyyy-MM-dd HH:mm:ss,SSS` (UTC), cached per second."""

    def __init__(self) -> None:
        self._seconds: dict[int, str] = {}

    def text(self, ts_ms: int) -> str:
        sec, ms = divmod(ts_ms, 1000)
        base = self._seconds.get(sec)
        if base is None:
            base = datetime.fromtimestamp(sec, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            if len(self._seconds) > 100_000:
                self._seconds.clear()
            self._seconds[sec] = base
        return f"{base},{ms:03d}"


def build_file(source: Path, target: Path, lines_wanted: int, share: float) -> dict:
    entries = _entries(source)
    coordinator_lines = sum(len(lines) for _, lines, c in entries if c)
    other = [e for e in entries if not e[2]]
    total_lines = sum(len(lines) for _, lines, _ in entries)
    per_pass = max(total_lines, round(coordinator_lines / share)) if share > 0 else total_lines
    padding_per_pass = per_pass - total_lines
    pad_every = padding_per_pass / len(entries)          # padding lines owed after each entry
    first = min(ts for ts, _, _ in entries if ts)
    span = max(ts for ts, _, _ in entries) - first + 60_000
    clock = _Clock()
    written = coordinator_written = 0
    owed = 0.0
    pool_index = 0
    repetition = 0
    with open(target, "w", encoding="utf-8", buffering=1 << 22) as out:
        while written < lines_wanted:
            shift = repetition * span
            last_ts = first + shift
            for ts, lines, is_coordinator in entries:
                if ts:
                    last_ts = ts + shift
                out.write(f"[{clock.text(last_ts)}]{lines[0][25:]}\n" if ts else lines[0] + "\n")
                for extra in lines[1:]:
                    out.write(extra + "\n")
                written += len(lines)
                if is_coordinator:
                    coordinator_written += len(lines)
                owed += pad_every
                while owed >= 1 and other:
                    _, pad_lines, _ = other[pool_index % len(other)]
                    pool_index += 1
                    out.write(f"[{clock.text(last_ts)}]{pad_lines[0][25:]}\n")
                    for extra in pad_lines[1:]:
                        out.write(extra + "\n")
                    written += len(pad_lines)
                    owed -= len(pad_lines)
                if written >= lines_wanted:
                    break
            repetition += 1
    return {"file": str(target), "lines": written, "coordinator_marker_lines": coordinator_written,
            "bytes": target.stat().st_size, "repetitions": repetition}


def build_logs(work_dir: Path, total_lines: int, share: float) -> list[dict]:
    key = hashlib.sha256(json.dumps([GENERATOR_VERSION, total_lines, share,
                                     [p.stat().st_size for p in CAPTURES]]).encode()).hexdigest()[:12]
    directory = work_dir / f"logs-{key}"
    manifest = directory / "manifest.json"
    if manifest.exists():
        return json.loads(manifest.read_text())
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    files = []
    per_file = total_lines // len(CAPTURES)
    for source in CAPTURES:
        target = directory / f"{source.parent.name}-{source.name}"
        files.append(build_file(source, target, per_file, share))
    manifest.write_text(json.dumps(files, indent=1))
    return files


# ----------------------------------------------------------------------------- measurements
def load_average() -> str:
    try:
        return " ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "?"


def warm_cache(files: list[dict]) -> None:
    for f in files:
        with open(f["file"], "rb") as handle:
            while handle.read(1 << 24):
                pass


def grep_rate(files: list[dict], runs: int = 3) -> tuple[float, int, float]:
    best = float("inf")
    matches = 0
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run(["grep", "-c", "GroupCoordinator"] + [f["file"] for f in files],
                              capture_output=True, text=True, check=False)
        best = min(best, time.perf_counter() - started)
        matches = sum(int(line.rsplit(":", 1)[1]) for line in proc.stdout.split())
    lines = sum(f["lines"] for f in files)
    return lines / best, matches, best


def _log_inputs(paths: list[str], cluster: str = "bench"):
    from streaming.app.settings import LogInput
    return [LogInput(path=p, cluster=cluster) for p in paths]


def streaming_run(spark, paths: list[str]) -> dict:
    """The replay's read stage for log files (streaming/spark/replay_stage.py read_events: one read
    task per file, the JVM filter, the parse step) into a noop sink; the rows the parse step
    produced are counted by an observation, which adds no pass."""
    from pyspark.sql import functions as F
    from pyspark.sql import Observation

    from streaming.app.settings.wiring import log_file
    from streaming.spark.query import replay_inputs
    from streaming.spark.replay_stage import read_events
    log_files, specs, _, _ = replay_inputs([log_file(i) for i in _log_inputs(paths)], [])
    observation = Observation("bench_logs")
    events = read_events(spark, log_files, specs, [], {}, 10).observe(observation, F.count(F.lit(1)).alias("rows"))
    cpu_before = tree_cpu_seconds()
    started = time.perf_counter()
    events.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - started
    cpu = tree_cpu_seconds() - cpu_before
    return {"seconds": elapsed, "cpu_seconds": cpu, "output_rows": int(observation.get["rows"])}


def static_run(spark, paths: list[str]) -> dict:
    """spark.read.text -> JVM filter -> parse -> noop: no merge, seq is not the line number."""
    from pyspark.sql import functions as F

    from streaming.logs.step import LogSourceSpec
    from streaming.spark.steps import log_events
    specs = {p: LogSourceSpec(cluster="bench") for p in paths}
    raw = (spark.read.text(paths).select(
        F.input_file_name().alias("source_id"), F.monotonically_increasing_id().alias("seq"),
        F.col("value").alias("line"), F.lit(None).cast("long").alias("ts_hint_ms"),
        F.lit(False).alias("eof")))
    started = time.perf_counter()
    log_events(raw, specs).write.format("noop").mode("overwrite").save()
    return {"seconds": time.perf_counter() - started}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=5_000_000, help="total lines over all files (default 5,000,000)")
    parser.add_argument("--coordinator-share", type=float, default=0.02,
                        help="share of coordinator-marker lines (default 0.02; the captures themselves have ~0.20)")
    parser.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "rebalance-monitor-bench"))
    parser.add_argument("--runs", type=int, default=4,
                        help="queries over the same files: the first warms the JVM up, the figure is the "
                             "median of the others (default 4)")
    parser.add_argument("--static", action="store_true", help="also time the static spark.read.text path")
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error("--runs must be at least 2 (one warm-up run, then the measured ones)")

    load_before = load_average()
    started = time.perf_counter()
    files = build_logs(Path(args.work_dir), args.lines, args.coordinator_share)
    total = sum(f["lines"] for f in files)
    coordinator = sum(f["coordinator_marker_lines"] for f in files)
    size = sum(f["bytes"] for f in files)
    print(f"input: {len(files)} files, {total:,} lines, {size / 1e6:.0f} MB, "
          f"{coordinator:,} coordinator-marker lines ({coordinator / total:.1%}); "
          f"built or reused in {time.perf_counter() - started:.1f} s under {args.work_dir}")
    warm_cache(files)

    grep_lps, grep_matches, grep_s = grep_rate(files)
    print(f"grep -c GroupCoordinator: {grep_matches:,} matching lines, best of 3 runs {grep_s:.3f} s "
          f"= {grep_lps:,.0f} lines/s")

    from streaming.spark.session import get_spark
    spark = get_spark("local[2]", 2, app_name="bench-logs")
    paths = [f["file"] for f in files]
    runs = []
    for k in range(args.runs):
        label = "first run in a fresh JVM (JIT compiling, not counted)" if k == 0 else f"run {k + 1}, same JVM"
        run = streaming_run(spark, paths)
        runs.append(run)
        print(f"replay read stage (read tasks -> JVM filter -> parse -> noop, local[2]), {label}: "
              f"{run['seconds']:.2f} s for {total:,} lines ({run['output_rows']:,} event/quarantine rows out "
              f"of the parse step) = {total / run['seconds']:,.0f} lines/s; CPU {run['cpu_seconds']:.2f} s",
              flush=True)
    measured = sorted(runs[1:], key=lambda r: r["seconds"])
    run = measured[len(measured) // 2]        # the median run (of an even count, the slower middle one)
    lps = total / run["seconds"]
    print(f"  steady state (median of runs 2-{args.runs}): {run['seconds']:.2f} s = {lps:,.0f} lines/s")
    print(f"  CPU: {run['cpu_seconds']:.2f} s of driver + JVM + Python workers during the query "
          f"({total / max(run['cpu_seconds'], 1e-9):,.0f} lines per CPU-second); machine load average "
          f"before {load_before}, after {load_average()} (nproc {os.cpu_count()}); other processes on the "
          f"machine compete for the same cores, so wall-clock figures vary between runs")
    if args.static:
        st = static_run(spark, paths)
        print(f"static spark.read.text -> JVM filter -> parse -> noop (no merge, for comparison): "
              f"{st['seconds']:.2f} s = {total / st['seconds']:,.0f} lines/s")
    spark.stop()
    print(f"lines_per_second={lps:.0f} grep_lines_per_second={grep_lps:.0f} ratio={lps / grep_lps:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
