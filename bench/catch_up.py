"""bench/cost's catch-up (issue 51, `bench/cost --only catch_up`): a monitor starting on a backlog.

A 1-broker Kafka of the real-Kafka bed holds a 50-partition offsets topic pre-filled with
`--catch-up-records` records of `--catch-up-groups` groups (bench/scale_inputs.catch_up_backlog:
each group's sc03 records plus auto-commits of 10 partitions, over `--catch-up-span` seconds that
end when producing starts), produced with big batches before any monitor starts (its time is
reported, not counted). Then, for each tree and each live source of `--catch-up-sources`
(`kafka.source` "python": kafka-python; "spark": Spark's connector), `run` at its defaults starts
on the topic and an empty log topic with a fresh checkpoint, and is timed from its process's
start (JVM start included) until
  - every record is read: rebalance_monitor_input_records_total (all sources: the log topic is
    empty) reaches the records in the topic, and
  - every record is applied: every group's rebalances are counted on /metrics
    (rebalance_monitor_rebalances_total, each group its own series). The offsets records alone
    carry sc03's three generations; every scenario ends a minute before the backlog, so the
    watermark of the last records passes it.
Both are checked before any time is reported; a run that does not get there within
`--catch-up-timeout` seconds of its start stops the bench with what it reached. rows/s is the
records over the seconds to the second. Beside it: the micro-batches of the run from its
checkpoint (when each was planned and committed, the records it read), CPU seconds of the
monitor's process tree, peak RSS of the driver, the JVM and the Python workers, and the JVM's peak
heap in use (its perf data, as jstat reads it; bench_scale.jvm_heap_mb).

The read ceiling (this tree's session code): bench/catch_up_ceiling.py, Spark's connector reading
and counting the same records with no decode and no state, timed the same way; its count must be
the records in the topic.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.bench_scale import PeakRss
from bench.scale_inputs import PARTITIONS, catch_up_backlog, expected_per_group, group_name
from testbed.bed import BedError, BedTimeout, KafkaCluster
from testbed.bed.admin import create_topic
from testbed.metrics import parse
from testbed.monitor import MonitorProcess, MonitorSettings

TOPIC, LOG_TOPIC = "catch-up-offsets", "catch-up-logs"
POLL_S = 0.25
WATCHED = ("rebalance_monitor_input_records_total", "rebalance_monitor_batches_total")


def produce_backlog(bootstrap: str, groups: int, records: int, seed: int, span_s: float) -> float:
    """catch_up_backlog into TOPIC with big batches; the seconds it took. Stops the bench unless the
    topic then holds exactly `records` records."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 100,
                         "batch.size": 900_000, "batch.num.messages": 100_000, "compression.type": "none",
                         "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 1_048_576})
    started = time.monotonic()
    for partition, rows in catch_up_backlog(groups, records, int(time.time() * 1000), seed, span_s):
        for ts, key, value in rows:
            while True:
                try:
                    producer.produce(TOPIC, value, key=key, partition=partition, timestamp=ts)
                    break
                except BufferError:     # the queue is full: let deliveries make room
                    producer.poll(0.05)
        producer.poll(0)
    if producer.flush(300):
        raise SystemExit(f"bench/cost: catch-up: records still unsent 300 s after producing {records:,}")
    seconds = time.monotonic() - started
    held = topic_records(bootstrap)
    if held != records:
        raise SystemExit(f"bench/cost: catch-up: the topic holds {held:,} records, not the {records:,} produced")
    return seconds


