"""bench_scale_live.BatchPoller.between: the batches of a window after a warm-up (bench/cost's long
steady window), from what the poller saw, without a monitor."""
from __future__ import annotations

from bench.bench_scale_live import BatchPoller


class _Pages:
    """Stands for a monitor: the next page of (batches_total, duration) on each scrape."""

    def __init__(self, pages: list[tuple[float | None, float]]) -> None:
        self.pages = iter(pages)

    def scrape(self, *names: str, timeout: float = 5.0) -> str:
        count, duration = next(self.pages)
        lines = [f"rebalance_monitor_batch_duration_seconds {duration}",
                 f"rebalance_monitor_watermark_delay_seconds {duration * 10}"]
        if count is not None:
            lines.append(f"rebalance_monitor_batches_total {count}")
        return "\n".join(lines) + "\n"


def _poller(pages: list[tuple[float | None, float]], times: list[float], monkeypatch) -> BatchPoller:
    import bench.bench_scale_live as module
    clock = iter(times)
    monkeypatch.setattr(module.time, "monotonic", lambda: next(clock))
    poller = BatchPoller(_Pages(pages))  # type: ignore[arg-type]
    polls = iter(range(len(pages)))

    class _Halt:
        def wait(self, _s: float) -> bool:
            return next(polls, None) is None
    poller._halt = _Halt()  # type: ignore[assignment]
    poller.run()
    return poller


def test_the_warm_ups_batches_are_left_out(monkeypatch) -> None:
    # counts 5 (first seen), 6, 8 (two batches in one poll), 8, None (a page without the counter),
    # 9 (not a duration: after the gap), 10, 11
    pages: list[tuple[float | None, float]] = [(5, 0.1), (6, 0.2), (8, 0.3), (8, 0.3), (None, 0.0), (9, 0.4), (10, 0.5), (11, 0.6)]
    times = [1.0, 2.0, 3.0, 5.0, 6.0, 7.0]      # one per change recorded
    poller = _poller(pages, times, monkeypatch)
    assert poller.seen == [(1.0, 5), (2.0, 6), (3.0, 8), (5.0, 10), (6.0, 11)]
    assert poller.durations == [0.2, 0.3, 0.5, 0.6]
    window = poller.between(2.5, 5.5)
    assert window == {"batches": [0.3, 0.5], "delays": [3.0, 5.0], "counted": 4, "excluded": 1}
    assert poller.between(0.0, 10.0)["counted"] == 6
    assert poller.between(7.0, 9.0) == {"batches": [], "delays": [], "counted": 0, "excluded": 4}
