"""streaming/offsets/segments.py: the real on-disk segments of both captures against their JSONL dumps, and
hand-built segments (tests/segment_encoder.py) for what the captures lack: compression, legacy
message sets, transactions, control batches, headers, corruption."""
from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import pytest

from streaming.offsets.codecs import crc32c
from streaming.offsets.record_events import record_to_events
from streaming.offsets.segments import SegmentRecord, SegmentStats, find_partition_dirs, iter_offsets_dir, scan_segment
from streaming.quarantine import Quarantined
from tests.support.capture_expectations import FIXTURES
from tests.support.segment_encoder import control_batch, crc32c_bitwise, legacy_message, legacy_wrapper, record_batch

SEG27 = FIXTURES / "kafka-2.7" / "segments"
SEG40 = FIXTURES / "kafka-4.0" / "segments"
KEY = struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
VALUE = struct.pack(">hq", 3, 42) + struct.pack(">ih", -1, 0) + struct.pack(">q", 1_700_000_000_123)


def _dump(path):
    out = []
    for line in open(path):
        o = json.loads(line)
        out.append((o["partition"], o["offset"], o["timestamp"], base64.b64decode(o["key_b64"]),
                    None if o["value_b64"] is None else base64.b64decode(o["value_b64"])))
    return out


def _rows(items):
    return [(r.partition, r.offset, r.timestamp, r.key, r.value) for r in items if isinstance(r, SegmentRecord)]


def _read(path, stats=None):
    return list(iter_offsets_dir(str(path), stats))


def _write(tmp_path, partition: int, data: bytes, name: str = "00000000000000000000.log") -> Path:
    d = tmp_path / f"__consumer_offsets-{partition}"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)
    return d


# --- real segments ----------------------------------------------------------------------------

def test_crc32c_matches_an_independent_implementation():
    for data in (b"", b"123456789", bytes(range(256)) * 3):
        assert crc32c(data) == crc32c_bitwise(data)
    assert crc32c(b"123456789") == 0xE3069283   # the standard check value


def test_kafka40_node1_segments_equal_the_dump_record_for_record():
    stats = SegmentStats()
    items = _read(SEG40 / "node1", stats)
    assert [i for i in items if isinstance(i, Quarantined)] == []
    # The dump was built from node1's segments: same records in the same order.
    assert _rows(items) == _dump(FIXTURES / "kafka-4.0" / "offsets-topic.jsonl")
    assert stats.records == 4634 and stats.batches == 1931 and stats.by_compression == {"none": 1931}


def test_kafka40_both_replicas_merge_to_the_complete_log():
    # node2's replicas stop at its shutdown; node1's hold everything; the merge is node1's log.
    stats = SegmentStats()
    items = _read(SEG40, stats)
    assert _rows(items) == _dump(FIXTURES / "kafka-4.0" / "offsets-topic.jsonl")
    assert stats.duplicate_replica_records == 4579
    node2 = _rows(_read(SEG40 / "node2"))
    assert len(node2) == 4579 and set(node2) < set(_dump(FIXTURES / "kafka-4.0" / "offsets-topic.jsonl"))


def test_kafka27_segments_equal_the_dump():
    dump = _dump(FIXTURES / "kafka-2.7" / "offsets-topic.jsonl")
    for path in (SEG27, SEG27 / "broker1", SEG27 / "broker2"):
        rows = _rows(_read(path))
        # The dump lists partitions in the order it read them (1, 3, ..., 0, 2, ...).
        assert sorted(rows) == sorted(dump) and len(rows) == 1606, path
        assert rows == sorted(rows, key=lambda r: (r[0], r[1]))


def test_one_partition_dir_and_one_segment_file():
    part = SEG27 / "broker1" / "__consumer_offsets-3"
    assert find_partition_dirs(str(part)) == [(3, str(part))]
    rows = _rows(_read(part))
    assert rows == [r for r in sorted(_dump(FIXTURES / "kafka-2.7" / "offsets-topic.jsonl")) if r[0] == 3]
    assert _rows(_read(part / "00000000000000000000.log")) == rows


def test_every_real_segment_record_decodes():
    for path in (SEG27 / "broker1", SEG27 / "broker2", SEG40 / "node1", SEG40 / "node2"):
        for r in _read(path):
            out = record_to_events(partition=r.partition, offset=r.offset, timestamp_ms=r.timestamp,
                                   key=r.key, value=r.value)
            assert isinstance(out, list) and len(out) == 1, (path, r.partition, r.offset)


# --- hand-built batches -----------------------------------------------------------------------

