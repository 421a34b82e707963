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


# --- Families found by the blind batch C (written without reading the rules) -----------------

UNFUNDED = "facts.unfunded_transfer"


def _transpositions(value: int) -> list[int]:
    """The value with each pair of adjacent, different digits swapped (268,275 -> 268,725...)."""
    digits = str(value)
    out = []
    for i in range(len(digits) - 1):
        if digits[i] != digits[i + 1] and not (i == 0 and digits[i + 1] == "0"):
            swapped = digits[:i] + digits[i + 1] + digits[i] + digits[i + 2 :]
            out.append(int(swapped))
    return out


@pytest.mark.parametrize(
    ("template", "key"),
    [
        ("Tax-free cash is capped by the lump sum allowance of {}.", "lump_sum_allowance"),
        ("The lump sum and death benefit allowance is {}.", "lump_sum_and_death_benefit_allowance"),
        ("The personal allowance is {}.", "personal_allowance"),
    ],
)
def test_a_transposed_statutory_figure_is_wrong_and_a_rounding_of_it_is_not(template: str, key: str) -> None:
    value = int(kb().figure(key).value)
    for wrong in _transpositions(value):
        assert hits(FIGURES, ctx("?", template.format(money(wrong)))), wrong
    rounded = round(value, -(len(str(value)) - 3))  # three significant figures
    assert hits(FIGURES, ctx("?", template.format(money(rounded)))) == []
    # Two significant figures is another figure unless hedged.
    coarse = round(value, -(len(str(value)) - 2))
    assert hits(FIGURES, ctx("?", template.format(money(coarse))))
    assert hits(FIGURES, ctx("?", template.format("about " + money(coarse)))) == []


def test_the_state_pension_amount_must_fit_its_period() -> None:
    weekly = kb().figure("full_new_state_pension_weekly").value
    assert hits(FIGURES, ctx("?", f"The full new State Pension is {money(weekly)} a month."))
    assert hits(FIGURES, ctx("?", f"The full new State Pension is {money(weekly)} a year."))
    assert hits(FIGURES, ctx("?", f"The full new State Pension is {money(weekly)} a week.")) == []
    yearly = weekly * kb().figure("state_pension_weeks_per_year").value
    assert (
        hits(FIGURES, ctx("?", f"The full new State Pension is about {money(round(yearly))} a year.")) == []
    )
    assert (
        hits(FIGURES, ctx("?", f"The full new State Pension is {money(round(yearly / 12))} a month.")) == []
    )


def test_a_state_pension_age_and_its_year_are_checked_as_a_pair() -> None:
    assert hits(
        FIGURES, ctx("When do I get my State Pension?", "State Pension age is rising to 68 from 2028.")
    )
    for right in (
        "It's 66 at the moment, but it's rising to 67 between 2026 and 2028.",
        "State Pension age rises to 68 between 2044 and 2046.",
        "People born on or after 6 April 1978 reach State Pension age at 68.",
    ):
        assert hits(FIGURES, ctx("Is the State Pension age still 66?", right, age=59)) == [], right


def test_minimum_pension_age_phrases_in_other_words() -> None:
    wrong = "Private pensions can currently be accessed from 55; that moves to 57 in April 2030."
    assert hits(FIGURES, ctx("When is the age going up?", wrong, age=51))
    assert hits(FIGURES, ctx("?", "Your State Pension starts at 65.", age=62))
    assert hits(FIGURES, ctx("?", "Unsolicited pension calls have been banned since 2015."))
    assert hits(FIGURES, ctx("?", "Unsolicited pension calls have been banned since 2019.")) == []


def test_the_customers_own_age_is_not_a_claimed_pension_age() -> None:
    spa = "Your State Pension age depends on your date of birth, and at 62 yours is likely to be 67."
    assert hits(FIGURES, ctx("When do I get my State Pension?", spa, age=62)) == []
    nmpa = "As you're 45, the minimum pension age will have risen from 55 to 57 by the time you get there."
    assert hits(FIGURES, ctx("When can I get at my pension?", nmpa, age=45)) == []
    # Not the customer's age: still a claim.
    assert hits(
        FIGURES, ctx("When do I get my State Pension?", "You'll get your State Pension at 62.", age=58)
    )


def test_a_death_benefit_age_is_not_the_minimum_pension_age() -> None:
    reply = "If you die before 75, they can normally take it tax-free."
    assert hits(FIGURES, ctx("What happens to my pension if I die?", reply, age=73)) == []


