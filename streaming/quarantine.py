"""Inputs we could not use. Never dropped silently: each becomes one quarantine record."""
from __future__ import annotations

from dataclasses import dataclass

# Quarantined.raw (a raw line, or base64 of a record's key|value) is cut to this many characters.
RAW_LIMIT = 2000


@dataclass
class Quarantined:
    source: str             # "log" | "offsets"
    source_id: str          # file name / topic-partition
    seq: int                # line number / record offset
    reason: str             # short machine-readable kind, e.g. "unparseable_line", "corrupt_record"
    detail: str             # human text; for decode errors names the field and byte offset
    raw: str | None = None  # the raw line, or base64 of key|value for records (truncated)
    ts_ms: int | None = None

    def to_dict(self) -> dict:
        return {
            "source": self.source, "source_id": self.source_id, "seq": self.seq,
            "reason": self.reason, "detail": self.detail, "raw": self.raw, "ts_ms": self.ts_ms,
        }