@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_v2_batch_with_each_compression(tmp_path, codec):
    records = [(i, i * 10, KEY, VALUE if i % 3 else None, ()) for i in range(50)]
    data = record_batch(100, records, codec=codec, base_ts=1_000) + record_batch(150, [(0, 5, KEY, VALUE, ())],
                                                                                   codec=codec, base_ts=2_000)
    stats = SegmentStats()
    rows = _rows(_read(_write(tmp_path, 4, data), stats))
    assert rows == [(4, 100 + i, 1_000 + i * 10, KEY, VALUE if i % 3 else None) for i in range(50)] \
        + [(4, 150, 2_005, KEY, VALUE)]
    name = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}[codec]
    assert stats.by_compression == {name: 2}


def test_lz4_frame_with_linked_blocks_and_raw_snappy(tmp_path):
    import cramjam
    raw_records = [(0, 0, KEY, VALUE, ()), (1, 1, KEY, None, ())]
    batch = record_batch(0, raw_records, codec=0)
    # Rebuild the same batch with a frame from the lz4 library (not Kafka's writer) and raw snappy.
    from tests.support.segment_encoder import v2_record
    payload = b"".join(v2_record(*r) for r in raw_records)
    for codec, comp in ((3, bytes(cramjam.lz4.compress(payload))), (2, bytes(cramjam.snappy.compress_raw(payload)))):
        head = bytearray(batch[:61])
        after = bytes(head[21:]) + comp
        after = struct.pack(">h", codec) + after[2:]
        crc = crc32c_bitwise(after)
        data = struct.pack(">qiibI", 0, 9 + len(after), 0, 2, crc) + after
        rows = _rows(_read(_write(tmp_path / str(codec), 0, data)))
        assert [r[1:] for r in rows] == [(0, 1_700_000_000_000, KEY, VALUE), (1, 1_700_000_000_001, KEY, None)]


def test_headers_log_append_time_and_offset_gaps(tmp_path):
    data = record_batch(10, [(0, 1, KEY, VALUE, [("h1", b"x"), ("h2", None)]), (5, 2, None, b"v", ())],
                        log_append_time=True, base_ts=500, max_ts=9_999, last_offset_delta=5)
    items = _read(_write(tmp_path, 1, data))
    assert [(r.offset, r.timestamp, r.key, r.value) for r in items] == [(10, 9_999, KEY, VALUE), (15, 9_999, None, b"v")]
    assert items[0].headers == [("h1", b"x"), ("h2", None)]


@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_legacy_magic1_messages_and_compressed_wrappers(tmp_path, codec):
    data = legacy_message(0, KEY, VALUE, magic=1, ts=111)
    data += legacy_wrapper(3, [(KEY, VALUE, 120), (KEY, None, 121), (None, b"x", 122)], magic=1, codec=codec or 1)
    data += legacy_wrapper(5, [(KEY, b"a", 1), (KEY, b"b", 2)], magic=1, codec=codec or 1, ts=777,
                           log_append_time=True)
    rows = _rows(_read(_write(tmp_path, 2, data)))
    assert rows == [(2, 0, 111, KEY, VALUE), (2, 1, 120, KEY, VALUE), (2, 2, 121, KEY, None),
                    (2, 3, 122, None, b"x"), (2, 4, 777, KEY, b"a"), (2, 5, 777, KEY, b"b")]


@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_legacy_magic0_has_no_timestamp_and_absolute_inner_offsets(tmp_path, codec):
    data = legacy_message(7, KEY, VALUE, magic=0)
    if codec:
        data += legacy_wrapper(10, [(KEY, b"1", 0), (KEY, b"2", 0)], magic=0, codec=codec)
    rows = _rows(_read(_write(tmp_path, 0, data)))
    expected = [(0, 7, -1, KEY, VALUE)] + ([(0, 9, -1, KEY, b"1"), (0, 10, -1, KEY, b"2")] if codec else [])
    assert rows == expected


def test_mixed_magic_in_one_segment(tmp_path):
    data = legacy_message(0, KEY, b"old", magic=0) + legacy_message(1, KEY, b"v1", magic=1, ts=5) \
        + record_batch(2, [(0, 0, KEY, b"v2", ())], base_ts=6)
    assert [r[1:] for r in _rows(_read(_write(tmp_path, 0, data)))] == \
        [(0, -1, KEY, b"old"), (1, 5, KEY, b"v1"), (2, 6, KEY, b"v2")]


