"""Property tests (hypothesis): random, truncated and mutated bytes for the record decoder, the
vectorised decoder and the segment reader. Nothing raises, nothing hangs, everything that cannot
be used is quarantined with a reason, and the good data around a bad spot is kept."""
from __future__ import annotations

import struct

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from streaming.offsets.record_events import record_to_events
from streaming.offsets.segments import SegmentRecord, iter_offsets_dir, scan_segment
from streaming.offsets.per_record import decode_offsets_rows
from streaming.offsets.vectorised import decode_arrow_batch
from streaming.quarantine import Quarantined
from state.outputs import OutputKind
from streaming.rows import EVENT_COLUMNS
from streaming.spark.schema import RAW_OFFSETS_SCHEMA
from testbed.offsets_equivalence import normalise
from tests.support.capture_expectations import FIXTURES
from tests.support.offsets_encoder import encode, record
from tests.support.segment_encoder import control_batch, legacy_message, legacy_wrapper, record_batch

RECORD_REASONS = {"null_key", "unknown_record_type", "unknown_value_version", "corrupt_record"}
SEGMENT_REASONS = {"corrupt_batch", "truncated_batch", "uncommitted_transaction"}
FUZZ = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# keys with a real type prefix and a random tail reach deep into the per-type decoders
key_strategy = st.one_of(
    st.none(), st.binary(max_size=40),
    st.builds(lambda t, tail: struct.pack(">h", t) + tail, st.integers(-2, 25), st.binary(max_size=60)),
    st.builds(lambda t, g, tail: struct.pack(">hh", t, len(g)) + g + tail, st.integers(0, 23),
              st.binary(max_size=12), st.binary(max_size=30)),
)
value_strategy = st.one_of(
    st.none(), st.binary(max_size=80),
    st.builds(lambda v, tail: struct.pack(">h", v) + tail, st.integers(-1, 6), st.binary(max_size=120)),
)


def _check_record(key, value):
    out = record_to_events(partition=1, offset=2, timestamp_ms=3, key=key, value=value)
    if isinstance(out, Quarantined):
        assert out.reason in RECORD_REASONS, out
        if out.reason in ("corrupt_record", "unknown_value_version", "unknown_record_type"):
            assert " at byte " in out.detail, out.detail
    else:
        assert isinstance(out, list) and len(out) == 1


@FUZZ
@given(key_strategy, value_strategy)
def test_record_decoder_never_raises_on_random_bytes(key, value):
    _check_record(key, value)


def _real_samples():
    from streaming.offsets.reader import OffsetsRowReader
    reader = OffsetsRowReader([{"path": str(FIXTURES / "kafka-4.0" / "offsets-topic.jsonl"), "source_id": "x",
                                "kind": "jsonl"}])
    seen, out = set(), []
    for r in reader.rows(0, len(reader)):
        t = (r[5][:2], r[6] is None)
        if t not in seen:
            seen.add(t)
            out.append((r[5], r[6]))
    return out


REAL = _real_samples()


@FUZZ
@given(st.sampled_from(REAL), st.data())
def test_record_decoder_on_mutated_and_truncated_real_records(sample, data):
    key, value = sample
    if value is not None and data.draw(st.booleans()):
        value = value[:data.draw(st.integers(0, len(value)))]
    if value:
        b = bytearray(value)
        for _ in range(data.draw(st.integers(0, 4))):
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.integers(0, 255))
        value = bytes(b)
    if data.draw(st.booleans()):
        key = key[:data.draw(st.integers(0, len(key)))]
    _check_record(key, value)


RAW_ARROW = to_arrow_schema(RAW_OFFSETS_SCHEMA)


def _assert_vectorised_equals_reference(rows):
    """Raw offsets rows (RAW_OFFSETS_SCHEMA, source "a") through both decoders: the same events."""
    ref = decode_offsets_rows(rows, {"a": "c"})
    batch = pa.RecordBatch.from_arrays([pa.array(list(c), f.type) for c, f in zip(zip(*rows), RAW_ARROW)],
                                       schema=RAW_ARROW)
    fast = [tuple(r[c] for c in EVENT_COLUMNS) for b in decode_arrow_batch(batch, {"a": "c"})
            for r in b.to_pylist() if r["kind"] != OutputKind.DECODE_STATS]
    assert normalise(fast) == normalise(ref)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(key_strategy, value_strategy, st.integers(0, 3), st.integers(0, 50)), min_size=1, max_size=40))
