"""The shape of the FCA knowledge base's data files.

Every item names its source; every figure names the tax year it holds for. Regular expressions are
compiled and their examples checked when the files load, so a broken pattern or an example that no
longer matches fails at load time with the file and field named, never silently at run time.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from compliance.codes import ComplianceCode
from compliance.knowledge.prefilter import FilteredPattern, split_alternation

FigureUnit = Literal["GBP", "GBP_per_week", "fraction", "age_years", "years", "weeks"]
FigureKind = Literal["money", "percent", "age", "year"]


def _check(terms: list[str], what: str) -> re.Pattern[str]:
    """The terms as one plain alternation: for validating (examples, compilability) only."""
    try:
        return re.compile("|".join(f"(?:{t})" for t in terms))
    except re.error as exc:
        raise ValueError(f"{what}: invalid regular expression: {exc}") from exc


def _compile(terms: list[str], what: str) -> FilteredPattern:
    """The terms as one alternation, literal-filtered branch by branch (see `prefilter`)."""
    try:
        re.compile("|".join(f"(?:{t})" for t in terms))
        return FilteredPattern([branch for term in terms for branch in _branches(term)])
    except re.error as exc:
        raise ValueError(f"{what}: invalid regular expression: {exc}") from exc


def _branches(term: str) -> list[str]:
    """A term's top-level alternatives, or the term itself if one does not compile alone."""
    parts = split_alternation(term)
    try:
        for part in parts:
            re.compile(part)
    except re.error:
        return [term]
    return parts


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Meta(_Strict):
    tax_year: str = Field(pattern=r"^\d{4}/\d{2}$")
    reference_date: date
    description: str = ""


class Figure(_Strict):
    key: str
    value: float
    unit: FigureUnit
    tax_year: str = Field(pattern=r"^\d{4}/\d{2}$")
    source: str = Field(min_length=3)
    description: str = ""


class KeyDate(_Strict):
    key: str
    date: date
    source: str = Field(min_length=3)
    description: str = ""


class StatePensionAgeBand(_Strict):
    """People born in [born_from, born_to] reach State Pension age between the two ages given
    (equal for fixed bands; a range where the law phases by date)."""

    born_from: date | None = None
    born_to: date | None = None
    earliest_years: int
    earliest_months: int = Field(default=0, ge=0, le=11)
    latest_years: int
    latest_months: int = Field(default=0, ge=0, le=11)
    source: str = Field(min_length=3)
    note: str = ""

    @model_validator(mode="after")
    def _ordered(self) -> StatePensionAgeBand:
        if (self.earliest_years, self.earliest_months) > (self.latest_years, self.latest_months):
            raise ValueError("earliest age is after latest age")
        if self.born_from and self.born_to and self.born_from > self.born_to:
            raise ValueError("born_from is after born_to")
        return self


class Regulation(_Strict):
    id: str
    title: str
    source: str = Field(min_length=3)
    summary: str
    requirements: list[str] = Field(default_factory=list)
    effective_from: date | None = None


class _Patterned(_Strict):
    """An item carrying regex terms plus examples that must (and must not) match them."""

    examples: list[str] = Field(default_factory=list)
    counter_examples: list[str] = Field(default_factory=list)
    _regex: FilteredPattern = PrivateAttr()

    @abstractmethod
    def _terms(self) -> list[str]:
        """The regex terms the item is matched by (each kind of item keeps them in its own field)."""

    @model_validator(mode="after")
    def _examples_hold(self) -> _Patterned:
        regex = _check(self._terms(), "terms")
        for i, example in enumerate(self.examples):
            if not regex.search(example.lower()):
                raise ValueError(f"examples[{i}] {example!r} is not matched by the terms")
        for i, example in enumerate(self.counter_examples):
            if regex.search(example.lower()) and not self._cleared(example.lower()):
                raise ValueError(f"counter_examples[{i}] {example!r} is matched by the terms")
        return self

    def _cleared(self, text: str) -> bool:
        """Whether a match in this text is cleared by the item's own exception (none by default)."""
        return False

    def model_post_init(self, __context: object) -> None:
        self._regex = _compile(self._terms(), "terms")

    @property
    def regex(self) -> FilteredPattern:
        return self._regex


class Lexicon(_Patterned):
    """A named family of phrases (lower-case regex fragments) that a rule looks for."""

    key: str
    description: str
    source: str = Field(min_length=3)
    terms: list[str] = Field(min_length=1)

    def _terms(self) -> list[str]:
        return self.terms


class LanguagePattern(_Patterned):
    """A prohibited phrasing (reported with its code) or a permitted one (a guard that clears it)."""

    id: str
    kind: Literal["prohibited", "permitted"]
    code: ComplianceCode | None = None
    description: str
    source: str = Field(min_length=3)
    pattern: str
    # A prohibited match is cleared when this matches anywhere in its clause (e.g. an imperative
    # inside a list of alternatives: "leave it invested, take some cash or buy an annuity").
    unless_clause: str | None = None
    _unless: FilteredPattern | None = PrivateAttr(default=None)

    def _terms(self) -> list[str]:
        return [self.pattern]

    def model_post_init(self, __context: object) -> None:
        super().model_post_init(__context)
        if self.unless_clause:
            self._unless = _compile([self.unless_clause], "unless_clause")

    @property
    def unless(self) -> FilteredPattern | None:
        return self._unless

    def _cleared(self, text: str) -> bool:
        return (
            bool(self.unless_clause)
            and _check([self.unless_clause], "unless_clause").search(text) is not None
        )

    @model_validator(mode="after")
    def _code_when_prohibited(self) -> LanguagePattern:
        if self.kind == "prohibited" and self.code is None:
            raise ValueError("a prohibited pattern needs a code")
        return self


