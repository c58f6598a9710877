"""A consumer-group member as its own process (run as a script, see members.py).

Prints one JSON object per line on stdout, which the runner waits on:
  {"event": "started"|"assigned"|"revoked"|"lost"|"consumed"|"stopped_polling"|"closed"|"retry"|"error",
   "ts_ms": ..., "pid": ..., "client_id": ..., ...}
Behaviour: polls normally; stops polling (but stays alive, so the client's own poll timeout
fires) while `--stop-file` exists (and for good after SIGUSR1), polling again once the file is
removed (a slow batch that finally ends: the client rejoins); `--slow-ms` sleeps after every non-empty poll
(slow processing); SIGTERM closes the consumer gracefully (a dynamic member leaves the group).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

_state = {"stop_polling": False, "stop_for_good": False, "close": False}
ARGS: argparse.Namespace    # the command line, set by main() before anything reads it


def emit(event: str, **fields) -> None:
    fields.update(event=event, ts_ms=time.time_ns() // 1_000_000, pid=os.getpid(), client_id=ARGS.client_id)
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--library", choices=["kafka-python", "confluent"], required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topics", required=True, help="comma-separated")
    p.add_argument("--client-id", required=True)
    p.add_argument("--instance-id")
    p.add_argument("--session-timeout-ms", type=int, default=6000)
    p.add_argument("--heartbeat-interval-ms", type=int, default=500)
    p.add_argument("--max-poll-interval-ms", type=int, default=300000)
    p.add_argument("--protocol", choices=["classic", "consumer"], default="classic")
    p.add_argument("--slow-ms", type=int, default=0)
    p.add_argument("--stop-file")
    p.add_argument("--extra", default="{}", help="JSON: more client settings")
    p.add_argument("--source-address", help="kafka-python: connect from this loopback address (a host of its own)")
    return p.parse_args()


def should_poll() -> bool:
    _state["stop_polling"] = _state["stop_for_good"] or bool(ARGS.stop_file and os.path.exists(ARGS.stop_file))
    return not _state["stop_polling"]


def loop(poll_once) -> None:
    consumed, last_report = 0, 0.0
    announced = False
    while not _state["close"]:
        if not should_poll():
            if not announced:
                emit("stopped_polling")
                announced = True
            time.sleep(0.05)
            continue
        if announced:
            emit("resumed_polling")
            announced = False
        n = poll_once()
        consumed += n
        if n and ARGS.slow_ms:
            time.sleep(ARGS.slow_ms / 1000)
        if n and time.monotonic() - last_report > 1.0:
            emit("consumed", total=consumed)
            last_report = time.monotonic()


def _bind_connections(address: str) -> None:
    """Every socket of this process connects from `address` (127.0.0.2 and up are loopback
    addresses too): the broker then sees the member on a host of its own (client_host)."""
    import socket

    class Bound(socket.socket):
        def connect(self, addr):
            self._bind_once()
            return super().connect(addr)

        def connect_ex(self, addr):
            self._bind_once()
            return super().connect_ex(addr)

        def _bind_once(self):
            if self.family == socket.AF_INET and self.getsockname()[1] == 0:
                self.bind((address, 0))

    # kafka-python makes its sockets with socket.socket(...); a deliberate monkeypatch of the stdlib class
    socket.socket = Bound       # type: ignore[misc]


def run_kafka_python() -> None:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit("revoked", partitions=sorted(f"{tp.topic}-{tp.partition}" for tp in revoked))

        def on_partitions_assigned(self, assigned):
            emit("assigned", partitions=sorted(f"{tp.topic}-{tp.partition}" for tp in assigned))

    conf = {"bootstrap_servers": ARGS.bootstrap.split(","), "group_id": ARGS.group, "client_id": ARGS.client_id,
                "session_timeout_ms": ARGS.session_timeout_ms, "heartbeat_interval_ms": ARGS.heartbeat_interval_ms,
                "max_poll_interval_ms": ARGS.max_poll_interval_ms, "auto_offset_reset": "earliest",
                "enable_auto_commit": True, "auto_commit_interval_ms": 1000}
    if ARGS.instance_id:
        conf["group_instance_id"] = ARGS.instance_id

    def committed(offsets, result) -> None:
        # Each auto-commit the broker accepted: the runner times a static member's close by them.
        if not isinstance(result, Exception):
            emit("committed", partitions=len(offsets))
    conf["default_offset_commit_callback"] = committed
    conf.update(json.loads(ARGS.extra))
    if ARGS.source_address:
        _bind_connections(ARGS.source_address)
    consumer = KafkaConsumer(**conf)
    consumer.subscribe(ARGS.topics.split(","), listener=Listener())
    emit("started", library="kafka-python")

    def poll_once() -> int:
        from kafka.errors import KafkaConnectionError
        try:
            return sum(len(v) for v in consumer.poll(timeout_ms=200).values())
        except KafkaConnectionError as exc:
            # a broker that died while the process was frozen (SIGSTOP): an application retries
            emit("retry", error=f"{type(exc).__name__}: {exc}")
            return 0
    loop(poll_once)
    consumer.close()
    emit("closed")


def run_confluent() -> None:
    from confluent_kafka import Consumer
    conf = {"bootstrap.servers": ARGS.bootstrap, "group.id": ARGS.group, "client.id": ARGS.client_id,
            "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 1000,
            "max.poll.interval.ms": ARGS.max_poll_interval_ms, "log_level": 4}
    if ARGS.protocol == "consumer":
        conf["group.protocol"] = "consumer"      # session/heartbeat are the broker's (group.consumer.*)
    else:
        conf.update({"session.timeout.ms": ARGS.session_timeout_ms,
                     "heartbeat.interval.ms": ARGS.heartbeat_interval_ms})
    if ARGS.instance_id:
        conf["group.instance.id"] = ARGS.instance_id
    conf.update(json.loads(ARGS.extra))
    consumer = Consumer(conf)

    def names(parts):
        return sorted(f"{p.topic}-{p.partition}" for p in parts)
    consumer.subscribe(ARGS.topics.split(","),
                       on_assign=lambda c, parts: emit("assigned", partitions=names(parts)),
                       on_revoke=lambda c, parts: emit("revoked", partitions=names(parts)),
                       on_lost=lambda c, parts: emit("lost", partitions=names(parts)))
    emit("started", library="confluent")

    def poll_once() -> int:
        msgs = consumer.consume(num_messages=100, timeout=0.2)
        for m in msgs:
            if m.error() is not None:
                emit("error", error=str(m.error()))
        return len(msgs)
    loop(poll_once)
    consumer.close()
    emit("closed")


def main() -> None:
    global ARGS
    ARGS = parse()
    signal.signal(signal.SIGTERM, lambda *_: _state.update(close=True))
    signal.signal(signal.SIGUSR1, lambda *_: _state.update(stop_for_good=True))
    try:
        (run_kafka_python if ARGS.library == "kafka-python" else run_confluent)()
    except Exception as exc:   # the runner reads this line instead of a bare traceback
        emit("error", error=f"{type(exc).__name__}: {exc}")
        raise


if __name__ == "__main__":
    main()
