"""The advisor's calculator tools: which apply to a profile, the facts they give the figure check,
and the scripted advisor's drawdown and consolidation figures passing it right and failing it wrong."""

from __future__ import annotations

from typing import Any

import pytest

from compliance.codes import ComplianceCode
from compliance.models import CustomerProfile, Pot, UtteranceContext
from environments.population import PopulationGenerator, load_population_data
from environments.scripted import phrases
from environments.tasks import render_segments
from environments.tools import AdvisorTools
from tests.compliance.rulekit import engine, kb, rule

FIGURES = "facts.figures"


@pytest.fixture(scope="module")
def tools() -> AdvisorTools:
    return AdvisorTools(kb())


def several_pots() -> CustomerProfile:
    return CustomerProfile(
        age=58,
        pots=[
            Pot(type="DC", value_gbp=64_000, provider="Aviva", annual_charge_rate=0.014, exit_fee_gbp=400),
            Pot(type="DC", value_gbp=25_000, provider="NEST", annual_charge_rate=0.003),
            Pot(
                type="DC",
                value_gbp=18_000,
                provider="Phoenix",
                has_guarantees=True,
                guarantee="guaranteed annuity rate",
                annual_charge_rate=0.012,
            ),
            Pot(type="DB", value_gbp=150_000, provider="Old Works Scheme", has_guarantees=True),
        ],
    )


def variables(tools: AdvisorTools, profile: CustomerProfile) -> dict[str, Any]:
    """What the advisor's reply call is given (the parts the figures come from)."""
    return {
        "customer": {"name": "Sam Jones", **profile.model_dump(mode="json")},
        "tools": tools.run(profile),
        "figures": tools.figures(),
        "tax_year": tools.tax_year,
    }


def figure_hits(tools: AdvisorTools, profile: CustomerProfile, reply: str) -> list[str]:
    context = UtteranceContext(
        customer=profile,
        customer_utterance="Can you help me understand my options?",
        advisor_utterance=reply,
        facts=tools.facts(tools.run(profile)),
    )
    return [h.message for h in rule(FIGURES).check(engine().analyse(context))]


def stated(tools: AdvisorTools, profile: CustomerProfile, goal: str, wrong: bool) -> str:
    return render_segments(phrases.information(goal, variables(tools, profile), wrong))


def test_tools_that_apply_to_each_profile(tools: AdvisorTools) -> None:
    one = tools.run(CustomerProfile(age=62, pots=[Pot(type="DC", value_gbp=40_000)]))
    assert set(one) == {"tax_free_cash", "state_pension_age", "drawdown"}
    db_only = tools.run(CustomerProfile(age=62, pots=[Pot(type="DB", value_gbp=200_000)]))
    assert set(db_only) == {"tax_free_cash", "state_pension_age"}
    many = tools.run(several_pots())
    assert set(many) == {"tax_free_cash", "state_pension_age", "drawdown", "consolidation"}
    assert many["consolidation"]["pots_compared"] == 2
    assert many["consolidation"]["dc_guarantees"] == [
        {"provider": "Phoenix", "guarantee": "guaranteed annuity rate"}
    ]
    assert any("Old Works Scheme is a defined benefit" in f for f in many["consolidation"]["flags"])


def test_drawdown_starts_at_the_minimum_pension_age_for_the_young(tools: AdvisorTools) -> None:
    young = tools.run(CustomerProfile(age=45, pots=[Pot(type="DC", value_gbp=40_000)]))["drawdown"]
    assert (young["start_age"], young["illustration_age"], young["illustration_years"]) == (57, 67, 10)
    # No charge on file: the charge cap is assumed, and said to be.
    assert young["charge_rate"] == 0.0075 and young["charge_assumed"] is True
    assert young["annual_withdrawal_gbp"] == 1_600
    old = tools.run(CustomerProfile(age=95, pots=[Pot(type="DC", value_gbp=40_000)]))["drawdown"]
    assert old["illustration_age"] == 100 and old["illustration_years"] == 5


