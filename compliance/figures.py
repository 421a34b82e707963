"""Finding figures (money, percentages, ages, years) in text.

Extraction is kept apart from checking so it can be tested on its own (property tests round-trip
formatted figures through it) and reused by the advisor's tools.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from compliance.knowledge.prefilter import fast_form

FigureKind = Literal["money", "percent", "age", "year"]

_MULTIPLIERS = {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}
_MONEY_SIGN = r"£\s?(?P<num>\d{1,3}(?:,\d{3})+|\d+)(?P<dec>\.\d{1,2})?(?:\s?(?P<mult>k|m|bn|million|thousand|billion)\b)?"
_MONEY = re.compile(
    _MONEY_SIGN + r"|\b(?P<num2>\d{1,3}(?:,\d{3})+|\d+)(?P<dec2>\.\d{1,2})?\s?(?:pounds|quid)\b"
)
# Without "pound" or "quid" in the text only the first branch can match: run it alone (it opens
# with "£", so `re` jumps from sign to sign; the second branch is tried at every position).
_MONEY_SIGN_ONLY = re.compile(_MONEY_SIGN)
# `(?<![\d.])(?P<num>\d{1,3}(?:\.\d+)?)\s?(?:%|per ?cent\b|percent\b)`, with the look-behind
# moved behind the first digit so that `re` jumps from digit to digit (the same matches).
_PERCENT = re.compile(r"(?P<num>\d(?<![\d.]\d)\d{0,2}(?:\.\d+)?)\s?(?:%|per ?cent\b|percent\b)")
_WORD_FRACTIONS = {
    "a quarter": 25.0,
    "one quarter": 25.0,
    "three quarters": 75.0,
    "a third": 100 / 3,
    "one third": 100 / 3,
    "two thirds": 200 / 3,
    "half": 50.0,
}
_WORD_PERCENT = re.compile(fast_form(r"\b(?:" + "|".join(_WORD_FRACTIONS) + r")\b"))
_AGE_LEADS = (
    r"age|aged|ages|age of|the age of|at|from|until|till|before|after|reach|reaching|reaches|turn|turning|turns|"
    r"over|under|you're|you are|i'm|i am|when you're|when you are|when you turn|when you reach|by"
)
_AGE_NOT_FOLLOWED = (
    r"(?!\s*(?:%|per\s?cent|percent|,\d|\.\d|k\b|million|years?\b(?!\s+old)|months?|weeks?|days?|hours?"
    r"|minutes?|pounds|quid))"
)
# Each pattern captures the number as `num` and, where there is one, the word before it as `lead`
# ("from 55", "until 57", "at 67"): the figure check reads the lead to tell a minimum from an example.
# (Compiled through `fast_form`, which at most moves a leading `\b` behind the first letter.)
_AGE_PATTERNS = tuple(
    re.compile(fast_form(pattern))
    for pattern in (
        r"\b(?P<lead>(?:"
        + _AGE_LEADS
        + r")(?:\s+(?:the\s+)?age(?:\s+of)?)?)\s+(?P<num>\d{2,3})\b"
        + _AGE_NOT_FOLLOWED,
        r"\b(?P<num>\d{2,3})(?:\s+|-)years?[\s-]old\b",
        # "the earliest you can normally get at your pension is 55": the age closes a clause about a boundary.
        r"\b(?P<lead>earliest|minimum|youngest)\b[^.;,?!]{0,50}?\b(?:is|be|at|from)\s+(?P<num>\d{2})\b"
        r"(?!\s*(?:%|,\d|\.\d|years?\b(?!\s+old)|months?|weeks?|days?))",
        r"\b(?P<lead>rises?|rising|going up|goes up|increases?|increasing|moving|moves|move|go up|up)\s+"
        r"(?:from\s+\d{2}\s+)?to\s+(?P<num>\d{2})\b(?!\s*(?:%|,\d))",
        r"\b(?P<lead>age)\s+(?:is|will be|would be|is likely to be|is currently|was|of)\s+(?P<num>\d{2})\b(?!\s*%)",
    )
)
_DIGIT = re.compile(r"\d")
_SPACE_TWO_DIGITS = re.compile(r"\s\d\d")
_TO_TWO_DIGITS = re.compile(r"to\s+\d\d")
# Each age pattern with a cheap test for what it cannot match without (same order as above).
_AGE_PATTERNS_GATED = (
    (_AGE_PATTERNS[0], lambda t: _SPACE_TWO_DIGITS.search(t) is not None),
    (_AGE_PATTERNS[1], lambda t: "old" in t),
    (_AGE_PATTERNS[2], lambda t: "earliest" in t or "minimum" in t or "youngest" in t),
    (_AGE_PATTERNS[3], lambda t: _TO_TWO_DIGITS.search(t) is not None),
    (_AGE_PATTERNS[4], lambda t: "age" in t),
)
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
# A year is four digits not part of an amount ("£2,015", "2015%") or a tax year ("2015/16"); a
# comma after it ends a clause ("banned since 2015, so...").
# (Written `(?<![£\d,./])\b(?P<year>19[5-9]\d|20[0-9]\d)` with both look-behinds moved behind the
# first digit, so that `re` jumps from "1" or "2" to the next: the same matches.)
_YEAR = re.compile(
    r"(?P<year>1(?<![£\d,./]1)(?<=\b1)9[5-9]\d|2(?<![£\d,./]2)(?<=\b2)0[0-9]\d)\b(?!\s?/\s?\d)(?!%|\d|,\d)"
)
_TAX_YEAR = re.compile(fast_form(r"\b20\d\d/\d\d\b"))
_AGE_RANGE = range(16, 111)


@dataclass(frozen=True)
class ExtractedFigure:
    kind: FigureKind
    value: float
    start: int
    end: int
    text: str
    lead: str = ""


def _money_value(match: re.Match[str]) -> float:
    groups = match.groupdict()  # the sign-only pattern has no num2 or dec2
    num = groups["num"] or groups["num2"]
    dec = groups["dec"] or groups.get("dec2") or ""
    value = float(num.replace(",", "") + dec)
    mult = match.group("mult")
    return value * _MULTIPLIERS[mult] if mult else value


def _overlaps(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in taken)


def _money_matches(text: str, digits: bool) -> list[re.Match[str]]:
    """The money matches of `text` (`digits`: whether it holds a digit), found as `extract_figures`
    finds them: amounts come first there, so nothing else found changes them."""
    words = "pound" in text or "quid" in text
    if not digits or ("£" not in text and not words):
        return []
    return list((_MONEY if words else _MONEY_SIGN_ONLY).finditer(text))


def money_amounts(text: str) -> list[float]:
    """The values of the money figures `extract_figures(text)` finds, in order, without looking for
    the other kinds (for code that needs only the amounts of a long text)."""
    if "£" not in text and "pound" not in text and "quid" not in text:
        return []
    return [_money_value(m) for m in _money_matches(text, _DIGIT.search(text) is not None)]


def extract_figures(text: str) -> list[ExtractedFigure]:
    """All figures in already-normalised (lower-case) text, in order of appearance."""
    # Each pattern runs only when the text has what it cannot match without (a digit, "£", "%",
    # a fraction word...): most sentences have no figure, and these tests cost far less than a scan.
    digits = _DIGIT.search(text) is not None
    fractions = "quarter" in text or "third" in text or "half" in text
    if not digits and not fractions:
        return []
    found: list[ExtractedFigure] = []
    taken: list[tuple[int, int]] = []
    for m in _money_matches(text, digits):
        found.append(ExtractedFigure("money", _money_value(m), m.start(), m.end(), m.group()))
        taken.append(m.span())
    if digits and ("%" in text or "cent" in text):
        for m in _PERCENT.finditer(text):
            if _overlaps(m.span(), taken):
                continue
            found.append(ExtractedFigure("percent", float(m.group("num")), m.start(), m.end(), m.group()))
            taken.append(m.span())
    if fractions:
        for m in _WORD_PERCENT.finditer(text):
            found.append(
                ExtractedFigure("percent", _WORD_FRACTIONS[m.group()], m.start(), m.end(), m.group())
            )
            taken.append(m.span())
    if not digits:
        found.sort(key=lambda f: f.start)
        return found
    if "/" in text:
        for m in _TAX_YEAR.finditer(text):
            taken.append(m.span())  # "2026/27" names a tax year, not a claim about a year
    ages: dict[tuple[int, int], ExtractedFigure] = {}
    for pattern, gate in _AGE_PATTERNS_GATED:
        if not gate(text):
            continue
        for m in pattern.finditer(text):
            span = m.span("num")
            value = int(m.group("num"))
            if value not in _AGE_RANGE or span in ages or _overlaps(span, taken):
                continue
            lead = m.groupdict().get("lead") or ""
            ages[span] = ExtractedFigure("age", float(value), span[0], span[1], m.group(), lead.strip())
    found.extend(ages.values())
    taken.extend(ages)
    for m in _YEAR.finditer(text) if ("19" in text or "20" in text) else ():
        if _overlaps(m.span(), taken):
            continue
        found.append(ExtractedFigure("year", float(m.group("year")), m.start(), m.end(), m.group()))
    found.sort(key=lambda f: f.start)
    return found
