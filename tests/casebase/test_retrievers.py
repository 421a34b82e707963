"""The adapters the advisor retrieves through: simulacra's Retriever protocol, citable metadata."""

from __future__ import annotations

from casebase.factory import Bases
from casebase.retrievers import CaseRetriever, RuleRetriever, classified_task_type
from simulacra.agent import Retriever
from tests.casebase.builders import make_case, make_rule

POTS = "I have three small pension pots from old jobs and want to combine them into one"


async def test_case_retriever_returns_citable_verified_cases_of_the_task_type(bases: Bases) -> None:
    case = bases.cases.add(make_case(POTS, codes=["MISSING_RISK_DISCLOSURE"], source="c-1")).case
    bases.cases.add(
        make_case("Can I combine my old pots if one is a final salary scheme?", verified=False, source="c-2")
    )
    bases.cases.add(
        make_case("Can I combine my tax relief with salary sacrifice?", task_type="tax", source="c-3")
    )
    seen: list[str] = []

    def consolidation(query: str) -> str:
        seen.append(query)
        return "consolidation"

    retriever = CaseRetriever(bases.cases, consolidation)
    assert isinstance(retriever, Retriever)
    items = await retriever.retrieve("combine my old pots", k=3)
    assert seen == ["combine my old pots"]
    assert [i.id for i in items] == [case.id]
    item = items[0]
    assert item.source == "cases" and item.kind == "consolidation"
    assert item.metadata["covered_codes"] == ["MISSING_RISK_DISCLOSURE"]
    assert item.metadata["case_id"] == case.id and item.metadata["source_ids"] == ["c-1"]
    assert "Situation: " + POTS in item.text and "Handled correctly: MISSING_RISK_DISCLOSURE" in item.text
    assert 0 < item.score <= 1


async def test_case_retriever_can_classify_with_the_case_base(bases: Bases) -> None:
    bases.cases.add(
        make_case("When can I retire and what is my State Pension age?", task_type="retirement_age")
    )
    bases.cases.add(make_case("Should I retire early and combine my pots?", task_type="consolidation"))

    async def task_type(query: str):
        return await classified_task_type(bases.cases, query)

    items = await CaseRetriever(bases.cases, task_type).retrieve("What is my State Pension age?", k=3)
    assert [i.kind for i in items] == ["retirement_age"]


async def test_rule_retriever_returns_active_rules_with_their_codes(bases: Bases) -> None:
    rule = bases.rules.add_candidate(
        make_rule(
            "When a customer mentions a cold call, name the scam warning signs, because scams cost savings.",
            ["SCAM_RISK_IGNORED"],
        )
    )
    retriever = RuleRetriever(bases.rules)
    assert isinstance(retriever, Retriever)
    assert await retriever.retrieve("someone cold called me", k=4) == []
    bases.rules.activate(rule.id)
    items = await retriever.retrieve("someone cold called me", k=4)
    assert [i.id for i in items] == [rule.id]
    assert items[0].metadata["codes"] == ["SCAM_RISK_IGNORED"] and items[0].metadata["rule_id"] == rule.id
    assert items[0].source == "rules" and items[0].text == rule.principle


async def test_rule_retriever_restricts_to_a_domain_and_general_rules(bases: Bases) -> None:
    tax = bases.rules.add_candidate(
        make_rule("When tax comes up, explain emergency tax, because it surprises people.", [], domain="tax")
    )
    general = bases.rules.add_candidate(
        make_rule(
            "When tax or anything comes up, check understanding, because clarity matters.",
            [],
            domain="general",
        )
    )
    bases.rules.activate(tax.id)
    bases.rules.activate(general.id)
    items = await RuleRetriever(bases.rules, lambda q: "drawdown").retrieve("tax", k=4)
    assert [i.id for i in items] == [general.id]
