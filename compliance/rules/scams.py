"""Scam red flags in what the customer said, left unaddressed by the reply."""

from __future__ import annotations

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule, kb_source
from compliance.rules.topics import Topics


class ScamRedFlagRule(BaseRule):
    rule_id = "scam.red_flags"
    code = ComplianceCode.SCAM_RISK_IGNORED

    def __init__(self, kb: KnowledgeBase, topics: Topics) -> None:
        self.source = kb_source(kb, "scams")
        self._topics = topics
        self._addressed = topics.scanner.bind(kb.lexicon("scam_addressed").regex)

    def check(self, a: Analysis) -> list[RuleHit]:
        flags = self._topics.scam_flags(a)
        if not flags or self._addressed.found(a.advisor, a.advisor_scan):
            return []
        names = ", ".join(flag.description.rstrip(".").lower() for flag in flags)
        return [self.hit(f"Scam red flags not addressed: {names}.", a.ctx.customer_utterance)]
