"""A full disk under the event sink or the checkpoint (issue 50 item 5; sinks/disk_full.py).

ENOSPC (and EDQUOT) are injected into the files the collector writes: the event sink's parts,
rolled files and counters' snapshot, the statistics parts, and the group state file. Each run
is compared with one without the fault: the same /metrics page and the same records, each once.
The log says it once per episode (no traceback), the gauge is 1 meanwhile and 0 after. A stop
while the disk is full leaves the batch uncommitted, and a restart goes on from there.

The last test fills a real, size-limited tmpfs where the sandbox can mount one (root); it is
skipped, with the reason, where it cannot. The injected faults run everywhere.
"""
from __future__ import annotations

import errno
import json
import logging
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

import sinks.event_sink as event_sink
import sinks.files as files
from sinks.disk_full import CHECKPOINT, SINK, DiskWatch, disk_full_text, is_disk_full
from sinks.event_sink import EventSink
from sinks.files import GroupStateFile
from sinks.metrics import MetricsSink
from state.outputs import OutputKind
from streaming.app.batch_gate import QueryStopping
from streaming.app.collector import RunCollector
from streaming.app.restart import restore
from streaming.app.settings import DEFAULT_DURATION_BUCKETS
from tests.unit.test_bounded_sink import BATCHES, RESTORED, _progress, _rows

KINDS = (OutputKind.REBALANCE, OutputKind.REMOVAL, OutputKind.REBALANCE_TRIGGER, OutputKind.CLOCK_SKEW,
         OutputKind.DECODE_STATS, OutputKind.LOG_STATS)
GAUGE = "rebalance_monitor_disk_full"


