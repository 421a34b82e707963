"""Retirement risk warnings and the Pension Wise stronger nudge (COBS 19.7)."""

from __future__ import annotations

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule, kb_source
from compliance.rules.topics import Topics

# How far before a mention of Pension Wise words discouraging it are looked for.
_DISMISS_WINDOW = 30


class RiskDisclosureRule(BaseRule):
    """Options described in the reply's own sentences (not the ones merely pointing to Pension Wise
    or an adviser, nor ones about allowances, death benefits or a scam response) need at least one
    risk named somewhere in the reply. A reply that answers a scam red flag with a scam warning is
    a warning, not a description of options; nor is a reply that says the option is not available."""

    rule_id = "disclosure.risk"
    code = ComplianceCode.MISSING_RISK_DISCLOSURE

    def __init__(self, kb: KnowledgeBase, topics: Topics | None = None) -> None:
        self.source = kb_source(kb, "stronger_nudge", "consumer_understanding")
        self._topics = topics = topics or Topics(kb)
        scanner = topics.scanner
        self._options = scanner.bind(kb.lexicon("option_terms").regex)
        self._risk = scanner.bind(kb.lexicon("risk_language").regex)
        self._denied = scanner.bind(kb.lexicon("risk_negation").regex)
        self._pension_wise = scanner.bind(kb.lexicon("pension_wise").regex)
        self._signpost = scanner.bind(kb.lexicon("adviser_signpost").regex)
        self._not_option = scanner.bind(kb.lexicon("not_option_context").regex)
        self._process = scanner.bind(kb.lexicon("access_process").regex)
        self._negation = scanner.bind(kb.lexicon("transfer_negation").regex)
        self._scam_addressed = scanner.bind(kb.lexicon("scam_addressed").regex)
        self._scam_named = scanner.bind(kb.lexicon("pressure_named").regex)
        self._denied_answer = scanner.bind(kb.lexicon("answer_denied").regex)
        self._request = scanner.bind(kb.lexicon("option_request").regex)

    def _customer_option(self, a: Analysis) -> bool:
        """The customer's question names an option they might take (not negated, not about
        allowances, death benefits or a scam)."""
        scan = a.customer_scan
        if not self._options.may_match(scan, a.customer):
            return False
        for sentence in a.customer_sentences:
            if self._not_option.search(sentence, scan):
                continue
            for match in self._options.finditer(sentence, scan):
                if not self._negation.search(sentence[: match.start()], scan):
                    return True
        return False

    def _asks_about_option(self, a: Analysis) -> bool:
        """The customer asks about an option (or how to go about it) and the reply is not a scam
        warning: an answer that gives only the upside or the steps still describes the option."""
        scan = a.customer_scan
        return (
            (
                "?" in a.customer
                or self._process.found(a.customer, scan)
                or self._request.found(a.customer, scan)
            )
            and not self._scam_addressed.found(a.advisor, a.advisor_scan)
            and not (
                a.advisor_sentences and self._denied_answer.search(a.advisor_sentences[0], a.advisor_scan)
            )
            and self._customer_option(a)
        )

    def _names_a_risk(self, a: Analysis) -> bool:
        """A risk is named in the reply once denials of risk ("no risk of...") are blanked out."""
        text, scan = a.advisor, a.advisor_scan
        if self._denied.may_match(scan, text):
            blanked = self._denied.sub(" ", text, scan)
            # Blanking makes new neighbours: a changed text is scanned afresh.
            if blanked != text:
                text, scan = blanked, a.scan(blanked)
        return self._risk.found(text, scan)

    def check(self, a: Analysis) -> list[RuleHit]:
        # A reply that names a risk passes whatever it describes: look for that first (one search),
        # and for an option term anywhere, before walking the sentences.
        if self._names_a_risk(a):
            return []
        if self._scam_named.found(a.advisor, a.advisor_scan) and self._topics.scam_flags(a):
            # A reply calling out a scam in answer to a red flag ("that sounds like a scam... they
            # tell you to move your money today") describes the scam, not options to take.
            return []
        scan = a.unquoted_scan
        if not self._options.found(a.advisor_unquoted, scan) and not self._asks_about_option(a):
            return []
        described = None
        for sentence in a.unquoted_sentences:
            if (
                self._pension_wise.search(sentence, scan)
                or self._signpost.search(sentence, scan)
                or self._not_option.search(sentence, scan)
            ):
                continue
            match = self._options.search(sentence, scan)
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
        self._pension_wise = topics.scanner.bind(kb.lexicon("pension_wise").regex)
        self._dismissed = topics.scanner.bind(kb.lexicon("pension_wise_dismissed").regex)
        self._received = topics.scanner.bind(kb.lexicon("pension_wise_received").regex)
        self._charged = topics.scanner.bind(kb.lexicon("pension_wise_charged").regex)
        self._free = topics.scanner.bind(kb.lexicon("pension_wise_free").regex)

    def _nudges(self, a: Analysis) -> bool:
        """The reply mentions Pension Wise other than to discourage it ("you don't need Pension Wise")."""
        scan = a.advisor_scan
        for sentence in a.advisor_sentences:
            if self._charged.search(sentence, scan) and not self._free.search(sentence, scan):
                continue  # "Pension Wise can, although it charges a fee": the nudge says it is free
            for match in self._pension_wise.finditer(sentence, scan):
                # Only words just before the mention, in its own clause, can discourage it ("you
                # don't need Pension Wise"); "if you don't want to decide yet, Pension Wise..." nudges.
                before = sentence[max(0, match.start() - _DISMISS_WINDOW) : match.start()]
                before = before[max(before.rfind(","), before.rfind(";")) + 1 :]
                if self._dismissed.search(before, scan) is None:
                    return True
        return False

    def check(self, a: Analysis) -> list[RuleHit]:
        # The nudge is owed once per journey: one given earlier in the conversation counts, and so
        # does guidance the customer says they have already had. (Tested first: literal searches,
        # where deciding that access is discussed takes several.)
        if self._pension_wise.found(a.advisor, a.advisor_scan) and (
            not (
                self._dismissed.may_match(a.advisor_scan, a.advisor)
                or self._charged.may_match(a.advisor_scan, a.advisor)
            )
            or self._nudges(a)
        ):
            return []
        if self._pension_wise.search(a.earlier_advisor, None):
            return []
        if self._received.found(a.customer, a.customer_scan):
            return []
        if not self._topics.dc_access_discussed(a):
            return []
        return [
            self.hit(
                "Accessing DC savings is discussed: explain Pension Wise (free, impartial) and offer to book it.",
                a.ctx.customer_utterance,
            )
        ]
