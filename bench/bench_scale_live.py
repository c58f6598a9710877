"""The live path at many groups (issues 14 and 15): `rebalance-monitor run` on a real Kafka broker
fed in real time, new defaults against the old in one run.

bench/scale_inputs.py generates N copies of the 2.7 capture's sc03 group spread over `--spread`
seconds (one scenario per group per 10 minutes by default). The bench starts a 1-broker Kafka
4.4.0 of the real-Kafka bed and, for each configuration in turn (new defaults: trigger 0.5 s,
lateness 10 s; old: trigger 10 s, lateness 30 s), creates a log topic and a 50-partition offsets
topic, starts the monitor on them (`offsets_topic`), and produces the first `--window` seconds of
the generated traffic at its own pace, every line and record stamped with the wall clock (log
line headers rewritten, record timestamps set). Meanwhile it polls /metrics (only the batch
families) every 0.25 s and records each micro-batch's duration; the CPU seconds of the monitor's
process tree are taken over the window. Before any figure it checks that every group whose
scenario was produced in full has its sc03 rebalances counted on /metrics.

Last line: groups=N new_batch_p50_seconds=… new_batch_max_seconds=… new_cpu_cores=…
old_batch_p50_seconds=… old_cpu_cores=… rows_per_second=…
"""
from __future__ import annotations

import argparse
import base64
import heapq
import json
import re
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from bench.bench_latency import CONFIGS, toml_text
from bench.scale_inputs import LOG4J, expected_per_group, generate, steady_commits
from testbed.bed import KafkaCluster
from testbed.bed.admin import create_topic
from testbed.metrics import parse
from testbed.monitor import REPO, MonitorProcess, MonitorSettings
from testbed.stats import percentile

BATCH_FAMILIES = ("rebalance_monitor_batches_total", "rebalance_monitor_batch_duration_seconds",
                  "rebalance_monitor_watermark_delay_seconds")
HEADER = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] (.*)$")


def load_traffic(inputs: Path, window_s: float) -> tuple[list[tuple[int, str, object]], set[str]]:
    """(ms from the first row, "log"|"offsets", payload) in time order for the first `window_s`,
    and the groups whose rebalances are all inside the window: their "is now empty" line is (the
    Dead transition comes minutes later)."""
    rows: list[tuple[int, str, object]] = []
    for line in (inputs / "broker1-server.log").read_text().splitlines():
        m = HEADER.match(line)
        if m:
            ts = datetime.strptime(m.group(1), LOG4J).replace(tzinfo=timezone.utc)
            rows.append((int(ts.timestamp() * 1000), "log", m.group(2)))
    for line in (inputs / "offsets-topic.jsonl").read_text().splitlines():
        o = json.loads(line)
        rows.append((o["timestamp"], "offsets", o))
    rows.sort(key=lambda r: r[0])
    first = rows[0][0]
    horizon = first + int(window_s * 1000)
    complete = {m.group(1) for ts, kind, payload in rows if kind == "log" and ts <= horizon
                for m in [re.search(r"Group (g\d{6}-heartbeat-expiry) with generation \d+ is now empty",
                                    str(payload))] if m}
    return [(ts - first, kind, p) for ts, kind, p in rows if ts <= horizon], complete


def produce_offsets_record(producer, topic: str, record: dict, timestamp: int) -> None:
    """One record of an offsets-topic.jsonl dump (bench/scale_inputs.py) onto its partition,
    waiting for room when the producer's queue is full."""
    if "key" in record:             # decoded already (scale_inputs.steady_commits)
        key, value = record["key"], record["value"]
    else:
        key = base64.b64decode(record["key_b64"])
        value = None if record["value_b64"] is None else base64.b64decode(record["value_b64"])
    while True:
        try:
            producer.produce(topic, value, key=key, partition=record["partition"], timestamp=timestamp)
            return
        except BufferError:
            producer.poll(0.1)