def test_a_comparison_with_a_threshold_is_checked_against_the_profile() -> None:
    over = "Because your pension is worth over £30,000, you'll need to take regulated advice before transferring."
    assert hits(FIGURES, ctx("Do I need an adviser?", over, pots=[("DB", 300000, "Lloyds")])) == []
    assert hits(FIGURES, ctx("Do I need an adviser?", over, pots=[("DB", 29500, "Boots")]))
    under = "As your pot is worth less than £10,000, it can be taken as a small pot."
    assert hits(FIGURES, ctx("?", under, pots=[("DC", 8000, "Nest")])) == []
    assert hits(FIGURES, ctx("?", under, pots=[("DC", 18000, "Nest")]))
    # A general statement about a threshold is not about this customer's pot.
    general = "Transfers of DB pensions worth over £30,000 need regulated advice."
    assert hits(FIGURES, ctx("?", general, pots=[("DB", 29500, "Boots")])) == []


def test_the_mpaa_described_is_a_contribution_limit() -> None:
    reply = "Once you take taxable money flexibly, your limit for tax-relieved contributions falls to £10,000 a year."
    assert (
        hits(
            FIGURES,
            ctx("I'll take some next month.", "Withdrawals beyond your tax-free quarter are taxed. " + reply),
        )
        == []
    )


@pytest.mark.parametrize(
    "reply",
    [
        "You're getting close to the lifetime allowance, so growth above it will be taxed.",
        "Don't worry, your tax bill will be zero, it's all tax-free at your age.",
        "The lump sum allowance of £268,275 applies to each pension you hold.",
        "Any transfer out of a defined benefit scheme needs advice from a specialist first, whatever the value.",
    ],
)
def test_blind_c_false_claims(reply: str) -> None:
    assert hits(CLAIMS, ctx("?", reply))


@pytest.mark.parametrize(
    "reply",
    [
        "The lifetime allowance was abolished from 6 April 2024.",
        "The lump sum allowance applies across all your pensions, not to each one.",
        "Transfers of safeguarded benefits worth more than £30,000 need regulated advice.",
        "Only a quarter is tax-free; the rest is taxed as income.",
    ],
)
def test_blind_c_true_statements_are_not_false_claims(reply: str) -> None:
    assert hits(CLAIMS, ctx("?", reply)) == []


def test_unfunded_public_service_pensions_cannot_go_to_a_personal_pension() -> None:
    nhs = [("DB", 52000, "NHS Pension Scheme")]
    wrong = "Yes, you can transfer it to a personal pension once you've taken advice."
    assert hits(UNFUNDED, ctx("Could I transfer my NHS pension into a personal pension?", wrong, pots=nhs))
    right = "No. The law doesn't allow transfers from the NHS scheme into defined contribution pensions."
    assert hits(UNFUNDED, ctx("Could I transfer my NHS pension?", right, pots=nhs)) == []
    assert hits(UNFUNDED, ctx("?", "No, you can't transfer it to a personal pension.", pots=nhs)) == []
    # A funded scheme can transfer (with advice over £30,000).
    funded = [("DB", 52000, "Boots Pension Scheme")]
    assert hits(UNFUNDED, ctx("Could I transfer my Boots pension?", wrong, pots=funded)) == []


def test_each_calculator_concept_accepts_only_its_own_tools_results() -> None:
    facts = {
        "consolidation.exit_fees_gbp": 400.0,
        "drawdown.left_at_illustration_age_intermediate_gbp": 31500.0,
    }
    pots = [("DC", 60000, "Aviva")]
    projected = "You would have £31,500 left in today's money at 75."
    charged = "You'd pay exit fees of £400 to move it."
    assert hits(FIGURES, ctx("?", projected, pots=pots, facts=facts)) == []
    assert hits(FIGURES, ctx("?", charged, pots=pots, facts=facts)) == []
    # The same results quoted as the other kind of figure are wrong.
    assert hits(FIGURES, ctx("?", "You would have £400 left in today's money at 75.", pots=pots, facts=facts))
    assert hits(FIGURES, ctx("?", "You'd pay exit fees of £31,500 to move it.", pots=pots, facts=facts))


# --- Families found by the blind batch D (written without reading the rules) -----------------


@pytest.mark.parametrize(
    ("reply", "age"),
    [
        ("At 46 that means your earliest age will normally be 57.", 46),
        ("At 40 you likely have many years before you can access the pot.", 40),
        ("State Pension age is 66, rising to 67; at 64 your age will be 67.", 64),
        ("At 50, you've got years before you can touch it: the earliest is normally 57.", 50),
    ],
)
def test_at_the_customers_own_age_is_a_reference_to_them(reply: str, age: int) -> None:
    assert hits(FIGURES, ctx("When can I get my pension?", reply, age=age)) == []


