"""Who consumed which partition when, from the members' own callbacks and the bed's kills and
leaves: the ground truth of what a rebalance stopped (testbed/judge/expect.py, docs/impact.md)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ExpGap:
    """A partition nobody consumed for a while, as the bed saw it: from when its owner stopped
    consuming it (its client revoked or lost it, or the bed killed it or told it to leave) to when
    a member's client next got it. The ground truth of a rebalance's cost (docs/impact.md)."""
    partition: str
    stopped_ms: int
    resumed_ms: int
    owner: str                        # the bed's client id of the member that stopped
    how: str                          # revoked | lost | kill | leave



# Bed actions after which a member consumes nothing more (a pause or a stalled poll loop may
# resume and keep its partitions: not judged here).
ENDS_CONSUMING = ("kill", "leave")


def _when(e: dict) -> tuple[int, bool]:
    """A timeline entry's place: a kill last within its millisecond, as a callback the bed logged
    in the same one ran before it (a killed process calls nothing back; 2.8.2 kill in CI: a's
    assignment and its kill in one millisecond, its partitions' stop then unseen)."""
    return e["ts_ms"], e["action"] == "kill"


class Ownership:
    """Who consumes which partition, from the members' own callbacks (Runner.record_callbacks) and
    the bed's kills and leaves. An eager client revokes everything it owns and is given its whole
    new assignment; a cooperative or KIP-848 client names only what it loses or gains."""

    def __init__(self, timeline: list, until_ms: int | None = None):
        self.owned: dict[str, set] = {}
        self.stopped: dict[str, tuple] = {}
        self.gaps: list[ExpGap] = []          # every stop that ended
        self.first_given: dict[str, int] = {}     # partition -> when a client was first given it
        for e in sorted(timeline, key=_when):
            if until_ms is not None and _when(e) >= (until_ms, True):
                break             # what came before `until_ms`, and the callbacks of its millisecond
            if e.get("client_id") is not None:
                self._apply(e, self.owned.setdefault(e["client_id"], set()))

    def _apply(self, e: dict, mine: set) -> None:
        if e["action"] == "callback" and e["callback"] == "assigned":
            for p in e["partitions"]:
                self.first_given.setdefault(p, e["ts_ms"])
                if p in self.stopped:
                    at, owner, how = self.stopped.pop(p)
                    self.gaps.append(ExpGap(p, at, e["ts_ms"], owner, how))
                mine.add(p)
        elif e["action"] == "callback":
            for p in set(e["partitions"]) & mine:
                self.stopped.setdefault(p, (e["ts_ms"], e["client_id"], e["callback"]))
            mine -= set(e["partitions"])
        elif e["action"] in ENDS_CONSUMING:
            for p in sorted(mine):
                self.stopped.setdefault(p, (e["ts_ms"], e["client_id"], e["action"]))
            mine.clear()

    def consumed(self) -> set:
        return set().union(*self.owned.values())
