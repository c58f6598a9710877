"""bench/cost's catch-up backlog (bench/scale_inputs.catch_up_backlog): exactly the records asked
for, every group's sc03 scenario whole and over before the backlog's tail, auto-commits of 10
partitions away from it, each partition in time order, the newest record at the end time."""
from __future__ import annotations

import struct
from collections import defaultdict

import pytest

from bench.scale_inputs import (
    _CATCH_UP_PAD_MS, CATCH_UP_COMMIT_PARTITIONS, CATCH_UP_TAIL_MS, _partition, _records, catch_up_backlog,
    catch_up_shape_error, group_name,
)
from streaming.offsets.decoder import decode_record

END_MS = 1_800_000_000_000
SCENARIO = len(_records())


def _backlog(groups: int, records: int, span_s: float = 600.0) -> dict[int, list]:
    return dict(catch_up_backlog(groups, records, END_MS, seed=3, span_s=span_s))


@pytest.mark.parametrize(("groups", "records"), [(7, 7 * SCENARIO + 123), (5, 5 * SCENARIO), (3, 3 * SCENARIO + 30)])
def test_the_records_asked_for_spread_over_the_groups(groups: int, records: int) -> None:
    per_group: dict[str, list] = defaultdict(list)
    for partition, rows in _backlog(groups, records).items():
        assert [ts for ts, _, _ in rows] == sorted(ts for ts, _, _ in rows)
        for ts, key, value in rows:
            decoded = decode_record(key, value)
            assert _partition(decoded["key"]["group"].encode()) == partition
            per_group[decoded["key"]["group"]].append((ts, decoded))
    assert sorted(per_group) == [group_name(i) for i in range(groups)]
    assert sum(len(rows) for rows in per_group.values()) == records
    commits = {group: [d for ts, d in rows if d["value"] and d["value"].get("commit_timestamp") == ts]
               for group, rows in per_group.items()}
    assert all(len(rows) - len(commits[group]) == SCENARIO for group, rows in per_group.items())
    quotas = sorted(len(c) for c in commits.values())
    assert quotas[-1] - quotas[0] <= 1
    assert max(ts for rows in per_group.values() for ts, _ in rows) == END_MS
    assert min(ts for rows in per_group.values() for ts, _ in rows) >= END_MS - 600_000


def test_each_scenario_ends_before_the_tail_and_commits_keep_away_from_it() -> None:
    per_group: dict[str, list] = defaultdict(list)
    for rows in _backlog(20, 20 * SCENARIO + 20 * 57).values():
        for ts, key, value in rows:
            decoded = decode_record(key, value)
            auto = bool(decoded["value"]) and decoded["value"].get("commit_timestamp") == ts
            per_group[decoded["key"]["group"]].append((ts, auto, decoded))
    for group, rows in per_group.items():
        scenario = [ts for ts, auto, _ in rows if not auto]
        assert max(scenario) <= END_MS - CATCH_UP_TAIL_MS, group
        autos = [(ts, d) for ts, auto, d in rows if auto]
        assert all(ts < min(scenario) - _CATCH_UP_PAD_MS or ts > max(scenario) + _CATCH_UP_PAD_MS for ts, _ in autos)
        by_time: dict[int, list[int]] = defaultdict(list)
        for ts, d in autos:
            by_time[ts].append(d["key"]["partition"])
        # 57 records: five commits of all 10 partitions, then one of the first 7.
        assert sorted(len(p) for p in by_time.values()) == [7] + [CATCH_UP_COMMIT_PARTITIONS] * 5
        assert all(sorted(p) == list(range(len(p))) for p in by_time.values())
        offsets = [d["value"]["offset"] for _, d in sorted(autos, key=lambda a: a[0])]
        assert offsets == sorted(offsets) and offsets[0] == 100


def test_deterministic_for_its_seed() -> None:
    def digest(seed: int) -> list:
        return [(p, rows) for p, rows in catch_up_backlog(4, 4 * SCENARIO + 40, END_MS, seed=seed, span_s=600.0)]
    assert digest(1) == digest(1)
    assert digest(1) != digest(2)


@pytest.mark.parametrize(("groups", "records", "span_s", "says"), [
    (10, 10 * SCENARIO - 1, 3600.0, "below the 10 groups' scenarios alone"),
    (0, 1000, 3600.0, "at least 1"),
    (10, 10_000, 60.0, "spans at least"),
])
def test_a_backlog_it_cannot_make_is_one_clear_message(groups: int, records: int, span_s: float, says: str) -> None:
    problem = catch_up_shape_error(groups, records, span_s)
    assert problem is not None and says in problem
    with pytest.raises(ValueError, match=says):
        next(catch_up_backlog(groups, records, END_MS, span_s=span_s))


def test_the_commit_value_carries_its_record_time() -> None:
    rows = [row for _, part in catch_up_backlog(1, SCENARIO + 10, END_MS, span_s=600.0) for row in part]
    ts, key, value = rows[-1]
    assert value is not None and struct.unpack_from(">q", value, len(value) - 8)[0] == ts == END_MS
