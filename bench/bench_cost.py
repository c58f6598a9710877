"""Cost per record (issue 25): `bench/cost [--base TREE] [...]`, this tree against a base tree in
one run, every figure checked before it is reported.

1. Steady state (`steady_*`): a 1-broker Kafka 4.4 of the real-Kafka bed. `--groups` generated
   copies of the real sc03 group (bench/scale_inputs.py, scenarios spread over 600 s) and, for every
   group, an auto-commit of `--partitions` partitions every `--commit-every` seconds, produced in
   real time for `--window` seconds into a log topic and a 50-partition offsets topic; `run` at its
   defaults reads them (bench_scale_live.run_config). Every rebalance of the groups whose scenario
   lies within the window must be counted on /metrics, or the bench stops. Figures: input rows/s,
   batch time p95 (rebalance_monitor_batch_duration_seconds at each batch), CPU of the monitor's
   process tree over the window in cores, peak RSS of the driver, the JVM and the Python workers.
   The topic the groups commit to holds records beyond their commits, so `run`'s lag sampler (on
   by default) gives every group a lag: `steady_lag_groups`, the lag series on the last /metrics.
2. Highest steady rate (`max_steady_rows_per_second`, this tree only): the same at up to
   `--max-steps` other commit rates (a shorter window): the commit interval halved each step
   while the batches keep up (p95 at most `--keep-up-seconds`, every rebalance counted), doubled
   each step while they do not; the highest input rate that kept up (0: none tried did). The
   interval, not the partitions per commit, is what steps: a group's records of one batch are one
   packed row of the stateful step, so more partitions per commit add rows the read and decode
   see but hardly any work after them; more commits per group add both.
3. Quiet cluster (`quiet_*`, `live_p95_seconds`): bench/latency's cluster (2 brokers shipping their
   server.log into a log topic, scripted rounds of joins, a slow member, a SIGKILLed member, a
   leave) after 30 s of warm-up; CPU cores of the monitor over the rounds and the p95 of the time
   from each broker line to the /metrics scrape that shows it (bench_latency.run_config).
4. Replay (`replay_*`, `read_ceiling_rows_per_second`): `rebalance-monitor replay` of a day of
   `--replay-groups` groups (bench/scale_inputs.generate_day: each group goes through sc03 3 times
   and auto-commits 10 partitions every 30 min in between; 6.4 M rows for 10,000 groups) end to
   end, Spark's start included, outputs checked (bench_scale.run_replay, check_outputs); the
   read-only ceiling of this tree on the same input (bench/replay_ceiling.py). Then both trees on
   a day of a tenth of the groups (`replay_compare_rows_per_second`): the base tree reads on its
   driver, and the full day would take it most of this bench's time.

5. Catch-up (`catch_up_*`, bench/catch_up.py): a 50-partition offsets topic pre-filled with
   `--catch-up-records` records of `--catch-up-groups` groups (sc03 and auto-commits of 10
   partitions each); each tree's `run`, with each source of `--catch-up-sources`, timed from its
   process start (JVM included) until every record is read and every group's rebalances are
   counted on /metrics; rows/s per source, the better source's as `catch_up_rows_per_second`, the
   JVM's peak heap in use. The read ceiling: Spark's connector reading and counting the same
   records with no decode and no state (bench/catch_up_ceiling.py), timed the same way.

6. Long steady window (`long_steady_*`, only with `--only long`, bench/long_steady.py): the steady
   part's traffic for `--warm-up` (120 s) + `--long-window` (600 s), its scenarios spread over the
   whole run, for each tree with its `--source`; every rebalance of the groups whose scenario the
   traffic holds counted (up to `--long-final-wait` after it), then, over the window after the
   warm-up only (the warm-up's batches left out, the figures say how many they cover): batch p95
   and max, CPU in cores, peak RSS per component. About 13-14 minutes a tree: not in the default
   list.

7. On a Spark cluster (`cluster*_`, only with `--only cluster`): the steady state of this tree with
   `run` submitted to a standalone cluster of 1, then 2, one-core workers (testbed/spark_cluster.py,
   the chart's settings); batch p95, CPU of driver and workers (executors included), input rows/s per
   executor core, tasks per executor.

8. The lag sampler (`lag_*`, only with `--only lag_sampler`, bench/lag_sampler.py; this tree only):
   `run`'s LagSampler thread and its kafka-python client against a broker of `--lag-topics` x
   `--lag-topic-partitions` partitions, a LagBook of `--lag-groups` groups' commits, at the default
   `lag.sample_seconds`: CPU time of the sampler's threads over `--lag-rounds` rounds after
   `--lag-warm-up`, in cores; round wall p95; CPU of a scrape of the lag families (LagCollector) every
   `--lag-scrape-seconds`; sampler plus scrapes against the 0.1-core ceiling. Creating 100,000
   partitions takes minutes: not in the default list.

The base tree is `--base` or, by default, a worktree of `--base-commit` under bench/.data with its own
.venv (made on first use). Last line:
  steady_rows_per_second=N steady_batch_p95_seconds=B steady_cpu_cores=C steady_lag_groups=LG
  max_steady_rows_per_second=M
  quiet_cpu_cores=Q live_p95_seconds=L replay_rows_per_second=R read_ceiling_rows_per_second=X
  replay_compare_rows_per_second=RC catch_up_rows_per_second=U catch_up_python_rows_per_second=UP
  catch_up_spark_rows_per_second=US catch_up_ceiling_rows_per_second=UC catch_up_peak_heap_mb=H
  long_steady_batch_p95_seconds=LP long_steady_batch_max_seconds=LM long_steady_cpu_cores=LC
  lag_sampler_cpu_cores=S lag_round_seconds_p95=W lag_scrape_cpu_seconds=SC lag_cpu_cores=T
  lag_within_ceiling=1|0 lag_partitions=P lag_groups=G lag_broker_cpu_cores=B
then the base's figures with a `base_` prefix (base_catch_up_rows_per_second: the base's better source).
"""
from __future__ import annotations

