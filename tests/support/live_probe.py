"""Measure `rebalance-monitor run` against the real-Kafka bed: when does a broker line that is in
the log topic show on /metrics, live (group gauges) and final (counters)?

- `MonitorProcess` starts `run` as its own process (own session) over a bed cluster's log topic
  and __consumer_offsets, with the given trigger / lateness, and stops it with SIGTERM (or -9).
- `Scraper` scrapes /metrics every `interval_s` in a thread and keeps, per scrape, the group
  series of the groups under test (a small regex parser, not prometheus_client's).
- `line_events` turns the shipper's lines of a group into the events to time (parsed with the
  monitor's own parser): rebalance start, JOIN end, rebalance end, removal, each with the
  moment the line was acknowledged by the log topic (`acked_ms`);
- `latencies` finds, for each, the first scrape that shows it live and the first that shows it
  final.

Visibility rules (group G; series of the live view, docs/metrics.md):
  start (Preparing to rebalance at t):   group_state_since_timestamp_seconds >= t
  JOIN end (Stabilized generation N):    group_generation >= N
  end (Assignment received for gen N):   generation >= N and not rebalancing in N (or newer)
  empty (Group G ... is now empty at t):  group_state_since_timestamp_seconds >= t
  k-th removal line:                     pending_removals + member_removals_total >= k
  final, k-th rebalance start:           rebalances_total >= k (timed from the line that ended it)
  final, k-th removal:                   member_removals_total >= k
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timezone
from pathlib import Path

from bench.proc_cpu import tree_cpu_seconds

ROOT = Path(__file__).resolve().parents[2]
BATCHES = "rebalance_monitor_batches_total"
SERIES = re.compile(r'^rebalance_monitor_(\w+)\{([^}]*)\} (\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
KEEP = {"group_state", "group_generation", "group_state_since_timestamp_seconds", "group_pending_removals",
        "member_removals_total", "rebalances_total", "group_rebalance_started_timestamp_seconds"}
REBALANCING = ("PreparingRebalance", "CompletingRebalance")


@dataclass
class MonitorProcess:
    bootstrap: str
    log_topic: str
    workdir: Path
    trigger_s: float | None = None       # None: the defaults of RunSettings
    lateness_s: float | None = None
    offsets: bool = True
    offsets_topic: str = "__consumer_offsets"
    cluster: str = "bed"
    extra_toml: str = ""                 # more TOML after the [kafka] table (further tables)
    top_toml: str = ""                   # more top-level keys (before any table)
    source: str = "python"               # kafka.source: the kafka-python source or Spark's connector
    root: Path = ROOT                    # the checkout to run (a bench's base tree), with its .venv
    # argv after the Python entry point ("run --config ...") -> the argv to start instead
    # (StandaloneCluster.submit_argv: spark-submit to a cluster)
    submit: Callable[[list[str]], list[str]] | None = None
    # more processes whose trees count in cpu_seconds() (a cluster's workers and their executors)
    cpu_also: Callable[[], list[int]] | None = None
    proc: subprocess.Popen | None = None
    port: int | None = None
    cpu_at_stop: float = 0.0

    @property
    def log(self) -> Path:
        return self.workdir / "monitor.log"

    def start(self, timeout: float = 180.0) -> MonitorProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "monitor.toml"
        top = "".join(f"{k} = {v}\n" for k, v in (("trigger_interval_seconds", self.trigger_s),
                                                   ("lateness_seconds", self.lateness_s)) if v is not None)
        config.write_text(f'{top}{self.top_toml}cluster = "{self.cluster}"\nmetrics_host = "127.0.0.1"\nmetrics_port = 0\n'
                          f'checkpoint_location = "{self.workdir / "checkpoint"}"\n'
                          f'events_dir = "{self.workdir / "events"}"\n'
                          f'[kafka]\nbootstrap_servers = "{self.bootstrap}"\nlog_topics = ["{self.log_topic}"]\n'
                          f'offsets_topic = "{self.offsets_topic if self.offsets else ""}"\nsource = "{self.source}"\n'
                          f'{self.extra_toml}')
        python = sys.executable if self.root == ROOT else str(self.root / ".venv" / "bin" / "python")
        env = dict(os.environ, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python, SPARK_LOCAL_IP="127.0.0.1")
        for key in [k for k in env if k.startswith("REBALANCE_MONITOR_")]:
            env.pop(key)
        with open(self.log, "a") as handle:
            command = ["run", "--config", str(config)]
            argv = self.submit(command) if self.submit else [python, "-m", "streaming.app.cli", *command]
            self.proc = subprocess.Popen(argv, cwd=self.root, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            self.alive()
            found = re.findall(r"serving http://[\d.]+:(\d+)/metrics", self.log.read_text())
            if found:
                self.port = int(found[-1])
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"monitor did not serve /metrics within {timeout:.0f} s:\n{self.tail()}")
            time.sleep(0.2)
        return self

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text()[-n:] if self.log.exists() else ""

    def alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"monitor exited ({self.proc.returncode}):\n{self.tail()}")

    def scrape(self, *names: str, timeout: float = 5.0) -> str:
        """The /metrics page; with `names`, only those families (`?name[]=`), so that polling
        does not render every group's series."""
        query = "?" + "&".join(f"name[]={n}" for n in names) if names else ""
        return urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics{query}", timeout=timeout).read().decode()

    def batches(self) -> float:
        """Micro-batches the query has applied so far."""
        return sample_value(self.scrape(BATCHES), BATCHES) or 0.0

    def wait_batches(self, n: float, timeout: float = 240.0, poll_s: float = 0.5) -> None:
        """Until the query has applied `n` micro-batches (Spark up, first offsets read)."""
        deadline = time.monotonic() + timeout
        while True:
            self.alive()
            try:
                if self.batches() >= n:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"fewer than {n:.0f} micro-batches within {timeout:.0f} s:\n{self.tail()}")
            time.sleep(poll_s)

    def cpu_seconds(self) -> float:
        if self.proc is None:
            return 0.0
        return tree_cpu_seconds(self.proc.pid) + sum(tree_cpu_seconds(pid) for pid in (self.cpu_also or list)())

    def stop(self, kill: bool = False, timeout: float = 60.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.cpu_at_stop = self.cpu_seconds()
        if kill:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"monitor still running {timeout:.0f} s after SIGTERM:\n{self.tail()}") from None


