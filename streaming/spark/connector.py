"""Spark's kafka connector: the package that provides it, how it reads `__consumer_offsets`, and
the start-up topic check done with the connector's own Kafka client (the JVM's AdminClient, from
the kafka-clients jar the connector brings) and the `kafka.*` options of `kafka.spark_options`.
So the check tests exactly what the connector will use: its TLS and SASL options, config
providers (`${dir:...}`) included, and a refused login is one clear error (KafkaLoginFailed), not
a retry loop.

Internal topics: since Spark 3.x the connector finds partitions with the Kafka Admin API and
drops internal topics (its ConsumerStrategy.retrieveAllPartitions keeps only topics whose
TopicDescription is not internal), for `subscribe` and `assign` alike; a query on
`__consumer_offsets` then reads nothing and says nothing. The consumer-based offset fetching
(`spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true`) reads them; with `assign` (the
partitions listed here at each query start) its driver consumer joins no consumer group, so the
monitor does not show up in what it monitors.
"""
from __future__ import annotations

import re
import threading
from typing import Any

from pyspark.sql import SparkSession

from streaming.spark.sources.kafka import TopicsMissing
from streaming.spark.sources.kafka_login import KafkaLoginFailed

CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"
_ERRORS = "org.apache.kafka.common.errors."
# Options the Kafka client refuses to start with (a bad value, an unparsable JAAS line).
_SETTINGS_ERRORS = {"org.apache.kafka.common.config.ConfigException", "java.lang.IllegalArgumentException",
                    "javax.security.auth.login.LoginException"}


def connector_package(spark: SparkSession | None = None) -> str:
    """The connector's Maven coordinate for this Spark (spark.jars.packages / --packages)."""
    if spark is not None:
        return f"{CONNECTOR}:{spark.version}"
    import pyspark
    return f"{CONNECTOR}:{pyspark.__version__}"


def admin_properties(bootstrap_servers: str, spark_options: dict[str, str], timeout_ms: int) -> dict[str, str]:
    """Kafka client properties of the connector's options: `kafka.x` -> `x` (Spark's rule)."""
    props = {key[len("kafka."):]: value for key, value in spark_options.items() if key.startswith("kafka.")}
    props.update({"bootstrap.servers": bootstrap_servers, "request.timeout.ms": str(timeout_ms),
                  "default.api.timeout.ms": str(timeout_ms), "client.id": "rebalance-monitor-topic-check"})
    return props


def jaas_user(spark_options: dict[str, str]) -> str | None:
    match = re.search(r'username\s*=\s*"([^"]*)"', spark_options.get("kafka.sasl.jaas.config", ""))
    return match.group(1) if match else None


def _chain(java_exc: Any) -> list[tuple[str, str]]:
    """(class name, message) of an exception and its causes, outermost first."""
    out: list[tuple[str, str]] = []
    current = java_exc
    while current is not None and len(out) < 12:
        out.append((str(current.getClass().getName()), str(current.getMessage())))
        current = current.getCause()
    return out


def _admin_call(spark: SparkSession, props: dict[str, str], call: Any) -> Any:
    """`call(admin, jvm)` with an AdminClient built from `props`, closed afterwards."""
    jvm: Any = spark.sparkContext._jvm
    properties = jvm.java.util.Properties()
    for key, value in props.items():
        properties.setProperty(key, value)
    admin = jvm.org.apache.kafka.clients.admin.AdminClient.create(properties)
    try:
        return call(admin, jvm)
    finally:
        admin.close(jvm.java.time.Duration.ofSeconds(5))


def _list_topics(spark: SparkSession, props: dict[str, str], timeout_ms: int) -> set[str]:
    def call(admin: Any, jvm: Any) -> set[str]:
        options = jvm.org.apache.kafka.clients.admin.ListTopicsOptions().listInternal(True).timeoutMs(timeout_ms)
        names = admin.listTopics(options).names().get(timeout_ms + 2000, jvm.java.util.concurrent.TimeUnit.MILLISECONDS)
        return {str(name) for name in names}
    return set(_admin_call(spark, props, call))


def topic_partitions(spark: SparkSession, bootstrap: str, spark_options: dict[str, str], topics: list[str],
                     timeout_s: float = 30.0) -> dict[str, list[int]]:
    """{topic: partition numbers} with the connector's client, internal topics included (the
    `assign` option of the connector's reader)."""
    timeout_ms = int(timeout_s * 1000)

    def call(admin: Any, jvm: Any) -> dict[str, list[int]]:
        described = admin.describeTopics(topics).allTopicNames().get(
            timeout_ms + 2000, jvm.java.util.concurrent.TimeUnit.MILLISECONDS)
        return {str(name): sorted(int(p.partition()) for p in described.get(name).partitions())
                for name in described.keySet()}
    return dict(_admin_call(spark, admin_properties(bootstrap, spark_options, timeout_ms), call))


def _checked(spark: SparkSession, bootstrap: str, spark_options: dict[str, str], topics: list[str],
             timeout_s: float) -> str | None:
    timeout_ms = int(timeout_s * 1000)
    try:
        existing = _list_topics(spark, admin_properties(bootstrap, spark_options, timeout_ms), timeout_ms)
    except Exception as exc:
        if getattr(exc, "java_exception", None) is None:   # not an error of the JVM call (py4j's)
            raise
        chain = _chain(exc.java_exception)  # type: ignore[attr-defined]
        for name, message in chain:
            if name == _ERRORS + "SslAuthenticationException":
                raise KafkaLoginFailed("tls", bootstrap, message) from None
            if name.startswith(_ERRORS) and name.endswith("AuthenticationException"):
                raise KafkaLoginFailed("sasl", bootstrap, message, jaas_user(spark_options),
                                       spark_options.get("kafka.sasl.mechanism", "GSSAPI")) from None
        for name, message in chain:
            if name in _SETTINGS_ERRORS:
                raise ValueError(f"kafka.spark_options: {name.rsplit('.', 1)[-1]}: {message}") from None
        name, message = next((c for c in chain if c[0].startswith("org.apache.kafka.")), chain[-1])
        return f"cannot reach Kafka at {bootstrap}: {name.rsplit('.', 1)[-1]}: {message}"
    missing = [t for t in topics if t not in existing]
    if missing:
        raise TopicsMissing(bootstrap, missing)
    return None


def check_topics_connector(spark: SparkSession, bootstrap: str, spark_options: dict[str, str], topics: list[str],
                           timeout_s: float = 30.0, stop: threading.Event | None = None) -> str | None:
    """Like sources.kafka.check_topics, with the connector's client: None when every topic exists;
    a message when Kafka does not answer; TopicsMissing; KafkaLoginFailed when Kafka refuses the
    TLS or SASL options; ValueError for options the Kafka client rejects. Returns at once (with a
    message) when `stop` is set; the JVM call ends by its own timeout."""
    outcome: dict[str, Any] = {}

    def attempt() -> None:
        try:
            outcome["problem"] = _checked(spark, bootstrap, spark_options, topics, timeout_s)
        except BaseException as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=attempt, name="kafka-topic-check-jvm", daemon=True)
    worker.start()
    while worker.is_alive() and not (stop is not None and stop.is_set()):
        worker.join(0.1)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("problem", f"stopped while checking Kafka at {bootstrap}")
