"""What the scripted advisor says, built from the call's variables.

Every figure comes from the `tools` results or the knowledge `figures` passed in the call, so the
scripted advisor states figures exactly as a well-behaved model would, and a "wrong figure"
mistake is a deliberate perturbation of a real one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from environments.tasks import Segment


def money(value: float) -> str:
    return f"£{value:,.0f}" if float(value).is_integer() else f"£{value:,.2f}"


def figure(variables: Mapping[str, Any], key: str) -> float:
    try:
        return float(variables["figures"][key]["value"])
    except KeyError:
        raise KeyError(f"scripted advisor needs knowledge figure '{key}' in the call's figures") from None


def first_name(variables: Mapping[str, Any]) -> str:
    name = str(variables["customer"].get("name", "")).split(" ")[0]
    return name or "there"


def plain(variables: Mapping[str, Any]) -> bool:
    customer = variables["customer"]
    return bool(customer.get("vulnerable")) or customer.get("literacy") == "low"


def has_db(variables: Mapping[str, Any]) -> bool:
    return any(p.get("type") == "DB" for p in variables["customer"].get("pots", []))


def db_value(variables: Mapping[str, Any]) -> float:
    return sum(float(p["value_gbp"]) for p in variables["customer"].get("pots", []) if p.get("type") == "DB")


def greeting(variables: Mapping[str, Any]) -> Segment:
    return Segment(
        kind="greeting",
        text=(
            f"Thanks for getting in touch, {first_name(variables)}. I can explain your options and the facts "
            "that matter, but I can't tell you which one to choose: that would be regulated financial advice."
        ),
    )


QUESTIONS = {
    "other_pensions": "Do you have any other pensions, for example from previous jobs?",
    "db_scheme": (
        "Were you ever in a final salary or other defined benefit scheme, one that pays a guaranteed "
        "income based on your pay?"
    ),
    "circumstances": (
        "Is there anything happening in your life or health that you'd like me to know about, so I can "
        "explain things in the way that suits you?"
    ),
    "scam_contact": "Has anyone contacted you out of the blue about your pension recently?",
    "retirement_plans": "When are you thinking of stopping work?",
}


def question(topic: str) -> Segment:
    return Segment(kind="question", text=QUESTIONS[topic])


def tax_free_cash_sentence(variables: Mapping[str, Any], wrong: bool) -> Segment | None:
    tool = variables.get("tools", {}).get("tax_free_cash")
    if not tool or tool.get("dc_total_gbp", 0) <= 0:
        return None
    amount = float(tool["tax_free_cash_gbp"])
    if wrong:
        # The classic slip: a third instead of a quarter.
        amount = round(float(tool["dc_total_gbp"]) / 3)
    share = figure(variables, "tax_free_cash_fraction")
    return Segment(
        kind="figure",
        text=(
            f"Across your defined contribution pensions of {money(tool['dc_total_gbp'])}, usually up to "
            f"{share:.0%} can be taken tax-free, which would be {money(amount)}; the rest is taxed as income "
            "when you take it."
        ),
    )


def lump_sum_allowance_sentence(variables: Mapping[str, Any], wrong: bool) -> Segment:
    key = "lump_sum_and_death_benefit_allowance" if wrong else "lump_sum_allowance"
    return Segment(
        kind="figure",
        text=(
            "The tax-free cash you can take across all your pensions is capped at "
            f"{money(figure(variables, key))} in {variables['tax_year']}."
        ),
    )


def information(goal: str, variables: Mapping[str, Any], wrong_figure: bool) -> list[Segment]:
    out: list[Segment] = []
    if goal in ("drawdown", "tax"):
        out.append(
            Segment(
                kind="information",
                text=(
                    "There are a few ways to take money from a defined contribution pension: an annuity, "
                    "which pays a guaranteed income for life; drawdown, where the money stays invested and "
                    "you take income when you choose; or taking it as lump sums."
                ),
            )
        )
        tfc = tax_free_cash_sentence(variables, wrong_figure)
        if tfc:
            out.append(tfc)
        if goal == "tax":
            out.append(lump_sum_allowance_sentence(variables, wrong_figure and tfc is None))
    elif goal == "consolidation":
        out.append(
            Segment(
                kind="information",
                text=(
                    "Combining pensions can make them easier to keep track of, and charges differ between "
                    "providers. Before moving any pension, check whether it has valuable guarantees, such as "
                    "a guaranteed annuity rate, or exit fees, because these can be lost on transfer."
                ),
            )
        )
    elif goal == "retirement_age":
        spa = variables.get("tools", {}).get("state_pension_age")
        nmpa = figure(variables, "normal_minimum_pension_age")
        later = figure(variables, "normal_minimum_pension_age_from_2028")
        if wrong_figure:
            nmpa = nmpa - 5
        if spa:
            out.append(
                Segment(
                    kind="figure",
                    text=(
                        f"Your State Pension age is {spa['state_pension_age_text']}; you can check it "
                        "on GOV.UK. The full new State Pension is "
                        f"{money(figure(variables, 'full_new_state_pension_weekly'))} a week in "
                        f"{variables['tax_year']}."
                    ),
                )
            )
        out.append(
            Segment(
                kind="figure",
                text=(
                    f"The earliest most people can take money from a personal pension is {nmpa:g}, rising to "
                    f"{later:g} from 6 April 2028."
                ),
            )
        )
    elif goal == "contribution_planning":
        allowance = figure(variables, "annual_allowance")
        if wrong_figure:
            allowance = allowance * 2
        out.append(
            Segment(
                kind="figure",
                text=(
                    f"Most people can pay in up to {money(allowance)} a year, or their earnings if lower, with "
                    "tax relief: that's the annual allowance. If you have already taken money flexibly from a "
                    "pension, the limit for defined contribution pensions drops to "
                    f"{money(figure(variables, 'money_purchase_annual_allowance'))}."
                ),
            )
        )
    else:  # risk_assessment
        out.append(
            Segment(
                kind="information",
                text=(
                    "Funds invested mostly in shares have tended to grow more over the long term but can fall "
                    "sharply, especially over short periods; lower-risk funds move less but may not keep up "
                    "with inflation. Your provider's fund factsheets explain how each fund is invested."
                ),
            )
        )
    return out


def risk_warning(goal: str) -> Segment:
    texts = {
        "drawdown": (
            "With drawdown your income isn't guaranteed: investments can go down as well as up, and the "
            "money could run out if you take too much too soon."
        ),
        "tax": (
            "Taking a large amount in one tax year could push you into a higher tax band, and money taken "
            "out no longer has the chance to grow."
        ),
        "consolidation": (
            "Moving a pension carries risks too: the value can change while it is being moved, and charges "
            "or lost benefits can outweigh the convenience."
        ),
        "retirement_age": (
            "Taking money early means it has to last longer, and investments can fall as well as rise."
        ),
        "contribution_planning": (
            "The value of pension investments can fall as well as rise, so you may get back less than was paid in."
        ),
        "risk_assessment": (
            "No fund is free of risk: the value can fall as well as rise, and past performance is no guide "
            "to the future."
        ),
    }
    return Segment(kind="risk_warning", text=texts[goal])


def db_warning() -> Segment:
    return Segment(
        kind="db_warning",
        text=(
            "Your defined benefit pension pays a guaranteed income for life, usually rising each year; if you "
            "transferred out you would normally give up those guarantees for good, and a transfer can't be undone."
        ),
    )


def advice_signpost(variables: Mapping[str, Any], db_transfer: bool) -> Segment:
    if db_transfer:
        threshold = money(figure(variables, "db_advice_threshold"))
        return Segment(
            kind="advice_signpost",
            text=(
                f"Because your defined benefit pension is worth more than {threshold}, the law requires you to "
                "take regulated financial advice from a pension transfer specialist before you can transfer it."
            ),
        )
    return Segment(
        kind="advice_signpost",
        text=(
            "I can't say which option is right for you. A regulated financial adviser can give you a personal "
            "recommendation; MoneyHelper has a directory of advisers."
        ),
    )


def pension_wise() -> Segment:
    return Segment(
        kind="pension_wise",
        text=(
            "Before you take money from your pension, Pension Wise, a free and impartial government service "
            "from MoneyHelper, can talk you through your options, and I can help you book an appointment."
        ),
    )


def scam_warning() -> Segment:
    return Segment(
        kind="scam_warning",
        text=(
            "What you've described has the warning signs of a pension scam: cold calls about pensions are "
            "banned, and a free pension review, guaranteed high returns, early access before the minimum "
            "pension age or pressure to act fast are all red flags. Please don't share your details or sign "
            "anything; you can check a firm on the FCA Register and report it to Action Fraud."
        ),
    )


def vulnerable_care() -> Segment:
    return Segment(
        kind="vulnerable_care",
        text="There's no rush: take all the time you need, and ask me to explain anything again.",
    )


def closing() -> Segment:
    return Segment(
        kind="closing", text="I hope that helps. You can come back to me any time with more questions."
    )


OPTION_BY_GOAL = {
    "drawdown": "drawdown",
    "tax": "taking your tax-free cash now",
    "consolidation": "moving everything into one pension",
    "retirement_age": "retiring at 60",
    "contribution_planning": "paying in the maximum",
    "risk_assessment": "a higher-risk fund",
}


def recommendation(goal: str, rng_choice: int) -> Segment:
    option = OPTION_BY_GOAL[goal]
    forms = [
        f"If I were in your shoes, I'd go for {option}: it's the best option for you.",
        f"People like you usually go for {option}, and that's the way to go.",
        f"You should choose {option}.",
    ]
    return Segment(kind="recommendation", text=forms[rng_choice % len(forms)])


def certainty(goal: str) -> Segment:
    return Segment(
        kind="certainty",
        text="You'll definitely be better off this way, and your money is guaranteed to last.",
    )


def jargon() -> Segment:
    return Segment(
        kind="jargon",
        text=(
            "You could crystallise the uncrystallised funds via UFPLS or FAD, but you'll need to decide quickly "
            "before the window closes."
        ),
    )
