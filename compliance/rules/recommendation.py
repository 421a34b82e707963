"""Personal recommendation: prohibited phrasing from the knowledge base, cleared by negation
("I can't say which is the best option for you"), by an indirect question just before it
("whether it's right for you"), and ignored inside quoted or reported speech."""

from __future__ import annotations

import re

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.knowledge.prefilter import FilteredPattern, LiteralScanner, Scan
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule, kb_source

# How close before a phrase an indirect-question word must be to make it a question being named.
_INDIRECT_WINDOW = 25


class PersonalRecommendationRule(BaseRule):
    rule_id = "recommendation.personal"
    code = ComplianceCode.PERSONAL_RECOMMENDATION

    def __init__(self, kb: KnowledgeBase, scanner: LiteralScanner | None = None) -> None:
        self.source = kb_source(kb, "advice_boundary")
        scanner = scanner or LiteralScanner()
        # Plain tuples, not the pydantic items: attribute access on models costs more than a match.
        self._patterns = [
            (
                p.id,
                p.description,
                scanner.bind(p.regex),
                None if p.unless is None else scanner.bind(p.unless),
                FilteredPattern.of(p.pattern, re.MULTILINE),
            )
            for p in kb.patterns("prohibited", self.code)
        ]
        guards = {p.id: p.regex for p in kb.patterns("permitted", self.code)}
        self._declines = scanner.bind(guards["pr.declines"])
        self._indirect = scanner.bind(guards["pr.indirect_question"])

    def check(self, a: Analysis) -> list[RuleHit]:
        # A pattern is only tried if its literals occur in the advisor's own words (the scan of the
        # unquoted reply covers every own clause); within a clause, the exception (`unless`) is
        # only looked for once the pattern has matched there.
        scan = a.unquoted_scan
        own = a.own_text if scan is None else ""
        candidates = [p for p in self._patterns if p[2].may_match(scan, own)]
        if not candidates:
            return []
        hits: list[RuleHit] = []
        clauses = a.own_clauses
        for pattern_id, description, regex, unless, whole in candidates:
            # A gated pattern is checked clause by clause (running only its branches whose literals
            # occur); one with no literal to gate on is searched once over the whole text (one
            # clause a line, so "^" still means a clause start) and only the clauses it touches
            # are checked.
            indices = a.clauses_touched(whole) if whole.ungated else range(len(clauses))
            for index in indices:
                text = clauses[index].text
                steering = [m for m in regex.finditer(text, scan) if not self._cleared(text, m, scan)]
                if steering and (unless is None or unless.search(text, scan) is None):
                    hits.append(self.hit(f"{description} ({pattern_id})", text))
                    break
        return hits

    def _cleared(self, clause: str, match: re.Match[str], scan: Scan | None) -> bool:
        prefix = clause[: match.start()]
        return (
            self._declines.search(prefix, scan) is not None
            or self._indirect.search(prefix[-_INDIRECT_WINDOW:], scan) is not None
        )
