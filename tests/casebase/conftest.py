"""Fixtures for the casebase tests: a virtual clock, a hashing embedder, a scripted LLM, real Chroma."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from casebase.config import CasebaseConfig, StoreConfig
from casebase.factory import Bases, open_bases
from casebase.scripted import register_casebase_handlers
from casebase.tasks import PROMPTS_DIR
from simulacra.clock import VirtualClock
from simulacra.embeddings.base import Embedder
from simulacra.embeddings.factory import build_embedder
from simulacra.llm.client import ChainLink, LLMClient
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers.scripted import ScriptedHandlers, ScriptedProvider

START = datetime(2026, 4, 6, 9, 0, tzinfo=UTC)


def scripted_llm(seed: int = 0, behaviour: dict[str, float] | None = None) -> LLMClient:
    handlers = ScriptedHandlers()
    register_casebase_handlers(handlers)
    provider = ScriptedProvider(handlers, seed=seed, behaviour=behaviour)
    return LLMClient([ChainLink(provider)], PromptLibrary([PROMPTS_DIR]))


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(START)


DIMENSION = 64  # small keeps the tests fast; the hashing embedder is deterministic at any size


@pytest.fixture
def embedder() -> Embedder:
    return build_embedder("hashing", dimension=DIMENSION)


@pytest.fixture
def llm() -> LLMClient:
    return scripted_llm()


@pytest.fixture
def config(tmp_path: Path) -> CasebaseConfig:
    return CasebaseConfig(store=StoreConfig(path=tmp_path / "bases"))


@pytest.fixture
def bases(config: CasebaseConfig, embedder: Embedder, clock: VirtualClock, llm: LLMClient) -> Bases:
    return open_bases(config, embedder, clock, llm)
