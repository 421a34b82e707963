"""Factual accuracy: every figure in the reply is checked against the knowledge base, the
customer's profile and calculator results; some statements are wrong whatever their figure.

A figure is bound to the concepts named near it (its clause, else its sentence; for the reply's
first sentence, else the concepts of the customer's question, since a short direct answer often
omits them). It is right if any bound concept accepts it. A figure bound to no concept is an
illustration ("if you took £5,000 a year") and is not checked: the check errs towards silence
on what it cannot tie to a fact, and towards a firm FACTUAL_ERROR on what it can.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from compliance.calculators import (
    personal_minimum_pension_age,
    state_pension_age,
    tax_free_cash,
)
from compliance.codes import ComplianceCode
from compliance.figures import ExtractedFigure, extract_figures
from compliance.knowledge import KnowledgeBase
from compliance.knowledge.prefilter import (
    FilteredPattern,
    LiteralScanner,
    Scan,
    ScannedPattern,
    ScannedUnion,
)
from compliance.knowledge.schema import FigureConcept
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule
from compliance.text import clause_break

# Leads that make an age a minimum or a deadline ("from 55", "until 57"): these must equal the
# customer's minimum pension age; other leads ("at 60", "when you're 62") only must not be below it.
_BOUNDARY_LEADS = frozenset(
    {
        "from",
        "from age",
        "from the age of",
        "until",
        "till",
        "before",
        "age",
        "age of",
        "earliest",
        "minimum",
        "youngest",
    }
)


# How far before a figure a denial or exception ("not", "apart from the first") is looked for.
_NEGATION_WINDOW = 25
# Leads naming the customer's own birthday ("when you turn 55"), and deadlines ("before 55").
_BIRTHDAY_LEADS = frozenset({"turn", "turning", "turns", "reach", "reaching", "reaches"})
_DEADLINE_LEADS = frozenset({"before", "until", "till"})
# The period an amount is stated for ("£241.30 a week", "£12,547 yearly"), read right after it.
_PERIOD_AFTER = re.compile(
    r"^\s*(?:(?:a|an|per|each|every)\s+(?P<unit>week|month|year|annum)\b|(?P<adverb>weekly|monthly|yearly|annually)\b)"
)
_PERIOD_NAMES = {"annum": "year", "weekly": "week", "monthly": "month", "yearly": "year", "annually": "year"}
# "from 55 to 57": an age given as the old end of a change, not as a boundary for the customer.
_TRANSITION_AFTER = re.compile(r"^\s+to\s+(?:age\s+)?\d")
# How many characters after an amount its period is looked for.
_PERIOD_WINDOW = 20


def _period(sentence: str, fig: ExtractedFigure) -> str | None:
    """The period an amount is stated for ("week", "month", "year"), or None when none is named."""
    match = _PERIOD_AFTER.match(sentence[fig.end : fig.end + _PERIOD_WINDOW])
    if match is None:
        return None
    word = match.group("unit") or match.group("adverb")
    return _PERIOD_NAMES.get(word, word)


def _precision(value: float) -> float:
    """The rounding step a stated figure shows: 0.01 for £241.30, 1,000 for £268,000, 10,000 for
    £1.07 million, 1 for £268,725."""
    if value != int(value):
        exponent = Decimal(repr(value)).normalize().as_tuple().exponent
        return 10.0 ** int(exponent)
    number, step = int(value), 1.0
    while number and number % 10 == 0:
        number //= 10
        step *= 10
    return step


def _rounds_to(value: float, target: float) -> bool:
    """`value` is `target` written to `value`'s own precision (£268,000 for £268,275), where that
    precision is fine enough (at most 1% of the target) to be a rounding and not another figure."""
    step = _precision(value)
    if step > 0.01 * abs(target):
        step = _precision(target)
    rounded = math.floor(target / step + 0.5) * step
    return abs(value - rounded) <= 1e-9 * max(abs(target), 1.0)


@dataclass(frozen=True)
class _Bound:
    concept: FigureConcept
    clause: str
    sentence: str


def _add_years(day: date, years: int, months: int) -> date:
    """The date `years` and `months` after `day` (the 1st of the month where the day would not exist)."""
    total = day.month - 1 + months
    year, month = day.year + years + total // 12, total % 12 + 1
    try:
        return day.replace(year=year, month=month)
    except ValueError:
        return date(year, month, 1)


def _before_in_clause(bound: _Bound, fig: ExtractedFigure) -> str:
    """The figure's clause up to the figure (the figure's offsets are the sentence's)."""
    offset = bound.sentence.find(bound.clause)
    if offset < 0 or offset > fig.start:
        return bound.sentence[: fig.start]
    return bound.sentence[offset : fig.start]