def parse_page(page: str, groups_prefix: str) -> dict[str, list[tuple[dict, float]]]:
    out: dict[str, list[tuple[dict, float]]] = {}
    for line in page.splitlines():
        m = SERIES.match(line)
        if not m or m.group(1) not in KEEP or f'group="{groups_prefix}' not in m.group(2):
            continue
        out.setdefault(m.group(1), []).append((dict(LABEL.findall(m.group(2))), float(m.group(3))))
    return out


@dataclass
class Scrape:
    wall_ms: int
    series: dict[str, list[tuple[dict, float]]]
    batch_s: float | None = None

    def values(self, name: str, group: str, **labels: str) -> list[float]:
        return [v for lab, v in self.series.get(name, []) if lab.get("group") == group
                and all(lab.get(k) == x for k, x in labels.items())]

    def one(self, name: str, group: str) -> float | None:
        vals = self.values(name, group)
        return vals[0] if vals else None

    def state(self, group: str) -> str | None:
        return next((lab["state"] for lab, v in self.series.get("group_state", [])
                     if lab.get("group") == group and v == 1.0), None)


class Scraper(threading.Thread):
    def __init__(self, monitor: MonitorProcess, groups_prefix: str, interval_s: float = 0.1):
        super().__init__(name="live-probe-scraper", daemon=True)
        self.monitor, self.prefix, self.interval_s = monitor, groups_prefix, interval_s
        self.scrapes: list[Scrape] = []
        self._halt = threading.Event()

    def run(self) -> None:
        batch = re.compile(r"^rebalance_monitor_batch_duration_seconds (\S+)$", re.M)
        while not self._halt.is_set():
            t = time.time_ns() // 1_000_000
            try:
                page = self.monitor.scrape()
            except OSError:
                page = None
            if page is not None:
                b = batch.search(page)
                self.scrapes.append(Scrape(t, parse_page(page, self.prefix), float(b.group(1)) if b else None))
            self._halt.wait(self.interval_s)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


