"""Plain language and no pressure for vulnerable or low-literacy customers (FG21/1, PRIN 2A.5)."""

from __future__ import annotations

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.knowledge.prefilter import FilteredPattern
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule, kb_source
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
        scanner = topics.scanner
        self._terms = [(t, scanner.bind(FilteredPattern.of(t.pattern))) for t in kb.jargon]
        self._any = scanner.bind(FilteredPattern([t.pattern for t in kb.jargon]))
        self._after = scanner.bind(kb.lexicon("jargon_explained_after").regex)
        self._before = scanner.bind(kb.lexicon("jargon_explained_before").regex)

    def check(self, a: Analysis) -> list[RuleHit]:
        if not self._topics.needs_plain_language(a):
            return []
        text, scan = a.advisor_unquoted, a.unquoted_scan
        if not self._any.found(text, scan):
            return []
        unexplained = []
        for term, regex in self._terms:
            if regex.found(a.customer, a.customer_scan):
                continue  # the customer used the term: answering in it is fair
            for match in regex.finditer(text, scan):
                after = text[match.end() : match.end() + _EXPLAIN_AFTER]
                before = text[max(0, match.start() - _EXPLAIN_BEFORE) : match.start()]
                if not (self._after.search(after, scan) or self._before.search(before, scan)):
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
        self._pressure = topics.scanner.bind(kb.lexicon("pressure").regex)
        self._guard = topics.scanner.bind(kb.lexicon("pressure_guard").regex)
        self._named = topics.scanner.bind(kb.lexicon("pressure_named").regex)

    def check(self, a: Analysis) -> list[RuleHit]:
        if not self._topics.needs_plain_language(a):
            return []
        scan = a.unquoted_scan
        if not self._pressure.found(a.own_text, scan):
            return []
        for clause in a.own_clauses:
            match = self._pressure.search(clause.text, scan)
            # The guard may overlap the match ("no hurry" contains "hurry"), so it is read up to its end.
            if (
                match
                and self._guard.search(clause.text[: match.end()], scan) is None
                and self._named.search(clause.text, scan) is None
            ):
                return [self.hit("Pressure or urgency with a vulnerable customer.", clause.text)]
        return []
