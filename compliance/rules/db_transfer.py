"""Defined benefit transfers: the warning that guaranteed benefits are given up, and the legal
advice requirement above the threshold (Pension Schemes Act 2015 s48)."""

from __future__ import annotations

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule, kb_source
from compliance.rules.topics import Topics


class DbWarningRule(BaseRule):
    rule_id = "db.warning"
    code = ComplianceCode.MISSING_DB_WARNING

    def __init__(self, kb: KnowledgeBase, topics: Topics) -> None:
        self.source = kb_source(kb, "db_advice_requirement", "db_starting_view")
        self._topics = topics
        self._loss = topics.scanner.bind(kb.lexicon("db_warning_loss").regex)
        self._benefit = topics.scanner.bind(kb.lexicon("db_warning_benefit").regex)
        self._direct = topics.scanner.bind(kb.lexicon("db_warning_direct").regex)

    def warned(self, a: Analysis) -> bool:
        scan = a.advisor_scan
        if self._direct.found(a.advisor, scan):
            return True
        # The loss and the guarantee in one sentence, or the loss just after the sentence naming the
        # guarantee ("A GAR is a guaranteed annuity rate... If you transferred, you'd lose it.").
        sentences = a.advisor_sentences
        for index, sentence in enumerate(sentences):
            if self._loss.search(sentence, scan) and (
                self._benefit.search(sentence, scan)
                or (index > 0 and self._benefit.search(sentences[index - 1], scan))
            ):
                return True
        return False

    def check(self, a: Analysis) -> list[RuleHit]:
        if not self._topics.db_transfer_in_play(a) or self.warned(a):
            return []
        return [
            self.hit(
                "A DB transfer or cash-in is discussed but the reply does not warn that the guaranteed "
                "income would be given up.",
                a.ctx.customer_utterance,
            )
        ]


class DbAdviceSignpostRule(BaseRule):
    rule_id = "advice.db_transfer"
    code = ComplianceCode.MISSING_ADVICE_SIGNPOST

    def __init__(self, kb: KnowledgeBase, topics: Topics) -> None:
        self.source = kb_source(kb, "db_advice_requirement")
        self._topics = topics
        self._threshold = kb.figure("db_advice_threshold")
        self._denied = topics.scanner.bind(kb.lexicon("advice_requirement_denied").regex)

    def check(self, a: Analysis) -> list[RuleHit]:
        profile = a.ctx.customer
        if not self._topics.db_transfer_in_play(a) or not self._topics.db_over_advice_threshold(profile):
            return []
        hits = []
        # Telling this customer advice is not needed misstates the law, whatever else is said.
        denial = self._denied.search(a.advisor_unquoted, a.unquoted_scan)
        if denial is not None:
            hits.append(
                self.hit(
                    f"Safeguarded benefits worth more than £{self._threshold.value:,.0f} cannot be transferred "
                    "without regulated advice: saying advice is not needed is wrong.",
                    denial.group(),
                    code=ComplianceCode.FACTUAL_ERROR,
                )
            )
        if self._topics.signposts_advice(a):
            return hits
        hits.append(
            self.hit(
                f"DB benefits worth more than £{self._threshold.value:,.0f} are in a transfer discussion: the "
                "reply must say regulated advice from a pension transfer specialist is required.",
                a.ctx.customer_utterance,
            )
        )
        return hits
