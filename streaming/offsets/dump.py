"""The JSONL dump of `__consumer_offsets` (one JSON object per record: partition, offset,
timestamp, key_b64, value_b64|null), as `decode-offsets`, `replay` and the tests read it."""
from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Iterator

from state.events import SOURCE_OFFSETS
from state.quarantine_reasons import QuarantineReason as R
from streaming.quarantine import RAW_LIMIT, Quarantined

_DUMP_INT_FIELDS = ("partition", "offset", "timestamp")


def _b64_field(obj: dict, name: str) -> bytes | None:
    raw = obj[name]
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ValueError(f"{name} is {type(raw).__name__}, expected a base64 string or null")
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"{name} is not valid base64: {e}") from None


def parse_dump_line(text: str) -> dict:
    obj = json.loads(text)
    if not isinstance(obj, dict):
        raise ValueError(f"line is a JSON {type(obj).__name__}, expected an object")
    missing = [f for f in (*_DUMP_INT_FIELDS, "key_b64", "value_b64") if f not in obj]
    if missing:
        raise ValueError(f"missing field(s): {', '.join(missing)}")
    out: dict = {}
    for f in _DUMP_INT_FIELDS:
        v = obj[f]
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{f} is {v!r}, expected an integer")
        out[f] = v
    out["key"] = _b64_field(obj, "key_b64")
    out["value"] = _b64_field(obj, "value_b64")
    return out


def iter_jsonl_dump(path: str) -> Iterator[tuple[int, dict | Quarantined]]:
    """Yield (line_number, {"partition", "offset", "timestamp", "key", "value"}) per line of an
    offsets-topic JSONL dump (key/value as bytes or None). A bad line yields a Quarantined with
    reason `malformed_dump_line` instead; blank lines are skipped. Never raises on content."""
    sid = os.path.basename(path)
    with open(path, "rb") as f:
        for line_number, raw_line in enumerate(f, start=1):
            if not raw_line.strip():
                continue
            text = ""
            try:
                text = raw_line.decode("utf-8")
                rec = parse_dump_line(text)
            except Exception as e:  # bad UTF-8/JSON/base64/fields; RecursionError on deep nesting
                if not text:
                    text = raw_line.decode("utf-8", errors="replace")
                yield line_number, Quarantined(
                    source=SOURCE_OFFSETS, source_id=sid, seq=line_number,
                    reason=R.MALFORMED_DUMP_LINE, detail=f"{type(e).__name__}: {e}",
                    raw=text.rstrip("\r\n")[:RAW_LIMIT], ts_ms=None)
                continue
            yield line_number, rec
