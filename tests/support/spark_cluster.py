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
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
ENTRYPOINT = ROOT / "scripts" / "spark_entrypoint.py"
_LIVE: list[subprocess.Popen] = []


def _kill_all() -> None:
    for proc in _LIVE:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


atexit.register(_kill_all)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ClusterError(RuntimeError):
    pass


@dataclass
class StandaloneCluster:
    workdir: Path
    workers: int = 2
    worker_memory: str = "2g"
    # spark.deploy.recoveryMode=FILESYSTEM with this directory: a restarted master takes back
    # the applications and workers the last one had (None: no recovery, a new master starts empty).
    recovery_dir: Path | None = None
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
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

    def submit_argv(self, command: list[str], executor_memory: str = "1g", jars: str | None = None) -> list[str]:
        """spark-submit of a rebalance-monitor command on this cluster (one core per executor);
        `jars`: comma-separated jars for the driver and the executors (--jars)."""
        return [str(SPARK_HOME / "bin" / "spark-submit"), "--master", self.master_url,
                *(["--jars", jars] if jars else []),
                "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
                "--conf", f"spark.pyspark.python={sys.executable}",
                "--conf", f"spark.pyspark.driver.python={sys.executable}",
                "--conf", "spark.executor.cores=1", "--conf", f"spark.cores.max={self.workers}",
                "--conf", "spark.ui.enabled=false",
                "--driver-memory", "2g", "--executor-memory", executor_memory,
                str(ENTRYPOINT), *command]

    def submit(self, command: list[str], timeout_s: float = 600.0) -> subprocess.CompletedProcess:
        return subprocess.run(self.submit_argv(command), cwd=ROOT, env=self.env(), capture_output=True, text=True,
                              timeout=timeout_s)

    def executor_pids(self) -> list[int]:
        """The executor JVMs the workers started (CoarseGrainedExecutorBackend)."""
        out = subprocess.run(["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(20)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait(10)
