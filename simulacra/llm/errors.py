"""LLM failure classes.

Providers translate their SDK's exceptions into these so the fallback chain can choose a backoff
per class without knowing any vendor.
"""

from __future__ import annotations

from enum import StrEnum


class FailureKind(StrEnum):
    RATE_LIMIT = "rate_limit"
    TIMEOUT = "timeout"
    CONTEXT_LENGTH = "context_length"
    OVERLOADED = "overloaded"
    BAD_OUTPUT = "bad_output"
    AUTH = "auth"
    CONNECTION = "connection"
    OTHER = "other"


class LLMError(Exception):
    """A classified failure of one provider attempt."""

    def __init__(
        self,
        kind: FailureKind,
        message: str,
        *,
        provider: str = "",
        model: str = "",
        retry_after: float | None = None,
        raw_output: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.provider = provider
        self.model = model
        self.retry_after = retry_after
        self.raw_output = raw_output

    def __str__(self) -> str:
        # Built on demand: the client fills in provider and model when a provider left them out.
        where = f" {self.provider}/{self.model}:" if self.provider else ""
        return f"[{self.kind}]{where} {self.message}"


class LLMChainExhausted(Exception):
    """Every link of the fallback chain failed; carries each attempt's error so nothing is hidden."""

    def __init__(self, task: str, attempts: list[LLMError]) -> None:
        lines = "\n".join(f"  - {a}" for a in attempts)
        super().__init__(f"LLM task '{task}' failed on every provider in the fallback chain:\n{lines}")
        self.task = task
        self.attempts = attempts


class ConfigurationError(Exception):
    """A provider cannot be built as configured (unknown provider, missing API key, bad option)."""
