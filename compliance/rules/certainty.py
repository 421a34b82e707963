"""False certainty and promised outcomes (COBS 4.2.1R fair, clear and not misleading; COBS 4.6).

A promised outcome is also reported as false certainty: promising a market-dependent result
presents an uncertain future as certain (this is how the development data is labelled too).
"""

from __future__ import annotations

import re

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule, cleared_by, kb_source


class _PatternRule(BaseRule):
    guard_id: str = ""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.source = kb_source(kb, "fair_clear_not_misleading")
        self._patterns = kb.patterns("prohibited", self.code)
        self._any = re.compile("|".join(f"(?:{p.pattern})" for p in self._patterns))
        self._guard = next(p.regex for p in kb.patterns("permitted", self.code) if p.id == self.guard_id)

    def matches(self, a: Analysis) -> list[tuple[str, str]]:
        if not self._any.search(a.own_text):
            return []
        found: list[tuple[str, str]] = []
        for clause in a.own_clauses:
            for pattern in self._patterns:
                match = pattern.regex.search(clause.text)
                if match and not cleared_by(clause.text[: match.start()], self._guard):
                    found.append((pattern.description, clause.text))
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
