"""Latency of `rebalance-monitor run` on a real Kafka cluster (issue 14), new defaults against
the old ones in the same run.

A 2-broker cluster of the real-Kafka bed (testbed/bed) ships its brokers' server.log
into a log topic; the monitor reads it and __consumer_offsets. For each configuration in turn
(new defaults: trigger 0.5 s, lateness 10 s; old: trigger 10 s, lateness 30 s) the bench starts
the monitor, lets it run `--warmup-seconds` (30 s of micro-batches: the JVM is still compiling
its per-batch planning code before that), runs `--rounds` scripted rounds
(testbed/bed/workload.scripted_round: a join, a join that waits for a slow member, a
SIGKILLed member's heartbeat expiry, a LeaveGroup), scrapes /metrics every `--scrape-interval`
and times (testbed/judge/latency.py), from the moment each broker line is acknowledged by the log topic:

- live: the first scrape whose group gauges show it (rebalance start, JOIN end, rebalance end,
  removal with its cause);
- final: the first scrape whose counters count it: a rebalance record (timed from the line that
  ended the rebalance, "Assignment received" or "is now empty"), a removal record (from the
  removal line).

The old configuration's final figures are what /metrics showed before the live view (the
gauges came from the watermark path). Also: batch time (rebalance_monitor_batch_duration_seconds
per scrape) and the CPU seconds of the monitor's process tree (driver, Spark JVM, Python
workers) over the measured period. `--lag-seconds S` delays broker 2's shipper by S seconds.

Last line: live_p95_seconds=… final_p95_seconds=… old_p95_seconds=… (and more key=value pairs).
"""
from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from streaming.app.settings import RUN_TRIGGER_INTERVAL_SECONDS
from testbed.bed import KafkaCluster, LogShipper
from testbed.bed.runner import Runner
from testbed.bed.workload import scripted_round
from testbed.judge.latency import LineEvent, Scraper, latencies, line_events, rebalance_final_seconds
from testbed.metrics import parse
from testbed.monitor import REPO, MonitorProcess, MonitorSettings
from testbed.stats import Summary, percentile, summarize

CONFIGS = {"new": (None, None), "old": (10.0, 30.0), "one": (1.0, None)}    # (trigger s, lateness s); None = defaults
KINDS = ("start", "join_end", "end", "empty", "removal")


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _row(label: str, s: Summary) -> str:
    return (f"  {label:<22} n={s.n:<3} missing={s.missing:<2} min {_fmt(s.min):>7}  p50 {_fmt(s.p50):>7}  "
            f"p95 {_fmt(s.p95):>7}  max {_fmt(s.max):>7}")


def toml_text(arg: str) -> str:
    """A bench's --monitor-toml argument: `\\n` written on the command line is a newline."""
    return arg.replace("\\n", "\n")


def _counted(monitor: MonitorProcess, groups: list[str]) -> bool:
    page = parse(monitor.scrape("rebalance_monitor_rebalances_total", "rebalance_monitor_member_removals_total"))
    return all(page.total("rebalance_monitor_rebalances_total", group=g) >= 4
               and page.total("rebalance_monitor_member_removals_total", group=g) >= 2 for g in groups)


def run_config(name: str, cluster, shipper, workdir: Path, rounds: int, interval: float,
               final_wait: float, monitor_toml: str = "", warmup_s: float = 30.0, root: Path | None = None,
               label: str = "", rss=None, top_toml: str = "") -> dict:
    """The rounds on `run` of `root` (default: this tree) at configuration `name`; `label` tells runs
    apart (groups, work folder); `rss(pid)`: a peak-memory sampler as in bench_scale_live.run_config."""
    trigger, lateness = CONFIGS[name]
    run = f"{name}{label}"
    monitor = MonitorProcess(cluster.bootstrap, shipper.topic, workdir / run,
                             MonitorSettings.defaults(trigger_s=trigger, lateness_s=lateness), extra_toml=monitor_toml,
                             top_toml=top_toml, root=root or REPO).start()
    scraper = Scraper(monitor, f"lb-{run}-", interval)
    sampler = None
    try:
        # Steady state: the JVM compiles the per-batch planning code over the first ~30 batches
        # (1.0-1.5 s batches, then about 0.5 s); both configurations get the same time. A quiet
        # cluster with kafka.idle_tick_seconds runs a batch per tick, not per trigger: the warm-up
        # also ends after `warmup_s` of wall time once 2 batches ran.
        started = time.monotonic()
        monitor.wait_batches(2, timeout=240)
        wanted = max(2, math.ceil(warmup_s / (trigger or RUN_TRIGGER_INTERVAL_SECONDS)))
        while monitor.batches() < wanted and time.monotonic() - started < warmup_s:
            monitor.alive()
            time.sleep(0.5)
        if rss is not None and monitor.proc is not None:
            sampler = rss(monitor.proc.pid)
        cpu0, t0 = monitor.cpu_seconds(), time.monotonic()
        scraper.start()
        since = shipper.mark()
        groups = [f"lb-{run}-{i}" for i in range(rounds)]
        with Runner(cluster, workdir / f"{name}-runner", shipper) as runner:
            for group in groups:
                scripted_round(runner, group, runner.topic(f"{group}-data", 2, 1))
        deadline = time.monotonic() + final_wait
        while time.monotonic() < deadline and not _counted(monitor, groups):
            monitor.alive()
            time.sleep(1.0)
        time.sleep(max(1.0, 2 * interval))
        cpu, wall = monitor.cpu_seconds() - cpu0, time.monotonic() - t0
    finally:
        scraper.stop()
        if sampler is not None:
            sampler.done.set()
        monitor.stop()
    events: list[LineEvent] = []
    for group in groups:
        events += latencies(line_events(shipper, group, since), scraper.scrapes)
    batches = [s.batch_s for s in scraper.scrapes if s.batch_s is not None]
    return {"events": events, "cpu": cpu, "wall": wall, "batch_p50": percentile(batches, 0.5),
            "batch_max": max(batches) if batches else None, "trigger": trigger, "lateness": lateness,
            "rss": sampler.peak if sampler is not None else None}