def _clause_around(sentence: str, position: int, breaks: list[tuple[int, int]] | None = None) -> str:
    """The clause of `sentence` holding `position` (`breaks`: the sentence's clause breaks, when
    already found, so a sentence with several figures is split once)."""
    if breaks is None:
        breaks = [m.span() for m in clause_break(sentence).finditer(sentence)]
    start, end = 0, len(sentence)
    for brk_start, brk_end in breaks:
        if brk_end <= position:
            start = brk_end
        elif brk_start >= position:
            end = brk_start
            break
    return sentence[start:end]


class FigureCheckRule(BaseRule):
    rule_id = "facts.figures"
    code = ComplianceCode.FACTUAL_ERROR

    def __init__(self, kb: KnowledgeBase, scanner: LiteralScanner | None = None) -> None:
        self.kb = kb
        self.source = (
            "COBS 4.2.1R; figures and sources in the knowledge base (tax year " + kb.meta.tax_year + ")"
        )
        scanner = scanner or LiteralScanner()

        def lexicon(key: str) -> ScannedPattern:
            return scanner.bind(kb.lexicon(key).regex)

        self._concepts = kb.figure_concepts
        # Every cue is searched in a sentence of the unquoted reply (or a part of one) with the
        # scan of the unquoted reply, which covers them all.
        self._approx = lexicon("approximation_cues")
        self._negated = lexicon("figure_negation")
        self._history_cues = lexicon("historical_figure")
        self._cap_cues = lexicon("tax_free_cap_cues")
        self._general = lexicon("general_rule_cues")
        self._denied = lexicon("deadline_denial")
        self._timing = lexicon("birthday_timing")
        self._timing_after = lexicon("birthday_timing_after")
        self._you = lexicon("second_person")
        self._death = lexicon("death_context")
        self._own_age_before = lexicon("own_age_reference")
        self._own_age_after = lexicon("own_age_after")
        self._own_age_present = lexicon("own_age_present")
        self._age_boundary = lexicon("age_boundary_words")
        self._cap_named = lexicon("tax_free_cap_named")
        self._over = lexicon("comparative_over")
        self._under = lexicon("comparative_under")
        self._own_pot = lexicon("own_pot_reference")
        self._exact = kb.figure_check.exact_tolerance
        self._approximate = kb.figure_check.approximate_tolerance
        self._fraction = kb.figure("tax_free_cash_fraction").value
        self._lsa = kb.figure("lump_sum_allowance").value
        self._weeks = kb.figure("state_pension_weeks_per_year").value
        self._nmpa_now = kb.figure("normal_minimum_pension_age").value
        self._nmpa_later = kb.figure("normal_minimum_pension_age_from_2028").value
        self._spa_ages = {
            years
            for band in kb.state_pension_age_bands
            for years in range(band.earliest_years, band.latest_years + (2 if band.latest_months else 1))
        }
        # State Pension ages still ahead for someone at the reference date (66, 67, 68): a statement
        # of today's rule ("the State Pension age is currently 65") must be one of these; ages of
        # cohorts already past it are right only when the sentence names a birth cohort.
        reference = kb.meta.reference_date
        self._spa_ages_now = {
            years
            for band in kb.state_pension_age_bands
            if band.born_to is None
            or _add_years(band.born_to, band.latest_years, band.latest_months) >= reference
            for years in range(band.earliest_years, band.latest_years + (2 if band.latest_months else 1))
        }
        self._spa_years = {
            d.year
            for band in kb.state_pension_age_bands
            for d in (band.born_from, band.born_to)
            if d is not None
        }
        # For each band: the whole-year ages it can be told as, and the calendar years in which its
        # people reach State Pension age, so "rising to 68 from 2028" can be checked as a pair.
        self._spa_reached: list[tuple[set[int], float, float]] = []
        for band in kb.state_pension_age_bands:
            ages = set(range(band.earliest_years, band.latest_years + (2 if band.latest_months else 1)))
            first = -math.inf if band.born_from is None else float(band.born_from.year + band.earliest_years)
            last = (
                math.inf
                if band.born_to is None
                else float(band.born_to.year + band.latest_years + (1 if band.latest_months else 0))
            )
            self._spa_reached.append((ages, first, last))
        self._minimum_by_age: dict[int, list[int]] = {}
        self._spa_by_age: dict[int, frozenset[float]] = {}
        self._by_kind: dict[str, list[tuple[FigureConcept, ScannedPattern]]] = {}
        for concept in self._concepts:
            self._by_kind.setdefault(concept.kind, []).append((concept, scanner.bind(concept.regex)))
        # Read once: attribute access on the pydantic items costs more than the regex test.
        self._historical_cues = {
            concept.key: None if concept.historical is None else scanner.bind(concept.historical)
            for concept in self._concepts
        }
        # Per kind: each concept's pattern with its bits in a scan of this scanner, and whether it
        # has a branch that runs whatever the scan finds (as `ScannedPattern.may_match` reads them).
        self._scanner = scanner
        self._kind_bits = {
            kind: [(pair, pair[1].scan_bits, pair[1].runs_always) for pair in pairs]
            for kind, pairs in self._by_kind.items()
        }
        self._kind_gates = {
            kind: scanner.bind(
                FilteredPattern([phrase for concept, _ in pairs for phrase in concept.phrases])
            )
            for kind, pairs in self._by_kind.items()
        }
        self._fixed = {
            concept.key: self._fixed_values(concept, concept.accepts) for concept in self._concepts
        }
        # Fact-key selectors: calculator_facts_<concept key>, else calculator_facts_<derived>.
        self._fact_selectors = {}
        for concept in self._concepts:
            for name in (concept.key, concept.derived):
                if name and f"calculator_facts_{name}" in kb.lexicons:
                    self._fact_selectors[concept.key] = kb.lexicon(f"calculator_facts_{name}").regex
                    break
        self._historical = {
            concept.key: self._fixed_values(concept, concept.historical_accepts) for concept in self._concepts
        }

    # --- accepted values ----------------------------------------------------------------------

    def _fixed_values(self, concept: FigureConcept, keys: list[str]) -> set[float]:
        values: set[float] = set()
        for key in keys:
            if concept.kind == "year":
                values.add(float(self.kb.key_date(key).date.year))
                continue
            figure = self.kb.figure(key)
            values.add(
                figure.value * 100
                if concept.kind == "percent" and figure.unit == "fraction"
                else figure.value
            )
        return values

    def _tool_facts(self, concept: FigureConcept, a: Analysis) -> set[float]:
        """This turn's calculator results that this concept may restate: only its own tool's (the
        knowledge base's calculator_facts_<concept key or derived> lexicon names them)."""
        if not a.ctx.facts:
            return set()
        selector = self._fact_selectors.get(concept.key)
        if selector is None:
            return set()
        key = ("tool_facts", concept.key)
        found = a.memo.get(key)
        if found is None:
            found = a.memo[key] = {v for name, v in a.ctx.facts.items() if selector.search(name)}
        return found  # type: ignore[return-value]

    def _known_amounts(self, a: Analysis) -> set[float]:
        """Amounts that are right to restate in any derived claim: the customer's pots and their
        totals, and amounts the customer said (calculator results are added per concept).
        Worked out once per utterance (several figures ask): callers combine it, never change it."""
        key = ("known_amounts", self)
        values = a.memo.get(key)
        if values is None:
            profile = a.ctx.customer
            values = {p.value_gbp for p in profile.pots}
            values |= {profile.total_gbp, sum(p.value_gbp for p in profile.pots if p.type == "DC")}
            values |= {sum(p.value_gbp for p in profile.pots if p.type == "DB")}
            values |= set(a.customer_amounts)
            a.memo[key] = values
        return values  # type: ignore[return-value]

    def _tax_free_bases(self, a: Analysis, tool: set[float]) -> set[float]:
        """Amounts a tax-free share may be taken of: the known amounts, every amount named by the
        customer or the reply, this turn's calculator results and the DC pots' total."""
        key = ("tax_free_bases", self)
        common = a.memo.get(key)
        if common is None:
            common = self._known_amounts(a) | set(a.customer_amounts) | set(a.advisor_amounts)
            common.add(tax_free_cash(a.ctx.customer.pots, self.kb).dc_total_gbp)
            a.memo[key] = common
        return common | tool  # type: ignore[operator]

    def _derived(
        self, concept: FigureConcept, fig: ExtractedFigure, bound: _Bound, a: Analysis
    ) -> set[float]:
        profile = a.ctx.customer
        derived = concept.derived
        if derived == "pot_value":
            return self._known_amounts(a) | self._tool_facts(concept, a)
        if derived == "tax_free_cash":
            tool = self._tool_facts(concept, a)
            bases = self._tax_free_bases(a, tool)
            values = {self._lsa} | self._known_amounts(a) | tool
            # A share above the cap is only right as an uncapped illustration ("25% of £1.4m would
            # be £350,000, but..."), never where the clause speaks of the cap or the most available,
            # nor in a reply that never mentions the cap (then it is what the customer is told
            # they can take).
            capped_clause = (
                self._cap_cues.search(bound.clause, a.unquoted_scan) is not None
                or self._cap_named.search(a.advisor_unquoted, a.unquoted_scan) is None
            )
            for base in bases:
                share = base * self._fraction
                values |= {min(share, self._lsa), base - share}
                if share <= self._lsa or not capped_clause:
                    values.add(share)
            return values
        if derived == "taxable_share":
            return {(1 - self._fraction) * 100}
        if derived == "state_pension_annual":
            weekly = set(self._fixed[concept.key])
            historical = self._historical_cues[concept.key]
            if historical is not None and historical.search(bound.sentence, a.unquoted_scan):
                weekly |= self._historical[concept.key]
            return {v * self._weeks for v in weekly}
        if derived == "state_pension_age":
            values = set(self._state_pension_ages(profile.age))
            scan = a.unquoted_scan
            if self._general.search(bound.clause, scan) or not self._you.search(bound.clause, scan):
                ages = self._spa_ages if "born" in bound.sentence else self._spa_ages_now
                values |= {float(y) for y in ages}
            return values
        if derived == "state_pension_age_years":
            return {float(y) for y in self._spa_years}
        if derived == "minimum_pension_age":
            return self._minimum_age_values(fig, bound, a)
        return set()

    def _state_pension_ages(self, age: int) -> frozenset[float]:
        """Whole-year State Pension ages possible for a customer of this age (cached: the rule is
        pure, and the knowledge base and its reference date are fixed for this rule)."""
        ages = self._spa_by_age.get(age)
        if ages is None:
            ages = self._spa_by_age[age] = frozenset(
                float(y) for y in state_pension_age(age, self.kb).whole_years()
            )
        return ages

    @staticmethod
    def _figures(text: str, a: Analysis) -> list[ExtractedFigure]:
        """`extract_figures(text)`, once per text and utterance (a sentence's figures are read
        again for the ages named with a year or a change; callers only read the list)."""
        key = ("figures", text)
        found = a.memo.get(key)
        if found is None:
            found = a.memo[key] = extract_figures(text)
        return found  # type: ignore[return-value]

    def _personal_minimum(self, age: int) -> list[int]:
        """Minimum pension ages possible for a customer of this age (cached: the rule is pure)."""
        if age not in self._minimum_by_age:
            self._minimum_by_age[age] = personal_minimum_pension_age(age, self.kb).possible_ages
        return self._minimum_by_age[age]

    def _minimum_age_values(self, fig: ExtractedFigure, bound: _Bound, a: Analysis) -> set[float]:
        personal = {float(age) for age in self._personal_minimum(a.ctx.customer.age)}
        scan = a.unquoted_scan
        if not self._you.search(bound.clause, scan):
            # A statement of the rule itself: today's age, and the later one where the change is named.
            general = {self._nmpa_now}
            if self._general.search(bound.sentence, scan):
                general.add(self._nmpa_later)
            if (
                fig.lead == "at"
                and fig.value >= min(general | personal)
                and not self._age_boundary.search(bound.clause, scan)
            ):
                # "Take it early at 60": an option at an age, not the rule's minimum (a clause
                # naming the minimum or earliest age still states the rule).
                return {fig.value}
            return general | personal
        if fig.lead in _BIRTHDAY_LEADS and (
            self._timing.search(bound.sentence[: fig.start], scan)
            or self._timing_after.search(bound.sentence[fig.end :], scan)
        ):
            # "...rises to 57 in 2028, before you turn 55" or "you'll turn 55 after that date": the
            # customer's own birthday used to place an event in time is not a claim about when
            # they can take money.
            return {fig.value}
        if fig.lead in _DEADLINE_LEADS and self._denied.search(_before_in_clause(bound, fig), scan):
            # "You can't take it before 55" is true for anyone whose minimum is 55 or later.
            return {fig.value} if fig.value <= max(personal) else personal
        if fig.lead in _BOUNDARY_LEADS:
            # "You can access it from 55, rising to 57 from 6 April 2028": the sentence states the
            # rule and its change, so today's age is right even for someone who will wait till 57.
            # So does "it will have risen from 55 to 57" (the old end of the change).
            if (self._general.search(bound.sentence, scan) and self._names_later_age(bound.sentence, a)) or (
                fig.lead == "from" and _TRANSITION_AFTER.match(bound.sentence[fig.end :])
            ):
                return personal | {self._nmpa_now, self._nmpa_later}
            return personal
        # "At 60 you can take it": any age at or above the customer's minimum is right.
        return {fig.value} if fig.value >= min(personal) else personal

    def _names_later_age(self, sentence: str, a: Analysis) -> bool:
        later = f"{self._nmpa_later:g}"
        return any(f.kind == "age" and f"{f.value:g}" == later for f in self._figures(sentence, a))

    def _accepted(
        self, bound: _Bound, fig: ExtractedFigure, a: Analysis
    ) -> tuple[set[float], set[float]] | None:
        """Values this concept accepts for this figure, as (statutory figures, derived amounts), or
        None when any value is fine (history). Statutory figures must be exact (or a rounding of
        them); derived amounts (a pot's 25%, a weekly rate times 52) allow the rounding slack."""
        concept = bound.concept
        statutory = set(self._fixed[concept.key])
        historical = self._historical_cues[concept.key]
        if historical is not None and historical.search(bound.sentence, a.unquoted_scan):
            if not concept.historical_accepts:
                return None
            statutory |= self._historical[concept.key]
        derived = self._derived(concept, fig, bound, a) if concept.derived else set()
        if concept.derived == "tax_free_cash":
            # The lump sum allowance among the tax-free amounts is the statutory figure itself.
            derived.discard(self._lsa)
            statutory.add(self._lsa)
        if concept.derived == "state_pension_annual":
            # A State Pension amount is right only for the period it is stated for: the weekly rate
            # "a week", the yearly one "a year", and a twelfth of that "a month".
            period = _period(bound.sentence, fig)
            if period not in (None, "week"):
                statutory = set()
            if period == "month":
                derived = {v / 12 for v in derived}
            elif period not in (None, "year"):
                derived = set()
        return statutory, derived

    def _tolerance(self, fig: ExtractedFigure, sentence: str, scan: Scan | None) -> float:
        """Relative slack: none for ages and years (57 is not 'about 55'), rounding for amounts,
        more when the figure is hedged ("about £12,500")."""
        if fig.kind in ("age", "year"):
            return 0.0
        approximate = self._approx.search(sentence[max(0, fig.start - 25) : fig.start], scan) is not None
        return self._approximate if approximate else self._exact

    @staticmethod
    def _close(value: float, target: float, tolerance: float) -> bool:
        return abs(value - target) <= tolerance * max(abs(target), 1.0)

    def _own_age(self, fig: ExtractedFigure, sentence: str, a: Analysis) -> bool:
        """The age is the customer's own present age stated as such ("as you're 45", "at 62 yours
        is likely to be 67"): a reference to them, not a claim about a pension age."""
        if fig.value != a.ctx.customer.age:
            return False
        scan = a.unquoted_scan
        if self._own_age_before.search(sentence[max(0, fig.start - _NEGATION_WINDOW) : fig.start], scan):
            return True
        return fig.lead == "at" and self._own_age_after.search(sentence[fig.end :], scan) is not None

    def _misstated_age(self, fig: ExtractedFigure, sentence: str, a: Analysis) -> bool:
        """The age is stated as the customer's present age and is not theirs ("at 62 you're
        already past the minimum age" said to a 59-year-old)."""
        return (
            fig.lead == "at"
            and fig.value != a.ctx.customer.age
            and self._own_age_present.search(sentence[fig.end :], a.unquoted_scan) is not None
        )

    def _comparison_error(self, fig: ExtractedFigure, sentence: str, a: Analysis, memo: dict) -> str | None:
        """For an amount after "over"/"under" in a clause about this customer's pension ("your
        pension is worth over £30,000"): "" when the comparison holds for one of their pots or
        totals, a message when none does, None when the amount is no such comparison. A compared
        amount is a threshold, never the pot's value, so it is not bound as one."""
        scan = a.unquoted_scan
        before = sentence[max(0, fig.start - _NEGATION_WINDOW) : fig.start]
        over = self._over.search(before, scan) is not None
        if not over and self._under.search(before, scan) is None:
            return None
        clause = _clause_around(sentence, fig.start, self._breaks(sentence, memo))
        if self._own_pot.search(clause, scan) is None:
            return None
        amounts = self._known_amounts(a) - set(a.ctx.facts.values())
        amounts.discard(0.0)
        if any((v > fig.value) if over else (v < fig.value) for v in amounts):
            return ""
        values = ", ".join(f"£{v:,.0f}" for v in sorted(amounts))
        side = "over" if over else "under"
        return f"The customer's pension is not {side} {fig.text.strip()} (their pensions: {values})."

    def _spa_pair_error(
        self, fig: ExtractedFigure, sentence: str, bound: list[_Bound], memo: dict, a: Analysis
    ) -> str | None:
        """A State Pension age year must fit the age named with it in its clause ("rising to 68
        from 2028" is wrong: 68 is reached from 2044). None when it fits or no age is named."""
        if not any(b.concept.derived == "state_pension_age_years" for b in bound):
            return None
        clause = _clause_around(sentence, fig.start, self._breaks(sentence, memo))
        if "born" in clause:
            return None  # a birth year ("born on or after 6 April 1978"), not when the age is reached
        ages = [f.value for f in self._figures(clause, a) if f.kind == "age"]
        if not ages:
            return None
        for age in ages:
            for band_ages, first, last in self._spa_reached:
                if int(age) in band_ages and first - 1 <= fig.value <= last:
                    return None
        shown = ", ".join(f"{age:g}" for age in ages)
        return f"{fig.text.strip()!r} does not fit State Pension age {shown}: that age is not reached then."

    # --- binding ------------------------------------------------------------------------------

    @staticmethod
    def _breaks(sentence: str, memo: dict) -> list[tuple[int, int]]:
        key = ("breaks", sentence)
        found = memo.get(key)
        if found is None:
            found = memo[key] = [m.span() for m in clause_break(sentence).finditer(sentence)]
        return found

    def _spans(
        self, text: str, kind: str, memo: dict, scan: Scan | None
    ) -> list[tuple[FigureConcept, list[tuple[int, int]]]]:
        """The phrases of this kind's concepts found in `text` (`scan`: a scan covering it), found
        once per text and kind however many figures the text has."""
        key = (text, kind)
        found = memo.get(key)
        if found is None:
            found = []
            for concept, regex in self._candidates(kind, text, scan, memo):
                spans = [m.span() for m in regex.finditer(text, scan)]
                if spans:
                    found.append((concept, spans))
            memo[key] = found
        return found

    def _candidates(
        self, kind: str, text: str, scan: Scan | None, memo: dict
    ) -> list[tuple[FigureConcept, ScannedPattern]]:
        """This kind's concepts whose phrases may occur under `scan` (once per scan and kind)."""
        if scan is None:  # no scan to share: test the kind's gate on this text
            gate = self._kind_gates.get(kind)
            return self._by_kind[kind] if gate is not None and gate.may_match(None, text) else []
        key = ("candidates", kind, scan)
        found = memo.get(key)
        if found is None:
            gate = self._kind_gates.get(kind)
            if gate is None or not gate.may_match(scan):
                found = []
            elif scan.scanner is self._scanner:
                # `may_match(scan)` of each concept's pattern as one mask test apiece (read once).
                mask = scan.mask
                found = [pair for pair, bits, always in self._kind_bits[kind] if always or mask & bits]
            else:
                found = [pair for pair in self._by_kind[kind] if pair[1].may_match(scan)]
            memo[key] = found
        return found

    def _concepts_in(
        self, text: str, kind: str, fig: ExtractedFigure | None, offset: int, memo: dict, scan: Scan | None
    ) -> list[FigureConcept]:
        found = []
        for concept, spans in self._spans(text, kind, memo, scan):
            if concept.max_gap is None:
                found.append(concept)
                continue
            if fig is None:
                continue
            for span_start, span_end in spans:
                start, end = span_start + offset, span_end + offset
                before = end <= fig.start + 1
                if (concept.side == "before" and not before) or (concept.side == "after" and before):
                    continue
                gap = fig.start - end if before else start - fig.end
                if -1 <= gap <= concept.max_gap:
                    found.append(concept)
                    break
        return found

    def _bind(
        self, fig: ExtractedFigure, sentence: str, first: bool, a: Analysis, memo: dict
    ) -> list[_Bound]:
        clause = _clause_around(sentence, fig.start, self._breaks(sentence, memo))
        clause_offset = sentence.find(clause)
        scan = a.unquoted_scan
        # Adjacent phrases (max_gap) only bind within the figure's own clause.
        concepts = self._concepts_in(clause, fig.kind, fig, clause_offset, memo, scan)
        if not concepts:
            concepts = [
                c for c in self._concepts_in(sentence, fig.kind, fig, 0, memo, scan) if c.max_gap is None
            ]
        if concepts and fig.kind == "age" and self._death.search(clause, scan):
            # "If you die before 75...": a death-benefit age, not the age money can be taken.
            concepts = [c for c in concepts if c.derived != "minimum_pension_age"]
            if not concepts:
                return []
        if concepts:
            return [_Bound(c, clause, sentence) for c in concepts]
        if first:
            concepts = [
                c
                for c in self._concepts_in(a.customer, fig.kind, None, 0, memo, a.customer_scan)
                if c.max_gap is None
            ]
            return [_Bound(c, clause, sentence) for c in concepts]
        return []

    def check(self, a: Analysis) -> list[RuleHit]:
        hits: list[RuleHit] = []
        if not a.has_digits_or_fractions:
            return []
        memo: dict = {}
        scan = a.unquoted_scan
        for index, sentence in enumerate(a.unquoted_sentences):
            for fig in self._figures(sentence, a):
                if self._negated.search(sentence[max(0, fig.start - _NEGATION_WINDOW) : fig.start], scan):
                    continue
                if fig.kind == "age" and self._own_age(fig, sentence, a):
                    continue
                if fig.kind == "age" and self._misstated_age(fig, sentence, a):
                    hits.append(
                        self.hit(
                            f"{fig.text.strip()!r} is given as the customer's age; they are {a.ctx.customer.age}.",
                            sentence,
                        )
                    )
                    continue
                if fig.kind == "money":
                    comparison = self._comparison_error(fig, sentence, a, memo)
                    if comparison is not None:
                        if comparison:
                            hits.append(self.hit(comparison, sentence))
                        continue
                bound = self._bind(fig, sentence, index == 0, a, memo)
                if not bound:
                    continue
                if fig.kind != "year" and self._history_cues.search(
                    _clause_around(sentence, fig.start, self._breaks(sentence, memo)), scan
                ):
                    continue  # "it used to be £40,000": history, not a claim about today
                tolerance = self._tolerance(fig, sentence, scan)
                # Ages and years are exact; a hedged amount may be approximate; an unhedged
                # statutory amount must be the figure or a rounding of it.
                rounding = fig.kind in ("money", "percent") and tolerance != self._approximate
                if not rounding and tolerance == self._approximate:
                    # "About £12,500" rounds; "about £11,580" is written to the tenner: a hedge
                    # allows at most the step the figure is written to (and never less than exact).
                    tolerance = max(
                        self._exact, min(tolerance, _precision(fig.value) / max(abs(fig.value), 1.0))
                    )
                expected: set[float] = set()
                right = False
                for b in bound:
                    accepted = self._accepted(b, fig, a)
                    if accepted is None:
                        right = True
                        break
                    statutory, derived = accepted
                    if any(
                        _rounds_to(fig.value, v) if rounding else self._close(fig.value, v, tolerance)
                        for v in statutory
                    ) or any(self._close(fig.value, v, tolerance) for v in derived):
                        right = True
                        break
                    expected |= statutory | derived
                if right and fig.kind == "year":
                    wrong_pair = self._spa_pair_error(fig, sentence, bound, memo, a)
                    if wrong_pair:
                        hits.append(self.hit(wrong_pair, sentence))
                    continue
                if not right:
                    names = ", ".join(b.concept.key for b in bound)
                    shown = ", ".join(f"{v:,.2f}".rstrip("0").rstrip(".") for v in sorted(expected)[:6])
                    hits.append(
                        self.hit(
                            f"{fig.text.strip()!r} is wrong for {names} (expected {shown or 'no figure'}).",
                            sentence,
                        )
                    )
        return hits


