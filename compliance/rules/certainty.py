"""False certainty and promised outcomes (COBS 4.2.1R fair, clear and not misleading; COBS 4.6).

A promised outcome is also reported as false certainty: promising a market-dependent result
presents an uncertain future as certain (this is how the development data is labelled too).
"""

from __future__ import annotations

import re

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.knowledge.prefilter import FilteredPattern
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule, cleared_by, kb_source


class _PatternRule(BaseRule):
    guard_id: str = ""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.source = kb_source(kb, "fair_clear_not_misleading")
        self._patterns = kb.patterns("prohibited", self.code)
        # Over the advisor's own words one clause a line, so "^" and "$" still mean clause edges.
        self._any = FilteredPattern([p.pattern for p in self._patterns], re.MULTILINE)
        # (description, per-clause regex, whole-text regex) read once from the pydantic items.
        self._compiled = [
            (p.description, p.regex, FilteredPattern.of(p.pattern, re.MULTILINE)) for p in self._patterns
        ]
        self._guard = next(p.regex for p in kb.patterns("permitted", self.code) if p.id == self.guard_id)
        # A clause that names a scam tactic ("promises of guaranteed returns are a red flag")
        # describes someone else's claim, not the advisor's.
        self._named = kb.lexicon("pressure_named").regex

    def matches(self, a: Analysis) -> list[tuple[str, str]]:
        # Each pattern is searched for in the advisor's own words as a whole; only the clauses its
        # matches touch are then checked, clause by clause and in order.
        if not self._any.may_match(a.own_text):
            return []
        touched = [
            (description, regex, set(a.clauses_touched(whole)))
            for description, regex, whole in self._compiled
            if whole.may_match(a.own_text)
        ]
        touched = [t for t in touched if t[2]]
        if not touched:
            return []
        found: list[tuple[str, str]] = []
        for index, clause in enumerate(a.own_clauses):
            if not any(index in clauses for _, _, clauses in touched) or self._named.search(clause.text):
                continue
            for description, regex, clauses in touched:
                if index not in clauses:
                    continue
                match = regex.search(clause.text)
                if match and not cleared_by(clause.text[: match.start()], self._guard):
                    found.append((description, clause.text))
        return found


class FalseCertaintyRule(_PatternRule):
    rule_id = "certainty.false"
    code = ComplianceCode.FALSE_CERTAINTY
    guard_id = "fc.hedged"

    def check(self, a: Analysis) -> list[RuleHit]:
        found = self.matches(a)
        return [self.hit(found[0][0], found[0][1])] if found else []


class PromisedOutcomeRule(_PatternRule):
    rule_id = "certainty.promise"
    code = ComplianceCode.PROMISES_OUTCOME
    guard_id = "po.hedged"

    def check(self, a: Analysis) -> list[RuleHit]:
        found = self.matches(a)
        if not found:
            return []
        description, evidence = found[0]
        return [
            self.hit(description, evidence),
            self.hit(
                "A promised outcome presents an uncertain future as certain.",
                evidence,
                code=ComplianceCode.FALSE_CERTAINTY,
            ),
        ]
