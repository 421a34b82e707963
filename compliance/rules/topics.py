"""Situations several rules (and the escalation check) need to recognise.

Kept in one place so that "a DB transfer is in play" means the same thing to the DB warning, the
advice signpost and the high-stakes check.
"""

from __future__ import annotations

import re

from compliance.calculators import personal_minimum_pension_age
from compliance.knowledge import KnowledgeBase
from compliance.knowledge.prefilter import FilteredPattern, LiteralScanner, Scan, ScannedPattern
from compliance.knowledge.schema import ScamRedFlag
from compliance.models import CustomerProfile, Pot
from compliance.rules.base import Analysis

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


def is_safeguarded(pot: Pot) -> bool:
    """DB benefits, or DC benefits with a guarantee such as a guaranteed annuity rate: both are
    safeguarded benefits (Pension Schemes Act 2015 s48 and its £30,000 advice requirement)."""
    return pot.type == "DB" or pot.has_guarantees


def provider_tokens(provider: str) -> list[str]:
    words = re.findall(r"[a-z][a-z']+", provider.lower())
    return [w.rstrip("s").rstrip("'") for w in words if w not in _GENERIC_PROVIDER_WORDS and len(w) >= 3]


class Topics:
    """Situations shared by several rules. Patterns are bound to the engine's `LiteralScanner`
    (a private one when none is given) and searched with the analysis's scans."""

    def __init__(self, kb: KnowledgeBase, scanner: LiteralScanner | None = None) -> None:
        self.kb = kb
        self.scanner = scanner = scanner or LiteralScanner()

        def lexicon(key: str) -> ScannedPattern:
            return scanner.bind(kb.lexicon(key).regex)

        self._db_terms = lexicon("db_terms")
        self._db_transfer = lexicon("db_transfer_talk")
        self._db_transfer_reply = lexicon("db_transfer_reply")
        self._transfer_negation = lexicon("transfer_negation")
        self._db_left_alone = lexicon("db_left_alone")
        self._access = lexicon("access_intent")
        self._access_process = lexicon("access_process")
        self._customer_reported = lexicon("customer_reported_speech")
        self._first_person = lexicon("first_person")
        self._contribution_question = lexicon("contribution_question")
        self._third_party = lexicon("third_party")
        self._flags = [(flag, scanner.bind(flag.regex), flag.needs_third_party) for flag in kb.scam_red_flags]
        # Every flag's phrases in one filtered search: most customers mention none.
        self._any_flag = scanner.bind(
            FilteredPattern([phrase for flag in kb.scam_red_flags for phrase in flag.customer_phrases])
        )
        self._drivers = lexicon("vulnerability_drivers")
        self._signpost = lexicon("adviser_signpost")
        self._signpost_negation = lexicon("signpost_negation")
        self._pension_wise_age = kb.figure("pension_wise_min_age").value
        self._db_threshold = kb.figure("db_advice_threshold").value
        self._unfunded = lexicon("unfunded_public_scheme")
        self._minimum_by_age: dict[int, int] = {}

    def mentions_db(self, text: str, profile: CustomerProfile, scan: Scan | None = None) -> bool:
        """`text` names a safeguarded pension (by a DB or guarantee term or the scheme's name);
        `scan`: a scan covering it."""
        if self._db_terms.found(text, scan):
            return True
        for pot in profile.pots:
            if is_safeguarded(pot):
                for token in provider_tokens(pot.provider):
                    if re.search(rf"\b{re.escape(token)}", text):
                        return True
        return False

    def _affirmed(self, text: str, talk: ScannedPattern, scan: Scan | None) -> list[re.Match[str]]:
        """Transfer talk in `text` that is not negated just before ("without transferring")."""
        return [
            m
            for m in talk.finditer(text, scan)
            if not self._transfer_negation.search(text[: m.start()], scan)
        ]

    def db_transfer_in_play(self, a: Analysis) -> bool:
        """A customer with DB benefits is considering transferring or cashing them in: they say so
        (not negated, not about a DC pot with the DB pension expressly left alone), or the reply
        itself brings up transferring the DB benefits."""
        cached = a.memo.get(("db_transfer_in_play", self))
        if cached is None:
            cached = a.memo[("db_transfer_in_play", self)] = self._db_transfer_in_play(a)
        return cached  # type: ignore[return-value]

    def _db_transfer_in_play(self, a: Analysis) -> bool:
        profile = a.ctx.customer
        safeguarded = sum(1 for pot in profile.pots if is_safeguarded(pot))
        if not safeguarded:
            return False
        # Other (unguaranteed) pots too: transfer talk must be about the safeguarded one.
        mixed = safeguarded < len(profile.pots)
        customer, scan = a.customer, a.customer_scan
        if self._affirmed(customer, self._db_transfer, scan):
            if not mixed:
                return True
            if self.mentions_db(customer, profile, scan) and not self._db_left_alone.search(customer, scan):
                return True
        if not profile.has_db:
            # A guarantee on a DC pot (a GAR) is in play only when the customer raises moving it:
            # a reply saying a transfer would lose it is the warning, not a transfer discussion.
            return False
        unquoted = a.unquoted_scan
        if not self._db_transfer_reply.may_match(unquoted, a.advisor_unquoted):
            return False  # the reply says nothing of transferring
        # With DC pots too, the reply's transfer talk is about the DB pension when it names it, or
        # when the customer asked about the DB pension (and did not set it aside).
        customer_on_db = self.mentions_db(customer, profile, scan) and not self._db_left_alone.search(
            customer, scan
        )
        for sentence in a.unquoted_sentences:
            if self._affirmed(sentence, self._db_transfer_reply, unquoted) and (
                not mixed or customer_on_db or self.mentions_db(sentence, profile, unquoted)
            ):
                return True
        return False

    def db_over_advice_threshold(self, profile: CustomerProfile) -> bool:
        """Safeguarded benefits (DB, or DC with a guarantee) worth more than the threshold, in a
        scheme that can convert them to flexible benefits: unfunded public service schemes cannot
        (Pension Schemes Act 2015 s66), so s48's advice requirement never bites there."""
        return any(
            is_safeguarded(p) and p.value_gbp > self._db_threshold and not self.unfunded_public(p)
            for p in profile.pots
        )

    def unfunded_public(self, pot: Pot) -> bool:
        """A DB pot in an unfunded public service scheme (NHS, teachers, civil service...)."""
        return pot.type == "DB" and self._unfunded.search(pot.provider.lower(), None) is not None

    def minimum_pension_age(self, age: int) -> int:
        """The earliest minimum pension age possible for a customer of this age (cached)."""
        if age not in self._minimum_by_age:
            self._minimum_by_age[age] = min(personal_minimum_pension_age(age, self.kb).possible_ages)
        return self._minimum_by_age[age]

    def customer_own_words(self, a: Analysis) -> str:
        """The customer's sentences without what they report others saying."""
        kept = []
        scan = a.customer_scan
        for sentence in a.customer_sentences:
            match = self._customer_reported.search(sentence, scan)
            kept.append(sentence if match is None else sentence[: match.start()])
        return " ".join(part for part in kept if part.strip())

    def dc_access_discussed(self, a: Analysis) -> bool:
        """The customer, eligible for Pension Wise, talks about taking money from their own DC
        savings: in their own words (not what someone told them), about themselves or about the
        process, and not as a scammer's offer (the reply then owes a scam warning instead)."""
        profile = a.ctx.customer
        # Owed from Pension Wise age, and only once the customer can access the pot: below their
        # minimum pension age there is no access to nudge about (the answer is "not yet").
        if (
            not profile.has_dc
            or profile.age < self._pension_wise_age
            or profile.age < self.minimum_pension_age(profile.age)
        ):
            return False
        # Nothing about access in anything the customer said: nothing to look at in their own words.
        if not self._access.may_match(a.customer_scan, a.customer):
            return False
        own = self.customer_own_words(a)
        # Their own words are their text with reported speech cut out: the customer's scan covers
        # them only when nothing was cut (joining what is left makes new neighbours).
        scan = a.customer_scan if own == a.customer else a.scan(own)
        if not self._access.found(own, scan):
            return False
        if not self._first_person.found(own, scan) and not self._access_process.found(own, scan):
            return False
        if self._contribution_question.found(own, scan):
            return False
        return not self.scam_flags(a)

    def scam_flags(self, a: Analysis) -> list[ScamRedFlag]:
        """Red flags in what the customer said (memoised on the analysis: two rules ask)."""
        cached = a.memo.get(("scam_flags", self))
        if cached is None:
            customer, scan = a.customer, a.customer_scan
            if not self._any_flag.found(customer, scan):
                cached = a.memo[("scam_flags", self)] = []
            else:
                third_party = self._third_party.found(customer, scan)
                # Access "now" offered to someone already at their minimum pension age is no red
                # flag: they can take it.
                of_age = a.ctx.customer.age >= self.minimum_pension_age(a.ctx.customer.age)
                cached = [
                    flag
                    for flag, regex, needs_third_party in self._flags
                    if (third_party or not needs_third_party)
                    and not (of_age and flag.id == "scam.early_access")
                    and regex.search(customer, scan)
                ]
                a.memo[("scam_flags", self)] = cached
        return cached  # type: ignore[return-value]

    def is_vulnerable(self, a: Analysis) -> bool:
        """Flagged vulnerable, or an FG21/1 driver in the situation."""
        return a.ctx.customer.vulnerable or bool(a.situation and self._drivers.search(a.situation, None))

    def needs_plain_language(self, a: Analysis) -> bool:
        return self.is_vulnerable(a) or a.ctx.customer.literacy == "low"

    def signposts_advice(self, a: Analysis) -> bool:
        """The reply points to regulated advice (not 'you don't need advice')."""
        cached = a.memo.get(("signposts_advice", self))
        if cached is None:
            cached = a.memo[("signposts_advice", self)] = self._signposts_advice(a)
        return cached  # type: ignore[return-value]

    def _signposts_advice(self, a: Analysis) -> bool:
        scan = a.advisor_scan
        if not self._signpost.may_match(scan, a.advisor):
            return False
        for sentence in a.advisor_sentences:
            for match in self._signpost.finditer(sentence, scan):
                clause_start = max(
                    sentence.rfind(",", 0, match.start()), sentence.rfind(";", 0, match.start())
                )
                if self._signpost_negation.search(sentence[clause_start + 1 : match.start()], scan) is None:
                    return True
        return False
