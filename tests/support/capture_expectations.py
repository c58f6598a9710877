"""Expected rebalances and removals, read from the captures' own README tables and raw logs.

Nothing here uses the monitor's parser: README rows are parsed as markdown, completion times
come from a plain regex over the verbatim server.log lines.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CAPTURE_DAY = "2026-11-21"
LOG_FILES = {
    "kafka-2.7": ("broker1-server.log", "broker2-server.log"),
    "kafka-4.0": ("node1-server.log", "node2-server.log"),
    "kafka-4.2-modern": ("broker1-server.log", "broker2-server.log"),
    "kafka-4.4-modern": ("broker1-server.log", "broker2-server.log"),
}


def utc_ms(clock: str) -> int:
    """`19:21:26,163` or `19:21:26.163` on the capture day (UTC) -> epoch ms."""
    dt = datetime.strptime(f"{CAPTURE_DAY} {clock.replace(',', '.')}", "%Y-%m-%d %H:%M:%S.%f")
    return int(dt.replace(tzinfo=timezone.utc).timestamp() * 1000)


@dataclass
class ExpectedRemoval:
    member_prefix: str          # README shortens ids to `<client>-<8 hex>…`
    cause: str
    at_ms: int | None = None


@dataclass
class ExpectedRebalance:
    group: str
    protocol: str
    generation: int
    started_at_ms: int
    ended_at_ms: int | None     # Stabilized / is now empty (classic), converged (consumer)
    outcome: str                   # stable | empty | superseded
    reason: str
    removals: list[ExpectedRemoval] = field(default_factory=list)


_CAUSE_27 = {"LeaveGroup": "leave_group", "heartbeat/session expiry": "heartbeat_expiry",
             "did not rejoin before rebalance timeout": "rebalance_timeout"}


def readme_rebalances_27() -> list[ExpectedRebalance]:
    rows = []
    row_re = re.compile(r"^\| (\S+) \| b\d \(p\d\) \| (\d+)→(\d+) \| (\S+) \| (Stabilized|Empty) (\S+) \| "
                        r"\d+ \| ([^|]*) \| ([^|]*) \|$")
    removal_re = re.compile(r"(?:Set\()?([\w.-]+?)…\)? @(\S+) \(([^)]*)\)")
    for line in (FIXTURES / "kafka-2.7" / "README.md").read_text().splitlines():
        m = row_re.match(line)
        if not m:
            continue
        group, _, gen, start, end_kind, end, reason, removed = m.groups()
        removals = [ExpectedRemoval(mid, _CAUSE_27[why], utc_ms(at))
                    for mid, at, why in removal_re.findall(removed)]
        rows.append(ExpectedRebalance(group, "classic", int(gen), utc_ms(start), utc_ms(end),
                                      "stable" if end_kind == "Stabilized" else "empty",
                                      reason.strip(), removals))
    return rows


def _cause_40(text: str) -> str:
    if text.startswith("LeaveGroup") or text.startswith("left"):
        return "leave_group"
    if "heartbeat/session expiry" in text or "session expired" in text:
        return "heartbeat_expiry"
    raise ValueError(f"unknown removal text in README: {text}")


def readme_rebalances_40() -> list[ExpectedRebalance]:
    rows = []
    row_re = re.compile(r"^\| (\S+) \| (classic|consumer) \| (?:gen|epoch) (\d+) \| (\S+) \| (\S+) \| "
                        r"([^|]*) \| ([^|]*) \| ([^|]*) \|$")
    for line in (FIXTURES / "kafka-4.0" / "README.md").read_text().splitlines():
        m = row_re.match(line)
        if not m:
            continue
        group, protocol, gen, start, end, outcome_text, reason, removed = m.groups()
        if outcome_text.startswith("Stable") or outcome_text.startswith("all "):
            outcome = "stable"
        elif outcome_text.startswith("Empty"):
            outcome = "empty"
        else:
            outcome = "superseded_or_empty"
        removals = []
        for part in filter(None, (p.strip() for p in removed.split("; "))):
            # `<member id> (<client id>[, note]): <why>`, the client part is optional
            m2 = re.match(r"^(\S+?)(?: \([^)]*\))?: (.*)$", part)
            assert m2 is not None, part
            removals.append(ExpectedRemoval(m2.group(1), _cause_40(m2.group(2))))
        rows.append(ExpectedRebalance(group, protocol, int(gen), utc_ms(start),
                                      None if end == "-" else utc_ms(end), outcome, reason.strip(), removals))
    return rows


_ASSIGNMENT_RE = re.compile(r"^\[(\S+ \S+)\] INFO .*Assignment received from leader (?:\S+ )?for group (\S+) "
                            r"for generation (\d+)")


def assignment_received_ms(capture: str) -> dict[tuple[str, int], int]:
    """(group, generation) -> time of its `Assignment received from leader` line (first one)."""
    found: dict[tuple[str, int], int] = {}
    for name in LOG_FILES[capture]:
        for line in (FIXTURES / capture / name).read_text(errors="replace").splitlines():
            m = _ASSIGNMENT_RE.match(line)
            if m:
                key = (m.group(2), int(m.group(3)))
                found.setdefault(key, utc_ms(m.group(1).split(" ")[1]))
    return found


# Rebalances started by a LeaveGroup that the captures' READMEs say was a poll timeout (the
# client's own log: `_MAX_POLL_EXCEEDED`; the broker logged a plain leave, no client reason).
POLL_TIMEOUT_REBALANCES = {("sc05-poll-timeout", 3), ("k4-sc05-poll-timeout", 2)}


def expected_trigger(reason: str, group: str | None = None, generation: int | None = None) -> str:
    """The trigger class an operator reads from the verbatim reason text of the README, or what
    the README says the leave was (POLL_TIMEOUT_REBALANCES)."""
    if (group, generation) in POLL_TIMEOUT_REBALANCES:
        return "poll_timeout"
    r = reason.lower()
    if r.startswith("adding new member"):
        return "member_join"
    if "on leavegroup" in r or "explicit `leavegroup`" in r:
        return "member_leave"
    if "heartbeat expiration" in r:
        return "heartbeat_expiry"
    if "re-joining group" in r:
        return "leader_rejoin"
    raise ValueError(f"no expectation for reason {reason!r}")


def capture_inputs(capture: str, cluster: str = "default") -> tuple[list, list]:
    """The replay inputs (LogInput, OffsetsInput) of a bundled capture: both logs and the dump."""
    from streaming.app.settings import LogInput, OffsetsInput
    logs = [LogInput(path=str(FIXTURES / capture / name), cluster=cluster) for name in LOG_FILES[capture]]
    offsets = [OffsetsInput(path=str(FIXTURES / capture / "offsets-topic.jsonl"), cluster=cluster)]
    return logs, offsets


def two_server_logs(tmp_path: Path) -> tuple[list, list]:
    """The 2.7 capture's logs as broker1/server.log and broker2/server.log (same base name)."""
    import shutil

    from streaming.app.settings import LogInput, OffsetsInput
    for n, name in enumerate(("broker1-server.log", "broker2-server.log"), 1):
        (tmp_path / f"broker{n}").mkdir()
        shutil.copy(FIXTURES / "kafka-2.7" / name, tmp_path / f"broker{n}" / "server.log")
    logs = [LogInput(path=str(tmp_path / f"broker{n}" / "server.log")) for n in (1, 2)]
    return logs, [OffsetsInput(path=str(FIXTURES / "kafka-2.7" / "offsets-topic.jsonl"))]
