"""Lexing: mask strings and comments of Java and Scala source so that brackets and calls can be found."""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# ---------------------------------------------------------------------------------------------
# Lexing: mask strings and comments so that brackets and calls can be found in the code
# ---------------------------------------------------------------------------------------------

@dataclass
class Lit:
    start: int            # offset of the opening quote (or interpolator prefix)
    end: int              # offset after the closing quote
    kind: str             # "plain", "triple", "interp" (s/f/raw"..."), "interp_triple"
    prefix: str = ""      # s, f, raw


LIT_FILL = "\x01"   # what string literals become in the masked text (not a space, not a word char)
_CHAR_LIT = re.compile(r"'(?:\\u[0-9a-fA-F]{4}|\\.|[^'\\\n])'")


def mask(text: str, scala: bool) -> tuple[str, list[Lit]]:
    """`text` with comment and literal contents blanked (same length), and the literals found."""
    out = list(text)
    lits: list[Lit] = []
    i, n = 0, len(text)

    def blank(a: int, b: int, fill: str = " ") -> None:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = fill

    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
            continue
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
            continue
        if c == "'":
            m = _CHAR_LIT.match(text, i)
            if m:
                blank(i, m.end())
                i = m.end()
                continue
            i += 1
            continue
        if c == '"':
            pre = _interp_prefix(text, i) if scala else ""
            start = i - len(pre)
            if text.startswith('"""', i):
                j = _skip_string(text, i + 3, True, bool(pre))
                kind = "interp_triple" if pre else "triple"
            else:
                j = _skip_string(text, i + 1, False, bool(pre))
                kind = "interp" if pre else "plain"
            lits.append(Lit(start, j, kind, pre))
            blank(start, j, LIT_FILL)
            i = j
            continue
        i += 1
    return "".join(out), lits


def _skip_string(text: str, j: int, triple: bool, interp: bool) -> int:
    """j at the first char after the opening quote(s); returns the offset after the closing quote."""
    n = len(text)
    while j < n:
        c = text[j]
        if triple:
            if text.startswith('"""', j):
                j += 3
                while j < n and text[j] == '"':   # """" ends with the last three quotes
                    j += 1
                return j
        else:
            if c == "\\":
                j += 2
                continue
            if c == '"':
                return j + 1
            if c == "\n" and not interp:
                return j
        if interp and c == "$":
            if text.startswith("$$", j):
                j += 2
                continue
            if text.startswith("${", j):
                j = _skip_block(text, j + 2)
                continue
        j += 1
    return j


def _skip_block(text: str, j: int) -> int:
    """Inside ${ ... }: skip to after the matching brace, stepping over nested strings."""
    n = len(text)
    depth = 1
    while j < n and depth:
        c = text[j]
        if c == '"':
            pre = _interp_prefix(text, j)
            if text.startswith('"""', j):
                j = _skip_string(text, j + 3, True, bool(pre))
            else:
                j = _skip_string(text, j + 1, False, bool(pre))
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        j += 1
    return j


def _interp_prefix(text: str, i: int) -> str:
    m = re.search(r"(?<![\w$])(s|f|raw)$", text[max(0, i - 4):i])
    return m.group(1) if m else ""


_BRACKETS = {"(": ")", "[": "]", "{": "}"}


def match_close(masked: str, i: int) -> int:
    """Offset of the bracket closing the one at i (masked text)."""
    stack = []
    for j in range(i, len(masked)):
        c = masked[j]
        if c in _BRACKETS:
            stack.append(_BRACKETS[c])
        elif c in ")]}":
            if not stack:
                return -1
            if stack.pop() != c:
                pass
            if not stack:
                return j
    return -1


def top_level(masked: str, a: int, b: int) -> Iterator[int]:
    """Offsets in masked[a:b] outside the brackets opened there (brackets left out): the places
    where a separator or the end of an expression counts."""
    depth = 0
    for j in range(a, b):
        c = masked[j]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0:
            yield j


def split_top(masked: str, a: int, b: int, sep: str) -> list[tuple[int, int]]:
    """Spans of masked[a:b] split at top-level `sep` (a one-character separator)."""
    spans, start = [], a
    for j in top_level(masked, a, b):
        if masked[j] != sep:
            continue
        if sep == "+" and (masked[j + 1:j + 2] in ("+", "=") or masked[j - 1:j] in ("+",)):
            continue   # ++ and +=, not a concatenation
        spans.append((start, j))
        start = j + 1
    spans.append((start, b))
    return spans

