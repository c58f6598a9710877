"""The group state file saved as changes (sinks/files.py GroupStateFile): a batch writes what it
changed, not every group; a restart reads exactly what was saved, whatever the crash; and groups
that come and go leave it (RunCollector.forget_dead_groups)."""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from sinks.files import GroupStateFile, SavedState
from sinks.metrics import MetricsSink
from state.outputs import OutputKind
from streaming.app.collector import RunCollector
from streaming.app.restart import restore
from streaming.rows import loads_json

GROUPS = 10_000


def _snap(i: int, generation: int = 1, state: str = "Stable") -> dict:
    return {"cluster": "c", "group": f"g{i:05d}", "protocol": "classic", "state": state, "generation": generation,
            "member_count": 3, "state_since_ms": 1_700_000_000_000 + generation, "members": [],
            "last_commit_ms": 1_700_000_000_000 + generation}


def _fleet() -> dict[tuple[str, str], dict]:
    return {("c", s["group"]): s for s in (_snap(i) for i in range(GROUPS))}


def _same(saved: SavedState, batch_id: int, snapshots: dict, correlator: dict | None, timeouts: dict) -> None:
    assert saved.batch_id == batch_id
    assert saved.groups == snapshots
    assert saved.correlator == correlator
    assert saved.timeouts == timeouts


def test_a_batch_that_changes_three_of_ten_thousand_groups_writes_three(tmp_path):
    state = GroupStateFile(str(tmp_path / "groups.json"))
    snapshots = _fleet()
    state.save(0, snapshots, None, {}, set(snapshots), set())          # first save: the whole file
    whole = (tmp_path / "groups.json").stat()
    for batch in range(1, 11):
        changed = {("c", f"g{(batch * 7 + k) % GROUPS:05d}") for k in range(3)}
        for key in changed:
            snapshots[key] = _snap(int(key[1][1:]), generation=batch + 1)
        state.save(batch, snapshots, {"pending": [], "clock_ms": batch}, {}, changed, set())
    after = (tmp_path / "groups.json").stat()
    assert (after.st_ino, after.st_mtime_ns) == (whole.st_ino, whole.st_mtime_ns)     # not rewritten
    journal = state.journal_path.read_text().splitlines()
    assert len(journal) == 10 and all(len(json.loads(line)["groups"]) == 3 for line in journal)
    assert state.journal_path.stat().st_size < whole.st_size / 50
    _same(GroupStateFile(str(tmp_path / "groups.json")).read(), 10, snapshots, {"pending": [], "clock_ms": 10}, {})


def test_the_journal_is_folded_into_the_file_once_it_outgrows_it(tmp_path):
    """Writes stay within about twice the changes (each change once in the journal, and once in
    the rewrite it causes), and the journal a restart reads stays smaller than the file."""
    state = GroupStateFile(str(tmp_path / "groups.json"), min_compact_bytes=0)
    snapshots = dict(list(_fleet().items())[:200])
    state.save(0, snapshots, None, {}, None, None)
    file_bytes = (tmp_path / "groups.json").stat().st_size
    written = changes = rewrites = 0
    for batch in range(1, 400):
        changed = {("c", f"g{random.Random(batch * 31 + k).randrange(200):05d}") for k in range(20)}
        for key in changed:
            snapshots[key] = _snap(int(key[1][1:]), generation=batch + 1)
        journal_before = state.journal_path.stat().st_size
        inode = (tmp_path / "groups.json").stat().st_ino
        state.save(batch, snapshots, None, {}, changed, set())
        line = len(state.journal_path.read_text().splitlines()[-1]) if state.journal_path.stat().st_size else 0
        changes += sum(len(json.dumps(snapshots[k], separators=(",", ":"))) for k in changed)
        if (tmp_path / "groups.json").stat().st_ino != inode:
            rewrites += 1
            written += file_bytes + (state.journal_path.stat().st_size - journal_before)
        else:
            written += state.journal_path.stat().st_size - journal_before
            assert state.journal_path.stat().st_size == journal_before + line + 1
        assert state.journal_path.stat().st_size <= max(file_bytes, 0) + line + 1
    assert rewrites >= 10
    assert written <= 2.5 * changes
    _same(GroupStateFile(str(tmp_path / "groups.json")).read(), 399, snapshots, None, {})


