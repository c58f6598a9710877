"""A catalog entry (one coordinator message template and the Kafka versions that print it), the
building blocks of their patterns, and the hooks that rewrite what a pattern captured."""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.logs.reasons import classify_rebalance_reason
from streaming.logs.values import optional_value

FAMILIES = ("scala", "java", "both")


@dataclass(frozen=True, eq=False)
class CatalogEntry:
    """One coordinator message template.

    pattern    is fullmatched against the message body (after the `[GroupCoordinator ...]` prefix).
    anchor     is a literal every matching body contains; tested first because `in` is much
               cheaper than a failed regex.
    family     "scala" (logger kafka.coordinator.group.*), "java" (org.apache.kafka.coordinator.*)
               or "both" when the two coordinators print the same text.
    kind       the Event kind, or None for lines that are recognised but carry no fact we use;
               `why` then says why not.
    data       constant data added to every event of this entry.
    derive     optional hook(data, attributes) that rewrites both in place; attributes holds the
               Event's generation / member_id / reason.
    parse_at_debug  the template is logged at DEBUG in some versions and that DEBUG line is the
               only record of the fact (not a duplicate of an INFO line), so DEBUG lines are matched.
    levels     the levels this entry matches (None: any); for free-text templates that would
               otherwise swallow unknown lines of other levels.
    fallback   a free-text template, tried after every other entry (they come last in CATALOG):
               a line another entry matches is that entry's.
    """
    name: str
    family: str
    versions: str
    kind: str | None
    pattern: re.Pattern
    anchor: str
    data: Mapping[str, Any] = field(default_factory=dict)
    derive: Callable[[dict[str, Any], dict[str, Any]], None] | None = None
    parse_at_debug: bool = False
    why: str | None = None
    levels: frozenset[str] | None = None
    fallback: bool = False


def entry(name: str, family: str, versions: str, kind: str | None, pattern: str, anchor: str,
          **options: Any) -> CatalogEntry:
    """An entry whose lines become events of `kind`."""
    if anchor not in pattern.replace("\\", ""):
        raise ValueError(f"catalog entry {name}: anchor {anchor!r} is not literal text of the pattern")
    if family not in FAMILIES:
        raise ValueError(f"catalog entry {name}: family {family!r} is not one of {FAMILIES}")
    if kind is None and not options.get("why"):
        raise ValueError(f"catalog entry {name}: a line without a fact needs `why`")
    if options.get("levels") is not None:
        options["levels"] = frozenset(options["levels"])
    return CatalogEntry(name, family, versions, kind, re.compile(pattern), anchor, **options)


def no_fact(name: str, family: str, versions: str, pattern: str, anchor: str, why: str,
            **options: Any) -> CatalogEntry:
    """An entry for lines that are recognised and deliberately carry nothing the monitor uses."""
    return entry(name, family, versions, None, pattern, anchor, why=why, **options)


def _derive_prepare_rebalance(data: dict[str, Any], attributes: dict[str, Any]) -> None:
    data.update(classify_rebalance_reason(attributes["reason"]))


_MEMBER_METADATA_RE = re.compile(
    r"MemberMetadata\(memberId=(?P<member_id>.*?), groupInstanceId=(?P<iid>None|Some\(.*?\)|null|.*?), "
    r"clientId=(?P<client_id>.*?), clientHost=(?P<client_host>.*?), "
)


def derive_member_metadata(data: dict[str, Any], attributes: dict[str, Any]) -> None:
    """Scala 3.x prints the whole MemberMetadata; pull out the member id, instance id and client."""
    m = _MEMBER_METADATA_RE.match(data.pop("member_metadata", ""))
    if m is not None:
        attributes["member_id"] = m.group("member_id")
        data["group_instance_id"] = optional_value(m.group("iid"))
        data["client_id"] = m.group("client_id")
        data["client_host"] = m.group("client_host")


# Building blocks. Group ids are arbitrary strings: unbracketed they are matched lazily up to the
# literal that follows; inside `[GroupId g]` they stop at the first `]`.
G = r"(?P<group>.+?)"
GB = r"(?P<group>[^\]]+)"
M = r"(?P<member_id>\S+)"
MB = r"(?P<member_id>[^\]]+)"          # `[MemberId m]` of the streams lines
GEN = r"(?P<generation>-?\d+)"
ST = r"(?P<state>\w+)"
IID = r"(?P<group_instance_id>.+?)"
OP = r"\(__consumer_offsets-(?P<offsets_partition>\d+)\)"
LEAVE = r"has left group through explicit `LeaveGroup` request; client reason: (?P<client_reason>.*)"

DYNAMIC = {"static": False, "group_instance_id": None}
PREPARE = {"derive": _derive_prepare_rebalance}
