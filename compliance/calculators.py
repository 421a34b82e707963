"""Pension calculators over the knowledge base.

Pure functions: every statutory figure comes from the knowledge base and every result names its
inputs and the knowledge items it used, so a figure the advisor quotes from a calculator can be
traced and checked (the figure rule accepts calculator results passed in `UtteranceContext.facts`).
They are wrapped as advisor tools elsewhere.
"""

from __future__ import annotations

from datetime import date
from decimal import ROUND_DOWN, Decimal

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


def round_down_significant(value: float, figures: int = 3) -> float:
    """Round towards zero to `figures` significant figures, as COBS 13 Annex 2 1.1R asks of
    projections (rounded down, no more than three significant figures)."""
    if value == 0:
        return 0.0
    exact = Decimal(repr(value))
    step = Decimal(1).scaleb(exact.adjusted() - (figures - 1))
    return float(exact.quantize(step, rounding=ROUND_DOWN))


class DrawdownProjection(BaseModel):
    pot_gbp: float
    annual_withdrawal_gbp: float = Field(description="the first year's withdrawal")
    growth_rate: float = Field(description="nominal, before charges")
    charge_rate: float
    inflation_rate: float
    years: int
    balances_gbp: list[float] = Field(description="nominal balance at the end of each year")
    balances_today_gbp: list[float] = Field(description="the same balances in today's money")
    runs_out_in_year: int | None = Field(description="first year the full withdrawal cannot be paid")
    final_balance_gbp: float
    total_withdrawn_gbp: float
    knowledge_used: list[str] = Field(default_factory=list)
    note: str = (
        "Illustration at a constant growth rate, not a forecast: real returns vary and can be negative."
    )

    @property
    def years_lasting(self) -> int | None:
        """Full years of income paid, or None if the money outlasts the projection."""
        return None if self.runs_out_in_year is None else self.runs_out_in_year - 1


def drawdown_projection(
    pot: float,
    withdrawal: float,
    growth: float,
    years: int,
    *,
    charge: float = 0.0,
    inflation: float = 0.0,
) -> DrawdownProjection:
    """Take the year's withdrawal at the start of each year (rising with `inflation`), grow what
    is left by `growth`, then deduct the year's charge from the grown value."""
    if pot < 0 or withdrawal < 0 or years < 0:
        raise ValueError("pot, withdrawal and years must not be negative")
    if not 0 <= charge < 1 or growth <= -1 or inflation <= -1:
        raise ValueError("charge must be a fraction in [0, 1); growth and inflation above -100%")
    balance = pot
    balances: list[float] = []
    today: list[float] = []
    withdrawn = 0.0
    runs_out: int | None = None
    for year in range(1, years + 1):
        due = withdrawal * (1 + inflation) ** (year - 1)
        taken = min(due, balance)
        # A shortfall under half a penny is floating-point rounding, not money running out.
        if runs_out is None and taken < due - 0.005:
            runs_out = year
        withdrawn += taken
        balance = (balance - taken) * (1 + growth) * (1 - charge)
        balances.append(round(balance, 2))
        today.append(round(balance / (1 + inflation) ** year, 2))
    return DrawdownProjection(
        pot_gbp=pot,
        annual_withdrawal_gbp=withdrawal,
        growth_rate=growth,
        charge_rate=charge,
        inflation_rate=inflation,
        years=years,
        balances_gbp=balances,
        balances_today_gbp=today,
        runs_out_in_year=runs_out,
        final_balance_gbp=round(balance, 2),
        total_withdrawn_gbp=round(withdrawn, 2),
    )


# The FCA's three standard projection rates, by scenario name (COBS 13 Annex 2).
GROWTH_SCENARIOS = {
    "lower": "projection_growth_lower",
    "intermediate": "projection_growth_intermediate",
    "higher": "projection_growth_higher",
}


class PotCharge(BaseModel):
    rate: float
    assumed: bool = Field(description="the pot's charge is not known: the charge cap is assumed")


def pot_charge(pot: Pot, kb: KnowledgeBase) -> PotCharge:
    """A pot's yearly charge, or the default-arrangement charge cap where it is not known."""
    if pot.annual_charge_rate is not None:
        return PotCharge(rate=pot.annual_charge_rate, assumed=False)
    return PotCharge(rate=kb.figure("charge_cap_default_arrangement").value, assumed=True)


class DrawdownScenario(BaseModel):
    name: str
    growth_rate: float
    years_lasting: int | None = Field(description="full years of income; None: lasts to the end age")
    runs_out_at_age: int | None
    balance_today_at_age: dict[int, float] = Field(
        description="what is left at each asked age, in today's money, rounded down to 3 significant figures"
    )
    projection: DrawdownProjection


