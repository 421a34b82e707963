"""The advisor's calculators: every figure it states must come from here or the knowledge base.

The same calculators back the validator's figure check (through `facts`), so a figure the advisor
quotes from a tool result is checked against that result.
"""

from __future__ import annotations

from typing import Any

from compliance.calculators import state_pension_age, tax_free_cash
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

    @staticmethod
    def facts(results: dict[str, dict[str, Any]]) -> dict[str, float]:
        """Tool figures as the validator's figure check reads them."""
        out: dict[str, float] = {}
        for tool, values in results.items():
            for name, value in values.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    out[f"{tool}.{name}"] = float(value)
        return out
