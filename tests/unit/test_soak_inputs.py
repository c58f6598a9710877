"""bench/soak's traffic (bench/soak_inputs.SoakTraffic): records the monitor's own decoder reads,
lines its own parser reads, every ephemeral name used once with its join, leave and expiry
(offset and GroupMetadata tombstones, the Dead line), the steady groups' daily restarts at the
next generations, times in order per partition."""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from datetime import datetime, timezone

from bench.soak_inputs import DAY_MS, LOG4J, SoakTraffic, ephemeral_name, steady_name
from state import events as E
from streaming.logs.parser import parse_line
from streaming.offsets.record_events import record_to_events

START_MS = 1_795_000_000_000 // DAY_MS * DAY_MS


def _traffic(**kw) -> SoakTraffic:
    args = {"days": 3, "ephemeral": 61, "steady": 4, "retention_days": 0.75, "start_ms": START_MS, "seed": 5}
    return SoakTraffic(**{**args, **kw})


def _month(t: SoakTraffic) -> list:
    return [row for d in range(t.days) for row in t.day(d)] + t.tail()


def _events(rows: list) -> list:
    out = []
    for seq, row in enumerate(rows):
        if row[1] == "log":
            stamp = datetime.fromtimestamp(row[0] / 1000, tz=timezone.utc).strftime(LOG4J)[:-3]
            got = parse_line(f"[{stamp}] {row[2]}", source_id="soak", seq=seq, tz=timezone.utc, default_broker=1)
        else:
            got = record_to_events(partition=row[2], offset=seq, timestamp_ms=row[0], key=row[3], value=row[4])
        assert isinstance(got, list) and got, (row, got)
        for ev in got:
            assert ev.ts_ms == row[0]
        out += got
    return out


def test_rows_decode_with_the_monitors_own_parsers_in_time_order() -> None:
    t = _traffic()
    rows = _month(t)
    by_partition: dict[object, list[int]] = defaultdict(list)
    for row in rows:
        by_partition["log" if row[1] == "log" else row[2]].append(row[0])
    for times in by_partition.values():
        assert times == sorted(times)
    assert rows[0][0] >= START_MS and rows[-1][0] < START_MS + (t.days + 1) * DAY_MS
    events = _events(rows)
    kinds = Counter(ev.kind for ev in events if ev.group.startswith("console-consumer-"))
    assert kinds[E.GROUP_TOMBSTONE] == t.expired_by(START_MS + t.days * DAY_MS)
    assert kinds[E.OFFSET_TOMBSTONE] == kinds[E.GROUP_TOMBSTONE] > 0


def test_every_ephemeral_name_once_with_join_leave_and_expiry() -> None:
    t = _traffic()
    assert sum(t.per_day) == 61 and max(t.per_day) - min(t.per_day) <= 1
    rows = _month(t)
    events = _events(rows)
    per_group: dict[str, list] = defaultdict(list)
    for ev in events:
        per_group[ev.group].append(ev)
    names = {ephemeral_name(i) for i in range(61)}
    assert names <= set(per_group)
    assert {g for g in per_group if g.startswith("console-consumer-")} == names
    gone_by = START_MS + t.days * DAY_MS
    for i in range(61):
        evs = per_group[ephemeral_name(i)]
        metadata = [(ev.generation, len(ev.data["members"])) for ev in evs if ev.kind == E.GROUP_METADATA]
        assert metadata == [(1, 1), (2, 0)]
        assert sum(ev.kind == E.OFFSET_COMMIT for ev in evs) == 1
        expired = START_MS + t.ephemeral_gone_ms(i) < gone_by
        assert sum(ev.kind == E.GROUP_TOMBSTONE for ev in evs) == (1 if expired else 0)
        assert evs[-1].kind in ((E.GROUP_TOMBSTONE, E.GROUP_DEAD) if expired else (E.GROUP_METADATA,)) or expired
        # the expiry is the retention after the group went empty
        if expired:
            empty = next(ev.ts_ms for ev in evs if ev.kind == E.GROUP_METADATA and ev.generation == 2)
            tomb = next(ev.ts_ms for ev in evs if ev.kind == E.GROUP_TOMBSTONE)
            assert tomb - empty == int(0.75 * DAY_MS)
    # each ephemeral group's life: 7 lines and 5 records when it expires within the month
    lines = Counter(m.group(1) for row in rows if row[1] == "log"
                    for m in [re.search(r"[Gg]roup (console-consumer-\d+)", row[2])] if m)
    assert all(n in (6, 7) for n in lines.values())


