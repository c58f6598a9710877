"""The catalog of group-coordinator messages: one entry per message template and Kafka version
range, and the index that picks the candidate entries for a message body.

Templates come from Kafka's own code: tests/data/coordinator_templates.jsonl lists every
INFO/WARN/ERROR call (and the DEBUG calls with rebalance facts) of the group coordinator of every
release line 0.10.2-4.4, and tests/unit/test_coordinator_templates.py renders one line per template
and version and requires each to match exactly one entry here. Named regex groups map onto event
fields: `group`/`groups`, `generation`, `member_id`, `reason` become Event attributes, every other
named group goes into `Event.data` (converted by values.FIELD_CONVERTERS). Supporting a new Kafka
wording means adding one entry to the module of its protocol:

  classic.py   the classic protocol (Scala 1.1-4.0, Java 3.7+), group load/unload/expiry/deletion
  modern.py    KIP-848 consumer groups and share groups
  streams.py   streams groups
  no_fact.py   recognised lines without a fact, each with its reason
"""
from __future__ import annotations

from streaming.logs.catalog.classic import CLASSIC
from streaming.logs.catalog.dispatch import Dispatch
from streaming.logs.catalog.entry import CatalogEntry
from streaming.logs.catalog.modern import MODERN
from streaming.logs.catalog.no_fact import NO_FACT
from streaming.logs.catalog.streams import STREAMS_ENTRIES

__all__ = ["CATALOG", "CatalogEntry", "candidate_entries"]

# Order matters only for speed (frequent messages first) and for the few free-text entries, which
# come last; every rendered template matches exactly one entry (tests/unit/test_coordinator_templates.py).
CATALOG: list[CatalogEntry] = [*CLASSIC, *MODERN, *STREAMS_ENTRIES, *NO_FACT]
CATALOG.sort(key=lambda e: e.fallback)   # stable: fallbacks last, the rest in order

candidate_entries = Dispatch(CATALOG).candidates