@dataclass
class LineEvent:
    what: str            # start | join_end | end | removal
    group: str
    ts_ms: int           # broker log time
    acked_ms: int        # in the log topic
    generation: int | None = None
    index: int = 0       # k-th start / removal of the group (1-based)
    cause: str | None = None
    live_ms: int | None = None
    final_ms: int | None = None

    @property
    def live_s(self) -> float | None:
        return None if self.live_ms is None else max(0.0, (self.live_ms - self.acked_ms) / 1000.0)

    @property
    def final_s(self) -> float | None:
        return None if self.final_ms is None else max(0.0, (self.final_ms - self.acked_ms) / 1000.0)


def line_events(shipper, group: str, since: dict | None = None) -> list[LineEvent]:
    """The timed events of `group` in the shipper's lines (acknowledged lines only)."""
    from state import events as E
    from streaming.logs.parser import parse_line
    lines = [ln for ln in shipper.find(re.escape(group), since) if ln.acked_ms is not None]
    found: list[tuple[int, int, int, str, object]] = []
    for ln in lines:
        result = parse_line(ln.text, source_id=f"broker{ln.broker_id}", seq=ln.seq, tz=timezone.utc)
        for ev in result if isinstance(result, list) else []:
            if ev.group == group:
                found.append((ev.ts_ms, ln.broker_id, ln.seq, ln.acked_ms, ev))
    out: list[LineEvent] = []
    starts = removals = 0
    for ts, _b, _s, acked, ev in sorted(found, key=lambda f: (f[0], f[1], f[2])):
        if ev.kind == E.PREPARE_REBALANCE:
            starts += 1
            out.append(LineEvent("start", group, ts, acked, ev.generation, starts))
        elif ev.kind == E.JOIN_COMPLETE:
            out.append(LineEvent("join_end", group, ts, acked, ev.generation))
        elif ev.kind == E.ASSIGNMENT_RECEIVED:
            out.append(LineEvent("end", group, ts, acked, ev.generation))
        elif ev.kind == E.GROUP_EMPTY:
            out.append(LineEvent("empty", group, ts, acked, ev.generation))
        elif ev.kind in (E.MEMBER_FAILED, E.MEMBER_LEFT):
            removals += 1
            cause = "heartbeat_expiry" if ev.kind == E.MEMBER_FAILED else "leave_group"
            out.append(LineEvent("removal", group, ts, acked, None, removals, cause))
    return out


def _live(e: LineEvent, s: Scrape) -> bool:
    g = e.group
    if e.what == "start":
        since = s.one("group_state_since_timestamp_seconds", g)
        return since is not None and since * 1000 >= e.ts_ms - 1
    gen = s.one("group_generation", g)
    if e.what == "join_end":
        return gen is not None and e.generation is not None and gen >= e.generation
    if e.what == "end":
        if gen is None or e.generation is None or gen < e.generation:
            return False
        if gen > e.generation or s.state(g) not in REBALANCING:
            return True
        # Rebalancing again in the same generation: a rebalance that began at or after the end
        # (a member joining right after the assignment; the view may never show Stable between).
        since = s.one("group_state_since_timestamp_seconds", g)
        return s.state(g) == "PreparingRebalance" and since is not None and since * 1000 >= e.ts_ms - 1
    if e.what == "empty":
        since = s.one("group_state_since_timestamp_seconds", g)
        return since is not None and since * 1000 >= e.ts_ms - 1
    seen = sum(s.values("group_pending_removals", g)) + sum(s.values("member_removals_total", g))
    return seen >= e.index


def _final(e: LineEvent, s: Scrape) -> bool:
    if e.what == "start":
        return sum(s.values("rebalances_total", e.group)) >= e.index
    if e.what == "removal":
        return sum(s.values("member_removals_total", e.group)) >= e.index
    return False


def latencies(events: list[LineEvent], scrapes: list[Scrape]) -> list[LineEvent]:
    """Fill live_ms / final_ms with the first scrape (at or after the ack) that shows each event."""
    for e in events:
        for s in scrapes:
            if s.wall_ms < e.acked_ms:
                continue
            if e.live_ms is None and _live(e, s):
                e.live_ms = s.wall_ms
            if e.final_ms is None and _final(e, s):
                e.final_ms = s.wall_ms
            if e.live_ms is not None and (e.final_ms is not None or e.what in ("join_end", "end", "empty")):
                break
    return events


