"""Replaying a situation with a candidate rule: how the rules base decides whether a rule helps.

The advisor drafts a first reply to the situation with the given rules in its prompt (no memories,
no cases, so only the rules differ), and the validator scores the draft. For the scripted model the
call is seeded by the situation, not by the prompt, so a replay with and without a rule differs
only where the rule acts (common random numbers).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from casebase.accumulation import ReplayScore, ReplaySituation
from casebase.models import GuidanceRule
from compliance.models import CustomerProfile, UtteranceContext, Validator
from environments.tasks import ADVISOR_REPLY
from environments.tools import AdvisorTools
from simulacra.llm.client import LLMClient
from simulacra.llm.providers.scripted import SEED_KEY

# How much each distinct violation costs a replayed draft's score.
VIOLATION_PENALTY = 0.25
# Situations whose tool results are kept (pure functions of the profile); past this, start again.
PREPARED_CACHE = 1024


def situation_profile(profile: CustomerProfile, name: str, **flags: Any) -> dict[str, Any]:
    """A case's or failure's customer profile, with what the advisor knew of the conversation."""
    return {"name": name, **profile.model_dump(mode="json"), "flags": flags}


def replay_score(compliant: bool, violations: list[str]) -> float:
    return 1.0 if compliant else max(0.0, 1.0 - VIOLATION_PENALTY * len(set(violations)))


@dataclass(frozen=True)
class Prepared:
    """What drafting and validating a replay of one situation needs, whatever the rules."""

    profile: CustomerProfile
    tools: dict[str, dict[str, Any]]
    facts: dict[str, float]


class AdvisorReplayer:
    """Scores a situation over `samples` drafts: one draft says little about a model that slips
    at a rate, so a rule is judged by the average, and by every violation any sample showed."""

    def __init__(self, llm: LLMClient, validator: Validator, tools: AdvisorTools, samples: int = 4) -> None:
        if samples < 1:
            raise ValueError("a replay needs at least one sample")
        self.llm = llm
        self.validator = validator
        self.tools = tools
        self.samples = samples
        self._prepared_cache: dict[str, Prepared] = {}

    def _prepared(self, situation: ReplaySituation) -> Prepared:
        """The situation's profile and tool results, which every sample, with and without the
        rule, shares: computed once per situation rather than once per draft."""
        key = json.dumps(situation.customer_profile, sort_keys=True, default=str)
        found = self._prepared_cache.get(key)
        if found is None:
            if len(self._prepared_cache) >= PREPARED_CACHE:
                self._prepared_cache.clear()
            profile = CustomerProfile.model_validate(situation.customer_profile)
            tools = self.tools.run(profile)
            found = Prepared(profile=profile, tools=tools, facts=self.tools.facts(tools))
            self._prepared_cache[key] = found
        return found

    async def replay(self, situation: ReplaySituation, rules: list[GuidanceRule]) -> ReplayScore:
        scores = await asyncio.gather(*(self.sample(situation, rules, i) for i in range(self.samples)))
        return ReplayScore(
            score=sum(s.score for s in scores) / len(scores),
            compliant=all(s.compliant for s in scores),
            violations=sorted({v for s in scores for v in s.violations}),
            text=scores[0].text,
        )

    async def sample(self, situation: ReplaySituation, rules: list[GuidanceRule], index: int) -> ReplayScore:
        raw = situation.customer_profile
        prepared = self._prepared(situation)
        profile, tools = prepared.profile, prepared.tools
        flags = raw.get("flags", {})
        variables = {
            "customer": {"name": raw.get("name", "the customer"), **profile.model_dump(mode="json")},
            "goal": situation.task_type,
            "disclosed": [{"topic": t, "statement": ""} for t in flags.get("disclosed", [])],
            "db_transfer_raised": bool(flags.get("db_transfer_raised", False)),
            "unasked_topics": [],
            "conversation": [],
            "customer_utterance": situation.customer_utterance,
            "asks_for_recommendation": bool(flags.get("asks_for_recommendation", False)),
            "tools": tools,
            "figures": self.tools.figures(),
            "tax_year": self.tools.tax_year,
            "turn": 1,
            "max_turns": 1,
            "plan_step": "",
            "memories": [],
            "cases": [],
            "rules": [{"id": r.id, "text": r.principle, "codes": list(r.codes)} for r in rules],
            SEED_KEY: f"replay:{situation.id}:{index}",
        }
        draft = (await self.llm.call(ADVISOR_REPLY, variables)).output
        result = await self.validator.validate(
            UtteranceContext(
                customer=profile,
                customer_utterance=situation.customer_utterance,
                advisor_utterance=draft.text,
                facts=prepared.facts,
            )
        )
        violations = [str(c) for c in result.violations]
        return ReplayScore(
            score=replay_score(result.compliant, violations),
            compliant=result.compliant,
            violations=violations,
            text=draft.text,
        )
