"""Scope: which levels, which DEBUG lines are kept."""
from __future__ import annotations

import re

# ---------------------------------------------------------------------------------------------
# Scope: which levels, which DEBUG lines
# ---------------------------------------------------------------------------------------------

# A DEBUG template is kept when it states a rebalance fact: a member's assignment state or epoch,
# a generation / epoch change, a member created / joining / leaving / removed / fenced, a target
# assignment, or why a join phase cannot complete. Everything else at DEBUG (and TRACE) is left out.
DEBUG_FACT = re.compile(
    r"assignment state|new assignment|target assignment|epoch|generation|"
    r"new member id|joins (the )?(consumer |share |streams )?group|joining|has left|left the|"
    r"removed (dynamic )?members|removing it from the group|fenced|Cannot complete join phase|"
    r"rebalance|Stabilized|Pending (dynamic )?member|member .* (leave|left)|"
    r"Adding to the group|topology epoch|Loaded member",
    re.I)
# ... unless it is about offsets, producers, transactions, coordinator (not group) epochs, loading:
DEBUG_NOT_FACT = re.compile(
    r"producer|leader epoch|transaction|coordinator epoch|appending to log|from log with generation|"
    r"Cannot find the group|loading of metadata|Loaded member|Cannot remove the epoch|"
    r"(Started|Finished) (loading|unloading)",
    re.I)
# Explicit decisions that override the patterns (template text -> keep?).
DEBUG_OVERRIDES: dict[str, bool] = {}


def in_scope(level: str, template: str | None) -> bool:
    if level in ("INFO", "WARN", "ERROR"):
        return True
    if level != "DEBUG" or template is None:
        return False
    if template in DEBUG_OVERRIDES:
        return DEBUG_OVERRIDES[template]
    return DEBUG_FACT.search(template) is not None and DEBUG_NOT_FACT.search(template) is None

