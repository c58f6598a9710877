"""The driver_memory setting reaches the driver JVM in local mode (issue 15: the chart's -Xmx in
JAVA_TOOL_OPTIONS lost against spark-submit's own -Xmx, the heap stayed at 1 GiB)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
from streaming.app.settings import ReplaySettings, load
from streaming.spark.session import get_spark
settings = load(ReplaySettings)
spark = get_spark(settings.spark_master, settings.shuffle_partitions, driver_memory=settings.driver_memory)
print(spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory() // (1024 * 1024))
spark.stop()
"""


def _max_heap_mib(env_extra: dict[str, str]) -> int:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", **env_extra)
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    return int(result.stdout.strip().splitlines()[-1])


def test_the_default_and_a_configured_driver_memory_are_the_jvm_heap():
    # maxMemory is a little below -Xmx (the JVM keeps one survivor space out of it)
    assert 1800 <= _max_heap_mib({}) <= 2048
    assert 2700 <= _max_heap_mib({"REBALANCE_MONITOR_DRIVER_MEMORY": "3g"}) <= 3072
