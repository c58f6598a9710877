"""A Spark standalone cluster on 127.0.0.1 from the installed pyspark (`bin/spark-class`): one
master and N workers of 1 core each, every executor in its own JVM, as a chart's cluster runs
them. `submit` runs a `rebalance-monitor` command through `spark-submit` and the project's entry
point (scripts/spark_entrypoint.py), the way the chart's SparkApplication does.

Every process runs in its own session and is killed with its group on `stop()` (and at exit), so
a failed test leaves no JVM behind. Waits are bounded and follow the processes' own log lines.
"""
from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from testbed import figures
from testbed.bed.jars import cache_root
from testbed.chart import Submission, spark_application
from testbed.proc import end_group

ROOT = Path(__file__).resolve().parents[1]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
_LIVE: list[subprocess.Popen] = []


def _kill_all() -> None:
    for proc in _LIVE:
        try:      # the group even when its leader exited (a worker's executors)
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


atexit.register(_kill_all)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ClusterError(RuntimeError):
    pass


# scripts/spark-cluster-check sets this to a file: each cluster test appends the figures it
# measured (one JSON object per line) before it asserts on them, and the script sums them up.
FIGURES_ENV = "SPARK_CLUSTER_CHECK_FIGURES"


def record_figure(name: str, value: object) -> None:
    figures.record_figure(FIGURES_ENV, name, value)


