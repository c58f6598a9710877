"""The offsets path end to end: the vectorised decoder (streaming/offsets/vectorised/) equals the
per-record reference on the real dumps and on awkward records, the decode-health counts, the
decode-offsets command on segments vs dumps, and a Spark replay from segments vs from the dump."""
from __future__ import annotations

import collections
import json
import random
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from state import events as E
from streaming.offsets.reader import OffsetsRowReader, offsets_input_kind
from streaming.offsets.per_record import decode_offsets_rows
from streaming.offsets.vectorised import decode_arrow_batch
from state.outputs import OutputKind
from streaming.rows import EVENT_COLUMNS
from streaming.spark.schema import RAW_OFFSETS_SCHEMA
from testbed.offsets_equivalence import normalise
from tests.support.capture_expectations import FIXTURES

ROOT = Path(__file__).resolve().parents[2]
RAW_ARROW = to_arrow_schema(RAW_OFFSETS_SCHEMA)
CLUSTERS = {"a": "c1", "b": "c2"}


def _rows(capture, sid="a"):
    path = FIXTURES / capture / "offsets-topic.jsonl"
    reader = OffsetsRowReader([{"path": str(path), "source_id": sid, "kind": "jsonl"}])
    return reader.rows(0, len(reader))


def _batch(rows):
    return pa.RecordBatch.from_arrays([pa.array(list(c), f.type) for c, f in zip(zip(*rows), RAW_ARROW)],
                                      schema=RAW_ARROW)


def _both(rows, batch_size):
    ref, fast = [], []
    # {cluster: {(key_version, value_version, outcome): n}}, as decode_offsets_rows collects it
    stats_ref: dict[str, dict[tuple[str, str, str], int]] = {}
    stats_fast: dict[str, dict[tuple[str, str, str], int]] = {}
    for i in range(0, len(rows), batch_size):
        chunk = rows[i:i + batch_size]
        ref += decode_offsets_rows(chunk, CLUSTERS, stats=stats_ref)
        for b in decode_arrow_batch(_batch(chunk), CLUSTERS):
            for r in b.to_pylist():
                row = tuple(r[c] for c in EVENT_COLUMNS)
                if r["kind"] == OutputKind.DECODE_STATS:
                    for kv, vv, outcome, n in json.loads(row[-1])["counts"]:
                        per = stats_fast.setdefault(row[0], {})
                        per[(kv, vv, outcome)] = per.get((kv, vv, outcome), 0) + n
                else:
                    fast.append(row)
    return ref, fast, stats_ref, stats_fast


CAPTURES = ["kafka-2.7", "kafka-4.0", "offsets-4x/4.2.2", "offsets-4x/4.4.0"]
COMMITS = {"kafka-2.7": 1484, "kafka-4.0": 4018, "offsets-4x/4.2.2": 26, "offsets-4x/4.4.0": 24}


@pytest.mark.parametrize("capture", CAPTURES)
@pytest.mark.parametrize("batch_size", [100_000, 997, 13])
def test_vectorised_decoder_equals_the_reference_on_the_real_dumps(capture, batch_size):
    rows = _rows(capture)
    ref, fast, stats_ref, stats_fast = _both(rows, batch_size)
    commits, other = normalise(ref)
    assert normalise(fast) == (commits, other)
    assert sum(c["count"] for c in commits.values()) == COMMITS[capture]
    assert not any(r[6] == "offset_commit" for r in ref + fast)     # every commit is packed
    if capture in ("kafka-2.7", "kafka-4.0"):
        # Their commits all take tier 1 (value v3), which packs them as the reference does, to the
        # byte. (Where some commits of a partition take tier 3, each tier packs its own: the same
        # commits in more rows, which normalise merges as the state machine does.)
        packs = collections.Counter(r for r in ref if r[6] == "offset_commits")
        assert collections.Counter(r for r in fast if r[6] == "offset_commits") == packs
    assert stats_fast == stats_ref
    assert all(outcome == "decoded" for (_, _, outcome) in stats_ref["c1"])
    assert sum(stats_ref["c1"].values()) == len(rows)


