"""Factual accuracy: every figure in the reply is checked against the knowledge base, the
customer's profile and calculator results; some statements are wrong whatever their figure.

A figure is bound to the concepts named near it (its clause, else its sentence; for the reply's
first sentence, else the concepts of the customer's question, since a short direct answer often
omits them). It is right if any bound concept accepts it. A figure bound to no concept is an
illustration ("if you took £5,000 a year") and is not checked: the check errs towards silence
on what it cannot tie to a fact, and towards a firm FACTUAL_ERROR on what it can.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from compliance.calculators import (
    personal_minimum_pension_age,
    state_pension_age,
    tax_free_cash,
)
from compliance.codes import ComplianceCode
from compliance.figures import ExtractedFigure, extract_figures
from compliance.knowledge import KnowledgeBase
from compliance.knowledge.prefilter import FilteredPattern
from compliance.knowledge.schema import FigureConcept
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule
from compliance.text import _CLAUSE_BREAK

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
        breaks = [m.span() for m in _CLAUSE_BREAK.finditer(sentence)]
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

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.source = (
            "COBS 4.2.1R; figures and sources in the knowledge base (tax year " + kb.meta.tax_year + ")"
        )
        self._concepts = kb.figure_concepts
        self._approx = kb.lexicon("approximation_cues").regex
        self._negated = kb.lexicon("figure_negation").regex
        self._history_cues = kb.lexicon("historical_figure").regex
        self._cap_cues = kb.lexicon("tax_free_cap_cues").regex
        self._general = kb.lexicon("general_rule_cues").regex
        self._denied = kb.lexicon("deadline_denial").regex
        self._timing = kb.lexicon("birthday_timing").regex
        self._you = kb.lexicon("second_person").regex
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
        self._minimum_by_age: dict[int, list[int]] = {}
        self._by_kind: dict[str, list[tuple[FigureConcept, re.Pattern[str]]]] = {}
        for concept in self._concepts:
            self._by_kind.setdefault(concept.kind, []).append((concept, concept.regex))
        # Read once: attribute access on the pydantic items costs more than the regex test.
        self._historical_cues = {concept.key: concept.historical for concept in self._concepts}
        self._kind_gates = {
            kind: FilteredPattern([phrase for concept, _ in pairs for phrase in concept.phrases])
            for kind, pairs in self._by_kind.items()
        }
        self._fixed = {
            concept.key: self._fixed_values(concept, concept.accepts) for concept in self._concepts
        }
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

    def _money_mentions(self, a: Analysis) -> list[float]:
        return [f.value for f in (*a.customer_figures, *a.advisor_figures) if f.kind == "money"]

    def _known_amounts(self, a: Analysis) -> set[float]:
        """Amounts that are right to restate in any derived claim: the customer's pots and their
        totals, amounts the customer said, and calculator results for this turn."""
        profile = a.ctx.customer
        values = {p.value_gbp for p in profile.pots}
        values |= {profile.total_gbp, sum(p.value_gbp for p in profile.pots if p.type == "DC")}
        values |= {sum(p.value_gbp for p in profile.pots if p.type == "DB")}
        values |= {f.value for f in a.customer_figures if f.kind == "money"}
        return values | set(a.ctx.facts.values())

    def _derived(
        self, concept: FigureConcept, fig: ExtractedFigure, bound: _Bound, a: Analysis
    ) -> set[float]:
        profile = a.ctx.customer
        derived = concept.derived
        if derived == "pot_value":
            return self._known_amounts(a)
        if derived == "tax_free_cash":
            bases = self._known_amounts(a) | set(self._money_mentions(a))
            bases.add(tax_free_cash(profile.pots, self.kb).dc_total_gbp)
            values = {self._lsa} | self._known_amounts(a)
            # A share above the cap is only right as an uncapped illustration ("25% of £1.4m would
            # be £350,000, but..."), never where the clause speaks of the cap or the most available.
            capped_clause = self._cap_cues.search(bound.clause) is not None
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
            if historical is not None and historical.search(bound.sentence):
                weekly |= self._historical[concept.key]
            return {v * self._weeks for v in weekly}
        if derived == "state_pension_age":
            values = {float(y) for y in state_pension_age(profile.age, self.kb).whole_years()}
            if self._general.search(bound.clause) or not self._you.search(bound.clause):
                ages = self._spa_ages if "born" in bound.sentence else self._spa_ages_now
                values |= {float(y) for y in ages}
            return values
        if derived == "state_pension_age_years":
            return {float(y) for y in self._spa_years}
        if derived == "minimum_pension_age":
            return self._minimum_age_values(fig, bound, a)
        return set()

    def _personal_minimum(self, age: int) -> list[int]:
        """Minimum pension ages possible for a customer of this age (cached: the rule is pure)."""
        if age not in self._minimum_by_age:
            self._minimum_by_age[age] = personal_minimum_pension_age(age, self.kb).possible_ages
        return self._minimum_by_age[age]

    def _minimum_age_values(self, fig: ExtractedFigure, bound: _Bound, a: Analysis) -> set[float]:
        personal = {float(age) for age in self._personal_minimum(a.ctx.customer.age)}
        if not self._you.search(bound.clause):
            # A statement of the rule itself: today's age, and the later one where the change is named.
            general = {self._nmpa_now}
            if self._general.search(bound.sentence):
                general.add(self._nmpa_later)
            return general | personal
        if fig.lead in _BIRTHDAY_LEADS and self._timing.search(bound.sentence[: fig.start]):
            # "...rises to 57 in 2028, before you turn 55": the customer's own birthday used to
            # place an event in time is not a claim about when they can take money.
            return {fig.value}
        if fig.lead in _DEADLINE_LEADS and self._denied.search(_before_in_clause(bound, fig)):
            # "You can't take it before 55" is true for anyone whose minimum is 55 or later.
            return {fig.value} if fig.value <= max(personal) else personal
        if fig.lead in _BOUNDARY_LEADS:
            # "You can access it from 55, rising to 57 from 6 April 2028": the sentence states the
            # rule and its change, so today's age is right even for someone who will wait till 57.
            if self._general.search(bound.sentence) and self._names_later_age(bound.sentence):
                return personal | {self._nmpa_now, self._nmpa_later}
            return personal
        # "At 60 you can take it": any age at or above the customer's minimum is right.
        return {fig.value} if fig.value >= min(personal) else personal

    def _names_later_age(self, sentence: str) -> bool:
        later = f"{self._nmpa_later:g}"
        return any(f.kind == "age" and f"{f.value:g}" == later for f in extract_figures(sentence))

    def _accepted(self, bound: _Bound, fig: ExtractedFigure, a: Analysis) -> set[float] | None:
        """Values this concept accepts for this figure, or None when any value is fine (history)."""
        concept = bound.concept
        values = set(self._fixed[concept.key])
        historical = self._historical_cues[concept.key]
        if historical is not None and historical.search(bound.sentence):
            if not concept.historical_accepts:
                return None
            values |= self._historical[concept.key]
        if concept.derived:
            values |= self._derived(concept, fig, bound, a)
        return values

    def _tolerance(self, fig: ExtractedFigure, sentence: str) -> float:
        """Relative slack: none for ages and years (57 is not 'about 55'), rounding for amounts,
        more when the figure is hedged ("about £12,500")."""
        if fig.kind in ("age", "year"):
            return 0.0
        approximate = self._approx.search(sentence[max(0, fig.start - 25) : fig.start]) is not None
        return self._approximate if approximate else self._exact

    @staticmethod
    def _close(value: float, target: float, tolerance: float) -> bool:
        return abs(value - target) <= tolerance * max(abs(target), 1.0)

    # --- binding ------------------------------------------------------------------------------

    @staticmethod
    def _breaks(sentence: str, memo: dict) -> list[tuple[int, int]]:
        key = ("breaks", sentence)
        found = memo.get(key)
        if found is None:
            found = memo[key] = [m.span() for m in _CLAUSE_BREAK.finditer(sentence)]
        return found

    def _spans(self, text: str, kind: str, memo: dict) -> list[tuple[FigureConcept, list[tuple[int, int]]]]:
        """The phrases of this kind's concepts found in `text`, found once per text and kind
        however many figures the text has."""
        key = (text, kind)
        found = memo.get(key)
        if found is None:
            found = []
            gate = self._kind_gates.get(kind)
            # One gate pass for all of this kind's phrases before trying each concept.
            if gate is not None and gate.may_match(text):
                for concept, regex in self._by_kind[kind]:
                    spans = [m.span() for m in regex.finditer(text)]
                    if spans:
                        found.append((concept, spans))
            memo[key] = found
        return found

    def _concepts_in(
        self, text: str, kind: str, fig: ExtractedFigure | None, offset: int, memo: dict
    ) -> list[FigureConcept]:
        found = []
        for concept, spans in self._spans(text, kind, memo):
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
        # Adjacent phrases (max_gap) only bind within the figure's own clause.
        concepts = self._concepts_in(clause, fig.kind, fig, clause_offset, memo)
        if not concepts:
            concepts = [c for c in self._concepts_in(sentence, fig.kind, fig, 0, memo) if c.max_gap is None]
        if concepts:
            return [_Bound(c, clause, sentence) for c in concepts]
        if first:
            concepts = [
                c for c in self._concepts_in(a.customer, fig.kind, None, 0, memo) if c.max_gap is None
            ]
            return [_Bound(c, clause, sentence) for c in concepts]
        return []

    def check(self, a: Analysis) -> list[RuleHit]:
        hits: list[RuleHit] = []
        if not a.has_digits_or_fractions:
            return []
        memo: dict = {}
        for index, sentence in enumerate(a.unquoted_sentences):
            for fig in extract_figures(sentence):
                if self._negated.search(sentence[max(0, fig.start - _NEGATION_WINDOW) : fig.start]):
                    continue
                bound = self._bind(fig, sentence, index == 0, a, memo)
                if not bound:
                    continue
                if fig.kind != "year" and self._history_cues.search(
                    _clause_around(sentence, fig.start, self._breaks(sentence, memo))
                ):
                    continue  # "it used to be £40,000": history, not a claim about today
                tolerance = self._tolerance(fig, sentence)
                expected: set[float] = set()
                right = False
                for b in bound:
                    accepted = self._accepted(b, fig, a)
                    if accepted is None or any(self._close(fig.value, v, tolerance) for v in accepted):
                        right = True
                        break
                    expected |= accepted
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

    def __init__(self, kb: KnowledgeBase) -> None:
        self.source = "COBS 4.2.1R; false claims in the knowledge base"
        self._claims = [(c, re.compile(c.unless) if c.unless else None) for c in kb.false_claims]
        # One filtered search over every claim: most replies make none, and then no claim is tried.
        self._any = FilteredPattern([c.pattern for c in kb.false_claims]) if kb.false_claims else None

    def check(self, a: Analysis) -> list[RuleHit]:
        hits: list[RuleHit] = []
        text = a.advisor_unquoted
        if self._any is None or self._any.search(text) is None:
            return hits
        for claim, unless in self._claims:
            if claim.regex.search(text) is None:
                continue
            for sentence in a.unquoted_sentences:
                if claim.regex.search(sentence) and not (unless and unless.search(sentence)):
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

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.source = "Finance Act 2004 s279; Finance Act 2022 s10 (normal minimum pension age)"
        self._claim = kb.lexicon("access_now_claim").regex
        self._cleared = kb.lexicon("access_now_cleared").regex
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
        for sentence in a.unquoted_sentences:
            if self._claim.search(sentence) and not self._cleared.search(sentence):
                return [
                    self.hit(
                        f"The customer is {profile.age}, below their minimum pension age of {minimum}: "
                        "they cannot normally take money from their pension now.",
                        sentence,
                    )
                ]
        return []
