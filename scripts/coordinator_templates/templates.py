"""Message expressions -> templates: the literal text and placeholders of a log call's message."""
from __future__ import annotations

import itertools
import re
from collections.abc import Callable

from scripts.coordinator_templates.lexing import Lit, match_close, split_top
from scripts.coordinator_templates.loggers import KNOWN_CONSTANTS

# ---------------------------------------------------------------------------------------------
# Message expressions -> templates
# ---------------------------------------------------------------------------------------------

PH = object()   # marker: ("ph", expr)


def _unescape(body: str) -> str:
    out, i = [], 0
    simple = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\",
              "s": " "}
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            d = body[i + 1]
            if d == "u":
                j = i + 1
                while j < len(body) and body[j] == "u":
                    j += 1
                out.append(chr(int(body[j:j + 4], 16)))
                i = j + 4
                continue
            if d in "01234567":
                m = re.match(r"[0-7]{1,3}", body[i + 1:])
                assert m is not None   # d is an octal digit
                out.append(chr(int(m.group(0), 8)))
                i += 1 + len(m.group(0))
                continue
            out.append(simple.get(d, d))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _norm_expr(expr: str) -> str:
    return re.sub(r"\s+", " ", expr).strip()


class Builder:
    """Turns the message argument of one log call into segments: str (literal text) or (PH, expr)."""

    def __init__(self, text: str, masked: str, lits: list[Lit], scala: bool, constants: dict[str, str]):
        self.text, self.masked, self.scala, self.constants = text, masked, scala, constants
        self.lit_at = {lit.start: lit for lit in lits}
        self.unresolved = False

    # one literal --------------------------------------------------------------------------
    def literal(self, lit: Lit) -> list:
        raw = self.text[lit.start:lit.end]
        raw = raw[len(lit.prefix):]
        body = raw[3:-3] if lit.kind in ("triple", "interp_triple") else raw[1:-1]
        if lit.kind in ("plain",):
            return [_unescape(body)]
        if lit.kind == "triple":
            return [body]
        return self.interpolated(body, lit.prefix, triple=lit.kind == "interp_triple")

    def interpolated(self, body: str, prefix: str, triple: bool) -> list:
        segs: list = []
        buf: list[str] = []
        i = 0

        def flush() -> None:
            if buf:
                s = "".join(buf)
                segs.append(s if (triple or prefix == "raw") else _unescape(s))
                buf.clear()

        while i < len(body):
            c = body[i]
            if c == "$" and body.startswith("$$", i):
                buf.append("$")
                i += 2
                continue
            if c == "$" and body.startswith("${", i):
                # find the matching brace (strings inside are rare; count braces)
                depth, j = 1, i + 2
                while j < len(body) and depth:
                    if body[j] == "{":
                        depth += 1
                    elif body[j] == "}":
                        depth -= 1
                    j += 1
                expr = body[i + 2:j - 1]
                flush()
                segs.append(self.placeholder(expr))
                i = j
                i = self._skip_fspec(body, i, prefix)
                continue
            if c == "$":
                m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", body[i + 1:])
                if m:
                    flush()
                    segs.append(self.placeholder(m.group(0)))
                    i += 1 + len(m.group(0))
                    i = self._skip_fspec(body, i, prefix)
                    continue
            if c == "\\" and not triple and prefix != "raw" and i + 1 < len(body):
                buf.append(body[i:i + 2])
                i += 2
                continue
            buf.append(c)
            i += 1
        flush()
        if prefix == "f":
            segs = [s.replace("%%", "%") if isinstance(s, str) else s for s in segs]
        return segs

    @staticmethod
    def _skip_fspec(body: str, i: int, prefix: str) -> int:
        if prefix == "f":
            m = re.match(r"%[-#+ 0,(]*\d*(?:\.\d+)?[a-zA-Z]", body[i:])
            if m:
                return i + len(m.group(0))
        return i

    def placeholder(self, expr: str):
        e = _norm_expr(expr)
        if e in KNOWN_CONSTANTS:
            return KNOWN_CONSTANTS[e]
        if e in self.constants:
            return self.constants[e]
        return (PH, e)

    # an expression ------------------------------------------------------------------------
    def expr(self, a: int, b: int) -> list:
        """Segments of the expression text[a:b]."""
        while a < b and self.masked[a].isspace():
            a += 1
        while b > a and self.masked[b - 1].isspace():
            b -= 1
        parts = split_top(self.masked, a, b, "+")
        if len(parts) > 1:
            out: list = []
            for pa, pb in parts:
                out.extend(self.expr(pa, pb))
            return out
        code = self.masked[a:b]
        # a literal, possibly followed by .format(...) / .stripMargin / .trim
        if a in self.lit_at and self.lit_at[a].end <= b:
            lit = self.lit_at[a]
            rest = self.masked[lit.end:b].strip()
            segs = self.literal(lit)
            if rest == "":
                return segs
            return self.postfix(segs, lit.end, b, a, b)
        # ( ... ) possibly followed by .format(...)
        if code.startswith("("):
            close = match_close(self.masked, a)
            if close == b - 1:
                return self.expr(a + 1, close)
            if close > 0:
                inner = self.expr(a + 1, close)
                if all(isinstance(s, str) for s in inner) or self.masked[close + 1:b].strip().startswith(".format"):
                    return self.postfix(inner, close + 1, b, a, b)
        m = re.match(r"String\.format\s*\(", code)
        if m:
            open_ = a + m.end() - 1
            close = match_close(self.masked, open_)
            args = split_top(self.masked, open_ + 1, close, ",")
            fmt = self.expr(*args[0])
            return self.apply_format(fmt, [self.text[x:y] for x, y in args[1:]])
        return [self.placeholder(self.text[a:b])]

    def postfix(self, segs: list, p: int, b: int, a0: int, b0: int) -> list:
        rest = self.masked[p:b]
        m = re.match(r"\s*\.format\s*\(", rest)
        if m:
            open_ = p + m.end() - 1
            close = match_close(self.masked, open_)
            args = [self.text[x:y] for x, y in split_top(self.masked, open_ + 1, close, ",")]
            out = self.apply_format(segs, args)
            if self.masked[close + 1:b].strip():
                return [self.placeholder(self.text[a0:b0])]
            return out
        if re.fullmatch(r"\s*\.(stripMargin|trim|toString)(\(\))?\s*", rest):
            return segs
        return [self.placeholder(self.text[a0:b0])]

    def apply_format(self, segs: list, args: list[str]) -> list:
        sequential = itertools.count()   # the argument of the next conversion without an n$ index

        def fill(s: str) -> list:
            out: list = []
            pos = 0
            for m in re.finditer(r"%(\d+\$)?[-#+ 0,(]*\d*(?:\.\d+)?([a-zA-Z%])", s):
                out.append(s[pos:m.start()])
                conv = m.group(2)
                if conv == "%":
                    out.append("%")
                elif conv == "n":
                    out.append("\n")
                else:
                    idx = int(m.group(1)[:-1]) - 1 if m.group(1) else next(sequential)
                    out.append(self.placeholder(args[idx]) if idx < len(args) else (PH, "?"))
                pos = m.end()
            out.append(s[pos:])
            return out
        return fill_literals(segs, fill)


def fill_literals(segs: list, fill: Callable[[str], list]) -> list:
    """`segs` with each literal text replaced by the segments fill() makes of it, placeholders
    kept: a format call's arguments go only where its literal text asks for them."""
    out: list = []
    for s in segs:
        out.extend(fill(s) if isinstance(s, str) else [s])
    return out


def fill_slf4j(segs: list, args: list[str], b: Builder) -> tuple[list, list[str]]:
    """Java: `{}` in the literal text take the call's further arguments, in order."""
    rest = iter(args)

    def fill(s: str) -> list:
        out: list = []
        parts = s.split("{}")
        for idx, part in enumerate(parts):
            out.append(part)
            if idx < len(parts) - 1:
                arg = next(rest, None)
                out.append("{}" if arg is None else (PH, _norm_expr(arg)))   # more {} than arguments: printed as is
        return out
    return fill_literals(segs, fill), list(rest)


def render(segs: list) -> tuple[str, list[str]]:
    """Template text with {} for each placeholder, and the placeholder expressions."""
    text, exprs = [], []
    for s in segs:
        if isinstance(s, str):
            text.append(s)
        else:
            text.append("{}")
            exprs.append(s[1])
    return "".join(text), exprs

