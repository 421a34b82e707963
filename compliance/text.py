"""Text preparation shared by the rules: normalise once, split once, strip what is not the advisor's.

Rules look at clauses because negation and hedging work at clause level ("I can't say which is the
best option for you" clears "the best option for you", but "...; the best option for you is
drawdown" does not). Quoted speech and reported speech are removed before looking for prohibited
language, since repeating what the customer or a friend said is not the firm's recommendation.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Protocol

# Typographic characters and their plain forms. Replaced one by one, and only when present:
# str.translate with a mapping looks every character up and costs several times more.
_PLAIN = (
    ("\u2019", "'"),
    ("\u2018", "'"),
    ("\u201c", '"'),
    ("\u201d", '"'),
    ("\u2014", " - "),
    ("\u2013", " - "),
    ("\u00a0", " "),
    ("\u2026", "..."),
)
# A sentence ends at ., ! or ? followed by white space (the mark stays with its sentence), or at
# a line break: `[.!?]\s+|\n+`, written to open with one character class (the look-behinds then
# tell which case it is) so that `re` jumps from mark to mark instead of trying every position.
_SENTENCE_END = re.compile(r"[.!?\n](?:(?<=[.!?])\s+|(?<=\n)\n*)")
# Clause boundaries: semicolons, colons, dashes, brackets, and conjunctions that start a new
# proposition (", and", ", so", "but", "while", "whereas", "however", "(al)though"). Written to
# open with a character class and confirm with look-behinds, so `re` skips ahead to the next
# candidate character instead of trying every branch at every position (3-5x faster splitting).
# After white space only a dash, more space or a conjunction's first letter can follow (the look-
# ahead turns away most spaces at once); the alternatives open with different characters, so their
# order does not change what matches.
_CLAUSE_BREAK = re.compile(
    r"[;(),:\s](?:(?<=[;()])|(?<=:)\s"
    r"|(?<=\s)(?=[-\sbwhat])(?:-\s|\s*(?:but|while|whereas|however,?|(?:al)?though)\s)"
    r"|(?<=,)\s+(?:but|while|whereas|however,?|(?:al)?though|and|so)\s)"
)
# Most sentences have no dash and none of those conjunctions (but, while, whereas, however,
# (al)though): there only punctuation breaks, and this pattern, opening with punctuation alone, finds
# the same breaks without stopping at every space.
_PUNCTUATION_BREAK = re.compile(r"[;(),:](?:(?<=[;()])|(?<=:)\s|(?<=,)\s+(?:and|so)\s)")
_DOUBLE_QUOTED = re.compile(r'"[^"]*"')
# A single-quoted span opens after a space or bracket (or at the start) and closes before
# punctuation or a space, so apostrophes inside words (don't, you'd) are never taken for quotes.
# It opens with the quote itself (the look-behind then checks what precedes it) so `re` can jump
# from quote to quote.
_SINGLE_QUOTED = re.compile(r"'(?<![^\s(\[]')[^'\n]{1,200}?[a-z0-9.,!?%)]'(?=[\s.,;:!?)]|$)")


def normalise(text: str) -> str:
    """Lower-case with straight quotes, spaced dashes and single spaces."""
    if not text.isascii():  # every typographic character is outside ASCII
        for fancy, plain in _PLAIN:
            if fancy in text:
                text = text.replace(fancy, plain)
    # An ASCII text with no control character (tab, line break...), no double space and no space
    # at either end is already single-spaced: the usual case, and split-and-join would copy it twice.
    if text.isascii() and text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text.lower()
    # str.split() splits on exactly the characters `\s` matches, and drops the ends.
    return " ".join(text.split()).lower()


def strip_quotes(text: str) -> str:
    """Blank out quoted spans (keeping length, so offsets stay valid)."""
    if '"' in text:
        text = _DOUBLE_QUOTED.sub(_blank, text)
    return _SINGLE_QUOTED.sub(_blank, text) if "'" in text else text


def _blank(match: re.Match[str]) -> str:
    return " " * (match.end() - match.start())


def sentences(text: str) -> list[str]:
    out: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        # A mark ends its sentence and stays with it; a line break is dropped.
        end = match.start() + (text[match.start()] != "\n")
        piece = text[start:end].strip()
        if piece:
            out.append(piece)
        start = match.end()
    piece = text[start:].strip()
    if piece:
        out.append(piece)
    return out


def clause_break(sentence: str) -> re.Pattern[str]:
    """The clause-break pattern to run over `sentence`: it finds what `_CLAUSE_BREAK` finds there."""
    if (
        "-" in sentence
        or "but" in sentence
        or "while" in sentence
        or "whereas" in sentence
        or "however" in sentence
        or "though" in sentence
    ):
        return _CLAUSE_BREAK
    return _PUNCTUATION_BREAK


def clauses(sentence: str) -> list[str]:
    return [c.strip() for c in clause_break(sentence).split(sentence) if c and c.strip()]


class Searcher(Protocol):
    """Anything with `re.Pattern`'s `search` (a compiled regex, a filtered or scanned pattern)."""

    def search(self, text: str) -> re.Match[str] | None: ...


def strip_reported(clause: str, reported: Searcher) -> str:
    """Drop what follows a reporting verb ("your neighbour said you should ...") in a clause."""
    match = reported.search(clause)
    return clause if match is None else clause[: match.start()]


class Clause(NamedTuple):
    """One clause of the advisor's own words (a tuple: made for every clause of every reply)."""

    text: str
    sentence_index: int


def advisor_clauses(text: str, reported: Searcher) -> list[Clause]:
    """The advisor's own words, clause by clause: quotes blanked, reported speech dropped."""
    unquoted = strip_quotes(text)
    return own_clauses(unquoted, sentences(unquoted), reported)


def own_clauses(unquoted: str, unquoted_sentences: list[str], reported: Searcher) -> list[Clause]:
    """`advisor_clauses` from an already unquoted text and its sentences (split once, shared)."""
    out: list[Clause] = []
    any_reported = reported.search(unquoted) is not None  # most replies report no one: skip per clause
    for index, sentence in enumerate(unquoted_sentences):
        for clause in clauses(sentence):
            own = (strip_reported(clause, reported) if any_reported else clause).strip()
            if own:
                out.append(Clause(own, index))
    return out