def test_decode_health_counts_by_version_for_the_40_capture():
    _, _, _, stats = _both(_rows("kafka-4.0"), 5000)
    c = stats["c1"]
    # key-versions.md: 4166 type-1 records of which 148 tombstones; 2.7/4.0 write value v3.
    assert c[("1", "3", "decoded")] == 4018 and c[("1", "null", "decoded")] == 148
    assert c[("2", "3", "decoded")] == 83 and c[("2", "null", "decoded")] == 20
    assert c[("8", "0", "decoded")] == 84 and c[("8", "null", "decoded")] == 25


def _key(group, topic, partition, t=1):
    g, tp = group if isinstance(group, bytes) else group.encode(), topic if isinstance(topic, bytes) else topic.encode()
    return struct.pack(">hh", t, len(g)) + g + struct.pack(">h", len(tp)) + tp + struct.pack(">i", partition)


def _v(version, offset, cts, metadata=b"", tail=b""):
    if version in (0, 2):
        return struct.pack(">hqh", version, offset, len(metadata)) + metadata + struct.pack(">q", cts) + tail
    if version == 1:
        return struct.pack(">hqh", 1, offset, len(metadata)) + metadata + struct.pack(">qq", cts, cts + 1) + tail
    if version == 3:
        return struct.pack(">hqih", 3, offset, 7, len(metadata)) + metadata + struct.pack(">q", cts) + tail
    return struct.pack(">hqiB", version, offset, 7, len(metadata) + 1) + metadata + struct.pack(">q", cts) + (tail or b"\x00")


def _cg_key(t, member=None):
    key = struct.pack(">hh", t, 2) + b"cg"
    return key + (struct.pack(">h", len(member)) + member if member is not None else b"")


def _epochs_tag(n):
    return b"\x01\x00" + bytes([1 + 4 * n, n + 1]) + struct.pack(f">{n}i", *range(n))


def _cg8(tags):
    """ConsumerGroupCurrentMemberAssignmentValue: epochs 3/2, STABLE, one topic with two partitions
    (with `tags` after them), nothing pending."""
    return struct.pack(">hiib", 0, 3, 2, 0) + b"\x02" + bytes(16) + b"\x03" + struct.pack(">ii", 0, 1) + tags + b"\x01\x00"