class FalseClaimRule(BaseRule):
    rule_id = "facts.false_claims"
    code = ComplianceCode.FACTUAL_ERROR

    def __init__(self, kb: KnowledgeBase, scanner: LiteralScanner | None = None) -> None:
        self.source = "COBS 4.2.1R; false claims in the knowledge base"
        scanner = scanner or LiteralScanner()
        self._claims = [
            (c, scanner.bind(c.regex), re.compile(c.unless) if c.unless else None) for c in kb.false_claims
        ]
        self._any = ScannedUnion([regex for _, regex, _ in self._claims])

    def check(self, a: Analysis) -> list[RuleHit]:
        # Each claim runs only if its literals occur in the reply: most replies make none.
        hits: list[RuleHit] = []
        text, scan = a.advisor_unquoted, a.unquoted_scan
        if not self._any.may_match(scan):
            return hits
        for claim, regex, unless in self._claims:
            if not regex.found(text, scan):
                continue
            for sentence in a.unquoted_sentences:
                if regex.search(sentence, scan) and not (unless and unless.search(sentence)):
                    hits.append(
                        RuleHit(
                            rule_id=self.rule_id,
                            code=self.code,
                            message=claim.message,
                            source=claim.source,
                            hard=True,
                            evidence=sentence,
                        )
                    )
                    break
        return hits


