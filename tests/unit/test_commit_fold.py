"""fold_commit_event (state/machine/common.py) reads a commit pack's entries in place: it must give
what fold_commit gives over the pack's entries one by one (events.commits_of), for every shape of
entry: full, without a commit time or count, without a partition, short (fewer fields)."""
from __future__ import annotations

import random

from state import events as E
from state.machine.common import fold_commit, fold_commit_event


def _reference(partitions: dict, last, kind: str, data: dict, ts: int):
    total = 0
    for commit in E.commit_entries(kind, data):
        last, count = fold_commit(partitions, last, commit, ts)
        total += count
    return last, total


def test_a_pack_folds_as_its_commits_one_by_one():
    rng = random.Random(3)
    for _ in range(300):
        entries = []
        for _ in range(rng.randrange(0, 8)):
            entry = [rng.choice(["t", "u", None]), rng.choice([0, 1, 2, None]), rng.randrange(100),
                     rng.choice([None, 0, rng.randrange(1, 1000)]), rng.choice([None, 0, 1, 3])]
            entries.append(entry[:rng.choice([5, 5, 5, 4, 2])])
        ts = rng.randrange(1, 1000)
        start = {"t:0": rng.randrange(1000)} if rng.random() < 0.5 else {}
        last = rng.choice([None, rng.randrange(1000)])
        mine: dict[str, int] = dict(start)
        theirs: dict[str, int] = dict(start)
        assert fold_commit_event(mine, last, E.OFFSET_COMMITS, {"commits": entries}, ts) == \
            _reference(theirs, last, E.OFFSET_COMMITS, {"commits": entries}, ts)
        assert mine == theirs


def test_a_single_commit_folds_as_fold_commit():
    data = {"topic": "t", "partition": 1, "offset": 5, "commit_ts_ms": 40}
    mine: dict[str, int] = {}
    theirs: dict[str, int] = {}
    assert fold_commit_event(mine, 10, E.OFFSET_COMMIT, data, 7) == fold_commit(theirs, 10, data, 7)
    assert mine == theirs == {"t:1": 40}