class FalseClaim(_Patterned):
    """A statement that is wrong whatever figure accompanies it (e.g. 'the lifetime allowance applies')."""

    id: str
    message: str
    source: str = Field(min_length=3)
    pattern: str
    # If this matches in the same sentence the claim is historical or negated and is cleared.
    unless: str | None = None

    def _terms(self) -> list[str]:
        return [self.pattern]

    @field_validator("unless")
    @classmethod
    def _unless_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            _check([value], "unless")
        return value


class FigureConcept(_Strict):
    """Something a figure in an utterance can be a claim about, and which values make it right.

    `accepts` names knowledge-base figures (or key dates for year claims); `derived` names a
    calculation over the customer's profile and the calculators (pot value, tax-free cash, ages).
    When `historical_cues` match in the sentence, `historical_accepts` are accepted too, or any
    value if that list is empty (a figure quoted as history, e.g. the old lifetime allowance).
    """

    key: str
    kind: FigureKind
    phrases: list[str] = Field(min_length=1)
    accepts: list[str] = Field(default_factory=list)
    derived: (
        Literal[
            "pot_value",
            "tax_free_cash",
            "taxable_share",
            "state_pension_annual",
            "state_pension_age",
            "minimum_pension_age",
            "state_pension_age_years",
        ]
        | None
    ) = None
    historical_cues: str | None = None
    historical_accepts: list[str] = Field(default_factory=list)
    # Phrase and figure must be within this many characters (None: anywhere in the clause), and
    # on this side of the figure ("after": "£42,000 pot"; "before": "your pot is worth £42,000").
    max_gap: int | None = None
    side: Literal["before", "after", "either"] = "either"
    source: str = Field(min_length=3)
    description: str = ""
    _regex: FilteredPattern = PrivateAttr()
    _historical: FilteredPattern | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _usable(self) -> FigureConcept:
        _check(self.phrases, "phrases")
        if self.historical_cues:
            _check([self.historical_cues], "historical_cues")
        if not self.accepts and self.derived is None and self.historical_cues is None:
            raise ValueError("a concept needs accepts, derived or historical_cues")
        return self

    def model_post_init(self, __context: object) -> None:
        self._regex = _compile(self.phrases, "phrases")
        if self.historical_cues:
            self._historical = _compile([self.historical_cues], "historical_cues")

    @property
    def regex(self) -> FilteredPattern:
        return self._regex

    @property
    def historical(self) -> FilteredPattern | None:
        return self._historical


class ScamRedFlag(_Patterned):
    id: str
    description: str
    source: str = Field(min_length=3)
    customer_phrases: list[str] = Field(min_length=1)
    # Only a red flag when a third party is involved (e.g. early access is innocent on its own).
    needs_third_party: bool = False

    def _terms(self) -> list[str]:
        return self.customer_phrases


class JargonTerm(_Strict):
    term: str
    pattern: str
    plain_english: str
    source: str = Field(min_length=3)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        _check([value], "pattern")
        return value


class EscalationPolicy(_Strict):
    """Data-driven thresholds for the rule stage's high-stakes flag (firm policy, not FCA figures)."""

    large_pot_gbp: float = Field(gt=0)
    escalate_db_transfer: bool = True
    escalate_vulnerable_irreversible: bool = True
    escalate_large_pot_decision: bool = True
    source: str = Field(min_length=3)


class FigureCheckSettings(_Strict):
    """How close a quoted figure must be to be right: exactly-stated figures within `exact`,
    figures hedged with 'about', 'around' etc. within `approximate` (both relative)."""

    exact_tolerance: float = Field(ge=0, lt=1)
    approximate_tolerance: float = Field(ge=0, lt=1)
    source: str = Field(min_length=3)


class KnowledgeFile(_Strict):
    """One YAML file; any subset of sections. Files are merged into one KnowledgeBase."""

    meta: Meta | None = None
    figures: list[Figure] = Field(default_factory=list)
    key_dates: list[KeyDate] = Field(default_factory=list)
    state_pension_age_bands: list[StatePensionAgeBand] = Field(default_factory=list)
    regulations: list[Regulation] = Field(default_factory=list)
    lexicons: list[Lexicon] = Field(default_factory=list)
    language_patterns: list[LanguagePattern] = Field(default_factory=list)
    false_claims: list[FalseClaim] = Field(default_factory=list)
    figure_concepts: list[FigureConcept] = Field(default_factory=list)
    scam_red_flags: list[ScamRedFlag] = Field(default_factory=list)
    jargon: list[JargonTerm] = Field(default_factory=list)
    escalation: EscalationPolicy | None = None
    figure_check: FigureCheckSettings | None = None