def topic_records(bootstrap: str) -> int:
    """Records in TOPIC: the sum of its partitions' high minus low watermarks."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "catch-up-bench-count"})
    try:
        return sum(high - low for low, high in (consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
                                                for p in range(PARTITIONS)))
    finally:
        consumer.close()


def run_monitor(cluster: KafkaCluster, tree: Path, label: str, options: dict, records: int, groups: int,
                timeout: float, work: Path) -> dict:
    """`run` of `tree` at its defaults with `options` (bench_cost.source_options) on the backlog:
    seconds from its start to every record read and to every rebalance counted, checked; its
    micro-batches (checkpoint_trace)."""
    monitor = MonitorProcess(cluster.bootstrap, LOG_TOPIC, work / f"catch-up-{label.replace(' ', '-')}",
                             MonitorSettings.defaults(), offsets_topic=TOPIC, cluster="catch-up",
                             top_toml=f"max_groups = {groups + 1}\n", root=tree, **options)
    started, wall = time.monotonic(), time.time()
    deadline = started + timeout
    monitor.launch()
    assert monitor.proc is not None
    sampler = PeakRss(monitor.proc.pid)
    sampler.start()
    try:
        monitor.wait_ready(timeout, batches=0)
        up = time.monotonic() - started
        read = _until_read(monitor, records, started, deadline, label)
        expected = len(expected_per_group()["rebalances"]) * groups
        counted = _until_counted(monitor, {group_name(i) for i in range(groups)}, expected, started, deadline, label)
        cpu = monitor.cpu_seconds()
    except (BedError, BedTimeout) as exc:
        raise SystemExit(f"bench/cost: catch-up {label}: {exc}") from None
    finally:
        sampler.done.set()
        monitor.stop()
    return {"up": up, "read": read, "seconds": counted, "batches": checkpoint_trace(monitor.checkpoint, wall),
            "cpu": cpu, "rss": sampler.peak, "expected": expected}


def _poll(monitor: MonitorProcess) -> tuple[float, float] | None:
    """(micro-batches, input rows of all sources) on /metrics; None when a busy driver did not answer."""
    try:
        page = parse(monitor.scrape(*WATCHED, timeout=30))
    except OSError:
        return None
    return page.value("rebalance_monitor_batches_total") or 0.0, page.total("rebalance_monitor_input_records_total")


def _until_read(monitor: MonitorProcess, records: int, started: float, deadline: float, label: str) -> float:
    """Seconds from the start until /metrics shows `records` input rows read. More rows than the
    topic holds stop the bench: something was read twice."""
    read = 0.0
    while True:
        monitor.alive()
        polled = _poll(monitor)
        if polled is not None:
            read = polled[1]
            if read > records:
                raise SystemExit(f"bench/cost: catch-up {label}: {read:,.0f} input rows counted, the topic "
                                 f"holds {records:,}")
            if read == records:
                return time.monotonic() - started
        if time.monotonic() > deadline:
            raise SystemExit(f"bench/cost: catch-up {label}: {read:,.0f} of {records:,} records read after "
                             f"{deadline - started:.0f} s (--catch-up-timeout); log: {monitor.log_path}")
        time.sleep(POLL_S)


def _until_counted(monitor: MonitorProcess, groups: set[str], expected: int, started: float, deadline: float,
                   label: str) -> float:
    """Seconds from the start until /metrics counts every group's rebalances, looked at on the read
    and then at each new micro-batch (a scrape of every group's series is too heavy for every poll)."""
    from bench.bench_scale_live import counted_rebalances
    seen = monitor.batches()
    at = time.monotonic() - started
    found = counted_rebalances(monitor, groups)
    while found < expected:
        if time.monotonic() > deadline:
            raise SystemExit(f"bench/cost: catch-up {label}: all records read, {found:,} of {expected:,} "
                             f"rebalances counted after {deadline - started:.0f} s (--catch-up-timeout); "
                             f"log: {monitor.log_path}")
        monitor.alive()
        time.sleep(POLL_S)
        polled = _poll(monitor)
        if polled is not None and polled[0] > seen:
            at, seen = time.monotonic() - started, int(polled[0])
            found = counted_rebalances(monitor, groups)
    return at


def checkpoint_trace(checkpoint: Path, started_wall: float) -> list[tuple[int, float, float, int]]:
    """The query's micro-batches from its checkpoint: (batch id, seconds from the start when it was
    planned (its offsets file written) and committed (its commits file), TOPIC's records in it)."""
    import json
    out = []
    before = 0
    for planned in sorted((checkpoint / "query" / "offsets").glob("[0-9]*"), key=lambda f: int(f.name)):
        done = checkpoint / "query" / "commits" / planned.name
        total = sum(_topic_offsets(json.loads(line)) for line in planned.read_text().splitlines()[2:]
                    if line.strip() not in ("", "-"))
        out.append((int(planned.name), planned.stat().st_mtime - started_wall,
                    done.stat().st_mtime - started_wall if done.exists() else float("nan"), total - before))
        before = total
    return out


def _topic_offsets(offset) -> int:
    """The summed next offsets of TOPIC's partitions in a source's offset (the connector's
    {topic: {partition: offset}}, kafka-python's {"topics": {topic: {...}}}), 0 for other sources."""
    if not isinstance(offset, dict):
        return 0
    if isinstance(offset.get(TOPIC), dict):
        return sum(int(v) for v in offset[TOPIC].values())
    return sum(_topic_offsets(v) for v in offset.values())


def ceiling(cluster: KafkaCluster, jars: str, records: int, timeout: float, work: Path) -> dict:
    """bench/catch_up_ceiling.py of this tree on the topic: seconds from its start to its exit,
    its count checked."""
    from bench.bench_scale import ROOT
    log = work / "catch-up-ceiling.log"
    env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "bench.catch_up_ceiling", cluster.bootstrap, TOPIC, jars],
                                cwd=ROOT, env={**_env(), **env}, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        sampler = PeakRss(proc.pid)
        sampler.start()
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise SystemExit(f"bench/cost: catch-up ceiling: not done after {timeout:.0f} s; log: {log}") from None
        finally:
            sampler.done.set()
    seconds = time.monotonic() - started
    text = log.read_text(errors="replace")
    counted = [line for line in text.splitlines() if line.startswith("catch-up ceiling: ")]
    if code != 0 or not counted or int(counted[-1].split()[2]) != records:
        raise SystemExit(f"bench/cost: catch-up ceiling: exit {code}, {counted[-1] if counted else 'no count'} "
                         f"(the topic holds {records:,}); log: {log}")
    return {"seconds": seconds, "rss": sampler.peak}


