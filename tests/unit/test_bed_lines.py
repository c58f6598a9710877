"""Sequences real brokers of the test bed wrote that once gave wrong records.

tests/fixtures/bed-lines/ holds them verbatim: the group coordinator's lines of one group and
that group's `__consumer_offsets` records (read from the broker's segments)."""
from __future__ import annotations

from streaming.app.local import run_local
from streaming.app.settings import LogInput, OffsetsInput
from tests.support.capture_expectations import FIXTURES

LINES = FIXTURES / "bed-lines"


def test_a_leave_line_after_the_join_phase_completed_without_the_member_is_one_removal():
    # Kafka 3.9.2: b leaves; the JOIN phase completes with nobody ("generation 3 is now empty"),
    # then c's own LeaveGroup line comes: c was removed once, when its line says so.
    # With its __consumer_offsets records (the generation-3 record, with no members, comes 6 ms
    # before c's line): c's removal was inferred from it, then counted again from the line.
    out = run_local([LogInput(path=str(LINES / "kafka-3.9.2-leave-after-empty.log"))],
                    [OffsetsInput(path=str(LINES / "kafka-3.9.2-leave-after-empty.offsets.jsonl"))])
    removals = sorted((r["client_id"], r["cause"], r["removed_at_ms"]) for r in out["removal"])
    assert removals == [("m392-kill-a", "heartbeat_expiry", 1795443184286),
                        ("m392-kill-b", "leave_group", 1795443184971),
                        ("m392-kill-c", "leave_group", 1795443185128)]
    assert [r["evidence"].startswith("inferred") for r in out["removal"]] == [False, False, False]