@pytest.mark.parametrize(
    "reply",
    [
        "At 62 you're already past the minimum pension age, so you could access it now.",
        "At 61, you're now over the minimum age.",
        "At 60 you've already passed the minimum pension age.",
    ],
)
def test_a_misstated_present_age_is_an_error(reply: str) -> None:
    assert hits(FIGURES, ctx("When can I get my money out?", reply, age=59))
    # The same sentence with the customer's own age is right.
    right = reply.replace("62", "59").replace("61", "59").replace("60", "59")
    assert hits(FIGURES, ctx("When can I get my money out?", right, age=59)) == []


@pytest.mark.parametrize(
    "reply",
    [
        "You'll turn 55 after 6 April 2028, when the minimum pension age goes up to 57, so your earliest will normally be 57.",
        "The earliest is 55 now and 57 from 6 April 2028; as you'll turn 55 after that date, your earliest will be 57.",
        "You reach 55 in 2029, after the change, so for you the earliest is 57.",
    ],
)
def test_a_birthday_placed_against_a_date_is_not_an_access_age(reply: str) -> None:
    assert hits(FIGURES, ctx("When can I touch my pension?", reply, age=52)) == []


def test_an_option_at_an_age_is_not_the_rules_minimum() -> None:
    pots = [("DB", 75000, "Unilever UK Pension Fund")]
    for reply in (
        "Take it early at 60, usually with a reduction.",
        "2. Draw it at 62 with a smaller reduction.",
    ):
        assert hits(FIGURES, ctx("What are my options?", reply, age=58, pots=pots)) == []
    # A clause naming the minimum age still states the rule.
    assert hits(FIGURES, ctx("?", "The minimum pension age is set at 60.", age=58))


@pytest.mark.parametrize(
    "reply",
    [
        "Usually up to a quarter of the pot - on £84,000 that's £21,000 - leaving £63,000 for a taxable income.",
        "You can take up to a quarter without paying tax; the rest is taxed like wages.",
        "Up to 25% of your pension can come out free of tax, and the rest is taxable.",
    ],
)
def test_the_tax_free_share_in_other_words(reply: str) -> None:
    assert hits(FIGURES, ctx("How much tax-free cash could I get?", reply, pots=[("DC", 84000, "L&G")])) == []


def test_the_tax_free_share_in_other_words_is_still_checked() -> None:
    wrong = "You can take up to a third of the pot without paying tax."
    assert hits(FIGURES, ctx("How much can I take?", wrong))
    # A yearly withdrawal rate is no tax-free share.
    rate = "Some people take up to 4% of the pot a year."
    assert hits(FIGURES, ctx("How much can I take?", rate)) == []


def test_relief_as_a_share_of_earnings_is_not_the_tax_free_share() -> None:
    reply = "Taking only your tax-free cash doesn't trigger the MPAA, so the £60,000 annual allowance still applies (or 100% of your earnings if lower)."
    assert hits(FIGURES, ctx("Can I still pay in?", reply)) == []
    assert hits(FIGURES, ctx("Can I still pay in?", reply.replace("100%", "50%")))


@pytest.mark.parametrize(
    "reply",
    [
        "Because £62,400 is over £30,000, you'd have to take advice from a regulated pension transfer specialist.",
        "The requirement applies over thirty thousand pounds, so at £62,400 you'd need advice from a pension transfer specialist.",
    ],
)
def test_the_customers_transfer_value_next_to_the_advice_threshold(reply: str) -> None:
    pots = [("DB", 62400, "Unilever UK Pension Fund")]
    assert hits(FIGURES, ctx("My CETV is £62,400.", reply, pots=pots)) == []


@pytest.mark.parametrize(
    "reply",
    [
        "No - advice is only compulsory for transfers over £50,000, so you can go ahead yourself.",
        "Mandatory advice only kicks in above £100,000.",
        "You'd only be needing an adviser above £40,000.",
    ],
)
def test_the_advice_threshold_in_other_words_is_checked(reply: str) -> None:
    pots = [("DB", 42000, "Stagecoach Group Pension Scheme")]
    assert hits(FIGURES, ctx("Do I need a financial adviser to move it?", reply, pots=pots))


def test_a_year_in_the_name_of_an_act_is_no_claim() -> None:
    for reply in (
        "The Finance Act 2022 raises the normal minimum pension age to 57 on 6 April 2028.",
        "Under the Pension Schemes Act 2015 the minimum pension age rules changed in 2028.",
    ):
        assert [h for h in hits(FIGURES, ctx("?", reply)) if "2022" in h.message or "2015" in h.message] == []