def _env() -> dict[str, str]:
    import os
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "PYTHONPATH"))}


def _line(label: str, records: int, r: dict, mb) -> str:
    trace = r["batches"]
    shown = "; ".join(f"{b}: {planned:.1f}-{done:.1f} s, {n:,}" for b, planned, done, n in trace[:6])
    more = f"; +{len(trace) - 6} more" if len(trace) > 6 else ""
    return (f"  {label}: {records:,} records read {r['read']:.1f} s after the start, all {r['expected']:,} "
            f"rebalances counted at {r['seconds']:.1f} s: {records / r['seconds']:,.0f} rows/s; /metrics up at "
            f"{r['up']:.1f} s; {len(trace)} batches (id: planned-committed, records) {shown}{more}; CPU "
            f"{r['cpu']:.0f} s ({r['cpu'] / r['seconds']:.2f} cores); peak {mb(r['rss'])}")


def catch_up(trees: dict[str, Path], args, work: Path) -> dict[str, dict[str, float]]:
    """The catch-up of every tree and source, and the read ceiling: {"head": figures, "base":
    figures} (bench_cost's last-line names without the base_ prefix)."""
    from bench.bench_cost import _mb as mb
    from bench.bench_cost import connector_jars, source_options
    n, groups = args.catch_up_records, args.catch_up_groups
    sources = args.catch_up_sources
    out: dict[str, dict[str, float]] = {name: {} for name in trees}
    with KafkaCluster(args.version, brokers=1, workdir=work / "catch-up-cluster") as cluster:
        create_topic(cluster.admin(), LOG_TOPIC, 1, 1)
        create_topic(cluster.admin(), TOPIC, PARTITIONS, 1)
        produced = produce_backlog(cluster.bootstrap, groups, n, args.seed, args.catch_up_span)
        print(f"catch-up: {n:,} records of {groups:,} groups over {args.catch_up_span:.0f} s produced in "
              f"{produced:.1f} s ({n / produced:,.0f} records/s; not counted)", flush=True)
        for name, tree in trees.items():
            for source in sources:
                r = run_monitor(cluster, tree, f"{name} {source}", source_options(source), n, groups,
                                args.catch_up_timeout, work)
                print(_line(f"{name} {source}", n, r, mb), flush=True)
                out[name][f"catch_up_{source}_rows_per_second"] = n / r["seconds"]
                if name == "head":
                    out[name]["catch_up_peak_heap_mb"] = max(out[name].get("catch_up_peak_heap_mb", 0.0),
                                                             r["rss"]["heap"])
            out[name]["catch_up_rows_per_second"] = max(out[name][f"catch_up_{s}_rows_per_second"] for s in sources)
        if "head" in trees:
            c = ceiling(cluster, connector_jars(), n, args.catch_up_timeout, work)
            print(f"  read ceiling (Spark's connector, count only): {c['seconds']:.1f} s from the start, "
                  f"{n / c['seconds']:,.0f} rows/s; peak {mb(c['rss'])}", flush=True)
            out["head"]["catch_up_ceiling_rows_per_second"] = n / c["seconds"]
    # The broker's copy of the topic (about 400 MB at 5M records); kept when a run failed (SystemExit).
    shutil.rmtree(work / "catch-up-cluster", ignore_errors=True)
    return out
