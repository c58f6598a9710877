"""The replay's read tasks for `__consumer_offsets` inputs (streaming/spark/sources/replay_files.py):
a dump cut into slices at line starts, and segment directories, give exactly the rows of the
driver-side reference reader (streaming/offsets/reader.py OffsetsRowReader), whatever the cuts,
and their count rows add up to the records read."""
from __future__ import annotations

import itertools
import re

import pytest

from streaming.offsets.reader import OffsetsRowReader
from streaming.spark.sources import replay_files
from streaming.spark.sources.replay_files import (
    _count_slices,
    dump_slices,
    line_slices,
    plan_ahead,
    plan_offsets_reads,
    read_dump_slice,
    read_segments,
)
from tests.support.capture_expectations import FIXTURES

DUMP = FIXTURES / "kafka-2.7" / "offsets-topic.jsonl"


def _split(rows: list[tuple]) -> tuple[list[tuple], int]:
    kept = [r for r in rows if not r[8]]
    return kept, sum(r[1] for r in rows if r[8])


@pytest.mark.parametrize("slice_bytes", [1, 4096, 100_000, 1 << 30])
def test_dump_slices_read_every_line_once_with_its_line_number(slice_bytes):
    reads = dump_slices(str(DUMP), "d", slice_bytes)
    size = DUMP.stat().st_size
    assert reads[0].start == 0 and reads[-1].end == size
    assert all(a.end == b.start for a, b in itertools.pairwise(reads))
    with open(DUMP, "rb") as handle:
        data = handle.read()
    assert all(data[r.start - 1:r.start] == b"\n" for r in reads[1:])
    assert all(data.count(b"\n", 0, r.start) + 1 == r.line for r in reads)
    if slice_bytes == 4096:
        assert len(reads) > 10
    rows, counted = _split([row for r in reads for row in read_dump_slice(r)])
    reference = OffsetsRowReader([{"path": str(DUMP), "source_id": "d", "kind": "jsonl"}])
    assert counted == len(reference) == 1606
    assert sorted(rows, key=lambda r: r[1]) == sorted(reference.rows(0, len(reference)), key=lambda r: r[1])


def test_slices_cut_ahead_are_those_of_the_file_as_it_is_when_planned(tmp_path):
    """plan_ahead's cut (started before the Spark session) is used only for the file it counted:
    a file changed since is cut again."""
    path = tmp_path / "dump.jsonl"
    path.write_bytes(DUMP.read_bytes())
    plan_ahead([str(path), str(tmp_path / "missing.jsonl"), str(tmp_path)], 4096)
    assert line_slices(str(path), 4096) == _count_slices(str(path), 4096)
    assert not replay_files._AHEAD          # used once, then forgotten
    before = _count_slices(str(path), 4096)
    plan_ahead([str(path)], 4096)
    with open(path, "ab") as handle:
        handle.write(b"\n".join([b"{}"] * 5000) + b"\n")
    after = line_slices(str(path), 4096)
    assert after == _count_slices(str(path), 4096) and after != before


def test_a_malformed_dump_line_is_kept_with_a_neighbours_time(tmp_path):
    lines = DUMP.read_text().splitlines()[:6]
    lines[0] = "{not json"          # top of the file: the next good line's time
    lines[3] = "garbage"            # the line before's time
    path = tmp_path / "dump.jsonl"
    path.write_text("\n".join(lines) + "\n\n")
    rows, counted = _split([row for r in dump_slices(str(path), "d", 1 << 30) for row in read_dump_slice(r)])
    reference = OffsetsRowReader([{"path": str(path), "source_id": "d", "kind": "jsonl"}])
    assert counted == 6
    assert sorted(rows, key=lambda r: r[1]) == sorted(reference.rows(0, len(reference)), key=lambda r: r[1])
    assert [r[1] for r in rows if r[9] == "malformed_dump_line"] == [1, 4]


