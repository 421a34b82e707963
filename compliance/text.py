"""Text preparation shared by the rules: normalise once, split once, strip what is not the advisor's.

Rules look at clauses because negation and hedging work at clause level ("I can't say which is the
best option for you" clears "the best option for you", but "...; the best option for you is
drawdown" does not). Quoted speech and reported speech are removed before looking for prohibited
language, since repeating what the customer or a friend said is not the firm's recommendation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TRANSLATE = str.maketrans(
    {
        "\u2019": "'",
        "\u2018": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2014": " - ",
        "\u2013": " - ",
        "\u00a0": " ",
        "\u2026": "...",
    }
)
_SPACES = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# Clause boundaries: semicolons, colons, dashes, and conjunctions that start a new proposition.
_CLAUSE_BREAK = re.compile(
    r";|:\s|\s-\s|\(|\)|,?\s+\bbut\b\s|,?\s+\bwhile\b\s|,?\s+\bwhereas\b\s|,?\s+\bhowever\b,?\s|"
    r",\s+and\s|,\s+so\s|,?\s+\b(?:al)?though\b\s"
)
_DOUBLE_QUOTED = re.compile(r'"[^"]*"')
# A single-quoted span opens after a space or bracket and closes before punctuation or a space,
# so apostrophes inside words (don't, you'd) are never taken for quotes.
_SINGLE_QUOTED = re.compile(r"(?:(?<=^)|(?<=[\s(\[]))'[^'\n]{1,200}?[a-z0-9.,!?%)]'(?=[\s.,;:!?)]|$)")


def normalise(text: str) -> str:
    """Lower-case with straight quotes, spaced dashes and single spaces."""
    return _SPACES.sub(" ", text.translate(_TRANSLATE)).strip().lower()


def strip_quotes(text: str) -> str:
    """Blank out quoted spans (keeping length, so offsets stay valid)."""
    text = _DOUBLE_QUOTED.sub(lambda m: " " * len(m.group()), text)
    return _SINGLE_QUOTED.sub(lambda m: " " * len(m.group()), text)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def clauses(sentence: str) -> list[str]:
    return [c.strip() for c in _CLAUSE_BREAK.split(sentence) if c and c.strip()]


def strip_reported(clause: str, reported: re.Pattern[str]) -> str:
    """Drop what follows a reporting verb ("your neighbour said you should ...") in a clause."""
    match = reported.search(clause)
    return clause if match is None else clause[: match.start()]


@dataclass(frozen=True)
class Clause:
    text: str
    sentence_index: int


def advisor_clauses(text: str, reported: re.Pattern[str]) -> list[Clause]:
    """The advisor's own words, clause by clause: quotes blanked, reported speech dropped."""
    out: list[Clause] = []
    unquoted = strip_quotes(text)
    any_reported = reported.search(unquoted) is not None  # most replies report no one: skip per clause
    for index, sentence in enumerate(sentences(unquoted)):
        for clause in clauses(sentence):
            own = (strip_reported(clause, reported) if any_reported else clause).strip()
            if own:
                out.append(Clause(own, index))
    return out
