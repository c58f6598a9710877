"""The bed's webhook receiver: every notification Alertmanager sends, with its arrival time, in
memory and in a JSON-lines file. One path per receiver of the configuration (/pager, /tickets,
/deadman). It can be stopped and started again on the same port (the pager-path outage)."""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from testbed.bed.procs import free_port


@dataclass(frozen=True)
class Notification:
    received_ms: int
    receiver: str            # pager | tickets | deadman
    body: dict[str, Any]     # Alertmanager's webhook payload (version 4)

    @property
    def status(self) -> str:
        return str(self.body.get("status"))

    @property
    def alerts(self) -> list[dict[str, Any]]:
        return list(self.body.get("alerts") or [])

    @property
    def group_key(self) -> str:
        return str(self.body.get("groupKey"))


class Receiver:
    def __init__(self, path: Path, port: int | None = None):
        self.path = path
        self.port = port or free_port()
        self.notifications: list[Notification] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"unreadable": raw.decode(errors="replace")[:2000]}
                receiver._add(Notification(int(time.time() * 1000), self.path.strip("/"), body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="receiver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _add(self, n: Notification) -> None:
        with self._lock:
            self.notifications.append(n)
            with open(self.path, "a") as f:
                f.write(json.dumps({"received_ms": n.received_ms, "receiver": n.receiver, "body": n.body}) + "\n")

    def received(self, receiver: str | None = None, since_ms: int = 0) -> list[Notification]:
        with self._lock:
            return [n for n in self.notifications
                    if (receiver is None or n.receiver == receiver) and n.received_ms >= since_ms]
