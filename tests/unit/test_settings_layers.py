"""The settings package's layers: the models (schema.py) and their loading (loading.py) import no
Spark and start no server, so a command reads and checks its settings before Spark is imported;
the conversions to the query's objects (wiring.py) and the /metrics server (streaming/app/serving.py)
are elsewhere."""
from __future__ import annotations

import ast
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "streaming" / "app" / "settings"
# Modules neither schema.py nor loading.py may load, directly or through what they import.
FORBIDDEN = ("pyspark", "py4j", "streaming.spark", "http.server", "socketserver", "wsgiref",
             "sinks.exposition", "streaming.app.serving", "streaming.app.settings.wiring")

# Interpreter start may load streaming.spark.zip_imports already (the venv's .pth file,
# streaming/spark/zip_imports.py): what counts is what the imports below add.
_PROBE = """
import json, sys
started = set(sys.modules)
import streaming.app.settings.schema, streaming.app.settings.loading
from streaming.app.settings import ReplaySettings, RunSettings, load
load(ReplaySettings, lateness_seconds=5)
load(RunSettings, checkpoint_location="/c", kafka={"bootstrap_servers": "b:1"})
print(json.dumps(sorted(set(sys.modules) - started)))
"""


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_schema_and_loading_import_no_spark_and_no_server():
    """In a fresh interpreter, importing the two modules and loading settings with them adds
    neither pyspark, streaming.spark nor any socket server to sys.modules."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120, check=True)
    loaded = json.loads(result.stdout)
    assert "streaming.app.settings.schema" in loaded and "pydantic_settings" in loaded
    assert [m for m in loaded if _within(m, FORBIDDEN)] == []


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("module", ["schema.py", "loading.py", "__init__.py"])
def test_no_import_of_spark_or_the_server_even_inside_functions(module):
    """The source too: an import inside a function would escape the check above until it runs."""
    assert sorted(name for name in _imports(SETTINGS / module) if _within(name, FORBIDDEN)) == []


def test_a_port_in_use_is_a_configuration_error_naming_the_setting():
    from prometheus_client import CollectorRegistry

    from streaming.app.serving import serve_metrics
    from streaming.app.settings import ConfigError, DemoSettings
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        with pytest.raises(ConfigError) as caught:
            serve_metrics(DemoSettings(metrics_port=port), CollectorRegistry())
    finally:
        busy.close()
    assert str(caught.value) == (
        f"metrics_port: port {port} is already in use on 127.0.0.1 (another monitor or demo?); choose another "
        f"with --port N (0 picks a free one), metrics_port in the file or REBALANCE_MONITOR_METRICS_PORT")