def test_vectorised_decoder_equals_the_reference_on_awkward_records():
    """Every layout the fast path must hand over (or take) correctly, mixed in one batch."""
    records = [
        (_key("g", "t", 0), _v(3, 10, 100)), (_key("g", "t", 0), _v(3, 11, 99)),
        (_key("g", "t", 0, t=0), _v(0, 12, 101)),                       # key type 0, same partition
        (_key("g", "t", 1), _v(1, 5, 50)), (_key("g", "t", 1), _v(2, 6, 60)),
        (_key("g", "t", 2), _v(4, 7, 70)),                              # flexible v4
        (_key("g", "t", 2), _v(4, 8, 80, tail=b"\x01\x00\x10" + bytes(16))),  # v4 with a topicId tag
        (_key("g", "t", 3), _v(3, 1, 1, tail=b"\x00\x01")),             # trailing bytes
        (_key("g", "t", 3), _v(3, 2, 2, metadata="é".encode())),       # non-ASCII metadata
        (_key("g", "t", 3), _v(3, 3, 3, metadata=b"\xff")),             # metadata not UTF-8
        (_key("g", "t", 4), _v(3, 4, 4, metadata=b"x" * 200)),
        (_key("g", "t", 5), _v(4, 4, 4, metadata=b"y" * 200)),          # two-byte compact length
        (_key("g", 't"q\\', 6), _v(3, 1, 1)),                            # topic needing JSON escapes
        (_key("grp-é", "t", 7), _v(3, 1, 1)), (_key("grp-é", "t", 7), None),
        (_key(b"\xc3(", "t", 8), _v(3, 1, 1)),                          # group not UTF-8
        (_key("g", "t", 9), _v(5, 1, 1)),                               # unknown value version
        (_key("g", "t", 9), _v(3, 1, 1)[:-3]),                           # truncated value
        (_key("g", "t", 9)[:-1], _v(3, 1, 1)),                           # truncated key
        (_key("g", "t", 9) + b"\x00", _v(3, 1, 1)),                      # key with trailing byte
        (_key("g", "t", 9), None), (None, _v(3, 1, 1)),                   # tombstone, null key
        (struct.pack(">hh", 2, 1) + b"g", None),                          # group tombstone
        (b"\x00", b"\x00"), (struct.pack(">h", 99) + b"zz", b"\x00\x00"),
        # KIP-848 values with the tags of 4.1-4.4 (tier 2), well and badly formed
        (_cg_key(3), struct.pack(">hiBBBq", 0, 5, 1, 0, 8, -7)),          # MetadataHash
        (_cg_key(6), struct.pack(">hiBBBq", 0, 5, 1, 0, 8, 1_700_000_000_000)),   # AssignmentTimestamp
        (_cg_key(6), struct.pack(">hiBBBi", 0, 5, 1, 0, 4, 9)),           # a 4-byte tag 0: corrupt
        (_cg_key(6), struct.pack(">hiBBBq", 0, 5, 1, 3, 8, 1)),           # an unknown tag
        (_cg_key(8, b"m"), _cg8(_epochs_tag(2))), (_cg_key(8, b"m"), _cg8(b"\x01\x00\x01\x00")),   # epochs, null epochs
        (_cg_key(8, b"m"), _cg8(b"\x01\x00\x05\x02\x00\x00\x00\x01")),   # tag size 5, count says 1 epoch: ok
        (_cg_key(8, b"m"), _cg8(b"\x01\x00\x05\x03\x00\x00\x00\x01")),   # count says 2 epochs in 5 bytes
        (_cg_key(17), None), (_cg_key(22, b"m"), None), (_cg_key(23), None),   # streams tombstones
    ]
    rows: list[tuple] = []
    for i, (k, v) in enumerate(records):
        rows.append(("a" if i % 3 else "b", i, i % 4, 1000 + i, 5_000 + (i * 7) % 11, k, v, None, False, None))
    rows.append(("a", 99, None, None, 5_000, None, None, "ValueError: bad | {", False, "malformed_dump_line"))
    rows.append(("end-of-input", 0, None, None, E.END_OF_INPUT_TS_MS, None, None, None, True, None))
    for size in (len(rows), 5, 1):
        ref, fast, stats_ref, stats_fast = _both(rows, size)
        assert normalise(fast) == normalise(ref), size
        assert stats_fast == stats_ref
    kinds = {r[6] for r in ref}
    assert {"offset_commits", "offset_tombstone", "group_tombstone", "quarantine", "end_of_input"} <= kinds
    outcomes = {k[2] for per in stats_ref.values() for k in per}
    assert outcomes == {"decoded", "corrupt", "unknown_type", "unknown_version"}


def test_a_partitions_many_commits_in_one_batch_carry_its_eight_newest_times():
    """A static member's 3 commits, then 6 of its replacement's, in one batch (the test bed's 1 s
    auto-commits in a slow micro-batch): the entry carries the 8 newest distinct times (a repeat
    counts once), so the 2 newest of the member's survive for its removal to read; both paths."""
    times = [1_000, 2_000, 3_000, 4_600, 5_600, 6_600, 6_600, 7_600, 8_600, 9_600]
    rows = [("a", i, 0, 1000 + i, t, _key("g", "t", 0), _v(3, i, t), None, False, None)
            for i, t in enumerate(times)]
    rows.append(("a", 50, 0, 1050, 9_700, _key("g", "t", 1), _v(3, 1, 9_700), None, False, None))
    ref, fast, _, _ = _both(rows, len(rows))
    for out in (ref, fast):
        entries = {tuple(e[:2]): e for r in out if r[6] == "offset_commits" for e in json.loads(r[-1])["commits"]}
        assert entries[("t", 0)] == ["t", 0, 9, 9_600, 10, 8_600, 7_600, 6_600, 5_600, 4_600, 3_000, 2_000]
        assert entries[("t", 1)] == ["t", 1, 1, 9_700, 1]          # one commit: no earlier times


