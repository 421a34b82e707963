"""Pension calculators: figures come from the knowledge base and results say what they used."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compliance.calculators import (
    birth_date_range,
    consolidation_comparison,
    dc_charge,
    drawdown_projection,
    drawdown_sustainability,
    full_state_pension,
    minimum_pension_age,
    personal_minimum_pension_age,
    round_down_significant,
    state_pension_age,
    tax_free_cash,
)
from compliance.models import Pot
from tests.compliance.rulekit import kb


def test_tax_free_cash_is_a_quarter_of_dc_savings_capped_by_the_allowance() -> None:
    small = tax_free_cash([Pot(type="DC", value_gbp=80000), Pot(type="DB", value_gbp=200000)], kb())
    assert small.amount_gbp == 20000 and not small.capped and small.dc_total_gbp == 80000
    big = tax_free_cash([Pot(type="DC", value_gbp=1_400_000)], kb())
    assert big.uncapped_gbp == 350000 and big.amount_gbp == 268275 and big.capped
    assert "lump_sum_allowance" in big.knowledge_used


@given(st.lists(st.floats(min_value=0, max_value=5e6), min_size=1, max_size=4))
def test_tax_free_cash_never_exceeds_the_cap_or_the_quarter(values: list[float]) -> None:
    result = tax_free_cash([Pot(type="DC", value_gbp=v) for v in values], kb())
    assert result.amount_gbp <= result.cap_gbp
    assert result.amount_gbp <= sum(values) * 0.25 + 1e-6


@pytest.mark.parametrize(("age", "ages"), [(70, [55]), (54, [55]), (53, [55, 57]), (52, [57]), (40, [57])])
def test_personal_minimum_pension_age_around_the_2028_rise(age: int, ages: list[int]) -> None:
    assert personal_minimum_pension_age(age, kb()).possible_ages == ages


def test_minimum_pension_age_by_date() -> None:
    assert minimum_pension_age(date(2028, 4, 5), kb()).age == 55
    assert minimum_pension_age(date(2028, 4, 6), kb()).age == 57


@pytest.mark.parametrize(("age", "years"), [(70, {66}), (62, {67}), (50, {67}), (45, {68})])
def test_state_pension_age_for_an_age(age: int, years: set[int]) -> None:
    assert state_pension_age(age, kb()).whole_years() == years


def test_state_pension_age_for_a_date_of_birth_in_the_phased_rise() -> None:
    result = state_pension_age(date(1960, 5, 20), kb())
    assert (result.earliest.years, result.earliest.months) == (66, 2)


def test_birth_date_range_covers_a_year() -> None:
    start, end = birth_date_range(60, date(2026, 4, 6))
    assert (end - start).days in (364, 365)
    assert end == date(1966, 4, 6)


def test_drawdown_projection_reports_when_money_runs_out() -> None:
    flat = drawdown_projection(100_000, 10_000, 0.0, 12)
    assert flat.runs_out_in_year == 11 and flat.years_lasting == 10
    assert flat.final_balance_gbp == 0 and flat.total_withdrawn_gbp == 100_000
    growing = drawdown_projection(100_000, 3_000, 0.05, 10)
    assert growing.runs_out_in_year is None and growing.years_lasting is None
    assert growing.final_balance_gbp > 100_000
    with pytest.raises(ValueError):
        drawdown_projection(-1, 1, 0, 1)
    with pytest.raises(ValueError):
        drawdown_projection(1, 1, 0, 1, charge=1.0)


def test_drawdown_projection_with_charges_and_inflation_by_hand() -> None:
    # Year 1: (10,000 - 1,000) x 1.05 x 0.99 = 9,355.50, or 9,355.50 / 1.02 = 9,172.06 today.
    # Year 2: the withdrawal rises to 1,020: (9,355.50 - 1,020) x 1.05 x 0.99 = 8,664.75225,
    # or 8,664.75225 / 1.02^2 = 8,328.29 today.
    result = drawdown_projection(10_000, 1_000, 0.05, 2, charge=0.01, inflation=0.02)
    assert result.balances_gbp == [9355.5, 8664.75]
    assert result.balances_today_gbp == [9172.06, 8328.29]
    assert result.total_withdrawn_gbp == 2020


@pytest.mark.parametrize(
    ("value", "rounded"),
    [(123_456, 123_000), (9_876.5, 9_870), (45.678, 45.6), (-5_067.9, -5_060), (0, 0), (100_000, 100_000)],
)
def test_round_down_to_three_significant_figures(value: float, rounded: float) -> None:
    assert round_down_significant(value) == rounded


def test_drawdown_sustainability_at_the_fca_rates_by_hand() -> None:
    # 4% of £100,000 = £4,000 a year from 60. Without charges the lower rate (2%) equals
    # inflation, so in today's money the pot falls by exactly £4,000 a year: 25 full years, and
    # it runs out at 85. A year on, the intermediate rate leaves 96,000 x 1.05 / 1.02 = 98,823.53
    # and the higher 96,000 x 1.08 / 1.02 = 101,647.06, each rounded down to 3 figures.
    result = drawdown_sustainability(100_000, kb(), start_age=60, charge=0.0, ages=[61, 85, 120])
    lower, middle, higher = (result.scenario(n) for n in ("lower", "intermediate", "higher"))
    assert result.annual_withdrawal_gbp == 4_000 and result.withdrawal_rate == 0.04
    assert (lower.growth_rate, middle.growth_rate, higher.growth_rate) == (0.02, 0.05, 0.08)
    assert lower.years_lasting == 25 and lower.runs_out_at_age == 85
    assert lower.balance_today_at_age == {61: 96_000, 85: 0}
    assert middle.balance_today_at_age[61] == 98_800 and higher.balance_today_at_age[61] == 101_000
    assert higher.years_lasting is None and 120 not in higher.balance_today_at_age
    assert not result.charge_assumed and result.end_age == 100
    assert "illustrative_withdrawal_rate" in result.knowledge_used
    assert any("COBS 13 Annex 2" in source for source in result.sources)


def test_drawdown_sustainability_assumes_the_charge_cap_when_no_charge_is_given() -> None:
    # A year on at the lower rate: (100,000 - 4,000) x 1.02 x (1 - 0.0075) / 1.02 = 95,280.
    result = drawdown_sustainability(100_000, kb(), start_age=60, ages=[61])
    assert result.charge_rate == 0.0075 and result.charge_assumed
    assert result.scenario("lower").balance_today_at_age[61] == 95_200
    assert result.scenario("lower").years_lasting == 22
    by_amount = drawdown_sustainability(100_000, kb(), start_age=60, withdrawal=10_000, charge=0.0)
    assert by_amount.withdrawal_rate == 0.1 and by_amount.scenario("lower").years_lasting == 10
    with pytest.raises(ValueError):
        drawdown_sustainability(100_000, kb(), start_age=60, withdrawal=1, withdrawal_rate=0.1)


def test_dc_charge_weights_by_value_and_assumes_the_cap_where_unknown() -> None:
    known = [Pot(type="DC", value_gbp=30_000, annual_charge_rate=0.01), Pot(type="DC", value_gbp=10_000)]
    charge = dc_charge([*known, Pot(type="DB", value_gbp=90_000)], kb())
    assert charge.rate == pytest.approx((300 + 75) / 40_000) and charge.assumed


def _four_pots() -> list[Pot]:
    return [
        Pot(type="DC", value_gbp=50_000, provider="A", annual_charge_rate=0.015, exit_fee_gbp=500),
        Pot(type="DC", value_gbp=30_000, provider="B", annual_charge_rate=0.005),
        Pot(
            type="DC",
            value_gbp=20_000,
            provider="C",
            has_guarantees=True,
            guarantee="guaranteed annuity rate",
            annual_charge_rate=0.012,
        ),
        Pot(type="DB", value_gbp=100_000, provider="D", has_guarantees=True),
    ]


def test_consolidation_comparison_by_hand() -> None:
    # Only A and B are compared. Charges now 750 + 150 = 900 a year; at the 0.75% cap 80,000 x
    # 0.0075 = 600. Two years at 5%, the charge taken from the grown value:
    #   A: 52,500 -> charge 787.50 -> 51,712.50 -> 54,298.125 -> charge 814.47 -> 53,483.65
    #   B: 31,500 -> charge 157.50 -> 31,342.50 -> 32,909.625 -> charge 164.55 -> 32,745.08
    #   moved (80,000 - 500 exit fee): 83,475 -> 626.06 -> 82,848.94 -> 86,991.38 -> 652.44 -> 86,338.95
    result = consolidation_comparison(_four_pots(), kb(), years=2)
    assert result.current_annual_charges_gbp == 900 and result.target_annual_charges_gbp == 600
    assert result.annual_saving_gbp == 300 and result.exit_fees_gbp == 500
    assert result.breakeven_years == pytest.approx(1.67)
    assert result.charges_if_kept_gbp == 1924 and result.charges_if_moved_gbp == 1278
    assert result.value_if_kept_gbp == 86_200 and result.value_if_moved_gbp == 86_300
    assert result.value_difference_gbp == 110  # 86,338.95 - 86,228.73, rounded down to 3 figures
    assert result.moved_value_gbp == 80_000 and result.excluded_value_gbp == 120_000


def test_consolidation_never_folds_in_guarantees_or_db_silently() -> None:
    result = consolidation_comparison(_four_pots(), kb())
    included = {line.pot.provider: line.included for line in result.pots}
    assert included == {"A": True, "B": True, "C": False, "D": False}
    assert any("C has a guaranteed annuity rate that would be lost" in f for f in result.flags)
    assert any("D is a defined benefit pension" in f for f in result.flags)
    assert any("exit fee of £500" in f for f in result.flags)
    assert result.years == 10 and result.target_charge_rate == 0.0075
    only_guaranteed = consolidation_comparison(_four_pots()[2:], kb())
    assert only_guaranteed.moved_value_gbp == 0 and only_guaranteed.current_annual_charges_gbp == 0
    assert any("None of these pensions" in f for f in only_guaranteed.flags)
    cheap = consolidation_comparison([Pot(type="DC", value_gbp=10_000, annual_charge_rate=0.002)], kb())
    assert cheap.annual_saving_gbp < 0 and cheap.breakeven_years is None
    assert any("would not reduce" in f for f in cheap.flags)
    unknown = consolidation_comparison([Pot(type="DC", value_gbp=10_000)], kb())
    assert unknown.pots[0].charge_assumed and unknown.pots[0].charge_rate == 0.0075
    with pytest.raises(ValueError):
        consolidation_comparison(_four_pots(), kb(), target_charge=1.5)


def test_full_state_pension_annual_figure() -> None:
    amount = full_state_pension(kb())
    assert amount.weekly_gbp == 241.30 and amount.annual_gbp == pytest.approx(241.30 * 52)
    assert amount.tax_year == "2026/27"
