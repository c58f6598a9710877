"""The Spark state of a group stays small (issue 15): <= 2 KB for an idle group, <= 8 KB for a
group of 100 members, counting both state columns (model and held event rows) as stored."""
from __future__ import annotations

import dataclasses
import json
import random
import uuid

import pytest

from state.model import Member
from testbed import state_budget
from testbed.state_budget import GROUP, held_commits, stored_bytes

IDLE_GROUP_BYTES = 2 * 1024
HUNDRED_MEMBERS_BYTES = 8 * 1024


@pytest.fixture(scope="module")
def sc03():
    """The real sc03 group at its last Stable moment and its latest commit (testbed/state_budget.py)."""
    return state_budget.sc03()


def test_an_idle_group_fits_in_2_kb(sc03):
    model, commit = sc03
    size = stored_bytes(model, held_commits(commit))
    assert size <= IDLE_GROUP_BYTES, size


def test_a_group_of_100_members_fits_in_8_kb(sc03):
    model, commit = sc03
    real = next(iter(model.members.values()))
    rng = random.Random(15)
    for i in range(100):
        member_id = f"{GROUP}-c{i}-{uuid.UUID(int=rng.getrandbits(128), version=4)}"
        model.members[member_id] = dataclasses.replace(
            real, member_id=member_id, client_id=f"{GROUP}-c{i}", client_host=f"/10.0.{i // 250}.{i % 250}",
            partitions=[f"sc03-topic:{i}"])
    model.members = dict(list(model.members.items())[-100:])
    size = stored_bytes(model, held_commits(commit, partitions=100, batches=1))
    assert size <= HUNDRED_MEMBERS_BYTES, size


def test_the_budget_test_would_see_an_uncompressed_state(sc03):
    """The same 100 members in the version-2 form (every field, plain JSON) are far over 8 KB."""
    model, _ = sc03
    members = {f"m-{i}-{uuid.uuid4()}": Member(member_id="x", client_id=f"c{i}", client_host="/10.0.0.1",
                                               session_timeout_ms=45_000, rebalance_timeout_ms=300_000,
                                               partitions=[f"t:{i}"]) for i in range(100)}
    v2 = json.dumps({**dataclasses.asdict(dataclasses.replace(model, members=members)), "schema_version": 2})
    assert len(v2) > HUNDRED_MEMBERS_BYTES
