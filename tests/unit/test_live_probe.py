"""What the latency bench and tests count as "seen live" (tests/support/live_probe.py)."""
from __future__ import annotations

from tests.support.live_probe import LineEvent, Scrape, _live, parse_page

END = LineEvent("end", "g-1", ts_ms=1_000_000, acked_ms=1_000_050, generation=1)


def _scrape(state: str, generation: int, since_s: float) -> Scrape:
    page = "\n".join([
        f'rebalance_monitor_group_state{{cluster="c",group="g-1",state="{state}"}} 1',
        'rebalance_monitor_group_state{cluster="c",group="g-1",state="Stable"} '
        + ("1" if state == "Stable" else "0"),
        f'rebalance_monitor_group_generation{{cluster="c",group="g-1"}} {generation}',
        f'rebalance_monitor_group_state_since_timestamp_seconds{{cluster="c",group="g-1"}} {since_s}',
    ])
    return Scrape(1_000_100, parse_page(page, "g-"))


def test_the_end_of_a_rebalance_is_seen_as_stable_or_a_later_generation():
    assert _live(END, _scrape("Stable", 1, 1000.0))
    assert _live(END, _scrape("CompletingRebalance", 2, 1001.0))
    assert not _live(END, _scrape("CompletingRebalance", 1, 999.5))     # still before the end


def test_a_rebalance_that_began_after_the_end_shows_it_ended():
    """A member joining right after the assignment: the view goes from CompletingRebalance to
    PreparingRebalance of the same generation without a scrape ever seeing Stable."""
    assert _live(END, _scrape("PreparingRebalance", 1, 1000.2))
    assert not _live(END, _scrape("PreparingRebalance", 1, 999.0))      # the rebalance the end closes
