"""Retirement risk warnings and the Pension Wise stronger nudge (COBS 19.7)."""

from __future__ import annotations

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule, kb_source
from compliance.rules.topics import Topics
from compliance.text import sentences


class RiskDisclosureRule(BaseRule):
    """Options described in the reply's own sentences (not the ones merely pointing to Pension Wise
    or an adviser, nor ones about allowances, death benefits or a scam response) need at least one
    risk named somewhere in the reply."""

    rule_id = "disclosure.risk"
    code = ComplianceCode.MISSING_RISK_DISCLOSURE

    def __init__(self, kb: KnowledgeBase) -> None:
        self.source = kb_source(kb, "stronger_nudge", "consumer_understanding")
        self._options = kb.lexicon("option_terms").regex
        self._risk = kb.lexicon("risk_language").regex
        self._denied = kb.lexicon("risk_negation").regex
        self._pension_wise = kb.lexicon("pension_wise").regex
        self._signpost = kb.lexicon("adviser_signpost").regex
        self._not_option = kb.lexicon("not_option_context").regex
        self._process = kb.lexicon("access_process").regex
        self._negation = kb.lexicon("transfer_negation").regex
        self._scam_addressed = kb.lexicon("scam_addressed").regex

    def _customer_option(self, a: Analysis) -> bool:
        """The customer's question names an option they might take (not negated, not about
        allowances, death benefits or a scam)."""
        for sentence in sentences(a.customer):
            if self._not_option.search(sentence):
                continue
            for match in self._options.finditer(sentence):
                if not self._negation.search(sentence[: match.start()]):
                    return True
        return False

    def _asks_about_option(self, a: Analysis) -> bool:
        """The customer asks about an option (or how to go about it) and the reply is not a scam
        warning: an answer that gives only the upside or the steps still describes the option."""
        return (
            ("?" in a.customer or self._process.search(a.customer) is not None)
            and self._scam_addressed.search(a.advisor) is None
            and self._customer_option(a)
        )

    def check(self, a: Analysis) -> list[RuleHit]:
        # A reply that names a risk passes whatever it describes: look for that first (one search),
        # and for an option term anywhere, before walking the sentences.
        if self._risk.search(self._denied.sub(" ", a.advisor)):
            return []
        if self._options.search(a.advisor_unquoted) is None and not self._asks_about_option(a):
            return []
        described = None
        for sentence in a.unquoted_sentences:
            if (
                self._pension_wise.search(sentence)
                or self._signpost.search(sentence)
                or self._not_option.search(sentence)
            ):
                continue
            match = self._options.search(sentence)
            if match:
                described = sentence
                break
        if described is None and self._asks_about_option(a):
            # "Is it easy to transfer?" answered with the steps alone still describes the option.
            described = a.ctx.customer_utterance
        if described is None:
            return []
        return [self.hit("Options are described without any of their risks.", described)]


class PensionWiseNudgeRule(BaseRule):
    rule_id = "disclosure.pension_wise"
    code = ComplianceCode.MISSING_PENSION_WISE_NUDGE

    def __init__(self, kb: KnowledgeBase, topics: Topics) -> None:
        self.source = kb_source(kb, "stronger_nudge")
        self._topics = topics
        self._pension_wise = kb.lexicon("pension_wise").regex

    def check(self, a: Analysis) -> list[RuleHit]:
        # The nudge is owed once per journey: one given earlier in the conversation counts. (Tested
        # first: one literal search, where deciding that access is discussed takes several.)
        if self._pension_wise.search(a.advisor) or self._pension_wise.search(a.earlier_advisor):
            return []
        if not self._topics.dc_access_discussed(a):
            return []
        return [
            self.hit(
                "Accessing DC savings is discussed: explain Pension Wise (free, impartial) and offer to book it.",
                a.ctx.customer_utterance,
            )
        ]
