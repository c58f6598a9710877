"""How bench/soak judges its month (issue 50, "Done means"): which figures, against which week,
within which bound. Apart from bench/soak.py, which runs the month, so both stay readable."""
from __future__ import annotations

import math

# How each figure is judged (issue 50, "Done means"): memory, the last full week's max against the
# reference week's (`--memory-bound`, 1.10: growth under 10 %); the checkpoint and the series
# (those of the lag families apart, below), growth into the last full week, its max over the
# week before's (`--flat-bound`, 1.05); the group state file and the state store's newest snapshots,
# max against max (`--bound`).
GROWTH_BETWEEN_WEEKS = ("driver_rss_mb", "jvm_rss_mb", "workers_rss_mb")
FLAT_IN_LAST_WEEK = ("checkpoint_bytes", "series_without_lag")
WITHIN_BOUND = ("state_file_bytes", "state_snapshot_bytes")
BOUNDED = GROWTH_BETWEEN_WEEKS + FLAT_IN_LAST_WEEK + WITHIN_BOUND
def reference_week(weeks: int, week_days: int, retention_days: float) -> int:
    """The week (0-based) the last one is compared with: the first that starts once the offsets
    retention has passed (week 2 at 7 days): before it the Empty groups waiting for their expiry
    are still piling up, by design. Week 1 when there is no such week before the last."""
    k = math.ceil(retention_days / week_days)
    return k if k < weeks - 1 else 0


def verdicts(samples: list[dict], restarts: list[dict], week_days: int, bounds: dict[str, float],
             restart_ceiling: float, reference: int = 0, live_heaps: list[dict] | None = None
             ) -> list[tuple[str, str, float, float, bool]]:
    """(figure, what is compared, a, b, within its bound) per judged figure; `bounds`: "memory",
    "flat", "other", "restart". The restarts (kill -9 to /metrics serving): the last within "restart" x the
    first and under `restart_ceiling` s. The JVM's live heap (`live_heaps`, Soak.live_heap): at the last
    full week's kill against at the reference week's, within "memory". Empty: fewer than two weeks, not
    judged."""
    weeks = len(samples) // week_days
    if weeks < 2:
        return []
    ref = samples[reference * week_days:(reference + 1) * week_days]
    last = samples[(weeks - 1) * week_days:weeks * week_days]
    before = samples[(weeks - 2) * week_days:(weeks - 1) * week_days]
    out = []
    # max against max; the checkpoint and series against the week before (Spark deletes state files a
    # few batches at a time: a sawtooth)
    for keys, window, name, bound in ((GROWTH_BETWEEN_WEEKS, ref, reference + 1, bounds["memory"]),
                                      (FLAT_IN_LAST_WEEK, before, weeks - 1, bounds["flat"]),
                                      (WITHIN_BOUND, ref, reference + 1, bounds["other"])):
        for key in keys:
            a, b = max(s[key] for s in window), max(s[key] for s in last)
            out.append((key, f"week {name} max -> week {weeks} max", a, b, b <= bound * max(a, 1)))
    # each a JVM of a week's age, killed: the end's is younger (two days in a 30-day month)
    at = {h["day"]: h["live_heap_mb"] for h in live_heaps or ()}
    ref_day, last_day = (reference + 1) * week_days, weeks * week_days
    if ref_day in at and last_day in at and last_day > ref_day:
        a, b = at[ref_day], at[last_day]
        out.append(("jvm_live_heap_mb", f"day {ref_day} -> day {last_day}", a, b, b <= bounds["memory"] * max(a, 1)))
    timed = [r["metrics_s"] for r in restarts if r.get("metrics_s") is not None]
    if timed:
        out.append(("restart_metrics_s", "first restart -> last", timed[0], timed[-1],
                    timed[-1] <= min(bounds["restart"] * timed[0], restart_ceiling)))
    return out
