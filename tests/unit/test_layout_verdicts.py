"""One answer whatever the layout: where two layouts carry the same lines, the verdicts agree.

The bundled captures (tests/fixtures/kafka-2.7, kafka-4.0; kafka-4.2-modern and kafka-4.4-modern,
made on the test bed) and the bed's own runs (tests/fixtures/bed-lines; tests/fixtures/layouts,
where real brokers wrote the same moments through one appender per layout) are replayed in every
supported layout (tests/support/layouts.py: each layout alone and prefixes in front of others;
Strimzi's Kafka 4.x layout writes whole seconds) through the replay's read -> parse -> state
machine path (streaming/app/local.py), and their verdicts compared with those of the original
millisecond default layout. tests/unit/test_layouts_replay.py compares whole records byte for byte
where the layouts carry the same times; this compares what the monitor concludes where they do not.

A verdict (tests/support/verdicts.py):
- per rebalance, matched by cluster, group and generation (group epoch): protocol,
  previous_generation, trigger, trigger_member, trigger_final, outcome, members, removed_members
  (as a set), hit_rebalance_timeout, waited_for_member, and whether it completed
  (completed_at_ms set or not); its times (started, join completed, completed, ended) within 1 s;
- per removal, matched by cluster, group and member id: cause, root_cause, group_root_cause (the
  group's verdict before the cross-group rules), root_cause_confidence, generation, protocol, the
  member's client, host and instance id, host_members and the client's reason; the facts the
  decision rests on as its evidence and root_cause_confidence_reason say them (whether and how the
  member came back, the commit evidence and its reading, the coordinator's and the host's bursts,
  every count): the same text, each duration in it within 2 s; removed_at_ms within 1 s.

Tolerances: a time of a whole-second line is within the second the line names, so less than 1 s
from the millisecond one; a duration (`came back 9.9 s later`) is a difference of two such times,
printed to a tenth of a second. Impact figures (partition-seconds) are durations too and are not
compared. The only other difference the layouts may make is the order, within one second a layout
truncates, of two brokers' lines that no `__consumer_offsets` record separates (docs/broker-logs.md,
"Layouts"; docs/diagnosis.md): the information is not in the lines. None of these inputs needs it.
"""
from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from state.outputs import OutputKind
from streaming.app.local import run_local
from streaming.app.settings import LogInput, OffsetsInput
from tests.support.capture_expectations import FIXTURES, LOG_FILES
from tests.support.layouts import CASES, SECONDS_ONLY, rewrite
from tests.support.verdicts import verdict_differences

BED_LINES = FIXTURES / "bed-lines"
# input name -> (directory, log files, offsets dump or None)
INPUTS: dict[str, tuple[Path, tuple[str, ...], str | None]] = {
    **{capture: (FIXTURES / capture, names, "offsets-topic.jsonl") for capture, names in LOG_FILES.items()},
    **{f"bed-lines/{p.stem}": (BED_LINES, (p.name,), f"{p.stem}.offsets.jsonl")
       for p in sorted(BED_LINES.glob("*.log"))},
    # a bed run: a follower broker killed under its coordinator (the coordinator stall)
    "kafka-4.4-follower-kill": (FIXTURES / "kafka-4.4-follower-kill", ("broker1-server.log", "broker2-server.log"),
                                "offsets-topic.jsonl"),
}
REAL = FIXTURES / "layouts"
REAL_CASES = sorted((d.name, p.name.split("-", 1)[1][:-4]) for d in REAL.iterdir() if d.is_dir()
                    for p in d.glob("broker1-*.log") if not p.name.endswith("-default.log"))

Verdicts = tuple[list[dict], list[dict]]


def _records(logs: list[LogInput], offsets: str | None) -> Verdicts:
    out = run_local(logs, [OffsetsInput(path=offsets)] if offsets else [])
    return out[OutputKind.REBALANCE], out[OutputKind.REMOVAL]


def _rendered(tmp: Path, name: str, layout: str) -> list[LogInput]:
    """The input's logs rewritten into `layout` under tmp (same file names)."""
    directory, files, _ = INPUTS[name]
    target = tmp / name.replace("/", "_") / layout.replace("+", "_")
    target.mkdir(parents=True, exist_ok=True)
    logs = []
    for broker, file in enumerate(files, start=1):
        lines = (directory / file).read_text(errors="replace").splitlines()
        out, _ = rewrite(lines, layout, broker)
        (target / file).write_text("\n".join(out) + "\n")
        logs.append(LogInput(path=str(target / file)))
    return logs


def _offsets(name: str) -> str | None:
    directory, _, offsets = INPUTS[name]
    return str(directory / offsets) if offsets else None


@cache
def reference(name: str) -> Verdicts:
    """The records of the input as the brokers wrote it: Kafka's default layout, milliseconds."""
    directory, files, _ = INPUTS[name]
    return _records([LogInput(path=str(directory / f)) for f in files], _offsets(name))