import argparse
import heapq
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_latency import toml_text
from bench.lag_sampler import check_lag_arguments, lag_arguments
from bench.bench_scale import DATA, PeakRss, run_replay
from bench.scale_inputs import check_outputs, generate, steady_commits

ROOT = Path(__file__).resolve().parents[1]
BASE_COMMIT = "7e666b9"      # issue 51's base (issue 25's figures in docs/benchmarks.md are against 44e1eeb)
PARTS = ("steady", "max", "quiet", "replay", "catch_up", "long", "cluster", "lag_sampler")
# The parts that run each tree of --trees (the others run this tree only: no base tree made for them).
TREE_PARTS = {"steady", "max", "quiet", "replay", "catch_up", "long"}
DEFAULT_PARTS = "steady,max,quiet,replay,catch_up"


def base_tree(commit: str) -> Path:
    """A worktree of `commit` under bench/.data with its own .venv (scripts/bootstrap), made once."""
    tree = DATA / f"base-{commit}"
    if not (tree / ".venv" / "bin" / "python").exists():
        if not tree.exists():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit], check=True)
        subprocess.run([str(tree / "scripts" / "bootstrap"), "test"], check=True)
    return tree


def sampler(pid: int) -> PeakRss:
    s = PeakRss(pid)
    s.start()
    return s


def _mb(rss: dict | None) -> str:
    if not rss:
        return "-"
    heap = f" (heap in use {rss['heap']:.0f} MB)" if rss.get("heap") else ""
    return f"driver {rss['driver']:.0f} MB / JVM {rss['jvm']:.0f} MB{heap} / workers {rss['workers']:.0f} MB"


def _percentile(values: list[float], q: float) -> float:
    """testbed.stats.percentile, nan for no values."""
    from testbed.stats import percentile
    p = percentile(values, q) if values else None
    return float("nan") if p is None else p


def _p95(values: list[float]) -> float:
    return _percentile(values, 0.95)


def steady_traffic(groups: int, window: float, partitions: int, every: float, seed: int, work: Path):
    from bench.bench_scale_live import load_traffic
    inputs = work / f"steady-inputs-{groups}"
    if not inputs.exists():
        generate(groups, inputs, seed=seed)
    traffic, complete = load_traffic(inputs, window)
    commits = [(ms, "offsets", r) for ms, r in steady_commits(groups, window, every, seed, partitions)]
    return list(heapq.merge(traffic, commits, key=lambda r: r[0])), complete