def test_steady_groups_restart_daily_at_the_next_generations() -> None:
    t = _traffic(days=4, ephemeral=8)
    events = _events(_month(t))
    for i in range(t.steady):
        evs = [ev for ev in events if ev.group == steady_name(i)]
        stable = [ev.generation for ev in evs if ev.kind == E.GROUP_METADATA and ev.data["members"]]
        empty = [ev.generation for ev in evs if ev.kind == E.GROUP_METADATA and not ev.data["members"]]
        assert stable == [1, 3, 5, 7] and empty == [2, 4, 6]
        assert sum(ev.kind == E.OFFSET_COMMIT for ev in evs) > 4 * 24 * 6 - 10
        assert not any(ev.kind == E.GROUP_TOMBSTONE for ev in evs)
    assert t.steady_rebalances_by(4) == 7


def test_deterministic_and_names_unique_at_scale() -> None:
    a, b = _traffic(ephemeral=5000, steady=0), _traffic(ephemeral=5000, steady=0)
    assert a.day(1) == b.day(1)
    starts = [a.ephemeral_gone_ms(i) for i in range(5000)]
    assert len(set(starts)) > 4990           # spread over the day
    assert len({ephemeral_name(i) for i in range(1_000_000)}) == 1_000_000


def test_verdicts_compare_the_week_after_the_retention_with_the_last() -> None:
    from bench.soak_verdicts import BOUNDED, reference_week, verdicts
    bounds = {"memory": 1.1, "flat": 1.05, "other": 1.5, "restart": 1.1}
    # week 1 fills the retention (grows), weeks 2-4 are flat
    samples = [dict.fromkeys(BOUNDED, 50.0 * d + 200 if d < 7 else 800.0) for d in range(28)]
    restarts = [{"metrics_s": 6.0}, {"metrics_s": 6.5}]
    assert reference_week(4, 7, 7.0) == 1 and reference_week(2, 1, 0.5) == 0 and reference_week(4, 7, 30) == 0
    judged = {key: ok for key, _, _, _, ok in verdicts(samples, restarts, 7, bounds, 60.0, reference=1)}
    assert judged == {**dict.fromkeys(BOUNDED, True), "restart_metrics_s": True}
    # memory 9 % above week 2 in week 4: within; 11 %: not
    samples[25]["driver_rss_mb"], samples[26]["jvm_rss_mb"] = 872, 888
    # the series' max grows 6 % from week 3 to week 4: not flat
    samples[27]["series_without_lag"] = 848
    # the checkpoint's max 4 % up from week 3: flat enough (Spark deletes state files in steps)
    samples[21]["checkpoint_bytes"], samples[15]["checkpoint_bytes"] = 832, 810
    # the last restart 1.15x the first, or past the ceiling
    judged = {key: ok for key, _, _, _, ok in verdicts(samples, [{"metrics_s": 6.0}, {"metrics_s": 6.9}], 7,
                                                       bounds, 60.0, reference=1)}
    assert judged == {**dict.fromkeys(BOUNDED, True), "jvm_rss_mb": False, "series_without_lag": False,
                      "restart_metrics_s": False}
    assert not {k: ok for k, _, _, _, ok in verdicts(samples, [{"metrics_s": 58.0}, {"metrics_s": 61.0}], 7,
                                                             bounds, 60.0, reference=1)}["restart_metrics_s"]
    # against week 1 the memory would fail: 800 > 1.1 x 500
    assert not any(ok for key, _, _, _, ok in verdicts(samples, [], 7, bounds, 60.0, reference=0)
                   if key == "driver_rss_mb")
    assert verdicts(samples[:10], [], 7, bounds, 60.0) == []          # fewer than two weeks


def test_the_jvms_live_heap_is_judged_from_the_reference_weeks_kill_to_the_last_full_weeks() -> None:
    from bench.soak_verdicts import verdicts
    bounds = {"memory": 1.1, "flat": 1.05, "other": 1.5, "restart": 1.1}
    samples = [{"driver_rss_mb": 1.0, "jvm_rss_mb": 1.0, "workers_rss_mb": 1.0, "checkpoint_bytes": 1.0,
                "series_without_lag": 1.0, "state_file_bytes": 1.0, "state_snapshot_bytes": 1.0}] * 30

    def live(heaps: list[tuple[int, float]]) -> list[tuple[str, float, float, bool]]:
        return [(k, a, b, ok) for k, _, a, b, ok in verdicts(samples, [], 7, bounds, 60.0, 1,
                                                               [{"day": d, "live_heap_mb": mb} for d, mb in heaps])
                if k == "jvm_live_heap_mb"]
    # week 1's kill (day 7) is before the retention passed: not the reference; day 14's is. The last
    # full week's kill (day 28) is compared, not the end's JVM, two days old
    assert live([(7, 300.0), (14, 900.0), (21, 950.0), (28, 980.0), (30, 320.0)]) == [
        ("jvm_live_heap_mb", 900.0, 980.0, True)]
    assert live([(7, 300.0), (14, 900.0), (21, 950.0), (28, 1000.0), (30, 320.0)])[0][3] is False
    assert live([(7, 300.0), (28, 320.0)]) == []           # no histogram at the reference week's kill
