"""The test bed waits for a started group to settle before a scenario acts (testbed/bed/scenarios.py
_start_all): a CI run's poll_timeout took member b's late 'assigned' of the starting rebalance for
the rebalance after a stopped polling, and resumed a 0.1 s later."""
from __future__ import annotations

from testbed.bed.members import Member
from testbed.bed.scenarios import settled


class _Member:
    def __init__(self, *events):
        self.events = [{"event": e, "partitions": p} for e, p in events]

    owned = Member.owned


def test_the_ci_runs_start_of_poll_timeout():
    # b alone got everything, a's join made b revoke it; a was assigned its half before b got its own
    a = _Member(("assigned", ["t-0", "t-1"]))
    b = _Member(("assigned", ["t-0", "t-1", "t-2", "t-3"]), ("revoked", ["t-0", "t-1", "t-2", "t-3"]))
    assert not settled([a, b])
    b.events.append({"event": "assigned", "partitions": ["t-2", "t-3"]})
    assert settled([a, b])


def test_a_partition_owned_twice_is_not_settled():
    a = _Member(("assigned", ["t-0", "t-1"]))
    b = _Member(("assigned", ["t-0", "t-1", "t-2", "t-3"]))     # not revoked yet
    assert not settled([a, b])


def test_kip848_partitions_waits_for_the_members_to_own_every_partition_once():
    """kip848_partitions acts once the members own exactly the topic's partitions (a KIP-848 client
    names only what it gains or loses), and again once they own the new ones too."""
    from testbed.bed.scenarios import _owns_all
    before = {f"t-{p}" for p in range(4)}
    a = _Member(("assigned", ["t-0", "t-1", "t-2", "t-3"]), ("revoked", ["t-2", "t-3"]), ("assigned", []))
    b = _Member(("assigned", []))
    assert not _owns_all([a, b], before)                 # b has not been given a's half yet
    b.events.append({"event": "assigned", "partitions": ["t-2", "t-3"]})
    assert _owns_all([a, b], before)
    a.events.append({"event": "assigned", "partitions": ["t-6", "t-7"]})
    assert not _owns_all([a, b], before | {"t-4", "t-5", "t-6", "t-7"})
    b.events.append({"event": "assigned", "partitions": ["t-4", "t-5"]})
    assert _owns_all([a, b], before | {"t-4", "t-5", "t-6", "t-7"})


def test_the_runner_records_more_partitions_before_it_asks_for_them(tmp_path):
    """Runner.add_partitions: the timeline has the action (the cause the judge reads) before the
    CreatePartitions request, and its end after."""
    from testbed.bed.runner import Runner

    class Cluster:
        def add_partitions(self, topic, total):
            calls.append((topic, total, [e["action"] for e in runner.timeline]))
    calls: list = []
    runner = Runner(Cluster(), tmp_path)
    runner.add_partitions("g-data", 8, ["g"])
    runner.close()
    assert calls == [("g-data", 8, ["add_partitions"])]
    first, done = runner.timeline
    assert (first["action"], first["group"], first["groups"], first["topic"], first["partitions"]) == \
        ("add_partitions", "g", ["g"], "g-data", 8)
    assert done["action"] == "partitions_added" and done["ts_ms"] >= first["ts_ms"]
