"""`rebalance-monitor run` on full disks (issue 50 item 5): the checkpoint and the event sink are
each a small tmpfs, both filled to the last byte before `run` starts. Spark's checkpoint writes
fail first (the query is restarted every 15 s), then, once the checkpoint has room, the
collector's writes to the sink (the batch waits uncommitted). /metrics answers throughout with
the gauge; the log says each episode once; when the sink has room too, the Kafka 2.7 capture's
every rebalance and removal is in the sink, once, and the input counters are exact.

Needs root and a sandbox that allows mounts; skipped, with the reason, where it cannot mount
(tests/unit/test_disk_full.py injects the same faults everywhere)."""
from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_live_kafka import LOG_TOPIC, OFFSETS_TOPIC, _config, _scrape, _start, _stop, _wait
from tests.support.kafka_harness import create_topics, free_port, produce_capture, read_sink, tansu_broker
from tests.support.readme_checks import assert_kafka27_rebalances, assert_kafka27_removals

pytestmark = pytest.mark.spark


@pytest.fixture
def small_disks(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """tmp_path/events (16 MB) and tmp_path/checkpoint (64 MB), each its own tmpfs."""
    mounted: list[Path] = []
    try:
        for name, size in (("events", "16m"), ("checkpoint", "64m")):
            path = tmp_path / name
            path.mkdir()
            result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                pytest.skip(f"cannot mount a size-limited tmpfs here ({(result.stderr or result.stdout).strip()}); "
                            "tests/unit/test_disk_full.py injects ENOSPC instead")
            mounted.append(path)
        yield tmp_path / "events", tmp_path / "checkpoint"
    finally:
        for path in mounted:
            subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(disk: Path) -> Path:
    """A file that takes every free byte of `disk`."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as handle:
        for chunk in (1 << 20, 4096, 1):
            try:
                while True:
                    handle.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == 28, exc
    return filler


def _gauge(page: str, path: str) -> float:
    match = re.search(rf'^rebalance_monitor_disk_full\{{path="{path}"\}} (\S+)$', page, flags=re.M)
    assert match, page
    return float(match.group(1))


def _restarts(page: str) -> float:
    match = re.search(r"^rebalance_monitor_query_restarts_total (\S+)$", page, flags=re.M)
    assert match, page
    return float(match.group(1))


def test_run_waits_out_a_full_checkpoint_and_a_full_sink_and_loses_nothing(tmp_path, small_disks):
    events, checkpoint = small_disks
    with tansu_broker() as bootstrap:
        create_topics(bootstrap, {LOG_TOPIC: 2, OFFSETS_TOPIC: 10})
        assert produce_capture(bootstrap, "kafka-2.7", LOG_TOPIC, OFFSETS_TOPIC) == (3486, 1606)
        port = free_port()
        config = _config(tmp_path / "monitor.toml", bootstrap, port, tmp_path, lateness_seconds=5)
        log = tmp_path / "run.log"
        fillers = {"checkpoint": _fill(checkpoint), "sink": _fill(events)}
        proc = _start(config, log)
        try:
            text = lambda: log.read_text()       # noqa: E731
            _wait(lambda: f"run: disk full at {checkpoint} (No space left on device)" in text(),
                  "the checkpoint's episode", proc, log)
            # the query is restarted every 15 s meanwhile: still one line
            _wait(lambda: _restarts(_scrape(port)) >= 2, "a second restart", proc, log, timeout=120)
            page = _scrape(port)
            assert (_gauge(page, "checkpoint"), _gauge(page, "sink")) == (1.0, 0.0)
            fillers["checkpoint"].unlink()
            _wait(lambda: f"run: disk full at {events} (No space left on device)" in text(),
                  "the sink's episode", proc, log, timeout=120)
            time.sleep(20)                        # retries of the sink's writes: still one line
            page = _scrape(port)                  # /metrics answers while the batch waits
            assert (_gauge(page, "checkpoint"), _gauge(page, "sink")) == (0.0, 1.0)
            assert "rebalance_monitor_disk_full_writes_total" in page
            fillers["sink"].unlink()
            _wait(lambda: len(read_sink(events, "rebalances")) >= 82, "82 rebalances", proc, log)
            time.sleep(3)
            page = _scrape(port)
        finally:
            _stop(proc)
    output = log.read_text()
    ours = [line for line in output.splitlines() if "disk full at" in line or "disk space is back" in line]
    assert len(ours) == 4, ours
    assert f"run: disk space is back at {checkpoint}: resumed at batch" in ours[1], ours
    # The checkpoint's episode starts at whichever write meets the full disk first: Spark's own
    # (the query stops) or the group state file's (the batch waits); either says it once.
    assert f"run: disk full at {checkpoint} (No space left on device)" in ours[0], ours
    assert "Spark's checkpoint writes failed" in ours[0] or "is not committed" in ours[0], ours
    # The sink's likewise: a batch's parts (it waits uncommitted) or a report's statistics (they
    # wait in memory), whichever is written first.
    assert f"run: disk full at {events} (No space left on device)" in ours[2], ours
    assert "waits uncommitted" in ours[2] or "wait in memory" in ours[2], ours
    assert f"run: disk space is back at {events}: resumed at batch" in ours[3], ours
    assert "run: streaming query stopped" not in output          # the episode's line instead
    assert "Traceback (most recent call last)" not in output    # no Python traceback
    assert (_gauge(page, "checkpoint"), _gauge(page, "sink")) == (0.0, 0.0)
    assert_kafka27_rebalances(read_sink(events, "rebalances"))  # each once
    assert_kafka27_removals(read_sink(events, "member_removals"))
    assert 'rebalance_monitor_input_records_total{source="broker_log"} 3486.0' in page
    assert 'rebalance_monitor_input_records_total{source="offsets"} 1606.0' in page
    assert list(events.rglob("*.tmp")) == [] and list((checkpoint / "rebalance-monitor").glob("*.tmp")) == []
