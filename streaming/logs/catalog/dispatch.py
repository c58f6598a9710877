"""Dispatch: only the catalog entries whose pattern can start with a body's first word are tried.

Entries are tried in catalog order; a pattern with no literal first word (an alternation, a
wildcard start) is a candidate for every body."""
from __future__ import annotations

import re
from collections.abc import Sequence

from streaming.logs.catalog.entry import CatalogEntry

_FIRST_WORD_RE = re.compile(r"[\[A-Za-z]+")          # "[GroupId", "[Group", "Member[group", "Preparing"
_LITERAL_PREFIX_RE = re.compile(r"(?:\\[\[\].()=`']|[A-Za-z0-9 '=`-])*")  # escaped punctuation or plain text
_LEADING_ALTERNATIVES_RE = re.compile(r"\(\?(?:P<\w+>|:)([^()]*)\)(?![?*+{])")


def _first_word(body: str) -> str:
    m = _FIRST_WORD_RE.match(body)
    return m.group() if m else ""


def _has_top_level_alternation(pattern: str) -> bool:
    depth, escaped = 0, False
    for ch in pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            return True
    return False


def _pattern_first_words(pattern: str) -> frozenset[str] | None:
    """The first words a body matching `pattern` can start with; None = cannot tell (always try)."""
    if _has_top_level_alternation(pattern):
        return None
    leading = _LEADING_ALTERNATIVES_RE.match(pattern)   # e.g. (?P<static>Static|Dynamic) Member ...
    alternatives = leading.group(1).split("|") if leading else [pattern]
    words = set()
    for alternative in alternatives:
        prefix = _LITERAL_PREFIX_RE.match(alternative)   # matches at least the empty string
        literal = prefix.group() if prefix else ""
        rest = alternative[len(literal):]
        word = _first_word(literal.replace("\\", ""))
        if not word or (len(word) == len(literal.replace("\\", "")) and rest[:1] in ("?", "*", "+", "{")):
            return None  # no literal start, or its last letter is optional
        words.add(word)
    return frozenset(words)


Index = tuple[dict[str, tuple[CatalogEntry, ...]], tuple[CatalogEntry, ...]]


def _build_index(catalog: Sequence[CatalogEntry], family: str, debug: bool) -> Index:
    entries = [e for e in catalog if e.family in (family, "both") and (e.parse_at_debug or not debug)]
    first_words = {id(e): _pattern_first_words(e.pattern.pattern) for e in entries}
    wildcard = tuple(e for e in entries if first_words[id(e)] is None)
    keys = set().union(*(w for w in first_words.values() if w is not None))
    by_word = {key: tuple(e for e in entries if (words := first_words[id(e)]) is None or key in words)
               for key in keys}
    return by_word, wildcard


class Dispatch:
    """(family, is_debug_line) -> ({first word: candidate entries in catalog order}, the entries
    to try for any other first word)."""

    def __init__(self, catalog: Sequence[CatalogEntry]):
        self._index = {(family, debug): _build_index(catalog, family, debug)
                       for family in ("scala", "java") for debug in (False, True)}

    def candidates(self, family: str, body: str, *, debug: bool = False) -> tuple[CatalogEntry, ...]:
        """Catalog entries that may match a message body of this logger family, in catalog order."""
        by_word, wildcard = self._index[(family, debug)]
        return by_word.get(_first_word(body), wildcard)
