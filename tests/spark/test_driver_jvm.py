"""The local driver JVM as the settings make it: driver_memory is its heap (issue 15: the chart's
-Xmx in JAVA_TOOL_OPTIONS lost against spark-submit's own -Xmx, the heap stayed at 1 GiB), and its
garbage collector is the serial one unless spark_conf's extraJavaOptions choose another (issue 25:
docs/design.md, "The local JVM's garbage collector")."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from streaming.app.settings import ReplaySettings, load
from streaming.spark.session import get_spark
settings = load(ReplaySettings, sys.argv[1] or None)
spark = get_spark(settings.spark_master, settings.shuffle_partitions, conf=settings.spark_conf,
                  driver_memory=settings.driver_memory)
jvm = spark.sparkContext._jvm
print(json.dumps({"heap_mib": jvm.java.lang.Runtime.getRuntime().maxMemory() // (1024 * 1024),
                  "collectors": [b.getName() for b in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()]}))
spark.stop()
"""


def _driver_jvm(env_extra: dict[str, str], config: Path | None = None) -> dict:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", **env_extra)
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    result = subprocess.run([sys.executable, "-c", PROBE, str(config or "")], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_default_and_a_configured_driver_memory_are_the_jvm_heap():
    # maxMemory is a little below -Xmx (the JVM keeps one survivor space out of it)
    default = _driver_jvm({})
    assert 1800 <= default["heap_mib"] <= 2048
    assert 2700 <= _driver_jvm({"REBALANCE_MONITOR_DRIVER_MEMORY": "3g"})["heap_mib"] <= 3072
    # the serial collector's two generations: "Copy" (young) and "MarkSweepCompact" (old)
    assert default["collectors"] == ["Copy", "MarkSweepCompact"]


def test_a_collector_chosen_in_spark_conf_is_the_one_the_jvm_runs(tmp_path):
    config = tmp_path / "monitor.toml"
    config.write_text('[spark_conf]\n"spark.driver.extraJavaOptions" = "-XX:+UseG1GC"\n')
    assert _driver_jvm({}, config)["collectors"] == ["G1 Young Generation", "G1 Old Generation"]
