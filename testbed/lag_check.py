"""scripts/lag-check's last line (issue 54 item 7), from the figures the lag bed tests recorded
(tests/e2e/kafka/test_lag_live.py):

    lag_agrees=true|false records_delayed_error_max=E at_risk_lead_seconds_min=L idle_at_risk=N

lag_agrees: every judged comparison with `kafka-consumer-groups --describe` within one sampling
interval of produced records; E: the largest relative error of records_delayed against the
producer's own count (at most 0.05); L: the shortest lead of an at-risk flag before its
poll-timeout removal (at least 10 s); N: scrapes that showed an idle member at risk (0)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from testbed import figures

FIGURES_ENV = "LAG_CHECK_FIGURES"
FIGURES: tuple[figures.Figure, ...] = (
    ("lag_agrees", all, lambda v: v is True),
    ("records_delayed_error_max", max, lambda v: v <= 0.05),
    ("at_risk_lead_seconds_min", min, lambda v: v >= 10.0),
    ("idle_at_risk", sum, lambda v: v == 0),
)


def record_figure(name: str, value: object) -> None:
    figures.record_figure(FIGURES_ENV, name, value)


def checking() -> bool:
    """True under scripts/lag-check: every lag bed test runs on every version it names."""
    return bool(os.environ.get(FIGURES_ENV))


if __name__ == "__main__":
    line, passed = figures.summary(Path(sys.argv[1]), FIGURES)
    print(line)
    sys.exit(0 if passed else 1)
