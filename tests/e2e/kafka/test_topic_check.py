"""`run`'s start-up topic check on a real broker: `__consumer_offsets` is an internal topic,
which kafka-python's KafkaConsumer.topics() never lists; the check must still find it."""
from __future__ import annotations

import pytest

from streaming.spark.sources.kafka import TopicsMissing, check_topics

from .conftest import CI_VERSIONS

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("kafka_bed", CI_VERSIONS[-1:], indirect=True)
def test_the_offsets_topic_is_found(kafka_bed):
    bootstrap = kafka_bed.cluster.bootstrap
    # Kafka creates __consumer_offsets when a group first asks for its coordinator.
    kafka_bed.cluster.coordinator_of("topic-check-group")
    assert check_topics(bootstrap, ["__consumer_offsets", "kafkabed-broker-logs"], {}, timeout_s=20) is None
    with pytest.raises(TopicsMissing) as missing:
        check_topics(bootstrap, ["__consumer_offsets", "no-such-topic"], {}, timeout_s=20)
    assert missing.value.missing == ["no-such-topic"]
    assert str(missing.value) == f"topic(s) not found at {bootstrap}: no-such-topic"
