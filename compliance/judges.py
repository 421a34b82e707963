"""Stage 2: LLM judges and their consensus.

A judge is a model (its own LLM client, so each can sit at a different vendor) plus a versioned
prompt. A panel asks its judges concurrently; the consensus is the majority vote (2 of 3) with the
confidence averaged over the majority. Judges that fail (their fallback chain exhausted) are
recorded as failed and do not vote; a panel with no valid vote cannot decide.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from simulacra.llm.client import LLMClient, PreparedVariables
from simulacra.llm.errors import LLMChainExhausted
from simulacra.llm.types import Task


class JudgeVerdict(BaseModel):
    """What one judge answers."""

    passed: bool
    confidence: float = Field(ge=0.0, le=1.0)
    codes: list[str] = Field(default_factory=list)
    reasoning: str = ""


class JudgeRecord(BaseModel):
    """A judge's verdict with who gave it: the audit trail names the vendor, model and prompt."""

    judge_id: str
    vendor: str
    model: str
    prompt_version: str
    verdict: JudgeVerdict | None = None
    error: str | None = None
    tokens: int = 0


def judge_task(version: str) -> Task[JudgeVerdict]:
    return Task("judge.compliance", version, JudgeVerdict)


class Judge:
    def __init__(self, judge_id: str, llm: LLMClient, prompt_version: str = "v1") -> None:
        self.judge_id = judge_id
        self.llm = llm
        self.task = judge_task(prompt_version)

    @property
    def vendor(self) -> str:
        return self.llm.chain[0].provider.name

    async def judge(self, variables: dict[str, Any] | PreparedVariables) -> JudgeRecord:
        primary = self.llm.chain[0].provider
        try:
            result = await self.llm.call(self.task, variables, temperature=0.0)
        except LLMChainExhausted as exc:
            return JudgeRecord(
                judge_id=self.judge_id,
                vendor=primary.name,
                model=primary.model,
                prompt_version=self.task.version,
                error=str(exc),
            )
        return JudgeRecord(
            judge_id=self.judge_id,
            vendor=result.provider,
            model=result.model,
            prompt_version=self.task.version,
            verdict=result.output,
            tokens=result.usage.total,
        )


class Consensus(BaseModel):
    passed: bool | None  # None: no judge gave a usable verdict
    confidence: float
    unanimous: bool
    codes: list[str]
    votes_for: int
    votes_against: int
    failed: int


def consensus(records: list[JudgeRecord]) -> Consensus:
    votes = [r.verdict for r in records if r.verdict is not None]
    failed = len(records) - len(votes)
    if not votes:
        return Consensus(
            passed=None,
            confidence=0.0,
            unanimous=False,
            codes=[],
            votes_for=0,
            votes_against=0,
            failed=failed,
        )
    yes = [v for v in votes if v.passed]
    no = [v for v in votes if not v.passed]
    # A tie (possible when a judge failed) is resolved towards caution: not passed.
    majority = yes if len(yes) > len(no) else no
    passed = majority is yes
    codes: Counter[str] = Counter(code for v in no for code in dict.fromkeys(v.codes))
    # Codes named by at least half of the failing judges; a lone judge's code still counts when it
    # is the only failing vote that carried the decision.
    need = max(1, (len(no) + 1) // 2)
    return Consensus(
        passed=passed,
        confidence=sum(v.confidence for v in majority) / len(majority),
        unanimous=len(majority) == len(votes),
        codes=[] if passed else sorted(c for c, n in codes.items() if n >= need),
        votes_for=len(yes),
        votes_against=len(no),
        failed=failed,
    )


class JudgePanel:
    def __init__(self, judges: list[Judge]) -> None:
        if not judges:
            raise ValueError("a judge panel needs at least one judge")
        self.judges = judges

    async def assess(self, variables: dict[str, Any]) -> tuple[Consensus, list[JudgeRecord]]:
        # Converted once, and each template rendered once, for all the judges (the same prompt
        # version at the same library gives every judge the same text).
        prepared = PreparedVariables(variables)
        records = await asyncio.gather(*(j.judge(prepared) for j in self.judges))
        return consensus(list(records)), list(records)
