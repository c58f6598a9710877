"""Kafka's own `__consumer_offsets` record schemas (the `*Key.json` / `*Value.json` message
definitions of group-coordinator/src/main/resources/common/message/) for each 4.x release, and a
test-side writer driven by them. The decoders are tested against bytes this module writes from
Kafka's definitions, not from the decoders' own idea of the layouts.

The schemas are kept in the repo as one extract (tests/fixtures/kafka-schemas/coordinator-records.json):
comments and "about" texts dropped, each distinct schema stored once with the releases that ship
it. It is written from the `kafka-group-coordinator` jars (sources jars, or the binary jar where no
sources jar is published: 4.2.2 and 4.4.0 carry the JSON files too):

    .venv/bin/python -m tests.support.kafka_schemas --write [--jars ~/.cache/rebalance-monitor/sources]
"""
from __future__ import annotations

import argparse
import base64
import json
import random
import re
import struct
import sys
import zipfile
from pathlib import Path
from typing import Any

from tests.support.offsets_encoder import compact, nullable_bytes, string, tagged_fields, uvarint

ROOT = Path(__file__).resolve().parents[2]
EXTRACT = ROOT / "tests" / "fixtures" / "kafka-schemas" / "coordinator-records.json"
RELEASES = ["4.0.2", "4.1.2", "4.2.1", "4.2.2", "4.3.1", "4.4.0"]
_JAR_NAMES = ["kafka-group-coordinator-{v}-sources.jar", "kafka-group-coordinator-{v}.jar"]


# --- the extract ----------------------------------------------------------------------------------

def _strip(x):
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k != "about"}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def _read_jar(path: Path) -> dict[str, dict]:
    out = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if re.fullmatch(r"common/message/\w+(Key|Value)\.json", name):
                text = re.sub(r"^\s*//.*$", "", z.read(name).decode(), flags=re.M)
                out[Path(name).stem] = _strip(json.loads(text))
    return out


def write_extract(jars: Path) -> dict:
    distinct: list[dict] = []
    by_release: dict[str, dict[str, int]] = {}
    sources: dict[str, str] = {}
    for v in RELEASES:
        jar = next((jars / v / n.format(v=v) for n in _JAR_NAMES if (jars / v / n.format(v=v)).exists()), None)
        if jar is None:
            raise SystemExit(f"no kafka-group-coordinator jar for {v} under {jars / v}")
        sources[v] = jar.name
        by_release[v] = {}
        for name, schema in sorted(_read_jar(jar).items()):
            if schema not in distinct:
                distinct.append(schema)
            by_release[v][name] = distinct.index(schema)
    doc = {"about": "Kafka's __consumer_offsets record schemas (group-coordinator common/message/*.json, "
                    "Apache License 2.0), comments and 'about' texts dropped; written by tests/support/kafka_schemas.py",
           "jars": sources, "releases": by_release, "schemas": distinct}
    EXTRACT.parent.mkdir(parents=True, exist_ok=True)
    EXTRACT.write_text(json.dumps(doc, indent=None, separators=(",", ":"), sort_keys=True) + "\n")
    return doc


def load() -> dict:
    return json.loads(EXTRACT.read_text())


def release_schemas(doc: dict, release: str) -> dict[str, dict]:
    return {name: doc["schemas"][i] for name, i in doc["releases"][release].items()}


# --- versions, types -------------------------------------------------------------------------------

def versions(spec: str | None) -> range:
    """Kafka's version ranges: "0", "0-3", "4+", "none"."""
    if spec is None or spec == "none":
        return range(0)
    if spec.endswith("+"):
        return range(int(spec[:-1]), 100)
    lo, _, hi = spec.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def record_types(key_schema: dict) -> list[int]:
    """The record type(s) of a key schema: apiKey (4.1+), else the key's versions (4.0: the key
    version is the record type)."""
    if "apiKey" in key_schema:
        return [key_schema["apiKey"]]
    return list(versions(key_schema["validVersions"]))


def _structs(schema: dict) -> dict[str, list]:
    out = {s["name"]: s["fields"] for s in schema.get("commonStructs", [])}

    def walk(fields):
        for f in fields:
            if "fields" in f:
                out[f["type"].removeprefix("[]")] = f["fields"]
                walk(f["fields"])
    walk(schema["fields"])
    for s in schema.get("commonStructs", []):
        walk(s["fields"])
    return out


def _field_versions(f: dict) -> str:
    """A field's versions; a tagged field may give only taggedVersions (StreamsGroupMetadataValue's
    LastAssignmentConfigs does)."""
    return f.get("versions") or f["taggedVersions"]