def connector_jars() -> str:
    """Spark's kafka connector and its dependencies for this PySpark, from the Maven cache
    (scripts/spark-connector), as a `spark.jars` value."""
    import pyspark

    from testbed.bed.jars import fetch_spark_connector, spark_jars
    return spark_jars(fetch_spark_connector(pyspark.__version__))


def source_options(source: str, monitor_toml: str = "") -> dict:
    """run_config's options for a live source: "python" (kafka-python) or "spark" (Spark's connector,
    its jars from the Maven cache), with `monitor_toml` (--monitor-toml) after."""
    if source != "spark":
        return {"source": source, "extra_toml": monitor_toml}
    return {"source": "spark", "extra_toml": f'[spark_conf]\n"spark.jars" = "{connector_jars()}"\n{monitor_toml}'}


def steady(cluster, trees: dict[str, Path], args, work: Path) -> dict[str, dict]:
    from bench.bench_scale_live import run_config
    traffic, complete = steady_traffic(args.groups, args.window, args.partitions, args.commit_every, args.seed, work)
    rate = len(traffic) / args.window
    print(f"steady: {args.groups:,} groups, {args.partitions} partitions committed every {args.commit_every:g} s: "
          f"{len(traffic):,} rows in {args.window:.0f} s ({rate:,.0f} rows/s), {len(complete)} groups' scenarios "
          f"complete in it", flush=True)
    topic_with_records(cluster, args.partitions)
    out = {}
    for name, tree in trees.items():
        r = run_config("new", cluster, work, traffic, complete, args.final_wait, args.groups, root=tree,
                       label=f"-steady-{name}", rss=sampler, count_series=LAG_SERIES,
                       **source_options(args.source[name], args.monitor_toml if name == "head" else ""))
        if r["found"] < r["expected"]:
            raise SystemExit(f"bench/cost: steady {name}: {r['found']} of {r['expected']} rebalances counted")
        out[name] = {"rows_per_second": rate, "batch_p95": _p95(r["batches"]), "cores": r["cpu"] / r["wall"],
                     "rss": r["rss"], "delay_p50": _p50(r["delays"]), "lag_groups": r["series"]}
        print(f"  {name}: all {r['expected']} rebalances counted; {len(r['batches'])} batches, p95 "
              f"{out[name]['batch_p95']:.2f} s, max {max(r['batches']):.2f} s; watermark delay p50 "
              f"{out[name]['delay_p50']:.1f} s; {out[name]['cores']:.2f} cores; peak {_mb(r['rss'])}; "
              f"{r['series']:,} groups with a lag on /metrics; stateful step: {r['calls']:,.0f} calls, "
              f"{r['turns']:,.0f} group turns, {r['folds']:,.0f} commit folds", flush=True)
    return out


# The lag series the steady state's last /metrics is counted for (one per group: they all commit
# to one topic).
LAG_SERIES = "rebalance_monitor_group_topic_lag"


def topic_with_records(cluster, partitions: int) -> None:
    """The topic the steady groups commit to, with 100 records more than their committed offset on
    each partition: `run` samples its end offsets (lag is on by default), so every group it
    knows has a lag on /metrics (a base without lag shows none)."""
    from confluent_kafka import Producer

    from bench.scale_inputs import steady_topic
    from testbed.bed.admin import create_topic
    topic, committed = steady_topic()
    create_topic(cluster.admin(), topic, partitions, 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 50, "acks": "1"})
    for p in range(partitions):
        for _ in range(committed + 100):
            producer.produce(topic, b"x", partition=p)
        producer.poll(0)
    if producer.flush(60) != 0:
        raise SystemExit(f"bench/cost: could not write the records of {topic}")


