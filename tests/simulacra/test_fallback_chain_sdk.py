"""The fallback chain, for real: the official SDKs against a wire-format server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from simulacra.llm.client import BackoffPolicy
from simulacra.llm.config import LLMConfig, build_llm_client
from simulacra.llm.errors import ConfigurationError, FailureKind, LLMChainExhausted
from simulacra.llm.providers.scripted import ScriptedHandlers
from simulacra.llm.types import Task
from tests.fakes.llm_server import (
    FakeLLMServer,
    hang,
    malformed_json,
    ok_structured,
    overloaded,
    rate_limited,
    server_error,
)

PROMPTS = Path(__file__).parent / "prompts"


class Answer(BaseModel):
    answer: str
    confidence: float


ANSWER = Task("echo.answer", "v1", Answer)
VARS = {"subject": "pensions", "question": "what is drawdown?"}
FAST = BackoffPolicy(base_s=dict.fromkeys(FailureKind, 0.01), cap_s=0.05)


def chain_config(server: FakeLLMServer, *links: dict) -> LLMConfig:
    resolved = []
    for link in links:
        base = server.openai_base_url if link["provider"] == "openai" else server.base_url
        resolved.append({"timeout_s": 2.0, "api_key_env": "FAKE_LLM_KEY", "base_url": base, **link})
    return LLMConfig(name="test", chain=resolved, backoff=FAST, prices={"gpt-a": {"input_per_mtok": 1.0}})


@pytest.fixture(autouse=True)
def fake_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-test-key")


def client_for(config: LLMConfig):
    return build_llm_client(config, handlers=ScriptedHandlers(), prompt_folders=[PROMPTS], seed=0)


async def test_rate_limit_then_success_on_the_same_model(llm_server: FakeLLMServer) -> None:
    llm_server.enqueue(rate_limited(retry_after=0.01), ok_structured({"answer": "a", "confidence": 0.5}))
    config = chain_config(llm_server, {"provider": "openai", "model": "gpt-a", "attempts": 2})
    result = await client_for(config).call(ANSWER, VARS)
    assert result.output == Answer(answer="a", confidence=0.5)
    assert result.provider == "openai" and result.attempts == 2
    assert result.usage.input_tokens == 21 and result.cost_usd == pytest.approx(21 / 1_000_000)
    assert [r.wire for r in llm_server.requests] == ["openai", "openai"]
    sent = llm_server.requests[-1].body
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["messages"][0] == {"role": "system", "content": "You answer questions about pensions."}


async def test_malformed_output_is_repaired_once_then_falls_to_the_other_vendor(
    llm_server: FakeLLMServer,
) -> None:
    llm_server.enqueue(
        malformed_json(),
        ok_structured({"wrong": "fields"}),
        ok_structured({"answer": "from claude", "confidence": 0.8}),
    )
    config = chain_config(
        llm_server,
        {"provider": "openai", "model": "gpt-a", "attempts": 3},
        {"provider": "anthropic", "model": "claude-b"},
    )
    result = await client_for(config).call(ANSWER, VARS)
    assert result.provider == "anthropic" and result.output.answer == "from claude"
    openai_requests = [r for r in llm_server.requests if r.wire == "openai"]
    assert len(openai_requests) == 2  # the attempt and one repair, not three retries
    repair_messages = openai_requests[1].body["messages"]
    assert (
        repair_messages[-2]["role"] == "assistant" and "could not be used" in repair_messages[-1]["content"]
    )
    anthropic_body = llm_server.requests[-1].body
    assert anthropic_body["tool_choice"]["type"] == "tool"
    assert anthropic_body["system"] == "You answer questions about pensions."


async def test_server_errors_move_to_the_secondary_model(llm_server: FakeLLMServer) -> None:
    llm_server.enqueue(server_error(), overloaded(), ok_structured({"answer": "b", "confidence": 1.0}))
    config = chain_config(
        llm_server,
        {"provider": "openai", "model": "gpt-a", "attempts": 2},
        {"provider": "openai", "model": "gpt-big"},
    )
    result = await client_for(config).call(ANSWER, VARS)
    assert result.model == "gpt-big" and result.attempts == 3


async def test_timeout_falls_through_and_exhaustion_reports_every_class(llm_server: FakeLLMServer) -> None:
    llm_server.enqueue(hang(3.0), overloaded())
    config = chain_config(
        llm_server,
        {"provider": "openai", "model": "gpt-a", "timeout_s": 0.3},
        {"provider": "anthropic", "model": "claude-b"},
    )
    with pytest.raises(LLMChainExhausted) as info:
        await client_for(config).call(ANSWER, VARS)
    assert [e.kind for e in info.value.attempts] == [FailureKind.TIMEOUT, FailureKind.OVERLOADED]
    assert "openai/gpt-a" in str(info.value) and "anthropic/claude-b" in str(info.value)


def test_missing_api_key_for_a_real_provider_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = LLMConfig(
        name="t", chain=[{"provider": "openai", "model": "gpt-a", "api_key_env": "OPENAI_API_KEY"}]
    )
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        client_for(config)
