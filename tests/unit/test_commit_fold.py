"""fold_commit_event (state/machine/common.py) reads a commit pack's entries in place: it must give
what fold_commit gives over the pack's entries one by one (events.commits_of), for every shape of
entry: full, with the earlier commit times the reduction kept, without a commit time or count,
without a partition, short (fewer fields). And a partition's kept commit times are its newest
distinct ones whatever the order and grouping of the folds (the decoder's reductions, the commit
digest, the machine's turns)."""
from __future__ import annotations

import random

from state import events as E
from state.commit_digest import CommitDigest
from state.diagnosis.rules import DEFAULT_SETTINGS
from state.machine import run_turn
from state.machine.common import fold_commit, fold_commit_event, fold_commit_times
from state.model import GroupModel


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


def _commit_event(rng: random.Random, ts: int) -> E.Event:
    if rng.random() < 0.5:
        data = {"topic": "t", "partition": rng.randrange(3), "offset": ts, "commit_ts_ms": ts - rng.randrange(5),
                "count": rng.choice([None, 1, 4])}
        return E.Event(group="g", ts_ms=ts, source=E.SOURCE_OFFSETS, source_id="o", seq=ts, kind=E.OFFSET_COMMIT,
                       cluster="c", data=data)
    commits = [["t", rng.randrange(3), ts, ts - rng.randrange(9), rng.choice([1, 2]), ts - 20, ts - 40]
               for _ in range(rng.randrange(1, 4))]
    return E.Event(group="g", ts_ms=ts, source=E.SOURCE_OFFSETS, source_id="o", seq=ts, kind=E.OFFSET_COMMITS,
                   cluster="c", data={"commits": commits})


def test_a_digest_merged_gives_the_model_the_machine_gives_over_the_same_commits():
    """CommitDigest (state/commit_digest.py): commits folded in any order, then merged into a model
    that already has commits, give its commit fields what the machine's turn over them gives."""
    rng = random.Random(5)
    for _ in range(100):
        events = [_commit_event(rng, ts) for ts in sorted(rng.sample(range(100, 10_000), rng.randrange(1, 12)))]
        start = GroupModel(cluster="c", group="g", partition_commits={"t:0": 50}, partition_prior_commits={"t:0": [40]},
                           last_commit_ms=50, commits_total=3, last_event_ms=60, seen_sources=["log"])
        turned = GroupModel.from_json(start.to_json())
        run_turn(turned, events, DEFAULT_SETTINGS)
        digest = CommitDigest()
        for ev in rng.sample(events, len(events)):
            digest.fold(ev.kind, ev.data, ev.ts_ms)
        merged = GroupModel.from_json(start.to_json())
        digest.merge_into(merged)
        fields = ("partition_commits", "partition_prior_commits", "last_commit_ms", "commits_total", "last_event_ms",
                  "seen_sources")
        assert [getattr(merged, f) for f in fields] == [getattr(turned, f) for f in fields]
        assert CommitDigest.from_stored(digest.stored()) == digest
