"""`rebalance-monitor run` as a process, driven only through its command line and a TOML file: it
reads a log topic and `__consumer_offsets` (or another offsets topic), writes its event sink and
serves /metrics. One class, `MonitorProcess`, for the bed's judged runs (testbed/judge), the
latency probe and tests, and the benches (bench/latency, bench/scale-live, bench/cost).

`MonitorSettings` is what the configuration file sets. `MonitorSettings()` is the bed's profile for
judged runs (lateness 2 s, trigger 1 s, the host-wide rule out of the way); `MonitorSettings.
defaults(...)` leaves every setting at the product's default but the ones given (the benches measure
the defaults). How long a record takes is derived from these settings: a rebalance record needs
the watermark (`lateness_seconds` behind the newest event) to pass its end; a removal record is
held for its decision window and the cross-group correlation hold (docs/diagnosis.md), computed
with the product's own DiagnosisSettings, so the waits shrink when those windows do."""
from __future__ import annotations

import atexit
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from sinks.event_sink import sink_files
from sinks.files import RECORD_FILES
from state.outputs import apply_trigger_decisions
from testbed.bed.procs import BedError, wait_for
from testbed.bed.settings import KIP848_SETTINGS
from testbed.metrics import parse
from testbed.proc import stop_group, tree_cpu_seconds

REPO = Path(__file__).resolve().parents[1]
SINK_KINDS = ("rebalances", "member_removals", "rebalance_triggers", "anomalies", "quarantine", "clock_skew")
BATCHES = "rebalance_monitor_batches_total"
_RUNNING: dict[int, subprocess.Popen] = {}      # pid -> every monitor still running (killed at exit)


def kill_monitors() -> None:
    """kill -9 of every monitor process group still running (the bed's last line of defence)."""
    for pid in list(_RUNNING):
        try:      # the group even when its leader exited: spark-submit's Python driver outlives its JVM
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _RUNNING.pop(pid, None)


atexit.register(kill_monitors)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def monitor_command() -> list[str]:
    """This checkout's `rebalance-monitor` (the virtualenv's entry point, else the repo's wrapper)."""
    exe = Path(sys.executable).parent / "rebalance-monitor"
    if exe.exists():
        return [str(exe)]
    return [str(REPO / "rebalance-monitor")]


# The event sink's folder -> its record kind.
RECORD_KINDS_BY_FOLDER = {folder: kind for kind, folder in RECORD_FILES.items()}


# The judged matrix's lateness (testbed/judge/matrix.py): above a follower death's stall. A
# killed follower of a `__consumer_offsets` (or log topic) partition holds its high watermark
# until the controller fences it (KRaft broker.session.timeout.ms, 9 s: 8.6 s in CI at d41df79),
# while markers of the sources, caught up to that high watermark, move the watermark on; with 2 s
# the coordinator's records of those seconds came late and were dropped (4.4.0 follower_kill[sh]).
# The product's `run` default is 10 s too (docs/configuration.md, "Live defaults").
MATRIX_LATENESS_S = 10.0


