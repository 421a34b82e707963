"""Assembles a run's parts from its config: LLM client, embedder, validator, gate, advisor, population."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from casebase import Bases, ValidatorRuleCompliance, learn_knowledge, open_bases
from casebase.accumulation import RuleAccumulator
from casebase.scripted import register_casebase_handlers
from casebase.tasks import PROMPTS_DIR as CASEBASE_PROMPTS
from compliance.config import build_judge_panel, build_validator
from compliance.escalation import ReviewQueueSink
from compliance.knowledge import KnowledgeBase, load_knowledge
from compliance.review_queue import ReviewQueue
from compliance.scripted import register_compliance_handlers
from compliance.validator import HybridComplianceValidator
from compliance.validator_gate import ComplianceGate
from environments.config import AppConfig, EmbedderConfig
from environments.executors.novelty import record_novelty
from environments.memory import AdvisorMemory
from environments.population import PopulationGenerator, load_population_data
from environments.replay import AdvisorReplayer
from environments.scripted import register_pension_handlers
from environments.tasks import PROMPTS_DIR
from environments.tools import AdvisorTools
from environments.tracking import RunTracker
from simulacra import PROMPTS_DIR as SIMULACRA_PROMPTS
from simulacra.clock import SystemClock, VirtualClock
from simulacra.embeddings.base import Embedder
from simulacra.embeddings.factory import build_embedder
from simulacra.llm.client import LLMClient
from simulacra.llm.config import build_llm_client
from simulacra.llm.providers.scripted import ScriptedHandlers
from simulacra.memory.importance import LLMImportanceRater
from simulacra.memory.reflection import ReflectionConfig
from simulacra.scripted_tasks import register_simulacra_handlers

# No importance cache: a cached rating is whatever the first batch that held those words got, so it
# would depend on which consultation (on which worker, before or after a resume) came first.
RATER_CACHE = 0


@dataclass
class World:
    llm: LLMClient
    embedder: Embedder
    knowledge: KnowledgeBase
    validator: HybridComplianceValidator
    gate: ComplianceGate
    tools: AdvisorTools
    rater: LLMImportanceRater
    memory: AdvisorMemory
    memory_clock: VirtualClock
    population: PopulationGenerator
    tracker: RunTracker
    review_queue: ReviewQueue
    bases: Bases
    accumulator: RuleAccumulator


def scripted_handlers() -> ScriptedHandlers:
    handlers = ScriptedHandlers()
    register_simulacra_handlers(handlers)
    register_compliance_handlers(handlers)
    register_casebase_handlers(handlers)
    register_pension_handlers(handlers)
    return handlers


def build_run_embedder(cfg: EmbedderConfig) -> Embedder:
    if cfg.name == "hashing":
        return build_embedder("hashing", cache=cfg.cache, dimension=cfg.dimension)
    if cfg.name == "minilm":
        return build_embedder(
            "minilm", cache=cfg.cache, batch_size=cfg.batch_size, intra_op_threads=cfg.threads
        )
    api_key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
    return build_embedder(
        "openai",
        cache=cfg.cache,
        model=cfg.model or "text-embedding-3-small",
        dimensions=cfg.dimension,
        api_key=api_key,
        base_url=cfg.base_url,
    )


def build_run_validator(
    app: AppConfig, knowledge: KnowledgeBase, handlers: ScriptedHandlers, embedder: Embedder
) -> HybridComplianceValidator:
    panel = build_judge_panel(app.validator, app.llm, handlers=handlers, seed=app.seed)
    return build_validator(app.validator, knowledge, panel, embedder)


def open_run_bases(
    app: AppConfig, run_dir: Path, embedder: Embedder, clock: VirtualClock, llm: LLMClient
) -> Bases:
    store = app.casebase.store
    if store.host is None and not store.path.is_absolute():
        # A relative library path is the run's own: every run starts from an empty library.
        store = store.model_copy(update={"path": run_dir / store.path})
    return open_bases(app.casebase.model_copy(update={"store": store}), embedder, clock, llm)


async def build_world(
    app: AppConfig, tracker: RunTracker, run_dir: Path, *, seed_knowledge: bool = True
) -> World:
    """`seed_knowledge=False` leaves the case base as found: a resumed run restores it from its
    checkpoint instead."""
    handlers = scripted_handlers()
    llm = build_llm_client(
        app.llm,
        handlers=handlers,
        prompt_folders=[PROMPTS_DIR, SIMULACRA_PROMPTS, CASEBASE_PROMPTS],
        seed=app.seed,
        cache_dir=run_dir,
    )
    knowledge = load_knowledge()
    embedder = build_run_embedder(app.embedder)
    validator = build_run_validator(app, knowledge, handlers, embedder)
    # Before anything is validated: a checkpoint keeps the replies its novelty memory was shown.
    record_novelty(validator)
    rater = LLMImportanceRater(llm, cache_size=RATER_CACHE)
    memory_clock = VirtualClock(app.environment.start)
    memory = AdvisorMemory(
        embedder, memory_clock, rater, llm, ReflectionConfig(threshold=app.advisor.reflection_threshold)
    )
    # Reviewers work the queue in real time, so its leases and ages use the wall clock.
    queue_url = (
        app.validator.review_queue_url or f"sqlite:///{Path(app.paths.root).resolve() / 'review_queue.db'}"
    )
    review_queue = ReviewQueue(queue_url, SystemClock())
    gate = ComplianceGate(
        validator,
        holding_reply=app.validator.holding_reply,
        max_refinements=app.validator.max_refinements,
        escalations=ReviewQueueSink(
            review_queue, source="training", mode=app.validator.mode, run_id=tracker.run_id
        ),
    )
    tools = AdvisorTools(knowledge)
    bases = open_run_bases(app, run_dir, embedder, memory_clock, llm)
    if seed_knowledge and app.advisor.use_cases and app.advisor.knowledge_cases:
        await learn_knowledge(bases.cases, knowledge, validator)
    accumulator = RuleAccumulator(
        llm,
        bases.rules,
        bases.cases,
        AdvisorReplayer(llm, validator, tools, samples=app.advisor.replay_samples),
        ValidatorRuleCompliance(validator),
        memory_clock,
        app.casebase.accumulation,
    )
    population = PopulationGenerator(
        load_population_data(app.customers.data_file),
        app.seed,
        vulnerable_share=app.customers.vulnerable_share,
        scam_exposure_share=app.customers.scam_exposure_share,
    )
    return World(
        llm=llm,
        embedder=embedder,
        knowledge=knowledge,
        validator=validator,
        gate=gate,
        tools=tools,
        rater=rater,
        memory=memory,
        memory_clock=memory_clock,
        population=population,
        tracker=tracker,
        review_queue=review_queue,
        bases=bases,
        accumulator=accumulator,
    )
