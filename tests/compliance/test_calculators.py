"""Pension calculators: figures come from the knowledge base and results say what they used."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compliance.calculators import (
    PotFees,
    birth_date_range,
    consolidation_fee_comparison,
    drawdown_projection,
    full_state_pension,
    minimum_pension_age,
    personal_minimum_pension_age,
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
    assert flat.runs_out_in_year == 11 and flat.final_balance_gbp == 0 and flat.total_withdrawn_gbp == 100_000
    growing = drawdown_projection(100_000, 3_000, 0.05, 10)
    assert growing.runs_out_in_year is None and growing.final_balance_gbp > 100_000
    with pytest.raises(ValueError):
        drawdown_projection(-1, 1, 0, 1)


def test_consolidation_flags_guarantees_and_db_and_computes_breakeven() -> None:
    pots = [
        PotFees(pot=Pot(type="DC", value_gbp=50_000, provider="A"), annual_fee_rate=0.01, exit_fee_gbp=200),
        PotFees(
            pot=Pot(type="DC", value_gbp=50_000, provider="B", has_guarantees=True), annual_fee_rate=0.01
        ),
        PotFees(pot=Pot(type="DB", value_gbp=10_000, provider="C"), annual_fee_rate=0.0),
    ]
    result = consolidation_fee_comparison(pots, 0.005)
    assert result.annual_saving_gbp == pytest.approx(1000 - 550)
    assert result.breakeven_years == pytest.approx(200 / 450, abs=0.01)
    assert any("guarantees" in w for w in result.warnings) and any(
        "defined benefit" in w for w in result.warnings
    )
    with pytest.raises(ValueError):
        consolidation_fee_comparison(pots, 1.5)


def test_full_state_pension_annual_figure() -> None:
    amount = full_state_pension(kb())
    assert amount.weekly_gbp == 241.30 and amount.annual_gbp == pytest.approx(241.30 * 52)
    assert amount.tax_year == "2026/27"
