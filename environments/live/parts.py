"""The advisor's parts for the live endpoint, built from its config as a training run builds them.

Same LLM tasks and providers (the scripted stand-in offline), same validator and gate, same
tools, case base and rules base; what differs is that escalations are live (they name the
session a reviewer's decision goes back to) and every provider is timed per request.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from casebase import Bases, CasebaseConfig, CaseRetriever, RuleRetriever, learn_knowledge, open_bases
from casebase.scripted import register_casebase_handlers
from compliance.config import build_judge_panel, build_validator
from compliance.escalation import ReviewQueueSink
from compliance.knowledge import KnowledgeBase, load_knowledge
from compliance.models import Validator
from compliance.review_queue import ReviewQueue
from compliance.scripted import register_compliance_handlers
from compliance.validator_gate import ComplianceGate
from environments.config import EmbedderConfig
from environments.live.config import ServeConfig
from environments.live.timing import time_model_calls
from environments.scripted import register_pension_handlers
from environments.tasks import PROMPTS_DIR
from environments.tools import AdvisorTools
from simulacra import PROMPTS_DIR as SIMULACRA_PROMPTS
from simulacra.agent import AgentConfig, ExtraSource
from simulacra.clock import Clock
from simulacra.embeddings.base import Embedder
from simulacra.embeddings.factory import build_embedder
from simulacra.llm.client import LLMClient
from simulacra.llm.config import build_llm_client
from simulacra.llm.providers.scripted import ScriptedHandlers
from simulacra.memory.importance import LLMImportanceRater
from simulacra.memory.reflection import ReflectionConfig
from simulacra.scripted_tasks import register_simulacra_handlers

REGISTRARS = (
    register_simulacra_handlers,
    register_compliance_handlers,
    register_casebase_handlers,
    register_pension_handlers,
)


@dataclass
class AdvisorParts:
    llm: LLMClient
    embedder: Embedder
    knowledge: KnowledgeBase
    validator: Validator
    gate: ComplianceGate
    tools: AdvisorTools
    rater: LLMImportanceRater
    review_queue: ReviewQueue
    bases: Bases
    agent_config: AgentConfig

    def retrievers(self, use_cases: bool, use_rules: bool) -> list[ExtraSource]:
        sources = []
        if use_cases:
            sources.append(
                ExtraSource("cases", CaseRetriever(self.bases.cases), k=self.bases.cases.settings.k)
            )
        if use_rules:
            sources.append(
                ExtraSource(
                    "rules",
                    RuleRetriever(self.bases.rules),
                    k=self.bases.rules.settings.k,
                    section="domain_rules",
                )
            )
        return sources


def embedder_for(cfg: EmbedderConfig) -> Embedder:
    options: dict = {"cache": cfg.cache}
    if cfg.name == "hashing":
        options["dimension"] = cfg.dimension
    elif cfg.name == "minilm":
        options.update(batch_size=cfg.batch_size, intra_op_threads=cfg.threads)
    else:
        options.update(
            model=cfg.model or "text-embedding-3-small",
            dimensions=cfg.dimension,
            api_key=os.environ.get(cfg.api_key_env) if cfg.api_key_env else None,
            base_url=cfg.base_url,
        )
    return build_embedder(cfg.name, **options)


def library_config(app: ServeConfig) -> CasebaseConfig:
    """The casebase config with a relative library path placed under `<paths.root>/<server.library>`,
    and an empty library counted again at most every `server.library_empty_recheck_s`."""
    store = app.casebase.store.model_copy(update={"empty_recheck_s": app.server.library_empty_recheck_s})
    if store.host is None and not store.path.is_absolute():
        store = store.model_copy(update={"path": app.root / app.server.library / store.path})
    return app.casebase.model_copy(update={"store": store})


@contextmanager
def library_lock(library: CasebaseConfig) -> Iterator[None]:
    """Hold the embedded library for this process alone (the server's workers open it in turn).

    Chroma's embedded client is not safe for concurrent writers, and opening a fresh library
    creates its collections (and may seed it with knowledge cases); a process that opens it
    after another has finished sees everything the other wrote.
    """
    if library.store.remote:
        yield  # a Chroma server orders concurrent clients itself
        return
    lock = library.store.path.with_name(library.store.path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


async def build_parts(app: ServeConfig, clock: Clock) -> AdvisorParts:
    handlers = ScriptedHandlers()
    for register in REGISTRARS:
        register(handlers)
    llm = time_model_calls(
        build_llm_client(
            app.llm,
            handlers=handlers,
            prompt_folders=[PROMPTS_DIR, SIMULACRA_PROMPTS],
            seed=app.seed,
            cache_dir=app.root / app.server.library,
        )
    )
    knowledge = load_knowledge()
    panel = build_judge_panel(app.validator, app.llm, handlers=handlers, seed=app.seed)
    if panel is not None:
        for judge in panel.judges:
            time_model_calls(judge.llm)
    validator = build_validator(app.validator, knowledge, panel)
    embedder = embedder_for(app.embedder)
    Path(app.root).mkdir(parents=True, exist_ok=True)
    review_queue = ReviewQueue(app.review_queue_url(), clock)
    gate = ComplianceGate(
        validator,
        holding_reply=app.validator.holding_reply,
        max_refinements=app.validator.max_refinements,
        escalations=ReviewQueueSink(review_queue, source="live", mode=app.validator.mode),
    )
    library = library_config(app)
    with library_lock(library):
        bases = open_bases(library, embedder, clock, llm)
        if app.advisor.use_cases and app.advisor.knowledge_cases and bases.cases.size == 0:
            await learn_knowledge(bases.cases, knowledge, validator)
    return AdvisorParts(
        llm=llm,
        embedder=embedder,
        knowledge=knowledge,
        validator=validator,
        gate=gate,
        tools=AdvisorTools(knowledge),
        rater=LLMImportanceRater(llm),
        review_queue=review_queue,
        bases=bases,
        agent_config=AgentConfig(
            memories_k=app.advisor.memories_k,
            reflection=ReflectionConfig(threshold=app.advisor.reflection_threshold),
        ),
    )
