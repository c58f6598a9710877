"""Kafka's own view of a group's lag: `kafka-consumer-groups --describe` run from the bed's broker
jars (ConsumerGroupCommand: `kafka.admin` in core up to 3.6, the kafka-tools jar from 3.7).
The bed compares the monitor's lag gauges with it (tests/e2e/kafka/test_lag_live.py)."""
from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from testbed.bed import jars
from testbed.bed.procs import BedError

DESCRIBE_TIMEOUT_S = 60.0


def command_class(version: str) -> str:
    if jars.parse_version(version) >= (3, 7):
        return "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
    return "kafka.admin.ConsumerGroupCommand"


@dataclass
class Described:
    """One --describe: LAG summed per topic (partitions whose LAG is "-" left out), its text, and
    the wall-clock window it ran in (Unix seconds)."""
    lag: dict[str, int]
    text: str
    started_s: float
    ended_s: float


def parse_describe(text: str) -> dict[str, int]:
    """LAG per topic of --describe's table(s): the columns by the header line's names."""
    lag: dict[str, int] = {}
    header: list[str] | None = None
    for line in text.splitlines():
        cells = line.split()
        if "LAG" in cells and "TOPIC" in cells:
            header = cells
            continue
        if header is None or len(cells) < len(header) - 3:
            continue
        row = dict(zip(header, cells))
        value = row.get("LAG", "-")
        if value.lstrip("-").isdigit() and value != "-":
            lag[row["TOPIC"]] = lag.get(row["TOPIC"], 0) + int(value)
    return lag


def describe_group(cluster, group: str, timeout: float = DESCRIBE_TIMEOUT_S) -> Described:
    """`--describe --group` against the running cluster, from its own jars (one JVM; killed if
    it outlives `timeout`)."""
    cmd = ["java", "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
           "-cp", jars.classpath(cluster._lib_dir()), command_class(cluster.version),
           "--bootstrap-server", cluster.bootstrap, "--describe", "--group", group]
    started = time.time()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=cluster._env())
    except subprocess.TimeoutExpired:
        raise BedError(f"kafka-consumer-groups --describe --group {group} ran over {timeout:.0f} s") from None
    ended = time.time()
    if done.returncode != 0:
        raise BedError(f"kafka-consumer-groups --describe --group {group} failed ({done.returncode}): "
                       f"{(done.stderr or done.stdout)[-800:]}")
    return Described(parse_describe(done.stdout), done.stdout, started, ended)
