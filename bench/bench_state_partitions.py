"""What a micro-batch of `run` costs with 2, 8 and 32 state partitions (`shuffle_partitions`,
spark.sql.shuffle.partitions: fixed once a checkpoint exists), on bench/latency's quiet cluster
(a 2-broker real Kafka cluster of the bed, its brokers' server.log shipped into a log topic, a few
scripted rounds of joins, a slow join, a kill and a leave), in one run: the same cluster and
rounds for each count in turn, each monitor on a new checkpoint with the default trigger and
lateness.

Per count: batch time (p50 and max of rebalance_monitor_batch_duration_seconds over the
scrapes), the CPU of the monitor's process tree per wall second while the rounds ran, and the
live view's p95 (broker line in the log topic -> group gauges on /metrics). local[2] has two
cores: every state partition is a task of the stateful step (a Python call, a state store
commit), so more partitions cost more per batch on one machine and spread the step over more
executor cores on a cluster.

Last line: p2_batch_p50_seconds=… p2_cpu_cores=… p2_live_p95_seconds=… p8_… p32_…
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench.bench_latency import _fmt, report, run_config
from testbed.bed import KafkaCluster, LogShipper


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/state-partitions", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", default="4.4.0", help="Kafka version of the bed (4.x)")
    p.add_argument("--counts", default="2,8,32", help="state partition counts, in the order run")
    p.add_argument("--rounds", type=int, default=2, help="scripted rounds (groups) per count")
    p.add_argument("--warmup-seconds", type=float, default=30.0)
    p.add_argument("--final-wait", type=float, default=20.0,
                   help="wait for the final records after the rounds (their latency is not the point)")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-state-partitions-"))
    cluster = KafkaCluster(args.version, workdir=work / "cluster")
    shipper = None
    pairs: list[tuple[str, float | None]] = []
    try:
        cluster.start()
        shipper = LogShipper(cluster, "bench-broker-logs").start()
        cluster.coordinator_of("bench-state-partitions")   # creates __consumer_offsets, which `run` waits for
        for n in (int(x) for x in args.counts.split(",")):
            r = run_config("new", cluster, shipper, work, args.rounds, 0.1, args.final_wait,
                           warmup_s=args.warmup_seconds, label=f"-p{n}", top_toml=f"shuffle_partitions = {n}\n")
            summary = report(f"{n} state partitions", r)
            pairs += [(f"p{n}_batch_p50_seconds", r["batch_p50"]), (f"p{n}_batch_max_seconds", r["batch_max"]),
                      (f"p{n}_cpu_cores", r["cpu"] / max(r["wall"], 1.0)),
                      (f"p{n}_live_p95_seconds", summary["live"].p95)]
    finally:
        if shipper is not None:
            shipper.stop(drain=False, timeout=10)
        cluster.close(keep=False)
    print(" ".join(f"{k}={_fmt(v)}" for k, v in pairs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
