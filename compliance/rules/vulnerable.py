"""Plain language and no pressure for vulnerable or low-literacy customers (FG21/1, PRIN 2A.5)."""

from __future__ import annotations

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.knowledge.prefilter import FilteredPattern
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule, cleared_by, kb_source
from compliance.rules.topics import Topics

# How far after / before a jargon term its explanation may sit.
_EXPLAIN_AFTER = 60
_EXPLAIN_BEFORE = 30


class JargonRule(BaseRule):
    rule_id = "vulnerable.jargon"
    code = ComplianceCode.UNSUITABLE_FOR_VULNERABLE

    def __init__(self, kb: KnowledgeBase, topics: Topics) -> None:
        self.source = kb_source(kb, "vulnerability", "consumer_understanding")
        self._topics = topics
        self._terms = [(t, FilteredPattern.of(t.pattern)) for t in kb.jargon]
        self._any = FilteredPattern([t.pattern for t in kb.jargon])
        self._after = kb.lexicon("jargon_explained_after").regex
        self._before = kb.lexicon("jargon_explained_before").regex

    def check(self, a: Analysis) -> list[RuleHit]:
        if not self._topics.needs_plain_language(a):
            return []
        text = a.advisor_unquoted
        if not self._any.search(text):
            return []
        unexplained = []
        for term, regex in self._terms:
            if regex.search(a.customer):
                continue  # the customer used the term: answering in it is fair
            for match in regex.finditer(text):
                after = text[match.end() : match.end() + _EXPLAIN_AFTER]
                before = text[max(0, match.start() - _EXPLAIN_BEFORE) : match.start()]
                if not (self._after.search(after) or self._before.search(before)):
                    unexplained.append(f"{term.term} (say: {term.plain_english})")
                    break
        if not unexplained:
            return []
        return [
            self.hit(
                "Unexplained jargon for a customer who needs plain language: " + "; ".join(unexplained), text
            )
        ]


class PressureRule(BaseRule):
    rule_id = "vulnerable.pressure"
    code = ComplianceCode.UNSUITABLE_FOR_VULNERABLE

    def __init__(self, kb: KnowledgeBase, topics: Topics) -> None:
        self.source = kb_source(kb, "vulnerability")
        self._topics = topics
        self._pressure = kb.lexicon("pressure").regex
        self._guard = kb.lexicon("pressure_guard").regex
        self._named = kb.lexicon("pressure_named").regex

    def check(self, a: Analysis) -> list[RuleHit]:
        if not self._topics.needs_plain_language(a) or not self._pressure.search(a.own_text):
            return []
        for clause in a.own_clauses:
            match = self._pressure.search(clause.text)
            # The guard may overlap the match ("no hurry" contains "hurry"), so it is read up to its end.
            if (
                match
                and not cleared_by(clause.text[: match.end()], self._guard)
                and self._named.search(clause.text) is None
            ):
                return [self.hit("Pressure or urgency with a vulnerable customer.", clause.text)]
        return []