def on_cluster(cluster, args, work: Path) -> dict[int, dict]:
    """The steady state of this tree, `run` submitted to a Spark standalone cluster of 1 and then
    2 one-core workers (testbed/spark_cluster.py, the chart's settings): batch p95, CPU of
    the driver's and the workers' process trees (executors and their Python workers included),
    input rows/s per executor core, and the tasks each executor ran."""
    from bench.bench_scale_live import run_config
    from testbed.spark_cluster import StandaloneCluster
    traffic, complete = steady_traffic(args.groups, args.window, args.partitions, args.commit_every, args.seed, work)
    rate = len(traffic) / args.window
    out = {}
    for executors in (1, 2):
        spark = StandaloneCluster(work / f"spark-{executors}", workers=executors).start()
        try:
            r = run_config("new", cluster, work, traffic, complete, args.final_wait, args.groups,
                           label=f"-cluster-{executors}", submit=spark.submit_argv, cpu_also=spark.worker_pids)
        finally:
            tasks = spark.tasks_per_executor()
            spark.stop()
        if r["found"] < r["expected"]:
            raise SystemExit(f"bench/cost: {executors} executor(s): {r['found']} of {r['expected']} rebalances counted")
        out[executors] = {"rows_per_second": rate, "batch_p95": _p95(r["batches"]), "cores": r["cpu"] / r["wall"],
                          "per_core": rate / executors, "delay_p50": _p50(r["delays"]), "tasks": tasks}
        print(f"  cluster, {executors} executor(s): all {r['expected']} rebalances counted; {len(r['batches'])} "
              f"batches, p95 {out[executors]['batch_p95']:.2f} s; watermark delay p50 "
              f"{out[executors]['delay_p50']:.1f} s; {out[executors]['cores']:.2f} cores; tasks per executor "
              f"{tasks}", flush=True)
    return out


def _p50(values: list[float]) -> float:
    return _percentile(values, 0.5)


def max_steady(cluster, args, work: Path, first: dict) -> float:
    """The highest steady input rate of this tree that keeps up: from the steady run, up (the
    commit interval halved) while it keeps up, else down (doubled) until it does."""
    from bench.bench_scale_live import run_config
    kept_first = first["batch_p95"] <= args.keep_up_seconds
    best = first["rows_per_second"] if kept_first else 0.0
    every = args.commit_every
    for step in range(args.max_steps):
        every = every / 2 if kept_first else every * 2
        traffic, complete = steady_traffic(args.groups, args.step_window, args.partitions, every, args.seed, work)
        rate = len(traffic) / args.step_window
        r = run_config("new", cluster, work, traffic, complete, args.final_wait, args.groups, root=ROOT,
                       label=f"-max{step}", **source_options(args.source["head"], args.monitor_toml))
        p95 = _p95(r["batches"])
        kept = r["found"] >= r["expected"] and p95 <= args.keep_up_seconds
        print(f"  max steady step {step + 1}: {args.partitions} partitions committed every {every:g} s, "
              f"{rate:,.0f} rows/s: batch p95 {p95:.2f} s, {r['found']} of {r['expected']} rebalances counted, "
              f"{r['cpu'] / r['wall']:.2f} cores: {'keeps up' if kept else 'does not keep up'}", flush=True)
        if kept:
            best = max(best, rate)
        if kept != kept_first:      # the boundary is crossed
            break
    return best     # 0: none of the rates tried kept up


def quiet(trees: dict[str, Path], args, work: Path) -> dict[str, dict]:
    from bench.bench_latency import report, run_config
    from testbed.bed import KafkaCluster, LogShipper
    out = {}
    cluster = KafkaCluster(args.version, workdir=work / "quiet-cluster")
    shipper = None
    try:
        cluster.start()
        shipper = LogShipper(cluster, "cost-broker-logs").start()
        cluster.coordinator_of("bench-cost")
        for name, tree in trees.items():
            r = run_config("new", cluster, shipper, work, args.rounds, 0.1, 240.0, root=tree, label=f"-{name}",
                           rss=sampler)
            summary = report(f"quiet {name}", r)
            live = summary["live"]
            if live.missing:
                raise SystemExit(f"bench/cost: quiet {name}: {live.missing} broker lines never shown on /metrics")
            out[name] = {"cores": r["cpu"] / r["wall"], "live_p95": live.p95, "rss": r["rss"]}
            print(f"  {name}: {out[name]['cores']:.2f} cores, live p95 {live.p95:.2f} s; peak {_mb(r['rss'])}",
                  flush=True)
    finally:
        if shipper is not None:
            shipper.stop(drain=False, timeout=10)
        cluster.close(keep=False)
    return out


