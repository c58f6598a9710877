"""Faults under real traffic, and the reference they are compared with.

Faults (each while a scenario runs, the monitor reading):
- `kill_monitor`: kill -9 of the monitor (driver, Python workers, Spark JVM) right after Spark
  planned a micro-batch and before it committed it, then a restart from its checkpoint;
- `restart_broker`: a broker that does not coordinate the running scenario's group is stopped
  (SIGTERM) and started again: it leads half of __consumer_offsets and one log topic partition;
- `move_log_leaders`: every partition of the log topic gets its replica list reversed
  (AlterPartitionReassignments) and a preferred leader election, so its leader moves to the
  other broker while the shipper produces and the monitor reads.

Reference: after the run the log topic (one file per partition, the lines in offset order) and
__consumer_offsets (the JSONL dump `replay` reads) are dumped, and `rebalance-monitor replay`
runs over them with the same cluster label and diagnosis settings: the monitor that went
through the faults must have exactly the replay's final records (nothing lost, nothing counted
twice) and the same counters on /metrics."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from testbed.bed.procs import BedError, wait_for
from testbed.metrics import Samples, parse
from testbed.monitor import REPO, MonitorProcess, MonitorSettings, monitor_command, now_ms

# Fields that name where a record came from: a topic partition and offset live, a file and
# line number in the replay. Everything else must be equal.
SOURCE_FIELDS = ("source_id", "seq")
COMPARED = ("rebalances", "member_removals", "anomalies")


# ---------------------------------------------------------------------------- faults
def kill_monitor(monitor: MonitorProcess, timeout: float = 120.0) -> dict:
    """kill -9 between planning and committing a batch; restart from the checkpoint."""
    planned = monitor.planned_batches()
    wait_for(lambda: monitor.planned_batches() - planned, timeout, "the monitor to plan a new batch",
             interval=0.02, alive=monitor.alive)
    t = now_ms()
    monitor.kill9()
    uncommitted = sorted(monitor.planned_batches() - monitor.committed_batches())
    t0 = time.monotonic()
    monitor.start()
    return {"fault": "kill_monitor", "ts_ms": t, "uncommitted_batches": uncommitted,
            "restart_s": round(time.monotonic() - t0, 1)}


def restart_broker(cluster, avoid_group: str | None = None) -> dict:
    """Stops and starts a broker that does not coordinate `avoid_group`."""
    coord = cluster.coordinator_of(avoid_group) if avoid_group else None
    bid = next(b for b in sorted(cluster.brokers) if b != coord)
    t = now_ms()
    stop_s = cluster.stop_broker(bid)
    t1 = time.monotonic()
    cluster.start_broker(bid)
    return {"fault": "restart_broker", "ts_ms": t, "broker": bid, "stop_s": round(stop_s, 1),
            "start_s": round(time.monotonic() - t1, 1)}


def _leaders(bootstrap: str, topic: str) -> dict:
    """partition -> (leader, replicas), from a fresh metadata request."""
    from testbed.bed.admin import make_admin
    md = make_admin(bootstrap).list_topics(topic=topic, timeout=10).topics[topic]
    return {p: (pm.leader, list(pm.replicas)) for p, pm in md.partitions.items()}


def move_log_leaders(cluster, topic: str, timeout: float = 60.0) -> dict:
    """Reverse each partition's replica list and elect the preferred leader."""
    from kafka import KafkaAdminClient, TopicPartition
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, client_id="kafkabed-leader-move")
    try:
        before = _leaders(cluster.bootstrap, topic)
        t = now_ms()
        errors = admin.alter_partition_reassignments(
            {TopicPartition(topic, p): list(reversed(replicas)) for p, (_, replicas) in before.items()})
        bad = {str(tp): err for tp, err in (errors or {}).items() if err is not None}
        if bad:
            raise BedError(f"partition reassignment of {topic} refused: {bad}")
        wait_for(lambda: not admin.list_partition_reassignments([TopicPartition(topic, p) for p in before]),
                 timeout, f"the reassignment of {topic} to finish", interval=0.5)
        admin.elect_leaders(0, {topic: sorted(before)}, raise_errors=False)

        def moved():
            now = _leaders(cluster.bootstrap, topic)
            return now if all(now[p][0] != before[p][0] for p in before) else None
        after = wait_for(moved, timeout, f"new leaders of {topic}", interval=0.5)
    finally:
        admin.close()
    return {"fault": "move_log_leaders", "ts_ms": t,
            "leaders": {p: [before[p][0], after[p][0]] for p in before}}


# ---------------------------------------------------------------------------- reference
def dump_log_topic(bootstrap: str, topic: str, out_dir: Path, timeout: float = 60.0) -> list[Path]:
    """One file per partition with the records' values (log lines) in offset order."""
    records = _read_all(bootstrap, topic, timeout)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for p in sorted({r[0] for r in records} or {0}):
        path = out_dir / f"{topic}-{p}.log"
        lines = [r[4] for r in sorted(r for r in records if r[0] == p)]
        path.write_bytes(b"".join((v or b"") + b"\n" for v in lines))
        paths.append(path)
    return paths


