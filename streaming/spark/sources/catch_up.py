"""Catching up: how many records the next batch of a source far behind takes.

A source whose backlog is more than `max_rows` records (a new checkpoint on a full
`__consumer_offsets`, a monitor that was down) reads it in capped batches instead of one, so a
batch's memory is bounded and the view and the backlog gauge move while it reads: the first takes
a quarter of the cap (a view sooner while the JVM warms up), each next one what the last took per
second times `batch_ms`, within [CATCH_UP_MIN_ROWS, max_rows]. The records are shared out over the
partitions in proportion to what each has waiting, so their event times stay together (rows a
partition still delivers behind the watermark are counted as late)."""
from __future__ import annotations

from typing import Any

CATCH_UP_FIRST_SHARE = 4
CATCH_UP_MIN_ROWS = 20_000


class CatchUpBudget:
    """The budget of the next batch from the rate the last capped one ran at."""

    def __init__(self, max_rows: int, batch_ms: int) -> None:
        self.max_rows, self.batch_ms = max_rows, batch_ms
        self._last: tuple[int, int] | None = None     # the last capped batch: (wall ms planned, rows)

    def next(self, waiting: int, now_ms: int) -> int:
        """Rows the next batch takes (0: everything waiting, which is at most max_rows, or
        catching up is off)."""
        if not self.max_rows or waiting <= self.max_rows:
            self._last = None
            return 0
        if self._last is None:
            budget = self.max_rows // CATCH_UP_FIRST_SHARE
        elif self.batch_ms:
            planned_ms, rows = self._last
            budget = int(rows / max(1, now_ms - planned_ms) * self.batch_ms)
        else:
            budget = self.max_rows
        budget = min(self.max_rows, max(CATCH_UP_MIN_ROWS, budget))
        self._last = (now_ms, budget)
        return budget


def proportional_takes(waiting: dict[Any, int], budget: int) -> dict[Any, int]:
    """`budget` records shared out over the partitions in proportion to what each has waiting
    (largest remainders get the rest), never more than a partition has."""
    total = sum(waiting.values())
    if total <= budget:
        return dict(waiting)
    exact = {k: w * budget / total for k, w in waiting.items()}
    takes = {k: int(v) for k, v in exact.items()}
    for k in sorted(exact, key=lambda k: takes[k] - exact[k])[:budget - sum(takes.values())]:
        takes[k] += 1
    return takes