def test_vectorised_decoder_equals_the_reference_on_random_records(items):
    rows = [("a", i, p, i, ts, k, v, None, False, None) for i, (k, v, p, ts) in enumerate(items)]
    _assert_vectorised_equals_reference(rows)


# --- segments ---------------------------------------------------------------------------------

def _segment():
    key = struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    parts = [
        record_batch(0, [(0, 0, key, b"a", ()), (1, 1, key, None, (("h", b"v"),))]),
        record_batch(2, [(0, 0, key, b"b" * 50, ())] * 1, codec=1),
        record_batch(3, [(0, 0, key, b"c" * 50, ())], codec=2),
        legacy_message(4, key, b"d", magic=1),
        legacy_wrapper(6, [(key, b"e", 1), (key, b"f", 2)], magic=1, codec=3),
        record_batch(7, [(0, 0, key, b"g", ())], codec=4, transactional=True, producer_id=5),
        control_batch(8, 5, commit=True),
        record_batch(9, [(0, 0, key, b"h", ())]),
    ]
    return parts


SEGMENT_PARTS = _segment()
SEGMENT = b"".join(SEGMENT_PARTS)


def _items(tmp_path_factory, data: bytes):
    d = tmp_path_factory.mktemp("fz") / "__consumer_offsets-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(data)
    return list(iter_offsets_dir(str(d.parent)))


def _check_items(items):
    for it in items:
        if isinstance(it, Quarantined):
            assert it.reason in SEGMENT_REASONS and it.detail, it
            if it.reason != "uncommitted_transaction":
                assert " at byte " in it.detail
        else:
            assert isinstance(it, SegmentRecord)


def test_synthetic_segment_reads_completely(tmp_path_factory):
    items = _items(tmp_path_factory, SEGMENT)
    assert [r.value for r in items] == [b"a", None, b"b" * 50, b"c" * 50, b"d", b"e", b"f", b"g", b"h"]


@FUZZ
@given(st.binary(max_size=3000))
def test_segment_reader_on_random_bytes(data):
    for b in scan_segment(data, 0):
        assert b.error is not None or b.records is not None
    assert sum(1 for _ in scan_segment(data, 0)) <= len(data) + 1