class EarlyAccessClaimRule(BaseRule):
    """Telling a customer below their minimum pension age that they can take money now is wrong
    whatever figure comes with it (Finance Act 2004 s279; Finance Act 2022 s10), unless the same
    sentence makes it a warning or the ill-health exception."""

    rule_id = "facts.early_access"
    code = ComplianceCode.FACTUAL_ERROR

    def __init__(self, kb: KnowledgeBase, scanner: LiteralScanner | None = None) -> None:
        self.kb = kb
        self.source = "Finance Act 2004 s279; Finance Act 2022 s10 (normal minimum pension age)"
        scanner = scanner or LiteralScanner()
        self._claim = scanner.bind(kb.lexicon("access_now_claim").regex)
        self._cleared = scanner.bind(kb.lexicon("access_now_cleared").regex)
        self._minimum_by_age: dict[int, int] = {}

    def check(self, a: Analysis) -> list[RuleHit]:
        profile = a.ctx.customer
        if profile.age not in self._minimum_by_age:
            self._minimum_by_age[profile.age] = min(
                personal_minimum_pension_age(profile.age, self.kb).possible_ages
            )
        minimum = self._minimum_by_age[profile.age]
        if profile.age >= minimum or (not profile.has_dc and not profile.has_db):
            return []
        scan = a.unquoted_scan
        for sentence in a.unquoted_sentences:
            if self._claim.search(sentence, scan) and not self._cleared.search(sentence, scan):
                return [
                    self.hit(
                        f"The customer is {profile.age}, below their minimum pension age of {minimum}: "
                        "they cannot normally take money from their pension now.",
                        sentence,
                    )
                ]
        return []


