"""fold_commit_event (state/machine/common.py) reads a commit pack's entries in place: it must give
what fold_commit gives over the pack's entries one by one (events.commits_of), for every shape of
entry: full, with the earlier commit times the reduction kept, without a commit time or count,
without a partition, short (fewer fields). And a partition's kept commit times are its newest
distinct ones whatever the order and grouping of the folds (the decoder's reductions, the commit
digest, the machine's turns)."""
from __future__ import annotations

import random

from state import events as E
from state.machine.common import fold_commit, fold_commit_event, fold_commit_times


def _reference(partitions: dict, prior: dict, last, kind: str, data: dict, ts: int):
    total = 0
    for commit in E.commit_entries(kind, data):
        last, count = fold_commit(partitions, prior, last, commit, ts)
        total += count
    return last, total


def test_a_pack_folds_as_its_commits_one_by_one():
    rng = random.Random(3)
    for _ in range(300):
        entries = []
        for _ in range(rng.randrange(0, 8)):
            cts = rng.choice([None, 0, rng.randrange(1, 1000)])
            earlier = sorted(rng.sample(range(1, 1000), 2), reverse=True)
            entry = [rng.choice(["t", "u", None]), rng.choice([0, 1, 2, None]), rng.randrange(100),
                     cts, rng.choice([None, 0, 1, 3]), *earlier]
            entries.append(entry[:rng.choice([5, 5, 5, 6, 7, 4, 2])])
        ts = rng.randrange(1, 1000)
        start = {"t:0": rng.randrange(1000)} if rng.random() < 0.5 else {}
        start_prior = {"t:0": [-1]} if start and rng.random() < 0.5 else {}
        last = rng.choice([None, rng.randrange(1000)])
        mine, theirs = dict(start), dict(start)
        mine_prior: dict[str, list[int]] = {k: list(v) for k, v in start_prior.items()}
        theirs_prior: dict[str, list[int]] = {k: list(v) for k, v in start_prior.items()}
        assert fold_commit_event(mine, mine_prior, last, E.OFFSET_COMMITS, {"commits": entries}, ts) == \
            _reference(theirs, theirs_prior, last, E.OFFSET_COMMITS, {"commits": entries}, ts)
        assert mine == theirs and mine_prior == theirs_prior


def test_a_single_commit_folds_as_fold_commit():
    data = {"topic": "t", "partition": 1, "offset": 5, "commit_ts_ms": 40}
    mine: dict[str, int] = {}
    theirs: dict[str, int] = {}
    assert fold_commit_event(mine, {}, 10, E.OFFSET_COMMIT, data, 7) == fold_commit(theirs, {}, 10, data, 7)
    assert mine == theirs == {"t:1": 40}


def test_the_kept_times_are_the_newest_distinct_ones_in_any_order_and_grouping():
    rng = random.Random(11)
    for _ in range(300):
        times = [rng.randrange(1, 60) for _ in range(rng.randrange(1, 12))]
        want = E.newest_commit_times(times)
        # Folded in a random order, in random groups, each group first reduced as the decoder does.
        rng.shuffle(times)
        newest: dict[str, int] = {}
        prior: dict[str, list[int]] = {}
        i = 0
        while i < len(times):
            n = rng.randrange(1, 4)
            group = E.newest_commit_times(times[i:i + n])
            fold_commit_times(newest, prior, "t:0", group[0], tuple(group[1:]))
            i += n
        assert [newest["t:0"], *prior.get("t:0", [])] == want


def test_one_new_commit_after_the_last_shifts_the_kept_times():
    newest, prior = {"t:0": 30}, {"t:0": [20, 10]}
    fold_commit_times(newest, prior, "t:0", 40)
    assert (newest, prior) == ({"t:0": 40}, {"t:0": [30, 20]})
    fold_commit_times(newest, prior, "t:0", 25)        # a late, older commit finds its place
    assert (newest, prior) == ({"t:0": 40}, {"t:0": [30, 25]})
