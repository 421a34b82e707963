"""Knowledge learning: the FCA knowledge base turned into question-and-answer cases.

A new advisor has no consultations to learn from, but it has the knowledge base the validator
checks against. Each regulation, figure, key date, State Pension age band, scam red flag and
jargon term becomes a case whose question is what a customer would ask and whose guidance is the
knowledge base's own statement, with its source, so the case base starts with correct answers to
cite. They are marked `knowledge_learning`.

They come out unverified: a statement of the rules is not automatically a compliant reply (a bare
definition of an option says nothing of its risks), so `verify_cases` runs each through the
run's validator and only those it passes become retrievable; the rest stay stored, with the
validator's findings in their notes, for whoever maintains the knowledge base.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date

from pydantic import BaseModel

from casebase.case_base import CaseBase
from casebase.classify import KeywordClassifier
from casebase.compliance_check import PrincipleCheckSetting, verify_cases
from casebase.models import Case, CaseOutcome, TaskType
from compliance.codes import CODE_INFO
from compliance.knowledge import KnowledgeBase
from compliance.models import Validator

_NOTE = "authored from the FCA knowledge base"
_PAREN = re.compile(r"\s*\([^)]*\)")


def _citations(source: str) -> set[str]:
    """A source line's citations, normalised: "COBS 19.7 (pensions nudge); PRIN 2A.5" -> {cobs 19.7, prin 2a.5}."""
    parts = (_PAREN.sub("", part).strip().lower() for part in source.split(";"))
    return {p.removeprefix("fca ").strip() for p in parts if p}


def codes_for_source(source: str) -> list[str]:
    """The compliance codes whose obligations rest on a citation this source also makes."""
    cited = _citations(source)
    found = []
    for code, info in CODE_INFO.items():
        theirs = _citations(info.source)
        if any(a == b or a.startswith(b + ".") or b.startswith(a + ".") for a in cited for b in theirs):
            found.append(code.value)
    return found


_ACRONYMS = frozenset({"db", "dc", "nmpa", "spa", "lta", "iht", "mpaa", "ufpls", "fca"})
_YEAR_PAIR = re.compile(r"\b(\d{4}) (\d{2})\b")


def _label(key: str) -> str:
    words = [w.upper() if w in _ACRONYMS else w for w in key.split("_")]
    return _YEAR_PAIR.sub(r"\1/\2", " ".join(words))


def _lower_first(text: str) -> str:
    """Lower-case a title's first letter for use mid-sentence, unless it starts an acronym."""
    return text if text[1:2].isupper() else text[:1].lower() + text[1:]


def _years_months(years: int, months: int) -> str:
    return f"{years} years" + (f" {months} month{'s' if months != 1 else ''}" if months else "")


def _sentence(text: str) -> str:
    text = " ".join(text.split()).strip()
    return text if text.endswith((".", "?", "!")) else text + "."


def _money(value: float) -> str:
    return f"£{value:,.2f}" if value != int(value) else f"£{int(value):,}"


def _value(value: float, unit: str) -> str:
    if unit == "GBP":
        return _money(value)
    if unit == "GBP_per_week":
        return f"{_money(value)} a week"
    if unit == "fraction":
        return f"{value * 100:g}%"
    if unit == "age_years":
        return f"age {value:g}"
    return f"{value:g} {unit}"


def _day(day: date) -> str:
    return f"{day.day} {day:%B %Y}"


class _Builder:
    def __init__(self, classifier: KeywordClassifier) -> None:
        self.classifier = classifier

    def task_type(self, question: str, answer: str) -> TaskType:
        """By the question when it names the topic; by the whole exchange when it does not."""
        asked = self.classifier.classify(question)
        return (
            asked.task_type
            if asked.confidence > 0
            else self.classifier.classify(f"{question} {answer}").task_type
        )

    def case(
        self,
        source_id: str,
        question: str,
        answer: str,
        source: str,
        codes: Iterable[str],
        task_type: TaskType | None = None,
    ) -> Case:
        return Case(
            task_type=task_type or self.task_type(question, answer),
            customer_profile={},
            context=question,
            guidance=answer,
            reasoning=f"Source: {source}.",
            outcome=CaseOutcome(notes=_NOTE),
            compliance_verified=False,
            covered_codes=list(codes),
            provenance="knowledge_learning",
            source_ids=[source_id],
        )


