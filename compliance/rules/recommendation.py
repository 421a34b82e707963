"""Personal recommendation: prohibited phrasing from the knowledge base, cleared by negation
("I can't say which is the best option for you"), by an indirect question just before it
("whether it's right for you"), and ignored inside quoted or reported speech."""

from __future__ import annotations

import re

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule, cleared_by, kb_source

# How close before a phrase an indirect-question word must be to make it a question being named.
_INDIRECT_WINDOW = 25


class PersonalRecommendationRule(BaseRule):
    rule_id = "recommendation.personal"
    code = ComplianceCode.PERSONAL_RECOMMENDATION

    def __init__(self, kb: KnowledgeBase) -> None:
        self.source = kb_source(kb, "advice_boundary")
        # Plain tuples, not the pydantic items: attribute access on models costs more than a match.
        self._patterns = [
            (p.id, p.description, p.regex, p.unless, re.compile(p.pattern, re.MULTILINE))
            for p in kb.patterns("prohibited", self.code)
        ]
        guards = {p.id: p.regex for p in kb.patterns("permitted", self.code)}
        self._declines = guards["pr.declines"]
        self._indirect = guards["pr.indirect_question"]

    def check(self, a: Analysis) -> list[RuleHit]:
        # Each pattern is first tried on the advisor's own words as a whole, one clause a line (so
        # "^" still means a clause start); only a pattern that matches is then placed in its clause.
        own = a.own_text
        candidates = [p for p in self._patterns if p[4].search(own)]
        if not candidates:
            return []
        hits: list[RuleHit] = []
        for pattern_id, description, regex, unless, _ in candidates:
            for clause in a.own_clauses:
                if unless is not None and unless.search(clause.text):
                    continue
                if any(self._cleared(clause.text, m) is False for m in regex.finditer(clause.text)):
                    hits.append(self.hit(f"{description} ({pattern_id})", clause.text))
                    break
        return hits

    def _cleared(self, clause: str, match: re.Match[str]) -> bool:
        prefix = clause[: match.start()]
        return cleared_by(prefix, self._declines) or cleared_by(prefix, self._indirect, _INDIRECT_WINDOW)
