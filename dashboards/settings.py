"""Where the dashboards find their stores, who the development reviewer is, and which clock to use.

Read from environment variables with the `PGT_` prefix (`PGT_REVIEW_QUEUE_URL`,
`PGT_TRACKING_URI`, `PGT_CASEBASE_PATH`, `PGT_DEV_REVIEWER`, ...) and then from top-level keys of
Streamlit's secrets without the prefix (`review_queue_url = "..."`), which win: a deployment keeps
its settings in one secrets file, while a test or a shell session points the app at temporary
stores with environment variables alone. The defaults are the training run's defaults
(`paths.root=runs`), so a fresh checkout's first run is what the app opens.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_EXPERIMENT = "pension-guidance-training"


class DashboardSettings(BaseSettings):
    """The dashboards' configuration; every field has a default that fits a fresh checkout."""

    model_config = SettingsConfigDict(env_prefix="PGT_", extra="ignore", case_sensitive=False, frozen=True)

    review_queue_url: str = "sqlite:///runs/review_queue.db"
    tracking_uri: str = "sqlite:///runs/mlflow.db"
    experiment: str = DEFAULT_EXPERIMENT
    # Experiments searched for a consultation's trace (training runs and the live endpoint);
    # empty means `experiment` alone.
    trace_experiments: list[str] = Field(default_factory=list)
    # The case and rules library that approved replies are added to: a folder for Chroma's
    # embedded store, or a Chroma server when `casebase_host` is set.
    casebase_path: Path = Path("runs/library")
    casebase_host: str | None = None
    casebase_port: int = Field(default=8000, ge=1, le=65535)
    # The library's embedder must be the one that filled it (the store refuses any other).
    embedder: Literal["hashing", "minilm", "openai"] = "minilm"
    embedder_dimension: int = Field(default=384, ge=8)
    # Rejected replies, one reviewed failure a line, for the training loop's rule accumulation.
    failures_path: Path = Path("runs/review_failures.jsonl")
    # How far the learning feedback has followed the queue's outcomes (a cursor file).
    feedback_cursor_path: Path = Path("runs/review_feedback_cursor.json")
    # The reviewer's name when no OIDC login is configured (development only).
    dev_reviewer: str | None = None
    # A fixed "now" for the review queue (demos and tests); None means the wall clock.
    review_clock_now: datetime | None = None
    lease_seconds: float = Field(default=900.0, gt=0)

    @field_validator("dev_reviewer")
    @classmethod
    def _named(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if not value:
            return None
        if len(value) > 128:
            raise ValueError("dev_reviewer must be at most 128 characters")
        return value

    @property
    def trace_experiment_names(self) -> list[str]:
        return list(self.trace_experiments) or [self.experiment]


def load_settings(secrets: Mapping[str, Any] | None = None) -> DashboardSettings:
    """Settings from the environment, overridden by any matching top-level secret."""
    overrides = {
        key: value
        for key, value in (secrets or {}).items()
        if key in DashboardSettings.model_fields and not isinstance(value, Mapping)
    }
    return DashboardSettings(**overrides)