def test_transactions_commit_abort_and_open(tmp_path):
    data = (record_batch(0, [(0, 0, KEY, b"t7-a", ()), (1, 1, KEY, b"t7-b", ())], transactional=True, producer_id=7)
            + record_batch(2, [(0, 0, KEY, b"t8", ())], transactional=True, producer_id=8)
            + record_batch(3, [(0, 3, KEY, b"plain", ())])
            + control_batch(4, 8, commit=False)
            + control_batch(5, 7, commit=True)
            + record_batch(6, [(0, 0, KEY, b"t9", ())], transactional=True, producer_id=9))
    stats = SegmentStats()
    items = _read(_write(tmp_path, 5, data), stats)
    rows = _rows(items)
    # t7 becomes visible at its COMMIT (after the plain record), t8 is aborted, t9 never ends.
    assert [(r[1], r[4]) for r in rows] == [(3, b"plain"), (0, b"t7-a"), (1, b"t7-b")]
    (q,) = [i for i in items if isinstance(i, Quarantined)]
    assert q.reason == "uncommitted_transaction" and q.seq == 6 and "producer 9" in q.detail
    assert stats.aborted_records == 1 and stats.control_batches == 2


def test_transaction_spans_segment_files(tmp_path):
    d = _write(tmp_path, 0, record_batch(0, [(0, 0, KEY, b"a", ())], transactional=True, producer_id=3))
    (d / "00000000000000000001.log").write_bytes(control_batch(1, 3, commit=True))
    assert [r[4] for r in _rows(_read(d))] == [b"a"]


# --- corruption -------------------------------------------------------------------------------

def _three_batches():
    return [record_batch(i, [(0, 0, KEY, b"v%d" % i, ())], base_ts=1000 + i) for i in range(3)]


def test_bad_crc_is_quarantined_and_reading_goes_on(tmp_path):
    b = _three_batches()
    bad = bytearray(b[1])
    bad[-1] ^= 0xFF   # inside the value: the length stays plausible
    items = _read(_write(tmp_path, 0, b[0] + bytes(bad) + b[2]))
    assert [r[4] for r in _rows(items)] == [b"v0", b"v2"]
    (q,) = [i for i in items if isinstance(i, Quarantined)]
    assert q.reason == "corrupt_batch" and q.source_id == "__consumer_offsets-0" and q.seq == 1
    assert q.detail.startswith(f"RecordBatch.crc at byte {len(b[0]) + 17} of __consumer_offsets-0/00000000000000000000.log")


def test_crc_flag_from_the_writer_and_a_valid_crc_over_bad_records(tmp_path):
    b = _three_batches()
    flagged = record_batch(1, [(0, 0, KEY, b"v1", ())], corrupt_crc=True)
    items = _read(_write(tmp_path, 0, b[0] + flagged + b[2]))
    assert [r[4] for r in _rows(items)] == [b"v0", b"v2"]
    # A record length that overruns the batch, under a correct CRC: the record field is named.
    bad = record_batch(1, [(0, 0, KEY, b"v1", ())])
    body = bytearray(bad[61:])
    body[0] = 0x7E   # zigzag 63: longer than the batch
    after = bad[21:61] + bytes(body)
    bad = bad[:17] + struct.pack(">I", crc32c_bitwise(after)) + after
    items = _read(_write(tmp_path / "x", 0, b[0] + bad + b[2]))
    assert [r[4] for r in _rows(items)] == [b"v0", b"v2"]
    (q,) = [i for i in items if isinstance(i, Quarantined)]
    assert f"RecordBatch.records[0].length at byte {len(b[0]) + 61}" in q.detail


@pytest.mark.parametrize("records, message", [(b"\x80", "truncated varint"),
                                              (b"\xff" * 5 + b"\x01", "varint longer than 5 bytes")])
def test_a_bad_varint_names_its_field_and_file_position(tmp_path, records, message):
    b = _three_batches()
    after = b[1][21:61] + records      # batch 1's header, then its records section replaced
    bad = struct.pack(">qiibI", 1, 9 + len(after), 0, 2, crc32c_bitwise(after)) + after
    items = _read(_write(tmp_path, 0, b[0] + bad + b[2]))
    assert [r[4] for r in _rows(items)] == [b"v0", b"v2"]
    (q,) = [i for i in items if isinstance(i, Quarantined)]
    assert q.detail.startswith(f"RecordBatch.records[0].length at byte {len(b[0]) + 61} of "
                               f"__consumer_offsets-0/00000000000000000000.log: {message}"), q.detail


def test_impossible_length_resynchronises_on_the_next_valid_batch(tmp_path):
    b = _three_batches()
    bad = bytearray(b[1])
    bad[8:12] = struct.pack(">i", -5)
    items = _read(_write(tmp_path, 0, b[0] + bytes(bad) + b[2]))
    assert [r[4] for r in _rows(items)] == [b"v0", b"v2"]
    (q,) = [i for i in items if isinstance(i, Quarantined)]
    assert f"RecordBatch.batchLength at byte {len(b[0]) + 8}" in q.detail and "impossible batch length -5" in q.detail
    # A plausible but wrong length (lands inside the next batch): found again by its CRC.
    bad = bytearray(b[1])
    bad[8:12] = struct.pack(">i", struct.unpack(">i", bytes(bad[8:12]))[0] + 7)
    items = _read(_write(tmp_path / "y", 0, b[0] + bytes(bad) + b[2]))
    assert [r[4] for r in _rows(items)] == [b"v0", b"v2"]


