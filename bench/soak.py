"""A month in under an hour (issue 50 item 6): `rebalance-monitor run` on a real Kafka broker fed 30
simulated days of a fleet whose groups come and go, killed with SIGKILL and restarted every
simulated week; are its memory, series, state and checkpoint bounded, and does its restart time
stay flat as the deployment ages?

Traffic (bench/soak_inputs.py): `--steady` groups that stay (commits every `--commit-minutes`, a
daily rolling restart: 2 rebalances a day each) and `--ephemeral` groups over the month, each name
used once (join, commit, leave 12 s later, offsets expiry `--retention-days` after: the group's
GroupMetadata tombstone and its Dead line). Every line and record carries its time on the
simulated clock, which starts at midnight UTC `--days` + 2 days ago (never in the future); the
broker-log lines go to a 1-partition log topic, the records to a 50-partition offsets topic
(`offsets_topic`), both kept forever (retention.ms=-1: their times are weeks old).

The clock is compressed as far as the monitor keeps up: each simulated day is produced as fast as
the producer goes, then the bench waits until the monitor has read all of it (its input counters
since its start reach what was produced since), and samples. `run` reads the topics with
`kafka.idle_flush = false` (its wall-clock markers would put the watermark weeks ahead of the
simulated clock) and `dead_group_retention_seconds = --dead-retention` (wall seconds: the default
600 s would be 10 simulated days here). At the end of every `--week-days` days but the last, the
monitor is killed (kill -9 of its process group) and started again on the same checkpoint and
sink; its restart is timed: launch to /metrics serving the restored counters (`restart_metrics_s`;
the rebalances they count are printed), to the groups' gauges back from the state file
(`rebalance_monitor_restoring_groups` 0: `groups_s`), and to the first micro-batch committed in
the checkpoint (`restart_first_batch_s`; the next day's producing starts right after the groups
are back, so that batch reads new records).

Samples (one row a day in `<out>/soak-samples.jsonl` and `.csv`): peak RSS of the driver, the JVM
and the Python workers during the day (bench_scale.PeakRss), the event sink's bytes and files,
the checkpoint's bytes (whole, its state store `query/state`), the group state file's bytes
(groups.json + groups.changes.jsonl), the /metrics page's series (all, and those with a `group`
label), `rebalance_monitor_groups` per state, `_state_rows`, `_groups_over_cap`, `_late_rows_total`,
and the JVM's heap in use (peak) and committed (then). Before each kill and at the end, the JVM's
live heap after a full collection (`jcmd GC.class_histogram`; its largest classes in
`<out>/jvm-histogram-day-N.txt`): its RSS follows the heap its collector keeps committed, mostly
garbage between collections; the live heap is what a leak would grow.

Checks before any figure: every sampled steady group's rebalances in the sink are 1 + 2 * (days - 1)
(on /metrics only the groups that got one of `max_groups` slots have their own; reported);
the sampled ephemeral groups that expired have both their rebalances in the sink and are gone
from `rebalance_monitor_group_state`; `rebalance_monitor_groups` counts the steady groups plus
the ephemeral groups not expired yet (within 1%); no late rows.

Verdicts (issue 50's "Done means"): the RSS of driver, JVM and workers, the last full week's max
within `--memory-bound` (1.10) x the max of the first week that starts after the offsets retention
(week 2 at 7 days: until then the Empty groups waiting for their expiry pile up, by design; week 1
when there is no such week before the last); the checkpoint's bytes and the series (the lag
families apart: LAG_SERIES), the last full week's max within `--flat-bound` (1.05) x the week
before's; the state file and the state store's newest snapshots within `--bound` (1.5) x, max against
max; the JVM's live heap at the last full week's kill within `--memory-bound` x at the reference
week's; the last restart (kill -9 to /metrics serving) within `--restart-bound` (1.10) x the
first and under `--restart-ceiling` s. Spark keeps `--batches-to-retain` (10) batches of state
deltas, not its 100, and snapshots the state every `--deltas-for-snapshot` (5) deltas, not 10:
live, 100 batches are a minute; here, 50 simulated days. Exit 1 when a bound fails, 2 when a check fails.

Last line: soak_days=… soak_ephemeral_groups=… soak_restart_seconds_first=… … soak_bounded=true|false
soak_wall_seconds=….
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from bench.bench_scale import HEAP_COMMITTED, PeakRss, _tree, jvm_heap_mb
from bench.soak_inputs import DAY_MS, LOG4J, SoakTraffic, ephemeral_name, steady_name
from bench.soak_verdicts import reference_week, verdicts
from testbed.bed import KafkaCluster, wait_for
from testbed.bed.admin import create_topic
from testbed.metrics import parse
from testbed.monitor import MonitorProcess, MonitorSettings

LOG_TOPIC, OFFSETS_TOPIC = "soak-logs", "soak-offsets"
INPUT = "rebalance_monitor_input_records_total"
RESTARTS = "rebalance_monitor_query_restarts_total"
ENDED = "rebalance_monitor_rebalance_duration_seconds_count"
RESTORING = "rebalance_monitor_restoring_groups"


def _stamp_cache():
    cache: dict[int, str] = {}

    def stamp(ms: int) -> str:
        sec = ms // 1000
        head = cache.get(sec)
        if head is None:
            if len(cache) > 4096:
                cache.clear()
            head = cache[sec] = datetime.fromtimestamp(sec, tz=timezone.utc).strftime(LOG4J)[:-7]
        return f"{head},{ms % 1000:03d}"
    return stamp


class Producer:
    """Rows of SoakTraffic onto the two topics, counting what each got."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer as KafkaProducer
        self.p = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": "1",
                                "batch.num.messages": 10000, "queue.buffering.max.messages": 1_000_000})
        self.sent = {"broker_log": 0, "offsets": 0}
        self.stamp = _stamp_cache()

    def send(self, rows: list) -> None:
        produce, stamp = self.p.produce, self.stamp
        for row in rows:
            ms = row[0]
            while True:
                try:
                    if row[1] == "log":
                        produce(LOG_TOPIC, f"[{stamp(ms)}] {row[2]}".encode(), timestamp=ms)
                        self.sent["broker_log"] += 1
                    else:
                        produce(OFFSETS_TOPIC, row[4], key=row[3], partition=row[2], timestamp=ms)
                        self.sent["offsets"] += 1
                    break
                except BufferError:
                    self.p.poll(0.05)
        self.p.flush(300)


