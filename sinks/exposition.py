"""Exposition of the metrics registry: HTTP endpoint and text file (prometheus_client's own)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest, start_http_server, write_to_textfile


def serve(registry: CollectorRegistry, host: str, port: int):
    """Start the /metrics endpoint in a daemon thread; returns (server, thread)."""
    return start_http_server(port, addr=host, registry=registry)


def text(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode("utf-8")


def write_textfile(registry: CollectorRegistry, path: str) -> None:
    """Atomically: prometheus_client writes `path.<pid>.<thread>` and renames it."""
    write_to_textfile(path, registry)