class DrawdownSustainability(BaseModel):
    pot_gbp: float
    withdrawal_rate: float
    annual_withdrawal_gbp: float
    charge_rate: float
    charge_assumed: bool
    inflation_rate: float
    start_age: int
    end_age: int
    scenarios: list[DrawdownScenario]
    knowledge_used: list[str]
    sources: list[str]
    note: str = (
        "Illustration at the FCA's standard projection rates, not a forecast: returns vary, can be "
        "negative, and the income is not guaranteed."
    )

    def scenario(self, name: str) -> DrawdownScenario:
        return next(s for s in self.scenarios if s.name == name)


def dc_charge(pots: list[Pot], kb: KnowledgeBase) -> PotCharge:
    """The value-weighted yearly charge across the DC pots (the cap where a charge is unknown)."""
    dc = [p for p in pots if p.type == "DC"]
    total = sum(p.value_gbp for p in dc)
    charges = [pot_charge(p, kb) for p in dc]
    if total <= 0:
        return PotCharge(rate=kb.figure("charge_cap_default_arrangement").value, assumed=True)
    rate = sum(p.value_gbp * c.rate for p, c in zip(dc, charges, strict=True)) / total
    return PotCharge(rate=rate, assumed=any(c.assumed for c in charges))


def drawdown_sustainability(
    pot: float,
    kb: KnowledgeBase,
    *,
    start_age: int,
    withdrawal: float | None = None,
    withdrawal_rate: float | None = None,
    charge: float | None = None,
    ages: list[int] | None = None,
) -> DrawdownSustainability:
    """How long a DC pot lasts in drawdown at the FCA's lower, intermediate and higher growth rates.

    The withdrawal is a yearly amount, or a share of the pot (the knowledge base's illustrative
    rate when neither is given), rising each year with the assumed inflation; the charge defaults
    to the default-arrangement charge cap. The projection runs from `start_age` to the knowledge
    base's end age; `ages` picks the ages at which what is left is reported, in today's money.
    """
    used = [*GROWTH_SCENARIOS.values(), "projection_inflation", "drawdown_projection_end_age"]
    if withdrawal is None:
        if withdrawal_rate is None:
            withdrawal_rate = kb.figure("illustrative_withdrawal_rate").value
            used.append("illustrative_withdrawal_rate")
        withdrawal = pot * withdrawal_rate
    elif withdrawal_rate is not None:
        raise ValueError("give a withdrawal or a withdrawal rate, not both")
    rate = withdrawal / pot if pot > 0 else 0.0
    assumed = charge is None
    if charge is None:
        charge = kb.figure("charge_cap_default_arrangement").value
        used.append("charge_cap_default_arrangement")
    inflation = kb.figure("projection_inflation").value
    end_age = int(kb.figure("drawdown_projection_end_age").value)
    years = max(0, end_age - start_age)
    scenarios = []
    for name, key in GROWTH_SCENARIOS.items():
        growth = kb.figure(key).value
        projection = drawdown_projection(pot, withdrawal, growth, years, charge=charge, inflation=inflation)
        lasting = projection.years_lasting
        scenarios.append(
            DrawdownScenario(
                name=name,
                growth_rate=growth,
                years_lasting=lasting,
                runs_out_at_age=None if lasting is None else start_age + lasting,
                balance_today_at_age={
                    age: round_down_significant(projection.balances_today_gbp[age - start_age - 1])
                    for age in ages or []
                    if start_age < age <= end_age
                },
                projection=projection,
            )
        )
    return DrawdownSustainability(
        pot_gbp=pot,
        withdrawal_rate=rate,
        annual_withdrawal_gbp=round(withdrawal, 2),
        charge_rate=charge,
        charge_assumed=assumed,
        inflation_rate=inflation,
        start_age=start_age,
        end_age=end_age,
        scenarios=scenarios,
        knowledge_used=used,
        sources=sorted({kb.figure(key).source for key in used}),
    )


class PotComparison(BaseModel):
    pot: Pot
    charge_rate: float
    charge_assumed: bool
    included: bool = Field(description="part of the comparison; flagged pots are left out")
    flags: list[str]


class ConsolidationComparison(BaseModel):
    pots: list[PotComparison]
    target_charge_rate: float
    growth_rate: float
    years: int
    moved_value_gbp: float
    excluded_value_gbp: float
    current_annual_charges_gbp: float
    target_annual_charges_gbp: float
    annual_saving_gbp: float
    exit_fees_gbp: float
    breakeven_years: float | None
    value_if_kept_gbp: float = Field(description="projection, rounded down to 3 significant figures")
    value_if_moved_gbp: float = Field(description="projection after exit fees, rounded likewise")
    value_difference_gbp: float = Field(description="moved minus kept, rounded towards zero likewise")
    charges_if_kept_gbp: float
    charges_if_moved_gbp: float
    flags: list[str]
    knowledge_used: list[str]
    sources: list[str]
    note: str = (
        "Illustration at a constant growth rate, not a forecast. Only pots without guarantees are "
        "compared: moving a pot with guarantees, or a defined benefit pension, can lose benefits "
        "worth far more than any saving in charges."
    )


