"""Checkpoints survive upgrades: a checkpoint written by the code of commit 2a45599 (group state
JSON without a schema version; tests/fixtures/checkpoint-v1/README.md) is resumed by today's code,
and the records and group metrics equal an uninterrupted run of today's code (the session's
one-batch replay of the same capture: the records do not depend on batching).

The fixture was written over the replay sources of its day, which read the files on the driver;
today's replay stages its events first (docs/design.md, "Replay in two stages"), and its sources'
offsets mean something else. What a user keeps across an upgrade is `run`'s checkpoint, whose
sources are Kafka topics; here the replay stands in for them. So the resumed run reads the input
the fixture had not consumed yet (its offsets say where each file stood), and the fixture's last
offsets are set to the staged sources' start: the group state, the part an upgrade must carry, is
the fixture's own.
"""
from __future__ import annotations

import json
import shutil

import pytest

from sinks.event_sink import EventSink
from tests.support.capture_expectations import FIXTURES, capture_inputs
from tests.support.golden import comparable_metrics

pytestmark = pytest.mark.spark
ROWS_PER_BATCH = 60   # as the fixture was written
KINDS = ("rebalance", "removal", "anomaly", "quarantine", "clock_skew")
_STAGED: dict[str, list] = {}     # staging directory -> its staged kinds (one staging per run directory)


class _Stopped(Exception):
    pass


def _rest_of_input(workdir) -> tuple[list, list]:
    """The capture's inputs with what the fixture's checkpoint consumed blanked out (line numbers,
    and so source ids and event order, unchanged), and the fixture's last offsets rewritten to the
    start of today's staged sources."""
    from streaming.app.settings import LogInput, OffsetsInput
    from streaming.offsets.reader import OffsetsRowReader
    logs, offsets = capture_inputs("kafka-2.7")
    offsets_dir = workdir / "checkpoint" / "query" / "offsets"
    last = offsets_dir / str(max(int(p.name) for p in offsets_dir.iterdir() if p.name.isdigit()))
    text = last.read_text().splitlines()
    head, log_at, offsets_at = text[:2], json.loads(text[2]), json.loads(text[3])
    inputs = workdir / "inputs"
    inputs.mkdir()
    rest_logs = []
    for log, seq in zip(logs, log_at["seq"]):
        lines = open(log.path).read().split("\n")
        path = inputs / log.path.rsplit("/", 1)[1]
        path.write_text("\n".join([""] * seq + lines[seq:]))
        rest_logs.append(LogInput(path=str(path), cluster=log.cluster))
    (dump,) = offsets
    reader = OffsetsRowReader([{"path": dump.path, "source_id": "d", "kind": "jsonl"}])
    consumed = {entry[4] for entry in reader.index[:offsets_at["i"]]}      # their line numbers
    lines = open(dump.path).read().split("\n")
    path = inputs / dump.path.rsplit("/", 1)[1]
    path.write_text("\n".join("" if n in consumed else line for n, line in enumerate(lines, 1)))
    start = [json.dumps({"source": kind, "i": 0, "lines": 0, "of": 0, "eof": False})
             for kind in ("broker_log", "offsets")]
    last.write_text("\n".join([*head, *start]))
    return rest_logs, [OffsetsInput(path=str(path), cluster=dump.cluster)]


def _run(spark, workdir, state_buckets=None, stop_at_batch=None, inputs=None):
    """The live service's collector (state file + event sink) over the replay's staged sources,
    from the checkpoint in `workdir` (if any) to the end of the input (or to the failure of batch
    `stop_at_batch`, which leaves the batches before it committed). The events are staged once
    per `workdir`: a stopped run and its resumption read the same slices."""
    from sinks.event_sink import EventSink
    from sinks.files import GroupStateFile
    from sinks.metrics import MetricsSink
    from streaming.app.collector import RunCollector
    from streaming.app.restart import restore
    from streaming.app.settings import ReplaySettings, load
    from streaming.app.settings.wiring import diagnosis_settings, log_file, offsets_file, query_options
    from streaming.spark.query import replay_query, stage_replay
    from streaming.spark.run import BatchSink, run_to_end
    settings = load(ReplaySettings, max_rows_per_batch=ROWS_PER_BATCH,
                    **({"state_buckets": state_buckets} if state_buckets is not None else {}))
    collector = RunCollector(MetricsSink(settings.duration_buckets), keep_records=False,
                             event_sink=EventSink(str(workdir / "events")),
                             state_file=GroupStateFile(str(workdir / "checkpoint" / "rebalance-monitor" / "groups.json"))
                             ).configure(diagnosis_settings(settings.diagnosis))
    restore(collector)
    logs, offsets = inputs or capture_inputs("kafka-2.7")
    # As `run` does: a checkpoint that holds state keeps the layout it was written with (the
    # fixture: one key per group).
    options = query_options(settings).for_checkpoint(str(workdir / "checkpoint" / "query"))
    staging = str(workdir / "staged")
    if staging not in _STAGED:
        _STAGED[staging] = stage_replay(spark, options, [log_file(i) for i in logs], [offsets_file(i) for i in offsets],
                                        staging)
    outputs = replay_query(spark, options, _STAGED[staging])
    sink: BatchSink = collector
    if stop_at_batch is not None:
        class _StopAt:
            def foreach_batch(self, df, batch_id):
                if batch_id == stop_at_batch:
                    raise _Stopped(f"stopped at batch {batch_id}")
                collector.foreach_batch(df, batch_id)

            def __getattr__(self, name):
                return getattr(collector, name)
        sink = _StopAt()
        with pytest.raises(Exception, match="stopped at batch"):
            run_to_end(spark, outputs, sink, checkpoint_dir=str(workdir / "checkpoint" / "query"))
        return None
    run_to_end(spark, outputs, sink, checkpoint_dir=str(workdir / "checkpoint" / "query"))
    final = collector.correlator.advance(2 ** 62)    # removals the correlator still holds
    from state.outputs import apply_trigger_decisions
    assert collector.event_sink is not None
    sink_records = {kind: list(collector.event_sink.records(kind)) for kind in KINDS}
    # as a consumer of the sink reads it: rebalances with their decided triggers
    sink_records["rebalance"] = apply_trigger_decisions(sink_records["rebalance"],
                                                        collector.event_sink.records("rebalance_trigger"))
    records = {kind: sorted(json.dumps(r, sort_keys=True) for r in rows) for kind, rows in sink_records.items()}
    records["removal"] += sorted(json.dumps(r, sort_keys=True) for r in final)
    snapshots = sorted(json.dumps(s, sort_keys=True) for s in collector.snapshots.values())
    return records, snapshots, _group_metrics(collector.metrics.registry)