@pytest.mark.parametrize("capture,seed", [("kafka-4.0", 7), ("offsets-4x/4.4.0", 7), ("offsets-4x/4.4.0", 8),
                                          ("offsets-4x/4.2.2", 9)])
def test_vectorised_decoder_equals_the_reference_on_mutated_real_records(capture, seed):
    rng = random.Random(seed)
    rows = _rows(capture)[:1500]
    mutated = []
    for r in rows:
        r = list(r)
        for col in (5, 6):
            if r[col] and rng.random() < 0.3:
                b = bytearray(r[col])
                b[rng.randrange(len(b))] = rng.randrange(256)
                r[col] = bytes(b)
        mutated.append(tuple(r))
    ref, fast, stats_ref, stats_fast = _both(mutated, 400)
    assert normalise(fast) == normalise(ref)
    assert stats_fast == stats_ref


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_real_group_and_kip848_record_takes_a_direct_reader(capture):
    """The slow tier is for the unusual: every real GroupMetadata record and every real KIP-848
    consumer record (classic members of mixed groups, the tags of 4.1-4.4 included) and every
    tombstone is read by the direct readers, with the reference's event. A record that falls
    through is not wrong, only slow; this catches that. Share and streams values (types >= 9) are
    left to the full decoder."""
    from streaming.offsets.record_events import record_to_events
    from streaming.offsets.vectorised.direct import fast_consumer_group_record, fast_group_metadata
    seen: dict[str, int] = {}
    for r in _rows(capture):
        key, value = r[5], r[6]
        key_type = None if key is None else struct.unpack(">h", key[:2])[0]
        if key_type is None or key_type < 2 or (key_type >= 9 and value is not None):
            continue
        events = record_to_events(partition=r[2], offset=r[3], timestamp_ms=r[4], key=key, value=value)
        assert isinstance(events, list), events
        (ev,) = events
        if key[:2] == b"\x00\x02" and value is not None:
            assert fast_group_metadata(key, value) == (ev.group, ev.generation, ev.data)
            kind = "group_metadata"
        else:
            fast = fast_consumer_group_record(key, value)
            assert fast is not None, (key, value)
            assert fast[:5] == (ev.group, ev.kind, ev.generation, ev.member_id, ev.data or {})
            kind = ev.kind + (":classic" if (ev.data or {}).get("classic") else "")
        seen[kind] = seen.get(kind, 0) + 1
    if capture.startswith("offsets-4x"):
        assert seen["cg_epoch"] >= 5 and seen["cg_target_epoch"] >= 3 and seen["cg_member_assignment"] > 10
        return
    assert seen["group_metadata"] > 50
    if capture == "kafka-4.0":
        assert seen["cg_member:classic"] > 0 and seen["cg_member"] > 0 and seen["cg_member_assignment"] > 0


# --- decode-offsets on segments vs the dump -------------------------------------------------------

