"""A log shipper for the bed: one tailer thread per broker follows `server.log` and produces
every new line into a log topic, as Filebeat would.

- One record per physical line (Filebeat without `multiline.*`): a stack trace becomes one
  record per line; the monitor must cope with continuation lines arriving alone.
- Rotation: log4j renames server.log (time or size policy) and opens a new file; the tailer
  drains the old file, then follows the new one (inode change). A truncated file (size below
  our position) is read again from its start.
- Record: key = broker id, partition = broker's index (ordering per broker; that broker leads
  it), value = the line or a Filebeat-style JSON envelope. Record timestamp = produce time (CreateTime).
- `delay_s` per broker holds lines back before producing them (a lagging shipper).
- Every shipped line keeps `read_ms`, `produced_ms`, `acked_ms` (wall clock, epoch ms) for
  latency measurements.
"""
from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from testbed.bed.procs import wait_for


@dataclass
class ShippedLine:
    broker_id: int
    seq: int
    text: str
    read_ms: int
    produced_ms: int | None = None
    acked_ms: int | None = None
    partition: int | None = None
    offset: int | None = None
    error: str | None = None


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def filebeat_envelope(line: str, broker_id: int, path: str, offset: int, ts_ms: int) -> str:
    stamp = dt.datetime.fromtimestamp(ts_ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return json.dumps({"@timestamp": stamp, "message": line, "host": {"name": f"broker-{broker_id}"},
                       "log": {"file": {"path": path}, "offset": offset},
                       "fields": {"broker_id": broker_id}, "input": {"type": "filestream"}})


def self_led_assignment(ids: list[int], rf: int) -> list[list[int]]:
    """Partition k (broker ids[k]'s lines) on ids[k] first, then the next brokers in turn."""
    return [[ids[(k + j) % len(ids)] for j in range(rf)] for k in range(len(ids))]


class _Tailer(threading.Thread):
    def __init__(self, shipper: LogShipper, broker_id: int, path: Path, partition: int, delay_s: float):
        super().__init__(name=f"kafkabed-tail-{broker_id}", daemon=True)
        self.shipper, self.broker_id, self.path = shipper, broker_id, path
        self.partition, self.delay_s = partition, delay_s
        self.lines: list[ShippedLine] = []
        self.rotations = 0
        self._fh: io.BufferedReader | None = None
        self._ino: int | None = None
        self._pos = 0
        self._partial = b""
        self._pending: deque = deque()

    def _open(self) -> bool:
        try:
            fh = open(self.path, "rb")
        except FileNotFoundError:
            return False
        self._fh, self._ino, self._pos, self._partial = fh, os.fstat(fh.fileno()).st_ino, 0, b""
        return True

    def _file(self) -> io.BufferedReader:
        """The followed file: run() reads and checks rotation only once _open() succeeded."""
        assert self._fh is not None, "the tailer's file is not open"
        return self._fh

    def _read(self) -> int:
        data = self._file().read(1 << 20)
        if not data:
            return 0
        start = self._pos
        self._pos += len(data)
        chunk = self._partial + data
        *complete, self._partial = chunk.split(b"\n")
        offset = start - (len(chunk) - len(data))
        stamp = now_ms()
        for raw in complete:
            text = raw.decode("utf-8", "replace").rstrip("\r")
            self._pending.append((stamp, text, offset))
            offset += len(raw) + 1
        return len(complete)

    def _check_rotation(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return
        if st.st_ino != self._ino:      # renamed away: drain the old file, then follow the new one
            while self._read():
                pass
            self._file().close()
            self._open()
            self.rotations += 1
        elif st.st_size < self._pos:    # truncated in place
            self._file().seek(0)
            self._pos, self._partial = 0, b""
            self.rotations += 1

    def _flush_pending(self) -> None:
        cutoff = now_ms() - int(self.delay_s * 1000)
        while self._pending and self._pending[0][0] <= cutoff:
            read_ms, text, offset = self._pending.popleft()
            self.shipper._produce(self, read_ms, text, offset)

    def run(self) -> None:
        stop = self.shipper._stop
        while not stop.is_set() and self._fh is None:
            if not self._open():
                stop.wait(0.05)
        while self._fh is not None:
            got = self._read()
            if not got:
                self._check_rotation()
            self._flush_pending()
            self.shipper._poll()
            if stop.is_set() and not got and (not self._pending or self.shipper._drop_pending):
                break
            if not got:
                stop.wait(0.05)
        if self._fh is not None:
            self._fh.close()


class LogShipper:
    """`LogShipper(cluster, topic).start()`; `.stop()` drains and flushes. `bootstrap` may point
    at another cluster than the one whose logs are shipped; `paths` names other files than the
    brokers' server.log to follow."""

    def __init__(self, cluster, topic: str, envelope: bool = False, delay_s: dict | None = None,
                 bootstrap: str | None = None, create_topic: bool = True,
                 producer_conf: dict | None = None, paths: dict | None = None):
        from confluent_kafka import Producer
        self.cluster, self.topic, self.envelope = cluster, topic, envelope
        self.bootstrap = bootstrap or cluster.bootstrap
        ids = sorted(cluster.brokers)
        if create_topic:
            # Each broker's partition is led by that broker: stopping one broker (the failover
            # scenario) never holds back the lines of the others, above all the new coordinator's.
            cluster.create_topic(topic, len(ids), assignment=self_led_assignment(ids, min(2, len(ids))))
        # Not idempotent: in a CI failover (2.8.2) the idempotent producer held back both
        # partitions' lines, the new leader's too, from the broker's stop until it was back
        # (9 s; apparently it settles the requests in flight to a broker before it moves on),
        # and the monitor rightly dropped them as late. One request in flight keeps the lines in
        # order across retries; a retry may ship a line twice, as Filebeat can.
        conf = {"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5,
                "enable.idempotence": False, "max.in.flight.requests.per.connection": 1,
                "log_level": 2}
        conf.update(producer_conf or {})
        self._producer = Producer(conf)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._drop_pending = False
        # `paths`: {broker id: file} to follow instead of server.log (e.g. a copy in another layout)
        self.tailers = {bid: _Tailer(self, bid, (paths or {}).get(bid) or cluster.server_log_path(bid), k,
                                     (delay_s or {}).get(bid, 0.0))
                        for k, bid in enumerate(ids)}

    def start(self) -> LogShipper:
        for t in self.tailers.values():
            t.start()
        return self

    def _produce(self, tailer: _Tailer, read_ms: int, text: str, offset: int) -> None:
        rec = ShippedLine(tailer.broker_id, len(tailer.lines), text, read_ms, partition=tailer.partition)
        tailer.lines.append(rec)
        rec.produced_ms = now_ms()
        value = (filebeat_envelope(text, tailer.broker_id, str(tailer.path), offset, read_ms)
                 if self.envelope else text)

        def done(err, msg, rec=rec):
            rec.acked_ms = now_ms()
            if err is not None:
                rec.error = str(err)
            else:
                rec.offset = msg.offset()
        with self._lock:
            while True:
                try:
                    self._producer.produce(self.topic, value=value.encode(), key=str(tailer.broker_id).encode(),
                                           partition=tailer.partition, on_delivery=done)
                    break
                except BufferError:
                    self._producer.poll(0.1)

    def _poll(self) -> None:
        with self._lock:
            self._producer.poll(0)

    def lines(self, broker_id: int | None = None) -> list[ShippedLine]:
        if broker_id is not None:
            return list(self.tailers[broker_id].lines)
        return [ln for t in self.tailers.values() for ln in list(t.lines)]

    def mark(self) -> dict:
        """Position of every tailer now; pass to `find`/`wait_line` to look only after it."""
        return {bid: len(t.lines) for bid, t in self.tailers.items()}

    def find(self, pattern: str, since: dict | None = None) -> list[ShippedLine]:
        rx = re.compile(pattern)
        out = []
        for bid, t in self.tailers.items():
            start = (since or {}).get(bid, 0)
            out += [ln for ln in list(t.lines)[start:] if rx.search(ln.text)]
        return out

    def wait_line(self, pattern: str, timeout: float, since: dict | None = None,
                  count: int = 1) -> list[ShippedLine]:
        return wait_for(lambda: (lambda f: f if len(f) >= count else None)(self.find(pattern, since)),
                        timeout, f"{count} shipped server.log line(s) matching /{pattern}/")

    def wait_acked(self, timeout: float = 30.0) -> None:
        wait_for(lambda: all(ln.acked_ms is not None for ln in self.lines()), timeout,
                 "the log shipper's produced lines to be acknowledged")

    def stop(self, drain: bool = True, timeout: float = 30.0) -> None:
        self._drop_pending = not drain
        self._stop.set()
        for t in self.tailers.values():
            t.join(timeout)
        with self._lock:
            self._producer.flush(timeout)

    def __enter__(self) -> LogShipper:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop(drain=exc[0] is None)
