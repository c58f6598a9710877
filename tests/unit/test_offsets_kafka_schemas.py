"""Every `__consumer_offsets` key and value version of every 4.x release, written from Kafka's own
schema files of that release (tests/fixtures/kafka-schemas, see tests/support/kafka_schemas.py)
with random field values, must decode to those values, field by field, and become an event."""
from __future__ import annotations

import random

import pytest

from streaming.offsets.decoder import decode_key, decode_value
from streaming.offsets.record_events import record_to_events
from streaming.offsets.records import KIND_BY_TYPE, RECORD_TYPE_NAMES
from tests.support.kafka_schemas import Schema, expected, load, matches, record_types, release_schemas, versions

DOC = load()


def _cases() -> list[tuple[str, str, int]]:
    out = []
    for release in DOC["releases"]:
        schemas = release_schemas(DOC, release)
        for name, key_schema in sorted(schemas.items()):
            if name.endswith("Key"):
                out += [(release, name[:-3], t) for t in record_types(key_schema)]
    return out


CASES = _cases()


def test_the_extract_covers_every_record_type_and_release():
    assert sorted(DOC["releases"]) == ["4.0.2", "4.1.2", "4.2.1", "4.2.2", "4.3.1", "4.4.0"]
    types = {release: {t for r, _, t in CASES if r == release} for release in DOC["releases"]}
    assert types["4.0.2"] == set(range(0, 17))       # with 9, 4.0's ShareGroupPartitionMetadata; no streams
    assert types["4.4.0"] == set(RECORD_TYPE_NAMES) - {9}
    # 4.2.2 ships the same definitions as 4.2.1
    assert DOC["releases"]["4.2.2"] == DOC["releases"]["4.2.1"]


@pytest.mark.parametrize("release,record,record_type", CASES, ids=[f"{r}-{n}-{t}" for r, n, t in CASES])
def test_every_key_and_value_version_decodes_to_the_schema_fields(release, record, record_type):
    schemas = release_schemas(DOC, release)
    key_schema, value_schema = Schema(schemas[record + "Key"]), Schema(schemas[record + "Value"])
    assert RECORD_TYPE_NAMES[record_type] == record.removeprefix("Legacy")
    rng = random.Random(f"{release}/{record}/{record_type}")
    key_version = 0 if "apiKey" in key_schema.schema else record_type    # 4.0 keys: version = type
    key_values = key_schema.random_values(key_version, rng)
    key = key_schema.record(record_type, key_values, key_version)
    assert matches(decode_key(key), expected(key_schema, key_values)) == []
    tagged_seen = set()
    for version in versions(value_schema.schema["validVersions"]):
        for _ in range(25):
            values = value_schema.random_values(version, rng)
            value = value_schema.record(version, values, version)
            decoded = decode_value(record_type, value)
            assert matches(decoded, expected(value_schema, values)) == [], (version, values)
            assert decoded["trailing_bytes"] == 0 and "unknown_tags" not in decoded
            tagged_seen |= {f["name"] for f in value_schema.schema["fields"]
                            if "tag" in f and f["name"] in values}
            events = record_to_events(partition=0, offset=1, timestamp_ms=2, key=key, value=value)
            assert isinstance(events, list), events
            assert events[0].kind == KIND_BY_TYPE.get(record_type, events[0].kind)
        tombstone = record_to_events(partition=0, offset=1, timestamp_ms=2, key=key, value=None)
        assert isinstance(tombstone, list) and tombstone[0].data.get("tombstone", True)
    # every top-level tagged field of the release was written (and decoded by name) at least once
    assert tagged_seen == {f["name"] for f in value_schema.schema["fields"] if "tag" in f}
