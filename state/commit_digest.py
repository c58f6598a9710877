"""A group's commit digest: the offset commits folded without a state-machine turn, and their
merge into the group's model at its next turn (docs/design.md, "Commits without a turn").

Folding a commit here is what CommonEvents.on_offset_commit (state/machine/common.py) does to the
model, on fields of its own: max (newest commit time, newest record time), top-k (each
partition's newest commit times), sum (commits). So the order of folds does not matter, and a
merge gives the model a turn would have given, as long as every folded commit is older than
anything the group still holds (the Spark layer's fold_commits decides when that is so).

Stored (the Spark state's bucket entries) as a dict of short keys: "pc" newest commit time per
"topic:partition", "pp" the next newest ones (when any), "last" newest commit time, "n" commits,
"ev" newest record time. The keys are the stored form since state version 4; `stored`/`from_stored`
keep it (a bucket entry adds "w", its commits still waiting: streaming/spark/state_bucket.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from state import events as E
from state.diagnosis.holding import note_commit_times
from state.machine.common import fold_commit_event, fold_commit_times
from state.model import GroupModel


@dataclass(slots=True)
class CommitDigest:
    partitions: dict[str, int] = field(default_factory=dict)
    prior: dict[str, list[int]] = field(default_factory=dict)
    last_commit_ms: int | None = None
    commits: int = 0
    newest_event_ms: int | None = None     # None: nothing folded yet

    @classmethod
    def from_stored(cls, raw: dict[str, Any]) -> CommitDigest:
        return cls(raw.get("pc", {}), raw.get("pp", {}), raw.get("last"), raw.get("n", 0), raw.get("ev"))

    def stored(self) -> dict[str, Any]:
        """The stored keys: none until a commit is folded, "pp" only when it holds times."""
        if self.newest_event_ms is None:
            return {}
        out: dict[str, Any] = {"pc": self.partitions, "last": self.last_commit_ms, "n": self.commits,
                               "ev": self.newest_event_ms}
        if self.prior:
            out["pp"] = self.prior
        return out

    def fold(self, kind: str, data: dict[str, Any], ts_ms: int) -> None:
        """One OFFSET_COMMIT or OFFSET_COMMITS event, as on_offset_commit folds it into the model."""
        self.newest_event_ms = ts_ms if self.newest_event_ms is None else max(self.newest_event_ms, ts_ms)
        self.last_commit_ms, count = fold_commit_event(self.partitions, self.prior, self.last_commit_ms, kind, data,
                                                       ts_ms)
        self.commits += count

    def merge_into(self, model: GroupModel) -> None:
        """The folded commits into the model, as the machine's turn would have applied them."""
        if not self.commits:
            return
        last = self.last_commit_ms
        if last is not None:
            model.last_commit_ms = last if model.last_commit_ms is None else max(model.last_commit_ms, last)
        model.commits_total += self.commits
        collecting = any(h.commit_partitions for h in model.held_removals)
        for key, commit_ts in self.partitions.items():
            earlier = tuple(self.prior.get(key, ()))
            fold_commit_times(model.partition_commits, model.partition_prior_commits, key, commit_ts, earlier)
            if collecting:      # as on_offset_commit
                note_commit_times(model, key, (commit_ts, *earlier))
        newest = self.newest_event_ms
        if newest is not None:
            model.last_event_ms = newest if model.last_event_ms is None else max(model.last_event_ms, newest)
        if E.SOURCE_OFFSETS not in model.seen_sources:
            model.seen_sources = sorted(model.seen_sources + [E.SOURCE_OFFSETS])
