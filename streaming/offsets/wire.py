"""Kafka's wire primitives as `__consumer_offsets` records use them: a bounds-checked reader
whose errors name the schema field and the byte offset (Burrow style), and the varint reader
shared with the segment reader."""
from __future__ import annotations

import base64
import builtins
import struct
from collections.abc import Callable
from typing import Any, NoReturn

from streaming.offsets.records import RECORD_TYPE_NAMES

# --- errors --------------------------------------------------------------------------------------

class DecodeError(Exception):
    """A record could not be decoded. `field` is the schema path, `offset` the byte offset."""

    def __init__(self, field: str, offset: int, message: str):
        super().__init__(field, offset, message)
        self.field = field
        self.offset = offset
        self.message = message

    def __str__(self) -> str:
        return f"{self.field} at byte {self.offset}: {self.message}"


class UnknownRecordType(DecodeError):
    """Key type 18, >= 24 or negative: not a record type any Kafka release writes (up to 4.4)."""

    def __init__(self, record_type: int):
        super().__init__("key.type", 0, f"unknown record type {record_type}")
        self.record_type = record_type


class UnknownVersion(DecodeError):
    """A value version this decoder has no layout for, for a known record type."""

    def __init__(self, record_type: int, version: int):
        name = RECORD_TYPE_NAMES.get(record_type, f"type{record_type}")
        super().__init__(f"{name}Value.version", 0,
                         f"unknown value version {version} for record type {record_type}")
        self.record_type = record_type
        self.version = version


# --- binary reader -------------------------------------------------------------------------------

class VarintError(Exception):
    """read_uvarint failed: the varint starting at `start` is cut short or too long."""

    def __init__(self, start: int, truncated: bool, max_bytes: int):
        super().__init__(start, truncated, max_bytes)
        self.start, self.truncated, self.max_bytes = start, truncated, max_bytes

    def describe(self, kind: str) -> str:
        return f"truncated {kind}" if self.truncated else f"{kind} longer than {self.max_bytes} bytes"


