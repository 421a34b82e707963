"""The advisor's calculators: every figure it states must come from here or the knowledge base.

The same calculators back the validator's figure check (through `facts`), so a figure the advisor
quotes from a tool result is checked against that result.
"""

from __future__ import annotations

from typing import Any

from compliance.calculators import (
    consolidation_comparison,
    dc_charge,
    drawdown_sustainability,
    personal_minimum_pension_age,
    state_pension_age,
    tax_free_cash,
)
from compliance.knowledge import KnowledgeBase
from compliance.models import CustomerProfile

# The knowledge figures the advisor is shown in its prompt.
ADVISOR_FIGURES = (
    "tax_free_cash_fraction",
    "lump_sum_allowance",
    "lump_sum_and_death_benefit_allowance",
    "annual_allowance",
    "money_purchase_annual_allowance",
    "normal_minimum_pension_age",
    "normal_minimum_pension_age_from_2028",
    "full_new_state_pension_weekly",
    "db_advice_threshold",
    "projection_growth_lower",
    "projection_growth_intermediate",
    "projection_growth_higher",
    "projection_inflation",
    "charge_cap_default_arrangement",
)


def spa_years(years: int, months: int) -> float:
    return years + months / 12


def spa_text(years: int, months: int) -> str:
    if months == 0:
        return f"{years}"
    return f"{years} years and {months} month{'s' if months != 1 else ''}"


class AdvisorTools:
    def __init__(self, knowledge: KnowledgeBase) -> None:
        self.knowledge = knowledge
        self.tax_year = knowledge.meta.tax_year
        # The knowledge base is read-only, so the figures shown to the advisor are built once.
        self._figures = knowledge.figure_table(ADVISOR_FIGURES)

    def figures(self) -> dict[str, dict[str, Any]]:
        return self._figures

    def run(self, profile: CustomerProfile) -> dict[str, dict[str, Any]]:
        """Every tool that applies to this profile: tax-free cash and State Pension age always, a
        drawdown illustration when there is DC money, a consolidation comparison for several pots."""
        results = self._statutory(profile)
        drawdown = self._drawdown(profile)
        if drawdown:
            results["drawdown"] = drawdown
        if len(profile.pots) > 1:
            results["consolidation"] = self._consolidation(profile)
        return results

    def _statutory(self, profile: CustomerProfile) -> dict[str, dict[str, Any]]:
        tfc = tax_free_cash(profile.pots, self.knowledge)
        spa = state_pension_age(profile.age, self.knowledge)
        earliest = spa_years(spa.earliest.years, spa.earliest.months)
        latest = spa_years(spa.latest.years, spa.latest.months)
        return {
            "tax_free_cash": {
                "dc_total_gbp": tfc.dc_total_gbp,
                "tax_free_cash_gbp": tfc.amount_gbp,
                "capped": tfc.capped,
                "cap_gbp": tfc.cap_gbp,
            },
            "state_pension_age": {
                "earliest_years": earliest,
                "latest_years": latest,
                # Where a customer's age spans two State Pension ages, the advisor gives the later.
                "state_pension_age_years": latest,
                "state_pension_age_text": spa_text(spa.latest.years, spa.latest.months),
            },
        }

    def _drawdown(self, profile: CustomerProfile) -> dict[str, Any] | None:
        """Drawdown of all the DC money from the customer's minimum pension age (or now, if later),
        with what is left a fixed number of years on at each FCA growth rate."""
        kb = self.knowledge
        pot = sum(p.value_gbp for p in profile.pots if p.type == "DC")
        start = max(profile.age, *personal_minimum_pension_age(profile.age, kb).possible_ages)
        end = int(kb.figure("drawdown_projection_end_age").value)
        if pot <= 0 or start >= end:
            return None
        at_age = min(end, start + int(kb.figure("projection_illustration_years").value))
        charge = dc_charge(profile.pots, kb)
        result = drawdown_sustainability(pot, kb, start_age=start, charge=charge.rate, ages=[at_age])
        out: dict[str, Any] = {
            "pot_gbp": result.pot_gbp,
            "withdrawal_rate": result.withdrawal_rate,
            "annual_withdrawal_gbp": result.annual_withdrawal_gbp,
            "charge_rate": round(result.charge_rate, 4),
            "charge_assumed": charge.assumed,
            "inflation_rate": result.inflation_rate,
            "start_age": start,
            "end_age": end,
            "illustration_age": at_age,
            "illustration_years": at_age - start,
        }
        for scenario in result.scenarios:
            out[f"growth_rate_{scenario.name}"] = scenario.growth_rate
            # None: the money lasts to the end age.
            out[f"years_lasting_{scenario.name}"] = scenario.years_lasting
            out[f"left_at_illustration_age_{scenario.name}_gbp"] = scenario.balance_today_at_age[at_age]
        return out

    def _consolidation(self, profile: CustomerProfile) -> dict[str, Any]:
        result = consolidation_comparison(profile.pots, self.knowledge)
        return {
            "pots_compared": sum(line.included for line in result.pots),
            "moved_value_gbp": result.moved_value_gbp,
            "excluded_value_gbp": result.excluded_value_gbp,
            "target_charge_rate": result.target_charge_rate,
            "growth_rate": result.growth_rate,
            "years": result.years,
            "current_annual_charges_gbp": result.current_annual_charges_gbp,
            "target_annual_charges_gbp": result.target_annual_charges_gbp,
            "exit_fees_gbp": result.exit_fees_gbp,
            "value_if_kept_gbp": result.value_if_kept_gbp,
            "value_if_moved_gbp": result.value_if_moved_gbp,
            # Stated as "better" or "worse off by", so the size is a fact and the sign a flag.
            "value_difference_gbp": abs(result.value_difference_gbp),
            "better_off_moving": result.value_difference_gbp > 0,
            "charges_if_kept_gbp": result.charges_if_kept_gbp,
            "charges_if_moved_gbp": result.charges_if_moved_gbp,
            "charges_assumed": any(line.charge_assumed for line in result.pots if line.included),
            "flags": result.flags,
            # DC pots left out for their guarantees (a DB pension has its own warning).
            "dc_guarantees": [
                {"provider": line.pot.provider, "guarantee": line.pot.guarantee}
                for line in result.pots
                if line.pot.type == "DC" and line.pot.has_guarantees
            ],
        }

    @staticmethod
    def facts(results: dict[str, dict[str, Any]]) -> dict[str, float]:
        """Tool figures as the validator's figure check reads them: amounts, ages and years.

        Rates (growth, charges, inflation) are left out: they are stated as percentages, which the
        check holds to the knowledge base, and as fractions they would only pad its messages."""
        out: dict[str, float] = {}
        for tool, values in results.items():
            for name, value in values.items():
                if (
                    isinstance(value, int | float)
                    and not isinstance(value, bool)
                    and not name.endswith("_rate")
                ):
                    out[f"{tool}.{name}"] = float(value)
        return out
