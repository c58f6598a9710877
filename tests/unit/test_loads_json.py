"""rows.loads_json (pydantic_core's parser, json.loads for what it refuses) gives what json.loads
gives, on the texts the pipeline makes: output records, packed event rows, odd values."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from state import events as E
from streaming.rows import DATA_JSON, loads_json

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"


def _same(text: str) -> None:
    ours, reference = loads_json(text), json.loads(text)
    assert ours == reference
    # the same types all the way down (an int stays an int, a float a float)
    assert json.dumps(ours, sort_keys=True) == json.dumps(reference, sort_keys=True)


def test_every_golden_record_decodes_as_json_loads_does() -> None:
    lines = [line for path in sorted(GOLDEN.glob("*/*.jsonl")) for line in path.read_text().splitlines() if line]
    assert len(lines) > 500
    for line in lines:
        _same(line)


@pytest.mark.parametrize("text", [
    '{"data":{"commits":[["t",0,12,1795132800988,1],["t",1,null,null,null]]},"ts":1,"kind":"offset_commits"}',
    '{"big":123456789012345678901234567890,"neg":-9223372036854775809,"f":1.0,"e":1e-7,"z":-0.0}',
    '{"unicode":"gr\\u00fcn \u00e9t\u00e9 \\ud83d\\ude00","tab":"a\\tb","nl":"a\\nb","q":"\\"x\\""}',
    '{"dup":1,"dup":2}',
    '[]', '"text"', '3', 'null', 'true',
])
def test_values_decode_as_json_loads_does(text: str) -> None:
    _same(text)


def test_a_lone_surrogate_escape_decodes_through_json_loads() -> None:
    # What DATA_JSON writes for a log line decoded with surrogateescape; pydantic_core refuses it.
    text = DATA_JSON({"message": b"caf\xe9".decode("utf-8", "surrogateescape")})
    assert "\\udce9" in text
    assert loads_json(text) == json.loads(text) == {"message": "caf\udce9"}


def test_non_finite_floats_decode() -> None:
    value = loads_json(json.dumps({"a": float("nan"), "b": float("inf"), "c": float("-inf")}))
    assert math.isnan(value["a"]) and value["b"] == math.inf and value["c"] == -math.inf


@pytest.mark.parametrize("text", ["", "{", '{"a":1} x', "garbage"])
def test_garbage_raises_json_loads_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        loads_json(text)


def test_an_event_row_of_the_steps_round_trips() -> None:
    data = {"member_id": "c-1", "client_host": "/127.0.0.1", "partitions": ["t:0", "t:1"], "n": 3}
    assert loads_json(DATA_JSON(data)) == data
    assert loads_json(str(E.END_OF_INPUT_TS_MS)) == E.END_OF_INPUT_TS_MS