def test_random_batches_read_back_exactly_after_any_restart(tmp_path):
    """Changed, new and forgotten groups, timeouts set and dropped, rewrites on the way: after each
    batch a restarted reader (a new GroupStateFile) gets what an always-whole file would hold."""
    rng = random.Random(7)
    path = str(tmp_path / "groups.json")
    state = GroupStateFile(path, min_compact_bytes=4_000)
    snapshots: dict = {}
    timeouts: dict = {}
    for batch in range(300):
        changed: set[tuple[str, str]] = set()
        changed_timeouts: set[str] = set()
        for _ in range(rng.randrange(6)):
            i = rng.randrange(60)
            key = ("c", f"g{i:05d}")
            if rng.random() < 0.2:
                snapshots.pop(key, None)
            else:
                snapshots[key] = _snap(i, generation=batch)
            changed.add(key)
        for _ in range(rng.randrange(4)):
            timeout_key = f"c\t{rng.randrange(30)}"
            if rng.random() < 0.3:
                timeouts.pop(timeout_key, None)
            else:
                timeouts[timeout_key] = batch * 1000
            changed_timeouts.add(timeout_key)
        correlator = {"pending": [], "clock_ms": batch}
        state.save(batch, snapshots, correlator, timeouts, changed, changed_timeouts)
        _same(GroupStateFile(path).read(), batch, snapshots, correlator, timeouts)


def test_a_torn_last_line_is_the_uncommitted_batch_and_the_next_process_rewrites(tmp_path):
    path = tmp_path / "groups.json"
    state = GroupStateFile(str(path))
    snapshots = {("c", "g00001"): _snap(1)}
    state.save(0, snapshots, None, {}, None, None)
    snapshots[("c", "g00002")] = _snap(2)
    state.save(1, snapshots, None, {}, {("c", "g00002")}, set())
    with open(state.journal_path, "a", encoding="utf-8") as handle:
        handle.write('{"batch_id":2,"groups":[{"cluster":"c","gro')     # the crash
    restarted = GroupStateFile(str(path))
    _same(restarted.read(), 1, snapshots, None, {})
    snapshots[("c", "g00003")] = _snap(3)
    restarted.save(2, snapshots, None, {}, {("c", "g00003")}, set())   # batch 2 again: a whole file
    assert state.journal_path.read_text() == ""
    _same(GroupStateFile(str(path)).read(), 2, snapshots, None, {})


@pytest.mark.parametrize("parse", [json.loads, loads_json], ids=["json", "loads_json"])
def test_a_line_torn_inside_a_character_ends_the_journal_too(tmp_path, parse):
    """A crash mid-write can cut a group name's UTF-8 bytes in two: that line is the uncommitted
    batch's, as any torn line (read as text, it raised UnicodeDecodeError and the restart failed)."""
    path = tmp_path / "groups.json"
    state = GroupStateFile(str(path), parse=parse)
    snapshots = {("c", "g00001"): _snap(1)}
    state.save(0, snapshots, None, {}, None, None)
    snapshots[("c", "g00002")] = dict(_snap(2), group="größe")
    state.save(1, snapshots, None, {}, {("c", "g00002")}, set())
    line = '{"batch_id":2,"groups":[{"cluster":"c","group":"ö'.encode()
    with open(state.journal_path, "ab") as handle:
        handle.write(line[:-1])                       # the crash: half of "ö"
    saved = GroupStateFile(str(path), parse=parse).read()
    assert saved.batch_id == 1 and set(saved.groups) == {("c", "g00001"), ("c", "größe")}


def test_a_crash_between_the_rewrite_and_the_empty_journal_repeats_nothing(tmp_path):
    path = tmp_path / "groups.json"
    state = GroupStateFile(str(path))
    snapshots = {("c", "g00001"): _snap(1)}
    state.save(0, snapshots, None, {}, None, None)
    snapshots[("c", "g00001")] = _snap(1, generation=2)
    state.save(1, snapshots, None, {"c\t1": 5}, {("c", "g00001")}, {"c\t1"})
    journal = state.journal_path.read_text()
    del snapshots[("c", "g00001")]
    state.save(2, snapshots, None, {}, None, None)          # the file holds batch 2 (g00001 forgotten)
    state.journal_path.write_text(journal)                 # ... and the journal was not emptied
    _same(GroupStateFile(str(path)).read(), 2, {}, None, {})


