"""The words of records and labels are StrEnums (state/vocabulary.py), and everything keyed by
them has an entry for every member: the report's colours (each its own), the group dashboard's
state mapping, the record contract (docs/output.md). A member added without its entries fails here."""
from __future__ import annotations

import json
import re
from enum import StrEnum
from pathlib import Path

import pytest

from state.vocabulary import (
    REBALANCING_STATES, Confidence, GroupState, Outcome, Protocol, RemovalCause, RootCause, Trigger,
)

ROOT = Path(__file__).resolve().parents[2]
WORDS: tuple[type[StrEnum], ...] = (Trigger, RemovalCause, RootCause, Confidence, Outcome, GroupState, Protocol)


@pytest.mark.parametrize("words", WORDS, ids=lambda w: w.__name__)
def test_every_word_is_in_the_record_contract(words):
    output = (ROOT / "docs" / "output.md").read_text()
    missing = [w.value for w in words if f"`{w.value}`" not in output]
    assert not missing, f"{words.__name__}: not in docs/output.md: {missing}"


def test_every_trigger_and_root_cause_has_a_colour_of_its_own():
    from sinks.report.svg import OTHER_COLOR, ROOT_CAUSE_COLORS, TRIGGER_COLORS
    for words, colours in ((Trigger, TRIGGER_COLORS), (RootCause, ROOT_CAUSE_COLORS)):
        assert set(colours) == set(words), words.__name__
        assert len(set(colours.values())) == len(colours), f"{words.__name__}: two members share a colour"
        assert OTHER_COLOR not in colours.values(), f"{words.__name__}: a member looks like an unknown word"


def test_the_report_legend_shows_every_trigger_in_its_colour():
    """The legend of the fleet timeline: one swatch per trigger, in the trigger's colour (the bug
    this test was written for: 13 triggers zipped with 11 colours left two without one)."""
    from sinks.report.page import _legend
    from sinks.report.svg import TRIGGER_COLORS
    legend = _legend(TRIGGER_COLORS)
    swatch = r'<span><i class="sw" style="background:(#[0-9a-f]{6})"></i>([^<]+)</span>'
    shown = {name: colour for colour, name in re.findall(swatch, legend)}
    assert shown == {t.value: TRIGGER_COLORS[t] for t in Trigger}


def test_every_group_state_has_a_dashboard_mapping():
    from dashboards.group import STATE_CODES, STATE_COLORS
    assert set(STATE_COLORS) == set(GroupState) == set(STATE_CODES)
    assert sorted(STATE_CODES.values()) == list(range(1, len(GroupState) + 1))


def test_the_rebalancing_states_are_one_list_for_gauges_alerts_and_dashboards():
    from dashboards import fleet
    from dashboards.alert_rules import time_rebalancing
    from sinks.group_gauges import GroupStateCollector
    assert GroupStateCollector.IN_PROGRESS == REBALANCING_STATES
    assert fleet.REBALANCING == "|".join(REBALANCING_STATES) == "PreparingRebalance|CompletingRebalance|Assigning|Reconciling"
    assert 'state=~"PreparingRebalance|CompletingRebalance|Assigning|Reconciling"' in time_rebalancing('cluster="c"')


def test_words_are_their_values_in_records():
    """A member in a record is written as its value: records and labels do not change."""
    record = {"trigger": Trigger.HEARTBEAT_EXPIRY, "cause": RemovalCause.LEAVE_GROUP, "state": GroupState.DEAD}
    assert json.dumps(record, sort_keys=True) == '{"cause": "leave_group", "state": "Dead", "trigger": "heartbeat_expiry"}'
    assert f"{Protocol.CONSUMER}" == "consumer" and Confidence.HIGH == "high" and Outcome.STABLE in ("stable",)
