"""Decoder for `__consumer_offsets` records (Kafka 0.9 - 4.1 layouts) into `state.events.Event`s.

Pure Python + stdlib. Layouts follow shared/docs/kafka-formats.md section 4 and Kafka's
`group-coordinator/src/main/resources/common/message/*.json` schemas:

* The key's int16 prefix is the record type (0/1 OffsetCommit, 2 GroupMetadata, 3-8 and 16 KIP-848
  consumer groups, 9-15 share groups, 17 and 19-23 streams groups). Keys are never flexible.
* The value's int16 prefix is the value version. A null value is a tombstone.

One decoder function per record version (Burrow style), all reading through `BinaryReader`.
Decoded dicts use snake_case keys and contain only JSON-serialisable values: raw bytes are
omitted (their sizes are kept, e.g. `subscription_size`). Topic ids (uuid) are rendered the way
Kafka prints them (`Uuid.toString()`, as in `kafka-topics.sh --describe`): URL-safe base64 of the 16
bytes without padding, 22 characters.

Error paths use Kafka's own schema field names (e.g. `GroupMetadataValue.members[1].clientHost`), so a
quarantine detail can be looked up in the schema directly. Byte offsets count from the first byte of
the key or value (the int16 version prefix is byte 0); for embedded ConsumerProtocol bytes they count
from the first byte of that embedded blob.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import struct
from typing import Any, Callable, Iterator, NoReturn, Optional, Union

from state.events import (
    CG_EPOCH, CG_MEMBER, CG_MEMBER_ASSIGNMENT, CG_OTHER, CG_TARGET_EPOCH, CG_TARGET_MEMBER,
    GROUP_METADATA, GROUP_TOMBSTONE, OFFSET_COMMIT, OFFSET_TOMBSTONE, SOURCE_OFFSETS, Event,
)
from streaming.quarantine import Quarantined

__all__ = [
    "DecodeError", "UnknownRecordType", "UnknownVersion", "BinaryReader",
    "RECORD_TYPE_NAMES", "MEMBER_STATE_NAMES",
    "decode_key", "decode_value", "decode_record", "record_to_events", "iter_jsonl_dump",
    "decode_consumer_subscription", "decode_consumer_assignment",
]

RAW_LIMIT = 2000  # Quarantined.raw is truncated to this many characters

# Record type (= key version) -> record name. Key struct is name + "Key", value struct name + "Value".
RECORD_TYPE_NAMES: dict[int, str] = {
    0: "OffsetCommit",  # written only by <= 0.9 brokers; 4.1 calls it LegacyOffsetCommit
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    9: "ShareGroupPartitionMetadata",
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
    17: "StreamsGroupMetadata",
    # 18 was allocated during development and never shipped: treated as unknown.
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
}
# Share and streams values changed between early-access releases; they are recognised, not decoded.
UNDECODED_TYPES = frozenset({9, 10, 11, 12, 13, 14, 15, 17, 19, 20, 21, 22, 23})
# Key types whose key is (GroupId, MemberId); all other >= 3 types except 16 are (GroupId).
_MEMBER_KEY_TYPES = frozenset({5, 7, 8, 10, 13, 14, 19, 21, 22})

MEMBER_STATE_NAMES = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS",
                      127: "UNKNOWN"}


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
    """Key type 18, >= 24 or negative: not a record type any Kafka release writes (up to 4.1)."""

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
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _path_part(part: Union[str, tuple]) -> str:
    return part if isinstance(part, str) else f"{part[0]}[{part[1]}]"


class BinaryReader:
    """Big-endian reader over one key, value or embedded blob, with Kafka's primitive encodings.

    Every read takes the schema field name; on failure it raises DecodeError naming the full path
    (scope stack + field) and the byte offset where that field starts. The path is only built on
    failure, so the happy path pays nothing for it.
    """

    __slots__ = ("buf", "pos", "end", "_scope")

    def __init__(self, buf: bytes, root: str, start: int = 0, end: Optional[int] = None):
        self.buf = buf
        self.pos = start
        self.end = len(buf) if end is None else end
        self._scope: list = [root]

    # -- scope / errors --
    def path(self, field: Optional[str] = None) -> str:
        parts = [_path_part(p) for p in self._scope]
        if field:
            parts.append(field)
        return ".".join(parts)

    def push(self, part: Union[str, tuple]) -> None:
        self._scope.append(part)

    def pop(self) -> None:
        self._scope.pop()

    def fail(self, field: str, message: str, offset: Optional[int] = None) -> NoReturn:
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

    def nullable_string(self, field: str) -> Optional[str]:
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

    def compact_nullable_string(self, field: str) -> Optional[str]:
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

    def nullable_bytes(self, field: str) -> Optional[bytes]:
        start = self.pos
        n = self.int32(field)
        if n == -1:
            return None
        if n < 0:
            self.fail(field, f"negative bytes length {n}", start)
        p = self._take_payload(n, field, start)
        return self.buf[p:p + n]

    def bytes(self, field: str) -> bytes:
        start = self.pos
        b = self.nullable_bytes(field)
        if b is None:
            self.fail(field, "non-nullable bytes field is null", start)
        return b

    def compact_nullable_bytes(self, field: str) -> Optional[bytes]:
        start = self.pos
        n = self.uvarint(field) - 1
        if n == -1:
            return None
        p = self._take_payload(n, field, start)
        return self.buf[p:p + n]

    def compact_bytes(self, field: str) -> bytes:
        start = self.pos
        b = self.compact_nullable_bytes(field)
        if b is None:
            self.fail(field, "non-nullable compact bytes field is null", start)
        return b

    # -- arrays --
    def _array_count(self, field: str, compact: bool, nullable: bool, min_size: int) -> Optional[int]:
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

    def array(self, field: str, read_element: Callable[["BinaryReader"], Any], *,
              compact: bool = False, nullable: bool = False, min_size: int = 1) -> Optional[list]:
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

    def compact_array(self, field: str, read_element: Callable[["BinaryReader"], Any], *,
                      nullable: bool = False, min_size: int = 1) -> Optional[list]:
        return self.array(field, read_element, compact=True, nullable=nullable, min_size=min_size)

    def int32_array(self, field: str, *, compact: bool = False) -> list[int]:
        """`[]int32` in one unpack (partition lists are the bulk of assignment records)."""
        start = self.pos
        n = self._array_count(field, compact, False, 4)
        p = self._take_payload(4 * n, field, start)
        return list(struct.unpack_from(f">{n}i", self.buf, p))

    def string_array(self, field: str, *, compact: bool = False) -> list[str]:
        n = self._array_count(field, compact, False, 1 if compact else 2)
        read = self.compact_string if compact else self.string
        items = []
        for i in range(n):
            items.append(read(f"{field}[{i}]"))
        return items

    # -- tagged fields (flexible versions) --
    def tagged_fields(self, handlers: Optional[dict[int, tuple[str, Callable[["BinaryReader"], None]]]] = None
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


# --- keys ----------------------------------------------------------------------------------------

def _offset_commit_key(r: BinaryReader) -> dict:
    return {"group": r.string("group"), "topic": r.string("topic"), "partition": r.int32("partition")}


def _group_metadata_key(r: BinaryReader) -> dict:
    return {"group": r.string("group")}


def _group_id_key(r: BinaryReader) -> dict:
    return {"group": r.string("GroupId")}


def _group_member_key(r: BinaryReader) -> dict:
    return {"group": r.string("GroupId"), "member_id": r.string("MemberId")}


def _regular_expression_key(r: BinaryReader) -> dict:
    return {"group": r.string("GroupId"), "regular_expression": r.string("RegularExpression")}


def _key_decoder(record_type: int) -> Callable[[BinaryReader], dict]:
    if record_type in (0, 1):
        return _offset_commit_key
    if record_type == 2:
        return _group_metadata_key
    if record_type == 16:
        return _regular_expression_key
    if record_type in _MEMBER_KEY_TYPES:
        return _group_member_key
    return _group_id_key


def decode_key(key: bytes) -> dict:
    """{"type", "type_name", "group", + topic/partition, member_id or regular_expression}."""
    if key is None:
        raise DecodeError("key", 0, "record key is null")
    if len(key) < 2:
        raise DecodeError("key.type", 0, f"needs 2 bytes, only {len(key)} left")
    record_type = _I16.unpack_from(key, 0)[0]
    name = RECORD_TYPE_NAMES.get(record_type)
    if name is None:
        raise UnknownRecordType(record_type)
    r = BinaryReader(key, f"{name}Key", start=2)
    out = {"type": record_type, "type_name": name}
    out.update(_key_decoder(record_type)(r))
    if r.remaining():
        out["trailing_bytes"] = r.remaining()
    return out


# --- embedded ConsumerProtocol (classic "consumer" protocol type) ---------------------------------

def _topic_partitions_classic(r: BinaryReader) -> dict:
    return {"topic": r.string("topic"), "partitions": r.int32_array("partitions")}


def decode_consumer_subscription(data: bytes, root: str = "ConsumerProtocolSubscription") -> dict:
    """ConsumerProtocolSubscription v0-v3 (non-flexible). Versions > 3 are read with the v3 layout
    (Kafka's forward-compatibility rule); extra trailing bytes are ignored."""
    r = BinaryReader(data, root)
    version = r.int16("version")
    if version < 0:
        r.fail("version", f"negative version {version}", 0)
    out: dict = {"version": version, "topics": r.string_array("topics")}
    user_data = r.nullable_bytes("userData")
    out["user_data_size"] = None if user_data is None else len(user_data)
    if version >= 1:
        out["owned_partitions"] = r.array("ownedPartitions", _topic_partitions_classic, min_size=6)
    if version >= 2:
        out["generation_id"] = r.int32("generationId")
    if version >= 3:
        out["rack_id"] = r.nullable_string("rackId")
    return out


def decode_consumer_assignment(data: bytes, root: str = "ConsumerProtocolAssignment") -> dict:
    """ConsumerProtocolAssignment v0-v3 (same layout in every version)."""
    r = BinaryReader(data, root)
    version = r.int16("version")
    if version < 0:
        r.fail("version", f"negative version {version}", 0)
    partitions = r.array("assignedPartitions", _topic_partitions_classic, min_size=6)
    user_data = r.nullable_bytes("userData")
    return {"version": version, "assigned_partitions": partitions,
            "user_data_size": None if user_data is None else len(user_data)}


def _count_partitions(topic_partitions: Optional[list]) -> int:
    return sum(len(tp["partitions"]) for tp in topic_partitions or ())


def _decode_embedded(member: dict, name: str, data: bytes, path: str) -> None:
    """Decode embedded subscription/assignment bytes into member[name]; a failure is recorded as
    member[name + "_error"] and never fails the enclosing record (the blob is client-written)."""
    if not data:
        # An empty blob carries nothing (e.g. no assignment handed out yet); not an error.
        member[name] = None
        return
    try:
        if name == "subscription":
            member[name] = decode_consumer_subscription(data, path)
        else:
            member[name] = decode_consumer_assignment(data, path)
    except DecodeError as e:
        member[name] = None
        member[name + "_error"] = f"{e} (offset within the embedded {name} bytes)"


# --- OffsetCommitValue (types 0/1) ----------------------------------------------------------------

def _offset_commit_value_v0(r: BinaryReader) -> dict:
    return {"offset": r.int64("offset"), "metadata": r.string("metadata"),
            "commit_timestamp": r.int64("commitTimestamp")}


def _offset_commit_value_v1(r: BinaryReader) -> dict:
    return {"offset": r.int64("offset"), "metadata": r.string("metadata"),
            "commit_timestamp": r.int64("commitTimestamp"),
            "expire_timestamp": r.int64("expireTimestamp")}


def _offset_commit_value_v2(r: BinaryReader) -> dict:
    # v2 dropped expireTimestamp again (KIP-211): same fields as v0.
    return _offset_commit_value_v0(r)


def _offset_commit_value_v3(r: BinaryReader) -> dict:
    return {"offset": r.int64("offset"), "leader_epoch": r.int32("leaderEpoch"),
            "metadata": r.string("metadata"), "commit_timestamp": r.int64("commitTimestamp")}


def _offset_commit_value_v4(r: BinaryReader) -> dict:
    out = {"offset": r.int64("offset"), "leader_epoch": r.int32("leaderEpoch"),
           "metadata": r.compact_string("metadata"),
           "commit_timestamp": r.int64("commitTimestamp")}

    def topic_id(tr: BinaryReader) -> None:  # 4.1+ (KAFKA-19141)
        out["topic_id"] = tr.uuid("topicId")

    _top_level_tags(r, out, {0: ("topicId", topic_id)})
    return out


def _top_level_tags(r: BinaryReader, out: dict, handlers: Optional[dict] = None) -> None:
    unknown = r.tagged_fields(handlers)
    if unknown:
        out["unknown_tags"] = unknown


# --- GroupMetadataValue (type 2) ------------------------------------------------------------------

def _group_member(r: BinaryReader, version: int, decode_embedded: bool) -> dict:
    """MemberMetadata: v0 base; v1 adds rebalanceTimeout; v3 adds groupInstanceId; v4 flexible."""
    flexible = version >= 4
    string = r.compact_string if flexible else r.string
    nullable_string = r.compact_nullable_string if flexible else r.nullable_string
    read_bytes = r.compact_bytes if flexible else r.bytes
    m: dict = {"member_id": string("memberId")}
    m["group_instance_id"] = nullable_string("groupInstanceId") if version >= 3 else None
    m["client_id"] = string("clientId")
    m["client_host"] = string("clientHost")
    m["rebalance_timeout"] = r.int32("rebalanceTimeout") if version >= 1 else None
    m["session_timeout"] = r.int32("sessionTimeout")
    subscription = read_bytes("subscription")
    assignment = read_bytes("assignment")
    if flexible:
        r.skip_tagged_fields()
    m["subscription_size"] = len(subscription)
    m["assignment_size"] = len(assignment)
    if decode_embedded:
        path = r.path()
        _decode_embedded(m, "subscription", subscription, path + ".subscription")
        _decode_embedded(m, "assignment", assignment, path + ".assignment")
    return m


def _group_metadata_common(r: BinaryReader, version: int) -> dict:
    flexible = version >= 4
    string = r.compact_string if flexible else r.string
    nullable_string = r.compact_nullable_string if flexible else r.nullable_string
    out: dict = {"protocol_type": string("protocolType"), "generation": r.int32("generation"),
                 "protocol": nullable_string("protocol"), "leader": nullable_string("leader")}
    out["current_state_timestamp"] = r.int64("currentStateTimestamp") if version >= 2 else None
    decode_embedded = out["protocol_type"] == "consumer"
    out["members"] = r.array("members", lambda mr: _group_member(mr, version, decode_embedded),
                             compact=flexible, min_size=10)
    if flexible:
        _top_level_tags(r, out)
    return out


def _group_metadata_value_v0(r: BinaryReader) -> dict:
    return _group_metadata_common(r, 0)


def _group_metadata_value_v1(r: BinaryReader) -> dict:
    return _group_metadata_common(r, 1)   # members gain rebalanceTimeout


def _group_metadata_value_v2(r: BinaryReader) -> dict:
    return _group_metadata_common(r, 2)   # adds currentStateTimestamp


def _group_metadata_value_v3(r: BinaryReader) -> dict:
    return _group_metadata_common(r, 3)   # members gain groupInstanceId


def _group_metadata_value_v4(r: BinaryReader) -> dict:
    return _group_metadata_common(r, 4)   # v3 fields, flexible encoding (read-only in Kafka)


# --- KIP-848 consumer-group values (4.0 layouts; all flexible, version 0) -------------------------

def _cg_topic_partitions(r: BinaryReader) -> dict:
    tp = {"topic_id": r.uuid("TopicId"), "partitions": r.int32_array("Partitions", compact=True)}
    r.skip_tagged_fields()  # 4.2+ may carry tag 0 AssignmentEpochs
    return tp


def _consumer_group_metadata_value_v0(r: BinaryReader) -> dict:
    out = {"epoch": r.int32("Epoch")}

    def metadata_hash(tr: BinaryReader) -> None:  # 4.1+ (KIP-1101)
        out["metadata_hash"] = tr.int64("MetadataHash")

    _top_level_tags(r, out, {0: ("MetadataHash", metadata_hash)})
    return out


def _consumer_group_partition_metadata_value_v0(r: BinaryReader) -> dict:
    def partition_racks(pr: BinaryReader) -> dict:
        p = {"partition": pr.int32("Partition"), "racks": pr.string_array("Racks", compact=True)}
        pr.skip_tagged_fields()
        return p

    def topic(tr: BinaryReader) -> dict:
        t = {"topic_id": tr.uuid("TopicId"), "topic_name": tr.compact_string("TopicName"),
             "num_partitions": tr.int32("NumPartitions"),
             "partition_racks": tr.compact_array("PartitionMetadata", partition_racks, min_size=6)}
        tr.skip_tagged_fields()
        return t

    out = {"topics": r.compact_array("Topics", topic, min_size=23)}
    _top_level_tags(r, out)
    return out


def _classic_member_metadata(r: BinaryReader) -> Optional[dict]:
    """Tag 0 of ConsumerGroupMemberMetadataValue: a nullable tagged struct, written as an unsigned
    varint presence marker (0 = null, 1 = present) followed by the struct."""
    marker_at = r.pos
    marker = r.uvarint("present")
    if marker == 0:
        return None
    if marker != 1:
        r.fail("present", f"unexpected nullable-struct marker {marker}", marker_at)

    def protocol(pr: BinaryReader) -> dict:
        p: dict = {"name": pr.compact_string("Name")}
        metadata = pr.compact_bytes("Metadata")
        pr.skip_tagged_fields()
        p["metadata_size"] = len(metadata)
        # Metadata is the classic member's ConsumerProtocolSubscription for that assignor.
        _decode_embedded(p, "subscription", metadata, pr.path("Metadata"))
        return p

    cm = {"session_timeout_ms": r.int32("SessionTimeoutMs"),
          "supported_protocols": r.compact_array("SupportedProtocols", protocol, min_size=3)}
    r.skip_tagged_fields()
    return cm


def _consumer_group_member_metadata_value_v0(r: BinaryReader) -> dict:
    out = {"instance_id": r.compact_nullable_string("InstanceId"),
           "rack_id": r.compact_nullable_string("RackId"),
           "client_id": r.compact_string("ClientId"),
           "client_host": r.compact_string("ClientHost"),
           "subscribed_topic_names": r.string_array("SubscribedTopicNames", compact=True),
           "subscribed_topic_regex": r.compact_nullable_string("SubscribedTopicRegex"),
           "rebalance_timeout_ms": r.int32("RebalanceTimeoutMs"),
           "server_assignor": r.compact_nullable_string("ServerAssignor"),
           "classic_member_metadata": None}

    def classic(tr: BinaryReader) -> None:
        out["classic_member_metadata"] = _classic_member_metadata(tr)

    _top_level_tags(r, out, {0: ("ClassicMemberMetadata", classic)})
    return out


def _consumer_group_target_assignment_metadata_value_v0(r: BinaryReader) -> dict:
    out = {"assignment_epoch": r.int32("AssignmentEpoch")}
    _top_level_tags(r, out)
    return out


def _consumer_group_target_assignment_member_value_v0(r: BinaryReader) -> dict:
    out = {"topic_partitions": r.compact_array("TopicPartitions", _cg_topic_partitions, min_size=18)}
    _top_level_tags(r, out)
    return out


def _consumer_group_current_member_assignment_value_v0(r: BinaryReader) -> dict:
    out: dict = {"member_epoch": r.int32("MemberEpoch"),
                 "previous_member_epoch": r.int32("PreviousMemberEpoch"),
                 "state": r.int8("State")}
    out["state_name"] = MEMBER_STATE_NAMES.get(out["state"], "UNKNOWN")
    out["assigned_partitions"] = r.compact_array("AssignedPartitions", _cg_topic_partitions,
                                                 min_size=18)
    out["partitions_pending_revocation"] = r.compact_array("PartitionsPendingRevocation",
                                                           _cg_topic_partitions, min_size=18)
    _top_level_tags(r, out)
    return out


def _consumer_group_regular_expression_value_v0(r: BinaryReader) -> dict:
    out = {"topics": r.string_array("Topics", compact=True),
           "regex_version": r.int64("Version"), "timestamp": r.int64("Timestamp")}
    _top_level_tags(r, out)
    return out


_OFFSET_COMMIT_VALUES = {0: _offset_commit_value_v0, 1: _offset_commit_value_v1,
                         2: _offset_commit_value_v2, 3: _offset_commit_value_v3,
                         4: _offset_commit_value_v4}
VALUE_DECODERS: dict[int, dict[int, Callable[[BinaryReader], dict]]] = {
    0: _OFFSET_COMMIT_VALUES,
    1: _OFFSET_COMMIT_VALUES,
    2: {0: _group_metadata_value_v0, 1: _group_metadata_value_v1, 2: _group_metadata_value_v2,
        3: _group_metadata_value_v3, 4: _group_metadata_value_v4},
    3: {0: _consumer_group_metadata_value_v0},
    4: {0: _consumer_group_partition_metadata_value_v0},
    5: {0: _consumer_group_member_metadata_value_v0},
    6: {0: _consumer_group_target_assignment_metadata_value_v0},
    7: {0: _consumer_group_target_assignment_member_value_v0},
    8: {0: _consumer_group_current_member_assignment_value_v0},
    16: {0: _consumer_group_regular_expression_value_v0},
}


def decode_value(key_type: int, value: bytes) -> dict:
    """{"version": v, ...fields, "trailing_bytes": n}. Share/streams values: {"version", "undecoded":
    True, "size"}. Raises UnknownRecordType, UnknownVersion or DecodeError."""
    name = RECORD_TYPE_NAMES.get(key_type)
    if name is None:
        raise UnknownRecordType(key_type)
    if value is None:
        raise DecodeError(f"{name}Value", 0, "value is null (tombstone); nothing to decode")
    if len(value) < 2:
        raise DecodeError(f"{name}Value.version", 0, f"needs 2 bytes, only {len(value)} left")
    version = _I16.unpack_from(value, 0)[0]
    if version < 0:
        raise UnknownVersion(key_type, version)
    if key_type in UNDECODED_TYPES:
        return {"version": version, "undecoded": True, "size": len(value)}
    decoder = VALUE_DECODERS[key_type].get(version)
    if decoder is None:
        raise UnknownVersion(key_type, version)
    r = BinaryReader(value, f"{name}Value", start=2)
    out = {"version": version}
    out.update(decoder(r))
    out["trailing_bytes"] = r.remaining()  # tolerated: newer writers may append fields
    return out


def decode_record(key: Optional[bytes], value: Optional[bytes]) -> dict:
    """{"key": decoded key, "value": decoded value or None, "tombstone": bool}; JSON-serialisable.
    Raises DecodeError (or a subclass) when the key is null or either part cannot be decoded."""
    k = decode_key(key)
    if value is None:
        return {"key": k, "value": None, "tombstone": True}
    return {"key": k, "value": decode_value(k["type"], value), "tombstone": False}


# --- records -> events ----------------------------------------------------------------------------

def _b64(b: Optional[bytes]) -> str:
    return "" if b is None else base64.b64encode(b).decode("ascii")


def _raw(key: Optional[bytes], value: Optional[bytes]) -> str:
    return (_b64(key) + "|" + _b64(value))[:RAW_LIMIT]


def _group_metadata_data(v: dict) -> dict:
    members = []
    for m in v["members"]:
        assignment = m.get("assignment")
        if assignment is not None:
            assigned: Optional[int] = _count_partitions(assignment["assigned_partitions"])
        elif "assignment" in m and "assignment_error" not in m:
            assigned = 0  # consumer protocol, empty assignment blob: no partitions
        else:
            assigned = None  # not the consumer protocol, or undecodable
        em = {"member_id": m["member_id"], "group_instance_id": m["group_instance_id"],
              "client_id": m["client_id"], "client_host": m["client_host"],
              "session_timeout_ms": m["session_timeout"],
              "rebalance_timeout_ms": m["rebalance_timeout"],
              "assigned_partitions": assigned,
              "partitions": None if assignment is None else sorted(
                  f"{tp['topic']}:{p}" for tp in assignment["assigned_partitions"] for p in tp["partitions"])}
        sub = m.get("subscription")
        if sub is not None:
            # ConsumerProtocolSubscription: topics (v0+), owned partitions (v1+, cooperative),
            # the member's generation (v2+, -1 = unknown) and rack (v3+).
            em["topics"] = sub["topics"]
            owned = sub.get("owned_partitions")
            em["owned_partitions"] = None if owned is None else _count_partitions(owned)
            gen = sub.get("generation_id")
            em["member_generation"] = None if gen is None or gen < 0 else gen
            em["rack_id"] = sub.get("rack_id")
        if assignment is not None:
            em["assigned_topics"] = sorted({tp["topic"] for tp in assignment["assigned_partitions"]})
        for err in ("subscription_error", "assignment_error"):
            if err in m:
                em[err] = m[err]
        members.append(em)
    ts = v["current_state_timestamp"]
    return {"protocol_type": v["protocol_type"], "protocol": v["protocol"], "leader": v["leader"],
            "current_state_ts_ms": None if ts is None or ts == -1 else ts,
            "members": members, "value_version": v["version"]}


def _event_fields(k: dict, v: Optional[dict]) -> tuple[str, Optional[int], Optional[str], dict]:
    """(kind, generation, member_id, data) for one decoded record."""
    t = k["type"]
    tomb = v is None
    if t in (0, 1):
        if tomb:
            return OFFSET_TOMBSTONE, None, None, {"topic": k["topic"], "partition": k["partition"]}
        return OFFSET_COMMIT, None, None, {
            "topic": k["topic"], "partition": k["partition"], "offset": v["offset"],
            "commit_ts_ms": v["commit_timestamp"], "count": 1}
    if t == 2:
        if tomb:
            return GROUP_TOMBSTONE, None, None, {}
        return GROUP_METADATA, v["generation"], None, _group_metadata_data(v)
    member_id = k.get("member_id")
    if t == 3:
        data: dict = {"tombstone": tomb}
        if not tomb and "metadata_hash" in v:
            data["metadata_hash"] = v["metadata_hash"]
        return CG_EPOCH, None if tomb else v["epoch"], None, data
    if t == 5:
        if tomb:
            return CG_MEMBER, None, member_id, {"tombstone": True}
        classic = v["classic_member_metadata"]
        return CG_MEMBER, None, member_id, {
            "client_id": v["client_id"], "client_host": v["client_host"],
            "instance_id": v["instance_id"], "rack_id": v["rack_id"],
            "rebalance_timeout_ms": v["rebalance_timeout_ms"],
            "subscribed_topics": v["subscribed_topic_names"],
            "classic": classic is not None,
            "session_timeout_ms": classic["session_timeout_ms"] if classic else None,
            "tombstone": False}
    if t == 6:
        return CG_TARGET_EPOCH, None if tomb else v["assignment_epoch"], None, {"tombstone": tomb}
    if t == 7:
        if tomb:
            return CG_TARGET_MEMBER, None, member_id, {"tombstone": True}
        return CG_TARGET_MEMBER, None, member_id, {
            "partitions": _count_partitions(v["topic_partitions"]), "tombstone": False}
    if t == 8:
        if tomb:
            return CG_MEMBER_ASSIGNMENT, None, member_id, {"tombstone": True}
        return CG_MEMBER_ASSIGNMENT, None, member_id, {
            "member_epoch": v["member_epoch"], "previous_member_epoch": v["previous_member_epoch"],
            "state": v["state"], "state_name": v["state_name"],
            "assigned": _count_partitions(v["assigned_partitions"]),
            "pending_revocation": _count_partitions(v["partitions_pending_revocation"]),
            "tombstone": False}
    # 4 (partition metadata), 16 (regex), share and streams records
    return CG_OTHER, None, member_id, {"type": t, "type_name": k["type_name"], "tombstone": tomb}


def record_to_events(*, partition: int, offset: int, timestamp_ms: int, key: Optional[bytes],
                     value: Optional[bytes], source_id: Optional[str] = None
                     ) -> Union[list[Event], Quarantined]:
    """One `__consumer_offsets` record -> [Event], or Quarantined when it cannot be used.
    Never raises."""
    sid = source_id if source_id is not None else f"__consumer_offsets-{partition}"

    def quarantine(reason: str, detail: str) -> Quarantined:
        return Quarantined(source=SOURCE_OFFSETS, source_id=sid, seq=offset, reason=reason,
                           detail=detail, raw=_raw(key, value), ts_ms=timestamp_ms)

    if key is None:
        return quarantine("null_key", "record key is null")
    try:
        rec = decode_record(key, value)
        kind, generation, member_id, data = _event_fields(rec["key"], rec["value"])
    except UnknownRecordType as e:
        return quarantine("unknown_record_type", str(e))
    except UnknownVersion as e:
        return quarantine("unknown_value_version", str(e))
    except DecodeError as e:
        return quarantine("corrupt_record", str(e))
    except Exception as e:  # a decoder bug must not stop the stream; keep the record for replay
        return quarantine("corrupt_record", f"internal decoder error: {type(e).__name__}: {e}")
    v = rec["value"]
    if v is not None and v.get("trailing_bytes"):
        data["trailing_bytes"] = v["trailing_bytes"]
    return [Event(group=rec["key"]["group"], ts_ms=timestamp_ms, source=SOURCE_OFFSETS,
                  source_id=sid, seq=offset, kind=kind, generation=generation,
                  member_id=member_id, data=data)]


# --- JSONL dump reader ----------------------------------------------------------------------------

_DUMP_INT_FIELDS = ("partition", "offset", "timestamp")


def _b64_field(obj: dict, name: str) -> Optional[bytes]:
    raw = obj[name]
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ValueError(f"{name} is {type(raw).__name__}, expected a base64 string or null")
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"{name} is not valid base64: {e}") from None


