"""The test bed's log topic layout (testbed/bed/shipper.py): the partition of each
broker's lines is led by that broker, so stopping one broker (the failover scenario) leaves the
others' lines, above all the new coordinator's, on a leader that keeps running."""
from __future__ import annotations

import pytest

from testbed.bed.shipper import self_led_assignment


@pytest.mark.parametrize(("ids", "rf"), [([1], 1), ([1, 2], 2), ([1, 2, 3], 2), ([4, 7, 9], 3)])
def test_each_brokers_partition_is_led_by_that_broker(ids, rf):
    assignment = self_led_assignment(ids, rf)
    assert [replicas[0] for replicas in assignment] == ids
    assert all(len(set(replicas)) == rf and set(replicas) <= set(ids) for replicas in assignment)


def test_a_stopped_broker_leads_no_other_brokers_partition():
    ids = [1, 2, 3]
    for stopped in ids:
        led = [k for k, replicas in enumerate(self_led_assignment(ids, 2)) if replicas[0] == stopped]
        assert led == [ids.index(stopped)]
