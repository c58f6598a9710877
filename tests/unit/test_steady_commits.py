"""bench/scale_inputs.steady_commit_stream (bench/cost's long steady window streams 12 minutes of
auto-commits): the records, in the order, of the list it replaces, and steady_commit_count counts
them without making them."""
from __future__ import annotations

import random
import struct

import pytest

from bench.scale_inputs import (
    _partition, _records, _rename_key, group_name, steady_commit_count, steady_commit_stream, steady_commits,
)

SHAPES = [(7, 30.0, 5.0, 10), (40, 12.5, 2.5, 3), (3, 1.0, 5.0, 1), (25, 61.0, 0.625, 2)]


def _reference(groups: int, window_s: float, every_s: float, seed: int, partitions: int) -> list[tuple[int, dict]]:
    """steady_commits as it was before the stream (bench/cost's 90 s steady part used it)."""
    key, value = next((k, v) for _, k, v in _records() if struct.unpack_from(">h", k, 0)[0] in (0, 1) and v)
    rng = random.Random(seed)
    period = int(every_s * 1000)
    out: list[tuple[int, dict]] = []
    for i in range(groups):
        name = group_name(i).encode()
        renamed = _rename_key(key, name)
        records = [{"partition": _partition(name), "key": renamed[:-4] + struct.pack(">i", p), "value": value,
                    "key_b64": None, "value_b64": None} for p in range(partitions)]
        out += [(ms, record) for ms in range(rng.randrange(period), int(window_s * 1000), period)
                for record in records]
    out.sort(key=lambda r: r[0])
    return out


@pytest.mark.parametrize(("groups", "window_s", "every_s", "partitions"), SHAPES)
def test_the_stream_is_the_list_it_replaces(groups: int, window_s: float, every_s: float, partitions: int) -> None:
    expected = _reference(groups, window_s, every_s, 15, partitions)
    assert list(steady_commit_stream(groups, window_s, every_s, 15, partitions)) == expected
    assert steady_commits(groups, window_s, every_s, 15, partitions) == expected


@pytest.mark.parametrize(("groups", "window_s", "every_s", "partitions"), SHAPES)
@pytest.mark.parametrize("start_s", [0.0, 0.5, 7.0, 20.0])
def test_the_count_from_a_start(groups: int, window_s: float, every_s: float, partitions: int, start_s: float) -> None:
    rows = list(steady_commit_stream(groups, window_s, every_s, 15, partitions))
    assert steady_commit_count(groups, every_s, 15, partitions, start_s, window_s) == \
        sum(1 for ms, _ in rows if ms >= start_s * 1000)
