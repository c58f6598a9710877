"""Which Spark state store provider the monitor should use (issue 50): `bench/state-store
[--groups 10000 100000] [--providers hdfs,rocksdb]`, in one run.

For each N, bench/scale_inputs.py generates N copies of the real sc03 group (as bench/scale does:
every group rebalances and loses members, one scenario per group over 600 s). For each provider
in turn a child process replays them in process with micro-batches of 10 s of event time (the
live trigger's worth of input per batch, with the live view on, as `run` has it) on a new
checkpoint with `run`'s Spark settings (streaming/spark/session.py live_conf), and this process
samples it every 0.5 s:

- batch wall time (median, p95 and max after the first 3 batches);
- the driver JVM's heap in use (HotSpot perf data, as bench/scale) and its RSS, peak;
- the checkpoint's state directory (`<checkpoint>/state`), peak and final bytes.

Before any figure the child checks that the metrics counted every group's sc03 rebalances.

  hdfs:    Spark's default HDFSBackedStateStoreProvider: every state row in the JVM heap (the last
           two versions, spark.sql.streaming.maxBatchesToRetainInMemory), a delta file per batch;
  rocksdb: RocksDBStateStoreProvider with changelog checkpointing: state in RocksDB (native
           memory and local disk), the changes per batch in the checkpoint.

Last line: hdfs_10000_batch_p50_seconds=… hdfs_10000_batch_p95_seconds=… hdfs_10000_batch_max_seconds=…
hdfs_10000_heap_mb=… hdfs_10000_jvm_rss_mb=… hdfs_10000_state_mb=… rocksdb_10000_… (per N and provider).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_scale import DATA, SCENARIO_SECONDS, PeakRss
from bench.scale_inputs import expected_per_group, generate
from streaming.spark.session import STATE_STORES as PROVIDERS
from testbed.stats import percentile

ROOT = Path(__file__).resolve().parents[1]


def _bytes_under(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass      # a file Spark replaced while we walked
    return total


def child(inputs: Path, provider: str, rows_per_batch: int, groups: int, checkpoint: Path) -> int:
    """In the child process: the paced replay on `checkpoint` with the provider; prints one JSON line."""
    from prometheus_client import generate_latest

    from bench.bench_scale import paced_batches
    from streaming.spark.session import live_conf, state_store_conf
    # `run`'s Spark settings (its checkpoint writes among them), then the provider's.
    conf = {**live_conf(str(checkpoint)), **state_store_conf(provider)}
    batches, collector = paced_batches(inputs, rows_per_batch, conf=conf, checkpoint_dir=str(checkpoint))
    page = generate_latest(collector.metrics.registry).decode()
    counted = sum(float(line.rsplit(" ", 1)[1]) for line in page.splitlines()
                  if line.startswith("rebalance_monitor_rebalances_total{"))
    expected = groups * len(expected_per_group()["rebalances"])
    print(json.dumps({"batches": batches, "rebalances": counted, "expected": expected}), flush=True)
    return 0 if counted == expected else 1


def measure(inputs: Path, provider: str, rows_per_batch: int, groups: int, work: Path) -> dict:
    checkpoint = work / f"checkpoint-{provider}-{groups}"
    command = [sys.executable, "-m", "bench.state_store", "--child", str(inputs), "--providers", provider,
               "--rows-per-batch", str(rows_per_batch), "--groups", str(groups), "--checkpoint", str(checkpoint)]
    env = {**os.environ, "TMPDIR": str(work)}
    log = work / f"{provider}-{groups}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=out, text=True)
        sampler = PeakRss(proc.pid)
        sampler.start()
        state_peak = 0
        while proc.poll() is None:
            state_peak = max(state_peak, _bytes_under(checkpoint / "state"))
            time.sleep(0.5)
        sampler.done.set()
        stdout = proc.stdout.read() if proc.stdout else ""
    if proc.returncode != 0:
        raise SystemExit(f"bench/state-store: {provider} at {groups} groups failed (exit {proc.returncode}): "
                         f"{stdout[-500:]}\n{log.read_text()[-2000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    steady = result["batches"][3:] or result["batches"]
    return {"batches": len(result["batches"]), "p50": percentile(steady, 0.5), "p95": percentile(steady, 0.95),
            "max": max(steady), "heap": sampler.peak["heap"], "jvm_rss": sampler.peak["jvm"],
            "state_peak": state_peak / 2**20, "state_final": _bytes_under(checkpoint / "state") / 2**20}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/state-store", description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--providers", default="hdfs,rocksdb", help="in the order run: " + ", ".join(PROVIDERS))
    p.add_argument("--seed", type=int, default=15)
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--rows-per-batch", type=int, help=argparse.SUPPRESS)
    p.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    providers = args.providers.split(",")
    unknown = [x for x in providers if x not in PROVIDERS]
    if unknown:
        p.error(f"--providers: unknown {', '.join(unknown)} (known: {', '.join(PROVIDERS)})")
    if args.child is not None:
        return child(args.child, providers[0], args.rows_per_batch, args.groups[0], args.checkpoint)
    pairs: list[tuple[str, float]] = []
    for n in args.groups:
        inputs = DATA / f"scale-{n}-seed{args.seed}"
        counts = generate(n, inputs, seed=args.seed)
        rows = counts["log_lines"] + counts["offsets_records"]
        per_batch = max(1, rows * 10 // SCENARIO_SECONDS)
        print(f"groups={n}: {rows:,} rows, {per_batch:,} per batch and source", flush=True)
        for provider in providers:
            with tempfile.TemporaryDirectory(prefix="bench-state-store-") as work:
                r = measure(inputs, provider, per_batch, n, Path(work))
            print(f"  {provider}: all rebalances counted; {r['batches']} batches, p50 {r['p50']:.2f} s, "
                  f"p95 {r['p95']:.2f} s, max {r['max']:.2f} s; peak heap {r['heap']:.0f} MB, JVM RSS "
                  f"{r['jvm_rss']:.0f} MB; state {r['state_peak']:.1f} MB peak, {r['state_final']:.1f} MB at the end",
                  flush=True)
            key = f"{provider}_{n}"
            pairs += [(f"{key}_batch_p50_seconds", r["p50"]), (f"{key}_batch_p95_seconds", r["p95"]),
                      (f"{key}_batch_max_seconds", r["max"]), (f"{key}_heap_mb", r["heap"]),
                      (f"{key}_jvm_rss_mb", r["jvm_rss"]), (f"{key}_state_mb", r["state_peak"])]
    print(" ".join(f"{k}={'nan' if math.isnan(v) else (f'{v:.2f}' if v < 100 else f'{v:.0f}')}" for k, v in pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
