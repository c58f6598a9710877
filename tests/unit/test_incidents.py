"""The incident board (state/incidents.py): which incidents the evidence makes, and which not."""
from __future__ import annotations

from state.diagnosis.brokers import BrokerDeath
from state.incidents import IncidentBoard, IncidentSettings

T0 = 1_764_680_400_000      # 2025-12-02T13:00:00Z


def removal(group: str, client: str, at_s: float, cause: str = "heartbeat_expiry", host: str = "127.0.0.1",
            root_cause: str | None = None, member_id: str | None = None) -> dict:
    return {"cluster": "c", "group": group, "member_id": member_id or f"{client}-{at_s}", "client_id": client,
            "client_host": host, "group_instance_id": None, "session_timeout_ms": 6000,
            "removed_at_ms": T0 + int(at_s * 1000), "cause": cause, "root_cause": root_cause or "unknown"}


def snapshot(group: str, members: list[tuple[str, str]], coordinator: int = 1, at_s: float = 0.0,
             pending: list[dict] | None = None) -> dict:
    snap = {"cluster": "c", "group": group, "coordinator": coordinator, "last_event_ms": T0 + int(at_s * 1000),
            "members": [{"member_id": f"{c}-m", "client_id": c, "client_host": h} for c, h in members]}
    if pending:
        snap["pending_removals"] = pending
    return snap


def kinds(board: IncidentBoard) -> dict[str, set[str]]:
    return {i.id: set(i.groups) for i in board.incidents()}


def test_a_broker_death_is_one_incident_with_its_stalled_and_coordinated_groups() -> None:
    board = IncidentBoard()
    board.note_snapshot(snapshot("coordinated", [("x", "127.0.0.1")], coordinator=2))
    board.note_snapshot(snapshot("stalled-a", [("a2", "127.0.0.1")], coordinator=1))
    board.note_snapshot(snapshot("stalled-b", [("b2", "127.0.0.1")], coordinator=1))
    board.note_deaths("c", [BrokerDeath("c", 2, T0 + 10_000, "broker 1 could not reach it")])
    # three members of one host expire in the stall: the broker's, not a host incident
    board.note_removals([removal("stalled-a", "a1", 17), removal("stalled-b", "b1", 17.5),
                         removal("stalled-a", "a3", 18)], decided=False)
    found = board.incidents()
    assert [(i.kind, i.subject, i.root_cause) for i in found] == [("broker", "2", "broker_death")]
    assert found[0].groups == {"coordinated", "stalled-a", "stalled-b"}
    assert found[0].id == "broker-2@2025-12-02T13:00:10Z"


def test_members_of_one_host_removed_across_groups_make_a_host_incident() -> None:
    board = IncidentBoard()
    for g in ("g1", "g2", "g3"):
        board.note_snapshot(snapshot(g, [(f"{g}-stays", "127.0.0.1")]))
    pending = [removal(g, f"{g}-dies", 5 + i * 0.3, host="/127.0.0.3") for i, g in enumerate(("g1", "g2", "g3"))]
    board.note_removals(pending[:2], decided=False)
    board.note_removals(pending[2:], decided=False)
    (inc,) = board.incidents()
    assert (inc.kind, inc.subject, inc.root_cause, inc.groups) == ("host", "127.0.0.3", "host_wide", {"g1", "g2", "g3"})


def test_no_host_incident_when_more_of_the_hosts_members_stayed() -> None:
    """Kafka 2.7 sc10: five kills on a host whose ten other members in those groups kept going."""
    board = IncidentBoard()
    for g in ("g1", "g2", "g3", "g4", "g5"):
        board.note_snapshot(snapshot(g, [(f"{g}-{i}", "127.0.0.1") for i in range(2)]))
    board.note_removals([removal(g, f"{g}-dies", 1 + i * 0.3) for i, g in enumerate(("g1", "g2", "g3", "g4", "g5"))],
                        decided=False)
    assert board.incidents() == []


def test_a_client_removed_again_and_again_is_a_crash_loop() -> None:
    board = IncidentBoard()
    board.note_removals([removal("g", "looper", 10), removal("g", "looper", 40)], decided=False)
    assert board.incidents() == []
    board.note_removals([removal("g", "looper", 70)], decided=False)
    (inc,) = board.incidents()
    assert (inc.kind, inc.subject, inc.root_cause, inc.removals) == ("crash_loop", "g", "process_crash", 3)


def test_poll_and_rebalance_timeouts_are_slow_processing_incidents_of_their_group() -> None:
    board = IncidentBoard()
    board.note_snapshot(snapshot("slow", [], pending=[removal("slow", "a", 3, cause="poll_timeout")]))
    board.note_removals([removal("stuck", "b", 4, cause="rebalance_timeout")], decided=False)
    assert {(i.kind, i.subject, i.root_cause) for i in board.incidents()} == {
        ("slow_processing", "slow", "slow_processing"), ("rebalance_timeout", "stuck", "slow_processing")}


def test_graceful_leaves_and_single_crashes_make_no_incident() -> None:
    board = IncidentBoard()
    board.note_removals([removal(f"g{i}", f"m{i}", i * 2, cause="leave_group") for i in range(20)], decided=True)
    board.note_removals([removal("g0", "crashed", 50)], decided=False)
    assert board.incidents() == []


