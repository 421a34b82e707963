"""False certainty and promised outcomes (COBS 4.2.1R fair, clear and not misleading; COBS 4.6).

A promised outcome is also reported as false certainty: promising a market-dependent result
presents an uncertain future as certain (this is how the development data is labelled too).
"""

from __future__ import annotations

import re

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.knowledge.prefilter import FilteredPattern, LiteralScanner, ScannedUnion, SliceGate
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule, kb_source


class _PatternRule(BaseRule):
    guard_id: str = ""

    def __init__(self, kb: KnowledgeBase, scanner: LiteralScanner | None = None) -> None:
        self.source = kb_source(kb, "fair_clear_not_misleading")
        scanner = scanner or LiteralScanner()
        # (description, per-clause regex, whole-text regex) read once from the pydantic items. The
        # whole-text regex runs over the advisor's own words one clause a line, so "^" and "$"
        # still mean clause edges.
        self._compiled = [
            (p.description, scanner.bind(p.regex), scanner.bind(FilteredPattern.of(p.pattern, re.MULTILINE)))
            for p in kb.patterns("prohibited", self.code)
        ]
        # Each pattern's relaxed form, searched once over the unquoted reply: where it finds
        # nothing, no clause can match and the reply need not be split into clauses at all.
        self._gates = [SliceGate(regex) for _, regex, _ in self._compiled]
        # All of them at once: most replies give none a candidate branch.
        self._any = ScannedUnion([regex for _, regex, _ in self._compiled])
        guard = next(p.regex for p in kb.patterns("permitted", self.code) if p.id == self.guard_id)
        self._guard = scanner.bind(guard)
        # A clause that names a scam tactic ("promises of guaranteed returns are a red flag")
        # describes someone else's claim, not the advisor's.
        self._named = scanner.bind(kb.lexicon("pressure_named").regex)

    def matches(self, a: Analysis) -> list[tuple[str, str]]:
        # Each pattern that can match (its relaxed form occurs in the reply) is searched for in the
        # advisor's own words as a whole; only the clauses its matches touch are then checked,
        # clause by clause and in order.
        scan, unquoted = a.unquoted_scan, a.advisor_unquoted
        if not self._any.may_match(scan):
            return []
        candidates = [
            entry
            for entry, gate in zip(self._compiled, self._gates, strict=True)
            if gate.may_match(unquoted, scan)
        ]
        if not candidates:
            return []
        touched = [
            (description, regex, set(a.clauses_touched(whole, scan)))
            for description, regex, whole in candidates
        ]
        touched = [t for t in touched if t[2]]
        if not touched:
            return []
        found: list[tuple[str, str]] = []
        for index, clause in enumerate(a.own_clauses):
            text = clause.text
            if not any(index in clauses for _, _, clauses in touched) or self._named.search(text, scan):
                continue
            for description, regex, clauses in touched:
                if index not in clauses:
                    continue
                match = regex.search(text, scan)
                if match and self._guard.search(text[: match.start()], scan) is None:
                    found.append((description, text))
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