def day_input(groups: int, seed: int) -> tuple[Path, int, int]:
    """bench/scale_inputs.generate_day's files for `groups` groups (made once, then reused), their
    rows (log lines + offsets records) and the scenarios per group."""
    import json
    from bench.scale_inputs import generate_day
    inputs = DATA / f"day-{groups}-seed{seed}"
    marker = inputs / "counts.json"
    if not marker.exists():
        counts = generate_day(groups, inputs, seed=seed)
        marker.write_text(json.dumps(counts))
    counts = json.loads(marker.read_text())
    return inputs, counts["log_lines"] + counts["offsets_records"], counts["repeats"]


def replay_run(name: str, tree: Path, day: tuple[Path, int, int], groups: int, label: str) -> dict:
    """`<tree>/rebalance-monitor replay` of a day input (day_input), its outputs checked before any
    figure."""
    inputs, rows, repeats = day
    dest = DATA / f"cost-replay-{label}-{name}"
    r = run_replay(tree, inputs, dest)
    problems = check_outputs(dest, groups, repeats)
    if problems:
        raise SystemExit(f"bench/cost: replay {label} {name}: {len(problems)} problems, e.g. {problems[:3]}")
    print(f"  {label} {name}: every group's rebalances and removals found; {r['wall']:.1f} s, "
          f"{rows / r['wall']:,.0f} rows/s, CPU {r['cpu']:.1f} s; peak {_mb(r['rss'])}", flush=True)
    return {"rows_per_second": rows / r["wall"], "rss": r["rss"], "cpu": r["cpu"], "wall": r["wall"]}


