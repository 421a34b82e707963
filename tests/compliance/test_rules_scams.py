"""Scam red flags in what the customer said that the reply leaves unaddressed (FCA ScamSmart)."""

from __future__ import annotations

import pytest

from compliance.codes import ComplianceCode
from tests.compliance.rulekit import ctx, hits, rule

RULE = "scam.red_flags"
BLAND = "It's worth comparing the charges before you decide."
WARNS = "That sounds like a scam: check the firm on the FCA register and report it to Action Fraud."


def test_identity() -> None:
    assert rule(RULE).code is ComplianceCode.SCAM_RISK_IGNORED
    assert "ScamSmart" in rule(RULE).source


@pytest.mark.parametrize(
    "customer",
    [
        "I had a call from a company offering to look over my pension for free.",
        "A friend of a friend runs an investment club promising 18% a year on pension money.",
        "I saw an advert on Instagram saying I can get my pension out at 50 with no tax.",
        "A company said they'd send a courier round with the paperwork tomorrow.",
        "I was offered a pension 'liberation' deal through a legal loophole.",
        "I was approached at the golf club about a 'pension upgrade' that guarantees double the growth.",
        "A financial firm wrote to me saying I need to move it within 7 days to avoid losing money.",
        "An online advert says I can get a bonus of £5,000 if I transfer my pension to them.",
        "A guy I met at the pub reckons he can get me 30% returns in Spanish property.",
        "Somebody phoned saying my provider is going bust and I must move my money today.",
        "A woman from 'Retirement Solutions' rang and wants me to sign over my pension today.",
        "My new financial friend says his bond pays 9% fixed and it's totally safe.",
    ],
)
def test_red_flags_ignored_are_flagged_and_warnings_clear_them(customer: str) -> None:
    found = hits(RULE, ctx(customer, BLAND))
    assert found and "red flags" in found[0].message
    assert hits(RULE, ctx(customer, WARNS)) == []


@pytest.mark.parametrize(
    "customer",
    [
        "Which is the better deal for me, Aviva's or L&G's annuity quote?",
        "Can I get my pension early if I'm ill?",
        "I got a letter about my pension options and I don't understand it.",
        "What are the warning signs of a pension scam?",
        "Does an annuity pay a guaranteed income?",
    ],
)
def test_innocent_questions_raise_no_flag(customer: str) -> None:
    assert hits(RULE, ctx(customer, BLAND)) == []


def test_weak_flags_need_a_third_party() -> None:
    assert hits(RULE, ctx("Could I retire early?", BLAND, age=50)) == []
    assert hits(RULE, ctx("Someone says I could retire early through their scheme.", BLAND, age=50))


def test_early_access_is_no_flag_for_a_customer_at_minimum_pension_age() -> None:
    # Access "now" offered to a 60-year-old is access they already have (Finance Act 2004 s279).
    assert hits(RULE, ctx("Someone says I could retire early through their scheme.", BLAND, age=60)) == []
    # "I've been told I've got months" is a diagnosis, not a third party's offer.
    assert (
        hits(RULE, ctx("I've been told I've got months. Can I get my pension money now?", BLAND, age=52))
        == []
    )


@pytest.mark.parametrize(
    "customer",
    [
        "He said 'don't tell your provider, they'll just try to stop you'.",
        "Man on the phone says if I don't sign this week the offer's gone.",
        "The representative stated that my funds could be released prior to age 55 by means of a 'loan-back' arrangement.",
        "I was told I could get 30% of my pension as a cash bonus if I transfer.",
    ],
)
def test_red_flags_found_in_fresh_batches(customer: str) -> None:
    assert hits(RULE, ctx(customer, BLAND))
    assert hits(RULE, ctx(customer, WARNS)) == []


def test_a_generic_be_careful_is_not_a_scam_warning_and_a_real_guarantee_is_not_a_flag() -> None:
    customer = "A company I found online promises 10% a year if I move my pension into storage pods."
    generic = "Be careful with any investment, and make sure you understand the charges."
    assert hits(RULE, ctx(customer, generic))
    assert (
        hits(RULE, ctx("My old policy has a guaranteed annuity rate of 10%. What does that mean?", BLAND))
        == []
    )


@pytest.mark.parametrize(
    "customer",
    [
        # Advance and release fees.
        "A letter came saying I've got an unclaimed pension and I need to pay a £150 release fee to get it.",
        "They want a £200 admin fee before they can release the money.",
        # Repeated calls and someone else paying for the advice.
        "A firm keeps phoning me about transferring my pension.",
        "They say they'll cover the adviser's fees if I transfer.",
    ],
)
def test_blind_c_red_flags(customer: str) -> None:
    assert hits(RULE, ctx(customer, BLAND))
    assert hits(RULE, ctx(customer, "That sounds like a scam: don't pay anything.")) == []


@pytest.mark.parametrize(
    "customer",
    [
        "Aviva rang me back today after I'd left a message about my pension. Is that OK?",
        "The annuity company keeps chasing me for an answer.",
        "Does my provider charge for a transfer?",
    ],
)
def test_blind_c_innocent_contacts(customer: str) -> None:
    assert hits(RULE, ctx(customer, BLAND)) == []


# --- Blind batch D: impersonation and recovery-room calls, callers described in more words ------


@pytest.mark.parametrize(
    "customer",
    [
        "I got a call from someone saying they were from the FCA and that my pension needs moving to a safe account.",
        "A young man phoned about my pension and said he's from the 'Pension Recovery Office' and I've been overcharged.",
        "Someone claiming to be from HMRC rang about my pension.",
        "A very polite woman rang and says I've been mis-sold my pension.",
        "They want me to move my pension into a safe account.",
    ],
)
def test_impersonation_and_recovery_calls_are_red_flags(customer: str) -> None:
    assert hits(RULE, ctx(customer, BLAND))
    assert hits(RULE, ctx(customer, WARNS)) == []


@pytest.mark.parametrize(
    "customer",
    [
        "Do I have to pay for Pension Wise?",
        "I had a letter from HMRC about my tax code.",
        "My provider wrote to say the charges are changing.",
    ],
)
def test_regulators_and_services_named_innocently_are_not_red_flags(customer: str) -> None:
    assert hits(RULE, ctx(customer, BLAND)) == []


def test_the_fca_register_for_the_customers_own_provider_does_not_answer_an_impersonator() -> None:
    customer = "I got a call from someone saying they were from the FCA; my pension needs moving."
    own_provider = "The FCA regulates firms. You can also check your provider's details on the FCA register."
    assert hits(RULE, ctx(customer, own_provider))
    for answer in (
        "The FCA never calls people to move their pension: hang up.",
        "Check whoever called on the FCA register before doing anything.",
    ):
        assert hits(RULE, ctx(customer, answer)) == []