class FullDisk:
    """`open` for writing in sinks/files.py and sinks/event_sink.py, failing like a full disk for
    the files whose path contains `where` (once armed): the first chunk is half written, then
    ENOSPC. After `failures` such writes the space is back."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, where: str, failures: int = 3,
                 code: int = errno.ENOSPC) -> None:
        self.where = where
        self.failures = failures
        self.code = code
        self.armed = False
        self.failed: list[str] = []
        self.gauge_seen: list[float] = []       # the gauge at each failed write after the first
        self.watch: DiskWatch | None = None
        for module in (files, event_sink):
            monkeypatch.setattr(module, "open", self.open, raising=False)

    def open(self, path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = open(path, mode, *args, **kwargs)
        if not {"w", "a"} & set(mode) or not self.armed or self.where not in str(path) or self.failures <= 0:
            return handle
        disk = self

        class Full:
            def __enter__(self) -> Full:
                return self

            def __exit__(self, *exc: Any) -> None:
                handle.close()

            def write(self, text: str) -> int:
                handle.write(text[: len(text) // 2])
                handle.flush()
                disk.failures -= 1
                disk.failed.append(str(path))
                if disk.watch is not None and len(disk.failed) > 1:
                    disk.gauge_seen.append(disk.watch.health.disk_full.labels(disk.kind())._value.get())
                raise OSError(disk.code, "No space left on device" if disk.code == errno.ENOSPC
                              else "Disk quota exceeded", str(path))

            def writelines(self, lines: Any) -> None:
                self.write("".join(lines))
        return Full()

    def kind(self) -> str:
        return CHECKPOINT if "groups" in self.where else SINK


def _collector(workdir: Path, disk: FullDisk | None = None, retry_seconds: float = 0.0,
               max_bytes: int | None = None) -> RunCollector:
    metrics = MetricsSink(DEFAULT_DURATION_BUCKETS)
    watch = DiskWatch(metrics.health, {SINK: str(workdir / "events"), CHECKPOINT: str(workdir / "checkpoint")},
                      retry_seconds=retry_seconds)
    events = EventSink(str(workdir / "events"), roll_seconds=0.0, max_bytes=max_bytes)
    collector = RunCollector(metrics, keep_records=False, event_sink=events,
                             state_file=GroupStateFile(str(workdir / "checkpoint" / "groups.json")),
                             batch_rows=lambda rows, _batch: rows, disk=watch)
    collector.snapshot_seconds = 0.0         # a snapshot and a roll after every batch: every write each time
    restore(collector)
    if disk is not None:
        disk.watch = watch
    return collector


def _page(collector: RunCollector) -> list[str]:
    text = generate_latest(collector.metrics.registry).decode()
    return sorted(line for line in text.splitlines() if line.startswith(RESTORED))


def _records(workdir: Path) -> dict[str, list[str]]:
    sink = EventSink(str(workdir / "events"))
    return {kind: sorted(json.dumps(r, sort_keys=True) for r in sink.records(kind)) for kind in KINDS}


def _run(collector: RunCollector, batches: range, disk: FullDisk | None = None, full_at: int = -1) -> None:
    for batch in batches:
        if disk is not None:
            disk.armed = batch == full_at
        collector.foreach_batch(_rows(batch), batch)
        collector.count_progress(_progress(batch))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[list[str], dict[str, list[str]]]:
    workdir = tmp_path_factory.mktemp("uninterrupted")
    collector = _collector(workdir)
    _run(collector, range(BATCHES))
    assert collector.metrics.health.disk_full_writes.labels(SINK)._value.get() == 0
    return _page(collector), _records(workdir)


def _disk_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "disk full at" in r.getMessage() or "disk space is back" in r.getMessage()]


def _leftovers(workdir: Path) -> list[str]:
    return sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*.tmp"))


# which file is full: a batch's parts (rebalances/), the group state file (the checkpoint), the
# counters' snapshot, the rolled files (written by maintain_sink after the batch), a statistics part
@pytest.mark.parametrize("where, code", [
    ("rebalances/batch-", errno.ENOSPC), ("groups", errno.ENOSPC), ("counters", errno.ENOSPC),
    ("rolled-", errno.ENOSPC), ("decode_stats/batch-", errno.ENOSPC), ("member_removals/batch-", errno.EDQUOT)])
def test_a_full_disk_is_waited_out_in_the_batch_and_loses_nothing(tmp_path, monkeypatch, caplog, uninterrupted,
                                                                  where, code):
    disk = FullDisk(monkeypatch, where, failures=3, code=code)
    collector = _collector(tmp_path, disk)
    with caplog.at_level(logging.INFO):
        _run(collector, range(BATCHES), disk, full_at=5)
    assert len(disk.failed) == 3, "the fault did not fire"
    assert (_page(collector), _records(tmp_path)) == uninterrupted
    health = collector.metrics.health
    kind = disk.kind()
    assert disk.gauge_seen == [1.0, 1.0]       # 1 while it waits
    assert health.disk_full.labels(kind)._value.get() == 0      # 0 once written
    assert health.disk_full.labels(CHECKPOINT if kind == SINK else SINK)._value.get() == 0
    assert health.disk_full_writes.labels(kind)._value.get() == 3
    assert collector.last_batch_id == BATCHES - 1
    reason = "No space left on device" if code == errno.ENOSPC else "Disk quota exceeded"
    path = tmp_path / ("checkpoint" if kind == CHECKPOINT else "events")
    lines = _disk_lines(caplog)
    assert [r.getMessage() for r in lines][1:] == [f"run: disk space is back at {path}: resumed at batch 5"]
    waits = "the statistics of batch 5 wait in memory" if "stats" in where else "batch 5 waits uncommitted (nothing is lost)"
    assert lines[0].getMessage() == (f"run: disk full at {path} ({reason}): {waits}; /metrics keeps serving; "
                                     "retrying every 0 s")
    assert all(r.exc_info is None for r in caplog.records)
    assert "Traceback" not in caplog.text
    assert _leftovers(tmp_path) == []             # no half-written temp file left behind


def test_a_batch_write_that_fails_leaves_none_of_the_batch_parts(tmp_path, monkeypatch):
    """The parts of one batch appear together: a full disk at its second kind leaves not even
    the first (a restart would otherwise count half a batch as in the sink)."""
    disk = FullDisk(monkeypatch, "member_removals/", failures=1)
    disk.armed = True
    sink = EventSink(str(tmp_path))
    records: dict[str, list[dict]] = {OutputKind.REBALANCE: [{"cluster": "c", "group": "g", "generation": 1}],
               OutputKind.REMOVAL: [{"cluster": "c", "group": "g", "member_id": "m"}]}
    with pytest.raises(OSError) as raised:
        sink.write_batch(7, records)
    assert is_disk_full(raised.value)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == []
    assert sink.last_batch_id() == -1 and EventSink(str(tmp_path)).last_batch_id() == -1
    sink.write_batch(7, records)             # space is back
    assert [r["generation"] for r in EventSink(str(tmp_path)).records(OutputKind.REBALANCE)] == [1]


@pytest.mark.parametrize("where", ["rebalances/batch-", "groups", "counters"])
def test_a_stop_while_the_disk_is_full_leaves_the_batch_uncommitted_and_a_restart_goes_on(
        tmp_path, monkeypatch, caplog, uninterrupted, where):
    disk = FullDisk(monkeypatch, where, failures=10 ** 9)      # full until the stop
    first = _collector(tmp_path, disk, retry_seconds=0.05)
    _run(first, range(5))
    disk.armed = True
    outcome: dict[str, Any] = {}

    def batch() -> None:
        try:
            first.foreach_batch(_rows(5), 5)
        except QueryStopping as exc:
            outcome["stopped"] = exc
    thread = threading.Thread(target=batch)
    with caplog.at_level(logging.INFO):
        thread.start()
        deadline = time.monotonic() + 10
        while len(disk.failed) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert first.metrics.health.disk_full.labels(disk.kind())._value.get() == 1
        assert first.gate.close(5.0), "foreachBatch did not give up waiting at the stop"
        thread.join(5)
    assert "stopped" in outcome            # Spark does not commit batch 5: it runs again at the next start
    assert len(_disk_lines(caplog)) == 1   # the episode's line, once for all its retries
    assert "Traceback" not in caplog.text
    assert _leftovers(tmp_path) == []
    disk.armed = False                      # space is back; a new process restores and Spark re-runs batch 5
    second = _collector(tmp_path)
    _run(second, range(5, BATCHES))
    assert (_page(second), _records(tmp_path)) == uninterrupted


def test_a_restart_with_a_lower_events_max_bytes_frees_the_disk_at_start(tmp_path, uninterrupted, caplog):
    """Retention runs at start too: the runbook's way to free a full disk without a roll (which
    first needs room for the rolled file). The counters keep what it deletes."""
    _run(_collector(tmp_path), range(BATCHES))
    events = tmp_path / "events"
    assert list(events.rglob("rolled-*.jsonl"))
    with caplog.at_level(logging.INFO):
        restarted = _collector(tmp_path, max_bytes=1)
    assert list(events.rglob("rolled-*.jsonl")) == []
    assert list(events.rglob("batch-*.jsonl"))            # parts are never deleted
    assert "deleted (events_retention_days, events_max_bytes)" in caplog.text
    assert _page(restarted) == uninterrupted[0]


def test_spark_checkpoint_writes_on_a_full_disk_restart_the_query_at_a_steady_pace(tmp_path, caplog):
    """The query's own writes (offsets, commits, state store) fail inside Spark: `run` notes the
    episode once however often it restarts the query, and the next batch Spark reports ends it."""
    from streaming.app.service import _query_failed
    collector = _collector(tmp_path)
    _run(collector, range(3))
    failure = Exception("[STREAM_FAILED] Query terminated with exception: Job aborted\nCaused by: "
                        "java.io.IOException: No space left on device\n\tat java.base/java.io.FileOutputStream.writeBytes")
    watch = collector.disk
    assert watch is not None
    with caplog.at_level(logging.INFO):
        waits = [_query_failed(failure, watch, collector.last_batch_id) for _ in range(4)]
        assert waits == [watch.retry_seconds] * 4
        assert watch.health.disk_full.labels(CHECKPOINT)._value.get() == 1
        collector.count_progress(_progress(2))       # a late report of a batch before the failure
        assert watch.health.disk_full.labels(CHECKPOINT)._value.get() == 1
        _run(collector, range(3, 5))
    assert watch.health.disk_full.labels(CHECKPOINT)._value.get() == 0
    assert watch.health.disk_full_writes.labels(CHECKPOINT)._value.get() == 4
    assert [r.getMessage() for r in _disk_lines(caplog)] == [
        f"run: disk full at {tmp_path / 'checkpoint'} (No space left on device): Spark's checkpoint writes failed "
        "(or those in spark.local.dir); batch 3 is not committed (nothing is lost); /metrics keeps serving; "
        "restarting the query from its checkpoint every 0 s",
        f"run: disk space is back at {tmp_path / 'checkpoint'}: resumed at batch 3"]
    assert _query_failed(Exception("java.lang.IllegalStateException: boom"), watch, 4) is None


def test_the_words_of_a_full_disk():
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not is_disk_full(ValueError("No space left on device"))
    assert disk_full_text("a\nCaused by: java.io.IOException: Disk quota exceeded") == "Disk quota exceeded"
    assert disk_full_text("a Python function of the query raised OSError: [Errno 28] No space left on device: 'x'") \
        == "No space left on device"
    assert disk_full_text("java.io.IOException: Broken pipe") is None


# --- a real full disk: a size-limited tmpfs (root, and a sandbox that allows mounts) --------------
@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here ({(result.stderr or result.stdout).strip()}); "
                    "the injected-ENOSPC tests above cover the same paths")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_really_full_tmpfs_is_waited_out_and_loses_nothing(small_disk, caplog, uninterrupted):
    """Events and checkpoint on a 4 MB tmpfs: a filler file takes all the space while batch 5
    runs; the batch waits (gauge 1, one line), the filler goes, the batch goes on."""
    collector = _collector(small_disk, retry_seconds=0.02)
    _run(collector, range(5))
    filler = small_disk / "filler"
    with open(filler, "wb", buffering=0) as handle:
        for chunk in (65536, 4096, 1):          # to the last byte: not even a small part fits
            try:
                while True:
                    handle.write(b"\0" * chunk)
            except OSError as exc:
                assert is_disk_full(exc)
    done = threading.Event()

    def batch() -> None:
        collector.foreach_batch(_rows(5), 5)
        done.set()
    with caplog.at_level(logging.INFO):
        thread = threading.Thread(target=batch)
        thread.start()
        deadline = time.monotonic() + 10
        while collector.metrics.health.disk_full.labels(SINK)._value.get() != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert collector.metrics.health.disk_full.labels(SINK)._value.get() == 1
        assert not done.is_set()
        filler.unlink()
        thread.join(10)
        assert done.is_set()
        collector.count_progress(_progress(5))
        _run(collector, range(6, BATCHES))
    assert collector.metrics.health.disk_full.labels(SINK)._value.get() == 0
    assert (_page(collector), _records(small_disk)) == uninterrupted
    assert [r.getMessage().split(" (")[0] for r in _disk_lines(caplog)] == [
        f"run: disk full at {small_disk / 'events'}", f"run: disk space is back at {small_disk / 'events'}: resumed at batch 5"]
    assert "Traceback" not in caplog.text and _leftovers(small_disk) == []