def produce_paced(bootstrap: str, log_topic: str, offsets_topic: str, traffic, start_ms: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "1",
                         "queue.buffering.max.messages": 1_000_000})
    for rel_ms, kind, payload in traffic:
        due = start_ms + rel_ms
        wait = due / 1000.0 - time.time()
        if wait > 0:
            time.sleep(wait)
        if kind == "log":
            stamp = datetime.fromtimestamp(due / 1000.0, tz=timezone.utc).strftime(LOG4J)[:-3]
            producer.produce(log_topic, f"[{stamp}] {payload}".encode(), timestamp=due)
        else:
            produce_offsets_record(producer, offsets_topic, payload, due)
        producer.poll(0)
    producer.flush(60)


class BatchPoller(threading.Thread):
    """Each micro-batch's duration, from /metrics limited to the batch families; `seen`: (monotonic
    time, rebalance_monitor_batches_total) at each poll that saw the count change, the first poll's
    included (its duration is not recorded: the batch may be from before the poller), so that
    `durations[k]` and `delays[k]` are those of `seen[k + 1]`. Two batches ending within one poll
    interval show as one duration (the later); the counts tell how many batches there were."""

    def __init__(self, monitor: MonitorProcess, interval_s: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.monitor, self.interval_s = monitor, interval_s
        self.durations: list[float] = []
        self.delays: list[float] = []
        self.seen: list[tuple[float, float]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        last = None
        while not self._halt.wait(self.interval_s):
            try:
                page = self.monitor.scrape(*BATCH_FAMILIES, timeout=10)
            except OSError:
                continue
            values = parse(page)
            batches = values.value("rebalance_monitor_batches_total")
            if batches is not None and batches != last and last is not None:
                self.durations.append(_or_nan(values.value("rebalance_monitor_batch_duration_seconds")))
                self.delays.append(_or_nan(values.value("rebalance_monitor_watermark_delay_seconds")))
            if batches is not None and batches != last and (last is not None or not self.seen):
                self.seen.append((time.monotonic(), batches))
            last = batches

    def between(self, start: float, end: float) -> dict:
        """The batches that ended (were first seen) from monotonic `start` to `end`: their sampled
        durations and watermark delays, the batches counted in that time (batches_total at the last
        poll up to `end` minus at the last before `start`: at least the durations), and the
        durations sampled before `start` (excluded)."""
        inside = [k for k, (t, _) in enumerate(self.seen[1:]) if start <= t <= end]
        before = [count for t, count in self.seen if t < start]
        counted = 0.0
        if inside:
            counted = self.seen[inside[-1] + 1][1] - (before[-1] if before else self.seen[0][1])
        return {"batches": [self.durations[k] for k in inside], "delays": [self.delays[k] for k in inside],
                "counted": int(counted), "excluded": sum(1 for t, _ in self.seen[1:] if t < start)}

    def stop(self) -> None:
        self._halt.set()
        self.join(15)


def _or_nan(value: float | None) -> float:
    return float("nan") if value is None else value


def counted_rebalances(monitor: MonitorProcess, groups: set[str]) -> int:
    page = parse(monitor.scrape("rebalance_monitor_rebalances_total", timeout=60))
    return sum(int(value) for labels, value in page.series("rebalance_monitor_rebalances_total")
               if labels.get("group") in groups)


# The stateful step's work over a run (sinks/health.py): calls, state-machine turns, commit folds.
WORK_FAMILIES = {"calls": "rebalance_monitor_stateful_calls_total", "turns": "rebalance_monitor_group_turns_total",
                 "folds": "rebalance_monitor_commit_folds_total"}


def run_config(name: str, cluster: KafkaCluster, work: Path, traffic, complete: set[str], final_wait: float,
               groups: int, root: Path | None = None, label: str = "", rss=None, source: str = "python",
               extra_toml: str = "", submit=None, cpu_also=None, warm_up: float | None = None,
               count_series: str | None = None) -> dict:
    """`run` of `root` (default: this tree) at configuration `name` on the traffic (an iterable of
    (ms from the start, "log"|"offsets", payload) in time order, iterated once), produced in real
    time; `label` tells runs apart (topics, work folder); `rss(pid)` -> a started sampler with a
    `peak` dict and a `done` event (bench_scale.PeakRss), for the peak memory per component;
    `submit`, `cpu_also`: MonitorProcess's (a run submitted to a Spark cluster).

    With `warm_up` (seconds from the traffic's start), the figures are of the window from then to
    the end of the traffic's producing only: CPU and wall, the durations and watermark delays of
    the batches that ended in it, the peak RSS (the sampler starts then); "counted" is the batches
    of the window by the batch counter, "excluded" the durations of the warm-up left out.
    `count_series`: a sample name whose series on the last /metrics are counted ("series")."""
    trigger, lateness = CONFIGS[name]
    run = f"{name}{label}"
    log_topic, offsets_topic = f"scale-logs-{run}", f"scale-offsets-{run}"
    create_topic(cluster.admin(), log_topic, 1, 1)
    create_topic(cluster.admin(), offsets_topic, 50, 1)
    # Every group with its own series (max_groups above the group count), so that each one's
    # rebalances can be checked; at the default 10,000 the rest are folded into "__other__".
    monitor = MonitorProcess(cluster.bootstrap, log_topic, work / run,
                             MonitorSettings.defaults(trigger_s=trigger, lateness_s=lateness),
                             offsets_topic=offsets_topic, cluster="scale",
                             top_toml=f"max_groups = {groups + 1}\n", source=source, extra_toml=extra_toml,
                             submit=submit, cpu_also=cpu_also,
                             root=root or REPO).start()
    poller = BatchPoller(monitor)
    samplers: list = []
    marks: dict[str, float] = {}
    timer = None

    def mark() -> None:
        marks.update(cpu=monitor.cpu_seconds(), t=time.monotonic())
        if rss is not None and monitor.proc is not None:
            samplers.append(rss(monitor.proc.pid))
    try:
        monitor.wait_batches(2)
        poller.start()
        if warm_up is None:
            mark()
        else:       # producing starts in 0.5 s (produce_paced's start_ms below)
            timer = threading.Timer(0.5 + warm_up, mark)
            timer.start()
        produce_paced(cluster.bootstrap, log_topic, offsets_topic, traffic, int(time.time() * 1000) + 500)
        end = time.monotonic()
        if timer is not None:
            timer.join(5)
            if not marks:
                raise SystemExit(f"bench: {run}: the traffic ended before the {warm_up:g} s warm-up did")
        cpu, wall = monitor.cpu_seconds() - marks["cpu"], end - marks["t"]
        expected = len(expected_per_group()["rebalances"]) * len(complete)
        deadline = time.monotonic() + final_wait
        found = counted_rebalances(monitor, complete)
        while found < expected and time.monotonic() < deadline:
            monitor.alive()
            time.sleep(2.0)
            found = counted_rebalances(monitor, complete)
        series = None if count_series is None else sum(
            1 for line in monitor.scrape(count_series).splitlines() if line.startswith(count_series + "{"))
        work_page = parse(monitor.scrape(*WORK_FAMILIES.values(), timeout=60))
        work_done = {key: work_page.total(family) for key, family in WORK_FAMILIES.items()}
    finally:
        if timer is not None:
            timer.cancel()
        poller.stop()
        for sampler in samplers:
            sampler.done.set()
        monitor.stop()
    figures = {"batches": poller.durations, "delays": poller.delays}
    if warm_up is not None:
        figures = poller.between(marks["t"], end)
    return {"cpu": cpu, "wall": wall, **figures, "found": found, "expected": expected, "series": series, **work_done,
            "trigger": trigger,
            "lateness": lateness, "rss": samplers[0].peak if samplers else None}


def cold_start(cluster: KafkaCluster, work: Path, records: int, seed: int, monitor_toml: str = "",
               partitions: int | None = None) -> dict:
    """`records` offsets records already in a 50-partition topic (the generated groups' records,
    times shifted to end now); the monitor starts on it at the new defaults. Returns the seconds
    from starting the process to the batch that read them all (into state) and to the batch that
    applied them, the groups of the input and the state rows (state buckets) that hold them."""
    from confluent_kafka import Producer
    inputs = work / "cold-inputs"
    per_group = 43                              # sc03's records (scale_inputs)
    groups = -(-records // per_group)
    generate(groups, inputs, seed=seed)
    rows = [json.loads(line) for line in (inputs / "offsets-topic.jsonl").read_text().splitlines()[:records]]
    shift = int(time.time() * 1000) - rows[-1]["timestamp"]
    create_topic(cluster.admin(), "cold-logs", 1, 1)
    create_topic(cluster.admin(), "cold-offsets", 50, 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 50, "acks": "1",
                         "queue.buffering.max.messages": 1_000_000})
    t = time.monotonic()
    for o in rows:
        produce_offsets_record(producer, "cold-offsets", o, o["timestamp"] + shift)
        producer.poll(0)
    producer.flush(120)
    print(f"cold start: {len(rows):,} records produced in {time.monotonic() - t:.1f} s", flush=True)
    monitor = MonitorProcess(cluster.bootstrap, "cold-logs", work / "cold", MonitorSettings.defaults(),
                             offsets_topic="cold-offsets", cluster="scale", extra_toml=monitor_toml,
                             top_toml="" if partitions is None else f"shuffle_partitions = {partitions}\n")
    t0 = time.monotonic()
    monitor.start(batches=0)      # its first batch reads the records: timed below
    try:
        read = 0.0
        deadline = t0 + 600
        while read < len(rows):
            monitor.alive()
            if time.monotonic() > deadline:
                raise AssertionError(f"cold start: {read:.0f} of {len(rows)} records applied after 600 s")
            time.sleep(0.25)
            page = parse(monitor.scrape("rebalance_monitor_input_records_total", timeout=30))
            read = page.value("rebalance_monitor_input_records_total", source="offsets") or 0.0
        seconds = time.monotonic() - t0
        page = parse(monitor.scrape("rebalance_monitor_state_rows", "rebalance_monitor_groups",
                                    "rebalance_monitor_batches_total", timeout=60))
        state_rows = page.value("rebalance_monitor_state_rows")
        live = page.total("rebalance_monitor_groups")
        # The batch that read the records holds them (the watermark is that of the batch before);
        # the next one, which Spark runs as soon as the watermark moved, applies them.
        read_batches = page.value("rebalance_monitor_batches_total") or 0.0
        monitor.wait_batches(read_batches + 1, timeout=deadline - time.monotonic(), poll_s=0.25)
        applied = time.monotonic() - t0
        cpu = monitor.cpu_seconds()
    finally:
        monitor.stop()
    return {"records": len(rows), "seconds": seconds, "applied": applied, "groups": groups, "live_groups": live,
            "state_rows": float("nan") if state_rows is None else state_rows, "cpu": cpu}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/scale-live", description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=10000)
    p.add_argument("--spread", type=float, default=600.0, help="seconds over which the groups' scenarios start")
    p.add_argument("--window", type=float, default=150.0, help="seconds of that traffic produced per configuration")
    p.add_argument("--configs", default="new,old")
    p.add_argument("--final-wait", type=float, default=180.0)
    p.add_argument("--version", default="4.4.0")
    p.add_argument("--seed", type=int, default=15)
    p.add_argument("--commit-every", type=float, default=0.0, metavar="S",
                   help="the steady state: every group also commits an offset every S seconds (auto-commit's 5)")
    p.add_argument("--commit-partitions", type=int, default=1, metavar="N",
                   help="with --commit-every: each commit covers N partitions (N records), as a consumer of N")
    p.add_argument("--cold-start-records", type=int, default=0,
                   help="instead: time `run` rebuilding its state from this many offsets records")
    p.add_argument("--cold-start-partitions", type=int, default=None, metavar="N",
                   help="cold start: the new checkpoint's state partitions (shuffle_partitions)")
    p.add_argument("--monitor-toml", default="", type=toml_text,
                   help="cold start: more monitor TOML, e.g. a [spark_conf] table for an event log (\\n = newline)")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-scale-live-"))
    if args.cold_start_records:
        with KafkaCluster(args.version, brokers=1, workdir=work / "cluster") as cluster:
            r = cold_start(cluster, work, args.cold_start_records, args.seed, args.monitor_toml,
                           args.cold_start_partitions)
        print(f"cold start: {r['records']:,} offsets records in state {r['seconds']:.1f} s after the monitor "
              f"started (JVM start included; the {r['groups']:,} groups' records held in {r['state_rows']:.0f} state "
              f"rows, {r['live_groups']:.0f} groups not Dead in their live view on /metrics); applied by the next "
              f"batch at {r['applied']:.1f} s; CPU {r['cpu']:.1f} s")
        print(f"cold_start_records={r['records']} state_partitions={args.cold_start_partitions or 'default'} "
              f"cold_start_seconds={r['seconds']:.1f} "
              f"applied_seconds={r['applied']:.1f} groups={r['groups']:.0f} cpu_seconds={r['cpu']:.1f}")
        return 0
    inputs = work / "inputs"
    generate(args.groups, inputs, seed=args.seed, spread_seconds=args.spread)
    traffic, complete = load_traffic(inputs, args.window)
    if args.commit_every:
        commits = [(ms, "offsets", record) for ms, record in steady_commits(
            args.groups, args.window, args.commit_every, args.seed, args.commit_partitions)]
        print(f"steady state: {len(commits):,} more offset commit records, {args.commit_partitions} per group every "
              f"{args.commit_every:g} s", flush=True)
        traffic = list(heapq.merge(traffic, commits, key=lambda r: r[0]))
    rows = len(traffic)
    if not complete:
        print(f"bench/scale-live: no group's rebalances fall within the first {args.window:.0f} s; "
              "raise --window", file=sys.stderr)
        return 2
    print(f"groups={args.groups}: {rows} rows in the first {args.window:.0f} s ({rows / args.window:,.0f} rows/s), "
          f"{len(complete)} groups complete in it", flush=True)
    cluster = KafkaCluster(args.version, brokers=1, workdir=work / "cluster")
    results = {}
    try:
        cluster.start()
        for name in args.configs.split(","):
            r = results[name] = run_config(name, cluster, work, traffic, complete, args.final_wait, args.groups)
            if r["found"] < r["expected"]:
                print(f"bench/scale-live: {name}: {r['found']} of {r['expected']} rebalances of the complete "
                      f"groups counted within {args.final_wait:.0f} s", file=sys.stderr)
                return 1
            b = r["batches"]
            print(f"{name}: trigger {r['trigger'] or 'default'} s, lateness {r['lateness'] or 'default'} s: all "
                  f"{r['expected']} rebalances of the {len(complete)} complete groups counted; {len(b)} batches, "
                  f"batch time p50 {percentile(b, 0.5):.2f} s p95 {percentile(b, 0.95):.2f} s max {max(b):.2f} s; "
                  f"watermark delay p50 {percentile(r['delays'], 0.5):.1f} s; CPU {r['cpu']:.1f} s in "
                  f"{r['wall']:.0f} s = {r['cpu'] / r['wall']:.2f} cores", flush=True)
    finally:
        cluster.close()
    last = [f"groups={args.groups}", f"rows_per_second={rows / args.window:.0f}",
            f"commit_every_seconds={args.commit_every:g}"]
    for name, r in results.items():
        last += [f"{name}_batch_p50_seconds={percentile(r['batches'], 0.5):.2f}",
                 f"{name}_batch_max_seconds={max(r['batches']):.2f}",
                 f"{name}_cpu_cores={r['cpu'] / r['wall']:.2f}"]
    print(" ".join(last))
    return 0


if __name__ == "__main__":
    sys.exit(main())
