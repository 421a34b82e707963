"""Adapters that let the generic agent retrieve from the case base and the rules base.

They implement simulacra's `Retriever` protocol, so the advisor in `environments` plugs them into
the cognitive loop as extra sources. Each item's metadata carries the record id and the compliance
codes it is about, so the advisor can cite what it used and the scripted advisor can follow rules
by their codes.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from casebase.case_base import CaseBase
from casebase.models import Case, GuidanceRule, TaskType
from casebase.rules_base import RulesBase
from simulacra.agent import RetrievedItem

TaskTypeFn = Callable[[str], TaskType | Awaitable[TaskType | None] | None]


async def _resolve(fn: TaskTypeFn | None, query: str) -> TaskType | None:
    if fn is None:
        return None
    answer = fn(query)
    return await answer if inspect.isawaitable(answer) else answer


def case_text(case: Case) -> str:
    """How a case reads in the advisor's prompt: the situation, what was said, and why."""
    parts = [f"Situation: {case.context}", f"Guidance given: {case.guidance}"]
    if case.reasoning:
        parts.append(f"Why: {case.reasoning}")
    if case.covered_codes:
        parts.append(f"Handled correctly: {', '.join(case.covered_codes)}")
    return "\n".join(parts)


def case_item(case: Case, similarity: float) -> RetrievedItem:
    return RetrievedItem(
        id=case.id,
        text=case_text(case),
        score=similarity,
        source="cases",
        kind=case.task_type,
        metadata={
            "case_id": case.id,
            "task_type": case.task_type,
            "covered_codes": list(case.covered_codes),
            "provenance": case.provenance,
            "source_ids": list(case.source_ids),
        },
    )


def rule_item(rule: GuidanceRule, similarity: float) -> RetrievedItem:
    return RetrievedItem(
        id=rule.id,
        text=rule.principle,
        score=similarity,
        source="rules",
        kind=rule.domain,
        metadata={
            "rule_id": rule.id,
            "codes": list(rule.codes),
            "confidence": rule.confidence,
            "domain": rule.domain,
            "version": rule.version,
        },
    )


class CaseRetriever:
    """Verified cases similar to the query, within the task type `task_type_fn` gives for it.

    `task_type_fn` may be sync or async, e.g. the case base's own classifier, or a function that
    returns the task type the consultation was already classified as (saving a call per utterance);
    returning None searches all task types.
    """

    def __init__(self, case_base: CaseBase, task_type_fn: TaskTypeFn | None = None) -> None:
        self.case_base = case_base
        self.task_type_fn = task_type_fn

    async def retrieve(self, query: str, k: int) -> list[RetrievedItem]:
        task_type = await _resolve(self.task_type_fn, query)
        return [case_item(m.case, m.similarity) for m in self.case_base.search(query, task_type, k)]


class RuleRetriever:
    """Active rules relevant to the query (restricted to a domain and general rules when given)."""

    def __init__(self, rules_base: RulesBase, domain_fn: TaskTypeFn | None = None) -> None:
        self.rules_base = rules_base
        self.domain_fn = domain_fn

    async def retrieve(self, query: str, k: int) -> list[RetrievedItem]:
        domain = await _resolve(self.domain_fn, query)
        return [rule_item(m.rule, m.similarity) for m in self.rules_base.search(query, k, domain)]


async def classified_task_type(case_base: CaseBase, query: str) -> TaskType:
    """A `task_type_fn` that asks the case base's classifier (LLM with keyword fallback)."""
    return (await case_base.classify_task(query)).task_type
