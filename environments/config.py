"""The schema of the whole Hydra config tree.

Hydra composes the YAML groups in `conf/`; `load_app_config` then validates the result against
these models, so an unknown key or an ill-typed value stops the run with the dotted path of the
key and what was expected, before anything is written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from casebase.config import CasebaseConfig
from compliance.config import ValidatorConfig
from simulacra.llm.config import LLMConfig


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmbedderConfig(Strict):
    name: Literal["hashing", "minilm", "openai"]
    dimension: int = Field(default=384, ge=8)
    cache: bool = True
    batch_size: int = Field(default=32, ge=1)
    threads: int = Field(default=2, ge=1)
    model: str | None = None
    api_key_env: str | None = None
    base_url: str | None = None


class AdvisorConfig(Strict):
    name: str = "guidance-advisor"
    max_turns: int = Field(default=4, ge=1, le=20)
    use_memory: bool = True
    use_cases: bool = True
    use_rules: bool = True
    # Seed the case base with question-and-answer cases from the FCA knowledge base.
    knowledge_cases: bool = True
    # Drafts per replay when a candidate rule is validated (see environments.replay).
    replay_samples: int = Field(default=4, ge=1, le=16)
    # Replies compliance staff rejected in the review app (casebase.reviewed_failures), relative
    # to paths.root; rule accumulation learns from them at the start of a run and between days.
    reviewed_failures: str | None = "review_failures.jsonl"
    memories_k: int = Field(default=8, ge=0)
    reflection_threshold: float = Field(default=150.0, gt=0)


class CustomersConfig(Strict):
    name: str = "uk_mix"
    data_file: str | None = None
    vulnerable_share: float | None = Field(default=None, ge=0, le=1)
    scam_exposure_share: float | None = Field(default=None, ge=0, le=1)


class EnvironmentConfig(Strict):
    consultations: int = Field(default=24, ge=1)
    concurrency: int = Field(default=8, ge=1)
    start: datetime = datetime(2026, 4, 6, 9, 0)
    consultations_per_day: int = Field(default=8, ge=1)
    # Virtual seconds per real second (environments.pacing). The spec's pace is 24: one real hour
    # is one virtual day. None or 0: as fast as the models allow.
    acceleration: float | None = Field(default=24.0, ge=0)


class ExecutorConfig(Strict):
    """What runs a day's consultations (environments.executors)."""

    name: Literal["local", "ray"] = "local"
    # ray: the cluster to join (e.g. "auto" or "ray://head:10001"); None starts a local instance.
    address: str | None = None
    workers: int = Field(default=2, ge=1)
    worker_cpus: float = Field(default=1.0, ge=0)
    num_cpus: int | None = Field(default=None, ge=1)  # a local instance's CPUs
    runtime_env: dict[str, Any] = Field(default_factory=dict)
    log_to_driver: bool = False


class TrackingConfig(Strict):
    uri: str | None = None
    experiment: str = "pension-guidance-training"
    run_name: str | None = None
    # One MLflow trace per consultation with its verdicts as assessments (see environments.tracing).
    traces: bool = True


class PathsConfig(Strict):
    root: str = "runs"


class AppConfig(Strict):
    llm: LLMConfig
    embedder: EmbedderConfig
    advisor: AdvisorConfig
    customers: CustomersConfig
    validator: ValidatorConfig
    environment: EnvironmentConfig
    tracking: TrackingConfig
    paths: PathsConfig
    casebase: CasebaseConfig = Field(default_factory=CasebaseConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    seed: int = 0
    # The MLflow run id of a killed run to carry on from its last checkpoint (environments.checkpoint).
    resume: str | None = None


class ConfigError(Exception):
    """The composed configuration does not fit the schema; the message lists every problem."""


def describe_validation_error(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        path = ".".join(str(p) for p in error["loc"])
        if error["type"] == "extra_forbidden":
            lines.append(f"  {path}: unknown key (not part of the schema)")
        else:
            lines.append(f"  {path}: {error['msg']} (got {error.get('input')!r})")
    return "invalid configuration:\n" + "\n".join(lines)


def load_app_config(cfg: DictConfig | dict[str, Any]) -> AppConfig:
    data = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    assert isinstance(data, dict)
    data.pop("hydra", None)
    try:
        return AppConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc)) from None
