"""Rebalance reasons: the strings that reach "Preparing to rebalance group ... (reason: ...)"."""
from __future__ import annotations

import re

from scripts.coordinator_templates.lexing import LIT_FILL, mask, match_close, split_top, top_level
from scripts.coordinator_templates.sources import _line_index
from scripts.coordinator_templates.templates import Builder, render

# ---------------------------------------------------------------------------------------------
# Rebalance reasons: the strings that reach "Preparing to rebalance group ... (reason: ...)"
# ---------------------------------------------------------------------------------------------

# Calls whose string arguments become (or carry) the rebalance reason, and variables holding one.
_REASON_SINK = re.compile(
    r"(?<![\w$])(prepareRebalance|maybePrepareRebalance|maybePrepareRebalanceOrCompleteJoin|"
    r"\w*ThenRebalanceOrCompleteJoin|\w*AndRebalance|removeMemberAndUpdateGroup|"
    r"removeMemberAndUpdateClassicGroup|convertToClassicGroup|\w*[Dd]owngrade\w*)\s*\(")
_REASON_VAR = re.compile(r"(?<![\w$])(?:val|var|String|final String)?\s*(\w*[Rr]eason)\s*=(?!=)\s*")
REASON_FILES = ("GroupCoordinator.scala", "GroupMetadataManager.java")
REASON_IGNORE = {"not provided", "{}", ""}


def extract_reasons(path: str, text: str, constants: dict[str, str]) -> list[tuple[str, list[str], int]]:
    scala = path.endswith(".scala")
    masked, lits = mask(text, scala)
    builder = Builder(text, masked, lits, scala, constants)
    line_of = _line_index(text)
    spans: list[tuple[int, int, int]] = []
    for m in _REASON_SINK.finditer(masked):
        if re.search(r"(def|void|>|\w)\s+$", masked[max(0, m.start() - 40):m.start()]) and \
                re.search(r"(def|private|public|protected|CoordinatorResult<[^>]*>|void)\s+\S*\s*$",
                          masked[max(0, m.start() - 80):m.start()]):
            continue   # a declaration, not a call
        open_ = m.end() - 1
        close = match_close(masked, open_)
        if close < 0:
            continue
        for a, b in split_top(masked, open_ + 1, close, ","):
            spans.append((a, b, m.start()))
    for m in _REASON_VAR.finditer(masked):
        a = m.end()
        b = a
        depth = 0
        while b < len(masked):
            c = masked[b]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                if depth == 0:
                    break
                depth -= 1
            elif (c == ";" and depth == 0) or (c == "\n" and depth == 0 and scala
                                               and not masked[a:b].rstrip().endswith("+")
                                               and not masked[b + 1:].lstrip().startswith("+")):
                break
            b += 1
        spans.append((a, b, m.start()))
    out = []
    for a, b, _at in spans:
        for x, y in _split_ternary(masked, a, b):
            if LIT_FILL not in masked[x:y]:
                continue
            code = masked[x:y].strip()
            if re.match(r"(new\s+\w+|\w+\.\w+\(|Some\(|Option\()", code) and not code.startswith("String.format"):
                continue   # an exception or a wrapped value, not a reason text
            segs = builder.expr(x, y)
            tpl, exprs = render(segs)
            literal_text = "".join(s for s in segs if isinstance(s, str))
            if tpl in REASON_IGNORE or len(re.findall(r"[A-Za-z]", literal_text)) < 4:
                continue
            if "getOrElse" in code:
                continue
            out.append((tpl, exprs, line_of(x)))
    return out


def _split_ternary(masked: str, a: int, b: int) -> list[tuple[int, int]]:
    """Java `c ? x : y` -> the spans of x and y (recursively); anything else as is."""
    q = -1
    for j in top_level(masked, a, b):
        c = masked[j]
        if c == "?" and q < 0:
            q = j
        elif c == ":" and q >= 0 and masked[j + 1:j + 2] != ":" and masked[j - 1:j] != ":":
            return _split_ternary(masked, q + 1, j) + _split_ternary(masked, j + 1, b)
    return [(a, b)]