@pytest.mark.parametrize("name", sorted(INPUTS))
@pytest.mark.parametrize("layout", CASES)
def test_every_layout_gives_the_verdicts_of_the_millisecond_layout(tmp_path_factory, name, layout):
    expected = reference(name)
    assert expected[0] and expected[1]           # there is something to agree on
    tmp = tmp_path_factory.getbasetemp() / "verdicts"
    result = _records(_rendered(tmp, name, layout), _offsets(name))
    assert verdict_differences(expected, result) == []
    if any(part in SECONDS_ONLY for part in layout.split("+")):
        # whole seconds indeed: the records' times are not the reference's
        assert [r["removed_at_ms"] for r in result[1]] != [r["removed_at_ms"] for r in expected[1]]


@pytest.mark.parametrize(("version", "layout"), REAL_CASES)
def test_the_bed_brokers_own_layouts_give_the_verdicts_of_their_default_layout(version, layout):
    expected = _records([LogInput(path=str(p)) for p in sorted((REAL / version).glob("broker*-default.log"))], None)
    result = _records([LogInput(path=str(p)) for p in sorted((REAL / version).glob(f"broker*-{layout}.log"))], None)
    assert expected[0] and expected[1]
    assert verdict_differences(expected, result) == []


# ----------------------------------------------------------------------------- the comparison tells
def test_the_comparison_tells_a_flipped_verdict_and_a_time_beyond_its_second():
    rebalances, removals = reference("kafka-2.7")
    assert verdict_differences((rebalances, removals), (rebalances, removals)) == []
    flipped = [dict(r, root_cause="process_crash") if r["root_cause"] == "process_pause" else r for r in removals]
    assert len(verdict_differences((rebalances, removals), (rebalances, flipped))) == 1
    later = [dict(r, removed_at_ms=r["removed_at_ms"] + 1000) for r in removals]
    assert len(verdict_differences((rebalances, removals), (rebalances, later))) == len(removals)
    sooner = [dict(r, evidence=r["evidence"].replace("9.9 s later", "7.8 s later")) for r in removals]
    assert len(verdict_differences((rebalances, removals), (rebalances, sooner))) == 1
    uncompleted = [dict(r, completed_at_ms=None) if r["generation"] == 1 else r for r in rebalances]
    assert verdict_differences((rebalances, removals), (uncompleted, removals))


# ----------------------------------------------------------------------------- within one second
# Real lines of the 2.7 capture, moved in time so that what the issue names happens within one
# second: the verdict of the whole-second rendering must still be the millisecond one's.
def _lines(file: str, first: int, last: int, moved: dict[int, str] | None = None) -> list[str]:
    """Lines first..last (1-based) of a 2.7 capture log, with the times of some lines replaced."""
    lines = (FIXTURES / "kafka-2.7" / file).read_text().splitlines()[first - 1:last]
    moved = moved or {}
    return [f"[2026-11-21 {moved[n]}{line[24:]}" if n in moved else line
            for n, line in zip(range(first, last + 1), lines)]


def _offsets_of(group: str, until_ms: int, extra: tuple[dict, ...] = ()) -> list[str]:
    """The 2.7 capture's `__consumer_offsets` records of one group before `until_ms` (and `extra`
    ones), in time order."""
    import base64
    import json
    name = group.encode()
    rows = [json.loads(line) for line in (FIXTURES / "kafka-2.7" / "offsets-topic.jsonl").read_text().splitlines()]
    rows = [r for r in rows if name in base64.b64decode(r["key_b64"]) and r["timestamp"] < until_ms] + list(extra)
    rows.sort(key=lambda r: r["timestamp"])
    return [json.dumps(dict(r, offset=i)) for i, r in enumerate(rows)]


def _commit(group: str, topic: str, partition: int, offset: int, at_ms: int) -> dict:
    """An OffsetCommit record (key type 1, value version 3) committed at `at_ms`."""
    import base64
    import struct

    def text(s: str) -> bytes:
        return struct.pack(">h", len(s)) + s.encode()
    key = struct.pack(">h", 1) + text(group) + text(topic) + struct.pack(">i", partition)
    value = struct.pack(">hqih", 3, offset, 0, 0) + struct.pack(">q", at_ms)
    return {"partition": 3, "offset": 0, "timestamp": at_ms, "key_b64": base64.b64encode(key).decode(),
            "value_b64": base64.b64encode(value).decode()}


def _both(tmp: Path, lines: list[str], offsets: list[str] | None) -> tuple[Verdicts, Verdicts]:
    """The records of a synthetic log as written (milliseconds) and rendered whole seconds."""
    dump = None
    if offsets is not None:
        (tmp / "offsets.jsonl").write_text("\n".join(offsets) + "\n")
        dump = str(tmp / "offsets.jsonl")
    for layout in ("default", "strimzi4"):
        (tmp / layout).mkdir()
        (tmp / layout / "server.log").write_text("\n".join(rewrite(lines, layout)[0]) + "\n")
    millis, seconds = (_records([LogInput(path=str(tmp / layout / "server.log"))], dump)
                       for layout in ("default", "strimzi4"))
    return millis, seconds