def replay(trees: dict[str, Path], args) -> dict[str, dict]:
    """The day of `--replay-groups` groups by this tree, and its read-only ceiling; both trees on a
    day of a tenth of the groups (the base tree reads on its driver: the full day would take it
    most of this bench's time)."""
    import re
    n = args.replay_groups
    day = day_input(n, args.seed)
    inputs, rows, _ = day
    print(f"replay: a day of {n:,} groups, {rows:,} rows", flush=True)
    out = {"head": replay_run("head", ROOT, day, n, "day")}
    ceiling = run_replay(ROOT, inputs, DATA / "cost-replay-ceiling", ceiling=True)
    read = re.search(r"read-only ceiling: (\d+) input rows", ceiling["output"])
    if read is None or int(read.group(1)) != rows:
        raise SystemExit(f"bench/cost: the read-only ceiling read {read.group(1) if read else 'no'} rows of {rows}")
    out["ceiling"] = {"rows_per_second": rows / ceiling["wall"], "rss": ceiling["rss"]}
    print(f"  read-only ceiling (this tree): {ceiling['wall']:.1f} s, {rows / ceiling['wall']:,.0f} rows/s; "
          f"peak {_mb(ceiling['rss'])}", flush=True)
    small_n = max(1, n // 10)
    small = day_input(small_n, args.seed)
    print(f"replay, both trees: a day of {small_n:,} groups, {small[1]:,} rows", flush=True)
    for name, tree in trees.items():
        out[f"compare_{name}"] = replay_run(name, tree, small, small_n, "compare")
    return out


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked (a bad value: one line on stderr and exit 2); `only` as a set."""
    p = argparse.ArgumentParser(prog="bench/cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--base", type=Path, help="the base checkout (default: a worktree of --base-commit)")
    p.add_argument("--base-commit", default=BASE_COMMIT)
    p.add_argument("--version", default="4.4.0", help="Kafka version of the bed")
    p.add_argument("--groups", type=int, default=10_000)
    p.add_argument("--partitions", type=int, default=10, help="partitions per auto-commit")
    p.add_argument("--commit-every", type=float, default=5.0)
    p.add_argument("--window", type=float, default=90.0, help="seconds of steady traffic per tree")
    p.add_argument("--step-window", type=float, default=45.0, help="seconds of traffic per higher-rate step")
    p.add_argument("--max-steps", type=int, default=2)
    p.add_argument("--keep-up-seconds", type=float, default=2.0, help="batch p95 that counts as keeping up")
    p.add_argument("--final-wait", type=float, default=120.0)
    p.add_argument("--rounds", type=int, default=3, help="scripted rounds of the quiet cluster")
    p.add_argument("--replay-groups", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=15)
    p.add_argument("--only", default=DEFAULT_PARTS,
                   help=f"of: {', '.join(PARTS)} (default {DEFAULT_PARTS}; not in it: long, the steady state "
                        "after a warm-up, 13-14 minutes a tree; cluster, the steady state on a standalone Spark "
                        "cluster of 1 and of 2 executors, issue 26; lag_sampler, the lag sampler's CPU at "
                        "10,000 groups and 100,000 partitions, this tree only, issue 54)")
    p.add_argument("--catch-up-records", type=int, default=5_000_000, help="records in the catch-up's offsets topic")
    p.add_argument("--catch-up-groups", type=int, default=10_000, help="groups of those records")
    p.add_argument("--catch-up-span", type=float, default=3_600.0,
                   help="seconds of record time the catch-up's records span (ending when they are produced)")
    p.add_argument("--catch-up-sources", default="python,spark", help="the live sources timed catching up")
    p.add_argument("--catch-up-timeout", type=float, default=900.0,
                   help="seconds from a catch-up run's start after which it fails")
    p.add_argument("--warm-up", type=float, default=120.0,
                   help="long: seconds of steady traffic before the window (its batches not in the figures)")
    p.add_argument("--long-window", type=float, default=600.0, help="long: seconds of the window after the warm-up")
    p.add_argument("--long-final-wait", type=float, default=300.0,
                   help="long: seconds after the traffic within which every rebalance must be counted")
    lag_arguments(p)
    p.add_argument("--trees", default="base,head", help="which trees to run (a development aid: the figures "
                   "of one tree alone are not this bench's comparison)")
    p.add_argument("--source", default="python", help="the live source of the steady runs: python or spark, or "
                   "head:base (e.g. spark:python)")
    p.add_argument("--monitor-toml", default="", type=toml_text,
                   help="more TOML for this tree's monitor in the steady runs (a development aid, e.g. "
                        "'[spark_conf]\\n\"spark.driver.extraJavaOptions\" = \"-XX:+UseSerialGC\"'); with "
                        "--source spark it goes after the connector's [spark_conf] line")
    args = p.parse_args(argv)
    head_source, _, base_source = args.source.partition(":")
    args.source = {"head": head_source, "base": base_source or head_source}
    args.only = only = set(args.only.split(","))
    if only - set(PARTS):
        p.error(f"--only: unknown {', '.join(sorted(only - set(PARTS)))} (of: {', '.join(PARTS)})")
    args.catch_up_sources = args.catch_up_sources.split(",")
    if "long" in only and (args.warm_up < 0 or args.long_window <= 0):
        p.error(f"--warm-up must be at least 0 and --long-window above 0, not {args.warm_up:g} and "
                f"{args.long_window:g}")
    if "lag_sampler" in only:
        check_lag_arguments(p, args)
    if "catch_up" in only:
        from bench.scale_inputs import catch_up_shape_error
        if set(args.catch_up_sources) - {"python", "spark"}:
            p.error(f"--catch-up-sources: of python, spark, not {','.join(args.catch_up_sources)}")
        problem = catch_up_shape_error(args.catch_up_groups, args.catch_up_records, args.catch_up_span)
        if problem:
            p.error(problem)
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    only = args.only
    wanted = args.trees.split(",") if only & TREE_PARTS else ["head"]
    trees = {name: tree for name, tree in (("base", args.base or ("base" in wanted and base_tree(args.base_commit))),
                                           ("head", ROOT)) if name in wanted and tree}
    trees = {name: Path(tree).resolve() for name, tree in trees.items()}
    work = Path(tempfile.mkdtemp(prefix="bench-cost-"))
    started = time.monotonic()
    figures: dict[str, float] = {}
    base: dict[str, float] = {}
    if only & {"steady", "max"}:
        from testbed.bed import KafkaCluster
        with KafkaCluster(args.version, brokers=1, workdir=work / "cluster") as cluster:
            s = steady(cluster, trees, args, work)
            figures.update(steady_rows_per_second=s["head"]["rows_per_second"],
                           steady_batch_p95_seconds=s["head"]["batch_p95"], steady_cpu_cores=s["head"]["cores"],
                           steady_lag_groups=s["head"]["lag_groups"])
            if "base" in s:
                base.update(steady_batch_p95_seconds=s["base"]["batch_p95"], steady_cpu_cores=s["base"]["cores"])
            if "max" in only:
                figures["max_steady_rows_per_second"] = max_steady(cluster, args, work, s["head"])
    if "cluster" in only:
        from testbed.bed import KafkaCluster
        with KafkaCluster(args.version, brokers=1, workdir=work / "cluster-kafka") as cluster:
            for n, c in on_cluster(cluster, args, work).items():
                figures.update({f"cluster{n}_batch_p95_seconds": c["batch_p95"], f"cluster{n}_cpu_cores": c["cores"],
                                f"cluster{n}_rows_per_second_per_executor_core": c["per_core"]})
    if "quiet" in only:
        q = quiet(trees, args, work)
        figures.update(quiet_cpu_cores=q["head"]["cores"], live_p95_seconds=q["head"]["live_p95"])
        if "base" in q:
            base.update(quiet_cpu_cores=q["base"]["cores"], live_p95_seconds=q["base"]["live_p95"])
    if "replay" in only:
        r = replay(trees, args)
        figures.update(replay_rows_per_second=r["head"]["rows_per_second"],
                       read_ceiling_rows_per_second=r["ceiling"]["rows_per_second"])
        if "compare_head" in r:
            figures["replay_compare_rows_per_second"] = r["compare_head"]["rows_per_second"]
        if "compare_base" in r:
            base["replay_compare_rows_per_second"] = r["compare_base"]["rows_per_second"]
    if "catch_up" in only:
        from bench.catch_up import catch_up
        c = catch_up(trees, args, work)
        figures.update(c.get("head", {}))
        base.update(c.get("base", {}))
    if "long" in only:
        from bench.long_steady import long_steady
        g = long_steady(trees, args, work)
        figures.update(g.get("head", {}))
        base.update(g.get("base", {}))
    if "lag_sampler" in only:
        from bench.lag_sampler import lag_sampler
        figures.update(lag_sampler(args, work))
    print(f"bench/cost: {time.monotonic() - started:.0f} s", flush=True)
    order = ("steady_rows_per_second", "steady_batch_p95_seconds", "steady_cpu_cores", "steady_lag_groups",
             "max_steady_rows_per_second",
             "quiet_cpu_cores", "live_p95_seconds", "replay_rows_per_second", "read_ceiling_rows_per_second",
             "replay_compare_rows_per_second", "catch_up_rows_per_second", "catch_up_python_rows_per_second",
             "catch_up_spark_rows_per_second", "catch_up_ceiling_rows_per_second", "catch_up_peak_heap_mb",
             "long_steady_batch_p95_seconds", "long_steady_batch_max_seconds", "long_steady_cpu_cores",
             "cluster1_batch_p95_seconds", "cluster1_cpu_cores",
             "cluster1_rows_per_second_per_executor_core", "cluster2_batch_p95_seconds", "cluster2_cpu_cores",
             "cluster2_rows_per_second_per_executor_core", "lag_sampler_cpu_cores", "lag_round_seconds_p95",
             "lag_scrape_cpu_seconds", "lag_cpu_cores", "lag_within_ceiling", "lag_partitions", "lag_groups",
             "lag_broker_cpu_cores")

    def fmt(k: str, v: float) -> str:
        if k.startswith("lag_") and v < 100:     # fractions of a core: 3 significant digits; counts, flags whole
            return f"{v:.0f}" if v == int(v) else f"{v:.3g}"
        return f"{v:.0f}" if v >= 100 else f"{v:.2f}"
    print(" ".join([f"{k}={fmt(k, figures[k])}" for k in order if k in figures]
                   + [f"base_{k}={fmt(k, base[k])}" for k in order if k in base]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