def _tree_bytes(path: Path) -> tuple[int, int]:
    """(bytes, files) under path."""
    total = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.stat(os.path.join(root, name)).st_size
                files += 1
            except FileNotFoundError:
                pass
    return total, files


def _by_family(lines: Iterable[str]) -> dict[str, int]:
    """Series per metric name (histograms by their base name)."""
    out: dict[str, int] = {}
    for line in lines:
        name = re.sub(r"_(bucket|sum|count)$", "", line.split("{", 1)[0].split(" ", 1)[0])
        out[name] = out.get(name, 0) + 1
    return out


def _newest_snapshots(state: Path) -> int:
    """Bytes of the newest `<version>.snapshot` of each state store partition: the whole state at
    that version. The store's folder also keeps the deltas of the last
    spark.sql.streaming.minBatchesToRetain (100) versions, each about as big when every state
    bucket changes in a batch: its size follows the batches run, which the compressed clock makes
    few (a few a simulated day), not the state."""
    total = 0
    for partition in state.glob("*/*"):
        snapshots = [(int(p.name.split(".")[0]), p) for p in partition.glob("*.snapshot")]
        if snapshots:
            try:
                total += max(snapshots)[1].stat().st_size
            except FileNotFoundError:
                pass
    return total


class Soak:
    def __init__(self, args: argparse.Namespace, out: Path) -> None:
        self.args, self.out = args, out
        today = int(time.time() * 1000) // DAY_MS * DAY_MS
        self.traffic = SoakTraffic(args.days, args.ephemeral, args.steady, args.retention_days,
                                   today - (args.days + 2) * DAY_MS, seed=args.seed,
                                   commit_minutes=args.commit_minutes)
        self.samples: list[dict] = []
        self.restarts: list[dict] = []
        self.since_start = {"broker_log": 0, "offsets": 0}
        self.monitor: MonitorProcess | None = None
        self.days_done = 0
        self.rss: PeakRss | None = None
        self.live_heaps: list[dict] = []      # {"day", "live_heap_mb"}: before each kill and at the end

    # ------------------------------------------------------------------ monitor
    def new_monitor(self, bootstrap: str) -> MonitorProcess:
        a = self.args
        settings = MonitorSettings.defaults(dead_group_retention_s=a.dead_retention)
        return MonitorProcess(bootstrap, LOG_TOPIC, self.out / "monitor", settings, offsets_topic=OFFSETS_TOPIC,
                              cluster="soak", extra_toml="idle_flush = false\n\n[spark_conf]\n"
                              f'"spark.sql.streaming.minBatchesToRetain" = "{a.batches_to_retain}"\n'
                              f'"spark.sql.streaming.stateStore.minDeltasForSnapshot" = "{a.deltas_for_snapshot}"\n')

    def start_rss(self) -> None:
        assert self.monitor is not None and self.monitor.proc is not None
        self.rss = PeakRss(self.monitor.proc.pid)
        self.rss.start()

    def read_counts(self) -> dict[str, float]:
        assert self.monitor is not None
        page = parse(self.monitor.scrape(INPUT, RESTARTS, timeout=60))
        if page.value(RESTARTS):
            raise SystemExit(f"bench/soak: the monitor's query failed: {self.monitor.log_tail(3000)}")
        return {s: page.value(INPUT, source=s) or 0.0 for s in ("broker_log", "offsets")}

    def wait_read(self, timeout: float) -> float:
        """Until the monitor has read what was produced since its start; the seconds waited."""
        assert self.monitor is not None
        t0 = time.monotonic()
        while True:
            self.monitor.alive()
            try:
                counts = self.read_counts()
            except OSError:
                counts = {}
            if counts and all(counts[s] >= n for s, n in self.since_start.items()):
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise SystemExit(f"bench/soak: the monitor read {counts} of {self.since_start} within {timeout:.0f} s")
            time.sleep(0.5)

    def jvm_pid(self) -> int | None:
        assert self.monitor is not None and self.monitor.proc is not None
        return next((pid for pid, name, _ in _tree(self.monitor.proc.pid) if name == "java"), None)

    def live_heap(self, day: int) -> None:
        """The JVM's live heap after a full collection (`jcmd GC.class_histogram` runs one), taken just
        before a kill -9 or the end, so that no figure after it is disturbed; its 40 largest classes go
        to jvm-histogram-day-N.txt. What RSS cannot tell apart: objects kept (a leak) or a heap the
        collector grew and keeps committed."""
        pid = self.jvm_pid()
        if pid is None:
            return
        try:
            done = subprocess.run(["jcmd", str(pid), "GC.class_histogram"], capture_output=True, text=True,
                                  timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            print(f"bench/soak: no class histogram of the JVM ({e})", flush=True)
            return
        lines = done.stdout.splitlines()
        total = next((ln.split() for ln in reversed(lines) if ln.startswith("Total")), None)
        if done.returncode or total is None or len(total) < 3:
            print(f"bench/soak: no class histogram of the JVM (jcmd: {done.stderr.strip()[:200]})", flush=True)
            return
        (self.out / f"jvm-histogram-day-{day}.txt").write_text("\n".join(lines[:43] + lines[-1:]) + "\n")
        mb = int(total[2]) / 2**20
        self.live_heaps.append({"day": day, "live_heap_mb": round(mb, 1)})
        print(f"day {day}: the JVM's live heap after a full collection {mb:,.0f} MB", flush=True)

    def restart(self, bootstrap: str) -> dict:
        """kill -9, start again on the same checkpoint; the start's timings."""
        m = self.monitor
        assert m is not None
        self.live_heap(self.days_done)
        # after the histogram, which takes seconds: a batch committed meanwhile is not the restart's
        before = max(m.committed_batches(), default=-1)
        if self.rss is not None:
            self.rss.done.set()
        m.kill9()
        t0 = time.monotonic()
        m.launch()
        m.wait_ready(timeout=600, batches=0)
        served = time.monotonic() - t0
        # served with the counters back (a restart's first page: the cluster histogram's count of
        # rebalances, a small scrape that does not slow the groups' restore), then the groups' gauges
        first = parse(m.scrape(ENDED, RESTORING, timeout=60))
        counted = sum(v for _, v in first.series(ENDED, phase="total"))
        wait_for(lambda: (parse(m.scrape(RESTORING, timeout=60)).value(RESTORING) or 0) == 0,
                 600 - (time.monotonic() - t0), "the restarted monitor to load its groups", interval=0.1,
                 alive=m.alive)
        groups_s = time.monotonic() - t0
        self.since_start = {"broker_log": 0, "offsets": 0}
        self.start_rss()
        print(f"day {self.days_done}: restarted: /metrics served in {served:.1f} s with {counted:,.0f} "
              f"rebalances counted; the groups' gauges back in {groups_s:.1f} s", flush=True)
        result = {"metrics_s": served, "groups_s": groups_s, "rebalances_counted": counted, "first_batch_s": None,
                  "before": before}

        def first_batch() -> None:
            while time.monotonic() - t0 < 900 and m.proc is not None and m.proc.poll() is None:
                if max(m.committed_batches(), default=-1) > before:
                    result["first_batch_s"] = time.monotonic() - t0
                    return
                time.sleep(0.1)
        watcher = threading.Thread(target=first_batch, daemon=True)
        watcher.start()
        result["watcher"] = watcher
        return result

    # ------------------------------------------------------------------ samples
    def sample(self, day: int, wall: float, produce_s: float, read_s: float, rows: int) -> dict:
        m = self.monitor
        assert m is not None and self.rss is not None
        page = m.scrape(timeout=120)
        series = [ln for ln in page.splitlines() if ln and not ln.startswith("#")]
        values = parse(page)
        sink_bytes, sink_files = _tree_bytes(m.events_dir)
        cp_bytes, cp_files = _tree_bytes(m.checkpoint)
        state_bytes, _ = _tree_bytes(m.checkpoint / "query" / "state")
        snapshot_bytes = _newest_snapshots(m.checkpoint / "query" / "state")
        state_file = sum(p.stat().st_size for p in (m.checkpoint / "rebalance-monitor").glob("groups*")
                         if p.is_file())
        peak, self.rss.peak = self.rss.peak, {"driver": 0.0, "jvm": 0.0, "workers": 0.0, "heap": 0.0}
        groups = {labels.get("state", ""): v for labels, v in values.series("rebalance_monitor_groups")}
        row = {"day": day + 1, "wall_s": round(wall, 1), "rows": rows, "produce_s": round(produce_s, 1),
               "read_s": round(read_s, 1),
               "driver_rss_mb": round(peak["driver"], 1), "jvm_rss_mb": round(peak["jvm"], 1),
               "workers_rss_mb": round(peak["workers"], 1), "jvm_heap_mb": round(peak["heap"], 1),
               "jvm_heap_committed_mb": round(self._heap_committed_mb(), 1),
               "sink_bytes": sink_bytes, "sink_files": sink_files, "checkpoint_bytes": cp_bytes,
               "checkpoint_files": cp_files, "state_store_bytes": state_bytes, "state_snapshot_bytes": snapshot_bytes,
               "batches": max(m.committed_batches(), default=-1) + 1, "state_file_bytes": state_file,
               "series": len(series), "group_series": sum(1 for ln in series if 'group="' in ln),
               "lag_series": sum(1 for ln in series if ln.startswith(LAG_SERIES)),
               "group_series_by_family": _by_family(ln for ln in series if 'group="' in ln),
               "series_without_lag": sum(1 for ln in series if not ln.startswith(LAG_SERIES)),
               "groups_live": sum(groups.values()), "groups_by_state": groups,
               "state_rows": values.value("rebalance_monitor_state_rows"),
               "groups_over_cap": values.value("rebalance_monitor_groups_over_cap"),
               "late_rows": values.value("rebalance_monitor_late_rows_total"),
               "metrics_bytes": len(page)}
        self.samples.append(row)
        print(f"day {day + 1}: {rows:,} rows produced in {produce_s:.1f} s, read {read_s:.1f} s later; "
              f"RSS driver {row['driver_rss_mb']:.0f} MB, JVM {row['jvm_rss_mb']:.0f} MB, workers "
              f"{row['workers_rss_mb']:.0f} MB; series {row['series']:,} ({row['group_series']:,} per-group, "
              f"{row['lag_series']:,} lag); "
              f"live groups {row['groups_live']:,.0f}; state store {state_bytes / 1e6:.1f} MB (newest snapshots "
              f"{snapshot_bytes / 1e6:.1f} MB, {row['batches']} batches), checkpoint {cp_bytes / 1e6:.1f} MB "
              f"({cp_files:,} files), state file {state_file / 1e6:.2f} MB, sink "
              f"{sink_bytes / 1e6:.1f} MB ({sink_files:,} files); wall {wall:.0f} s", flush=True)
        return row

    def _heap_committed_mb(self) -> float:
        pid = self.jvm_pid()
        return (jvm_heap_mb(pid, HEAP_COMMITTED) or 0.0) if pid is not None else 0.0

    # ------------------------------------------------------------------ checks
    def check(self) -> list[str]:
        """Problems of the monitor's outputs after the whole month and the tail (empty: none)."""
        m, t, a = self.monitor, self.traffic, self.args
        assert m is not None
        problems = []
        page = parse(m.scrape(timeout=120))
        steady = [steady_name(i) for i in range(0, a.steady, max(1, a.steady // 20))]
        days = self.days_done
        want = t.steady_rebalances_by(days)
        # On /metrics a group has its own series only if it got one of the `max_groups` slots (first
        # come): when a first batch holds more groups than that (33,334 ephemeral ones a day at the
        # default scale), most steady groups are folded into "__other__". Their records are checked
        # in the sink; /metrics is reported.
        exported = 0
        for name in steady:
            got = sum(v for labels, v in page.series("rebalance_monitor_rebalances_total")
                      if labels.get("group") == name)
            exported += got == want
        # The tail has no log line: the log source's watermark stays its lateness behind the last day's
        # last line, and the events after it are held (idle_flush is off). The sample leaves a minute.
        through = t.start_ms + days * DAY_MS
        started = sum(t.per_day[:days])          # the ephemeral groups of the days produced
        gone = [t.start_ms + t.ephemeral_gone_ms(i) for i in range(started)]
        expired = [i for i in range(started) if gone[i] <= through - 60_000]
        live_expected = a.steady + sum(1 for g in gone if g > through)
        live = page.total("rebalance_monitor_groups")
        if abs(live - live_expected) > max(5, 0.01 * live_expected):
            problems.append(f"rebalance_monitor_groups totals {live:.0f}, not about {live_expected} "
                            f"({a.steady} steady + {live_expected - a.steady} ephemeral not expired)")
        sample = {ephemeral_name(i) for i in expired[:: max(1, len(expired) // 50)]}
        states = {labels.get("group") for labels, _ in page.series("rebalance_monitor_group_state")}
        for name in sorted(sample & states):
            problems.append(f"{name}: expired but still has rebalance_monitor_group_state")
        found: dict[str, int] = {}
        pattern = re.compile(r'"group":\s*"((?:console-consumer|steady-app)-\d+)"')
        wanted = sample | set(steady)
        for f in sorted((m.events_dir / "rebalances").glob("*.jsonl")):
            with open(f) as handle:
                for line in handle:
                    g = pattern.search(line)
                    if g and g.group(1) in wanted:
                        found[g.group(1)] = found.get(g.group(1), 0) + 1
        for name in sorted(sample):
            if found.get(name, 0) != 2:
                problems.append(f"{name}: {found.get(name, 0)} rebalances in the sink, not 2")
        for name in steady:
            if found.get(name, 0) != want:
                problems.append(f"{name}: {found.get(name, 0)} rebalances in the sink, not {want}")
        late = page.value("rebalance_monitor_late_rows_total") or 0
        if late:
            problems.append(f"{late:.0f} late rows")
        print(f"checks: {len(steady)} steady groups with {want} rebalances each in the sink ({exported} of them "
              f"with all on /metrics), {len(sample)} expired ephemeral "
              f"groups with their 2 rebalances and no state series, {live:.0f} live groups (expected "
              f"{live_expected}); problems: {len(problems)}", flush=True)
        return problems


# Lag series (`group_topic_lag`, `_seconds`) are reported, not judged: the soak's groups exist only
# in its own offsets topic (`offsets_topic`) and commit to topics its broker does not hold, so
# their lag is unknown (no lag series in the runs of 2026-12-04).
LAG_SERIES = ("rebalance_monitor_group_topic_lag{", "rebalance_monitor_group_topic_lag_seconds{")


def _write_samples(soak: Soak, out: Path) -> None:
    """The samples (JSON lines and CSV) and the restarts, beside the monitor's folder."""
    (out / "soak-samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in soak.samples))
    with open(out / "soak-samples.csv", "w", newline="") as handle:
        keys = [k for k in soak.samples[0] if k not in ("groups_by_state", "group_series_by_family")]
        w = csv.DictWriter(handle, keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(soak.samples)
    (out / "soak-restarts.json").write_text(json.dumps(soak.restarts, indent=1))
    (out / "soak-live-heap.json").write_text(json.dumps(soak.live_heaps, indent=1))


def _judge(soak: Soak, args: argparse.Namespace) -> list[tuple[str, str, float, float, bool]]:
    """The verdicts of the run, each printed."""
    weeks = len(soak.samples) // args.week_days
    reference = reference_week(weeks, args.week_days, args.retention_days)
    bounds = {"memory": args.memory_bound, "flat": args.flat_bound, "other": args.bound,
              "restart": args.restart_bound}
    judged = verdicts(soak.samples, soak.restarts, args.week_days, bounds, args.restart_ceiling, reference,
                      soak.live_heaps)
    for key, compared, a, b, ok in judged:
        print(f"{key}: {compared}: {a:,.1f} -> {b:,.1f} ({b / max(a, 1e-9):.2f}x): "
              f"{'bounded' if ok else 'NOT bounded'}")
    return judged


def _last_line(soak: Soak, args: argparse.Namespace, verdict: str, wall0: float) -> list[str]:
    """The figures of the last line, in order."""
    rates = [x["rows"] / x["wall_s"] for x in soak.samples if x["wall_s"]]
    done, r = soak.samples, [x["first_batch_s"] for x in soak.restarts if x.get("first_batch_s") is not None]
    last = [f"soak_days={soak.days_done}", f"soak_ephemeral_groups={sum(soak.traffic.per_day[:soak.days_done])}",
            f"soak_restart_seconds_first={r[0]:.1f}" if r else "soak_restart_seconds_first=nan",
            f"soak_restart_seconds_max={max(r):.1f}" if r else "soak_restart_seconds_max=nan",
            f"soak_restart_metrics_seconds_max={max((x['metrics_s'] for x in soak.restarts), default=math.nan):.1f}",
            f"soak_restart_groups_seconds_max={max((x['groups_s'] for x in soak.restarts), default=math.nan):.1f}",
            f"soak_driver_rss_mb_max={max(x['driver_rss_mb'] for x in done):.0f}",
            f"soak_jvm_rss_mb_max={max(x['jvm_rss_mb'] for x in done):.0f}",
            f"soak_workers_rss_mb_max={max(x['workers_rss_mb'] for x in done):.0f}",
            f"soak_jvm_live_heap_mb_max={max((h['live_heap_mb'] for h in soak.live_heaps), default=float('nan')):.0f}",
            f"soak_series_max={max(x['series'] for x in done)}",
            f"soak_sink_bytes_final={done[-1]['sink_bytes']}", f"soak_sink_files_final={done[-1]['sink_files']}",
            f"soak_checkpoint_bytes_final={done[-1]['checkpoint_bytes']}",
            f"soak_state_file_bytes_max={max(x['state_file_bytes'] for x in done)}",
            f"soak_state_snapshot_bytes_max={max(x['state_snapshot_bytes'] for x in done)}",
            f"soak_rows_per_second_median={sorted(rates)[len(rates) // 2]:.0f}",
            f"soak_bounded={verdict}", f"soak_wall_seconds={time.monotonic() - wall0:.0f}"]
    if soak.days_done < args.days:
        last.insert(1, f"soak_days_planned={args.days}")
    return last


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench/soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--ephemeral", type=int, default=1_000_000, help="ephemeral group names over the month")
    p.add_argument("--steady", type=int, default=200, help="steady groups (daily rolling restart)")
    p.add_argument("--retention-days", type=float, default=7.0, help="the broker's offsets retention (simulated)")
    p.add_argument("--commit-minutes", type=float, default=10.0, help="a steady group's commit period (simulated)")
    p.add_argument("--week-days", type=int, default=7, help="simulated days between kill -9 and restart")
    p.add_argument("--dead-retention", type=float, default=30.0,
                   help="the monitor's dead_group_retention_seconds (wall)")
    p.add_argument("--memory-bound", type=float, default=1.10,
                   help="RSS: the last full week's max over the reference week's, at most")
    p.add_argument("--flat-bound", type=float, default=1.05,
                   help="checkpoint bytes, series: the last full week's max over the week before's, at most")
    p.add_argument("--bound", type=float, default=1.5,
                   help="state file, state store snapshots: last week's max over the reference week's")
    p.add_argument("--restart-bound", type=float, default=1.10,
                   help="the last restart (kill -9 to /metrics serving) over the first, at most: no slower, "
                        "with room for timing noise")
    p.add_argument("--batches-to-retain", type=int, default=10,
                   help="spark.sql.streaming.minBatchesToRetain (Spark's 100 is a minute of 0.5 s batches live; "
                        "the compressed clock makes a few batches a simulated day)")
    p.add_argument("--deltas-for-snapshot", type=int, default=5,
                   help="spark.sql.streaming.stateStore.minDeltasForSnapshot (Spark's: 10)")
    p.add_argument("--restart-ceiling", type=float, default=60.0,
                   help="the last restart (kill -9 to /metrics serving) within this many s, at most")
    p.add_argument("--max-wall", type=float, default=3600.0,
                   help="stop after the day that ends past this many s (figures of the days done; exit 3)")
    p.add_argument("--day-timeout", type=float, default=900.0, help="s for the monitor to read a day")
    p.add_argument("--out", type=Path, default=None,
                   help="folder of the samples and the monitor (default: a temp folder)")
    p.add_argument("--version", default="4.4.0")
    p.add_argument("--seed", type=int, default=50)
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if args.days < 2 or args.week_days < 1 or args.days < args.week_days:
        p.error("--days must be at least 2 and at least --week-days")
    wall0 = time.monotonic()
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    soak = Soak(args, out)
    print(f"bench/soak: {args.days} days, {args.ephemeral:,} ephemeral groups ({soak.traffic.per_day[0]:,} a day), "
          f"{args.steady} steady groups, offsets retention {args.retention_days:g} days, restart every "
          f"{args.week_days} days; output in {out}", flush=True)
    restart_pending = None
    with KafkaCluster(args.version, brokers=1, workdir=out / "cluster") as cluster:
        for topic, parts in ((LOG_TOPIC, 1), (OFFSETS_TOPIC, 50)):
            create_topic(cluster.admin(), topic, parts, 1, config={"retention.ms": "-1"})
        producer = Producer(cluster.bootstrap)
        soak.monitor = soak.new_monitor(cluster.bootstrap)
        soak.monitor.start(timeout=600, batches=0)
        soak.start_rss()
        try:
            for day in range(args.days + 1):
                if day == args.days and soak.days_done < args.days:
                    break
                t0 = time.monotonic()
                rows = soak.traffic.day(day) if day < args.days else soak.traffic.tail()
                before = dict(producer.sent)
                producer.send(rows)
                produce_s = time.monotonic() - t0
                for s in soak.since_start:
                    soak.since_start[s] += producer.sent[s] - before[s]
                read_s = soak.wait_read(args.day_timeout)
                if restart_pending is not None:
                    restart_pending["watcher"].join(60)
                    restart_pending.pop("watcher")
                    soak.restarts.append(restart_pending)
                    print(f"restart {len(soak.restarts)} (after day {restart_pending['day']}): /metrics in "
                          f"{restart_pending['metrics_s']:.1f} s, the groups' gauges in "
                          f"{restart_pending['groups_s']:.1f} s, first batch committed at "
                          f"{restart_pending['first_batch_s'] or float('nan'):.1f} s", flush=True)
                    restart_pending = None
                if day == args.days:
                    break
                soak.sample(day, time.monotonic() - t0, produce_s, read_s, len(rows))
                soak.days_done = day + 1
                if time.monotonic() - wall0 > args.max_wall and day + 1 < args.days:
                    print(f"bench/soak: stopping after day {day + 1} of {args.days}: past --max-wall "
                          f"{args.max_wall:.0f} s", flush=True)
                    break
                if (day + 1) % args.week_days == 0 and day + 1 < args.days:
                    restart_pending = soak.restart(cluster.bootstrap)
                    restart_pending["day"] = day + 1
            time.sleep(5)
            problems = soak.check()
            soak.live_heap(soak.days_done)
        finally:
            if soak.rss is not None:
                soak.rss.done.set()
            soak.monitor.stop()
    _write_samples(soak, out)
    if problems:
        for problem in problems[:30]:
            print(f"bench/soak: {problem}", file=sys.stderr)
        return 2
    judged = _judge(soak, args)
    lag = [x["lag_series"] for x in soak.samples]
    if lag:
        print(f"lag series (not judged: LAG_SERIES): {min(lag):,} - {max(lag):,}, last {lag[-1]:,}")
    bounded = all(ok for *_, ok in judged)
    verdict = ("true" if bounded else "false") if judged else "unjudged"
    last = _last_line(soak, args, verdict, wall0)
    print(" ".join(last))
    if not bounded:
        return 1
    return 3 if soak.days_done < args.days else 0


if __name__ == "__main__":
    sys.exit(main())