def test_an_expiry_and_the_rejoin_within_one_second_is_the_same_verdict_in_whole_seconds_too(tmp_path):
    # sc04-c2 expired at 19:23:58.146 and came back (a new member id) at 19:24:08.039: here at .700,
    # its rebalance complete by .901; broker logs only. Whole seconds: every line of that second
    # at 19:23:58, no record to place them by; the rejoin is the line after the expiry. Back 0.6 s
    # after its expiry, within a heartbeat interval: it never stopped (docs/diagnosis.md), in both
    # layouts (before whole-second lines knew their order, the rejoin at the removal's time was no
    # rejoin at all: process_crash).
    lines = _lines("broker1-server.log", 834, 843, {841: "19:23:58,700", 842: "19:23:58,900", 843: "19:23:58,901"})
    millis, seconds = _both(tmp_path, lines, None)
    [expiry] = [r for r in millis[1] if r["cause"] == "heartbeat_expiry"]
    assert expiry["root_cause"] == "unknown" and "came back (the same client id and host) 0.6 s later" in \
        expiry["evidence"]
    [whole] = [r for r in seconds[1] if r["cause"] == "heartbeat_expiry"]
    assert whole["root_cause"] == "unknown" and whole.get("rejoined_after_ms") is not None
    assert verdict_differences(millis, seconds) == []


def test_a_leave_and_its_commit_within_one_second_is_not_a_poll_timeout_in_whole_seconds_too(tmp_path):
    # sc05-slow left at 19:24:53.176 without a reason and came back 6.9 s later; it had committed
    # nothing before (a poll timeout, inferred). Here it committed its partition at 19:24:53.100,
    # 76 ms before its LeaveGroup, as a consumer does when it closes: a restart. Whole seconds: the
    # leave line at 19:24:53, the commit record at 19:24:53.100, nothing between them in the log.
    # (The group's records up to the leave, its lines up to its generation 4, 19:25:00.700: the
    # decoder keeps the newest three commit times of a partition of the dump, and the partition's
    # next owner committed it three times later.)
    commit = _commit("sc05-poll-timeout", "sc05-topic", 2, 426, 1795289093100)
    millis, seconds = _both(tmp_path, _lines("broker2-server.log", 814, 826),
                            _offsets_of("sc05-poll-timeout", 1795289094000, (commit,)))
    first = min((r for r in millis[1] if r["client_id"] == "sc05-slow"), key=lambda r: r["removed_at_ms"])
    assert (first["cause"], first["root_cause"], first["root_cause_confidence"]) == (
        "leave_group", "graceful_shutdown", "medium")
    assert "commits during the last 8.0 s" in first["evidence"]
    assert verdict_differences(millis, seconds) == []


# ----------------------------------------------------------------------------- the streaming step
@pytest.mark.parametrize("name", ["kafka-2.7", "kafka-4.0", "kafka-4.4-modern"])
@pytest.mark.parametrize("buckets", [0, 4])
def test_whole_second_lines_give_the_same_records_however_the_stream_is_cut(tmp_path, name, buckets):
    """The stateful step (streaming/spark/stateful.py, driven as Spark calls it) applies a
    whole-second line once the watermark has passed its second, with every record of that second:
    micro-batches of 300 ms of event time and a lateness of 500 ms, which cut the seconds, give the
    rebalance, removal and anomaly records of the whole input in one batch. (Not the
    rebalance_trigger records: which removal of a member settles a trigger can depend on where
    turns end, in any layout: docs/design.md, "Known limits".)"""
    import json

    from state import events as E
    from streaming.app.local import capture_events
    from tests.support.stateful_driver import StatefulDriver
    offsets = _offsets(name)
    assert offsets is not None
    events = sorted(capture_events(_rendered(tmp_path, name, "strimzi4"), [OffsetsInput(path=offsets)]),
                    key=E.Event.sort_key)
    assert sum(1 for e in events if E.TS_PRECISION in e.data) > 30

    def records(driver: StatefulDriver, batches: list[list]) -> list[str]:
        out = [o for b in batches for o in driver.batch(b)] + driver.tick(E.END_OF_INPUT_TS_MS) + driver.batch([])
        return sorted(json.dumps([k, r], sort_keys=True) for k, r in out
                      if k in (OutputKind.REBALANCE, OutputKind.REMOVAL, OutputKind.ANOMALY))
    cut: dict[int, list] = {}
    for e in events:
        cut.setdefault(e.ts_ms // 300, []).append(e)
    whole = records(StatefulDriver(500, buckets=buckets), [events])
    assert records(StatefulDriver(500, buckets=buckets), [cut[k] for k in sorted(cut)]) == whole
    assert sum(1 for r in whole if json.loads(r)[0] == OutputKind.REMOVAL) == len(reference(name)[1])
