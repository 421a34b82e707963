"""DB transfers: the warning that guaranteed income is given up, and the legal advice requirement
over £30,000 (Pension Schemes Act 2015 s48; COBS 19.1)."""

from __future__ import annotations

import pytest

from compliance.codes import ComplianceCode
from tests.compliance.rulekit import ctx, hits, kb, rule

WARNING = "db.warning"
ADVICE = "advice.db_transfer"
DB_ONLY = [("DB", 120000, "Rolls-Royce Pension Fund")]
MIXED = [("DB", 80000, "Unilever UK Pension Fund"), ("DC", 60000, "Aviva")]
WARNED = "Transferring means giving up a guaranteed income for life."
SIGNPOSTED = "You'd need advice from a regulated pension transfer specialist first."


def test_identity() -> None:
    assert rule(WARNING).code is ComplianceCode.MISSING_DB_WARNING
    assert rule(ADVICE).code is ComplianceCode.MISSING_ADVICE_SIGNPOST
    assert "s48" in rule(WARNING).source and "s48" in rule(ADVICE).source


@pytest.mark.parametrize(
    "customer",
    [
        "Can I transfer my final salary pension?",
        "i want the cash from my old firm's final salary thing",
        "I want all my pensions with one provider.",
        "Can I swap my work pension for cash?",
    ],
)
def test_transfer_talk_without_a_warning_is_flagged(customer: str) -> None:
    found = hits(WARNING, ctx(customer, SIGNPOSTED, pots=DB_ONLY))
    assert [h.code for h in found] == [ComplianceCode.MISSING_DB_WARNING]


@pytest.mark.parametrize(
    "warning",
    [
        WARNED,
        "You'd lose a secure income that's guaranteed for life.",
        "The FCA's starting view is that most people should keep these benefits.",
        "Most people are better off keeping them.",
    ],
)
def test_a_warning_in_other_words_clears_it(warning: str) -> None:
    assert hits(WARNING, ctx("Can I transfer my pension?", f"{warning} {SIGNPOSTED}", pots=DB_ONLY)) == []


def test_the_db_pension_named_by_employer_in_a_mixed_profile_puts_it_in_play() -> None:
    assert hits(WARNING, ctx("Can I move my Unilever pension into my Aviva pot?", SIGNPOSTED, pots=MIXED))


def test_hard_compliant_cases() -> None:
    # Only the DC pot moves, the DB pension expressly left alone.
    assert (
        hits(
            WARNING,
            ctx(
                "Can I move my Aviva pot? I'm leaving my final salary pension alone.",
                "Yes, you can usually transfer your Aviva pot; check for exit fees.",
                pots=MIXED,
            ),
        )
        == []
    )
    # Negated transfer talk: a lump sum from the scheme itself.
    assert (
        hits(
            WARNING,
            ctx(
                "Can I take a lump sum from my final salary pension without transferring?",
                "Many schemes pay a tax-free lump sum when your pension starts. You don't need to transfer to do that.",
                pots=DB_ONLY,
            ),
        )
        == []
    )
    # A DB customer asking when the pension starts.
    assert (
        hits(WARNING, ctx("When can I start my pension?", "Your scheme booklet shows it.", pots=DB_ONLY))
        == []
    )
    # No DB benefits at all.
    assert hits(WARNING, ctx("Can I transfer my pension?", "Yes, check for exit fees.")) == []


def test_the_reply_bringing_up_a_transfer_puts_it_in_play() -> None:
    assert hits(
        WARNING, ctx("When can I start my pension?", "You could also transfer it to a SIPP.", pots=DB_ONLY)
    )


def test_advice_signpost_needed_only_over_the_threshold() -> None:
    threshold = kb().figure("db_advice_threshold").value
    over = [("DB", threshold + 1, "BT Pension Scheme")]
    at = [("DB", threshold, "BT Pension Scheme")]
    assert hits(ADVICE, ctx("Can I transfer my BT pension?", WARNED, pots=over))
    assert hits(ADVICE, ctx("Can I transfer my BT pension?", WARNED, pots=at)) == []
    assert hits(ADVICE, ctx("Can I transfer my BT pension?", f"{WARNED} {SIGNPOSTED}", pots=over)) == []


def test_saying_advice_is_not_needed_is_not_a_signpost() -> None:
    over = [("DB", 90000, "BT Pension Scheme")]
    assert hits(
        ADVICE, ctx("Can I transfer?", f"{WARNED} You don't need regulated advice for this.", pots=over)
    )


def test_leaving_the_scheme_for_a_cash_offer_is_a_transfer_discussion() -> None:
    customer = "Tata's offering people a cash lump sum to leave the scheme. Tempted."
    pots = [("DB", 90000, "Tata Steel")]
    no_warning = "A lump sum would give you flexibility now. " + SIGNPOSTED
    assert hits(WARNING, ctx(customer, no_warning, pots=pots))
    warned = "You'd be swapping a guaranteed income for life for a one-off sum. "
    assert hits(ADVICE, ctx(customer, warned, pots=pots))
    assert hits(WARNING, ctx(customer, warned + SIGNPOSTED, pots=pots)) == []
    assert hits(ADVICE, ctx(customer, warned + SIGNPOSTED, pots=pots)) == []


# --- Families found by the blind batch C (written without reading the rules) -----------------


