"""bench/cost's long steady window (issue 51, `bench/cost --only long`): the steady state after the
warm-up, beside the steady part's 90 s that the JVM's warm-up dominates.

The steady part's traffic for `--warm-up` + `--long-window` seconds (default 120 + 600): on a
1-broker Kafka of the real-Kafka bed, `--groups` generated copies of the real sc03 group
(bench/scale_inputs.generate) and every group's auto-commit of `--partitions` partitions every
`--commit-every` seconds (scale_inputs.steady_commit_stream: made as it is produced, 14 M records
for 10,000 groups in 12 minutes), produced in real time into a log topic and a 50-partition offsets
topic; each tree's `run` at its defaults (bench_scale_live.run_config) with its source of
`--source`. The scenarios are spread over the whole run (the steady part spreads them over 600 s,
longer than its window), so that the window after the warm-up sees rebalances to its end: one
per group per warm-up + long-window instead of per 10 minutes, about 4% of the rows either way.

Before any figure, every rebalance of every group whose scenario the traffic holds in full is
counted on /metrics (warm-up included), waiting for it up to `--long-final-wait` seconds after the
traffic (a monitor that did not keep up has a backlog to read). The figures are of the window after
the warm-up only, to the traffic's end: input rows/s, the p95 and max of the durations of the
batches that ended in it (rebalance_monitor_batch_duration_seconds at each batch; how many, of
how many batches counted, and how many warm-up batches were left out), the watermark delay p50,
CPU of the monitor's process tree in cores, peak RSS of the driver, the JVM (and its heap in use)
and the Python workers. Each tree's topics are deleted after its run (about 1.5 GB a tree at
10,000 groups); the broker's folder after the part.
"""
from __future__ import annotations

import heapq
import shutil
from pathlib import Path

from bench.scale_inputs import generate, steady_commit_count, steady_commit_stream


class SteadyTraffic:
    """bench_cost.steady_traffic's rows for `seconds`, iterable more than once (each tree's run
    iterates it), the offset commits made as they are read; `rows(start_s)`: the rows at or after
    `start_s` seconds, counted without making them."""

    def __init__(self, groups: int, seconds: float, partitions: int, every: float, seed: int, work: Path) -> None:
        from bench.bench_scale_live import load_traffic
        self.groups, self.seconds, self.partitions, self.every, self.seed = groups, seconds, partitions, every, seed
        inputs = work / f"long-inputs-{groups}-{seconds:g}"
        if not inputs.exists():
            generate(groups, inputs, seed=seed, spread_seconds=seconds)
        self.scenarios, self.complete = load_traffic(inputs, seconds)

    def __iter__(self):
        commits = ((ms, "offsets", r) for ms, r in steady_commit_stream(self.groups, self.seconds, self.every,
                                                                          self.seed, self.partitions))
        return heapq.merge(self.scenarios, commits, key=lambda r: r[0])

    def rows(self, start_s: float = 0.0) -> int:
        scenario = sum(1 for ms, _, _ in self.scenarios if ms >= start_s * 1000)
        return scenario + steady_commit_count(self.groups, self.every, self.seed, self.partitions, start_s,
                                              self.seconds)


def long_steady(trees: dict[str, Path], args, work: Path) -> dict[str, dict[str, float]]:
    """The long window of every tree: {"head": figures, "base": figures} (bench_cost's last-line
    names without the base_ prefix)."""
    from bench.bench_cost import LAG_SERIES, _mb, _p50, _p95, sampler, source_options, topic_with_records
    from bench.bench_scale_live import run_config
    from testbed.bed import KafkaCluster
    total = args.warm_up + args.long_window
    traffic = SteadyTraffic(args.groups, total, args.partitions, args.commit_every, args.seed, work)
    rows, window_rows = traffic.rows(), traffic.rows(args.warm_up)
    rate = window_rows / args.long_window
    print(f"long steady: {args.groups:,} groups, {args.partitions} partitions committed every "
          f"{args.commit_every:g} s, scenarios spread over {total:.0f} s: {rows:,} rows in {args.warm_up:.0f} s of "
          f"warm-up + {args.long_window:.0f} s, {window_rows:,} in the window ({rate:,.0f} rows/s); "
          f"{len(traffic.complete):,} groups' scenarios complete in it", flush=True)
    if not traffic.complete:
        raise SystemExit("bench/cost: long steady: no group's scenario is complete in the traffic; raise "
                         "--warm-up or --long-window")
    out: dict[str, dict[str, float]] = {}
    with KafkaCluster(args.version, brokers=1, workdir=work / "long-cluster") as cluster:
        topic_with_records(cluster, args.partitions)
        for name, tree in trees.items():
            label = f"-long-{name}"
            r = run_config("new", cluster, work, traffic, traffic.complete, args.long_final_wait, args.groups,
                           root=tree, label=label, rss=sampler, warm_up=args.warm_up, count_series=LAG_SERIES,
                           **source_options(args.source[name], args.monitor_toml if name == "head" else ""))
            if r["found"] < r["expected"]:
                raise SystemExit(f"bench/cost: long steady {name}: {r['found']} of {r['expected']} rebalances "
                                 f"counted {args.long_final_wait:.0f} s after the traffic (--long-final-wait)")
            if not r["batches"]:
                raise SystemExit(f"bench/cost: long steady {name}: no batch ended in the window after the warm-up")
            out[name] = {"long_steady_batch_p95_seconds": _p95(r["batches"]),
                         "long_steady_batch_max_seconds": max(r["batches"]),
                         "long_steady_cpu_cores": r["cpu"] / r["wall"]}
            cluster.admin().delete_topics([f"scale-logs-new{label}", f"scale-offsets-new{label}"])
            print(f"  {name}: all {r['expected']:,} rebalances counted; window {r['wall']:.0f} s after "
                  f"{args.warm_up:.0f} s of warm-up ({r['excluded']} batches in it left out): "
                  f"{r['counted']} batches, {len(r['batches'])} durations sampled: p95 "
                  f"{out[name]['long_steady_batch_p95_seconds']:.2f} s, max "
                  f"{out[name]['long_steady_batch_max_seconds']:.2f} s; watermark delay p50 "
                  f"{_p50(r['delays']):.1f} s; {out[name]['long_steady_cpu_cores']:.2f} cores; peak "
                  f"{_mb(r['rss'])}; {r['series']:,} groups with a lag on /metrics", flush=True)
    # The broker's copy of the traffic; kept when a run failed (SystemExit).
    shutil.rmtree(work / "long-cluster", ignore_errors=True)
    return out