def test_an_incident_keeps_its_id_when_its_removals_are_decided_and_ends_after_its_hold() -> None:
    board = IncidentBoard(settings=IncidentSettings(hold_ms=60_000))
    rs = [removal(f"g{i}", f"m{i}", 1 + i * 0.2, host="10.0.0.9") for i in range(3)]
    board.note_removals(rs, decided=False)
    (before,) = board.incidents()
    board.note_removals([dict(r, root_cause="host_wide") for r in rs], decided=True)
    (after,) = board.incidents()
    assert after.id == before.id and after.removals == 3
    board.advance("c", T0 + 1_400 + 60_000)
    assert [i.id for i in board.incidents()] == [before.id]
    board.advance("c", T0 + 1_400 + 60_001)
    assert board.incidents() == []
    board.prune()
    board.advance("c", T0 + 10 * 3_600_000)
    board.prune()
    assert board._removals == {}


def test_a_decided_restart_is_no_fault() -> None:
    """A removal whose verdict came back graceful_shutdown or slow_processing counts for no host."""
    board = IncidentBoard()
    board.note_removals([removal(f"g{i}", f"m{i}", 1 + i * 0.2, host="10.0.0.9", root_cause="graceful_shutdown")
                         for i in range(3)], decided=True)
    assert board.incidents() == []


# --- on the Kafka 2.7 capture, through the metrics sink (what `run` serves) -----------------------
def _page_after(until_utc: str) -> str:
    from prometheus_client import generate_latest

    from sinks.metrics import MetricsSink
    from streaming.app.local import capture_events
    from tests.support.capture_expectations import capture_inputs, utc_ms
    from tests.support.stateful_driver import StatefulDriver

    events = sorted(capture_events(*capture_inputs("kafka-2.7")), key=lambda e: e.sort_key())
    until = utc_ms(until_utc)
    driver = StatefulDriver(30_000)
    sink = MetricsSink([1.0, 10.0])
    batches: dict[int, list] = {}
    for e in events:
        if e.ts_ms <= until:
            batches.setdefault(e.ts_ms // 1000, []).append(e)
    for k in sorted(batches):
        for kind, record in driver.batch(batches[k]):
            sink.observe(kind, record)
        sink.incidents.refresh()
    return generate_latest(sink.registry).decode()


def test_a_rebalance_timeout_is_an_incident_in_the_batch_that_read_its_line():
    """2.7 sc11: the coordinator removed sc11-stuck at the 15 s rebalance timeout (19:31:35.191);
    its removal record is final a minute later, the incident is on /metrics at once."""
    before = _page_after("19:31:35.000")
    assert 'subject="sc11-stuck-in-rebalance"' not in before
    page = _page_after("19:31:36.000")
    assert ('rebalance_monitor_incident_started_timestamp_seconds{cluster="default",'
            'incident="rebalance_timeout-sc11-stuck-in-rebalance@2026-11-21T19:31:35Z",kind="rebalance_timeout",'
            'root_cause="slow_processing",subject="sc11-stuck-in-rebalance"}') in page
    assert ('rebalance_monitor_incident_group_info{cluster="default",group="sc11-stuck-in-rebalance",'
            'incident="rebalance_timeout-sc11-stuck-in-rebalance@2026-11-21T19:31:35Z"} 1.0') in page


def test_five_kills_on_a_host_whose_other_members_stayed_page_no_host():
    """2.7 sc10: five members killed on 127.0.0.1 within 1.5 s while the ten other members of their
    groups on that host kept going (docs/diagnosis.md): crashes, not the host."""
    page = _page_after("19:33:30.000")
    assert 'kind="host"' not in page


def test_a_group_the_dead_broker_coordinated_counts_though_its_members_left_after():
    """The bed's coordinator kill: the group moved, then its members left before the page fired."""
    board = IncidentBoard()
    board.note_snapshot(snapshot("moved", [("a", "127.0.0.1"), ("b", "127.0.0.1")], coordinator=1, at_s=0))
    board.note_snapshot(snapshot("long-empty", [], coordinator=1, at_s=0))
    board.note_snapshot(snapshot("moved", [("a", "127.0.0.1"), ("b", "127.0.0.1")], coordinator=2, at_s=15))
    board.note_snapshot(snapshot("moved", [], coordinator=2, at_s=25))
    board.note_deaths("c", [BrokerDeath("c", 1, T0 + 10_000, "broker 2 could not reach it")])
    (inc,) = board.incidents()
    assert inc.groups == {"moved"}


def test_a_group_counts_when_one_batch_held_its_lines_of_both_coordinators():
    """A loaded bed: the group's lines from before the kill and its load on the next coordinator
    came in one batch, so no snapshot showed the dead coordinator; the group's changes do."""
    board = IncidentBoard()
    moved = snapshot("moved", [("a", "127.0.0.1"), ("b", "127.0.0.1")], coordinator=1, at_s=15)
    moved["coordinators"] = [[T0, 2], [T0 + 14_000, 1]]
    stayed = snapshot("stayed", [("c", "127.0.0.1")], coordinator=1, at_s=15)
    stayed["coordinators"] = [[T0, 1]]
    board.note_snapshot(moved)
    board.note_snapshot(stayed)
    board.note_deaths("c", [BrokerDeath("c", 2, T0 + 10_000, "broker 1 could not reach it")])
    (inc,) = board.incidents()
    assert inc.groups == {"moved"}


def test_a_group_emptied_after_the_death_counts_though_no_snapshot_showed_it_then():
    """Its members joined before the death and left after it, each in one batch."""
    board = IncidentBoard()
    board.note_snapshot(snapshot("g", [("a", "127.0.0.1")], coordinator=2, at_s=0))
    emptied = snapshot("g", [], coordinator=2, at_s=30)
    emptied.update(state="Empty", state_since_ms=T0 + 25_000)
    board.note_snapshot(emptied)
    board.note_deaths("c", [BrokerDeath("c", 2, T0 + 10_000, "broker 1 could not reach it")])
    (inc,) = board.incidents()
    assert inc.groups == {"g"}
