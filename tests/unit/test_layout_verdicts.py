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