def _decode(path):
    out = subprocess.run([sys.executable, "-m", "streaming.app.cli", "decode-offsets", str(path)], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return out.stdout.splitlines(), out.stderr


def test_decode_offsets_prints_the_same_records_for_segments_and_dump():
    seg, err = _decode(FIXTURES / "kafka-4.0" / "segments" / "node1")
    dump, _ = _decode(FIXTURES / "kafka-4.0" / "offsets-topic.jsonl")
    assert seg == dump and len(seg) == 4634   # the dump was built from node1's segments
    assert "4634 decoded, 0 failed" in err
    seg, err = _decode(FIXTURES / "kafka-2.7" / "segments")   # both brokers' replicas
    dump, _ = _decode(FIXTURES / "kafka-2.7" / "offsets-topic.jsonl")
    assert sorted(seg) == sorted(dump) and len(seg) == 1606   # the dump lists partitions 1, 3, ..., 0, 2, ...
    assert "1606 records already read from another replica" in err
    assert all("error" not in json.loads(line) for line in seg)


def test_offsets_input_kind():
    assert offsets_input_kind(str(FIXTURES / "kafka-2.7" / "segments")) == "segments"
    assert offsets_input_kind(str(FIXTURES / "kafka-2.7" / "offsets-topic.jsonl")) == "jsonl"
    seg = next((FIXTURES / "kafka-2.7" / "segments" / "broker1" / "__consumer_offsets-0").glob("*.log"))
    assert offsets_input_kind(str(seg)) == "segments"


# --- Spark: replay from segments == replay from the dump ------------------------------------------



# --- converted groups keep one history (Kafka 4.0, sc11 and sc11b) -----------------------------



# --- a damaged segment copy: the query keeps going and keeps the good data --------------------

def test_damaged_segments_quarantine_the_batch_and_keep_every_rebalance(tmp_path):
    import shutil

    from streaming.app.local import run_local
    from streaming.app.settings import OffsetsInput
    from streaming.offsets.segments import scan_segment
    from tests.support.capture_expectations import FIXTURES, capture_inputs
    src = FIXTURES / "kafka-2.7" / "segments" / "broker1"
    dst = tmp_path / "broker1"
    shutil.copytree(src, dst)
    seg = dst / "__consumer_offsets-4" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    # damage a batch that holds only offset commits, and cut the file's last batch short
    batches = list(scan_segment(bytes(data), 4))
    victim = next(b for b in batches[10:] if all(r.key[:2] == b"\x00\x01" and r.value for r in b.records))
    data[victim.pos + 40] ^= 0xFF
    seg.write_bytes(bytes(data[:-5]))
    logs, dump = capture_inputs("kafka-2.7")
    good = run_local(logs, dump)
    damaged = run_local(logs, [OffsetsInput(path=str(dst))])
    assert damaged["rebalance"] == good["rebalance"] and damaged["removal"] == good["removal"]
    reasons = sorted(json.loads(q[-1])["reason"] for q in damaged["quarantine"])
    assert reasons == ["corrupt_batch", "truncated_batch"]
    details = [json.loads(q[-1])["detail"] for q in damaged["quarantine"]]
    assert any(f"RecordBatch.crc at byte {victim.pos + 17} of __consumer_offsets-4/" in d for d in details)
    # exactly the commits of the two damaged batches are missing from the groups' counts
    def commits(out):
        last = {}
        for snap in out["snapshot"]:
            last[(snap["cluster"], snap["group"])] = snap
        return sum(s["commits_total"] for s in last.values())
    lost = [r for b in (victim, batches[-1]) for r in b.records if r.key[:2] == b"\x00\x01" and r.value]
    assert len(lost) >= 1 and commits(good) - commits(damaged) == len(lost)


def test_offsets_row_reader_merges_segments_and_dumps_in_time_order():
    files = [{"path": str(FIXTURES / "kafka-4.0" / "segments"), "source_id": "s", "kind": "segments"},
             {"path": str(FIXTURES / "kafka-2.7" / "offsets-topic.jsonl"), "source_id": "d", "kind": "jsonl"}]
    reader = OffsetsRowReader(files)
    assert len(reader) == 4634 + 1606
    whole = reader.rows(0, len(reader))
    pieces = [r for i in range(0, len(reader), 777) for r in reader.rows(i, min(len(reader), i + 777))]
    assert pieces == whole
    assert [r[4] for r in whole] == sorted(r[4] for r in whole)
    seg = sorted((r[2], r[3], r[4], r[5], r[6]) for r in whole if r[0] == "s")
    dump = OffsetsRowReader([{"path": str(FIXTURES / "kafka-4.0" / "offsets-topic.jsonl"), "source_id": "x",
                              "kind": "jsonl"}])
    assert seg == sorted((r[2], r[3], r[4], r[5], r[6]) for r in dump.rows(0, len(dump)))