@dataclass
class MonitorSettings:
    """What the monitor's configuration file sets; None leaves a setting at the product's default."""
    lateness_s: float | None = 2.0
    trigger_s: float | None = 1.0
    # Every bed client runs on 127.0.0.1: unrelated scenarios running at the same time would
    # be one "host" for the host-wide rule, so the bed asks for more removals than it makes.
    host_wide_min_removals: int | None = 1000
    # `run` reads brokers' lines from a topic, without their start-up settings: an operator
    # whose brokers do not use Kafka's default group.consumer.session.timeout.ms says so.
    consumer_session_timeout_s: float | None = KIP848_SETTINGS["group.consumer.session.timeout.ms"] / 1000
    dead_group_retention_s: float | None = 7200.0
    # With nothing waiting for the watermark a quiet source adds a marker every 10 s, not 60:
    # the judge waits for the watermark to pass each group's last line plus its longest hold.
    idle_tick_max_s: float | None = 10.0
    diagnosis: dict = field(default_factory=dict)    # more [diagnosis] keys (seconds)
    shuffle_partitions: int | None = None

    @classmethod
    def defaults(cls, **given) -> MonitorSettings:
        """The product's defaults, but for the settings `given` (the benches' and probes' runs)."""
        unset = {f.name: None for f in fields(cls) if f.name not in ("diagnosis", "shuffle_partitions")}
        return cls(**{**unset, **given})

    def _diagnosis(self) -> dict:
        keys = {"host_wide_min_removals": self.host_wide_min_removals,
                "consumer_session_timeout_seconds": self.consumer_session_timeout_s}
        return {**{k: v for k, v in keys.items() if v is not None}, **self.diagnosis}

    def top_keys(self) -> str:
        """The top-level keys of the configuration file."""
        top = {"lateness_seconds": self.lateness_s, "trigger_interval_seconds": self.trigger_s,
               "shuffle_partitions": self.shuffle_partitions,
               "dead_group_retention_seconds": self.dead_group_retention_s}
        return "".join(f"{k} = {v}\n" for k, v in top.items() if v is not None)

    def diagnosis_table(self) -> str:
        """The [diagnosis] table ("" when every key is at its default)."""
        diag = self._diagnosis()
        return "[diagnosis]\n" + "".join(f"{k} = {v}\n" for k, v in diag.items()) + "\n" if diag else ""

    def diagnosis_settings(self):
        """The product's DiagnosisSettings for these keys (only to size waits)."""
        from state.diagnosis.rules import DiagnosisSettings
        kw = {}
        for key, value in self._diagnosis().items():
            kw[key[:-len("_seconds")] + "_ms" if key.endswith("_seconds") else key] = (
                int(value * 1000) if key.endswith("_seconds") else value)
        return DiagnosisSettings(**kw)

    def removal_hold_s(self, cause: str, rebalance_timeout_ms: int | None = None) -> float:
        """Event-time seconds from a removal to its final record: the group's decision window,
        then the correlator's hold (state/diagnosis)."""
        from state.diagnosis.correlate import Correlator
        from state.diagnosis.rules import decision_window_ms
        s = self.diagnosis_settings()
        rec = {"cause": cause, "rebalance_timeout_ms": rebalance_timeout_ms}
        return max(decision_window_ms(rec, s), Correlator(s).hold_ms) / 1000

    def record_delay_s(self, hold_s: float = 0.0) -> float:
        """Wall seconds after an event (with the idle-flush marker at wall-clock time) until a
        record held for `hold_s` of event time is in the sink: the hold, the watermark's
        lateness, a quiet source's next marker (kafka.idle_tick_seconds, at its default), which
        moves the watermark, and the marker after it, whose batch fires the timeout (no no-data
        batches with markers: streaming/spark/session.live_conf), a batch to plan and one to run."""
        from streaming.app.settings import IDLE_TICK_SECONDS, RUN_LATENESS_SECONDS, RUN_TRIGGER_INTERVAL_SECONDS
        lateness = RUN_LATENESS_SECONDS if self.lateness_s is None else self.lateness_s
        trigger = RUN_TRIGGER_INTERVAL_SECONDS if self.trigger_s is None else self.trigger_s
        return hold_s + lateness + 2 * IDLE_TICK_SECONDS + 3 * trigger


def ensure_offsets_topic(cluster, timeout: float = 60.0) -> None:
    """Kafka creates __consumer_offsets at the first FindCoordinator; `run` waits for it with a
    growing backoff, so the bed makes it exist before the monitor starts."""
    from testbed.bed.admin import _leaders_known, find_coordinator
    adm = cluster.admin()

    def ready():
        if _leaders_known(adm, "__consumer_offsets", 10):   # offsets.topic.num.partitions (settings.py)
            return True
        find_coordinator(cluster.bootstrap, "kafkabed-create-offsets-topic")
        return False
    wait_for(ready, timeout, "__consumer_offsets to exist", interval=0.5)


