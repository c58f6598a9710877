"""State buckets (streaming/spark/stateful.py process_bucket): several groups share one stateful
key, and every group's records, snapshots and stored state are what one key per group gives
(process_group), batch by batch. Driven on both captures the way Spark calls the step
(tests/support/stateful_driver.py), with micro-batches of one second of event time."""
from __future__ import annotations

import json

import pytest

from state import events as E
from state.model import unpack
from state.outputs import OutputKind
from streaming.app.local import capture_events
from state.commit_digest import CommitDigest
from streaming.spark.state_bucket import BUCKET_STATE_VERSION, BucketEntry, bucket_groups, bucket_text
from streaming.spark.stateful import settled_group_state
from streaming.spark.state_layout import (
    checkpoint_shuffle_partitions, checkpoint_state_buckets, shuffle_partitions_note, state_buckets_for,
)
from tests.support.capture_expectations import capture_inputs
from tests.support.stateful_driver import StatefulDriver

FAR_FUTURE = E.END_OF_INPUT_TS_MS


def _batches(events, window_ms):
    batches: dict[int, list] = {}
    for e in events:
        batches.setdefault(e.ts_ms // window_ms, []).append(e)
    return [batches[k] for k in sorted(batches)]


def _outputs(driver, batches):
    """Per batch: its outputs but the clock rows (one per call), as sorted JSON texts."""
    per_batch = [driver.batch(b) for b in batches] + [driver.tick(FAR_FUTURE), driver.batch([])]
    return [sorted(json.dumps([k, r], sort_keys=True) for k, r in out if k != OutputKind.CLOCK)
            for out in per_batch]


@pytest.mark.parametrize("capture", ["kafka-2.7", "kafka-4.0"])
@pytest.mark.parametrize("buckets", [1, 3, 64])
def test_buckets_give_every_batch_the_outputs_of_one_key_per_group(capture, buckets):
    events = sorted(capture_events(*capture_inputs(capture)), key=lambda e: e.sort_key())
    batches = _batches(events, 1000)
    per_group = StatefulDriver(30_000)
    expected = _outputs(per_group, batches)
    bucketed = StatefulDriver(30_000, buckets=buckets)
    assert _outputs(bucketed, batches) == expected
    records = sum(1 for out in expected for text in out if json.loads(text)[0] == OutputKind.REBALANCE)
    assert records > 10
    assert len([k for k, s in bucketed.states.items() if s.exists]) <= buckets
    # The stored state: every group one key per group keeps, with the same model and held rows
    # once the commits it folded without a turn are merged.
    # (held rows in any order: a turn sorts them).
    kept = {group: _comparable(settled_group_state("default", group, entry)) for state in bucketed.states.values()
            if state.exists for group, entry in bucket_groups(state.get[0]).items()}
    assert kept == {key[1]: _comparable(state.get) for key, state in per_group.states.items() if state.exists}


def _records(per_batch, kinds=None):
    """The records of a run (no snapshots, no clock rows), as sorted JSON texts."""
    return sorted(t for batch in per_batch for t in batch
                  if json.loads(t)[0] not in (OutputKind.SNAPSHOT, OutputKind.CLOCK)
                  and (kinds is None or json.loads(t)[0] in kinds))


@pytest.mark.parametrize("capture", ["kafka-2.7", "kafka-4.0"])
@pytest.mark.parametrize("window_ms", [1000, 60_000])
def test_a_batch_complete_through_its_newest_event_applies_its_events_at_once(capture, window_ms):
    """A replay's slice says through which time it holds every event (COMPLETE_THROUGH): its events
    are applied in its own batch, not held for the next batch's watermark. The rebalances, removals
    and anomalies are those the watermark alone gives; every record is what the whole input in one
    batch gives. (A rebalance's trigger correction is settled by the first decided removal of its
    member, and which one that is can depend on where turns end: docs/design.md, "Known limits".)"""
    events = sorted(capture_events(*capture_inputs(capture)), key=lambda e: e.sort_key())
    batches = _batches(events, window_ms)
    held = _outputs(StatefulDriver(30_000, buckets=8), batches)
    applied = _outputs(StatefulDriver(30_000, buckets=8, complete_through=True), batches)
    whole = _outputs(StatefulDriver(30_000, buckets=8), [events])
    kinds = (OutputKind.REBALANCE, OutputKind.REMOVAL, OutputKind.ANOMALY)
    assert _records(applied, kinds) == _records(held, kinds) and len(_records(held, kinds)) > 100
    assert _records(applied) == _records(whole)

    def first_batch(per_batch):
        return {t: i for i, batch in reversed(list(enumerate(per_batch))) for t in _records([batch], kinds)}
    sooner, later = first_batch(applied), first_batch(held)
    assert all(sooner[t] <= later[t] for t in later) and sum(sooner[t] < later[t] for t in later) > 10


def _comparable(stored):
    model_json, held_json = stored
    return model_json, sorted(json.dumps(row) for row in json.loads(unpack(held_json)))


def test_a_bucket_calls_only_the_groups_whose_timeout_passed():
    """A bucket called for one group's timeout leaves the others' stored state as it was."""
    from tests.support.stateful_driver import FakeGroupState
    from streaming.spark.stateful import process_bucket
    idle = BucketEntry("model-of-b", "[]", 5_000_000)
    state = FakeGroupState(watermark_ms=1_000_000, value=(bucket_text({"b": idle}),))
    frames = list(process_bucket(("c", 0), iter([]), state))
    assert [row[0] for row in frames[0].itertuples(index=False, name=None)] == [str(OutputKind.CLOCK)]
    assert state.value is not None
    assert bucket_groups(state.value[0]) == {"b": idle}     # not due: as it was
    assert state.timeout_ms == 5_000_000


def test_a_bucket_of_a_newer_release_is_refused_with_its_version():
    with pytest.raises(ValueError, match=f"version {BUCKET_STATE_VERSION + 1} .* newer release"):
        bucket_groups(f"v{BUCKET_STATE_VERSION + 1}\n")
    with pytest.raises(ValueError, match="not a stored bucket"):
        bucket_groups("something else")


def _schema(tmp_path, key_fields):
    path = tmp_path / "query" / "state" / "0" / "0" / "_metadata"
    path.mkdir(parents=True)
    key = {"type": "struct", "fields": [{"name": n, "type": "string", "nullable": True, "metadata": {}}
                                        for n in key_fields]}
    (path / "schema").write_text("v2\n" + json.dumps(key, separators=(",", ":")) + "\n{}")
    return str(tmp_path / "query")


def test_a_checkpoint_keeps_the_layout_it_was_written_with(tmp_path, caplog):
    assert state_buckets_for(str(tmp_path / "new"), 1024) == 1024
    assert checkpoint_state_buckets(str(tmp_path / "new")) is None
    per_group = _schema(tmp_path / "a", ["cluster", "group"])
    assert state_buckets_for(per_group, 1024) == 0
    assert "one state key per group" in caplog.text
    bucketed = _schema(tmp_path / "b", ["cluster", "state_bucket_of_256"])
    assert state_buckets_for(bucketed, 1024) == 256
    assert state_buckets_for(bucketed, 256) == 256


def _offsets_entry(query, batch: int, partitions: str) -> None:
    (query / "offsets").mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {"spark.sql.shuffle.partitions": partitions,
                                                                  "spark.sql.streaming.multipleWatermarkPolicy": "min"}}
    (query / "offsets" / str(batch)).write_text("v1\n" + json.dumps(meta) + '\n{"source": "offsets"}\n')