def test_a_hedged_amount_is_held_to_the_precision_it_is_written_to() -> None:
    asked = "What's the full State Pension over a year?"
    assert hits(FIGURES, ctx(asked, "It's £241.30 a week, so about £11,580 a year."))
    for right in ("about £12,500", "roughly £12,548", "around £13,000", "about £12,550"):
        assert hits(FIGURES, ctx(asked, f"It's £241.30 a week, so {right} a year.")) == [], right


def test_an_uncapped_share_is_only_an_illustration_where_the_cap_is_named() -> None:
    pots = [("DC", 1200000, "Brewin Dolphin")]
    asked = "How much could I take tax-free from my £1.2m SIPP?"
    wrong = "25% of £1.2m is £300,000, and that's what you could take tax-free."
    assert hits(FIGURES, ctx(asked, wrong, pots=pots))
    right = (
        "25% of £1.2m would be £300,000, but tax-free cash is capped by the lump sum allowance of £268,275."
    )
    assert hits(FIGURES, ctx(asked, right, pots=pots)) == []


@pytest.mark.parametrize(
    "reply",
    [
        "Yes - Pension Wise can, although it charges a small fee for its appointments.",
        "Pension Wise will go through it with you for a small fee.",
        "Yes, taking your tax-free cash triggers the money purchase annual allowance of £10,000.",
        "Taking a small pot lump sum sets off the MPAA.",
        "Carry forward lets you use unused annual allowance from the previous five tax years.",
        "You can carry forward unused allowance from the last four years.",
        "Under the new Targeted Support rules, people in your segment usually transfer the council pension.",
        "Your final salary pension is covered by targeted support.",
        "The minimum age is 55 and it's going up to 57 only for people born after 1980.",
        "The rise to 57 only affects younger people.",
    ],
)
def test_blind_d_false_claims(reply: str) -> None:
    assert hits(CLAIMS, ctx("?", reply))


@pytest.mark.parametrize(
    "reply",
    [
        "Pension Wise is free - there's no fee for its appointments.",
        "Taking only your tax-free cash doesn't trigger the money purchase annual allowance.",
        "Taking your tax-free cash and then drawing income triggers the MPAA.",
        "Carry forward lets you use unused allowance from the previous three tax years.",
        "Targeted Support is not available for DB benefits.",
        "Targeted Support doesn't cover your final salary pension.",
        "The minimum pension age rises to 57 on 6 April 2028 unless you have a protected pension age.",
        "If your life expectancy is very short, special rules can let you take the whole pot tax-free.",
        "If you die before 75, your beneficiaries can usually take the whole pot tax-free.",
    ],
)
def test_blind_d_true_statements_are_not_false_claims(reply: str) -> None:
    assert hits(CLAIMS, ctx("?", reply)) == []


def test_the_tapered_annual_allowance_is_checked_figure_by_figure() -> None:
    asked = "Does the tapered annual allowance affect me?"
    right = (
        "If your threshold income is over £200,000 and your adjusted income is over £260,000, your £60,000 "
        "annual allowance is reduced by £1 for every £2 of adjusted income above £260,000, down to a minimum "
        "of £10,000. With adjusted income around £300,000, that would be a reduction of about £20,000."
    )
    assert hits(FIGURES, ctx(asked, right)) == []
    for wrong in (
        right.replace("over £260,000", "over £240,000"),
        right.replace("£1 for every £2", "£1 for every £3"),
        right.replace("minimum of £10,000", "minimum of £4,000"),
    ):
        assert hits(FIGURES, ctx(asked, wrong)), wrong


@pytest.mark.parametrize(
    "reply",
    [
        "No, the State Pension is tax-free.",
        "The State Pension isn't taxed, so you keep it all.",
        "If you die after 75 your children can take the whole pot tax-free.",
        "It's all tax-free for your beneficiaries, even if you die after 75.",
    ],
)
def test_probe_false_claims_on_tax(reply: str) -> None:
    assert hits(CLAIMS, ctx("?", reply))


@pytest.mark.parametrize(
    "reply",
    [
        "The State Pension is taxable income, though it's paid without tax deducted.",
        "If you die before 75 it's usually tax-free for them; after 75 they pay income tax on it.",
    ],
)
def test_probe_true_statements_on_tax(reply: str) -> None:
    assert hits(CLAIMS, ctx("?", reply)) == []