def test_a_failed_append_makes_the_next_save_rewrite(tmp_path, monkeypatch):
    """A full disk mid-line leaves a torn line: the batch fails, Spark runs it again, and that
    save (the same process) writes the whole file instead of appending after the torn line."""
    path = tmp_path / "groups.json"
    state = GroupStateFile(str(path))
    snapshots = {("c", "g00001"): _snap(1)}
    state.save(0, snapshots, None, {}, None, None)
    snapshots[("c", "g00002")] = _snap(2)
    real_open = open

    class Torn:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, text):
            self.handle.write(text[:10])
            raise OSError(28, "No space left on device")

    monkeypatch.setattr("builtins.open", lambda file, mode="r", **kw: Torn(real_open(file, mode, **kw))
                        if str(file).endswith(".changes.jsonl") and mode == "a" else real_open(file, mode, **kw))
    with pytest.raises(OSError):
        state.save(1, snapshots, None, {}, {("c", "g00002")}, set())
    monkeypatch.undo()
    state.save(1, snapshots, None, {}, {("c", "g00002")}, set())
    assert state.journal_path.read_text() == ""
    _same(GroupStateFile(str(path)).read(), 1, snapshots, None, {})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Rows:
    """A batch's output rows as foreachBatch gets them (batch_rows reads them as (kind, text))."""
    def __init__(self, *records: tuple[str, dict]):
        self.rows = [(str(kind), json.dumps(record)) for kind, record in records]


def test_groups_that_come_and_go_leave_the_state_file(tmp_path):
    """1,000 one-off groups (a console consumer each) go Dead; after the retention their series
    and snapshots go, and a restart holds only the groups still alive or dead within it. A group
    that came back since keeps its new snapshot."""
    clock = Clock()
    metrics = MetricsSink([1.0], registry=CollectorRegistry(), dead_group_retention_seconds=600, clock=clock)
    path = str(tmp_path / "groups.json")
    collector = RunCollector(metrics, keep_records=False, state_file=GroupStateFile(path),
                             batch_rows=lambda rows, _batch: rows.rows)
    collector.foreach_batch(Rows(*((OutputKind.SNAPSHOT, _snap(i, state="Stable")) for i in range(1000))), 0)
    collector.foreach_batch(Rows(*((OutputKind.SNAPSHOT, _snap(i, 2, state="Dead")) for i in range(1, 1000))), 1)
    clock.now += 300
    collector.foreach_batch(Rows((OutputKind.SNAPSHOT, _snap(5000, state="Dead"))), 2)
    clock.now += 301
    metrics.sweep()                                   # `run` sweeps every second
    collector.foreach_batch(Rows((OutputKind.SNAPSHOT, _snap(7, 3, state="Empty"))), 3)    # g00007 is back
    kept = {("c", "g00000"), ("c", "g00007"), ("c", "g05000")}
    assert set(collector.snapshots) == kept
    assert collector.snapshots[("c", "g00007")]["state"] == "Empty"
    restarted = RunCollector(MetricsSink([1.0], registry=CollectorRegistry()), keep_records=False,
                             state_file=GroupStateFile(path))
    assert restore(restarted) == 3
    assert set(restarted.snapshots) == kept
    assert os.path.getsize(path) + os.path.getsize(Path(path).with_name("groups.changes.jsonl")) < 20_000


def test_a_replay_keeps_every_group(tmp_path):
    clock = Clock()
    metrics = MetricsSink([1.0], registry=CollectorRegistry(), dead_group_retention_seconds=1, clock=clock)
    collector = RunCollector(metrics, keep_records=True, batch_rows=lambda rows, _batch: rows.rows)
    collector.foreach_batch(Rows((OutputKind.SNAPSHOT, _snap(1, state="Dead"))), 0)
    clock.now += 5
    metrics.sweep()
    collector.foreach_batch(Rows((OutputKind.SNAPSHOT, _snap(2))), 1)
    assert set(collector.snapshots) == {("c", "g00001"), ("c", "g00002")}
    assert metrics.take_forgotten() == []             # taken (and ignored) by the batch


