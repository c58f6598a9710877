"""State buckets (streaming/spark/stateful.py process_bucket): several groups share one stateful
key, and every group's records, snapshots and stored state are what one key per group gives
(process_group), batch by batch. Driven on both captures the way Spark calls the step
(tests/support/stateful_driver.py), with micro-batches of one second of event time."""
from __future__ import annotations

import json

import pytest

from state.outputs import OutputKind
from streaming.app.local import capture_events
from streaming.spark.stateful import BUCKET_STATE_VERSION, bucket_groups, bucket_json
from streaming.spark.state_layout import checkpoint_state_buckets, state_buckets_for
from tests.support.capture_expectations import capture_inputs
from tests.support.stateful_driver import StatefulDriver

FAR_FUTURE = 4102444800000


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
    # The stored state: every group one key per group keeps, with the same model and held rows.
    kept = {group: entry[:2] for state in bucketed.states.values() if state.exists
            for group, entry in bucket_groups(state.get[0]).items()}
    assert kept == {key[1]: list(state.get) for key, state in per_group.states.items() if state.exists}


def test_a_bucket_calls_only_the_groups_whose_timeout_passed():
    """A bucket called for one group's timeout leaves the others' stored state as it was."""
    from tests.support.stateful_driver import FakeGroupState
    from streaming.spark.stateful import process_bucket
    idle = ["model-of-b", "[]", 5_000_000]
    state = FakeGroupState(watermark_ms=1_000_000, value=(bucket_json({"b": idle}),))
    frames = list(process_bucket(("c", 0), iter([]), state))
    assert [row[0] for row in frames[0].itertuples(index=False, name=None)] == [str(OutputKind.CLOCK)]
    assert bucket_groups(state.value[0]) == {"b": idle}     # not due: as it was
    assert state.timeout_ms == 5_000_000


def test_a_bucket_of_a_newer_release_is_refused_with_its_version():
    with pytest.raises(ValueError, match=f"version {BUCKET_STATE_VERSION + 1} .* newer release"):
        bucket_groups(json.dumps({"v": BUCKET_STATE_VERSION + 1, "groups": {}}))


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


def test_a_checkpoint_of_another_program_is_named(tmp_path):
    other = _schema(tmp_path, ["key", "value"])
    with pytest.raises(ValueError, match="key schema this release does not know"):
        checkpoint_state_buckets(other)