def dump_offsets(bootstrap: str, path: Path, timeout: float = 60.0) -> int:
    """__consumer_offsets as the JSONL dump `replay --offsets` reads."""
    records = _read_all(bootstrap, "__consumer_offsets", timeout)
    with open(path, "w") as handle:
        for p, off, ts, key, value in sorted(records):
            handle.write(json.dumps({"partition": p, "offset": off, "timestamp": ts,
                                     "key_b64": base64.b64encode(key or b"").decode(),
                                     "value_b64": None if value is None else base64.b64encode(value).decode()})
                         + "\n")
    return len(records)


def _read_all(bootstrap: str, topic: str, timeout: float) -> list[tuple]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkabed-dump", "enable.auto.commit": False,
                  "log_level": 2, "isolation.level": "read_uncommitted"})
    out: list[tuple] = []
    try:
        md = c.list_topics(topic, timeout=10).topics[topic]
        ends = {}
        for p in md.partitions:
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if hi > lo:
                ends[p] = hi
        c.assign([TopicPartition(topic, p, 0) for p in ends])
        done: set = set()

        def read():
            for msg in c.consume(1000, 0.5):
                if msg.error() is not None:
                    continue
                offset = msg.offset()
                assert offset is not None, "a consumed message without an error has its offset"
                out.append((msg.partition(), offset, msg.timestamp()[1], msg.key(), msg.value()))
                if offset + 1 >= ends[msg.partition()]:
                    done.add(msg.partition())
            return len(done) == len(ends)
        if ends:
            wait_for(read, timeout, f"{topic} to be read to its end", interval=0)
    finally:
        c.close()
    return out


def replay_reference(settings: MonitorSettings, log_files: list[Path], offsets_dump: Path, out: Path,
                     cluster_label: str, timeout: float = 900.0) -> Path:
    """`rebalance-monitor replay` over the dumps, with the monitor's diagnosis settings."""
    out.mkdir(parents=True, exist_ok=True)
    config = out.parent / "replay.toml"
    diag = {**({} if settings.host_wide_min_removals is None else
               {"host_wide_min_removals": settings.host_wide_min_removals}), **settings.diagnosis}
    lateness = "" if settings.lateness_s is None else f"lateness_seconds = {settings.lateness_s}\n"
    config.write_text(f"{lateness}\n[diagnosis]\n" + "".join(f"{k} = {v}\n" for k, v in diag.items()))
    cmd = [*monitor_command(), "replay", "--config", str(config), "--broker-log", *map(str, log_files),
           "--offsets", str(offsets_dump), "--out", str(out), "--cluster", cluster_label]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise BedError(f"the reference replay failed ({proc.returncode}): {proc.stderr[-1500:]}")
    (out / "replay.stderr").write_text(proc.stderr)
    return out


def _key(rec: dict) -> str:
    return json.dumps({k: v for k, v in rec.items() if k not in SOURCE_FIELDS}, sort_keys=True)


def compare(monitor: MonitorProcess, ref: Path, groups: set | None = None) -> dict:
    """Differences between the monitor's final records and the replay's, per kind; the replay's
    `in_progress` rebalances (its input ended) are not compared."""
    diff = {}
    for kind in COMPARED:
        live = [r for r in monitor.records(kind) if groups is None or r.get("group") in groups]
        ref_recs = [json.loads(ln) for ln in (ref / f"{kind}.jsonl").read_text().splitlines() if ln.strip()]
        ref_recs = [r for r in ref_recs if (groups is None or r.get("group") in groups)
                    and r.get("outcome") != "in_progress"]
        a, b = Counter(map(_key, live)), Counter(map(_key, ref_recs))
        missing, extra = list((b - a).elements()), list((a - b).elements())
        diff[kind] = {"live": len(live), "reference": len(ref_recs), "missing": missing, "extra": extra}
    return diff


def metric_counts(samples: Samples, groups: set | None = None) -> dict:
    """(metric, labels without cluster) -> value for the per-group counters and histogram counts."""
    names = ("rebalance_monitor_rebalances_total", "rebalance_monitor_member_removals_total",
             "rebalance_monitor_rebalance_duration_seconds_count")
    out = {}
    for (name, labels), value in samples.items():
        d = dict(labels)
        if name in names and (groups is None or d.get("group") in groups):
            out[(name, tuple(sorted((k, v) for k, v in labels if k != "cluster")))] = value
    return out


def compare_metrics(page: str, ref: Path, groups: set | None = None) -> list[str]:
    live = metric_counts(parse(page), groups)
    refm = metric_counts(parse((ref / "metrics.prom").read_text()), groups)
    return [f"{name}{dict(labels)}: live {live.get((name, labels))}, replay {refm.get((name, labels))}"
            for name, labels in sorted(set(live) | set(refm)) if live.get((name, labels)) != refm.get((name, labels))]
