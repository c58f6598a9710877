"""Structs shared by the flexible (KIP-848 family) `__consumer_offsets` values of consumer, share and
streams groups: topic partitions, streams task ids, key/value pairs, topic metadata, and the
top-level tagged-field section. Read through `BinaryReader`, errors name Kafka's schema fields."""
from __future__ import annotations

from collections.abc import Callable

from streaming.offsets.wire import BinaryReader

TagHandlers = dict[int, tuple[str, Callable[[BinaryReader], None]]]


def top_level_tags(r: BinaryReader, out: dict, handlers: TagHandlers | None = None) -> None:
    """The value's tagged fields: known tags through `handlers`, the others listed in
    out["unknown_tags"] (absent when there are none)."""
    unknown = r.tagged_fields(handlers)
    if unknown:
        out["unknown_tags"] = unknown


# A handler's name is the scope its reads run in (errors: "<Struct>._tagged_fields.<Field>").
TAGGED = "_tagged_fields"


def int32_tag(out: dict, key: str, field: str) -> tuple[str, Callable[[BinaryReader], None]]:
    """A tag handler storing one int32 field as out[key]."""
    def read(r: BinaryReader) -> None:
        out[key] = r.int32(field)
    return TAGGED, read


def int64_tag(out: dict, key: str, field: str) -> tuple[str, Callable[[BinaryReader], None]]:
    """A tag handler storing one int64 field as out[key]."""
    def read(r: BinaryReader) -> None:
        out[key] = r.int64(field)
    return TAGGED, read


def _epochs_tag(tp: dict) -> TagHandlers:
    def read(r: BinaryReader) -> None:
        tp["assignment_epochs"] = r.nullable_int32_array("AssignmentEpochs", compact=True)
    return {0: (TAGGED, read)}


def topic_partitions(r: BinaryReader) -> dict:
    """TopicPartitions {TopicId uuid, Partitions []int32} (consumer type 7, share types 13/14)."""
    tp = {"topic_id": r.uuid("TopicId"), "partitions": r.int32_array("Partitions", compact=True)}
    r.skip_tagged_fields()
    return tp


def topic_partitions_with_epochs(r: BinaryReader) -> dict:
    """ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions: as topic_partitions, plus tag 0
    AssignmentEpochs (nullable []int32, 4.3+, KIP-1251) as "assignment_epochs" when written."""
    tp = {"topic_id": r.uuid("TopicId"), "partitions": r.int32_array("Partitions", compact=True)}
    r.tagged_fields(_epochs_tag(tp))
    return tp


def task_ids(r: BinaryReader) -> dict:
    """Streams TaskIds {SubtopologyId string, Partitions []int32} (type 21)."""
    t = {"subtopology_id": r.compact_string("SubtopologyId"),
         "partitions": r.int32_array("Partitions", compact=True)}
    r.skip_tagged_fields()
    return t


def task_ids_with_epochs(r: BinaryReader) -> dict:
    """StreamsGroupCurrentMemberAssignmentValue.TaskIds: plus tag 0 AssignmentEpochs (nullable
    []int32, 4.2+; only for active tasks) as "assignment_epochs" when written."""
    t = {"subtopology_id": r.compact_string("SubtopologyId"),
         "partitions": r.int32_array("Partitions", compact=True)}
    r.tagged_fields(_epochs_tag(t))
    return t


def key_value(key_field: str = "Key", value_field: str = "Value") -> Callable[[BinaryReader], dict]:
    """A {Key string, Value string} struct reader (streams configs and client tags)."""
    def read(r: BinaryReader) -> dict:
        kv = {"key": r.compact_string(key_field), "value": r.compact_string(value_field)}
        r.skip_tagged_fields()
        return kv
    return read


def count_partitions(topic_partitions: list | None) -> int:
    """Partitions (or tasks) in a decoded []TopicPartitions / []TaskIds."""
    return sum(len(tp["partitions"]) for tp in topic_partitions or ())


def partition_keys(*topic_partitions: list | None) -> list[str]:
    """The partitions of decoded []TopicPartitions as sorted "<topic id>:<partition>" keys."""
    return sorted(f"{tp['topic_id']}:{p}" for tps in topic_partitions for tp in tps or () for p in tp["partitions"])


def partition_metadata_topics(r: BinaryReader) -> dict:
    """ConsumerGroupPartitionMetadataValue (type 4) and the 4.0 ShareGroupPartitionMetadataValue
    (type 9): []TopicMetadata {TopicId, TopicName, NumPartitions, PartitionMetadata []{Partition,
    Racks []string}}."""
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
    top_level_tags(r, out)
    return out