def knowledge_cases(kb: KnowledgeBase, classifier: KeywordClassifier | None = None) -> list[Case]:
    """One unverified case per knowledge item, in a stable order (ids are content hashes, so re-runs
    agree). Pass them through `verify_cases` before adding them to a case base."""
    build = _Builder(classifier or KeywordClassifier())
    cases: list[Case] = []
    for reg in kb.regulations.values():
        title = _lower_first(reg.title)
        answer = _sentence(reg.summary)
        if reg.requirements:
            answer += " In practice: " + " ".join(_sentence(r) for r in reg.requirements)
        cases.append(
            build.case(
                f"knowledge:regulation:{reg.id}",
                f"What are the rules on {title}?",
                answer,
                reg.source,
                codes_for_source(reg.source),
            )
        )
    for fig in kb.figures.values():
        label = _label(fig.key)
        answer = f"The {label} is {_value(fig.value, fig.unit)} for tax year {fig.tax_year}."
        if fig.description:
            answer += " " + _sentence(fig.description)
        cases.append(
            build.case(
                f"knowledge:figure:{fig.key}",
                f"What is the {label} for tax year {fig.tax_year}?",
                answer,
                fig.source,
                ["FACTUAL_ERROR"],
            )
        )
    for kd in kb.key_dates.values():
        label = _label(kd.key)
        answer = f"The {label} date is {_day(kd.date)}."
        answer += f" {_sentence(kd.description)}" if kd.description else ""
        cases.append(
            build.case(
                f"knowledge:key_date:{kd.key}",
                f"When is the {label} date?",
                f"{answer} Source: {_sentence(kd.source)}",
                kd.source,
                ["FACTUAL_ERROR"],
            )
        )
    for band in kb.state_pension_age_bands:
        born = " and ".join(_day(d) for d in (band.born_from, band.born_to) if d is not None)
        who = (
            f"born between {born}"
            if band.born_from and band.born_to
            else (f"born on or after {born}" if band.born_from else f"born on or before {born}")
        )
        earliest = _years_months(band.earliest_years, band.earliest_months)
        latest = _years_months(band.latest_years, band.latest_months)
        age = earliest if earliest == latest else f"between {earliest} and {latest}"
        answer = f"For people {who}, State Pension age is {age}."
        if band.note:
            answer += " " + _sentence(band.note)
        cases.append(
            build.case(
                f"knowledge:state_pension_age:{band.born_from or 'start'}:{band.born_to or 'end'}",
                f"What is the State Pension age for someone {who}?",
                answer,
                band.source,
                ["FACTUAL_ERROR"],
                task_type="retirement_age",
            )
        )
    for flag in kb.scam_red_flags:
        heard = flag.examples[0] if flag.examples else flag.description
        cases.append(
            build.case(
                f"knowledge:scam_red_flag:{flag.id}",
                f"Is this safe? {_sentence(heard)}",
                f"That is a warning sign of a pension scam: {_sentence(flag.description)} Before doing "
                "anything, check the firm on the FCA register and the FCA's ScamSmart pages, and do not "
                "transfer or sign anything under pressure.",
                flag.source,
                ["SCAM_RISK_IGNORED"],
                task_type="risk_assessment",
            )
        )
    for term in kb.jargon:
        cases.append(
            build.case(
                f"knowledge:jargon:{term.term}",
                f"What does '{term.term}' mean?",
                f"'{term.term}' is a term for {_sentence(term.plain_english)}",
                term.source,
                ["UNSUITABLE_FOR_VULNERABLE"],
            )
        )
    return cases


class KnowledgeLearning(BaseModel):
    """What `learn_knowledge` did: how many items became cases, passed the validator, were stored."""

    cases: int
    verified: int
    refused: int
    added: int
    merged: int
    refused_ids: list[str]


async def learn_knowledge(
    case_base: CaseBase,
    kb: KnowledgeBase,
    validator: Validator,
    *,
    classifier: KeywordClassifier | None = None,
    setting: PrincipleCheckSetting | None = None,
) -> KnowledgeLearning:
    """Turn the knowledge base into Q&A cases, verify each with the validator and store them all.

    Refused cases are stored too (with the validator's findings in their notes) but never returned
    by search. Safe to run again on a shared library: the ids are content hashes, so a second run
    rewrites the same records instead of adding copies.
    """
    checked = await verify_cases(knowledge_cases(kb, classifier), validator, setting)
    added = merged = 0
    for case in checked:
        if case_base.add(case).merged:
            merged += 1
        else:
            added += 1
    refused = [c.id for c in checked if not c.compliance_verified]
    return KnowledgeLearning(
        cases=len(checked),
        verified=len(checked) - len(refused),
        refused=len(refused),
        added=added,
        merged=merged,
        refused_ids=refused,
    )
