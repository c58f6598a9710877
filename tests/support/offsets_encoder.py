"""Test-side writer of Kafka's primitive encodings and of `__consumer_offsets` keys and values,
written from Kafka's record schemas (not from streaming/offsets/decoder.py). `encode` is schema
driven: the schemas are tables given as data by the tests. Shared by the decoder tests, the
version tests, the property tests and the segment writer (segment_encoder.py)."""
from __future__ import annotations

import struct


def uvarint(n: int) -> bytes:
    """Unsigned base-128 varint (KIP-482; Kafka's varint/varlong after zigzag)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def string(x: str | None) -> bytes:
    """(nullable) string, int16 length."""
    if x is None:
        return struct.pack(">h", -1)
    b = x.encode()
    return struct.pack(">h", len(b)) + b


def nullable_bytes(x: bytes | None) -> bytes:
    """(nullable) bytes, int32 length."""
    return struct.pack(">i", -1) if x is None else struct.pack(">i", len(x)) + x


def compact(raw: bytes | None) -> bytes:
    """compact (nullable) string or bytes: uvarint length + 1, 0 for null."""
    return uvarint(0) if raw is None else uvarint(len(raw) + 1) + raw


def tagged_fields(tags: dict[int, bytes] | None = None) -> bytes:
    """The tagged-field section of a flexible struct: {tag: raw bytes}."""
    tags = tags or {}
    out = uvarint(len(tags))
    for tag in sorted(tags):
        out += uvarint(tag) + uvarint(len(tags[tag])) + tags[tag]
    return out


def encode(schema: list, values: dict, flexible: bool) -> bytes:
    """schema: [(name, type)], type one of int8/16/32/64, uuid, string, string?, bytes, bytes?,
    [type] (array), or a nested schema list inside [...] (array of structs). Flexible structs end
    with a tagged-field section taken from values["_tags"] ({tag: raw bytes})."""
    out = b""
    for name, typ in schema:
        out += _field(typ, values[name], flexible)
    if flexible:
        out += tagged_fields(values.get("_tags"))
    return out


def _field(typ, v, flexible: bool) -> bytes:
    if isinstance(typ, list):
        inner = typ[0]
        head = uvarint(len(v) + 1) if flexible else struct.pack(">i", len(v))
        if isinstance(inner, list):
            return head + b"".join(encode(inner, item, flexible) for item in v)
        return head + b"".join(_field(inner, item, flexible) for item in v)
    fixed = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q"}
    if typ in fixed:
        return struct.pack(fixed[typ], v)
    if typ == "uuid":
        return v
    if typ in ("string", "string?", "bytes", "bytes?"):
        assert v is not None or typ.endswith("?")
        text = typ.startswith("string")
        if flexible:
            return compact(v.encode() if text and v is not None else v)
        return string(v) if text else nullable_bytes(v)
    raise ValueError(typ)


def record(version: int, schema: list, values: dict, flexible: bool = False) -> bytes:
    """A key or value: the int16 version (record type for keys) and the encoded struct."""
    return struct.pack(">h", version) + encode(schema, values, flexible)
