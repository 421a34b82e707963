"""Configuration of the LLM client and the factory that builds it.

These pydantic models are the schema of Hydra's `llm` group: unknown keys and ill-typed values are
rejected with the path of the offending key.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from simulacra.llm.accounting import ConcurrencyLimiter, ModelPrice, ProviderLimits, UsageLedger
from simulacra.llm.cache import ResponseCache
from simulacra.llm.client import BackoffPolicy, ChainLink, LLMClient
from simulacra.llm.errors import ConfigurationError
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers import Provider
from simulacra.llm.providers.scripted import ScriptedHandlers, ScriptedProvider

ProviderName = Literal["scripted", "openai", "anthropic"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ChainLinkConfig(Strict):
    provider: ProviderName
    model: str
    attempts: int = Field(default=1, ge=1, le=10)
    timeout_s: float = Field(default=60.0, gt=0)
    base_url: str | None = None
    # Name of the environment variable holding the key; the key itself never sits in config.
    api_key_env: str | None = None
    structured_mode: Literal["json_schema", "json_object"] = "json_schema"


class ScriptedConfig(Strict):
    """Imperfection rates and rule obedience of the offline stand-in model (see the README)."""

    behaviour: dict[str, float] = Field(default_factory=dict)
    latency_ms: float = Field(default=0.0, ge=0)


class CacheConfig(Strict):
    enabled: bool = False
    path: str = "llm_cache.sqlite"


class LLMConfig(Strict):
    name: str
    chain: list[ChainLinkConfig] = Field(min_length=1)
    scripted: ScriptedConfig = Field(default_factory=ScriptedConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    concurrency: dict[str, int] = Field(
        default_factory=lambda: {"scripted": 256, "openai": 8, "anthropic": 8}
    )
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    temperature: float = Field(default=0.7, ge=0, le=2)
    max_tokens: int = Field(default=800, ge=1)
    backoff: BackoffPolicy = Field(default_factory=BackoffPolicy)


def build_provider(
    link: ChainLinkConfig, *, handlers: ScriptedHandlers, seed: int, scripted: ScriptedConfig
) -> Provider:
    if link.provider == "scripted":
        return ScriptedProvider(
            handlers,
            seed=seed,
            behaviour=scripted.behaviour,
            latency_s=scripted.latency_ms / 1000.0,
            model=link.model,
        )
    import os

    api_key = os.environ.get(link.api_key_env) if link.api_key_env else None
    if link.provider == "openai":
        from simulacra.llm.providers.openai_provider import OpenAIProvider

        return OpenAIProvider(
            link.model,
            api_key=api_key,
            base_url=link.base_url,
            timeout=link.timeout_s,
            structured_mode=link.structured_mode,
        )
    if link.provider == "anthropic":
        from simulacra.llm.providers.anthropic_provider import AnthropicProvider

        return AnthropicProvider(link.model, api_key=api_key, base_url=link.base_url, timeout=link.timeout_s)
    raise ConfigurationError(f"unknown LLM provider '{link.provider}' (choose scripted, openai or anthropic)")


def build_llm_client(
    config: LLMConfig,
    *,
    handlers: ScriptedHandlers,
    prompt_folders: Sequence[Path],
    seed: int,
    cache_dir: Path | None = None,
    ledger: UsageLedger | None = None,
) -> LLMClient:
    chain = [
        ChainLink(
            provider=build_provider(link, handlers=handlers, seed=seed, scripted=config.scripted),
            attempts=link.attempts,
            timeout_s=link.timeout_s,
        )
        for link in config.chain
    ]
    cache = None
    if config.cache.enabled:
        path = Path(config.cache.path)
        if not path.is_absolute() and cache_dir is not None:
            path = cache_dir / path
        cache = ResponseCache(path)
    return LLMClient(
        chain,
        PromptLibrary(prompt_folders),
        cache=cache,
        limiter=ConcurrencyLimiter(
            {k: ProviderLimits(max_concurrency=v) for k, v in config.concurrency.items()}
        ),
        ledger=ledger or UsageLedger(config.prices),
        backoff=config.backoff,
        rng=random.Random(seed),
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        cache_seed=seed,
    )
