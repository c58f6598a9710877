"""The stored form of a state bucket (STATE_SCHEMA_BUCKETED's one column): the groups that share
one stateful key, each a BucketEntry: its model, held rows, timeout and commit digest
(streaming/spark/stateful.py says what each holds).

Version 5 is text, one line per group after a `v5` header line:

    <group as a JSON string> TAB <timeout ms, or empty> TAB <[model_json, held_json, digest] as JSON>

so a call parses only the groups it touches: the others' lines, and their timeouts for the due
check, are read without decoding their entries and written back as they were. A call's cost is
then its own groups', not its bucket's, and buckets can be large (fewer calls, each with PySpark's
own cost: docs/design.md, "State buckets"). JSON escapes tabs and newlines inside strings, so
neither a group id nor an entry can break a line.

Version 4 had the same lines, its digest a JSON object with its waiting commits each decoded
({packed fields}). Version 5 keeps each waiting commit as `[ts_ms, its packed text]` as it came
in, so that a group touched while its commits wait for the watermark does not decode them again
(each is decoded when it folds), and stores the digest as its JSON text, compressed when shorter
(state/model.py pack): 2.7 times smaller buckets in the steady state (docs/benchmarks.md).
Version 3 had the same lines too; its held rows and digests carry each event's data as a
`data_json` string, where version 4 may have the object (streaming/rows.py PACKED_DATA). All
three load (rows.py event_data reads either data, `get` either digest), and an untouched line of
version 3 or 4 is written back as it was; the version keeps an older release from misreading a
newer line. Versions 1 and 2 were one JSON document, {"v": N, "groups": {group: entry}} (version
1 without the digest); they load, and are written back as version 5.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from state.commit_digest import CommitDigest
from state.model import pack, unpack
from streaming.rows import PACKED_TS, loads_json

BUCKET_STATE_VERSION = 5
_LINE_VERSIONS = (3, 4, 5)  # the line form (versions 1 and 2 were one JSON document)
_HEADER = f"v{BUCKET_STATE_VERSION}"
_DUMPS = json.JSONEncoder(separators=(",", ":")).encode


# A commit waiting in a digest for the watermark: [its time ms, its packed fields' text
# (streaming/rows.py PACKED_EVENT)].
WaitingCommit = list


def _waiting_of_version_4(fields: dict[str, Any]) -> WaitingCommit:
    """A waiting commit as versions 3 and 4 stored it (its packed fields, decoded)."""
    return [fields[PACKED_TS], _DUMPS(fields)]


@dataclass(slots=True)
class BucketEntry:
    """One group's state in its bucket. Stored as its line's timeout and
    [model_json, held_json, digest]: the digest's stored keys (state/commit_digest.py) and "w", the
    commits the watermark has not passed yet, in arrival order, each [ts_ms, packed text]
    (WaitingCommit); a null digest when the group may not fold its commits (stateful.py, "commits
    without a turn")."""
    model_json: str
    held_json: str
    timeout_ms: int | None = None
    digest: CommitDigest | None = None
    waiting_commits: list[WaitingCommit] = field(default_factory=list)

    @classmethod
    def from_stored(cls, model_json: str, held_json: str, timeout_ms: int | None,
                    digest: dict[str, Any] | None) -> BucketEntry:
        if digest is None:
            return cls(model_json, held_json, timeout_ms)
        waiting = [w if isinstance(w, list) else _waiting_of_version_4(w) for w in digest.get("w", ())]
        return cls(model_json, held_json, timeout_ms, CommitDigest.from_stored(digest), waiting)

    def stored_digest(self) -> dict[str, Any] | None:
        if self.digest is None:
            return None
        stored: dict[str, Any] = {"w": self.waiting_commits} if self.waiting_commits else {}
        stored.update(self.digest.stored())
        return stored


class Bucket:
    """A bucket's groups, their entries decoded on first use."""

    def __init__(self, lines: dict[str, tuple[int | None, str]] | None = None,
                 entries: dict[str, BucketEntry] | None = None) -> None:
        # group -> (timeout, its line) as stored, not decoded: written back as is while untouched
        self._lines = lines or {}
        self._entries = entries or {}        # group -> entry: decoded, or new
        self._dropped: set[str] = set()

    @classmethod
    def load(cls, text: str) -> Bucket:
        if text.startswith("{"):            # versions 1 and 2: one JSON document
            document = json.loads(text)
            if document.get("v", 1) > 2:
                raise _newer(document["v"])
            return cls(entries={g: _entry(e) for g, e in document["groups"].items()})
        header, _, body = text.partition("\n")
        version = int(header[1:]) if header[:1] == "v" and header[1:].isdigit() else None
        if version not in _LINE_VERSIONS:
            if version is not None and version > BUCKET_STATE_VERSION:
                raise _newer(version)
            raise ValueError(f"state bucket: not a stored bucket (starts {text[:20]!r})")
        lines: dict[str, tuple[int | None, str]] = {}
        for line in body.split("\n") if body else ():
            quoted, timeout, _ = line.split("\t", 2)
            # a name JSON wrote without an escape is itself between the quotes
            group = json.loads(quoted) if "\\" in quoted else quoted[1:-1]
            lines[group] = (int(timeout) if timeout else None, line)
        return cls(lines)

    def get(self, group: str) -> BucketEntry | None:
        entry = self._entries.get(group)
        if entry is None and group in self._lines and group not in self._dropped:
            timeout, line = self._lines[group]
            model_json, held_json, digest = loads_json(line.split("\t", 2)[2])
            if isinstance(digest, str):         # version 5: its JSON, packed (state/model.py pack)
                digest = loads_json(unpack(digest))
            entry = self._entries[group] = BucketEntry.from_stored(model_json, held_json, timeout, digest)
        return entry

    def put(self, group: str, entry: BucketEntry) -> None:
        self._entries[group] = entry
        self._dropped.discard(group)

    def drop(self, group: str) -> None:
        self._entries.pop(group, None)
        self._dropped.add(group)

    def groups(self) -> Iterator[str]:
        yield from (g for g in self._lines if g not in self._dropped)
        yield from (g for g in self._entries if g not in self._lines)

    def timeout(self, group: str) -> int | None:
        entry = self._entries.get(group)
        return entry.timeout_ms if entry is not None else self._lines[group][0]

    def due(self, watermark: int, skip: Iterable[str] = ()) -> list[str]:
        """Groups whose own timeout the watermark has passed (Spark's rule for a key)."""
        skipped = set(skip)
        return [g for g in self.groups() if g not in skipped
                and (t := self.timeout(g)) is not None and t < watermark]

    def earliest_timeout(self) -> int | None:
        return min((t for g in self.groups() if (t := self.timeout(g)) is not None), default=None)

    def all(self) -> dict[str, BucketEntry]:
        """Every group's entry, decoded (tests, tools)."""
        return {g: entry for g in self.groups() if (entry := self.get(g)) is not None}

    def text(self) -> str:
        """The stored form (version 5): lines of untouched groups as they were read."""
        lines = [_HEADER]
        for group in self.groups():
            entry = self._entries.get(group)
            if entry is None:
                lines.append(self._lines[group][1])
                continue
            text = _DUMPS([entry.model_json, entry.held_json, _packed(entry.stored_digest())])
            timeout = entry.timeout_ms
            lines.append(f"{_DUMPS(group)}\t{'' if timeout is None else int(timeout)}\t{text}")
        return "\n".join(lines)

    def __bool__(self) -> bool:
        return any(True for _ in self.groups())


def _packed(digest: dict[str, Any] | None) -> str | None:
    """A stored digest as version 5 writes it: its JSON, compressed when that is shorter. Its
    waiting commits and commit times repeat topic names and times: a tenth of the steady state's
    entry bytes (10 partitions committed every 5 s, 10 s lateness) that Spark's state store, its
    Arrow batches and every call's bucket text carry (docs/design.md, "State buckets")."""
    return None if digest is None else pack(_DUMPS(digest))


def _entry(stored: list[Any]) -> BucketEntry:
    """An entry of versions 1 and 2: [model_json, held_json, timeout(, digest)] (version 1: no digest)."""
    model_json, held_json, timeout, digest = (*stored, None)[:4]
    return BucketEntry.from_stored(model_json, held_json, timeout, digest)


def _newer(version: Any) -> ValueError:
    return ValueError(f"state bucket of version {version} was written by a newer release "
                      f"(this one reads versions 1-{BUCKET_STATE_VERSION})")


def bucket_groups(text: str) -> dict[str, BucketEntry]:
    """A stored bucket's groups, every entry decoded."""
    return Bucket.load(text).all()


def bucket_text(groups: dict[str, BucketEntry]) -> str:
    """The stored form of these groups."""
    return Bucket(entries=dict(groups)).text()