@FUZZ
@given(st.data())
def test_segment_reader_on_mutated_segments_keeps_the_batches_before_the_damage(data):
    buf = bytearray(SEGMENT)
    first = len(buf)
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
        first = min(first, i)
    if data.draw(st.booleans()):
        cut = data.draw(st.integers(0, len(buf)))
        del buf[cut:]
        first = min(first, cut)
    batches = list(scan_segment(bytes(buf), 0))
    # every batch that ends before the first damaged byte is read intact
    end, intact = 0, 0
    for part in SEGMENT_PARTS:
        if end + len(part) <= first:
            intact += 1
        end += len(part)
    good = [b for b in batches if b.error is None]
    assert len(good) >= intact
    assert [b.pos for b in good[:intact]] == [sum(map(len, SEGMENT_PARTS[:i])) for i in range(intact)]
    for b in batches:
        if b.error is not None:
            assert b.error.field and b.error.pos >= 0 and b.error.reason in SEGMENT_REASONS


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_partition_reader_on_mutated_real_segment(tmp_path_factory, data):
    src = FIXTURES / "kafka-4.0" / "segments" / "node1" / "__consumer_offsets-3" / "00000000000000000000.log"
    buf = bytearray(src.read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    items = _items(tmp_path_factory, bytes(buf))
    _check_items(items)
    records = [i for i in items if isinstance(i, SegmentRecord)]
    assert len(records) >= 100   # a few damaged batches lose only their own records (163 in all)


# --- the fast GroupMetadata reader agrees with the full decoder whenever it answers -----------

from streaming.offsets.vectorised.direct import fast_group_metadata  # noqa: E402
from tests.support.offsets_schemas import assignment_bytes, group_metadata_schema, subscription_bytes  # noqa: E402

member_strategy = st.fixed_dictionaries({
    "memberId": st.text(max_size=8), "groupInstanceId": st.one_of(st.none(), st.text(max_size=5)),
    "clientId": st.text(max_size=6), "clientHost": st.text(max_size=6),
    "rebalanceTimeout": st.integers(-1, 10**6), "sessionTimeout": st.integers(-1, 10**6),
    "subscription": st.one_of(st.just(b""), st.binary(max_size=12),
                              st.builds(subscription_bytes, st.integers(0, 3), st.lists(st.text(max_size=4), max_size=3))),
    "assignment": st.one_of(st.just(b""), st.binary(max_size=12), st.builds(assignment_bytes, st.integers(0, 3))),
})


@FUZZ
@given(st.integers(0, 4), st.sampled_from(["consumer", "connect", ""]), st.integers(-1, 50),
       st.lists(member_strategy, max_size=3), st.data())
def test_fast_group_metadata_equals_the_full_decoder(version, protocol_type, generation, members, data):
    vals = {"protocolType": protocol_type, "generation": generation, "protocol": "range", "leader": None,
            "currentStateTimestamp": data.draw(st.sampled_from([-1, 0, 1_700_000_000_000])), "members": members}
    value = record(version, group_metadata_schema(version), vals, flexible=version >= 4)
    if data.draw(st.booleans()):
        cut = data.draw(st.integers(0, len(value)))
        value = value[:cut] + data.draw(st.binary(max_size=3))
    key = struct.pack(">hh", 2, 1) + b"g"
    fast = fast_group_metadata(key, value)
    ref = record_to_events(partition=0, offset=1, timestamp_ms=2, key=key, value=value)
    if fast is not None:
        assert isinstance(ref, list)
        (ev,) = ref
        assert (ev.group, ev.generation, ev.data) == fast
    elif version <= 3 and isinstance(ref, list) and "trailing_bytes" not in ref[0].data:
        # declined although the full decoder took it: only when an embedded blob failed
        assert any("subscription_error" in m or "assignment_error" in m for m in ref[0].data["members"])


from streaming.offsets.vectorised.direct import fast_consumer_group_record  # noqa: E402

KIP848 = [s for s in REAL if struct.unpack(">h", s[0][:2])[0] >= 2]


@FUZZ
@given(st.sampled_from(KIP848), st.data())
def test_fast_consumer_group_reader_equals_the_full_decoder(sample, data):
    key, value = sample
    if value is not None and data.draw(st.booleans()):
        b = bytearray(value)
        for _ in range(data.draw(st.integers(1, 3))):
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.integers(0, 255))
        value = bytes(b)[:data.draw(st.integers(0, len(b)))] if data.draw(st.booleans()) else bytes(b)
    if data.draw(st.booleans()):
        b = bytearray(key)
        b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.integers(0, 255))
        key = bytes(b)
    fast = fast_consumer_group_record(key, value)
    if fast is None:
        return
    ref = record_to_events(partition=0, offset=1, timestamp_ms=2, key=key, value=value)
    assert isinstance(ref, list)
    (ev,) = ref
    assert (ev.group, ev.kind, ev.generation, ev.member_id, ev.data) == fast[:5]


# --- vectorised KIP-848 rows vs the reference on generated records ------------------------------

from tests.support.offsets_schemas import CG_TOPIC_PARTITIONS  # noqa: E402

_tp = st.fixed_dictionaries({"TopicId": st.binary(min_size=16, max_size=16),
                             "Partitions": st.lists(st.integers(-5, 10**6), max_size=140),
                             "_tags": st.one_of(st.just({}), st.just({0: b"\x01"}))})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(
    st.sampled_from([3, 6, 7, 8]), st.integers(-2, 2**31 - 1), st.lists(_tp, max_size=2), st.lists(_tp, max_size=2),
    st.sampled_from([0, 1, 2, 127, 5, -1]), st.one_of(st.just({}), st.just({3: b"zz"})), st.booleans()),
    min_size=1, max_size=12))
def test_vectorised_kip848_rows_equal_the_reference(items):
    rows = []
    for i, (t, epoch, a, b, state, tags, tomb) in enumerate(items):
        key = struct.pack(">hh", t, 2) + b"cg" + (struct.pack(">h", 1) + b"m" if t in (7, 8) else b"")
        if tomb:
            value = None
        elif t in (3, 6):
            value = struct.pack(">h", 0) + encode([("E", "int32")], {"E": epoch, "_tags": tags}, True)
        elif t == 7:
            value = struct.pack(">h", 0) + encode([("T", [CG_TOPIC_PARTITIONS])], {"T": a, "_tags": tags}, True)
        else:
            value = struct.pack(">h", 0) + encode(
                [("E", "int32"), ("P", "int32"), ("S", "int8"), ("A", [CG_TOPIC_PARTITIONS]), ("R", [CG_TOPIC_PARTITIONS])],
                {"E": epoch, "P": epoch - 1, "S": state, "A": a, "R": b, "_tags": tags}, True)
        rows.append(("a", i, 0, i, 1000 + i, key, value, None, False, None))
    _assert_vectorised_equals_reference(rows)