def test_a_restart_gives_the_slots_under_max_groups_to_the_groups_that_had_them(tmp_path):
    """max_groups 2: g00001 and g00002 take the slots with their rebalance records, g00000 is
    folded into __other__, and the state file lists g00000 first (its snapshot came first). After
    a restart the same two groups have their series, counters and gauges, and g00000 none: the
    slots were not given to the state file's first groups, which left g00002 with counters beyond
    the cap and no gauges (bench/soak after each weekly restart)."""
    from prometheus_client import generate_latest

    from sinks.event_sink import EventSink
    from tests.support.report_pages import records as golden

    def collector() -> RunCollector:
        made = RunCollector(MetricsSink([1.0], registry=CollectorRegistry(), max_groups=2), keep_records=False,
                            state_file=GroupStateFile(str(tmp_path / "groups.json")),
                            event_sink=EventSink(str(tmp_path / "events"), roll_seconds=1e12),
                            batch_rows=lambda rows, _batch: rows.rows)
        made.snapshot_seconds = 0.0           # the counters' snapshot after every batch
        return made

    def groups_with(page: str, family: str) -> set[str]:
        return {line.split('group="', 1)[1].split('"', 1)[0] for line in page.splitlines()
                if line.startswith(family + "{") and 'group="' in line}
    rebalance = golden("rebalances.jsonl")[0]
    first = collector()
    restore(first)
    first.foreach_batch(Rows(*[(OutputKind.REBALANCE, dict(rebalance, cluster="c", group=f"g{i:05d}")) for i in (1, 2)],
                             *[(OutputKind.SNAPSHOT, _snap(i)) for i in (0, 1, 2)]), 0)
    before = generate_latest(first.metrics.registry).decode()
    assert groups_with(before, "rebalance_monitor_rebalances_total") == {"g00001", "g00002"}
    assert groups_with(before, "rebalance_monitor_group_state") == {"g00001", "g00002"}
    assert next(iter(GroupStateFile(str(tmp_path / "groups.json")).read().groups)) == ("c", "g00000")
    restarted = collector()
    restore(restarted)
    after = generate_latest(restarted.metrics.registry).decode()
    assert groups_with(after, "rebalance_monitor_rebalances_total") == {"g00001", "g00002"}
    assert groups_with(after, "rebalance_monitor_group_state") == {"g00001", "g00002"}
    assert {line for line in after.splitlines() if 'group="g00000"' in line} == set()


def test_run_serves_the_counters_before_it_loads_the_groups(tmp_path):
    """`run` serves /metrics once the counters are back from the event sink (a size that does not
    grow with the groups), then loads the state file's groups (which does): the page in between
    has the counters, restoring_groups 1 and no group gauges; after it, the gauges and 0. A newer
    release's state file is refused before anything is served, from its first bytes."""
    from prometheus_client import generate_latest

    from sinks.event_sink import EventSink
    from streaming.app.service import build_collector, restore_groups_or_fail
    from streaming.app.settings import ConfigError, KafkaSettings, RunSettings
    from tests.support.report_pages import records as golden
    settings = RunSettings(checkpoint_location=str(tmp_path / "cp"), events_dir=str(tmp_path / "events"),
                           kafka=KafkaSettings(bootstrap_servers="127.0.0.1:1", log_topics=["logs"]))
    first = RunCollector(MetricsSink([1.0], registry=CollectorRegistry()), keep_records=False,
                         state_file=GroupStateFile(str(tmp_path / "cp" / "rebalance-monitor" / "groups.json")),
                         event_sink=EventSink(str(tmp_path / "events"), roll_seconds=1e12),
                         batch_rows=lambda rows, _batch: rows.rows)
    first.snapshot_seconds = 0.0
    first.foreach_batch(Rows((OutputKind.REBALANCE, dict(golden("rebalances.jsonl")[0], cluster="c", group="g00001")),
                             *[(OutputKind.SNAPSHOT, _snap(i)) for i in (1, 2)]), 0)

    def page(collector: RunCollector) -> str:
        return generate_latest(collector.metrics.registry).decode()
    served = build_collector(settings, MetricsSink([1.0], registry=CollectorRegistry()))
    before = page(served)
    assert 'rebalance_monitor_rebalances_total{cluster="c",group="g00001"' in before
    assert "rebalance_monitor_restoring_groups 1.0" in before
    assert "rebalance_monitor_group_state{" not in before
    restore_groups_or_fail(served)
    after = page(served)
    assert "rebalance_monitor_restoring_groups 0.0" in after
    assert {line.split('group="')[1][:6] for line in after.splitlines()
            if line.startswith("rebalance_monitor_group_state{")} == {"g00001", "g00002"}

    newer = tmp_path / "newer" / "rebalance-monitor" / "groups.json"
    newer.parent.mkdir(parents=True)
    newer.write_text(json.dumps({"schema_version": 99, "batch_id": 1, "groups": []}))
    with pytest.raises(ConfigError, match=f"checkpoint_location: {newer}: state file version 99 was written by a "
                                          "newer release"):
        build_collector(settings.model_copy(update={"checkpoint_location": str(tmp_path / "newer")}),
                        MetricsSink([1.0], registry=CollectorRegistry()))