class UnfundedTransferClaimRule(BaseRule):
    """Telling a member of an unfunded public service scheme (NHS, teachers, civil service, police,
    firefighters, armed forces) that they can transfer to a personal pension, SIPP or other defined
    contribution scheme is wrong: the law allows no such transfer (Pension Schemes Act 2015 s66)."""

    rule_id = "facts.unfunded_transfer"
    code = ComplianceCode.FACTUAL_ERROR

    def __init__(self, kb: KnowledgeBase, scanner: LiteralScanner | None = None) -> None:
        self.source = kb.lexicon("unfunded_public_scheme").source
        scanner = scanner or LiteralScanner()
        self._scheme = scanner.bind(kb.lexicon("unfunded_public_scheme").regex)
        self._affirmed = scanner.bind(kb.lexicon("dc_transfer_affirmed").regex)
        self._denied = scanner.bind(kb.lexicon("deadline_denial").regex)

    def check(self, a: Analysis) -> list[RuleHit]:
        profile = a.ctx.customer
        if not profile.has_db:
            return []
        scan = a.unquoted_scan
        if not self._affirmed.may_match(scan, a.advisor_unquoted):
            return []
        # The unfunded scheme is the customer's (by its name on the pot, or named in the talk).
        public = any(p.type == "DB" and self._scheme.search(p.provider.lower(), None) for p in profile.pots)
        if not public and not (
            self._scheme.found(a.customer, a.customer_scan) or self._scheme.found(a.advisor_unquoted, scan)
        ):
            return []
        for sentence in a.unquoted_sentences:
            match = self._affirmed.search(sentence, scan)
            if match and self._denied.search(match.group(), None) is None:
                return [
                    self.hit(
                        "Unfunded public service pensions cannot be transferred to a defined contribution "
                        "scheme (personal pension, SIPP).",
                        sentence,
                    )
                ]
        return []
