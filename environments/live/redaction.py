"""Removing personal data from a real consultation before it may become a case.

What goes: names (the ones the firm holds, and names people introduce in the text), addresses
and postcodes, dates of birth and other full dates, National Insurance numbers, bank account
numbers, sort codes, card numbers, IBANs, policy and reference numbers, e-mail addresses and
phone numbers. What stays: what guidance turns on (ages, pot values in pounds, years, providers'
names, the question asked), because a case without it teaches nothing.

It errs towards removing: any run of six or more digits that is not a sum of money goes, and so
does any full date, birth date or not. Each kind is replaced by a bracketed label, so a reviewer
can see what was there.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, Field

_MONTHS = (
    "jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    "sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
_STREET_TYPES = (
    "road|rd|street|st|avenue|ave|lane|ln|close|drive|dr|way|crescent|court|ct|place|pl|gardens|"
    "terrace|grove|hill|park|square|sq|mews|row|walk|rise|view|green|parade|boulevard"
)
_NAME_WORD = r"[A-Z][a-z'’-]+"
_NAME = rf"{_NAME_WORD}(?:[ -]{_NAME_WORD}){{0,2}}"
# Words that follow "I'm" or "this is" but are not names.
_NOT_NAMES = {
    "I",
    "A",
    "An",
    "The",
    "My",
    "Not",
    "Just",
    "Very",
    "So",
    "Still",
    "Retired",
    "Worried",
    "Thinking",
    "Looking",
    "Hoping",
    "Planning",
    "Trying",
    "Sorry",
}

# (label, pattern), applied in order: the specific shapes before the generic digit runs.
PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("EMAIL", re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")),
    ("IBAN", re.compile(r"\bGB\d{2}\s?[A-Z]{4}(?:\s?\d){14}\b", re.IGNORECASE)),
    (
        "NI_NUMBER",
        re.compile(
            # Any two letters, not only the prefixes HMRC issues: examples and typos are personal too.
            r"\b[A-Z]{2}\s?\d{2}\s?\d{2}\s?\d{2}\s?[A-D]\b",
            re.IGNORECASE,
        ),
    ),
    ("CARD_NUMBER", re.compile(r"\b\d{4}(?:[ -]?\d{4}){3}\b")),
    ("SORT_CODE", re.compile(r"\b\d{2}[- ]\d{2}[- ]\d{2}\b")),
    ("PHONE", re.compile(r"(?:\+44\s?\(?0?\)?\s?|\b0)\d(?:[\s-]?\d){8,9}\b")),
    (
        "DATE",
        re.compile(
            rf"\b\d{{1,2}}[/.]\d{{1,2}}[/.]\d{{2,4}}\b|\b\d{{1,2}}-\d{{1,2}}-\d{{4}}\b|\b\d{{4}}-\d{{2}}-\d{{2}}\b"
            rf"|\b\d{{1,2}}(?:st|nd|rd|th)?(?: of)? (?:{_MONTHS})\.?,? \d{{4}}\b"
            rf"|\b(?:{_MONTHS})\.? \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}\b",
            re.IGNORECASE,
        ),
    ),
    ("DATE_OF_BIRTH", re.compile(r"(?<=\bborn in )\d{4}\b|(?<=\bborn )\d{4}\b", re.IGNORECASE)),
    ("POSTCODE", re.compile(r"\b[A-Z]{1,2}\d[A-Z\d]?\s*\d[A-Z]{2}\b", re.IGNORECASE)),
    (
        "ADDRESS",
        re.compile(
            rf"\b(?:flat|apartment|unit)\s+\d+[a-z]?,?\s+"
            rf"|\b\d{{1,4}}[a-z]?,?\s+(?:[A-Za-z'’-]+\s+){{1,3}}(?:{_STREET_TYPES})\b\.?",
            re.IGNORECASE,
        ),
    ),
    # Account, policy and membership numbers: letters mixed with five or more digits, or six or
    # more digits that are not money (no £ before, no thousands separators).
    ("ACCOUNT_NUMBER", re.compile(r"\b(?=[A-Z0-9-]*\d{5})[A-Z]{1,4}-?\d{5,}[A-Z]?\b", re.IGNORECASE)),
    ("ACCOUNT_NUMBER", re.compile(r"(?<![£$€\d,.])\b\d{6,}\b(?![,.]\d)")),
]
# A name someone introduces: "my name is Ann Smith", "I'm Ann", "Mrs Smith", "my husband Dev".
_INTRODUCED = [
    re.compile(rf"\b(?:[Mm]y name is|[Mm]y name's|[Cc]all me|[Tt]his is|I am|I'm|I’m)\s+(?P<name>{_NAME})"),
    re.compile(rf"\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Sir|Dame)\.?\s+(?P<name>{_NAME})"),
    re.compile(
        rf"\b[Mm]y (?:husband|wife|partner|son|daughter|mother|mum|father|dad|brother|sister|"
        rf"friend|adviser|advisor|carer)(?:,)?\s+(?P<name>{_NAME})"
    ),
]


class Redaction(BaseModel):
    text: str
    found: dict[str, int] = Field(default_factory=dict)  # label -> how many were removed


class Redactor:
    """Redacts one consultation: `known_names` are the names the firm holds for the customer."""

    def __init__(self, known_names: Iterable[str] = ()) -> None:
        self.full = sorted(
            {" ".join(n.split()) for n in known_names if len(n.split()) > 1}, key=len, reverse=True
        )
        parts = {p for name in known_names for p in re.split(r"[\s,]+", name.strip()) if len(p) >= 2}
        self.known = sorted(parts, key=len, reverse=True)

    def names_in(self, text: str) -> list[str]:
        found: list[str] = []
        for pattern in _INTRODUCED:
            for match in pattern.finditer(text):
                words = [w for w in match.group("name").split() if w not in _NOT_NAMES]
                # "I'm Worried About..." stops at the first word that is not a name.
                if words and match.group("name").split()[0] == words[0]:
                    found.append(" ".join(words))
        return found

    def redact(self, text: str) -> Redaction:
        counts: Counter[str] = Counter()
        for label, pattern in PATTERNS:
            text, n = pattern.subn(f"[{label}]", text)
            counts[label] += n
        # A whole name the firm holds goes however it is written ("ann smith" too); single words
        # only where capitalised, since a name that is also a word ("May", "Grant") is common.
        for full in self.full:
            pattern = r"\s+".join(re.escape(w) for w in full.split())
            text, n = re.subn(rf"(?<![\w\[]){pattern}(?![\w\]])", "[NAME]", text, flags=re.IGNORECASE)
            counts["NAME"] += n
        names = set(self.known) | {w for name in self.names_in(text) for w in name.split()}
        forms = {form for name in names for form in (name, name.capitalize(), name.upper())}
        for form in sorted(forms, key=len, reverse=True):
            text, n = re.subn(rf"(?<![\w\[]){re.escape(form)}(?![\w\]])", "[NAME]", text)
            counts["NAME"] += n
        return Redaction(text=text, found={k: v for k, v in sorted(counts.items()) if v})

    def redact_all(self, texts: Iterable[str]) -> tuple[list[str], dict[str, int]]:
        """Redact several texts of one consultation; a name introduced in one goes from them all."""
        texts = list(texts)
        introduced = {w for t in texts for name in self.names_in(t) for w in name.split()}
        redactor = Redactor([*self.known, *introduced])
        out: list[str] = []
        total: Counter[str] = Counter()
        for t in texts:
            done = redactor.redact(t)
            out.append(done.text)
            total.update(done.found)
        return out, dict(sorted(total.items()))