def _as_written_before_the_upgrade(expected: dict, fixture) -> dict:
    """The uninterrupted run's records, where the fixture's version wrote a record before the upgrade,
    as the event sink gives that record back: the fields added since with the value an older record
    means (state.outputs.ADDED_FIELDS: the impact, not measured by the release that wrote it). A
    record is not re-measured after an upgrade."""
    from state.outputs import ADDED_FIELDS, OutputKind
    sink = EventSink(str(fixture / "events"))
    keys = {"rebalance": lambda r: (r["group"], r.get("generation"), r.get("started_at_ms")),
            "removal": lambda r: (r["group"], r["member_id"], r["removed_at_ms"])}
    out = dict(expected)
    for kind, key in keys.items():
        written = {key(r) for r in sink.records(kind)}
        added = ADDED_FIELDS[OutputKind(kind)]
        out[kind] = sorted(json.dumps({**r, **added} if key(r) in written else r, sort_keys=True)
                           for r in map(json.loads, expected[kind]))
    # a removal the fixture still held is charged by its rebalance's record: not when the fixture
    # wrote that record
    unmeasured = {(r["group"], m) for r in map(json.loads, expected["rebalance"])
                  if keys["rebalance"](r) in {keys["rebalance"](w) for w in sink.records("rebalance")}
                  for m in r.get("partition_seconds_by_departed_member") or {}}
    out["removal"] = sorted(json.dumps({**r, "partition_seconds_stopped": None}
                                       if (r["group"], r["member_id"]) in unmeasured else r, sort_keys=True)
                            for r in map(json.loads, out["removal"]))
    # a removal the fixture's release built (its line was read before the stop: at or before the
    # newest event of the fixture's groups) and still held: the host census (host_members) is taken
    # when the record is built, which that release did not do
    state = json.loads((fixture / "checkpoint" / "rebalance-monitor" / "groups.json").read_text())
    read_up_to = max(g.get("last_event_ms") or 0 for g in state["groups"])
    out["removal"] = sorted(json.dumps({**r, "host_members": None} if r["removed_at_ms"] <= read_up_to else r,
                                       sort_keys=True) for r in map(json.loads, out["removal"]))
    return out


COUNTER = "rebalance_monitor_partition_seconds_stopped_total"


