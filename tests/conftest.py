"""Shared fixtures: one local SparkSession per test run, replays of the real captures."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))   # tests/ helpers (capture_expectations, ...)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from capture_expectations import FIXTURES, LOG_FILES  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    from streaming.spark import get_spark
    session = get_spark("local[2]", 2)
    yield session
    session.stop()


def capture_inputs(capture: str, cluster: str = "default"):
    from streaming.config import LogInput, OffsetsInput
    logs = [LogInput(path=str(FIXTURES / capture / name), cluster=cluster) for name in LOG_FILES[capture]]
    offsets = [OffsetsInput(path=str(FIXTURES / capture / "offsets-topic.jsonl"), cluster=cluster)]
    return logs, offsets


_REPLAYS: dict = {}


@pytest.fixture(scope="session")
def replay_capture(spark, tmp_path_factory):
    """replay_capture("kafka-2.7") -> (collector, out_dir); each capture runs once per session."""
    from streaming.config import load_settings
    from streaming.driver import replay

    def run(capture: str):
        if capture not in _REPLAYS:
            logs, offsets = capture_inputs(capture)
            out = tmp_path_factory.mktemp(f"replay-{capture}")
            collector = replay(spark, load_settings(), logs, offsets, out_dir=str(out))
            _REPLAYS[capture] = (collector, out)
        return _REPLAYS[capture]
    return run
