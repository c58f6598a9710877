"""Percentiles and summaries of measured seconds, for the benches and the latency tests."""
from __future__ import annotations

from dataclasses import dataclass, field


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank `q` quantile (0..1) of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


@dataclass
class Summary:
    n: int
    missing: int
    p50: float | None
    p95: float | None
    max: float | None
    min: float | None = None
    values: list[float] = field(default_factory=list)


def summarize(values: list[float | None]) -> Summary:
    """Count, missing (None) values, p50, p95, max and min of the others."""
    seen = [v for v in values if v is not None]
    return Summary(len(values), len(values) - len(seen), percentile(seen, 0.5), percentile(seen, 0.95),
                   max(seen) if seen else None, min(seen) if seen else None, seen)