class Schema:
    """One message definition, writable at a version."""

    def __init__(self, schema: dict):
        self.schema = schema
        self.name = schema["name"]
        self.structs = _structs(schema)
        self.flexible = versions(schema.get("flexibleVersions"))

    # -- random values --
    def random_values(self, version: int, rng: random.Random, fields: list | None = None) -> dict:
        out: dict[str, Any] = {}
        for f in self.schema["fields"] if fields is None else fields:
            if version not in versions(_field_versions(f)):
                continue
            tagged = version in versions(f.get("taggedVersions"))
            if tagged and rng.random() < 0.35:
                continue                              # a tagged field left out
            if version in versions(f.get("nullableVersions")) and rng.random() < 0.25:
                out[f["name"]] = None
                continue
            out[f["name"]] = self._random(f["type"], version, rng)
        return out

    def _random(self, typ: str, version: int, rng: random.Random):
        if typ.startswith("[]"):
            return [self._random(typ[2:], version, rng) for _ in range(rng.randrange(4))]
        ints = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
        if typ in ints:
            b = ints[typ]
            return rng.choice([0, 1, -1, rng.randrange(-(1 << b), 1 << b)])
        if typ == "uint16":
            return rng.randrange(1 << 16)
        if typ == "uuid":
            return bytes(rng.randrange(256) for _ in range(16))
        if typ == "string":
            return "".join(rng.choice("abcxyz-._é0") for _ in range(rng.randrange(6)))
        if typ == "bytes":
            return bytes(rng.randrange(256) for _ in range(rng.randrange(5)))
        if typ == "bool":
            return rng.random() < 0.5
        return self.random_values(version, rng, self.structs[typ])

    # -- the writer --
    def encode(self, values: dict, version: int, fields: list | None = None) -> bytes:
        flexible = version in self.flexible
        out = b""
        tags = {}
        for f in self.schema["fields"] if fields is None else fields:
            if f["name"] not in values:
                continue
            v = values[f["name"]]
            if version in versions(f.get("taggedVersions")):
                tags[f["tag"]] = self._tagged(f, v, version)
            elif version in versions(_field_versions(f)):
                out += self._field(f["type"], v, version, flexible, nullable_struct=True)
        if flexible:
            out += tagged_fields(tags)
        return out

    def _tagged(self, f: dict, v, version: int) -> bytes:
        typ = f["type"]
        if typ in self.structs:                       # tagged nullable struct: uvarint marker
            return uvarint(0) if v is None else uvarint(1) + self.encode(v, version, self.structs[typ])
        return self._field(typ, v, version, True, nullable_struct=False)

    def _field(self, typ: str, v, version: int, flexible: bool, nullable_struct: bool) -> bytes:
        if typ.startswith("[]"):
            if v is None:
                return uvarint(0) if flexible else struct.pack(">i", -1)
            head = uvarint(len(v) + 1) if flexible else struct.pack(">i", len(v))
            return head + b"".join(self._field(typ[2:], x, version, flexible, False) for x in v)
        fixed = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H", "bool": ">?"}
        if typ in fixed:
            return struct.pack(fixed[typ], v)
        if typ == "uuid":
            return v
        if typ == "string":
            if flexible:
                return compact(None if v is None else v.encode())
            return string(v)
        if typ == "bytes":
            return compact(v) if flexible else nullable_bytes(v)
        if nullable_struct:                            # a nullable struct outside the tags: int8 marker
            if v is None:
                return struct.pack(">b", -1)
            return struct.pack(">b", 1) + self.encode(v, version, self.structs[typ])
        return self.encode(v, version, self.structs[typ])

    def record(self, prefix: int, values: dict, version: int) -> bytes:
        return struct.pack(">h", prefix) + self.encode(values, version)


# --- what the decoder should give -----------------------------------------------------------------

# Decoder names that are not the schema's name in snake_case: (struct name, field) -> key.
ALIASES = {("*", "GroupId"): "group", ("*", "PartitionMetadata"): "partition_racks",
           ("ConsumerGroupRegularExpressionValue", "Version"): "regex_version"}


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def uuid_str(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def expected(sch: Schema, values: dict, fields: list | None = None) -> dict:
    """The decoded dict's content for `values`: snake_case keys (ALIASES aside), uuids as Kafka
    prints them, bytes as their size (key + "_size"); absent tagged fields are absent."""
    out = {}
    for f in sch.schema["fields"] if fields is None else fields:
        if f["name"] not in values:
            continue
        key = ALIASES.get((sch.name, f["name"])) or ALIASES.get(("*", f["name"])) or snake(f["name"])
        v = values[f["name"]]
        if f["type"] == "bytes":
            out[key + "_size"] = None if v is None else len(v)
        else:
            out[key] = _expected_value(sch, f["type"], v)
    return out


def _expected_value(sch: Schema, typ: str, v):
    if v is None:
        return None
    if typ.startswith("[]"):
        return [_expected_value(sch, typ[2:], x) for x in v]
    if typ == "uuid":
        return uuid_str(v)
    if typ in sch.structs:
        return expected(sch, v, sch.structs[typ])
    return v


def matches(decoded, want, path: str = "") -> list[str]:
    """Differences where `decoded` does not hold `want` (extra decoded keys are allowed)."""
    if isinstance(want, dict):
        if not isinstance(decoded, dict):
            return [f"{path}: {decoded!r} is not a struct"]
        out = []
        for k, v in want.items():
            if k not in decoded:
                out.append(f"{path}.{k}: missing")
            else:
                out += matches(decoded[k], v, f"{path}.{k}")
        return out
    if isinstance(want, list):
        if not isinstance(decoded, list) or len(decoded) != len(want):
            return [f"{path}: {decoded!r} != {want!r}"]
        return [d for i, (a, b) in enumerate(zip(decoded, want)) for d in matches(a, b, f"{path}[{i}]")]
    return [] if decoded == want else [f"{path}: {decoded!r} != {want!r}"]


def main(argv: list | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--write", action="store_true", required=True)
    p.add_argument("--jars", default=str(Path.home() / ".cache" / "rebalance-monitor" / "sources"))
    args = p.parse_args(argv)
    doc = write_extract(Path(args.jars))
    print(f"{EXTRACT}: {len(doc['schemas'])} distinct schemas, releases {', '.join(doc['releases'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
