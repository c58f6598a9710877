"""What the latency bench and tests count as "seen live" (testbed/judge/latency.py), on /metrics
pages as testbed/metrics.py parses them."""
from __future__ import annotations

from testbed.judge.latency import LineEvent, Scrape, _live
from testbed.metrics import parse

END = LineEvent("end", "g-1", ts_ms=1_000_000, acked_ms=1_000_050, generation=1)


def _scrape(state: str, generation: int, since_s: float) -> Scrape:
    page = "\n".join([
        f'rebalance_monitor_group_state{{cluster="c",group="g-1",state="{state}"}} 1',
        'rebalance_monitor_group_state{cluster="c",group="g-1",state="Stable"} '
        + ("1" if state == "Stable" else "0"),
        f'rebalance_monitor_group_generation{{cluster="c",group="g-1"}} {generation}',
        f'rebalance_monitor_group_state_since_timestamp_seconds{{cluster="c",group="g-1"}} {since_s}',
    ])
    return Scrape.of(1_000_100, page, "g-")


def test_the_end_of_a_rebalance_is_seen_as_stable_or_a_later_generation():
    assert _live(END, _scrape("Stable", 1, 1000.0))
    assert _live(END, _scrape("CompletingRebalance", 2, 1001.0))
    assert not _live(END, _scrape("CompletingRebalance", 1, 999.5))     # still before the end


def test_a_rebalance_that_began_after_the_end_shows_it_ended():
    """A member joining right after the assignment: the view goes from CompletingRebalance to
    PreparingRebalance of the same generation without a scrape ever seeing Stable."""
    assert _live(END, _scrape("PreparingRebalance", 1, 1000.2))
    assert not _live(END, _scrape("PreparingRebalance", 1, 999.0))      # the rebalance the end closes


def test_a_scrape_keeps_the_group_series_of_its_groups_only():
    page = "\n".join([
        "# TYPE rebalance_monitor_rebalances_total counter",
        'rebalance_monitor_rebalances_total{cluster="c",group="g-1",trigger="member_join",outcome="stable"} 2.0',
        'rebalance_monitor_rebalances_total{cluster="c",group="other",trigger="member_join",outcome="stable"} 5.0',
        "# TYPE rebalance_monitor_batch_duration_seconds gauge",
        "rebalance_monitor_batch_duration_seconds 0.75",
        "# TYPE process_cpu_seconds_total counter",
        "process_cpu_seconds_total 3.0",
    ])
    s = Scrape.of(1, page, "g-")
    assert s.values("rebalances_total", "g-1") == [2.0] and s.values("rebalances_total", "other") == []
    assert s.batch_s == 0.75
    samples = parse(page)
    assert samples.total("rebalance_monitor_rebalances_total", trigger="member_join") == 7.0
    assert samples.value("rebalance_monitor_rebalances_total", cluster="c", group="g-1", trigger="member_join",
                         outcome="stable") == 2.0
    assert samples.value("rebalance_monitor_rebalances_total", group="g-1") is None     # not every label
    assert samples.value("rebalance_monitor_batch_duration_seconds") == 0.75
    assert ("process_cpu_seconds_total", ()) not in samples and ("process_cpu_seconds_total", ()) in parse(page, "")


class _Monitor:
    """/metrics of a monitor whose group collector the `name[]` filter cannot find (44e1eeb's: a
    collector without describe), or can (`findable`)."""
    def __init__(self, findable: bool) -> None:
        self.findable = findable
        self.asked: list[bool] = []

    def scrape(self, *names: str) -> str:
        self.asked.append(bool(names))
        batch = "# TYPE rebalance_monitor_batch_duration_seconds gauge\nrebalance_monitor_batch_duration_seconds 0.5"
        group = ("# TYPE rebalance_monitor_group_generation gauge\n"
                 'rebalance_monitor_group_generation{cluster="c",group="g-1"} 3')
        return batch if names and not self.findable else f"{batch}\n{group}"


def test_the_scraper_reads_the_whole_page_when_the_filter_loses_families():
    import time
    from testbed.judge.latency import Scraper
    for findable in (True, False):
        monitor = _Monitor(findable)
        scraper = Scraper(monitor, "g-", interval_s=0.001)  # type: ignore[arg-type]  # the fake has what it calls
        scraper.start()
        deadline = time.monotonic() + 10
        while len(scraper.scrapes) < 120 and time.monotonic() < deadline:
            time.sleep(0.01)
        scraper.stop()
        assert len(scraper.scrapes) >= 120
        assert all(s.values("group_generation", "g-1") == [3.0] for s in scraper.scrapes), findable
        filtered = sum(monitor.asked)
        # findable: filtered scrapes, the whole page once per FULL_CHECK_EVERY; else whole from the first
        assert (filtered >= 100) if findable else (filtered == 1), (findable, filtered)