@pytest.mark.parametrize("capture", ["kafka-2.7", "kafka-4.0"])
def test_segment_inputs_read_in_one_task_equal_the_reference(capture):
    spec = {"path": str(FIXTURES / capture / "segments"), "source_id": "s", "kind": "segments"}
    (read,) = plan_offsets_reads([spec])
    rows, counted = _split(list(read_segments(read)))
    reference = OffsetsRowReader([spec])
    assert counted == len(reference)
    key = lambda r: (r[2] if r[2] is not None else -1, r[1], r[7] or "")   # noqa: E731
    assert sorted(rows, key=key) == sorted(reference.rows(0, len(reference)), key=key)


def _rows_of_batches(batches) -> list[tuple]:
    return [tuple(row.values()) for b in batches for row in b.to_pylist()]


@pytest.mark.parametrize("capture", ["kafka-2.7", "kafka-4.0"])
@pytest.mark.parametrize("slice_bytes", [50_000, 1 << 30])
def test_column_wide_dump_read_equals_the_line_by_line_read(capture, slice_bytes):
    from streaming.offsets.dump_arrow import dump_slice_batch
    from streaming.spark.sources.replay_files import _slice_bytes, dump_slice_batches
    dump = FIXTURES / capture / "offsets-topic.jsonl"
    for r in dump_slices(str(dump), "d", slice_bytes):
        assert dump_slice_batch(_slice_bytes(r), "d", r.line) is not None   # really column-wide
        assert _rows_of_batches(dump_slice_batches(r)) == list(read_dump_slice(r))


@pytest.mark.parametrize("damage", [
    lambda ls: ls.insert(2, ""),                                             # blank line
    lambda ls: ls.insert(0, ""),                                             # blank first line
    lambda ls: ls.insert(3, "  "),                                           # white space only
    lambda ls: ls.__setitem__(1, ls[1].replace('"partition": ', '"p": ')),   # partition missing
    lambda ls: ls.__setitem__(1, ls[1].replace('"partition": ', '"partition": 1.5, "x": ')),
    lambda ls: ls.__setitem__(1, ls[1].replace('"value_b64": ', '"other": ')),   # value_b64 missing
    lambda ls: [ls.__setitem__(1, ls[1].replace('"value_b64": ', '"other": ')),    # missing where
                ls.__setitem__(4, re.sub('"value_b64": "[^"]*"', '"value_b64": null', ls[4]))],  # another is null
    lambda ls: ls.__setitem__(1, ls[1].replace('"key_b64": "', '"key_b64": "*')),  # not base64
    lambda ls: ls.__setitem__(1, ls[1].replace('"key_b64": "', '"key_b64": "A')),  # not padded
    lambda ls: ls.__setitem__(1, ls[1].replace('"key_b64": "', '"key_b64": "AA==')),  # padding inside
    lambda ls: ls.__setitem__(1, ls[1].replace('"timestamp": ', '"timestamp": true, "t": ')),
    lambda ls: ls.__setitem__(1, "[1, 2]"),
    lambda ls: ls.__setitem__(1, ls[1] + "\r"),
])
def test_a_dump_slice_the_column_wide_path_cannot_vouch_for_is_read_line_by_line(tmp_path, damage):
    from streaming.offsets.dump_arrow import dump_slice_batch
    from streaming.spark.sources.replay_files import _slice_bytes, dump_slice_batches
    lines = DUMP.read_text().splitlines()[:20]
    damage(lines)
    path = tmp_path / "dump.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (r,) = dump_slices(str(path), "d", 1 << 30)
    assert dump_slice_batch(_slice_bytes(r), "d", r.line) is None
    assert _rows_of_batches(dump_slice_batches(r)) == list(read_dump_slice(r))


def test_base64_decoded_column_wide_equals_the_standard_decoder():
    import base64
    import random

    import pyarrow as pa

    from streaming.offsets.dump_arrow import _b64_column
    rng = random.Random(7)
    values = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))) for _ in range(500)]
    encoded = [None if i % 17 == 0 else base64.b64encode(v).decode() for i, v in enumerate(values)]
    decoded = _b64_column(pa.chunked_array([pa.array(encoded[:200], pa.string()), pa.array(encoded[200:], pa.string())]))
    assert decoded is not None
    assert decoded.to_pylist() == [None if e is None else base64.b64decode(e) for e in encoded]