def report(name: str, r: dict) -> dict[str, Summary]:
    evs: list[LineEvent] = r["events"]
    out: dict[str, Summary] = {}
    print(f"{name}: trigger {r['trigger'] or 'default'} s, lateness {r['lateness'] or 'default'} s; "
          f"{r['wall']:.0f} s measured, process-tree CPU {r['cpu']:.1f} s ({r['cpu'] / max(r['wall'], 1):.2f} cores), "
          f"batch time p50 {_fmt(r['batch_p50'])} s max {_fmt(r['batch_max'])} s")
    for kind in KINDS:
        out[f"live_{kind}"] = summarize([e.live_s for e in evs if e.what == kind])
        print(_row(f"live {kind}", out[f"live_{kind}"]))
    out["live"] = summarize([e.live_s for e in evs])
    print(_row("live (all)", out["live"]))
    slowest = sorted((e for e in evs if e.live_s is not None), key=lambda e: -(e.live_s or 0))[:3]
    print("  slowest live: " + "; ".join(f"{e.what} {e.group} gen {e.generation} {e.live_s:.2f} s" for e in slowest))
    out["final_rebalance"] = summarize(rebalance_final_seconds(evs))
    out["final_removal"] = summarize([e.final_s for e in evs if e.what == "removal"])
    print(_row("final rebalance record", out["final_rebalance"]))
    print(_row("final removal record", out["final_removal"]))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/latency", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", default="4.4.0", help="Kafka version of the bed (4.x)")
    p.add_argument("--rounds", type=int, default=3, help="scripted rounds (groups) per configuration")
    p.add_argument("--scrape-interval", type=float, default=0.1)
    p.add_argument("--final-wait", type=float, default=240.0, help="longest wait for the final records")
    p.add_argument("--lag-seconds", type=float, default=0.0, help="delay of broker 2's log shipper")
    p.add_argument("--configs", default="new,old", help="of: new, old, one (the new defaults at a 1 s trigger)")
    p.add_argument("--warmup-seconds", type=float, default=30.0,
                   help="the monitor runs this long (in micro-batches) before the first round")
    p.add_argument("--monitor-toml", default="", type=toml_text,
                   help="more TOML for both monitors' config file, after its [kafka] table (e.g. '[spark_conf]...')")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    cluster = KafkaCluster(args.version, workdir=work / "cluster")
    shipper = None
    results: dict[str, dict[str, Summary]] = {}
    extra: dict[str, dict] = {}
    try:
        cluster.start()
        delay = {2: args.lag_seconds} if args.lag_seconds else None
        shipper = LogShipper(cluster, "bench-broker-logs", delay_s=delay).start()
        cluster.coordinator_of("bench-latency")   # creates __consumer_offsets, which `run` waits for
        for name in args.configs.split(","):
            r = run_config(name, cluster, shipper, work, args.rounds, args.scrape_interval, args.final_wait,
                           args.monitor_toml, args.warmup_seconds)
            results[name], extra[name] = report(name, r), r
    finally:
        if shipper is not None:
            shipper.stop(drain=False, timeout=10)
        cluster.close(keep=False)
    new, old = results.get("new"), results.get("old")
    pairs = []
    if new:
        pairs += [("live_p95_seconds", new["live"].p95), ("live_max_seconds", new["live"].max),
                  ("final_p95_seconds", new["final_rebalance"].p95),
                  ("removal_final_p95_seconds", new["final_removal"].p95),
                  ("live_missing", new["live"].missing),
                  ("cpu_seconds", extra["new"]["cpu"]), ("batch_p50_seconds", extra["new"]["batch_p50"])]
    if old:
        pairs += [("old_live_p95_seconds", old["live"].p95), ("old_p95_seconds", old["final_rebalance"].p95),
                  ("old_removal_p95_seconds", old["final_removal"].p95),
                  ("old_cpu_seconds", extra["old"]["cpu"]), ("old_batch_p50_seconds", extra["old"]["batch_p50"])]
    if args.lag_seconds:
        pairs.append(("lag_seconds", args.lag_seconds))
    print(" ".join(f"{k}={_fmt(v) if isinstance(v, float) or v is None else v}" for k, v in pairs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
