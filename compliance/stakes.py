"""High-stakes situations that a human should see whatever the rules or judges decide.

Thresholds and switches are firm policy kept in the knowledge base (`escalation`), not FCA
figures. The detector looks at what the customer says they face, not at what the advisor happened
to mention, so explaining options to a vulnerable customer is not by itself an escalation.
"""

from __future__ import annotations

from compliance.knowledge import KnowledgeBase
from compliance.models import UtteranceContext
from compliance.rules.base import Analysis
from compliance.rules.topics import Topics


class HighStakesDetector:
    def __init__(self, kb: KnowledgeBase, topics: Topics | None = None) -> None:
        self.policy = kb.escalation
        self.topics = topics or Topics(kb)
        self._irreversible = kb.lexicon("irreversible_decision").regex
        # Searched with the analysis's scan of the customer's words. Only lexicons that `Topics`
        # already binds are bound here: binding a new one would rebuild the scanner's automaton, and
        # a scan made before that would not know the new pattern's literals.
        scanner = self.topics.scanner
        self._access = scanner.bind(kb.lexicon("access_intent").regex)
        self._asks = kb.lexicon("asks_for_recommendation").regex
        self._transfer = scanner.bind(kb.lexicon("db_transfer_talk").regex)
        self._reported = kb.lexicon("reported_speech").regex
        self._first_person = scanner.bind(kb.lexicon("first_person").regex)

    def assess(self, ctx: UtteranceContext, analysis: Analysis | None = None) -> list[str]:
        """Reasons this conversation is high stakes (empty when it is not)."""
        a = analysis or Analysis(ctx, self._reported)
        profile = ctx.customer
        reasons: list[str] = []
        if self.policy.escalate_db_transfer and self.topics.db_transfer_in_play(a):
            reasons.append("DB transfer or cash-in discussed by a customer with DB benefits")
        if (
            self.policy.escalate_vulnerable_irreversible
            and self.topics.is_vulnerable(a)
            and self._irreversible.search(a.customer)
        ):
            reasons.append("vulnerable customer facing an irreversible decision")
        if (
            self.policy.escalate_large_pot_decision
            and profile.total_gbp >= self.policy.large_pot_gbp
            and self._first_person.search(a.customer, a.customer_scan)
            and (
                self._access.search(a.customer, a.customer_scan)
                or self._asks.search(a.customer)
                or self._transfer.search(a.customer, a.customer_scan)
            )
        ):
            reasons.append(f"pension wealth of £{profile.total_gbp:,.0f} with an access or transfer decision")
        return reasons
