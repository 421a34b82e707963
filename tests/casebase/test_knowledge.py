"""Knowledge learning: every knowledge-base item becomes a sourced Q&A case, verified before use."""

from __future__ import annotations

from datetime import timedelta

import pytest

from casebase.compliance_check import verify_cases
from casebase.factory import Bases
from casebase.knowledge import codes_for_source, knowledge_cases, learn_knowledge
from compliance.knowledge import KnowledgeBase, load_knowledge
from compliance.rules import RuleEngine
from compliance.rules_only import RulesOnlyValidator
from tests.casebase.builders import make_case


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_knowledge()


def test_every_knowledge_item_becomes_one_sourced_case(kb: KnowledgeBase) -> None:
    cases = knowledge_cases(kb)
    expected = (
        len(kb.regulations)
        + len(kb.figures)
        + len(kb.key_dates)
        + len(kb.state_pension_age_bands)
        + len(kb.scam_red_flags)
        + len(kb.jargon)
    )
    assert len(cases) == expected
    assert len({c.id for c in cases}) == len({c.source_ids[0] for c in cases}) == expected
    assert all(c.provenance == "knowledge_learning" and not c.compliance_verified for c in cases)
    assert all(c.reasoning.startswith("Source: ") and len(c.reasoning) > len("Source: .") for c in cases)
    assert [c.id for c in knowledge_cases(kb)] == [c.id for c in cases]  # stable across calls


def test_figure_cases_state_the_knowledge_base_figure_with_its_tax_year(kb: KnowledgeBase) -> None:
    figure = kb.figure("lump_sum_allowance")
    case = next(c for c in knowledge_cases(kb) if c.source_ids == ["knowledge:figure:lump_sum_allowance"])
    assert f"£{int(figure.value):,}" in case.guidance and figure.tax_year in case.guidance
    assert case.covered_codes == ["FACTUAL_ERROR"] and case.task_type == "tax"
    assert case.reasoning == f"Source: {figure.source}."


def test_scam_cases_cover_the_scam_code(kb: KnowledgeBase) -> None:
    scams = [c for c in knowledge_cases(kb) if c.source_ids[0].startswith("knowledge:scam_red_flag:")]
    assert len(scams) == len(kb.scam_red_flags) > 0
    assert all(c.covered_codes == ["SCAM_RISK_IGNORED"] and c.task_type == "risk_assessment" for c in scams)


def test_regulations_cover_the_codes_that_cite_the_same_source() -> None:
    assert codes_for_source("COBS 19.7 (in force 1 June 2022)") == [
        "MISSING_RISK_DISCLOSURE",
        "MISSING_PENSION_WISE_NUDGE",
    ]
    assert codes_for_source("FCA FG21/1") == ["UNSUITABLE_FOR_VULNERABLE"]
    assert codes_for_source("Some unrelated statute") == []


async def test_only_cases_the_validator_passes_become_retrievable(kb: KnowledgeBase, bases: Bases) -> None:
    validator = RulesOnlyValidator(RuleEngine(kb))
    checked = await verify_cases(knowledge_cases(kb), validator)
    passed = [c for c in checked if c.compliance_verified]
    refused = [c for c in checked if not c.compliance_verified]
    assert len(passed) > len(refused) > 0
    assert all("validator (rules) found" in c.outcome.notes for c in refused)
    # Re-checking a passed case's text directly agrees with the verdict it was given.
    for case in passed[:5] + refused[:5]:
        again = await verify_cases([case], validator)
        assert again[0].compliance_verified == case.compliance_verified
    sample = [c for c in checked if c.task_type == "retirement_age"][:6] + refused[:3]
    for case in sample:
        bases.cases.add(case)
    found = bases.cases.search("What is my State Pension age?", k=10)
    assert found and all(m.case.compliance_verified for m in found)
    assert {m.case.id for m in found} <= {c.id for c in sample if c.compliance_verified}


async def test_learning_the_knowledge_base_stores_every_case_and_can_be_run_again(
    kb: KnowledgeBase, bases: Bases, clock
) -> None:
    validator = RulesOnlyValidator(RuleEngine(kb))
    first = await learn_knowledge(bases.cases, kb, validator)
    # Each item is its own sourced fact: none is merged away, however alike two questions read.
    assert first.cases == len(knowledge_cases(kb)) == first.added and first.merged == 0
    assert first.verified + first.refused == first.cases and first.verified > first.refused > 0
    assert bases.cases.size == first.added
    assert bases.cases.count(verified_only=True) <= first.verified
    stored = bases.cases.all()
    assert all(c.provenance == "knowledge_learning" for c in stored)
    refused = {c.id for c in stored if not c.compliance_verified}
    assert refused and refused <= set(first.refused_ids)
    clock.advance(timedelta(days=30))
    again = await learn_knowledge(bases.cases, kb, validator)  # a later run on the same library
    assert (again.added, again.merged, bases.cases.size) == (first.added, first.merged, first.added)
    assert [c.created_at for c in bases.cases.all()] == [c.created_at for c in stored]


def test_knowledge_cases_never_merge_and_consultations_never_merge_into_them(bases: Bases) -> None:
    nmpa = make_case(
        "What is the normal minimum pension age for tax year 2026/27?",
        provenance="knowledge_learning",
        task_type="retirement_age",
        guidance="It is 55.",
        source="knowledge:figure:nmpa",
    )
    later = make_case(
        "What is the normal minimum pension age for tax year 2028/29?",
        provenance="knowledge_learning",
        task_type="retirement_age",
        guidance="It is 57.",
        source="knowledge:figure:nmpa_2028",
    )
    asked = make_case(
        "What is the normal minimum pension age for tax year 2026/27?",
        task_type="retirement_age",
        guidance="It is 55; a regulated adviser can help you plan around it.",
        satisfaction=1.0,
        source="consultation-5",
    )
    assert not bases.cases.add(nmpa).merged and not bases.cases.add(later).merged
    assert not bases.cases.add(asked).merged
    assert bases.cases.size == 3
    assert {c.guidance for c in bases.cases.all()} == {nmpa.guidance, later.guidance, asked.guidance}
