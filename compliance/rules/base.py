"""What every deterministic rule is, and the per-utterance analysis they share.

A rule is a small object with an id, the compliance code it reports and the source of the
obligation; `check` returns hits (empty when the utterance passes). The `Analysis` normalises and
splits the utterance once so that twelve rules do not each re-tokenise it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from compliance.codes import ComplianceCode, is_hard
from compliance.figures import ExtractedFigure, extract_figures, money_amounts
from compliance.knowledge import KnowledgeBase
from compliance.knowledge.prefilter import FilteredPattern, LiteralScanner, Scan, ScannedPattern
from compliance.models import RuleHit, UtteranceContext
from compliance.text import Clause, normalise, own_clauses, sentences, strip_quotes

_DIGIT = re.compile(r"\d")
_T = TypeVar("_T")


class cached_property(Generic[_T]):  # named after the functools descriptor it replaces
    """`functools.cached_property` without its lock (Python 3.11 takes one on every first access,
    which costs more than most of what an `Analysis` computes). The value lands in the instance's
    `__dict__`, so later reads are plain attribute reads. An analysis belongs to one thread."""

    def __init__(self, func: Callable[[Any], _T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> _T:
        if instance is None:
            return self  # type: ignore[return-value]
        value = instance.__dict__[self.name] = self.func(instance)
        return value


class Analysis:
    """Lazily computed views of one utterance context, shared by all rules.

    With the engine's `LiteralScanner`, each text is also scanned once for the literals of every
    pattern the rules use (`advisor_scan` and friends); a rule passes the scan of a text along with
    the text, or a sentence or clause of it, and only the patterns' candidate branches run.
    Without a scanner the scans are None and patterns gate themselves.
    """

    def __init__(
        self,
        ctx: UtteranceContext,
        reported_speech: re.Pattern[str] | FilteredPattern | ScannedPattern,
        scanner: LiteralScanner | None = None,
    ) -> None:
        self.ctx = ctx
        self._reported = reported_speech
        self._scanner = scanner
        # Results that more than one rule needs (e.g. scam flags), computed once per utterance and
        # keyed by what computed them (name and owner: two engines may share an analysis).
        self.memo: dict[object, object] = {}

    def scan(self, text: str) -> Scan | None:
        """A scan of `text` (None without a scanner)."""
        return None if self._scanner is None else self._scanner.scan(text)

    @cached_property
    def advisor_scan(self) -> Scan | None:
        """Covers the normalised reply and its sentences."""
        return self.scan(self.advisor)

    @cached_property
    def unquoted_scan(self) -> Scan | None:
        """Covers the unquoted reply, its sentences and own clauses (and `own_text`, one clause a
        line: no scanned literal spans a line break)."""
        if self.advisor_unquoted == self.advisor:
            return self.advisor_scan
        return self.scan(self.advisor_unquoted)

    @cached_property
    def customer_scan(self) -> Scan | None:
        return self.scan(self.customer)

    @cached_property
    def customer(self) -> str:
        return normalise(self.ctx.customer_utterance)

    @cached_property
    def advisor(self) -> str:
        return normalise(self.ctx.advisor_utterance)

    @cached_property
    def advisor_unquoted(self) -> str:
        return strip_quotes(self.advisor)

    @cached_property
    def advisor_sentences(self) -> list[str]:
        return sentences(self.advisor)

    @cached_property
    def customer_sentences(self) -> list[str]:
        return sentences(self.customer)

    @cached_property
    def unquoted_sentences(self) -> list[str]:
        if self.advisor_unquoted == self.advisor:  # nothing quoted (the usual case): split once
            return self.advisor_sentences
        return sentences(self.advisor_unquoted)

    @cached_property
    def own_clauses(self) -> list[Clause]:
        """The advisor's own words: quotes blanked, reported speech dropped."""
        reported = self._reported
        if isinstance(reported, ScannedPattern):
            reported = reported.over(self.unquoted_scan)
        return own_clauses(self.advisor_unquoted, self.unquoted_sentences, reported)

    @cached_property
    def own_text(self) -> str:
        return "\n".join(c.text for c in self.own_clauses)

    @cached_property
    def _clause_starts(self) -> list[int]:
        starts, at = [], 0
        for clause in self.own_clauses:
            starts.append(at)
            at += len(clause.text) + 1
        return starts

    def clauses_touched(self, whole: FilteredPattern | ScannedPattern, scan: Scan | None = None) -> list[int]:
        """Indices of the own clauses that a match of `whole` (a MULTILINE pattern run over
        `own_text`, one clause a line) starts in, ends in or crosses, in order. A match confined to
        one clause is found by a search of the whole text or overlaps one that is, so checking
        only these clauses finds what checking every clause would, with one search instead of one
        per clause. A `ScannedPattern` is searched with `scan` (the unquoted reply's)."""
        text = self.own_text
        matches = whole.finditer(text, scan) if isinstance(whole, ScannedPattern) else whole.finditer(text)
        starts = self._clause_starts
        touched: set[int] = set()
        for match in matches:
            first = bisect_right(starts, match.start()) - 1
            last = bisect_right(starts, max(match.start(), match.end() - 1)) - 1
            touched.update(range(first, last + 1))
        return sorted(touched)

    @cached_property
    def customer_figures(self) -> list[ExtractedFigure]:
        return extract_figures(self.customer)

    @cached_property
    def advisor_figures(self) -> list[ExtractedFigure]:
        return extract_figures(self.advisor_unquoted)

    @cached_property
    def customer_amounts(self) -> list[float]:
        """The amounts of money the customer named (those of `customer_figures`, found alone)."""
        return money_amounts(self.customer)

    @cached_property
    def advisor_amounts(self) -> list[float]:
        """The amounts of money in the unquoted reply (those of `advisor_figures`, found alone)."""
        return money_amounts(self.advisor_unquoted)

    @cached_property
    def has_digits_or_fractions(self) -> bool:
        """Cheap gate for the figure check: no digit and no spelt-out fraction, no figure."""
        text = self.advisor_unquoted
        return _DIGIT.search(text) is not None or "quarter" in text or "third" in text or "half" in text

    @cached_property
    def situation(self) -> str:
        return normalise(self.ctx.customer.situation)

    @cached_property
    def earlier_advisor(self) -> str:
        return normalise(" ".join(t.text for t in self.ctx.history if t.speaker == "advisor"))


class Rule(Protocol):
    rule_id: str
    code: ComplianceCode
    source: str

    def check(self, analysis: Analysis) -> list[RuleHit]: ...


class BaseRule:
    """Common plumbing: identity, and building hits that carry the code's hard flag."""

    rule_id: str = ""
    code: ComplianceCode
    source: str = ""

    def hit(self, message: str, evidence: str = "", code: ComplianceCode | None = None) -> RuleHit:
        code = code or self.code
        return RuleHit(
            rule_id=self.rule_id,
            code=code,
            message=message,
            source=self.source,
            hard=is_hard(code),
            evidence=evidence.strip(),
        )


def cleared_by(prefix: str, guard: re.Pattern[str], window: int | None = None) -> bool:
    """True when a guard phrase appears in the text before a match (optionally only just before)."""
    if window is not None:
        prefix = prefix[-window:]
    return guard.search(prefix) is not None


def kb_source(kb: KnowledgeBase, *regulation_ids: str) -> str:
    """The source line for a rule, read from the knowledge base's regulations."""
    return "; ".join(kb.regulation(rid).source for rid in regulation_ids)
