"""Shared helpers for the rule tests: one knowledge base and engine per session, and a terse way
to build an utterance context and run a single rule on it."""

from __future__ import annotations

from functools import lru_cache

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase, load_knowledge
from compliance.models import CustomerProfile, Pot, RuleHit, UtteranceContext
from compliance.rules import RuleEngine


@lru_cache(maxsize=1)
def kb() -> KnowledgeBase:
    return load_knowledge()


@lru_cache(maxsize=1)
def engine() -> RuleEngine:
    return RuleEngine(kb())


def rule(rule_id: str):
    return next(r for r in engine().rules if r.rule_id == rule_id)


def ctx(
    customer: str,
    advisor: str,
    *,
    age: int = 60,
    pots: list[tuple[str, float, str]] | None = None,
    vulnerable: bool = False,
    literacy: str = "medium",
    situation: str = "",
    facts: dict[str, float] | None = None,
) -> UtteranceContext:
    pots = pots if pots is not None else [("DC", 80000, "Aviva")]
    return UtteranceContext(
        customer=CustomerProfile(
            age=age,
            pots=[Pot(type=t, value_gbp=v, provider=p) for t, v, p in pots],
            vulnerable=vulnerable,
            literacy=literacy,
            situation=situation,
        ),
        customer_utterance=customer,
        advisor_utterance=advisor,
        facts=facts or {},
    )


def hits(rule_id: str, context: UtteranceContext) -> list[RuleHit]:
    return rule(rule_id).check(engine().analyse(context))


def codes(context: UtteranceContext) -> set[ComplianceCode]:
    return set(engine().check(context).codes)