def test_the_state_partitions_of_a_checkpoint_and_the_note_when_the_setting_differs(tmp_path):
    query = tmp_path / "query"
    assert checkpoint_shuffle_partitions(str(query)) is None
    assert shuffle_partitions_note(str(query), 8) is None          # a new checkpoint takes the setting
    _offsets_entry(query, 0, "2")
    _offsets_entry(query, 1, "2")
    (query / "offsets" / "2").write_text("v1\n{half writ")          # a torn newest entry: the one before
    (query / "offsets" / ".2.tmp").write_text("junk")
    assert checkpoint_shuffle_partitions(str(query)) == 2
    assert shuffle_partitions_note(str(query), 2) is None
    note = shuffle_partitions_note(str(query), 8)
    assert note is not None and note.startswith(f"shuffle_partitions: the checkpoint in {query} was written with 2 "
                                                "state partitions and Spark keeps them (the setting says 8)")


def test_the_note_when_the_state_store_setting_names_another_provider_than_the_checkpoint(tmp_path):
    from streaming.spark.session import STATE_STORE_PROVIDER, state_store_conf
    from streaming.spark.state_layout import state_store_note
    query = tmp_path / "query"
    assert state_store_note(str(query), state_store_conf("rocksdb")) is None       # a new checkpoint
    _offsets_entry(query, 0, "2")                    # an entry without the key (older Sparks wrote none)
    assert state_store_note(str(query), state_store_conf("rocksdb")) is None
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1,
            "conf": {"spark.sql.shuffle.partitions": "2", **state_store_conf("hdfs")}}
    (query / "offsets" / "1").write_text("v1\n" + json.dumps(meta) + '\n{"source": "offsets"}\n')
    assert state_store_note(str(query), state_store_conf("hdfs")) is None
    assert state_store_note(str(query), state_store_conf("rocksdb")) == (
        f"state_store: the checkpoint in {query} keeps its state in hdfs and Spark keeps that provider (the setting "
        f"says rocksdb). To change it, start a new checkpoint location: with kafka.starting_offsets = earliest (the "
        f"default) it rebuilds every group's state from the topics (docs/configuration.md)")
    assert "(the setting says my.Provider)" in (
        state_store_note(str(query), {STATE_STORE_PROVIDER: "my.Provider"}) or "")


