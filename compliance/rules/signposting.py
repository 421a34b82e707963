"""Advice signposting: a customer who asks what to do is told where a personal recommendation
can be had (a regulated adviser), even though the guidance service cannot give one."""

from __future__ import annotations

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule, kb_source
from compliance.rules.topics import Topics


class AdviceRequestSignpostRule(BaseRule):
    rule_id = "advice.request"
    code = ComplianceCode.MISSING_ADVICE_SIGNPOST

    def __init__(self, kb: KnowledgeBase, topics: Topics) -> None:
        self.source = kb_source(kb, "advice_boundary")
        self._topics = topics
        self._asks = topics.scanner.bind(kb.lexicon("asks_for_recommendation").regex)

    def check(self, a: Analysis) -> list[RuleHit]:
        match = self._asks.search(a.customer, a.customer_scan)
        if match is None or self._topics.signposts_advice(a):
            return []
        return [
            self.hit(
                "The customer asked for a recommendation; the reply must say a regulated financial adviser can give one.",
                match.group(),
            )
        ]
