"""When a quiet live source adds a "caught up" marker: only when a deadline is due.

A marker row moves its source's watermark to wall-clock time (kafka.py, "Idle flush"); Spark
then calls the groups whose event-time timeout the watermark passed. Each marker costs a
micro-batch (about 0.5-0.9 CPU-s, docs/benchmarks.md "The quiet cluster"), so a source that has
read everything should add one only when something waits for the watermark:

- every group's timeout (its oldest held event, its machine's next deadline: stateful.py) is
  reported by the stateful step's clock rows; the driver's correlator holds removal records until
  the watermark passes them by its hold;
- the driver (streaming/app/marker_planner.py) keeps the earliest of them and writes the wall-clock
  time from which a marker would fire it (that time plus the lateness) to a small file, the plan;
- the sources run their `latestOffset` in another process on the driver's host; they read the
  plan and add a marker per slot of `idle_tick_ms` once it is due, and otherwise only every
  `max_idle_ms` (the watermark-delay gauge and the alert on it stay bounded).

No plan file (before the first batch, or a query without a driver plan): a marker per slot, as
before. A stale plan is still safe: markers keep coming once it is due, and at least every
`max_idle_ms`."""
from __future__ import annotations

import json
import os
from typing import Any

from streaming.rows import FINAL_SNAPSHOT_TS_MS



def read_plan(path: str | None) -> dict[str, Any] | None:
    """The driver's plan ({"due_ms": wall ms or null}), or None when there is none (yet)."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            plan = json.load(handle)
    except (OSError, ValueError):
        return None
    return plan if isinstance(plan, dict) else None


def write_plan(path: str, due_ms: int | None, caught_up: list[str] | None = None) -> None:
    """Atomically, so a source never reads half a file. `caught_up`: the input kinds whose capped
    connector read everything there was at its last batch (clock.py holds the others' markers)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump({"due_ms": due_ms, "caught_up": sorted(caught_up or [])}, handle)
    os.replace(tmp, path)


def caught_up(plan: dict[str, Any] | None, kind: str) -> bool:
    """Did the driver see the `kind` source read everything waiting at its last batch? No plan, or
    one that does not say: not known, so no."""
    return plan is not None and kind in (plan.get("caught_up") or [])


def due_ms(timeouts: Any, correlator_deadline_ms: int | None, lateness_ms: int) -> int | None:
    """The wall-clock time from which a marker (at wall-clock event time) fires the earliest
    deadline: the watermark is the newest event time minus the lateness, and a timeout fires when
    the watermark is above it. None: nothing waits."""
    deadlines = [t for t in timeouts if t is not None and t < FINAL_SNAPSHOT_TS_MS]   # the replay's end: none
    if correlator_deadline_ms is not None:
        deadlines.append(correlator_deadline_ms)
    return min(deadlines) + lateness_ms + 1 if deadlines else None


def marker_due(last_tick: Any, now_ms: int, idle_tick_ms: int, plan: dict[str, Any] | None,
               max_idle_ms: int) -> bool:
    """May a caught-up source add a marker now? One per wall-clock slot of `idle_tick_ms` (every
    source sees the slot end at the same trigger: one micro-batch for all), and with a plan only
    when it is due or `max_idle_ms` passed since the last marker."""
    if last_tick is not None and idle_tick_ms and now_ms // idle_tick_ms == int(last_tick) // idle_tick_ms:
        return False
    if plan is None or last_tick is None:
        return True
    if max_idle_ms and now_ms - int(last_tick) >= max_idle_ms:
        return True
    due = plan.get("due_ms")
    return due is not None and now_ms >= int(due)
