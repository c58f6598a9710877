"""Shared fixtures: one local SparkSession per test run, replays of the real captures."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support.capture_expectations import capture_inputs
# No process outlives the run (issue 52): the session fails naming any that is left after the
# last fixture's teardown (tests/support/leftovers.py).
from tests.support.leftovers import pytest_configure, pytest_sessionfinish  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark():
    from streaming.spark.session import get_spark
    session = get_spark("local[2]", 2)
    yield session
    session.stop()


_REPLAYS: dict = {}


@pytest.fixture(scope="session")
def replay_capture(spark, tmp_path_factory):
    """replay_capture("kafka-2.7") -> (collector, out_dir); each capture runs once per session."""
    from streaming.app.replay import replay
    from streaming.app.settings import ReplaySettings, load

    def run(capture: str):
        if capture not in _REPLAYS:
            logs, offsets = capture_inputs(capture)
            out = tmp_path_factory.mktemp(f"replay-{capture}")
            collector = replay(spark, load(ReplaySettings), logs, offsets, out_dir=str(out))
            _REPLAYS[capture] = (collector, out)
        return _REPLAYS[capture]
    return run


@pytest.fixture(scope="session")
def demo_server(tmp_path_factory):
    """`rebalance-monitor demo --port N` (python -m streaming.app.cli), started once per session and
    waited for until its replay is done; it keeps serving /metrics until the session ends.
    Yields (port, directory holding demo.stdout, demo.stderr and the demo's outputs in out/)."""
    import socket
    import subprocess
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = tmp_path_factory.mktemp("demo")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    env.pop("REBALANCE_MONITOR_METRICS_PORT", None)
    # Two groups with their own duration histograms (the group dashboard's per-group panels).
    env["REBALANCE_MONITOR_GROUP_HISTOGRAMS"] = '["sc11-stuck-in-rebalance", "k4-sc09-.*"]'
    log = folder / "demo.stderr"
    with open(log, "w") as err, open(folder / "demo.stdout", "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "streaming.app.cli", "demo", "--port", str(port),
                                 "--out", str(folder / "out")],
                                cwd=ROOT, env=env, stdout=out, stderr=err)
    try:
        deadline = time.monotonic() + 300
        while "input consumed" not in log.read_text():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "demo did not finish its replay in 300 s"
            time.sleep(0.5)
        yield port, folder
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def pytest_addoption(parser):
    parser.addoption("--spark-cluster-check", action="store_true",
                     help="also collect the long Spark-cluster tests (marker spark_cluster_check), which "
                          "scripts/spark-cluster-check runs outside CI's time budget")


def pytest_collection_modifyitems(session, config, items):
    """Run the Prometheus end-to-end tests first: their `run` target needs ~30 s to report its
    Kafka source down, which then overlaps the demo's replay (demo_server, shared with test_cli)
    instead of adding to the suite's time. The spark_cluster_check tests are deselected (counted
    as such in pytest's summary) unless --spark-cluster-check asks for them."""
    if not config.getoption("--spark-cluster-check"):
        later = [item for item in items if item.get_closest_marker("spark_cluster_check")]
        if later:
            config.hook.pytest_deselected(items=later)
            items[:] = [item for item in items if not item.get_closest_marker("spark_cluster_check")]
    items.sort(key=lambda item: 0 if item.nodeid.startswith("tests/e2e/test_prometheus_e2e.py") else 1)
    for item in items:   # everything under tests/spark/ starts a SparkSession
        if item.nodeid.startswith("tests/spark/"):
            item.add_marker(pytest.mark.spark)