def _split_cost(metrics: list[str]) -> tuple[list[str], dict[str, float]]:
    """(the group samples but the impact counter, the impact counter per group)."""
    cost = {line.split('group="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in metrics if line.startswith(COUNTER + "{")}
    return [line for line in metrics if not line.startswith(COUNTER)], cost


def _check_resumed(resumed, collector, fixture) -> None:
    """Records, snapshots and group metrics of a resumed run against the uninterrupted one."""
    by_kind = {"rebalance": collector.rebalances, "removal": collector.removals, "anomaly": collector.anomalies,
               "quarantine": collector.quarantine, "clock_skew": collector.clock_skew}
    expected = {kind: sorted(json.dumps(r, sort_keys=True) for r in by_kind[kind]) for kind in KINDS}
    assert len(expected["rebalance"]) == 82 and len(expected["removal"]) == 76
    records, snapshots, metrics = resumed
    assert records == _as_written_before_the_upgrade(expected, fixture)
    assert _without_coordinators(snapshots) == _without_coordinators(
        sorted(json.dumps(s, sort_keys=True) for s in collector.snapshots.values()))
    rest, cost = _split_cost(metrics)
    assert rest == _split_cost(_group_metrics(collector.metrics.registry))[0]
    # the impact counter of the resumed run: what its records say (the ones the fixture wrote say none)
    totals: dict[str, float] = {}
    for r in map(json.loads, records["rebalance"]):
        if r["partition_seconds_stopped"] is not None:
            totals[r["group"]] = totals.get(r["group"], 0.0) + r["partition_seconds_stopped"]
    assert cost == pytest.approx(totals) and len(cost) > 10


def _without_coordinators(snapshots: list[str]) -> list[str]:
    """Snapshots without `coordinators`, which came after the fixture: its state knows no
    coordinator line from before it, so a resumed run lists only the later ones."""
    return sorted(json.dumps({k: v for k, v in json.loads(s).items() if k != "coordinators"}, sort_keys=True)
                  for s in snapshots)


def _group_metrics(registry) -> list[str]:
    """Every sample of a per-group series (order: by text; series are created in input order)."""
    from sinks.exposition import text
    return sorted(line for line in comparable_metrics(text(registry)).splitlines() if 'group="' in line)


def test_resume_from_a_checkpoint_of_the_previous_version(spark, replay_capture, tmp_path):
    resumed_dir = tmp_path / "resumed"
    shutil.copytree(FIXTURES / "checkpoint-v1", resumed_dir)
    state_file = json.loads((resumed_dir / "checkpoint" / "rebalance-monitor" / "groups.json").read_text())
    assert state_file["batch_id"] == 3   # the fixture is mid-input
    resumed = _run(spark, resumed_dir, inputs=_rest_of_input(resumed_dir))
    collector, _ = replay_capture("kafka-2.7")
    _check_resumed(resumed, collector, FIXTURES / "checkpoint-v1")


def test_a_bucketed_checkpoint_resumes_with_its_own_bucket_count(spark, replay_capture, tmp_path):
    """A checkpoint written with 4 state buckets and stopped after batch 2, resumed while the
    setting says 1024 (the default): it keeps its 4 buckets, and the records, snapshots and group
    metrics equal an uninterrupted run."""
    from streaming.spark.state_layout import checkpoint_state_buckets
    workdir = tmp_path / "bucketed"
    assert _run(spark, workdir, state_buckets=4, stop_at_batch=3) is None
    from sinks.files import GroupStateFile
    assert GroupStateFile(str(workdir / "checkpoint" / "rebalance-monitor" / "groups.json")).read().batch_id == 2
    assert checkpoint_state_buckets(str(workdir / "checkpoint" / "query")) == 4
    resumed = _run(spark, workdir)
    assert checkpoint_state_buckets(str(workdir / "checkpoint" / "query")) == 4
    collector, _ = replay_capture("kafka-2.7")
    by_kind = {"rebalance": collector.rebalances, "removal": collector.removals, "anomaly": collector.anomalies,
               "quarantine": collector.quarantine, "clock_skew": collector.clock_skew}
    assert resumed[0] == {kind: sorted(json.dumps(r, sort_keys=True) for r in by_kind[kind]) for kind in KINDS}
    assert resumed[1] == sorted(json.dumps(s, sort_keys=True) for s in collector.snapshots.values())
    assert resumed[2] == _group_metrics(collector.metrics.registry)


RESUME_LIVE = """
import json, sys
from pathlib import Path
from streaming.spark.session import get_spark, live_conf
from tests.spark.test_checkpoint_compat import _rest_of_input, _run
workdir = Path(sys.argv[1])
spark = get_spark("local[2]", 2, conf=live_conf(str(workdir / "checkpoint")))
records, snapshots, metrics = _run(spark, workdir, inputs=_rest_of_input(workdir))
Path(sys.argv[2]).write_text(json.dumps([records, snapshots, metrics]))
"""


def test_resume_under_the_live_settings(replay_capture, tmp_path):
    """`run`'s Spark settings (session.live_conf: FileSystem checkpoint manager on Hadoop's raw local
    file system, no .crc files) resume a checkpoint the default settings wrote (with .crc files),
    and give the records of an uninterrupted run. A fresh process: the file system is chosen when
    the session's SparkContext starts."""
    import os
    import subprocess
    import sys
    root = FIXTURES.parents[1]
    resumed_dir = tmp_path / "resumed"
    shutil.copytree(FIXTURES / "checkpoint-v1", resumed_dir)
    out = tmp_path / "resumed.json"
    done = subprocess.run([sys.executable, "-c", RESUME_LIVE, str(resumed_dir), str(out)], cwd=root,
                          env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    collector, _ = replay_capture("kafka-2.7")
    _check_resumed(json.loads(out.read_text()), collector, FIXTURES / "checkpoint-v1")
    offsets = resumed_dir / "checkpoint" / "query" / "offsets"
    written = sorted(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    assert written[-1] > 3                                       # batches after the fixture's
    assert not (offsets / f".{written[-1]}.crc").exists()        # written by the raw file system
