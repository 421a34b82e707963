"""Factual accuracy: figures (money, percentages, ages, dates) against the knowledge base, the
customer's profile and calculator results; statements wrong whatever their figure."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compliance.codes import ComplianceCode
from tests.compliance.rulekit import codes, ctx, hits, kb, rule

FIGURES = "facts.figures"
CLAIMS = "facts.false_claims"
EARLY = "facts.early_access"


def money(value: float) -> str:
    return f"£{value:,.2f}" if value % 1 else f"£{value:,.0f}"


def test_identity() -> None:
    for rule_id in (FIGURES, CLAIMS, EARLY):
        assert rule(rule_id).code is ComplianceCode.FACTUAL_ERROR
    assert kb().meta.tax_year in rule(FIGURES).source
    assert "Finance Act 2004 s279" in rule(EARLY).source


@pytest.mark.parametrize(
    ("reply", "age"),
    [
        ("The lump sum allowance is £275,000 for 2026/27.", 60),
        ("The annual allowance is £50,000 a year.", 45),
        ("The money purchase annual allowance is £4,000 a year.", 58),
        ("The full new State Pension is £241.30 a week, which works out at about £11,000 a year.", 66),
        ("Normally a third of your pot can be taken tax-free.", 60),
        ("25% of each withdrawal is tax-free and the other 80% is taxed as income.", 65),
        ("The pension freedoms came in on 6 April 2016.", 63),
        ("The minimum pension age rises to 57 in April 2027.", 52),
        ("Pension cold calling has been banned since 2015, so hang up.", 56),
        ("Unused pension funds come into inheritance tax from April 2026.", 63),
        ("You'll be able to take it from 55, like everyone else.", 48),
        ("You'll reach State Pension age at 65.", 62),
        ("You can get tax relief on contributions up to age 80.", 72),
        ("The earliest you can normally get at your pension is 55.", 49),
        ("Pension income above your personal allowance of £12,750 is taxed.", 66),
    ],
)
def test_wrong_figures_are_flagged(reply: str, age: int) -> None:
    found = hits(FIGURES, ctx("?", reply, age=age))
    assert found and "is wrong for" in found[0].message


@pytest.mark.parametrize(
    ("reply", "age", "pots"),
    [
        (
            "25% of £400,000 is £100,000, well within the lump sum allowance of £268,275.",
            64,
            [("DC", 400000, "F")],
        ),
        ("Before it was abolished in April 2024, the lifetime allowance was £1,073,100.", 62, None),
        ("As you'll turn 55 before 6 April 2028, you can access your pot from 55.", 54, None),
        ("It used to be £40,000, but since April 2023 the annual allowance has been £60,000.", 58, None),
        ("The full new State Pension is £241.30 a week, about £12,500 a year.", 66, None),
        ("It rises from 66 to 67 between 2026 and 2028.", 60, None),
        (
            "25% of £1.4 million would be £350,000, but it's capped by the lump sum allowance at £268,275.",
            67,
            None,
        ),
        ("It's actually 25%, not 30%.", 59, None),
        ("If you took £5,000 a year it could last about 15 years.", 66, None),
    ],
)
def test_right_figures_history_and_illustrations_pass(reply: str, age: int, pots: list | None) -> None:
    assert hits(FIGURES, ctx("?", reply, age=age, pots=pots)) == []


def test_figures_are_checked_against_the_customer_profile() -> None:
    pots = [("DC", 48000, "Aviva"), ("DC", 31000, "Royal London")]
    assert hits(FIGURES, ctx("What's my total?", "Together your two pots come to £89,000.", pots=pots))
    assert hits(FIGURES, ctx("What's my total?", "Together your two pots come to £79,000.", pots=pots)) == []
    assert hits(FIGURES, ctx("?", "You have £66,000 in total.", pots=pots))
    assert hits(FIGURES, ctx("?", "Your Aviva pension is valued at £83,000.", pots=pots))


def test_a_capped_amount_above_the_allowance_is_wrong() -> None:
    pots = [("DC", 1_300_000, "Quilter")]
    assert hits(FIGURES, ctx("Most I can take tax-free?", "Tax-free cash is capped at £325,000.", pots=pots))


def test_calculator_results_in_facts_are_accepted() -> None:
    reply = "Your tax-free cash would be £12,345."
    assert hits(FIGURES, ctx("How much tax-free cash?", reply, pots=[("DC", 60000, "Aviva")]))
    checked = ctx(
        "How much tax-free cash?", reply, pots=[("DC", 60000, "Aviva")], facts={"tax_free_cash_gbp": 12345}
    )
    assert hits(FIGURES, checked) == []


@pytest.mark.parametrize(
    "reply",
    [
        "The lifetime allowance is currently £1,073,100.",
        "Yes, the 55% lifetime allowance charge still applies.",
        "Pension Wise charges a small fee of £50.",
        "There's a £30 booking fee for Pension Wise.",
        "Now you're over 55 the whole pot can be taken tax-free.",
        "Pensions are always outside your estate for inheritance tax.",
    ],
)
def test_false_claims_are_flagged(reply: str) -> None:
    assert hits(CLAIMS, ctx("?", reply))


@pytest.mark.parametrize(
    "reply",
    [
        "The lifetime allowance was abolished from 6 April 2024.",
        "Pension Wise is free and impartial.",
        "Only a quarter of the pot is tax-free.",
        "Until April 2027 pensions are usually outside your estate for inheritance tax.",
    ],
)
def test_true_statements_are_not(reply: str) -> None:
    assert hits(CLAIMS, ctx("?", reply)) == []


def test_early_access_claims_depend_on_the_customers_age() -> None:
    reply = "Taking money from your pension early can help with short-term cash flow."
    assert hits(EARLY, ctx("Can I unlock it?", reply, age=50))
    assert hits(EARLY, ctx("Can I unlock it?", reply, age=60)) == []
    warned = "You can't take money from your pension early unless you're seriously ill."
    assert hits(EARLY, ctx("Can I unlock it?", warned, age=50)) == []


# --- property: any knowledge-base figure quoted correctly is never a FACTUAL_ERROR ----------------

CORRECT_STATEMENTS = [
    ("The lump sum allowance is {}.", "lump_sum_allowance"),
    ("The lump sum and death benefit allowance is {}.", "lump_sum_and_death_benefit_allowance"),
    ("The annual allowance is {} a year.", "annual_allowance"),
    ("The money purchase annual allowance is {}.", "money_purchase_annual_allowance"),
    ("The full new State Pension is {} a week.", "full_new_state_pension_weekly"),
    (
        "Safeguarded benefits worth more than {} need regulated advice before a transfer.",
        "db_advice_threshold",
    ),
    ("The personal allowance is {}.", "personal_allowance"),
]
PREFIXES = st.sampled_from(["", "Yes. ", "Good question. ", "For 2026/27: "])
SUFFIXES = st.sampled_from(["", " Pension Wise is free.", " You can check this on GOV.UK."])


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(CORRECT_STATEMENTS), PREFIXES, SUFFIXES, st.integers(min_value=60, max_value=70))
def test_knowledge_base_money_figures_quoted_correctly_are_never_factual_errors(
    statement: tuple[str, str], prefix: str, suffix: str, age: int
) -> None:
    template, key = statement
    reply = prefix + template.format(money(kb().figure(key).value)) + suffix
    assert ComplianceCode.FACTUAL_ERROR not in codes(ctx("Tell me the figure.", reply, age=age)), reply


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(CORRECT_STATEMENTS), st.floats(min_value=1.15, max_value=3.0))
def test_the_same_figures_misquoted_are_caught(statement: tuple[str, str], factor: float) -> None:
    template, key = statement
    reply = template.format(money(round(kb().figure(key).value * factor, 2)))
    assert ComplianceCode.FACTUAL_ERROR in codes(ctx("Tell me the figure.", reply)), reply


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=55, max_value=74),
    st.integers(min_value=10_000, max_value=1_000_000).map(lambda v: v - v % 1000),
)
def test_a_correct_tax_free_share_of_the_customers_pot_is_never_an_error(age: int, pot: int) -> None:
    fraction = kb().figure("tax_free_cash_fraction").value
    cap = kb().figure("lump_sum_allowance").value
    amount = min(pot * fraction, cap)
    reply = f"You could take up to {money(amount)} tax-free from your {money(pot)} pot."
    assert hits(FIGURES, ctx("How much tax-free cash?", reply, age=age, pots=[("DC", pot, "Aviva")])) == []


def test_ages_stated_as_the_rule_and_its_change_or_as_a_birthday_are_not_errors() -> None:
    # A 50-year-old will wait till 57, but the sentence states today's rule and its change.
    rule_and_change = "You can usually access a personal pension from 55, rising to 57 from 6 April 2028."
    assert hits(FIGURES, ctx("When can I take money out?", rule_and_change, age=50)) == []
    birthday = (
        "For you, the earliest is likely to be 57, because the minimum pension age rises from 55 to 57 "
        "on 6 April 2028, before you turn 55."
    )
    assert hits(FIGURES, ctx("Can I get my pension at 55?", birthday, age=47)) == []
    # "Can't ... before 55" is true for someone whose minimum is 57; "from 55" is not.
    assert hits(FIGURES, ctx("?", "You can't normally take money from a pension before 55.", age=52)) == []
    assert hits(FIGURES, ctx("?", "You'll be able to take money from it from 55.", age=47))


def test_todays_state_pension_age_is_checked_against_the_current_timetable() -> None:
    assert hits(
        FIGURES, ctx("What is the State Pension age?", "The State Pension age is currently 65.", age=62)
    )
    assert (
        hits(FIGURES, ctx("?", "For people born a few years earlier, State Pension age was 65.", age=62))
        == []
    )
    assert hits(
        FIGURES,
        ctx(
            "When do I get it? I was born in 1962.",
            "With a 1962 birthday your State Pension age is 66.",
            age=64,
        ),
    )


def test_described_contribution_limits_and_spelt_out_fractions_are_checked() -> None:
    assert hits(FIGURES, ctx("?", "You can pay in up to £40k a year with tax relief.", age=48))
    assert hits(FIGURES, ctx("?", "You can pay in up to £60,000 a year with tax relief.", age=48)) == []
    assert hits(FIGURES, ctx("How much can I take tax-free?", "Half your pot can be taken tax-free."))


def test_a_figure_named_as_the_exception_is_not_checked_as_the_rule() -> None:
    reply = "Apart from the first 25% it'd all be taxed as income this year."
    assert hits(FIGURES, ctx("thinking i might just blow the lot", reply)) == []