def test_facts_carry_the_new_numbers_and_skip_flags(tools: AdvisorTools) -> None:
    facts = tools.facts(tools.run(several_pots()))
    assert facts["consolidation.current_annual_charges_gbp"] == round(64_000 * 0.014 + 25_000 * 0.003)
    assert facts["consolidation.exit_fees_gbp"] == 400
    assert "drawdown.left_at_illustration_age_intermediate_gbp" in facts
    skipped = ("flags", "dc_guarantees", "better_off_moving", "charge_assumed", "_rate")
    assert not any(key.endswith(skipped) for key in facts)


@pytest.mark.parametrize("goal", ["drawdown", "consolidation"])
def test_the_scripted_figure_passes_right_and_is_a_factual_error_wrong(
    tools: AdvisorTools, goal: str
) -> None:
    profile = several_pots()
    right = stated(tools, profile, goal, wrong=False)
    wrong = stated(tools, profile, goal, wrong=True)
    assert right != wrong
    assert figure_hits(tools, profile, right) == []
    assert figure_hits(tools, profile, wrong)
    context = UtteranceContext(
        customer=profile,
        customer_utterance="?",
        advisor_utterance=wrong,
        facts=tools.facts(tools.run(profile)),
    )
    assert ComplianceCode.FACTUAL_ERROR in engine().check(context).codes


def test_the_scripted_figures_say_what_they_come_from(tools: AdvisorTools) -> None:
    profile = several_pots()
    drawdown = stated(tools, profile, "drawdown", wrong=False)
    tool = tools.run(profile)["drawdown"]
    left = phrases.money(tool["left_at_illustration_age_intermediate_gbp"])
    assert f"you would have {left} left in today's money" in drawdown
    assert "5% a year before charges" in drawdown and "not a forecast" in drawdown
    consolidation = stated(tools, profile, "consolidation", wrong=False)
    kept = phrases.money(tools.run(profile)["consolidation"]["charges_if_kept_gbp"])
    assert f"you would pay {kept} in charges" in consolidation and "exit fees of £400" in consolidation
    assert (
        "I've left your Phoenix pension out of these figures: it has a guaranteed annuity rate"
        in consolidation
    )


@pytest.mark.parametrize(
    "reply",
    [
        "After 10 years, at 68, you would have £61,000 left in today's money.",
        "You pay about £2,000 a year in charges on those pensions now.",
        "Moving them would mean exit fees of £1,250.",
        "Over 10 years the projected value would be £9,999 higher if you moved them.",
    ],
)
def test_invented_calculator_figures_are_flagged(tools: AdvisorTools, reply: str) -> None:
    assert figure_hits(tools, several_pots(), reply)


def test_figures_quoted_from_the_tools_pass(tools: AdvisorTools) -> None:
    profile = several_pots()
    results = tools.run(profile)
    drawdown, consolidation = results["drawdown"], results["consolidation"]
    for reply in (
        f"At 68 you would have about {phrases.money(drawdown['left_at_illustration_age_lower_gbp'])} left "
        "in today's money at the lower rate.",
        f"You pay {phrases.money(consolidation['current_annual_charges_gbp'])} a year in charges now.",
        f"Moving them would mean exit fees of {phrases.money(consolidation['exit_fees_gbp'])}.",
    ):
        assert figure_hits(tools, profile, reply) == [], reply


def test_over_a_drawn_population_right_figures_pass_and_wrong_ones_are_caught(tools: AdvisorTools) -> None:
    customers = PopulationGenerator(load_population_data(), seed=3).draw(150)
    caught = checked = 0
    for customer in customers:
        profile = customer.profile({"other_pensions", "db_scheme"})
        results = tools.run(profile)
        for goal in ("drawdown", "consolidation"):
            assert figure_hits(tools, profile, stated(tools, profile, goal, wrong=False)) == []
            v = variables(tools, profile)
            checkable = (
                phrases.drawdown_figure_checkable(v)
                if goal == "drawdown"
                else bool(results.get("consolidation", {}).get("pots_compared"))
            )
            if checkable:
                checked += 1
                caught += bool(figure_hits(tools, profile, stated(tools, profile, goal, wrong=True)))
    # A wrong figure slips through only when it happens to lie within 1% of another known amount.
    assert checked > 150 and caught / checked > 0.95
