"""Converters of the values a coordinator message prints (Scala Options, member sets, numbers)
into event fields."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any


def optional_value(text: str) -> str | None:
    """Scala `None` / `Some(x)` / `Some(null)` and Java `null` -> None or x."""
    if text in ("None", "null", "Some(null)", ""):
        return None
    if text.startswith("Some(") and text.endswith(")"):
        return text[5:-1]
    return text


_MEMBER_SET_RE = re.compile(r"(?:[A-Za-z]*Set|List)?[(\[](.*)[)\]]")


def member_list(text: str) -> list[str]:
    """Scala `Set(a, b)` / `HashSet(a, b)`, Java `[a, b]`, or bare `a, b` -> ['a', 'b']."""
    text = text.strip()
    if text.endswith("."):  # Java sentences end with '.'
        text = text[:-1]
    m = _MEMBER_SET_RE.fullmatch(text)
    inner = m.group(1) if m else text
    return [item.strip() for item in inner.split(",") if item.strip()]


# Named regex group -> converter. Groups not listed are kept as strings.
FIELD_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "generation": int, "members": int, "static_members": int, "offsets_partition": int,
    "timeout_ms": int, "duration_ms": int, "member_epoch": int, "offsets_removed_total": int,
    "metadata_hash": int, "previous_member_epoch": int, "topology_epoch": int, "validated_topology_epoch": int,
    "group_instance_id": optional_value,
    "member_ids": member_list,
    "static": lambda word: word.lower() == "static",   # "Static" | "Dynamic"
}
# Optional literal groups such as `(?P<empty>empty )?`: data[name] = whether the text was there.
PRESENCE_FLAGS = frozenset({"empty", "temporary"})
EVENT_ATTRIBUTES = frozenset({"generation", "member_id", "reason"})