def _grow_with_charges(value: float, growth: float, charge: float, years: int) -> tuple[float, float]:
    """Value after `years` of growth with the charge deducted from the grown value each year, and
    the total charges paid."""
    paid = 0.0
    for _ in range(years):
        grown = value * (1 + growth)
        paid += grown * charge
        value = grown * (1 - charge)
    return value, paid


def _pot_label(pot: Pot) -> str:
    return pot.provider or f"{pot.type} pension"


def consolidation_comparison(
    pots: list[Pot],
    kb: KnowledgeBase,
    *,
    target_charge: float | None = None,
    years: int | None = None,
    growth: float | None = None,
) -> ConsolidationComparison:
    """Charges and projected value of the DC pots left where they are versus combined into one
    scheme charging `target_charge` (default: the default-arrangement charge cap), net of exit fees.

    Pots with guarantees (e.g. a guaranteed annuity rate) and defined benefit pensions are never
    folded in silently: they are left out of the comparison and flagged with what moving would lose.
    """
    used = []
    if target_charge is None:
        target_charge = kb.figure("charge_cap_default_arrangement").value
        used.append("charge_cap_default_arrangement")
    if years is None:
        years = int(kb.figure("projection_illustration_years").value)
        used.append("projection_illustration_years")
    if growth is None:
        growth = kb.figure("projection_growth_intermediate").value
        used.append("projection_growth_intermediate")
    if not 0 <= target_charge < 1 or years < 0:
        raise ValueError("target_charge must be a fraction in [0, 1) and years not negative")
    lines: list[PotComparison] = []
    flags: list[str] = []
    for pot in pots:
        charge = pot_charge(pot, kb)
        if charge.assumed and "charge_cap_default_arrangement" not in used:
            used.append("charge_cap_default_arrangement")
        label = _pot_label(pot)
        own: list[str] = []
        if pot.type == "DB":
            own.append(
                f"{label} is a defined benefit pension: moving it would give up a guaranteed income "
                "for life, so it is not part of this comparison."
            )
        elif pot.has_guarantees:
            own.append(
                f"{label} has a {pot.guarantee or 'guarantee'} that would be lost if it were moved, "
                "so it is not part of this comparison."
            )
        included = not own
        if included and pot.exit_fee_gbp > 0:
            own.append(f"{label} charges an exit fee of £{pot.exit_fee_gbp:,.0f} to move it.")
        lines.append(
            PotComparison(
                pot=pot, charge_rate=charge.rate, charge_assumed=charge.assumed, included=included, flags=own
            )
        )
        flags += own
    moving = [line for line in lines if line.included]
    moved = sum(line.pot.value_gbp for line in moving)
    current = sum(line.pot.value_gbp * line.charge_rate for line in moving)
    after = moved * target_charge
    exit_fees = sum(line.pot.exit_fee_gbp for line in moving)
    kept_value = kept_charges = 0.0
    for line in moving:
        value, paid = _grow_with_charges(line.pot.value_gbp, growth, line.charge_rate, years)
        kept_value += value
        kept_charges += paid
    moved_value, moved_charges = _grow_with_charges(max(0.0, moved - exit_fees), growth, target_charge, years)
    saving = current - after
    if not moving:
        flags.append("None of these pensions can be compared without losing a guarantee.")
    elif saving <= 0:
        flags.append("Combining would not reduce yearly charges.")
    return ConsolidationComparison(
        pots=lines,
        target_charge_rate=target_charge,
        growth_rate=growth,
        years=years,
        moved_value_gbp=moved,
        excluded_value_gbp=sum(line.pot.value_gbp for line in lines if not line.included),
        current_annual_charges_gbp=round(current),
        target_annual_charges_gbp=round(after),
        annual_saving_gbp=round(saving),
        exit_fees_gbp=round(exit_fees),
        breakeven_years=round(exit_fees / saving, 2) if saving > 0 else None,
        value_if_kept_gbp=round_down_significant(kept_value),
        value_if_moved_gbp=round_down_significant(moved_value),
        value_difference_gbp=round_down_significant(moved_value - kept_value),
        charges_if_kept_gbp=round(kept_charges),
        charges_if_moved_gbp=round(moved_charges),
        flags=flags,
        knowledge_used=used,
        sources=sorted({kb.figure(key).source for key in used}),
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
