"""The schema of the live endpoint's Hydra config (`conf/serve.yaml`).

It reuses the training run's groups (llm, embedder, advisor, validator, casebase, tracking,
paths), validated by the same models, and adds `server`. As for training runs, an unknown key or
an ill-typed value stops the server before it binds a port, naming the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from casebase.config import CasebaseConfig
from compliance.config import ValidatorConfig
from environments.config import (
    AdvisorConfig,
    ConfigError,
    EmbedderConfig,
    PathsConfig,
    TrackingConfig,
    describe_validation_error,
)
from environments.live import CONF_DIR
from simulacra.llm.config import LLMConfig


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RateLimitConfig(Strict):
    requests: int = Field(default=120, ge=1)
    window_s: int = Field(default=60, ge=1)


class ServerConfig(Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    database_url: str | None = None
    library: str = "live"
    max_message_chars: int = Field(default=4000, ge=1, le=100_000)
    max_turns: int = Field(default=12, ge=1, le=20)
    rate_limit: RateLimitConfig = Field(default_factory=RateLimitConfig)
    delivery_poll_s: float = Field(default=0.5, gt=0)
    key_cache_s: float = Field(default=5.0, ge=0)
    rejection_reply: str = Field(min_length=1)
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    # Server processes sharing the port (uvicorn workers): the advisor's turn is CPU-bound Python,
    # so one process uses one core. The store is shared safely (versioned sessions, SQL rate
    # counts); an embedded Chroma library is read-only to them (see `ServeConfig.library_writable`).
    workers: int = Field(default=1, ge=1, le=64)
    # An empty case or rules library is counted again at most this often (casebase
    # `StoreConfig.empty_recheck_s`): counting costs Chroma half a query, twice a reply.
    library_empty_recheck_s: float = Field(default=1.0, ge=0)


class ServeConfig(Strict):
    llm: LLMConfig
    embedder: EmbedderConfig
    advisor: AdvisorConfig
    validator: ValidatorConfig
    casebase: CasebaseConfig = Field(default_factory=CasebaseConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    paths: PathsConfig
    server: ServerConfig
    seed: int = 0

    @property
    def root(self) -> Path:
        return Path(self.paths.root).resolve()

    def database_url(self) -> str:
        return self.server.database_url or f"sqlite:///{self.root / 'live.db'}"

    def library_writable(self) -> bool:
        """Whether this server may add to the case base while it serves.

        Chroma's embedded (persistent) client is not safe for writes from several processes, and
        a process does not see vectors another one added after it opened the library; a Chroma
        server (`casebase.store.host`) is. So with several workers on an embedded library the
        library is only read, and approving a consultation as a case needs `server.workers=1` or
        a Chroma server.
        """
        return self.server.workers == 1 or self.casebase.store.remote

    def review_queue_url(self) -> str:
        # The same default as training runs: one queue that the review app works for both.
        return self.validator.review_queue_url or f"sqlite:///{self.root / 'review_queue.db'}"


def load_serve_config(cfg: DictConfig | dict[str, Any]) -> ServeConfig:
    data = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    assert isinstance(data, dict)
    data.pop("hydra", None)
    try:
        return ServeConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc)) from None


def compose_serve_config(overrides: list[str] | None = None) -> ServeConfig:
    """The config as `python -m environments.serve OVERRIDES...` would compose it (for the CLIs)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(CONF_DIR), version_base=None):
        return load_serve_config(compose("serve", overrides=list(overrides or [])))
