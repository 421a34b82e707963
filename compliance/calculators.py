"""Pension calculators over the knowledge base.

Pure functions: every statutory figure comes from the knowledge base and every result names its
inputs and the knowledge items it used, so a figure the advisor quotes from a calculator can be
traced and checked (the figure rule accepts calculator results passed in `UtteranceContext.facts`).
They are wrapped as advisor tools elsewhere.
"""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from compliance.knowledge import KnowledgeBase
from compliance.knowledge.schema import StatePensionAgeBand
from compliance.models import Pot


class YearsMonths(BaseModel):
    years: int
    months: int = 0

    def __str__(self) -> str:
        return f"{self.years}" if not self.months else f"{self.years} years {self.months} months"


class TaxFreeCashResult(BaseModel):
    pots: list[Pot]
    dc_total_gbp: float
    fraction: float
    uncapped_gbp: float
    cap_gbp: float
    amount_gbp: float
    capped: bool
    knowledge_used: list[str]
    note: str = "DB pots are excluded: their tax-free lump sum is set by the scheme's commutation terms."


def tax_free_cash(pots: list[Pot], kb: KnowledgeBase) -> TaxFreeCashResult:
    """25% of the DC savings, capped by the lump sum allowance (which applies across all pensions)."""
    fraction = kb.figure("tax_free_cash_fraction").value
    cap = kb.figure("lump_sum_allowance").value
    dc_total = sum(p.value_gbp for p in pots if p.type == "DC")
    uncapped = dc_total * fraction
    return TaxFreeCashResult(
        pots=pots,
        dc_total_gbp=dc_total,
        fraction=fraction,
        uncapped_gbp=uncapped,
        cap_gbp=cap,
        amount_gbp=min(uncapped, cap),
        capped=uncapped > cap,
        knowledge_used=["tax_free_cash_fraction", "lump_sum_allowance"],
    )


class StatePensionAgeResult(BaseModel):
    birth_date_from: date
    birth_date_to: date
    on: date
    earliest: YearsMonths
    latest: YearsMonths
    knowledge_used: list[str]
    sources: list[str]

    def whole_years(self) -> set[int]:
        """Ages in whole years a person in this range could be told ("your State Pension age is 67")."""
        top = self.latest.years + (1 if self.latest.months else 0)
        return set(range(self.earliest.years, top + 1))


def _add_years(day: date, years: int) -> date:
    try:
        return day.replace(year=day.year + years)
    except ValueError:  # 29 February in a non-leap year
        return day.replace(year=day.year + years, day=28)


def birth_date_range(age: int, on: date) -> tuple[date, date]:
    """Everyone aged `age` on `on` was born in this (inclusive) range."""
    latest = _add_years(on, -age)
    earliest = _add_years(on, -(age + 1)).toordinal() + 1
    return date.fromordinal(earliest), latest


def _bands_for(born_from: date, born_to: date, kb: KnowledgeBase) -> list[StatePensionAgeBand]:
    chosen = []
    for band in kb.state_pension_age_bands:
        lo = band.born_from or date.min
        hi = band.born_to or date.max
        if lo <= born_to and born_from <= hi:
            chosen.append(band)
    if not chosen:
        raise ValueError(f"no State Pension age band covers births {born_from}..{born_to}")
    return chosen


def state_pension_age(
    age_or_birth_date: int | date, kb: KnowledgeBase, on: date | None = None
) -> StatePensionAgeResult:
    """State Pension age from a date of birth, or the range possible for someone of a given age."""
    on = on or kb.meta.reference_date
    if isinstance(age_or_birth_date, date):
        born_from = born_to = age_or_birth_date
    else:
        born_from, born_to = birth_date_range(age_or_birth_date, on)
    bands = _bands_for(born_from, born_to, kb)
    earliest = min((b.earliest_years, b.earliest_months) for b in bands)
    latest = max((b.latest_years, b.latest_months) for b in bands)
    return StatePensionAgeResult(
        birth_date_from=born_from,
        birth_date_to=born_to,
        on=on,
        earliest=YearsMonths(years=earliest[0], months=earliest[1]),
        latest=YearsMonths(years=latest[0], months=latest[1]),
        knowledge_used=["state_pension_age_bands"],
        sources=sorted({b.source for b in bands}),
    )


class MinimumPensionAgeResult(BaseModel):
    on: date
    age: int
    knowledge_used: list[str]


def minimum_pension_age(on: date, kb: KnowledgeBase) -> MinimumPensionAgeResult:
    """The normal minimum pension age in force on a date."""
    rise = kb.key_date("nmpa_rise").date
    key = "normal_minimum_pension_age_from_2028" if on >= rise else "normal_minimum_pension_age"
    return MinimumPensionAgeResult(on=on, age=int(kb.figure(key).value), knowledge_used=[key, "nmpa_rise"])


class PersonalMinimumAgeResult(BaseModel):
    age_now: int
    on: date
    possible_ages: list[int]
    knowledge_used: list[str]


