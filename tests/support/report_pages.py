"""Helpers of the report tests: the golden replay outputs of the bundled captures, and the start tags
of an HTML page (html.parser) to count what the page draws."""
from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = [ROOT / "tests" / "fixtures" / "golden" / name for name in ("kafka-2.7", "kafka-4.0")]


def records(name: str) -> list[dict]:
    """Every record of one output file of both golden replays."""
    return [json.loads(line) for d in GOLDEN for line in (d / name).read_text().splitlines() if line]


class Elements(HTMLParser):
    """Every start tag with its attributes, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def having(self, tag: str, cls: str) -> list[dict]:
        return [a for t, a in self.tags if t == tag and cls in (a.get("class") or "").split()]


def elements(html: str) -> Elements:
    parser = Elements()
    parser.feed(html)
    return parser
