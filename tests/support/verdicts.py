"""The verdicts of a replay's rebalance and removal records, and how two replays' verdicts differ
(tests/unit/test_layout_verdicts.py: what a verdict covers and the tolerances, in its docstring).

Nothing here reads the monitor's code: records are plain dicts as the replay writes them.
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

# The fields of a rebalance record that are its verdict, compared exactly.
REBALANCE_VERDICT = ("protocol", "previous_generation", "trigger", "trigger_member", "trigger_final", "outcome",
                     "members", "removed_members", "hit_rebalance_timeout", "waited_for_member")
# ... its times, compared within TIME_TOLERANCE_MS (None must stay None: whether it completed).
REBALANCE_TIMES = ("started_at_ms", "join_completed_at_ms", "completed_at_ms", "ended_at_ms")
# The fields of a removal record that are its verdict, compared exactly; its evidence and the
# reason of its confidence (the facts the decision rests on) compared as EVIDENCE_DURATION says.
REMOVAL_VERDICT = ("cause", "root_cause", "group_root_cause", "root_cause_confidence", "generation", "protocol",
                   "client_id", "client_host", "group_instance_id", "host_members", "reason_text")
REMOVAL_FACTS = ("evidence", "root_cause_confidence_reason")
REMOVAL_TIMES = ("removed_at_ms",)
# A time of a layout that writes whole seconds is within its second: less than 1 s from the
# millisecond one.
TIME_TOLERANCE_MS = 999
# A duration in the evidence (`9.9 s`) is a difference of two such times, each within its second,
# printed to a tenth: at most 2 s apart.
DURATION_TOLERANCE_S = 2.0
_DURATION = re.compile(r"(-?\d+\.\d) s\b")
# A time of day in the evidence (`00:43:09.469`, when a broker died): within its second, as above.
_CLOCK = re.compile(r"\b(\d\d):(\d\d):(\d\d)\.(\d{3})\b")


def _key_rebalance(r: dict[str, Any]) -> tuple:
    return (r["cluster"], r["group"], r["generation"])


def _key_removal(r: dict[str, Any]) -> tuple:
    return (r["cluster"], r["group"], r["member_id"])


def _by_key(records: list[dict[str, Any]], key: Any, order: str) -> dict[tuple, list[dict[str, Any]]]:
    """Records by key; several of one key (a member removed twice, a generation superseded and
    reached again) in the order of `order`."""
    out: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.get(order) is None, r.get(order) or 0)):
        out[key(r)].append(r)
    return out


def _facts(text: str | None) -> tuple[str, list[float], list[int]]:
    """A text with its durations and times of day taken out, the durations, and the times (ms)."""
    text = text or ""
    clocks = [((int(h) * 60 + int(m)) * 60 + int(sec)) * 1000 + int(ms) for h, m, sec, ms in _CLOCK.findall(text)]
    text = _CLOCK.sub("#:#", text)
    return _DURATION.sub("# s", text), [float(x) for x in _DURATION.findall(text)], clocks


def _norm(value: Any) -> Any:
    """Lists as sets (removed_members: the order of removals of one moment across two brokers' files)."""
    return sorted(value) if isinstance(value, list) else value


def _time_diff(name: str, a: Any, b: Any) -> str | None:
    if (a is None) != (b is None):
        return f"{name}: {a} vs {b}"
    if a is not None and abs(a - b) > TIME_TOLERANCE_MS:
        return f"{name}: {a} vs {b} ({(b - a) / 1000:+.3f} s)"
    return None


def _facts_diff(name: str, a: str | None, b: str | None) -> str | None:
    (text_a, secs_a, clocks_a), (text_b, secs_b, clocks_b) = _facts(a), _facts(b)
    if text_a != text_b or any(abs(x - y) > DURATION_TOLERANCE_S + 1e-9 for x, y in zip(secs_a, secs_b)) \
            or any(abs(x - y) > TIME_TOLERANCE_MS for x, y in zip(clocks_a, clocks_b)):
        return f"{name}:\n      {a}\n      {b}"
    return None


def _compare(kind: str, ref: dict[tuple, list[dict[str, Any]]], got: dict[tuple, list[dict[str, Any]]],
             exact: tuple[str, ...], times: tuple[str, ...], facts: tuple[str, ...]) -> list[str]:
    out = []
    for key in sorted(set(ref) | set(got), key=str):
        a, b = ref.get(key, []), got.get(key, [])
        if len(a) != len(b):
            out.append(f"{kind} {key}: {len(a)} record(s) vs {len(b)}")
            continue
        for x, y in zip(a, b):
            diffs = [f"{f}: {x.get(f)!r} vs {y.get(f)!r}" for f in exact if _norm(x.get(f)) != _norm(y.get(f))]
            diffs += [d for f in times if (d := _time_diff(f, x.get(f), y.get(f))) is not None]
            diffs += [d for f in facts if (d := _facts_diff(f, x.get(f), y.get(f))) is not None]
            if diffs:
                out.append(f"{kind} {key}:\n    " + "\n    ".join(diffs))
    return out


def verdict_differences(reference: tuple[list[dict], list[dict]], result: tuple[list[dict], list[dict]]) -> list[str]:
    """How the verdicts of `result` (rebalance records, removal records) differ from those of
    `reference`; [] when they agree."""
    (ref_rb, ref_rm), (rb, rm) = reference, result
    return (_compare("rebalance", _by_key(ref_rb, _key_rebalance, "started_at_ms"),
                     _by_key(rb, _key_rebalance, "started_at_ms"), REBALANCE_VERDICT, REBALANCE_TIMES, ())
            + _compare("removal", _by_key(ref_rm, _key_removal, "removed_at_ms"),
                       _by_key(rm, _key_removal, "removed_at_ms"), REMOVAL_VERDICT, REMOVAL_TIMES, REMOVAL_FACTS))
