"""`run` stops at once when told to (the stop event; SIGTERM in `rebalance-monitor run`) while its
start-up check cannot reach Kafka. kafka-python blocks there for up to 30 s, so a pod being
stopped would otherwise wait that long (and be killed). No broker and no Spark: the check is
pointed at a loopback port where nothing listens, or at a socket that accepts and never answers."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.kafka_harness import free_port

ROOT = Path(__file__).resolve().parents[2]
BOUND_S = 3.0


def _silent_listener() -> socket.socket:
    """A loopback socket that accepts connections (the kernel's backlog) and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(60)
    return srv


def _kafka_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(("kafka-io", "kafka-topic-check"))]


@pytest.mark.parametrize("kafka", ["nothing listens", "accepts, never answers"])
def test_run_returns_promptly_when_stopped_during_the_kafka_check(tmp_path, kafka):
    from streaming.app.service import run
    from streaming.app.settings import RunSettings, load

    srv = _silent_listener() if kafka == "accepts, never answers" else None
    port = srv.getsockname()[1] if srv else free_port()
    conn = None
    settings = load(RunSettings, metrics_port=free_port(), checkpoint_location=str(tmp_path / "checkpoint"),
                    kafka={"bootstrap_servers": f"127.0.0.1:{port}", "log_topics": ["broker-logs"]})
    before = set(_kafka_threads())
    stop = threading.Event()
    outcome: dict = {}

    def service() -> None:
        outcome["code"] = run(settings, stop)
        outcome["returned"] = time.monotonic()

    thread = threading.Thread(target=service, daemon=True)
    thread.start()
    try:
        if srv:
            conn, _ = srv.accept()    # the check has connected and waits for an answer
        else:
            time.sleep(0.5)           # the check is retrying the refused connection
        assert thread.is_alive(), outcome
        stop.set()
        stopped = time.monotonic()
        thread.join(BOUND_S)
    finally:
        for sock in (conn, srv):
            if sock:
                sock.close()
    took = outcome.get("returned", float("inf")) - stopped
    assert took < BOUND_S, f"run had not returned {BOUND_S} s after its stop event was set"
    assert outcome["code"] == 0
    # The kafka-python client was closed: no IO thread and no check thread left behind.
    assert [t.name for t in _kafka_threads() if t not in before] == []


def test_a_failed_check_leaves_no_kafka_thread_behind():
    """kafka-python starts its IO thread before it bootstraps and leaves it running when that
    fails; `run` retries for as long as Kafka is down, so each attempt must close it."""
    from streaming.spark.sources.kafka import check_topics

    before = set(_kafka_threads())
    problem = check_topics(f"127.0.0.1:{free_port()}", ["broker-logs"], {"bootstrap_timeout_ms": 300})
    assert problem is not None
    assert problem.startswith("cannot reach Kafka at 127.0.0.1:")
    assert [t.name for t in _kafka_threads() if t not in before] == []


def test_sigterm_ends_run_promptly_while_kafka_does_not_answer(tmp_path):
    srv = _silent_listener()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("REBALANCE_MONITOR_METRICS_PORT", None)
    log = tmp_path / "run.log"
    with open(log, "w") as handle:
        proc = subprocess.Popen([sys.executable, "-m", "streaming.app.cli", "run", "--bootstrap-servers",
                                 f"127.0.0.1:{srv.getsockname()[1]}", "--log-topic", "broker-logs",
                                 "--checkpoint", str(tmp_path / "checkpoint"), "--host", "127.0.0.1",
                                 "--port", str(free_port())],
                                cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
    conn = None
    try:
        try:
            conn, _ = srv.accept()    # `run` is in its Kafka check (its signal handlers are set)
        except TimeoutError:
            pytest.fail("run never connected to Kafka:\n" + log.read_text()[-3000:])
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"run was still running {BOUND_S} s after SIGTERM:\n" + log.read_text()[-3000:])
    finally:
        for sock in (conn, srv):
            if sock:
                sock.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, log.read_text()[-3000:]


def _scrape(port: int) -> str:
    import urllib.request
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def _wait_for(condition, what: str, proc: subprocess.Popen, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{what}: not seen (exit {proc.poll()}):\n" + log.read_text()[-3000:])
        time.sleep(0.2)


def test_run_says_kafka_is_down_before_its_first_check_ends(tmp_path):
    """While the first attempt still waits for an answer (the broker accepted and says nothing),
    /metrics already shows source_up 0 and the log says what the monitor is doing; then one
    line per failed attempt with its real duration and the wait before the next, and kafka-python's
    own lines once per kind, not four per reconnection."""
    srv = _silent_listener()
    metrics_port = free_port()
    config = tmp_path / "monitor.toml"
    config.write_text(f"""
metrics_host = "127.0.0.1"
metrics_port = {metrics_port}
checkpoint_location = "{tmp_path / 'checkpoint'}"
[kafka]
bootstrap_servers = "127.0.0.1:{srv.getsockname()[1]}"
log_topics = ["broker-logs"]
[kafka.client]
bootstrap_timeout_ms = 1500
""")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    log = tmp_path / "run.log"
    with open(log, "w") as handle:
        proc = subprocess.Popen([sys.executable, "-m", "streaming.app.cli", "run", "--config", str(config)],
                                cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
    conn = None
    try:
        try:
            conn, _ = srv.accept()    # the first attempt has connected and waits for an answer
        except TimeoutError:
            pytest.fail("run never connected to Kafka:\n" + log.read_text()[-3000:])
        page = _scrape(metrics_port)
        text = log.read_text()
        assert "cannot reach" not in text    # still inside the first attempt
        assert 'rebalance_monitor_source_up{source="broker_log"} 0.0' in page
        assert 'rebalance_monitor_source_up{source="offsets"} 0.0' in page
        assert (f"run: checking Kafka at 127.0.0.1:{srv.getsockname()[1]} for broker-logs, __consumer_offsets "
                f"(each attempt waits up to 2 s for an answer)") in text
        conn.close()
        conn = None
        srv.close()                          # from now on nothing listens: connections are refused
        _wait_for(lambda: "(attempt 3," in log.read_text(), "a third failed attempt", proc, log)
    finally:
        for sock in (conn, srv):
            if sock:
                sock.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "Traceback" not in log.read_text()
    lines = log.read_text().splitlines()
    failures = [line.split(": run: ", 1)[1] for line in lines if "cannot reach Kafka" in line]
    pattern = r"cannot reach Kafka at 127\.0\.0\.1:\d+: .+ \(attempt {n}, (\d+\.\d) s\); next attempt in {wait} s$"
    import re
    for n, (line, wait) in enumerate(zip(failures, ("1", "2", "4")), start=1):
        match = re.match(pattern.format(n=n, wait=wait), line)
        assert match, line
        assert 1.0 <= float(match.group(1)) < 10.0, line    # the attempt's own time (1.5 s bootstrap)
    kafka_python = [line for line in lines if " kafka." in line]
    kinds = {re.sub(r"\d+", "#", line.split(" ", 3)[3]) for line in kafka_python}
    assert len(kafka_python) == len(kinds), "\n".join(kafka_python)   # each kind once (RepeatFilter)
    assert not any(" INFO kafka." in line or " DEBUG kafka." in line for line in lines)
