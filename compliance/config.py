"""The `validator` config group's schema and the factory that builds a validator from it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from compliance.judges import Judge, JudgePanel
from compliance.knowledge import KnowledgeBase
from compliance.rules import RuleEngine
from compliance.rules_only import RulesOnlyValidator
from compliance.validator import HybridComplianceValidator, ModeSettings, NoveltyDetector
from simulacra.embeddings.base import Embedder
from simulacra.llm.config import ChainLinkConfig, LLMConfig, build_llm_client
from simulacra.llm.errors import ConfigurationError
from simulacra.llm.providers.scripted import ScriptedHandlers

PROMPTS_DIR = Path(__file__).parent / "prompts"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JudgeConfig(Strict):
    id: str
    prompt_version: str = "v1"
    # null: the judge uses the run's own `llm` chain; otherwise its own chain (another vendor).
    chain: list[ChainLinkConfig] | None = None


class ValidatorConfig(Strict):
    mode: Literal["rules", "training", "production", "batch_qa"] = "rules"
    threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    judges: list[JudgeConfig] = Field(default_factory=list)
    escalate_split_votes: bool = True
    max_refinements: int = Field(default=2, ge=0, le=5)
    holding_reply: str = Field(min_length=1)
    # Where held replies go for a human decision: a SQLAlchemy URL (sqlite:///... or
    # postgresql+psycopg://...); null puts a SQLite queue at <paths.root>/review_queue.db.
    review_queue_url: str | None = None
    # A compliant reply less similar than this (cosine) to every reply validated before goes to a
    # human once `novelty_warmup` replies are known; null turns the check off.
    novelty_threshold: float | None = Field(default=0.35, ge=-1.0, le=1.0)
    novelty_warmup: int = Field(default=50, ge=0)


def build_judge_panel(
    config: ValidatorConfig,
    run_llm: LLMConfig,
    *,
    handlers: ScriptedHandlers,
    seed: int,
) -> JudgePanel | None:
    if config.mode == "rules":
        return None
    if not config.judges:
        raise ConfigurationError(
            f"validator mode '{config.mode}' needs at least one judge in validator.judges"
        )
    judges = []
    for spec in config.judges:
        llm_config = run_llm if spec.chain is None else run_llm.model_copy(update={"chain": spec.chain})
        llm = build_llm_client(llm_config, handlers=handlers, prompt_folders=[PROMPTS_DIR], seed=seed)
        judges.append(Judge(spec.id, llm, spec.prompt_version))
    vendors = {j.vendor for j in judges}
    if config.mode == "production" and vendors != {"scripted"} and len(vendors) < 2:
        raise ConfigurationError(
            "production validation needs judges from at least two vendors; this panel uses only "
            f"{', '.join(sorted(vendors))} (use validator=production_multivendor or give judges their own chains)"
        )
    return JudgePanel(judges)


def build_validator(
    config: ValidatorConfig,
    knowledge: KnowledgeBase,
    panel: JudgePanel | None,
    embedder: Embedder | None = None,
) -> HybridComplianceValidator:
    """The configured validator; the novelty check needs `embedder` (without one it is off)."""
    novelty = None
    if embedder is not None and config.novelty_threshold is not None:
        novelty = NoveltyDetector(embedder, config.novelty_threshold, config.novelty_warmup)
    return HybridComplianceValidator(
        RulesOnlyValidator(RuleEngine(knowledge)),
        panel,
        ModeSettings(
            name=config.mode, threshold=config.threshold, escalate_split_votes=config.escalate_split_votes
        ),
        figures=knowledge.figure_table(),
        tax_year=knowledge.meta.tax_year,
        novelty=novelty,
    )
