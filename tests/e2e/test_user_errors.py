"""Mistakes a user can make, as the user makes them (`python -m streaming.app.cli` in a subprocess):
each ends with the exit code the docs give (docs/configuration.md, "Exit codes and inputs"), one
line naming what to fix, and never a traceback. None of these starts Spark."""
from __future__ import annotations

import base64
import gzip
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.capture_expectations import FIXTURES

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "streaming.app.cli"]
LOG = FIXTURES / "kafka-2.7" / "broker1-server.log"
DUMP = FIXTURES / "kafka-2.7" / "offsets-topic.jsonl"
SEGMENT = next((FIXTURES / "kafka-2.7" / "segments").rglob("*.log"))


def _files(folder: Path) -> dict[str, str]:
    """The inputs of the table, by name."""
    data = {
        "binary.bin": bytes(range(256)) * 64,
        "server.log.gz": gzip.compress(LOG.read_bytes()[:20000]),
        "empty.log": b"",
        "blank.log": b"\n  \n",
        "notes.txt": b"hello\nthis is not a broker log\n",
        "other.json": b'{"level": "INFO"}\n',
        "dump.jsonl": DUMP.read_bytes(),
        "00000000000000000000.log": SEGMENT.read_bytes(),
        "monitor.toml": b'checkpoint_location = "/tmp/c"\n',
    }
    # A dump with one record that does not decode (a GroupMetadata key of an unknown version).
    lines = DUMP.read_text().splitlines()[:3]
    bad = json.loads(lines[0])
    bad["key_b64"] = base64.b64encode(b"\x00\x63garbage").decode()
    data["one-bad.jsonl"] = ("\n".join(lines + [json.dumps(bad)]) + "\n").encode()
    for name, content in data.items():
        (folder / name).write_bytes(content)
    # A checkpoint whose state file a newer release wrote.
    newer = folder / "newer-checkpoint" / "rebalance-monitor" / "groups.json"
    newer.parent.mkdir(parents=True)
    newer.write_text(json.dumps({"schema_version": 99, "batch_id": 1, "groups": []}))
    return {name: str(folder / name) for name in data} | {"LOG": str(LOG), "DUMP": str(DUMP),
                                                          "newer-checkpoint": str(folder / "newer-checkpoint")}


def _fill(text: str, names: dict[str, str]) -> str:
    for name, value in names.items():
        text = text.replace("{" + name + "}", value)
    return text


def _busy_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock


RUN = ["run", "--bootstrap-servers", "127.0.0.1:9", "--log-topic", "logs", "--checkpoint", "/tmp/unused"]
# (case, argv with {file} names and {port}, environment, exit code, the message)
CASES = [
    ("env: misspelt variable", ["parse-logs", "{LOG}"], {"REBALANCE_MONITOR_CLUSTERR": "x"}, 2,
     "environment: REBALANCE_MONITOR_CLUSTERR is not a setting; did you mean REBALANCE_MONITOR_CLUSTER?"),
    ("env: variable of no command", ["parse-logs", "{LOG}"], {"REBALANCE_MONITOR_FOO": "1"}, 2,
     "environment: REBALANCE_MONITOR_FOO is not a setting"),
    ("env: table not JSON", RUN, {"REBALANCE_MONITOR_KAFKA__CLIENT": "SSL"}, 2,
     "environment: REBALANCE_MONITOR_KAFKA__CLIENT: expected a JSON object"),
    ("env: list item not a number", ["replay", "--offsets", "{DUMP}", "--out", "/tmp/unused"],
     {"REBALANCE_MONITOR_DURATION_BUCKETS": "1,2,x"}, 2, "duration_buckets.2: Input should be a valid number"),
    ("env: buckets not increasing", ["replay", "--offsets", "{DUMP}", "--out", "/tmp/unused"],
     {"REBALANCE_MONITOR_DURATION_BUCKETS": "3,2,1"}, 2, "buckets must be positive and strictly increasing"),
    ("env: bad regex in a list", RUN, {"REBALANCE_MONITOR_GROUP_DENY": "^_confluent,(oops"}, 2,
     "group_deny: Value error, not a valid regular expression '(oops'"),
    ("demo: port in use", ["demo", "--once", "--port", "{port}"], {}, 2,
     "metrics_port: port {port} is already in use on 127.0.0.1"),
    ("run: port in use", RUN + ["--port", "{port}"], {}, 2,
     "metrics_port: port {port} is already in use on 127.0.0.1 (another monitor or demo?); choose another "
     "with --port N"),
    ("parse-logs: binary file", ["parse-logs", "{binary.bin}"], {}, 2,
     "{binary.bin}: not a broker log: expected log4j lines like '[2024-05-01 12:00:00,123] INFO message "
     "(logger)' (or another layout of docs/broker-logs.md) or log-shipper JSON documents, found binary data"),
    ("parse-logs: gzip file", ["parse-logs", "{server.log.gz}"], {}, 2,
     "{server.log.gz}: not a broker log: expected log4j lines like '[2024-05-01 12:00:00,123] INFO message "
     "(logger)' (or another layout of docs/broker-logs.md) or log-shipper JSON documents, found gzip-compressed data (decompress it first"),
    ("parse-logs: an offsets dump", ["parse-logs", "{dump.jsonl}"], {}, 2,
     "found a __consumer_offsets dump (JSON lines with partition, offset, timestamp, key_b64, value_b64); "
     "give it to decode-offsets or replay --offsets"),
    ("parse-logs: a segment file", ["parse-logs", "{00000000000000000000.log}"], {}, 2,
     "found binary data (a __consumer_offsets segment file, by its name); give it to decode-offsets"),
    ("parse-logs: plain text", ["parse-logs", "{notes.txt}"], {}, 2,
     "found text without a log4j line of a known layout (first line: 'hello')"),
    ("parse-logs: other JSON", ["parse-logs", "{other.json}"], {}, 2,
     "found JSON documents without a message/log/msg field"),
    ("parse-logs: empty file", ["parse-logs", "{empty.log}"], {}, 2, "{empty.log}: nothing to read: an empty file"),
    ("decode-offsets: a broker log", ["decode-offsets", "{LOG}"], {}, 2,
     "{LOG}: not a __consumer_offsets dump: expected JSON lines with partition, offset, timestamp, key_b64, "
     "value_b64 (or a segment directory or .log file), found broker log lines; give it to parse-logs"),
    ("decode-offsets: binary file", ["decode-offsets", "{binary.bin}"], {}, 2,
     "not a __consumer_offsets dump: expected JSON lines"),
    ("decode-offsets: blank lines only", ["decode-offsets", "{blank.log}"], {}, 2,
     "{blank.log}: nothing to read: only blank lines"),
    ("decode-offsets: no such file", ["decode-offsets", "/no/such/dump.jsonl"], {}, 2,
     "/no/such/dump.jsonl: no such file or directory"),
    ("replay: binary broker log", ["replay", "--broker-log", "{binary.bin}", "--out", "/tmp/unused"], {}, 2,
     "{binary.bin}: not a broker log"),
    ("replay: log given as offsets", ["replay", "--offsets", "{LOG}", "--out", "/tmp/unused"], {}, 2,
     "not a __consumer_offsets dump"),
    ("replay: every input empty", ["replay", "--broker-log", "{empty.log}", "--offsets", "{blank.log}", "--out",
                                   "/tmp/unused"], {}, 2, "{empty.log}: nothing to read: an empty file"),
    ("replay: --out is a file", ["replay", "--offsets", "{DUMP}", "--out", "{notes.txt}"], {}, 2,
     "--out: {notes.txt} is a file, not a directory"),
    ("replay: --out under a file", ["replay", "--offsets", "{DUMP}", "--out", "{notes.txt}/out"], {}, 2,
     "--out: cannot write to {notes.txt}/out: Not a directory"),
    ("demo: --out is a file", ["demo", "--out", "{notes.txt}", "--once"], {}, 2,
     "--out: {notes.txt} is a file, not a directory"),
    ("run: state file of a newer release", ["run", "--bootstrap-servers", "127.0.0.1:9", "--log-topic", "logs",
                                            "--checkpoint", "{newer-checkpoint}"], {}, 2,
     "checkpoint_location: {newer-checkpoint}/rebalance-monitor/groups.json: state file version 99 was written by "
     "a newer release (this one reads versions 1-3)"),
    ("run: typo in the file", ["run", "--config", "{monitor.toml}", "--bootstrap-servers", "b:1"],
     {"REBALANCE_MONITOR_CHECKPOINT_LOCATIO": "/c"}, 2, "did you mean REBALANCE_MONITOR_CHECKPOINT_LOCATION?"),
]


LINES = {"replay: every input empty": 2}   # one per empty file


@pytest.mark.parametrize("case, argv, env, code, message", CASES, ids=[c[0] for c in CASES])
def test_a_user_error_is_one_clear_line(tmp_path, case, argv, env, code, message):
    files = _files(tmp_path)
    busy = _busy_port()
    names = files | {"port": str(busy.getsockname()[1])}
    try:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("REBALANCE_MONITOR_")
                   or k in ("REBALANCE_MONITOR_HELM", "REBALANCE_MONITOR_CACHE")}
        environ.update(env, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        result = subprocess.run(CLI + [_fill(a, names) for a in argv], cwd=ROOT, env=environ,
                                capture_output=True, text=True, timeout=60)
    finally:
        busy.close()
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    assert result.returncode == code, output[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    # one line per input at fault, and no Spark start (it logs on stderr)
    assert len(lines) == LINES.get(case, 1), lines
    assert _fill(message, names) in lines[0]


def test_decode_offsets_exits_1_when_some_records_failed(tmp_path):
    path = _files(tmp_path)["one-bad.jsonl"]
    result = subprocess.run(CLI + ["decode-offsets", path], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == "decode-offsets: 3 decoded, 1 failed"
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(docs) == 4 and "error" in docs[-1]


def test_an_empty_input_beside_a_usable_one_is_skipped_with_a_note(tmp_path):
    empty = _files(tmp_path)["empty.log"]
    result = subprocess.run(CLI + ["parse-logs", empty, str(LOG)], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[0] == f"parse-logs: {empty}: nothing to read: an empty file; skipped"
    assert len(result.stdout.splitlines()) == 174   # the events of the real log (13 broker lines), as without the empty file