def test_garbage_between_batches_and_truncated_tail(tmp_path):
    b = _three_batches()
    items = _read(_write(tmp_path, 0, b[0] + b"\xde\xad\xbe\xef" * 9 + b[1] + b[2][:-10]))
    assert [r[4] for r in _rows(items)] == [b"v0", b"v1"]
    q = [i for i in items if isinstance(i, Quarantined)]
    assert [x.reason for x in q] == ["corrupt_batch", "truncated_batch"]
    assert f"at byte {len(b[0]) + 36 + len(b[1]) + 8}" in q[1].detail


def test_bad_compressed_payload_and_unknown_codec(tmp_path):
    good = record_batch(0, [(0, 0, KEY, b"x", ())])
    for codec, payload in ((1, b"not gzip"), (2, b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\x00\x00\x00\x09abc"),
                           (3, b"\x04\x22\x4d\x18\x60\x40\x82\x05\x00\x00\x00abc"), (4, b"zz"), (6, b"??")):
        after = struct.pack(">hiqqqhii", codec, 0, 0, 0, -1, 0, -1, 1) + payload
        data = struct.pack(">qiibI", 5, 9 + len(after), 0, 2, crc32c_bitwise(after)) + after
        items = _read(_write(tmp_path / str(codec), 0, good + data + record_batch(6, [(0, 0, KEY, b"y", ())])))
        assert [r[4] for r in _rows(items)] == [b"x", b"y"], codec
        (q,) = [i for i in items if isinstance(i, Quarantined)]
        assert q.reason == "corrupt_batch" and "RecordBatch.records" in q.detail, (codec, q.detail)


def test_corrupt_batch_in_a_real_segment_keeps_the_records_around_it(tmp_path):
    src = SEG40 / "node1" / "__consumer_offsets-8" / "00000000000000000000.log"
    data = bytearray(src.read_bytes())
    batches = list(scan_segment(bytes(data), 8))
    victim = batches[100]
    data[victim.pos + 70] ^= 0x55
    stats = SegmentStats()
    items = _read(_write(tmp_path, 8, bytes(data)), stats)
    rows = _rows(items)
    original = [r for r in _dump(FIXTURES / "kafka-4.0" / "offsets-topic.jsonl") if r[0] == 8]
    lost = {r.offset for r in victim.records}
    assert rows == [r for r in original if r[1] not in lost]
    (q,) = [i for i in items if isinstance(i, Quarantined)]
    assert q.seq == victim.base_offset and f"at byte {victim.pos + 17}" in q.detail


def test_unreadable_and_empty_inputs(tmp_path):
    d = _write(tmp_path, 1, b"")
    assert _read(d) == []
    assert _read(tmp_path / "nothing-here") == []
    assert find_partition_dirs(str(tmp_path)) == [(1, str(d))]


def test_replay_rows_give_magic0_records_and_bad_batches_the_time_before_them(tmp_path):
    from streaming.offsets.reader import OffsetsRowReader
    bad = bytearray(record_batch(2, [(0, 0, KEY, b"x", ())], base_ts=9_000))
    bad[-1] ^= 1
    data = (legacy_message(0, KEY, b"old", magic=0) + record_batch(1, [(0, 0, KEY, b"new", ())], base_ts=5_000)
            + bytes(bad) + legacy_message(3, KEY, b"old2", magic=0) + record_batch(4, [(0, 0, KEY, b"z", ())], base_ts=7_000))
    d = _write(tmp_path, 6, data)
    reader = OffsetsRowReader([{"path": str(d), "source_id": "c:seg", "kind": "segments"}])
    rows = reader.rows(0, len(reader))
    # (source_id, seq, partition, offset, timestamp_ms, key, value, error, eof, error_reason)
    by_value = {r[6]: r for r in rows if r[6] is not None}
    assert by_value[b"old"][4] == 5_000          # before the first timestamp: the next one
    assert by_value[b"old2"][4] == 5_000         # magic 0 after a record: that record's time
    (q,) = [r for r in rows if r[7] is not None]
    assert q[9] == "corrupt_batch" and q[4] == 5_000 and q[2] == 6 and "RecordBatch.crc" in q[7]
    assert [r[4] for r in rows] == sorted(r[4] for r in rows)