def test_a_checkpoint_of_another_program_is_named(tmp_path):
    other = _schema(tmp_path, ["key", "value"])
    with pytest.raises(ValueError, match="key schema this release does not know"):
        checkpoint_state_buckets(other)


# ------------------------------------------------------------------ commits without a turn
def _commit(group, ts, partition, topic="orders"):
    return E.Event(group=group, ts_ms=ts, source=E.SOURCE_OFFSETS, source_id="__consumer_offsets-7", seq=ts,
                   kind=E.OFFSET_COMMIT, cluster="default",
                   data={"commit_ts_ms": ts, "count": 2, "offset": ts // 10, "partition": partition, "topic": topic})


def _with_steady_commits(events, every_ms=500):
    """The capture plus a commit on two partitions of every committing group every `every_ms`, from
    its first event to its last: most batches of small windows then hold only commits for it."""
    span: dict[str, list[int]] = {}
    for e in events:
        if e.group:
            span.setdefault(e.group, [e.ts_ms, e.ts_ms])[1] = e.ts_ms
    extra = [_commit(g, ts + p, p) for g, (first, last) in span.items()
             for ts in range(first + 1, last, every_ms) for p in (0, 1)]
    return sorted(events + extra, key=lambda e: e.sort_key())


def _turns_and_folds(outputs):
    clocks = [r for k, r in outputs if k == OutputKind.CLOCK]
    return sum(r["turns"] for r in clocks), sum(r["folds"] for r in clocks)


@pytest.mark.parametrize("capture", ["kafka-2.7", "kafka-4.0"])
@pytest.mark.parametrize("window_ms", [100, 700])
def test_groups_that_fold_their_commits_give_the_outputs_and_state_of_turns(capture, window_ms):
    """Folding commits without a turn (stateful.fold_commits) changes nothing a turn would give:
    every batch's records and snapshots, and the stored state once the digest is merged, equal
    those of one key per group (which always takes its turns), with commits cut into batches of
    100 and 700 ms around the captures' rebalances, leaves and expiries."""
    events = _with_steady_commits(sorted(capture_events(*capture_inputs(capture)), key=lambda e: e.sort_key()))
    batches = _batches(events, window_ms)
    per_group = StatefulDriver(10_000)
    expected = _outputs(per_group, batches)
    bucketed = StatefulDriver(10_000, buckets=4)
    per_batch = [bucketed.batch(b) for b in batches] + [bucketed.tick(FAR_FUTURE), bucketed.batch([])]
    assert [sorted(json.dumps([k, r], sort_keys=True) for k, r in out if k != OutputKind.CLOCK)
            for out in per_batch] == expected
    turns, folds = _turns_and_folds([o for out in per_batch for o in out])
    assert folds > 100 and folds > turns / 4      # the path is taken, often
    kept = {group: _comparable(settled_group_state("default", group, entry)) for state in bucketed.states.values()
            if state.exists for group, entry in bucket_groups(state.get[0]).items()}
    assert kept == {key[1]: _comparable(state.get) for key, state in per_group.states.items() if state.exists}


def _stable_groups(names):
    """Groups of one member each, Stable at generation 1 (the 2.7 capture's sc01 up to its first
    GroupMetadata record), renamed."""
    import dataclasses
    events = sorted(capture_events(*capture_inputs("kafka-2.7")), key=lambda e: e.sort_key())
    template = [e for e in events if e.group == "sc01-single-join-leave"][:4]
    assert [e.kind for e in template][-1] == "group_metadata"
    return [dataclasses.replace(e, group=name) for name in names for e in template], template[-1].ts_ms


class _Twin:
    """The same batches through the bucketed step and one key per group; after each batch the
    bucketed groups' settled state must equal the other's (the models, commit fields and all)."""
    def __init__(self, lateness_ms, buckets):
        self.bucketed, self.per_group = StatefulDriver(lateness_ms, buckets=buckets), StatefulDriver(lateness_ms)

    def batch(self, events):
        watermark = self.bucketed.watermark_ms
        out = self.bucketed.batch(events)
        self.per_group.batch(events)
        settled = {group: _comparable(settled_group_state("default", group, entry, watermark))
                   for state in self.bucketed.states.values() if state.exists
                   for group, entry in bucket_groups(state.get[0]).items()}
        assert settled == {k[1]: _comparable(s.get) for k, s in self.per_group.states.items() if s.exists}
        return out

    def tick(self, now_ms):
        self.bucketed.newest_ms = self.per_group.newest_ms = max(self.bucketed.newest_ms, now_ms)
        return self.batch([])


def test_only_groups_with_coordinator_events_or_due_deadlines_take_a_turn():
    """The turns a batch gives: the groups with a coordinator event and the groups with something
    due, never a group whose rows are all commits (those fold), counted on the clock rows."""
    names = ["a", "b", "c", "d"]
    setup, t0 = _stable_groups(names)
    driver = _Twin(2_000, buckets=2)
    driver.batch(setup)
    driver.tick(t0 + 60_000)
    now = t0 + 60_000
    # first commits of each group: a turn each (nothing says yet that the group may fold)
    assert _turns_and_folds(driver.batch([_commit(g, now + 10, 0) for g in names])) == (4, 0)
    for step in range(1, 6):
        now += 1000
        # partition 0 also gets an older commit after the newer one (two members' commits, say)
        out = driver.batch([c for g in names for c in (_commit(g, now + 10, 0), _commit(g, now + 10, 1),
                                                      _commit(g, now + 5, 0))])
        assert _turns_and_folds(out) == (0, 4), step
    # a coordinator event for "a" (a member joins: a rebalance starts): "a" takes a turn, the others fold
    join = E.Event(group="a", ts_ms=now + 500, source=E.SOURCE_LOG, source_id="b1", seq=1, kind=E.PREPARE_REBALANCE,
                   cluster="default", generation=1, reason="Adding new member m-2 with group instance id None")
    out = driver.batch([join] + [_commit(g, now + 510, 0) for g in names])
    assert _turns_and_folds(out) == (1, 3)
    # "a" holds its rebalance event until the watermark reaches it (a batch runs with the watermark
    # its previous batch left: newest event minus 2 s); meanwhile its commits fold too. Then it is
    # due and takes its turn, commits and all.
    held_batches = 0
    while driver.bucketed.watermark_ms < join.ts_ms:
        now += 1_000
        assert _turns_and_folds(driver.batch([_commit(g, now, 0) for g in names])) == (0, 4)
        held_batches += 1
    assert held_batches == 3
    now += 1_000
    assert _turns_and_folds(driver.batch([_commit(g, now, 0) for g in names])) == (1, 3)
    # the commits folded without a turn are in the group's counters at its next turn
    out = driver.tick(FAR_FUTURE) + driver.batch([])
    snaps = {r["group"]: r for k, r in out if k == OutputKind.SNAPSHOT}
    assert snaps["b"]["commits_total"] == 2 * (1 + 5 * 3 + 1 + 3 + 1)    # 21 commits of count 2
    assert snaps["b"]["last_commit_ms"] == now


def test_a_group_committed_to_after_it_died_lives_again_and_folds_its_commits():
    """Kafka writes a commit for a group id only while a group of that id exists: after its group
    died (deleted, its offsets expired), a simple consumer's commit made it again, Empty. The
    monitor follows: the first commit after the death takes a turn that brings the group back,
    Empty at generation 0 with its snapshot, and the next ones fold. Before, a dead group kept
    commits as held rows and took a turn in every batch for as long as the commits came (the long
    steady bench: 2,700 turns a batch at the end, 70 % of the stateful step)."""
    setup, t0 = _stable_groups(["a", "b"])
    driver = _Twin(2_000, buckets=2)
    driver.batch(setup)
    now = t0 + 60_000
    deleted = E.Event(group="a", ts_ms=now, source=E.SOURCE_OFFSETS, source_id="__consumer_offsets-7", seq=1,
                      kind=E.GROUP_TOMBSTONE, cluster="default")
    driver.batch([deleted] + [_commit("b", now, 0)])
    driver.tick(now + 5_000)
    now += 5_000
    out = driver.batch([_commit(g, now + 10, 0) for g in ("a", "b")])
    assert _turns_and_folds(out) == (1, 1)                 # "a" comes back: a turn
    turns = []
    for _ in range(6):
        now += 1_000
        turns.append(_turns_and_folds(driver.batch([_commit(g, now + 10, 0) for g in ("a", "b")])))
    # until the watermark (2 s behind) reaches "a"'s first commit after the death, "a" is still
    # dead and its commits wait in turns; from the turn that applies it on, both groups only fold
    assert turns == [(1, 1)] * 3 + [(0, 2)] * 3, turns
    out = driver.tick(FAR_FUTURE) + driver.batch([])
    snaps = {r["group"]: r for k, r in out if k == OutputKind.SNAPSHOT}
    assert snaps["a"]["state"] == "Empty" and snaps["a"]["generation"] == 0
    assert snaps["a"]["last_commit_ms"] == now + 10


@pytest.mark.parametrize("version", [1, 2])
def test_a_bucket_of_version_1_or_2_loads_and_its_groups_fold_after_one_turn(version):
    """Buckets written before (one JSON document; version 1 without the commit digest) resume: the
    group's first commits take a turn, which stores the digest; its next ones fold."""
    setup, t0 = _stable_groups(["a"])
    driver = StatefulDriver(2_000, buckets=1)
    driver.batch(setup)
    driver.tick(t0 + 60_000)
    state = driver.states[("default", 0)]
    assert state.value is not None
    entry = bucket_groups(state.value[0])["a"]
    stored = [entry.model_json, entry.held_json, entry.timeout_ms]
    old = json.dumps({"v": version, "groups": {"a": stored if version == 1 else stored + [None]}})
    state.value = (old,)
    now = t0 + 60_000
    assert _turns_and_folds(driver.batch([_commit("a", now, 0)])) == (1, 0)
    assert state.value[0].startswith("v5\n") and BUCKET_STATE_VERSION == 5
    assert bucket_groups(state.value[0])["a"].digest is not None
    assert _turns_and_folds(driver.batch([_commit("a", now + 1000, 0)])) == (0, 1)


def _as_version_3(text: str) -> str:
    """A stored bucket as version 3 wrote it: each held row's and waiting commit's data as a
    `data_json` string, models of state version 3."""
    from state.model import pack
    groups = bucket_groups(text)
    for entry in groups.values():
        model = json.loads(unpack(entry.model_json))
        model["schema_version"] = 3
        entry.model_json = pack(json.dumps(model))
        held = json.loads(unpack(entry.held_json))
        for row in held:
            if isinstance(row[-1], dict):
                row[-1] = json.dumps(row[-1])
        entry.held_json = pack(json.dumps(held)) if held else "[]"
        waiting = [json.loads(text) for _, text in entry.waiting_commits]     # versions 3 and 4: decoded
        for fields in waiting:
            if "data" in fields:
                fields["data_json"] = json.dumps(fields.pop("data"))
        entry.waiting_commits = waiting
    lines = [f"{json.dumps(g)}\t{'' if e.timeout_ms is None else e.timeout_ms}\t"       # the digest unpacked
             f"{json.dumps([e.model_json, e.held_json, e.stored_digest()], separators=(',', ':'))}"
             for g, e in groups.items()]
    return "\n".join(["v3", *lines])


def test_a_bucket_of_version_3_resumes_as_if_never_stopped():
    """A checkpoint of the release before (its rows' data as strings) goes on giving what an
    uninterrupted run gives: held rows (a rebalance waiting for the watermark) and waiting commits
    in the digest, both of version 3's form, then more batches to the end."""
    names = ["a", "b", "c"]
    setup, t0 = _stable_groups(names)
    now = t0 + 60_000
    join = E.Event(group="a", ts_ms=now + 1500, source=E.SOURCE_LOG, source_id="b1", seq=1, kind=E.PREPARE_REBALANCE,
                   cluster="default", generation=1, reason="Adding new member m-2 with group instance id None")
    before = [setup, [], [_commit(g, now, 0) for g in names], [_commit(g, now + 1000, 1) for g in names],
              [join] + [_commit(g, now + 1500, 0) for g in names]]
    after = [[_commit(g, now + 2000 + 500 * i, i % 3) for g in names] for i in range(8)] + [[], []]
    drivers = [StatefulDriver(2_000, buckets=1), StatefulDriver(2_000, buckets=1)]
    for driver in drivers:
        for i, batch in enumerate(before):
            driver.batch(batch) if batch or i != 1 else driver.tick(t0 + 60_000)
    state = drivers[1].states[("default", 0)]
    held = bucket_groups(state.get[0])
    assert json.loads(unpack(held["a"].held_json)) and all(held[g].waiting_commits for g in names)
    state.value = (_as_version_3(state.get[0]),)
    assert state.get[0].startswith("v3\n") and "data_json" in state.get[0]
    outputs: list[list[list[str]]] = [[], []]
    for batch in after:
        for driver, out in zip(drivers, outputs):
            out.append(sorted(json.dumps([k, r], sort_keys=True) for k, r in driver.batch(batch)))
    for driver, out in zip(drivers, outputs):
        out.append(sorted(json.dumps([k, r], sort_keys=True) for k, r in driver.tick(FAR_FUTURE) + driver.batch([])))
    assert outputs[0] == outputs[1]
    final = {r["group"]: r for k, r in map(json.loads, outputs[0][-1]) if k == OutputKind.SNAPSHOT}
    # the held join of version 3's held rows applied, every commit (11 of count 2) counted once
    assert {g: (final[g]["state"], final[g]["commits_total"]) for g in names} == {
        "a": ("PreparingRebalance", 22), "b": ("Stable", 22), "c": ("Stable", 22)}
    assert drivers[1].states[("default", 0)].get[0].startswith("v5\n")


def test_a_bucket_decodes_only_the_groups_a_call_touches():
    """Each group's line is kept as stored until the group is used: an untouched group's line is
    written back byte for byte, a touched one is re-encoded, a dropped one leaves. A name with
    characters JSON escapes reads back too."""
    from streaming.spark.state_bucket import Bucket
    groups = {"a\tb\nc": BucketEntry("m1", "[]", 5), "b": BucketEntry("m2", "h2", None, CommitDigest(), [[1, '{"ts_ms":1}']]),
              "c": BucketEntry("m3", "[]", 7, CommitDigest())}
    text = bucket_text(groups)
    assert text.count("\n") == 3 and bucket_groups(text) == groups
    bucket = Bucket.load(text)
    assert sorted(bucket.due(6)) == ["a\tb\nc"] and bucket.earliest_timeout() == 5
    assert bucket._entries == {}                        # nothing decoded for the due check
    entry = bucket.get("c")
    assert entry is not None
    entry.timeout_ms = 9
    bucket.put("c", entry)
    bucket.drop("b")
    again = bucket.text()
    assert again.split("\n")[1] == text.split("\n")[1]     # "a..." as it was stored
    assert bucket_groups(again) == {"a\tb\nc": groups["a\tb\nc"], "c": BucketEntry("m3", "[]", 9, CommitDigest())}
    assert not Bucket.load("v3\n") and Bucket.load(again)


@pytest.mark.parametrize("buckets", [0, 4])
def test_every_call_reports_the_timeout_its_key_keeps(buckets):
    """The CLOCK row of every call names its state key and the event-time timeout the key keeps
    after the call (null: none, or the key's state is gone): the driver plans the quiet sources'
    markers from them (sources/markers.py). After every batch of the 2.7 capture, the last
    report of each key is the timeout Spark holds for it."""
    events = sorted(capture_events(*capture_inputs("kafka-2.7")), key=lambda e: e.sort_key())
    driver = StatefulDriver(2_000, buckets=buckets) if buckets else StatefulDriver(2_000)
    reported: dict = {}
    for batch in _batches(events, 700):
        for kind, record in driver.batch(batch):
            if kind == OutputKind.CLOCK and record["key"] is not None:
                # by cluster too: the end-of-input marker's key has its own (empty) cluster
                reported[(record["cluster"], record["key"])] = record["timeout_ms"]
        held = {(key[0], str(key[1])): state.timeout_ms if state.exists else None
                for key, state in driver.states.items()}
        assert {k: v for k, v in reported.items() if v is not None} == {k: v for k, v in held.items() if v is not None}
    assert any(v is not None for v in reported.values())


def test_a_digest_is_stored_packed_and_a_version_4_line_reads_and_stays_as_it_was():
    """Version 5 stores a digest with waiting commits compressed (its topic names and times repeat),
    smaller than version 4's object; a version 4 line that no call touched is written back as it
    was, and both read back to the same entry."""
    from streaming.spark.state_bucket import Bucket
    waiting: list[list] = [[1_000 + i, json.dumps({"ts_ms": 1_000 + i, "kind": E.OFFSET_COMMITS, "data": {"commits": [
        ["orders", p, 100 + i, 1_000 + i, 1] for p in range(10)]}}, separators=(",", ":"))] for i in range(3)]
    entry = BucketEntry("m", "[]", 5_000, CommitDigest(), waiting)
    v5 = bucket_text({"g": entry})
    digest_v4 = {"w": [json.loads(text) for _, text in waiting]}
    v4 = f"v4\n\"g\"\t5000\t{json.dumps(['m', '[]', digest_v4], separators=(',', ':'))}"
    assert '"z:' in v5 and len(v5) < len(v4) / 2
    assert bucket_groups(v5) == bucket_groups(v4) == {"g": entry}
    untouched = Bucket.load(v4 + "\n\"h\"\t\t[\"m2\",\"[]\",null]")
    assert untouched.get("h") is not None
    assert untouched.text() == "v5\n" + (v4 + "\n\"h\"\t\t[\"m2\",\"[]\",null]")[3:]
    assert bucket_groups(untouched.text())["g"] == entry