def personal_minimum_pension_age(
    age_now: int, kb: KnowledgeBase, on: date | None = None
) -> PersonalMinimumAgeResult:
    """The age at which someone aged `age_now` can first take pension benefits.

    It depends on whether they reach the current minimum age before the rise date; with only an
    age (not a birth date) both answers are possible for the year group straddling the rise.
    """
    on = on or kb.meta.reference_date
    born_from, born_to = birth_date_range(age_now, on)
    current = int(kb.figure("normal_minimum_pension_age").value)
    possible = set()
    for born in (born_from, born_to):
        reaches_current = _add_years(born, current)
        if reaches_current <= on:
            possible.add(current)
        else:
            possible.add(minimum_pension_age(reaches_current, kb).age)
    return PersonalMinimumAgeResult(
        age_now=age_now,
        on=on,
        possible_ages=sorted(possible),
        knowledge_used=["normal_minimum_pension_age", "normal_minimum_pension_age_from_2028", "nmpa_rise"],
    )


class DrawdownProjection(BaseModel):
    pot_gbp: float
    annual_withdrawal_gbp: float
    growth_rate: float
    years: int
    balances_gbp: list[float] = Field(description="balance at the end of each year")
    runs_out_in_year: int | None
    final_balance_gbp: float
    total_withdrawn_gbp: float
    knowledge_used: list[str] = Field(default_factory=list)
    note: str = (
        "Illustration at a constant growth rate, not a forecast: real returns vary and can be negative."
    )


def drawdown_projection(pot: float, withdrawal: float, growth: float, years: int) -> DrawdownProjection:
    """Withdraw at the start of each year, then grow what is left; stop when the pot is empty."""
    if pot < 0 or withdrawal < 0 or years < 0:
        raise ValueError("pot, withdrawal and years must not be negative")
    balance = pot
    balances: list[float] = []
    withdrawn = 0.0
    runs_out: int | None = None
    for year in range(1, years + 1):
        taken = min(withdrawal, balance)
        if runs_out is None and taken < withdrawal:
            runs_out = year  # the first year the full withdrawal cannot be paid
        withdrawn += taken
        balance = (balance - taken) * (1 + growth)
        balances.append(round(balance, 2))
    return DrawdownProjection(
        pot_gbp=pot,
        annual_withdrawal_gbp=withdrawal,
        growth_rate=growth,
        years=years,
        balances_gbp=balances,
        runs_out_in_year=runs_out,
        final_balance_gbp=round(balance, 2),
        total_withdrawn_gbp=round(withdrawn, 2),
    )


class PotFees(BaseModel):
    pot: Pot
    annual_fee_rate: float = Field(ge=0, lt=1)
    exit_fee_gbp: float = Field(default=0, ge=0)


class ConsolidationFeeComparison(BaseModel):
    pots: list[PotFees]
    consolidated_fee_rate: float
    current_annual_fees_gbp: float
    consolidated_annual_fees_gbp: float
    annual_saving_gbp: float
    exit_fees_gbp: float
    breakeven_years: float | None
    warnings: list[str]
    knowledge_used: list[str] = Field(default_factory=list)


def consolidation_fee_comparison(
    pots: list[PotFees], consolidated_fee_rate: float
) -> ConsolidationFeeComparison:
    """Annual charges now versus after combining the pots, net of exit fees.

    Pots with guarantees (and DB pots) are flagged rather than silently included: moving them can
    lose benefits worth far more than any fee saving.
    """
    if not 0 <= consolidated_fee_rate < 1:
        raise ValueError("consolidated_fee_rate must be a fraction in [0, 1)")
    current = sum(p.pot.value_gbp * p.annual_fee_rate for p in pots)
    total = sum(p.pot.value_gbp for p in pots)
    after = total * consolidated_fee_rate
    saving = current - after
    exit_fees = sum(p.exit_fee_gbp for p in pots)
    breakeven = exit_fees / saving if saving > 0 else None
    warnings = []
    for p in pots:
        label = p.pot.provider or f"{p.pot.type} pot"
        if p.pot.type == "DB":
            warnings.append(f"{label} is a defined benefit pension: moving it gives up a guaranteed income.")
        elif p.pot.has_guarantees:
            warnings.append(f"{label} has guarantees that could be lost by moving it.")
    if saving <= 0:
        warnings.append("Combining would not reduce annual charges.")
    return ConsolidationFeeComparison(
        pots=pots,
        consolidated_fee_rate=consolidated_fee_rate,
        current_annual_fees_gbp=round(current, 2),
        consolidated_annual_fees_gbp=round(after, 2),
        annual_saving_gbp=round(saving, 2),
        exit_fees_gbp=round(exit_fees, 2),
        breakeven_years=None if breakeven is None else round(breakeven, 2),
        warnings=warnings,
    )


class StatePensionAmount(BaseModel):
    weekly_gbp: float
    annual_gbp: float
    tax_year: str
    knowledge_used: list[str]


def full_state_pension(kb: KnowledgeBase) -> StatePensionAmount:
    weekly = kb.figure("full_new_state_pension_weekly")
    weeks = kb.figure("state_pension_weeks_per_year").value
    return StatePensionAmount(
        weekly_gbp=weekly.value,
        annual_gbp=round(weekly.value * weeks, 2),
        tax_year=weekly.tax_year,
        knowledge_used=["full_new_state_pension_weekly", "state_pension_weeks_per_year"],
    )