def parse_dump_line(text: str) -> dict:
    obj = json.loads(text)
    if not isinstance(obj, dict):
        raise ValueError(f"line is a JSON {type(obj).__name__}, expected an object")
    missing = [f for f in (*_DUMP_INT_FIELDS, "key_b64", "value_b64") if f not in obj]
    if missing:
        raise ValueError(f"missing field(s): {', '.join(missing)}")
    out: dict = {}
    for f in _DUMP_INT_FIELDS:
        v = obj[f]
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{f} is {v!r}, expected an integer")
        out[f] = v
    out["key"] = _b64_field(obj, "key_b64")
    out["value"] = _b64_field(obj, "value_b64")
    return out


def iter_jsonl_dump(path: str) -> Iterator[tuple[int, Union[dict, Quarantined]]]:
    """Yield (line_number, {"partition", "offset", "timestamp", "key", "value"}) per line of an
    offsets-topic JSONL dump (key/value as bytes or None). A bad line yields a Quarantined with
    reason "malformed_dump_line" instead; blank lines are skipped. Never raises on content."""
    sid = os.path.basename(path)
    with open(path, "rb") as f:
        for line_number, raw_line in enumerate(f, start=1):
            if not raw_line.strip():
                continue
            text = ""
            try:
                text = raw_line.decode("utf-8")
                rec = parse_dump_line(text)
            except Exception as e:  # bad UTF-8/JSON/base64/fields; RecursionError on deep nesting
                if not text:
                    text = raw_line.decode("utf-8", errors="replace")
                yield line_number, Quarantined(
                    source=SOURCE_OFFSETS, source_id=sid, seq=line_number,
                    reason="malformed_dump_line", detail=f"{type(e).__name__}: {e}",
                    raw=text.rstrip("\r\n")[:RAW_LIMIT], ts_ms=None)
                continue
            yield line_number, rec
