"""Running one consultation against the advisor: what every executor does, wherever it runs.

The parts a consultation needs (LLM, gate, tools, memory, case and rules bases) are read-only
during a virtual day, so the same runner serves the local executor (the driver's own world) and
each Ray worker (a world the worker built from the run's config and refreshed after each day).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from casebase import Bases, CaseRetriever, RuleRetriever
from compliance.validator_gate import ComplianceGate
from environments.advisor import AdvisorSession, AdvisorTurn, ConsultationState
from environments.config import AppConfig
from environments.consultation import ConsultationRecord, consultation_id, run_consultation
from environments.customer_agent import CustomerAgent, Listener
from environments.memory import AdvisorMemory
from environments.outcomes import OutcomeJudge
from environments.population import Customer
from environments.tools import AdvisorTools
from environments.world import arrival_time
from simulacra.agent import AgentConfig, ExtraSource
from simulacra.clock import VirtualClock
from simulacra.embeddings.base import Embedder
from simulacra.llm.client import LLMClient
from simulacra.memory.importance import ImportanceRater
from simulacra.memory.reflection import ReflectionConfig


@dataclass
class ConsultationParts:
    """What a consultation reads; `World` has these fields, and so does a Ray worker's world."""

    llm: LLMClient
    embedder: Embedder
    gate: ComplianceGate
    tools: AdvisorTools
    rater: ImportanceRater
    memory: AdvisorMemory
    bases: Bases


class ConsultationResult(BaseModel):
    """A finished consultation as it crosses from an executor to the run loop.

    `latencies_ms` is wall time per advisor reply: it varies from run to run, so it is kept here,
    beside the record, and never in the transcript.
    """

    record: ConsultationRecord
    plans: list[dict[str, Any]]
    latencies_ms: list[float]


class TimedAdvisorSession(AdvisorSession):
    """An advisor session that measures each reply with the real clock it is given."""

    def __init__(self, *args: Any, monotonic: Callable[[], float], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._monotonic = monotonic
        self.latencies_ms: list[float] = []

    async def reply(self, turn: int, max_turns: int) -> AdvisorTurn:
        began = self._monotonic()
        try:
            return await super().reply(turn, max_turns)
        finally:
            self.latencies_ms.append((self._monotonic() - began) * 1000.0)


class ConsultationRunner:
    def __init__(
        self,
        app: AppConfig,
        parts: ConsultationParts,
        customers: list[Customer],
        monotonic: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.app = app
        self.parts = parts
        self.customers = customers
        self.monotonic = monotonic
        self.agent_config = AgentConfig(
            memories_k=app.advisor.memories_k,
            reflection=ReflectionConfig(threshold=app.advisor.reflection_threshold),
        )
        # Read-only over the run: built once here rather than once per consultation.
        self.listener = Listener(parts.tools.knowledge)
        self.judge = OutcomeJudge(parts.llm, parts.tools.knowledge)

    def session_for(self, index: int, clock: VirtualClock) -> TimedAdvisorSession:
        app, parts = self.app, self.parts
        customer = self.customers[index]
        retrievers = []
        if app.advisor.use_memory:
            retrievers.append(ExtraSource("experience", parts.memory.retriever(), k=app.advisor.memories_k))
        # The consultation's topic is known from the start, so cases are searched within it
        # rather than classifying every utterance again.
        if app.advisor.use_cases:
            cases = CaseRetriever(parts.bases.cases, task_type_fn=lambda _query: customer.goal)
            retrievers.append(ExtraSource("cases", cases, k=app.casebase.cases.k))
        if app.advisor.use_rules:
            rules = RuleRetriever(parts.bases.rules, domain_fn=lambda _query: customer.goal)
            retrievers.append(ExtraSource("rules", rules, k=app.casebase.rules.k, section="domain_rules"))
        return TimedAdvisorSession(
            ConsultationState(consultation_id=consultation_id(index), customer=customer),
            llm=parts.llm,
            gate=parts.gate,
            tools=parts.tools,
            embedder=parts.embedder,
            rater=parts.rater,
            clock=clock,
            retrievers=retrievers,
            config=self.agent_config,
            monotonic=self.monotonic,
        )

    async def run(self, index: int) -> ConsultationResult:
        env = self.app.environment
        clock = VirtualClock(arrival_time(env.start, index, env.consultations_per_day, self.app.seed))
        session = self.session_for(index, clock)
        customer = self.customers[index]
        agent = CustomerAgent(
            customer,
            consultation_id=session.state.consultation_id,
            llm=self.parts.llm,
            clock=clock,
            embedder=self.parts.embedder,
            rater=self.parts.rater,
            listener=self.listener,
        )
        record = await run_consultation(
            index,
            customer,
            session,
            self.parts.llm,
            clock,
            self.app.advisor.max_turns,
            customer_agent=agent,
            judge=self.judge,
        )
        return ConsultationResult(
            record=record, plans=session.plan_nodes(), latencies_ms=session.latencies_ms
        )