class MonitorProcess:
    """One `rebalance-monitor run` in its own session (its Spark JVM and Python workers in its
    process group), output in `<workdir>/<name>.log`, configuration `<workdir>/<name>.toml`,
    checkpoint and event sink in `<workdir>`.

    `root`: the checkout to run (a bench's base tree, with its own .venv); `submit`: the argv after
    the entry point ("run --config ...") -> the argv to start instead (StandaloneCluster.submit_argv:
    spark-submit to a cluster); `cpu_also`: more processes whose trees count in cpu_seconds() (a
    cluster's workers). `top_toml` (top-level keys) and `extra_toml` (tables after [kafka]) add to
    the configuration file."""

    def __init__(self, bootstrap: str, log_topics: str | list[str], workdir: Path,
                 settings: MonitorSettings | None = None, *, cluster: str = "bed",
                 offsets_topic: str | None = "__consumer_offsets", source: str = "python", top_toml: str = "",
                 extra_toml: str = "", name: str = "monitor", root: Path = REPO,
                 submit: Callable[[list[str]], list[str]] | None = None,
                 cpu_also: Callable[[], list[int]] | None = None):
        self.bootstrap, self.offsets_topic, self.source = bootstrap, offsets_topic, source
        self.log_topics = [log_topics] if isinstance(log_topics, str) else list(log_topics)
        self.workdir = Path(workdir)
        self.settings = settings if settings is not None else MonitorSettings()
        self.cluster, self.name, self.root = cluster, name, Path(root)
        self.top_toml, self.extra_toml = top_toml, extra_toml
        self.submit, self.cpu_also = submit, cpu_also
        self.events_dir = self.workdir / "events"
        self.checkpoint = self.workdir / "checkpoint"
        self.log_path = self.workdir / f"{name}.log"
        self.config = self.workdir / f"{name}.toml"
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.starts: list[int] = []          # wall ms of every start
        self.cpu_at_stop = 0.0
        self._log_offset = 0

    # ------------------------------------------------------------------ command line
    @property
    def python(self) -> str:
        return sys.executable if self.root == REPO else str(self.root / ".venv" / "bin" / "python")

    def write_config(self) -> Path:
        """The configuration file (a restart keeps the /metrics port)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        s, q = self.settings, json.dumps
        kafka = {"bootstrap_servers": q(self.bootstrap), "log_topics": f"[{', '.join(map(q, self.log_topics))}]",
                 "offsets_topic": q(self.offsets_topic or ""), "source": q(self.source)}
        if s.idle_tick_max_s is not None:
            kafka["idle_tick_max_seconds"] = str(s.idle_tick_max_s)
        self.config.write_text(
            f"{s.top_keys()}{self.top_toml}cluster = {q(self.cluster)}\n"
            f'metrics_host = "127.0.0.1"\nmetrics_port = {self.port or 0}\n'
            f"checkpoint_location = {q(str(self.checkpoint))}\nevents_dir = {q(str(self.events_dir))}\n\n"
            f"{s.diagnosis_table()}[kafka]\n" + "".join(f"{k} = {v}\n" for k, v in kafka.items()) + self.extra_toml)
        return self.config

    def arguments(self) -> list[str]:
        """`rebalance-monitor`'s arguments: run with this monitor's configuration file."""
        return ["run", "--config", str(self.config)]

    def command(self) -> list[str]:
        if self.submit is not None:
            return self.submit(self.arguments())
        entry = monitor_command() if self.root == REPO else [self.python, "-m", "streaming.app.cli"]
        return [*entry, *self.arguments()]

    # ------------------------------------------------------------------ life cycle
    def start(self, timeout: float = 240.0, batches: int = 1) -> MonitorProcess:
        """Starts the process and waits until it serves /metrics and has run `batches` micro-batches
        (0: only /metrics)."""
        return self.launch().wait_ready(timeout, batches)

    def launch(self) -> MonitorProcess:
        """Starts the process without waiting (several monitors that share the wait for Spark)."""
        self.write_config()
        env = dict(os.environ, PYSPARK_PYTHON=self.python, PYSPARK_DRIVER_PYTHON=self.python,
                   SPARK_LOCAL_IP="127.0.0.1")
        for key in [k for k in env if k.startswith("REBALANCE_MONITOR_")]:
            env.pop(key)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "a") as handle:
            self.proc = subprocess.Popen(self.command(), cwd=self.root, env=env, stdout=handle,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        _RUNNING[self.proc.pid] = self.proc
        self.starts.append(now_ms())
        return self

    def wait_ready(self, timeout: float = 240.0, batches: int = 1) -> MonitorProcess:
        """Until the launched process serves /metrics (its port from this start's log lines) and
        has run `batches` micro-batches."""
        def port():
            with open(self.log_path, "rb") as handle:
                handle.seek(self._log_offset)
                m = re.search(rb"serving http://[\d.]+:(\d+)/metrics", handle.read())
            return m and int(m.group(1))
        self.port = wait_for(port, timeout, f"{self.name} to serve /metrics", interval=0.25, alive=self.alive)
        if batches:
            self.wait_batches(batches, timeout)
        return self

    def alive(self) -> None:
        """Raises BedError (with the log's tail) when the process has exited."""
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            raise BedError(f"{self.name} exited ({code}): {self.log_tail()}")

    def stop(self, kill: bool = False, timeout: float = 60.0) -> int | None:
        """SIGTERM (the monitor stops its query, its JVM follows), SIGKILL of the process group
        after `timeout` s; `kill`: SIGKILL at once. Then whatever is left in the group (with
        spark-submit, its Python driver outlives its JVM): testbed.proc.stop_group. The exit code
        (None: never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.cpu_at_stop = self.cpu_seconds()
        code = stop_group(self.proc, timeout, kill=kill)
        _RUNNING.pop(self.proc.pid, None)
        return code

    def kill9(self) -> None:
        """kill -9 of the driver and its Python workers and Spark JVM (the process group)."""
        self.stop(kill=True)

    def restart(self, timeout: float = 240.0) -> MonitorProcess:
        self.stop()
        return self.start(timeout)

    def cpu_seconds(self) -> float:
        """CPU seconds of the process tree (and of the `cpu_also` trees)."""
        if self.proc is None:
            return 0.0
        return tree_cpu_seconds(self.proc.pid) + sum(tree_cpu_seconds(pid) for pid in (self.cpu_also or list)())

    # ------------------------------------------------------------------ what it shows
    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def scrape(self, *names: str, timeout: float = 5.0) -> str:
        """The /metrics page; with `names` (sample names), only those (`?name[]=`), so that polling
        does not render every group's series."""
        query = "?" + "&".join(f"name[]={n}" for n in names) if names else ""
        return urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics{query}", timeout=timeout).read().decode()

    def batches(self) -> int:
        """Micro-batches the running query committed (0 before the first, or when /metrics does not answer)."""
        try:
            return int(parse(self.scrape(BATCHES)).value(BATCHES) or 0)
        except OSError:
            return 0

    def wait_batches(self, n: float, timeout: float = 240.0, poll_s: float = 0.5) -> None:
        """Until the query has committed `n` micro-batches (Spark up, first offsets read)."""
        wait_for(lambda: self.batches() >= n, timeout, f"{self.name}'s micro-batch {n:.0f}", interval=poll_s,
                 alive=self.alive)

    def records(self, kind: str, group: str | None = None) -> list[dict]:
        """The event sink's records of `kind` (its folder name); rebalances with their decided
        triggers applied (rebalance_triggers, docs/output.md), as a consumer of the sink does."""
        out = self._read_sink(kind)
        if kind == "rebalances":
            out = apply_trigger_decisions(out, self._read_sink("rebalance_triggers"))
        return out if group is None else [r for r in out if r.get("group") == group]

    def _read_sink(self, kind: str) -> list[dict]:
        out: list[dict] = []
        for f in sink_files(self.events_dir, RECORD_KINDS_BY_FOLDER[kind]):
            try:
                lines = f.path.read_text().splitlines()
            except FileNotFoundError:     # replaced while we read: the next read sees it
                continue
            out += [json.loads(ln) for ln in lines if ln.strip()]
        return out

    def committed_batches(self) -> set:
        return {int(p.name) for p in (self.checkpoint / "query" / "commits").glob("[0-9]*")}

    def _offsets_log(self) -> list[Path]:
        return list((self.checkpoint / "query" / "offsets").glob("[0-9]*"))

    def planned_batches(self) -> set:
        return {int(p.name) for p in self._offsets_log()}

    def planned_at_s(self) -> list[float]:
        """When the micro-batches were planned (their offsets log files' times), in order: a batch
        reads what its source held then."""
        return sorted(p.stat().st_mtime for p in self._offsets_log())
