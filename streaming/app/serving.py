"""The /metrics endpoint of `demo` and `run` (sinks/exposition.py serves it), started where the
settings say; a port or address that cannot be bound is a configuration error."""
from __future__ import annotations

import errno
from typing import Any

from sinks.exposition import serve
from streaming.app.settings import ENV_PREFIX, ConfigError, ServingSettings


def serve_metrics(settings: ServingSettings, registry: Any) -> Any:
    """Start /metrics on metrics_host:metrics_port; a port in use or an address that cannot be
    bound is a ConfigError naming the setting and its flag. Returns the HTTP server."""
    try:
        server, _ = serve(registry, settings.metrics_host, settings.metrics_port)
    except OSError as exc:
        where = f"{settings.metrics_host}:{settings.metrics_port}"
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"metrics_port: port {settings.metrics_port} is already in use on "
                              f"{settings.metrics_host} (another monitor or demo?); choose another with --port N "
                              f"(0 picks a free one), metrics_port in the file or {ENV_PREFIX}METRICS_PORT") from None
        if exc.errno == errno.EACCES:
            raise ConfigError(f"metrics_port: port {settings.metrics_port} needs privileges this process does not "
                              f"have; use a port above 1023 (--port N)") from None
        raise ConfigError(f"metrics_host: cannot serve /metrics on {where}: {exc.strerror or exc}; "
                          f"choose another address with --host ADDR (metrics_host)") from None
    return server
