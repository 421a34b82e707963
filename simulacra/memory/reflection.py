"""Reflection (Park et al. 2023): turning observations into cited insights.

When the importance of what was observed since the last reflection adds up past a threshold (150 in
the paper), the agent asks itself a few salient questions about its most recent memories, retrieves
evidence for each, and writes insights that cite that evidence. Insights are stored as REFLECTION
memories and are retrieved like any other memory, so later reflections can build on earlier ones,
and `MemoryStream.explain` walks the citations back down to the observations.

The reference implementation stores whatever the model returns, including unparsable text and
insights citing nothing. Here an answer is stored only if it parses and every insight cites at least
one memory, all of them among the evidence the model was actually shown; anything else is rejected
and asked again (with the reason, and a new attempt number so a cached or seeded answer is not
simply repeated), a bounded number of times. When the attempts run out nothing is stored and the
report says why.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from simulacra.llm.errors import LLMChainExhausted, LLMError
from simulacra.llm.types import Task, Usage
from simulacra.memory.importance import LLMCaller
from simulacra.memory.node import MemoryKind, MemoryNode, Provenance
from simulacra.memory.retrieval import RetrievalFilter
from simulacra.memory.stream import MemoryStream, NewMemory

log = logging.getLogger(__name__)


class ReflectionQuestions(BaseModel):
    questions: list[str] = Field(min_length=1)


class Insight(BaseModel):
    insight: str = Field(min_length=1)
    evidence: list[str] = Field(default_factory=list)  # memory ids; checked by the reflector


class ReflectionInsights(BaseModel):
    insights: list[Insight] = Field(min_length=1)


REFLECTION_QUESTIONS: Task[ReflectionQuestions] = Task("reflection.questions", "v1", ReflectionQuestions)
REFLECTION_INSIGHTS: Task[ReflectionInsights] = Task("reflection.insights", "v1", ReflectionInsights)


class ReflectionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(default=150.0, gt=0)
    questions: int = Field(default=3, ge=1)
    insights: int = Field(default=5, ge=1, description="insights asked for per question")
    recent: int = Field(default=100, ge=1, description="most recent memories the questions are drawn from")
    evidence: int = Field(default=30, ge=1, description="memories retrieved per question")
    max_retries: int = Field(default=2, ge=0)


class RejectedAttempt(BaseModel):
    task: str
    attempt: int
    reason: str


class QuestionOutcome(BaseModel):
    question: str
    evidence_ids: list[str]
    stored_ids: list[str] = Field(default_factory=list)
    rejected: list[RejectedAttempt] = Field(default_factory=list)
    reason: str | None = None  # set when nothing was stored for this question


class ReflectionReport(BaseModel):
    """The account of one reflection: what was asked, what was stored, and what was refused and why."""

    status: Literal["stored", "partial", "failed", "skipped"]
    at: datetime
    pending_importance: float
    questions: list[str] = Field(default_factory=list)
    outcomes: list[QuestionOutcome] = Field(default_factory=list)
    nodes: list[MemoryNode] = Field(default_factory=list)
    rejected: list[RejectedAttempt] = Field(default_factory=list)  # of the questions task
    reason: str | None = None
    usage: Usage = Field(default_factory=Usage)


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens, output_tokens=a.output_tokens + b.output_tokens
    )


def _listing(nodes: Sequence[MemoryNode]) -> list[dict[str, str]]:
    return [{"id": n.id, "description": n.description} for n in nodes]


class Reflector:
    def __init__(
        self,
        stream: MemoryStream,
        llm: LLMCaller,
        threshold: float = 150.0,
        questions: int = 3,
        insights: int = 5,
        recent: int = 100,
        max_retries: int = 2,
        *,
        evidence: int = 30,
        provenance: Provenance | None = None,
        filter: RetrievalFilter | None = None,
    ) -> None:
        self.stream = stream
        self.llm = llm
        self.config = ReflectionConfig(
            threshold=threshold,
            questions=questions,
            insights=insights,
            recent=recent,
            evidence=evidence,
            max_retries=max_retries,
        )
        self.provenance = provenance or Provenance(author="agent")
        # Restricts what is counted, asked about and cited (e.g. one customer's scope).
        self.filter = filter
        self.last_report: ReflectionReport | None = None
        self.rounds = 0
        self._pending = 0.0
        self._watermark: datetime | None = None
        self._at_watermark: set[str] = set()
        self._start_after_last_reflection()

    @classmethod
    def from_config(
        cls,
        stream: MemoryStream,
        llm: LLMCaller,
        config: ReflectionConfig,
        *,
        provenance: Provenance | None = None,
        filter: RetrievalFilter | None = None,
    ) -> Reflector:
        return cls(
            stream,
            llm,
            config.threshold,
            config.questions,
            config.insights,
            config.recent,
            config.max_retries,
            evidence=config.evidence,
            provenance=provenance,
            filter=filter,
        )

    # -- when to reflect

    def _filter(self, kinds: set[MemoryKind], since: datetime | None = None) -> RetrievalFilter:
        base = self.filter or RetrievalFilter()
        update: dict[str, Any] = {"kinds": kinds if base.kinds is None else kinds & set(base.kinds)}
        if since is not None:
            update["since"] = since if base.since is None else max(since, base.since)
        return base.model_copy(update=update)

    def _start_after_last_reflection(self) -> None:
        """On a reloaded stream, count only the observations made after its newest reflection."""
        reflections = self.stream.nodes(filter=self._filter({MemoryKind.REFLECTION}), last=1)
        if not reflections:
            return
        self._watermark = reflections[-1].created_at
        same_instant = self.stream.nodes(filter=self._filter({MemoryKind.OBSERVATION}, self._watermark))
        self._at_watermark = {n.id for n in same_instant if n.created_at == self._watermark}

    def _sync(self) -> None:
        """Add the importance of observations not yet counted.

        Virtual time stands still within a step, so many nodes share one timestamp: the watermark is
        the newest timestamp counted plus the ids counted at that instant. The stream's `since` is
        inclusive, so that instant is read again and its counted ids skipped; only the new rows are
        built into nodes, so this stays cheap on a large stream.
        """
        since = self._watermark
        for node in self.stream.nodes(filter=self._filter({MemoryKind.OBSERVATION}, since)):
            if self._watermark is not None:
                if node.created_at < self._watermark:
                    continue
                if node.created_at == self._watermark and node.id in self._at_watermark:
                    continue
            if self._watermark is None or node.created_at > self._watermark:
                self._watermark = node.created_at
                self._at_watermark = set()
            self._at_watermark.add(node.id)
            self._pending += node.importance

    def pending_importance(self) -> float:
        self._sync()
        return self._pending

    def should_reflect(self) -> bool:
        return self.pending_importance() > self.config.threshold

    # -- reflecting

    async def reflect(self) -> list[MemoryNode]:
        """Reflect now and return the stored insights (empty, with `last_report` saying why, if none)."""
        return (await self.reflect_with_report()).nodes

    async def maybe_reflect(self) -> ReflectionReport | None:
        return await self.reflect_with_report() if self.should_reflect() else None

    async def reflect_with_report(self) -> ReflectionReport:
        pending = self.pending_importance()
        # Reset whatever the outcome: a failed round must not turn into a retry on every turn.
        self._pending = 0.0
        self.rounds += 1
        report = await self._reflect(pending)
        self.last_report = report
        if report.status in ("failed", "partial"):
            log.warning("reflection %s: %s", report.status, report.reason)
        return report

    async def _reflect(self, pending: float) -> ReflectionReport:
        report = ReflectionReport(status="failed", at=self.stream.clock.now(), pending_importance=pending)
        kinds = {MemoryKind.OBSERVATION, MemoryKind.REFLECTION}
        recent = self.stream.nodes(filter=self._filter(kinds), last=self.config.recent)
        if not recent:
            report.status, report.reason = "skipped", "there are no memories to reflect on"
            return report

        questions, rejected, usage = await self._ask(
            REFLECTION_QUESTIONS,
            {"memories": _listing(recent), "count": self.config.questions},
            self._check_questions,
        )
        report.rejected, report.usage = rejected, usage
        if questions is None:
            report.reason = f"no usable questions after {len(rejected)} attempts: {rejected[-1].reason}"
            return report
        report.questions = [q.strip() for q in questions.questions if q.strip()][: self.config.questions]

        # Evidence is retrieved for every question before anything is stored, so this round's
        # insights rest on what existed when it began (earlier rounds' reflections included).
        evidence = [self._evidence(q) for q in report.questions]
        answers = await asyncio.gather(
            *(self._insights_for(q, shown) for q, shown in zip(report.questions, evidence, strict=True))
        )
        to_store: list[tuple[QuestionOutcome, NewMemory]] = []
        seen: set[str] = set()
        for outcome, batch, used in answers:
            report.outcomes.append(outcome)
            report.usage = _add(report.usage, used)
            for insight in [] if batch is None else batch.insights[: self.config.insights]:
                text = insight.insight.strip()
                if text.lower() in seen:
                    continue
                seen.add(text.lower())
                memory = NewMemory(
                    description=text,
                    kind=MemoryKind.REFLECTION,
                    provenance=self.provenance,
                    citations=list(dict.fromkeys(insight.evidence)),
                    metadata={"question": outcome.question, "reflection_round": self.rounds},
                )
                to_store.append((outcome, memory))
        if to_store:
            report.nodes = await self.stream.add_many([memory for _, memory in to_store])
            for (outcome, _), node in zip(to_store, report.nodes, strict=True):
                outcome.stored_ids.append(node.id)
        failed = "; ".join(f"'{o.question}': {o.reason}" for o in report.outcomes if o.reason is not None)
        if not report.nodes:
            report.status, report.reason = "failed", failed or "no insights"
        else:
            report.status, report.reason = ("partial", failed) if failed else ("stored", None)
        return report

    def _evidence(self, question: str) -> list[MemoryNode]:
        scored = self.stream.retrieve(
            question,
            k=self.config.evidence,
            filter=self._filter({MemoryKind.OBSERVATION, MemoryKind.REFLECTION}),
        )
        return [s.node for s in scored]

    async def _insights_for(
        self, question: str, shown: list[MemoryNode]
    ) -> tuple[QuestionOutcome, ReflectionInsights | None, Usage]:
        outcome = QuestionOutcome(question=question, evidence_ids=[n.id for n in shown])
        if not shown:
            outcome.reason = "no memories were retrieved as evidence"
            return outcome, None, Usage()
        allowed = set(outcome.evidence_ids)
        batch, rejected, usage = await self._ask(
            REFLECTION_INSIGHTS,
            {"question": question, "evidence": _listing(shown), "count": self.config.insights},
            lambda out: self._check_insights(out, allowed),
        )
        outcome.rejected = rejected
        if batch is None:
            outcome.reason = f"no usable insights after {len(rejected)} attempts: {rejected[-1].reason}"
        return outcome, batch, usage

    @staticmethod
    def _check_questions(output: ReflectionQuestions) -> str | None:
        if not any(q.strip() for q in output.questions):
            return "every question was blank"
        return None

    def _check_insights(self, output: ReflectionInsights, allowed: set[str]) -> str | None:
        """Why this answer must not be stored, or None. One bad insight rejects the whole answer:
        a model that invents a citation once has not shown the others are sound."""
        for number, insight in enumerate(output.insights[: self.config.insights], start=1):
            if not insight.insight.strip():
                return f"insight {number} is blank"
            if not insight.evidence:
                return f"insight {number} ('{insight.insight[:60]}') cites no memory"
            unknown = [c for c in insight.evidence if c not in allowed]
            if unknown:
                return (
                    f"insight {number} ('{insight.insight[:60]}') cites ids that were not among "
                    f"the evidence shown: {', '.join(unknown[:5])}"
                )
        return None

    async def _ask(
        self,
        task: Task,
        variables: dict[str, Any],
        check: Callable[[Any], str | None],
    ) -> tuple[Any | None, list[RejectedAttempt], Usage]:
        """Call `task` until `check` passes, at most 1 + max_retries times."""
        rejected: list[RejectedAttempt] = []
        usage = Usage()
        previous: str | None = None
        for attempt in range(self.config.max_retries + 1):
            try:
                result = await self.llm.call(
                    task, {**variables, "attempt": attempt, "previous_error": previous}
                )
            except (LLMChainExhausted, LLMError) as exc:
                reason = f"the model gave no usable answer ({str(exc).splitlines()[0]})"
                if isinstance(exc, LLMChainExhausted) and exc.attempts:
                    reason = f"the model gave no usable answer ({exc.attempts[-1]})"
            else:
                usage = _add(usage, result.usage)
                problem = check(result.output)
                if problem is None:
                    return result.output, rejected, usage
                reason = problem
            rejected.append(RejectedAttempt(task=task.key, attempt=attempt, reason=reason))
            previous = reason
        return None, rejected, usage