def read_uvarint(buf: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Unsigned base-128 varint (Kafka's varint/varlong before zigzag, KIP-482's unsigned varint)
    in buf[pos:end], at most max_bytes long. Returns (value, position after it)."""
    start = pos
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise VarintError(start, True, max_bytes)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift >= 7 * max_bytes:
            raise VarintError(start, False, max_bytes)


_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _path_part(part: str | tuple) -> str:
    return part if isinstance(part, str) else f"{part[0]}[{part[1]}]"


class BinaryReader:
    """Big-endian reader over one key, value or embedded blob, with Kafka's primitive encodings.

    Every read takes the schema field name; on failure it raises DecodeError naming the full path
    (scope stack + field) and the byte offset where that field starts. The path is only built on
    failure, so the happy path pays nothing for it.
    """

    __slots__ = ("_scope", "buf", "end", "pos")

    def __init__(self, buf: bytes, root: str, start: int = 0, end: int | None = None):
        self.buf = buf
        self.pos = start
        self.end = len(buf) if end is None else end
        self._scope: list = [root]

    # -- scope / errors --
    def path(self, field: str | None = None) -> str:
        parts = [_path_part(p) for p in self._scope]
        if field:
            parts.append(field)
        return ".".join(parts)

    def push(self, part: str | tuple) -> None:
        self._scope.append(part)

    def pop(self) -> None:
        self._scope.pop()

    def fail(self, field: str, message: str, offset: int | None = None) -> NoReturn:
        raise DecodeError(self.path(field), self.pos if offset is None else offset, message)

    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int, field: str) -> int:
        """Reserve n bytes; return their start position."""
        p = self.pos
        if p + n > self.end:
            self.fail(field, f"needs {n} bytes, only {self.end - p} left")
        self.pos = p + n
        return p

    def _take_payload(self, n: int, field: str, field_start: int) -> int:
        """Reserve the n-byte payload of a length-prefixed field; errors point at the field start."""
        p = self.pos
        if p + n > self.end:
            self.fail(field, f"declared length {n} exceeds the {self.end - p} bytes left",
                      field_start)
        self.pos = p + n
        return p

    # -- fixed-width --
    def int8(self, field: str) -> int:
        return _I8.unpack_from(self.buf, self._take(1, field))[0]

    def int16(self, field: str) -> int:
        return _I16.unpack_from(self.buf, self._take(2, field))[0]

    def uint16(self, field: str) -> int:
        return _U16.unpack_from(self.buf, self._take(2, field))[0]

    def int32(self, field: str) -> int:
        return _I32.unpack_from(self.buf, self._take(4, field))[0]

    def int64(self, field: str) -> int:
        return _I64.unpack_from(self.buf, self._take(8, field))[0]

    def uuid(self, field: str) -> str:
        """16 bytes, rendered like Kafka's Uuid.toString(): base64url, no padding."""
        p = self._take(16, field)
        return base64.urlsafe_b64encode(self.buf[p:p + 16]).rstrip(b"=").decode("ascii")

    def uvarint(self, field: str) -> int:
        """Unsigned varint (KIP-482), at most 5 bytes (an unsigned int32)."""
        try:
            value, self.pos = read_uvarint(self.buf, self.pos, self.end, 5)
        except VarintError as e:
            self.fail(field, e.describe("unsigned varint"), e.start)
        return value

    # -- length-prefixed payloads --
    def _text(self, start: int, n: int, field: str) -> str:
        p = self._take_payload(n, field, start)
        try:
            return self.buf[p:p + n].decode("utf-8")
        except UnicodeDecodeError as e:
            self.fail(field, f"invalid UTF-8 ({e.reason})", start)

    def nullable_string(self, field: str) -> str | None:
        start = self.pos
        n = self.int16(field)
        if n == -1:
            return None
        if n < 0:
            self.fail(field, f"negative string length {n}", start)
        return self._text(start, n, field)

    def string(self, field: str) -> str:
        start = self.pos
        s = self.nullable_string(field)
        if s is None:
            self.fail(field, "non-nullable string is null", start)
        return s

    def compact_nullable_string(self, field: str) -> str | None:
        start = self.pos
        n = self.uvarint(field) - 1
        if n == -1:
            return None
        return self._text(start, n, field)

    def compact_string(self, field: str) -> str:
        start = self.pos
        s = self.compact_nullable_string(field)
        if s is None:
            self.fail(field, "non-nullable compact string is null", start)
        return s

    def nullable_bytes(self, field: str) -> bytes | None:
        start = self.pos
        n = self.int32(field)
        if n == -1:
            return None
        if n < 0:
            self.fail(field, f"negative bytes length {n}", start)
        p = self._take_payload(n, field, start)
        return self.buf[p:p + n]

    def bytes(self, field: str) -> builtins.bytes:
        start = self.pos
        b = self.nullable_bytes(field)
        if b is None:
            self.fail(field, "non-nullable bytes field is null", start)
        return b

    def compact_nullable_bytes(self, field: str) -> builtins.bytes | None:
        start = self.pos
        n = self.uvarint(field) - 1
        if n == -1:
            return None
        p = self._take_payload(n, field, start)
        return self.buf[p:p + n]

    def compact_bytes(self, field: str) -> builtins.bytes:
        start = self.pos
        b = self.compact_nullable_bytes(field)
        if b is None:
            self.fail(field, "non-nullable compact bytes field is null", start)
        return b

    # -- arrays --
    def _array_count(self, field: str, compact: bool, nullable: bool, min_size: int) -> int | None:
        start = self.pos
        n = (self.uvarint(field) - 1) if compact else self.int32(field)
        if n == -1:
            if nullable:
                return None
            self.fail(field, "non-nullable array is null", start)
        if n < 0:
            self.fail(field, f"negative array count {n}", start)
        # Refuse impossible counts before looping (a corrupt count could otherwise be huge).
        if n * min_size > self.end - self.pos:
            self.fail(field, f"array count {n} exceeds the {self.end - self.pos} bytes left", start)
        return n

    def array(self, field: str, read_element: Callable[[BinaryReader], Any], *,
              compact: bool = False, nullable: bool = False, min_size: int = 1) -> list | None:
        """`[]T`: int32 count (or compact uvarint count+1); each element read by read_element."""
        n = self._array_count(field, compact, nullable, min_size)
        if n is None:
            return None
        items = []
        scope = self._scope
        for i in range(n):
            scope.append((field, i))
            items.append(read_element(self))
            scope.pop()
        return items

    def compact_array(self, field: str, read_element: Callable[[BinaryReader], Any], *,
                      nullable: bool = False, min_size: int = 1) -> list | None:
        return self.array(field, read_element, compact=True, nullable=nullable, min_size=min_size)

    def int32_array(self, field: str, *, compact: bool = False) -> list[int]:
        """`[]int32` in one unpack (partition lists are the bulk of assignment records)."""
        start = self.pos
        n = self._array_count(field, compact, False, 4) or 0   # not nullable: never None
        p = self._take_payload(4 * n, field, start)
        return list(struct.unpack_from(f">{n}i", self.buf, p))

    def nullable_int32_array(self, field: str, *, compact: bool = False) -> list[int] | None:
        start = self.pos
        n = self._array_count(field, compact, True, 4)
        if n is None:
            return None
        p = self._take_payload(4 * n, field, start)
        return list(struct.unpack_from(f">{n}i", self.buf, p))

    def string_array(self, field: str, *, compact: bool = False) -> list[str]:
        n = self._array_count(field, compact, False, 1 if compact else 2) or 0   # not nullable
        read = self.compact_string if compact else self.string
        items = []
        for i in range(n):
            items.append(read(f"{field}[{i}]"))
        return items

    # -- tagged fields (flexible versions) --
    def tagged_fields(self, handlers: dict[int, tuple[str, Callable[[BinaryReader], None]]] | None = None
                      ) -> list[int]:
        """Read a tagged-field section. Known tags go to handlers {tag: (name, fn(reader))}, each
        confined to the tag's declared size; unknown tags are skipped. Returns the unknown tags."""
        unknown: list[int] = []
        n = self.uvarint("_tagged_fields")
        for _ in range(n):
            tag = self.uvarint("_tagged_fields.tag")
            size_at = self.pos
            size = self.uvarint(f"_tagged_fields[tag {tag}].size")
            if size > self.end - self.pos:
                self.fail(f"_tagged_fields[tag {tag}]",
                          f"tag size {size} exceeds the {self.end - self.pos} bytes left", size_at)
            stop = self.pos + size
            handler = handlers.get(tag) if handlers else None
            if handler is None:
                unknown.append(tag)
            else:
                name, read = handler
                saved_end = self.end
                self.end = stop
                self._scope.append(name)
                try:
                    read(self)
                finally:
                    self._scope.pop()
                    self.end = saved_end
            self.pos = stop  # a handler may read less than the tag holds (newer layout): skip the rest
        return unknown

    def skip_tagged_fields(self) -> None:
        self.tagged_fields(None)

