"""Situations several rules (and the escalation check) need to recognise.

Kept in one place so that "a DB transfer is in play" means the same thing to the DB warning, the
advice signpost and the high-stakes check.
"""

from __future__ import annotations

import re

from compliance.knowledge import KnowledgeBase
from compliance.knowledge.prefilter import FilteredPattern
from compliance.knowledge.schema import ScamRedFlag
from compliance.models import CustomerProfile
from compliance.rules.base import Analysis, cleared_by
from compliance.text import sentences

# Words in scheme names that say nothing about which scheme is meant.
_GENERIC_PROVIDER_WORDS = frozenset(
    [
        "the",
        "and",
        "of",
        "pension",
        "pensions",
        "scheme",
        "schemes",
        "fund",
        "plan",
        "group",
        "uk",
        "bank",
        "staff",
        "retirement",
        "trust",
        "plc",
        "ltd",
        "limited",
        "company",
        "contributory",
        "statutory",
        "benefits",
    ]
)


def provider_tokens(provider: str) -> list[str]:
    words = re.findall(r"[a-z][a-z']+", provider.lower())
    return [w.rstrip("s").rstrip("'") for w in words if w not in _GENERIC_PROVIDER_WORDS and len(w) >= 3]


class Topics:
    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self._db_terms = kb.lexicon("db_terms").regex
        self._db_transfer = kb.lexicon("db_transfer_talk").regex
        self._db_transfer_reply = kb.lexicon("db_transfer_reply").regex
        self._transfer_negation = kb.lexicon("transfer_negation").regex
        self._db_left_alone = kb.lexicon("db_left_alone").regex
        self._access = kb.lexicon("access_intent").regex
        self._access_process = kb.lexicon("access_process").regex
        self._customer_reported = kb.lexicon("customer_reported_speech").regex
        self._first_person = kb.lexicon("first_person").regex
        self._contribution_question = kb.lexicon("contribution_question").regex
        self._third_party = kb.lexicon("third_party").regex
        self._flags = [(flag, flag.regex, flag.needs_third_party) for flag in kb.scam_red_flags]
        # Every flag's phrases in one filtered search: most customers mention none.
        self._any_flag = FilteredPattern(
            [phrase for flag in kb.scam_red_flags for phrase in flag.customer_phrases]
        )
        self._drivers = kb.lexicon("vulnerability_drivers").regex
        self._signpost = kb.lexicon("adviser_signpost").regex
        self._signpost_negation = kb.lexicon("signpost_negation").regex
        self._pension_wise_age = kb.figure("pension_wise_min_age").value
        self._db_threshold = kb.figure("db_advice_threshold").value

    def mentions_db(self, text: str, profile: CustomerProfile) -> bool:
        if self._db_terms.search(text):
            return True
        for pot in profile.pots:
            if pot.type == "DB":
                for token in provider_tokens(pot.provider):
                    if re.search(rf"\b{re.escape(token)}", text):
                        return True
        return False

    def _affirmed(self, text: str, talk: re.Pattern[str]) -> list[re.Match[str]]:
        """Transfer talk in `text` that is not negated just before ("without transferring")."""
        return [m for m in talk.finditer(text) if not self._transfer_negation.search(text[: m.start()])]

    def db_transfer_in_play(self, a: Analysis) -> bool:
        """A customer with DB benefits is considering transferring or cashing them in: they say so
        (not negated, not about a DC pot with the DB pension expressly left alone), or the reply
        itself brings up transferring the DB benefits."""
        profile = a.ctx.customer
        if not profile.has_db:
            return False
        if self._affirmed(a.customer, self._db_transfer):
            if not profile.has_dc:
                return True
            if self.mentions_db(a.customer, profile) and not self._db_left_alone.search(a.customer):
                return True
        # With DC pots too, the reply's transfer talk is about the DB pension when it names it, or
        # when the customer asked about the DB pension (and did not set it aside).
        customer_on_db = self.mentions_db(a.customer, profile) and not self._db_left_alone.search(a.customer)
        for sentence in a.unquoted_sentences:
            if self._affirmed(sentence, self._db_transfer_reply) and (
                not profile.has_dc or customer_on_db or self.mentions_db(sentence, profile)
            ):
                return True
        return False

    def db_over_advice_threshold(self, profile: CustomerProfile) -> bool:
        return any(p.type == "DB" and p.value_gbp > self._db_threshold for p in profile.pots)

    def customer_own_words(self, a: Analysis) -> str:
        """The customer's sentences without what they report others saying."""
        kept = []
        for sentence in sentences(a.customer):
            match = self._customer_reported.search(sentence)
            kept.append(sentence if match is None else sentence[: match.start()])
        return " ".join(part for part in kept if part.strip())

    def dc_access_discussed(self, a: Analysis) -> bool:
        """The customer, eligible for Pension Wise, talks about taking money from their own DC
        savings: in their own words (not what someone told them), about themselves or about the
        process, and not as a scammer's offer (the reply then owes a scam warning instead)."""
        profile = a.ctx.customer
        if not profile.has_dc or profile.age < self._pension_wise_age:
            return False
        own = self.customer_own_words(a)
        if self._access.search(own) is None:
            return False
        if self._first_person.search(own) is None and self._access_process.search(own) is None:
            return False
        if self._contribution_question.search(own):
            return False
        return not self.scam_flags(a)

    def scam_flags(self, a: Analysis) -> list[ScamRedFlag]:
        """Red flags in what the customer said (memoised on the analysis: two rules ask)."""
        cached = a.memo.get("scam_flags")
        if cached is None and self._any_flag.search(a.customer) is None:
            cached = a.memo["scam_flags"] = []
        if cached is None:
            third_party = self._third_party.search(a.customer) is not None
            cached = [
                flag
                for flag, regex, needs_third_party in self._flags
                if (third_party or not needs_third_party) and regex.search(a.customer)
            ]
            a.memo["scam_flags"] = cached
        return cached  # type: ignore[return-value]

    def is_vulnerable(self, a: Analysis) -> bool:
        """Flagged vulnerable, or an FG21/1 driver in the situation."""
        return a.ctx.customer.vulnerable or bool(a.situation and self._drivers.search(a.situation))

    def needs_plain_language(self, a: Analysis) -> bool:
        return self.is_vulnerable(a) or a.ctx.customer.literacy == "low"

    def signposts_advice(self, a: Analysis) -> bool:
        """The reply points to regulated advice (not 'you don't need advice')."""
        for sentence in a.advisor_sentences:
            for match in self._signpost.finditer(sentence):
                clause_start = max(
                    sentence.rfind(",", 0, match.start()), sentence.rfind(";", 0, match.start())
                )
                if not cleared_by(sentence[clause_start + 1 : match.start()], self._signpost_negation):
                    return True
        return False