def _gar_ctx(customer: str, reply: str, value: float = 60000):
    from compliance.models import Pot

    context = ctx(customer, reply)
    context.customer.pots[:] = [
        Pot(type="DC", value_gbp=value, provider="Equitable Life", has_guarantees=True)
    ]
    return context


def test_a_guaranteed_annuity_rate_over_the_threshold_needs_the_advice_signpost() -> None:
    # Safeguarded benefits include a DC pot's guaranteed annuity rate (Pension Schemes Act 2015 s48).
    reply = "Yes, you can transfer it, though the guaranteed annuity rate would be lost."
    customer = "Can I transfer my old Equitable policy? It has a guaranteed annuity rate."
    assert hits(ADVICE, _gar_ctx(customer, reply))
    assert hits(ADVICE, _gar_ctx(customer, reply + " " + SIGNPOSTED)) == []
    assert hits(ADVICE, _gar_ctx(customer, reply, value=25000)) == []
    # Explaining what a GAR is, with a warning that moving would lose it, is no transfer discussion.
    explained = "A GAR is a promise of a set annuity rate. You could lose it if you transfer."
    assert hits(ADVICE, _gar_ctx("What does guaranteed annuity rate mean?", explained)) == []
    assert hits(WARNING, _gar_ctx("What does guaranteed annuity rate mean?", explained)) == []


@pytest.mark.parametrize(
    "warning",
    [
        "Your DB pension pays a guaranteed income for life, and giving any of that up is rarely in people's interest.",
        "If you ever transferred it, you'd be giving that guarantee up.",
        "The FCA's starting assumption is that a transfer won't be suitable for most people.",
        "That also means you keep the guaranteed, inflation-linked income the scheme pays.",
        "It pays a guaranteed income for life. If you transferred, you'd lose it.",
    ],
)
def test_blind_c_warnings_in_other_words(warning: str) -> None:
    assert hits(WARNING, ctx("Can I transfer my final salary pension?", warning, pots=DB_ONLY)) == []


def test_colloquial_moving_puts_a_transfer_in_play() -> None:
    customer = "Ma works pension is final salary. Can I shift it tae a SIPP and buy shares wi it?"
    assert hits(WARNING, ctx(customer, "You can, if you take regulated advice first.", pots=DB_ONLY))


def test_no_advice_signpost_is_owed_for_an_unfunded_public_service_scheme() -> None:
    # Such schemes cannot convert to flexible benefits (Pension Schemes Act 2015 s66), so s48 never bites.
    nhs = [("DB", 52000, "NHS Pension Scheme")]
    reply = "No. The law doesn't allow transfers from the NHS scheme into defined contribution pensions."
    assert hits(ADVICE, ctx("Could I move my NHS pension into a personal pension?", reply, pots=nhs)) == []
    assert hits(
        ADVICE,
        ctx("Could I move my Boots pension into a personal pension?", reply, pots=[("DB", 52000, "Boots")]),
    )


# --- Blind batch D: advice said not to be needed over the threshold ---------------------------


@pytest.mark.parametrize(
    "reply",
    [
        "Yes, the £30,000 limit means your transfer doesn't need advice. You'd lose the guaranteed income.",
        "No - advice is only compulsory for transfers over £50,000, so you can go ahead yourself.",
        "You aren't legally required to take advice; you'd give up a guaranteed income for life.",
        "You could just transfer it yourself, but you'd give up the guaranteed income.",
    ],
)
def test_saying_advice_is_not_needed_over_the_threshold_is_a_factual_error(reply: str) -> None:
    pots = [("DB", 42000, "Stagecoach Group Pension Scheme")]
    context = ctx("Do I need a financial adviser to transfer my pension?", reply, pots=pots)
    assert ComplianceCode.FACTUAL_ERROR in {h.code for h in hits(ADVICE, context)}


def test_saying_advice_is_not_needed_under_the_threshold_is_right() -> None:
    pots = [("DB", 25000, "Stagecoach Group Pension Scheme")]
    reply = "At £25,000 the law doesn't need you to take advice, though you'd give up a guaranteed income."
    context = ctx("Do I need a financial adviser to transfer my pension?", reply, pots=pots)
    assert hits(ADVICE, context) == []


# --- Blind batch D: cashing in a small DB pension; the loss told as "gone" -------------------------


@pytest.mark.parametrize(
    "customer",
    [
        "The council pension wrote saying I can take my small pension as a one-off lump sum instead.",
        "Can I commute my pension into a single payment?",
        "They've offered trivial commutation on my old scheme.",
    ],
)
def test_cashing_in_a_small_db_pension_needs_the_warning(customer: str) -> None:
    pots = [("DB", 18000, "Local Government Pension Scheme")]
    bland = "That's called trivial commutation: 25% is tax-free and the rest is taxed as income."
    assert hits(WARNING, ctx(customer, bland, pots=pots))


@pytest.mark.parametrize(
    "reply",
    [
        "The scheme gives you an income for life that's guaranteed. Transfer, and that's gone for good.",
        "Once it's paid, the guaranteed income for life and any yearly increases are gone.",
        "Your guaranteed pension would be swapped for a pot that can fall in value.",
        "If you cash it in you'll no longer have the guaranteed income for life.",
    ],
)
def test_the_loss_told_in_other_words_is_a_warning(reply: str) -> None:
    assert hits(WARNING, ctx("Should I transfer my final salary pension?", reply, pots=DB_ONLY)) == []