def rebalance_final_seconds(events: list[LineEvent]) -> list[float | None]:
    """Per rebalance: from the line that ended it (Assignment received, or "is now empty") being
    in the log topic to its record being counted (None: not counted within the run)."""
    out: list[float | None] = []
    for e in events:
        if e.what != "start":
            continue
        closing = next((c for c in events if c.group == e.group and c.what in ("end", "empty")
                        and c.ts_ms >= e.ts_ms), None)
        if closing is None or e.final_ms is None:
            out.append(None)
        else:
            out.append(max(0.0, (e.final_ms - closing.acked_ms) / 1000.0))
    return out


def sample_value(page: str, series: str) -> float | None:
    """The value of one series of an exposition page, `series` as printed before the value
    (name and labels, e.g. 'rebalance_monitor_input_records_total{source="offsets"}')."""
    m = re.search(rf"^{re.escape(series)} (\S+)$", page, re.M)
    return float(m.group(1)) if m else None


def toml_text(arg: str) -> str:
    """A bench's --monitor-toml argument: `\\n` written on the command line is a newline."""
    return arg.replace("\\n", "\n")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


@dataclass
class Summary:
    n: int
    missing: int
    p50: float | None
    p95: float | None
    max: float | None
    min: float | None = None
    values: list[float] = field(default_factory=list)


def summarize(values: list[float | None]) -> Summary:
    seen = [v for v in values if v is not None]
    return Summary(len(values), len(values) - len(seen), percentile(seen, 0.5), percentile(seen, 0.95),
                   max(seen) if seen else None, min(seen) if seen else None, seen)


# ------------------------------------------------------------------------------------ workload
def group_on(cluster, broker_id: int, prefix: str, tries: int = 200) -> str:
    """A group id whose coordinator is `broker_id` (FindCoordinator), e.g. to put a group on the
    broker whose shipper lags."""
    for i in range(tries):
        group = f"{prefix}-{i}"
        if cluster.coordinator_of(group) == broker_id:
            return group
    raise AssertionError(f"no group {prefix}-N coordinated by broker {broker_id} in {tries} tries")


def scripted_round(runner, group: str, topic: str, slow_ms: int = 3000) -> None:
    """One round of rebalances and removals on `group` (kafka-python members, classic protocol):
    a joins; b joins (the JOIN phase waits for a, which sleeps `slow_ms` after each poll, so the
    rebalance lasts up to that); b is SIGKILLed (heartbeat expiry after 3 s, a rebalance that
    again waits for a); a leaves (LeaveGroup, the group becomes empty)."""
    from tests.support.kafkabed.members import MemberSpec
    common = {"session_timeout_ms": 3000, "max_poll_interval_ms": 10000}
    a = runner.start(MemberSpec("kafka-python", group, [topic], f"{group}-a", slow_ms=slow_ms, **common))
    b = runner.start(MemberSpec("kafka-python", group, [topic], f"{group}-b", **common), wait=False)
    mark_a = a.mark()
    runner.wait_joined(b)
    runner.wait_reassigned([a], [mark_a])
    mark_a = a.mark()
    runner.kill(b)
    runner.wait_reassigned([a], [mark_a])
    runner.leave(a)


def long_join_rebalance(runner, group: str, topic: str, slow_ms: int = 20000) -> None:
    """A rebalance whose JOIN phase lasts about `slow_ms`: a sleeps `slow_ms` after each poll;
    b joins right after a's poll, so the coordinator waits for a's next one. Then both leave."""
    from tests.support.kafkabed.members import MemberSpec
    common = {"session_timeout_ms": 6000, "max_poll_interval_ms": slow_ms + 10000}
    a = runner.start(MemberSpec("kafka-python", group, [topic], f"{group}-a", slow_ms=slow_ms, **common))
    a.wait_event("consumed", slow_ms / 1000 + 30, a.mark())
    b = runner.start(MemberSpec("kafka-python", group, [topic], f"{group}-b", **common), wait=False)
    mark_a = a.mark()
    runner.wait_joined(b, slow_ms / 1000 + 30)
    runner.wait_reassigned([a], [mark_a], slow_ms / 1000 + 30)
    runner.leave(b)
    runner.leave(a, slow_ms / 1000 + 30)