@dataclass
class StandaloneCluster:
    workdir: Path
    workers: int = 2
    worker_memory: str = "2g"
    # spark.deploy.recoveryMode=FILESYSTEM with this directory: a restarted master takes back
    # the applications and workers the last one had (None: no recovery, a new master starts empty).
    recovery_dir: Path | None = None
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    spawned: list[subprocess.Popen] = field(default_factory=list)   # every process started, in order
    port: int = 0

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_LOG_DIR=str(self.workdir / "logs"), PYSPARK_PYTHON=sys.executable,
                   PYSPARK_DRIVER_PYTHON=sys.executable)
        env.pop("REBALANCE_MONITOR_METRICS_PORT", None)
        return env

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "w")
        proc = subprocess.Popen(argv, cwd=self.workdir, env={**self.env(), **(env or {})}, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        _LIVE.append(proc)
        self.spawned.append(proc)
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _await(self, name: str, text: str, timeout_s: float, times: int = 1) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.log(name).count(text) >= times:
                return
            if self.procs[name].poll() is not None:
                raise ClusterError(f"{name} exited ({self.procs[name].returncode}):\n{self.log(name)[-3000:]}")
            time.sleep(0.2)
        raise ClusterError(f"{name}: no {text!r} within {timeout_s:.0f} s:\n{self.log(name)[-3000:]}")

    def _start_master(self, name: str, timeout_s: float) -> None:
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        extra = {}
        if self.recovery_dir is not None:
            extra["SPARK_MASTER_OPTS"] = (f"-Dspark.deploy.recoveryMode=FILESYSTEM "
                                          f"-Dspark.deploy.recoveryDirectory={self.recovery_dir}")
        self._spawn(name, [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                           "--port", str(self.port), "--webui-port", str(free_port())], extra)
        # a recovering master says "I have been elected leader! New state: RECOVERING", then ALIVE
        self._await(name, "I have been elected leader", timeout_s)

    def restart_master(self, timeout_s: float = 90.0) -> str:
        """kill -9 of the master, and a new one on the same port (no recovery mode: it starts
        empty). Returns the new master's log name; the workers register with it again."""
        old = self.procs["master"]
        os.killpg(old.pid, signal.SIGKILL)
        old.wait(10)
        name = f"master-{len([n for n in self.procs if n.startswith('master')]) + 1}"
        self._start_master(name, timeout_s)
        self.procs["master"] = self.procs.pop(name)
        return name

    def start(self, timeout_s: float = 90.0) -> StandaloneCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        self._start_master("master", timeout_s)
        for i in range(1, self.workers + 1):
            work = self.workdir / f"worker-{i}"
            work.mkdir(exist_ok=True)
            self._spawn(f"worker-{i}", [spark_class, "org.apache.spark.deploy.worker.Worker", self.master_url,
                                        "--host", "127.0.0.1", "--cores", "1", "--memory", self.worker_memory,
                                        "--work-dir", str(work), "--webui-port", str(free_port())])
        self.await_workers(1, timeout_s)
        return self

    def registrations(self, worker: int) -> int:
        """How often the worker joined a master: registered with one, or was taken back by a
        recovering one ("Master has changed")."""
        text = self.log(f"worker-{worker}")
        return text.count("Successfully registered with master") + text.count("Master has changed")

    def await_workers(self, registrations: int, timeout_s: float = 90.0) -> None:
        """Every worker has joined a master `registrations` times (after a master restart: one more)."""
        deadline = time.monotonic() + timeout_s
        for i in range(1, self.workers + 1):
            while self.registrations(i) < registrations:
                if time.monotonic() > deadline:
                    raise ClusterError(f"worker-{i}: joined a master {self.registrations(i)} times, not "
                                       f"{registrations}, within {timeout_s:.0f} s:\n{self.log(f'worker-{i}')[-3000:]}")
                if self.procs[f"worker-{i}"].poll() is not None:
                    raise ClusterError(f"worker-{i} exited:\n{self.log(f'worker-{i}')[-3000:]}")
                time.sleep(0.2)

    def local_conf(self) -> dict[str, str]:
        """What a submission here sets differently from the chart (testbed/chart.py), and why."""
        return {
            # standalone places executors by cores: one per worker (the chart's default is 1 executor)
            "spark.executor.instances": str(self.workers), "spark.cores.max": str(self.workers),
            # everything on loopback, without the web UI's ports
            "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", "spark.ui.enabled": "false",
            # the virtualenv's Python (the image's is on its PATH)
            "spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable,
            # --packages resolves into the cache, not the image's scratch volume
            "spark.jars.ivy": str(cache_root() / "ivy2"),
        }

    def submit_argv(self, command: list[str], submission: Submission | None = None) -> list[str]:
        """spark-submit of a rebalance-monitor command on this cluster with the chart's settings
        (`submission`: a rendered SparkApplication; the chart's defaults when None), as
        spark-operator submits it, but in client mode (a standalone cluster runs no Python driver
        in cluster mode) and with local_conf()."""
        sub = submission or Submission.of(spark_application())     # the chart is rendered once (chart.render)
        if command[:1] == ["run"]:
            assert command[:2] == list(sub.arguments[:2]), (command, sub.arguments)
        conf = {**sub.conf, **self.local_conf()}
        return [str(SPARK_HOME / "bin" / "spark-submit"), "--master", self.master_url,
                *(["--packages", ",".join(sub.packages)] if sub.packages else []),
                *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")],
                str(sub.local_main_file()), *command]

    def submit(self, command: list[str], timeout_s: float = 600.0) -> subprocess.CompletedProcess:
        return subprocess.run(self.submit_argv(command), cwd=ROOT, env=self.env(), capture_output=True, text=True,
                              timeout=timeout_s)

    def executor_logs(self) -> list[Path]:
        """Every executor's stderr: worker-N/app-ID/EXECUTOR-ID/stderr."""
        return sorted(self.workdir.glob("worker-*/app-*/*/stderr"))

    def tasks_per_executor(self, apps_before: AbstractSet[str] = frozenset()) -> dict[str, int]:
        """Tasks each executor ran (its own log), of the applications not in `apps_before`."""
        return {f"{p.parent.parent.name}/{p.parent.name}": p.read_text(errors="replace").count("Running task")
                for p in self.executor_logs() if p.parent.parent.name not in apps_before}

    def worker_pids(self) -> list[int]:
        """The worker processes (the executors they start are their children)."""
        return [proc.pid for name, proc in self.procs.items() if name.startswith("worker-") and proc.poll() is None]

    def executor_pids(self) -> list[int]:
        """The executor JVMs the workers started (CoarseGrainedExecutorBackend)."""
        out = subprocess.run(["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def stop(self) -> None:
        """Every process of the cluster and all in its group (a worker's executors), the workers
        first: SIGTERM, SIGKILL after 20 s (testbed.proc.end_group); a master killed earlier
        (restart_master) too."""
        for proc in reversed(self.spawned):
            end_group(proc.pid, grace=20.0)
            proc.wait(10)


# The last line of scripts/spark-cluster-check, and how each figure combines over the tests.
CHECK_FIGURES = (("executors", min), ("records_equal", all), ("executor_kill_lost", sum),
                 ("executor_kill_doubled", sum), ("driver_kill_equal", all))
CHECK_WANT = {"executors": 2, "records_equal": True, "executor_kill_lost": 0, "executor_kill_doubled": 0,
              "driver_kill_equal": True}


def check_summary(path: Path) -> tuple[str, bool]:
    """(the last line, whether every figure is what it must be) from the figures the tests recorded."""
    return figures.summary(path, [(name, combine, CHECK_WANT[name].__eq__) for name, combine in CHECK_FIGURES])


if __name__ == "__main__":
    summary, passed = check_summary(Path(sys.argv[1]))
    print(summary)
    sys.exit(0 if passed else 1)
