"""The OpenAI and Anthropic providers, driving the real SDKs against the local wire-format server."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel, Field

from simulacra.llm.errors import ConfigurationError, FailureKind, LLMError
from simulacra.llm.providers import Provider
from simulacra.llm.providers.anthropic_provider import AnthropicProvider
from simulacra.llm.providers.openai_provider import (
    LOCAL_SERVER_KEY,
    OpenAIProvider,
    is_local_url,
    retry_after_seconds,
    strict_json_schema,
)
from simulacra.llm.types import CompletionRequest, Message
from tests.fakes.llm_server import (
    FakeLLMServer,
    Reply,
    context_length_exceeded,
    empty_reply,
    hang,
    http_error,
    malformed_json,
    ok_structured,
    ok_text,
    overloaded,
    rate_limited,
    server_error,
    service_unavailable,
    unauthorized,
)

# Generous for replies the server gives at once (a loaded 2-core machine must not turn them into
# timeouts); short only where a timeout is the point of the test.
CLIENT_TIMEOUT_S = 5.0
SHORT_TIMEOUT_S = 0.3


class Pot(BaseModel):
    kind: str
    value_gbp: float


class Verdict(BaseModel):
    """A judge's ruling on one advisor utterance."""

    compliant: bool
    codes: list[str] = Field(default_factory=list, description="violation codes")
    note: str | None = None
    pot: Pot | None = None


class Tally(BaseModel):
    counts: dict[str, int]  # an open object: strict Structured Outputs cannot express it


SYSTEM = Message(role="system", content="You are a careful compliance judge.")
USER = Message(role="user", content="Is 'you should transfer your DB pension' compliant?")


def make_request(output: type[BaseModel] | None = None, **changes: object) -> CompletionRequest:
    fields: dict[str, object] = {
        "task": "judge",
        "task_version": "v1",
        "variables": {"utterance": "..."},
        "messages": [SYSTEM, USER],
        "output_schema": output,
        "temperature": 0.2,
        "max_tokens": 321,
    }
    fields.update(changes)
    return CompletionRequest(**fields)


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def build(
    vendor: str, server: FakeLLMServer, timeout: float = CLIENT_TIMEOUT_S
) -> OpenAIProvider | AnthropicProvider:
    if vendor == "openai":
        return OpenAIProvider("gpt-test", api_key="sk-test", base_url=server.openai_base_url, timeout=timeout)
    return AnthropicProvider("claude-test", api_key="sk-ant-test", base_url=server.base_url, timeout=timeout)


@pytest.fixture
async def openai_provider(llm_server: FakeLLMServer) -> AsyncIterator[OpenAIProvider]:
    provider = build("openai", llm_server)
    assert isinstance(provider, OpenAIProvider)
    yield provider
    await provider.aclose()


@pytest.fixture
async def anthropic_provider(llm_server: FakeLLMServer) -> AsyncIterator[AnthropicProvider]:
    provider = build("anthropic", llm_server)
    assert isinstance(provider, AnthropicProvider)
    yield provider
    await provider.aclose()


@pytest.fixture(params=["openai", "anthropic"])
async def provider(
    request: pytest.FixtureRequest, llm_server: FakeLLMServer
) -> AsyncIterator[OpenAIProvider | AnthropicProvider]:
    """Each vendor in turn, so every failure class is checked against both SDKs."""
    provider = build(request.param, llm_server)
    yield provider
    await provider.aclose()


async def failure_of(provider: Provider, request: CompletionRequest) -> LLMError:
    with pytest.raises(LLMError) as caught:
        await provider.complete(request)
    return caught.value


# --- OpenAI ------------------------------------------------------------------------------------------


async def test_openai_text_completion_sends_messages_and_reports_usage(
    llm_server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    llm_server.enqueue(ok_text("It is a personal recommendation.", input_tokens=57, output_tokens=9))
    completion = await openai_provider.complete(make_request())

    assert completion.text == "It is a personal recommendation."
    assert (completion.input_tokens, completion.output_tokens) == (57, 9)
    assert completion.model == "gpt-test"
    [sent] = llm_server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "gpt-test"
    assert sent.body["messages"] == [
        {"role": "system", "content": SYSTEM.content},
        {"role": "user", "content": USER.content},
    ]
    assert sent.body["temperature"] == 0.2
    assert sent.body["max_tokens"] == 321  # compatible servers all understand max_tokens
    assert "response_format" not in sent.body
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["x-stainless-retry-count"] == "0"


async def test_openai_structured_completion_uses_strict_json_schema(
    llm_server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    answer = {"compliant": False, "codes": ["PERSONAL_RECOMMENDATION"], "note": None, "pot": None}
    llm_server.enqueue(ok_structured(answer))
    completion = await openai_provider.complete(make_request(Verdict))

    assert Verdict.model_validate_json(completion.text) == Verdict.model_validate(answer)
    response_format = llm_server.requests[0].body["response_format"]
    assert response_format["type"] == "json_schema"
    spec = response_format["json_schema"]
    assert spec["name"] == "Verdict"
    assert spec["strict"] is True
    schema = spec["schema"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["compliant", "codes", "note", "pot"]
    assert '"default"' not in json.dumps(schema)  # strict mode rejects `default`
    assert schema["properties"]["pot"] == {"anyOf": [{"$ref": "#/$defs/Pot"}, {"type": "null"}]}
    assert schema["$defs"]["Pot"]["additionalProperties"] is False
    assert schema["$defs"]["Pot"]["required"] == ["kind", "value_gbp"]


async def test_openai_schema_strict_mode_cannot_express_is_sent_non_strict(
    llm_server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    llm_server.enqueue(ok_structured({"counts": {"a": 1}}))
    completion = await openai_provider.complete(make_request(Tally))

    assert Tally.model_validate_json(completion.text).counts == {"a": 1}
    spec = llm_server.requests[0].body["response_format"]["json_schema"]
    assert spec["strict"] is False
    assert spec["schema"] == Tally.model_json_schema()


async def test_openai_json_object_mode_sends_schema_inline_for_llama_cpp(llm_server: FakeLLMServer) -> None:
    provider = OpenAIProvider(
        "local-gguf",
        base_url=llm_server.openai_base_url,
        timeout=CLIENT_TIMEOUT_S,
        structured_mode="json_object",
        api_key="unused",
    )
    llm_server.enqueue(ok_structured({"compliant": True}))
    completion = await provider.complete(make_request(Verdict))
    await provider.aclose()

    assert Verdict.model_validate_json(completion.text).compliant is True
    assert llm_server.requests[0].body["response_format"] == {
        "type": "json_object",
        "schema": Verdict.model_json_schema(),
    }


async def test_openai_extra_headers_reach_the_server(llm_server: FakeLLMServer) -> None:
    provider = OpenAIProvider(
        "m",
        api_key="k",
        base_url=llm_server.openai_base_url,
        timeout=CLIENT_TIMEOUT_S,
        extra_headers={"X-Title": "pension-trainer"},
    )
    await provider.complete(make_request())
    await provider.aclose()
    assert llm_server.requests[0].headers["x-title"] == "pension-trainer"


@pytest.mark.usefixtures("no_keys")
def test_openai_official_api_gets_max_completion_tokens() -> None:
    # OpenAI deprecates max_tokens (its reasoning models reject it); no request is sent here.
    official = OpenAIProvider("gpt-test", api_key="sk-test")
    params = official.request_params(make_request())
    assert params["max_completion_tokens"] == 321
    assert "max_tokens" not in params


async def test_openai_returns_malformed_structured_text_for_the_client_to_repair(
    llm_server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    llm_server.enqueue(malformed_json('{"compliant": tru'))
    completion = await openai_provider.complete(make_request(Verdict))
    assert completion.text == '{"compliant": tru'


async def test_openai_sends_repair_messages_as_given(
    llm_server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    repair = [
        SYSTEM,
        USER,
        Message(role="assistant", content='{"compliant": tru'),
        Message(role="user", content="Your answer was not valid JSON: Expecting value. Answer again."),
    ]
    await openai_provider.complete(make_request(Verdict, messages=repair, repair_of='{"compliant": tru'))
    assert [m["role"] for m in llm_server.requests[0].body["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
    ]


# --- Anthropic ---------------------------------------------------------------------------------------


async def test_anthropic_text_completion_moves_system_out_of_messages(
    llm_server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    llm_server.enqueue(ok_text("Not compliant.", input_tokens=44, output_tokens=3))
    completion = await anthropic_provider.complete(make_request())

    assert completion.text == "Not compliant."
    assert (completion.input_tokens, completion.output_tokens) == (44, 3)
    assert completion.model == "claude-test"
    [sent] = llm_server.requests
    assert sent.path == "/v1/messages"
    assert sent.body["system"] == SYSTEM.content
    assert sent.body["messages"] == [{"role": "user", "content": USER.content}]
    assert sent.body["max_tokens"] == 321
    assert "tools" not in sent.body
    # API version 2026-10-21 rejects sampling parameters, so none is sent.
    assert not {"temperature", "top_p", "top_k"} & set(sent.body)
    assert sent.headers["anthropic-version"] == "2026-10-21"
    assert sent.headers["x-stainless-retry-count"] == "0"


async def test_anthropic_joins_several_system_messages(
    llm_server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    extra = Message(role="system", content="Answer briefly.")
    await anthropic_provider.complete(make_request(messages=[SYSTEM, extra, USER]))
    assert llm_server.requests[0].body["system"] == f"{SYSTEM.content}\n\n{extra.content}"


async def test_anthropic_structured_completion_forces_one_tool(
    llm_server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    answer = {"compliant": True, "codes": [], "pot": {"kind": "DC", "value_gbp": 42000.0}}
    llm_server.enqueue(ok_structured(answer))
    completion = await anthropic_provider.complete(make_request(Verdict))

    assert Verdict.model_validate_json(completion.text) == Verdict.model_validate(answer)
    body = llm_server.requests[0].body
    [tool] = body["tools"]
    assert tool["name"] == "Verdict"
    assert tool["input_schema"] == Verdict.model_json_schema()
    assert tool["description"] == "A judge's ruling on one advisor utterance."
    assert body["tool_choice"] == {"type": "tool", "name": "Verdict"}


async def test_anthropic_reply_without_tool_use_is_bad_output(
    llm_server: FakeLLMServer, anthropic_provider: AnthropicProvider
) -> None:
    llm_server.enqueue(malformed_json("I think it is compliant."))
    error = await failure_of(anthropic_provider, make_request(Verdict))
    assert error.kind is FailureKind.BAD_OUTPUT
    assert error.raw_output == "I think it is compliant."


# --- failure classification, both vendors ------------------------------------------------------------


QUOTA_EXHAUSTED = http_error(
    429, "You exceeded your current quota", openai_code="insufficient_quota", anthropic_type="billing_error"
)


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        pytest.param(overloaded(), FailureKind.OVERLOADED, id="529"),
        pytest.param(server_error(), FailureKind.OVERLOADED, id="500"),
        pytest.param(service_unavailable(), FailureKind.OVERLOADED, id="503"),
        pytest.param(http_error(502, "Bad gateway"), FailureKind.OVERLOADED, id="502"),
        pytest.param(http_error(504, "Gateway timeout"), FailureKind.TIMEOUT, id="504"),
        pytest.param(context_length_exceeded(), FailureKind.CONTEXT_LENGTH, id="context-length"),
        pytest.param(unauthorized(), FailureKind.AUTH, id="401"),
        pytest.param(
            http_error(403, "forbidden", anthropic_type="permission_error"), FailureKind.AUTH, id="403"
        ),
        pytest.param(QUOTA_EXHAUSTED, FailureKind.AUTH, id="quota"),
        pytest.param(
            http_error(400, "messages: field required", anthropic_type="invalid_request_error"),
            FailureKind.OTHER,
            id="400-other",
        ),
        pytest.param(
            http_error(404, "model not found", anthropic_type="not_found_error"), FailureKind.OTHER, id="404"
        ),
        pytest.param(empty_reply(), FailureKind.BAD_OUTPUT, id="empty"),
    ],
)
async def test_failures_are_classified(
    llm_server: FakeLLMServer, provider: OpenAIProvider | AnthropicProvider, reply: Reply, kind: FailureKind
) -> None:
    llm_server.enqueue(reply)
    error = await failure_of(provider, make_request())
    assert error.kind is kind
    assert (error.provider, error.model) == (provider.name, provider.model)


@pytest.mark.parametrize(
    ("reply", "seconds"),
    [
        (rate_limited(retry_after=2.5), 2.5),
        (rate_limited(retry_after=None, retry_after_ms=1500), 1.5),
        (rate_limited(retry_after=30, retry_after_ms=250), 0.25),  # the finer header wins
        (rate_limited(retry_after=None), None),
    ],
)
async def test_rate_limit_carries_retry_after(
    llm_server: FakeLLMServer,
    provider: OpenAIProvider | AnthropicProvider,
    reply: Reply,
    seconds: float | None,
) -> None:
    llm_server.enqueue(reply)
    error = await failure_of(provider, make_request())
    assert error.kind is FailureKind.RATE_LIMIT
    assert error.retry_after == seconds
    assert len(llm_server.requests) == 1  # the SDK did not retry on its own


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_slow_server_is_a_timeout_within_the_client_timeout(
    llm_server: FakeLLMServer, vendor: str
) -> None:
    provider = build(vendor, llm_server, timeout=SHORT_TIMEOUT_S)
    llm_server.enqueue(hang(5.0))
    started = time.monotonic()
    error = await failure_of(provider, make_request())
    elapsed = time.monotonic() - started
    await provider.aclose()
    assert error.kind is FailureKind.TIMEOUT
    assert SHORT_TIMEOUT_S * 0.9 <= elapsed < SHORT_TIMEOUT_S + 1.5
    assert len(llm_server.requests) == 1


async def test_unreachable_server_is_a_connection_failure() -> None:
    with FakeLLMServer() as server:
        root = server.base_url  # a port that was free a moment ago and is closed now
    providers = [
        OpenAIProvider("m", api_key="k", base_url=f"{root}/v1", timeout=CLIENT_TIMEOUT_S),
        AnthropicProvider("c", api_key="k", base_url=root, timeout=CLIENT_TIMEOUT_S),
    ]
    for provider in providers:
        error = await failure_of(provider, make_request())
        assert error.kind is FailureKind.CONNECTION, provider.name
        await provider.aclose()


# --- configuration -----------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_keys")
@pytest.mark.parametrize("base_url", [None, "https://api.openai.com/v1", "https://llm.example.com/v1"])
def test_openai_without_key_names_the_variable(base_url: str | None) -> None:
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIProvider("gpt-test", base_url=base_url)


@pytest.mark.usefixtures("no_keys")
async def test_openai_local_server_needs_no_key(llm_server: FakeLLMServer) -> None:
    provider = OpenAIProvider("qwen", base_url=llm_server.openai_base_url, timeout=CLIENT_TIMEOUT_S)
    completion = await provider.complete(make_request())
    await provider.aclose()
    assert completion.text == "ok"  # the server's default reply
    assert llm_server.requests[0].headers["authorization"] == f"Bearer {LOCAL_SERVER_KEY}"


async def test_openai_key_from_environment(no_keys: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> None:
    no_keys.setenv("OPENAI_API_KEY", "sk-from-env")
    provider = OpenAIProvider("m", base_url=llm_server.openai_base_url, timeout=CLIENT_TIMEOUT_S)
    await provider.complete(make_request())
    await provider.aclose()
    assert llm_server.requests[0].headers["authorization"] == "Bearer sk-from-env"


@pytest.mark.usefixtures("no_keys")
def test_anthropic_without_key_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        AnthropicProvider("claude-test", base_url="http://127.0.0.1:9")


async def test_anthropic_key_from_environment(no_keys: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> None:
    no_keys.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    provider = AnthropicProvider("c", base_url=llm_server.base_url, timeout=CLIENT_TIMEOUT_S)
    await provider.complete(make_request())
    await provider.aclose()
    assert llm_server.requests[0].headers["authorization"] == "Bearer sk-ant-env"


def test_unknown_structured_mode_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="structured_mode"):
        OpenAIProvider("m", api_key="k", structured_mode="grammar")  # type: ignore[arg-type]


def test_providers_satisfy_the_protocol() -> None:
    assert isinstance(OpenAIProvider("m", api_key="k"), Provider)
    assert isinstance(AnthropicProvider("c", api_key="k"), Provider)


# --- pure helpers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://localhost:8000/v1", True),
        ("http://127.0.0.1:11434/v1", True),
        ("http://[::1]:8080/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://vllm:8000/v1", True),  # a docker-compose service name
        ("http://gpu-box.local:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://openrouter.ai/api/v1", False),
        ("http://8.8.8.8/v1", False),
    ],
)
def test_is_local_url(url: str, local: bool) -> None:
    assert is_local_url(url) is local


def test_retry_after_parses_http_dates_and_ignores_garbage() -> None:
    now = datetime(2025, 1, 6, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds({"retry-after": "Mon, 06 Jan 2025 12:00:07 GMT"}, now=now) == 7.0
    assert retry_after_seconds({"retry-after": "Mon, 06 Jan 2025 11:59:00 GMT"}, now=now) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}, now=now) is None
    assert retry_after_seconds({"retry-after": "-3"}, now=now) is None
    assert retry_after_seconds({}, now=now) is None


def test_strict_schema_keeps_optional_fields_nullable_and_leaves_input_untouched() -> None:
    original = Verdict.model_json_schema()
    before = json.dumps(original, sort_keys=True)
    strict = strict_json_schema(original)

    assert strict is not None
    assert json.dumps(original, sort_keys=True) == before
    assert {"type": "null"} in strict["properties"]["note"]["anyOf"]
    assert strict["properties"]["codes"] == {
        "description": "violation codes",
        "items": {"type": "string"},
        "title": "Codes",
        "type": "array",
    }


def test_strict_schema_inlines_refs_that_carry_sibling_keywords() -> None:
    class Holder(BaseModel):
        pot: Pot = Field(description="the main pot")

    strict = strict_json_schema(Holder.model_json_schema())

    assert strict is not None
    pot = strict["properties"]["pot"]
    assert "$ref" not in pot
    assert pot["description"] == "the main pot"
    assert pot["additionalProperties"] is False
    assert pot["required"] == ["kind", "value_gbp"]


def test_strict_schema_refuses_constraints_strict_mode_lacks() -> None:
    class Bounded(BaseModel):
        name: str = Field(max_length=20)

    assert strict_json_schema(Bounded.model_json_schema()) is None
    assert strict_json_schema(Tally.model_json_schema()) is None


# --- the fake server itself (the fallback-chain tests rely on it) ------------------------------------


async def test_server_consumes_the_queue_in_order_then_falls_back_to_the_default(
    llm_server: FakeLLMServer, openai_provider: OpenAIProvider
) -> None:
    llm_server.default = ok_text("default answer")
    llm_server.enqueue(server_error(), ok_text("second"))
    assert llm_server.pending == 2

    first = await failure_of(openai_provider, make_request())
    second = await openai_provider.complete(make_request())
    third = await openai_provider.complete(make_request())

    assert first.kind is FailureKind.OVERLOADED
    assert (second.text, third.text) == ("second", "default answer")
    assert llm_server.pending == 0
    assert len(llm_server.requests) == 3
    llm_server.reset()
    assert llm_server.requests == []


async def test_server_stops_promptly_while_a_request_hangs() -> None:
    with FakeLLMServer() as server:
        provider = OpenAIProvider("m", api_key="k", base_url=server.openai_base_url, timeout=SHORT_TIMEOUT_S)
        server.enqueue(hang(30.0))
        await failure_of(provider, make_request())
        await provider.aclose()
        started = time.monotonic()
    assert time.monotonic() - started < 1.0


def test_server_answers_unknown_routes_with_404_and_records_them(llm_server: FakeLLMServer) -> None:
    llm_server.enqueue(ok_text("kept for the next completion"))
    request = urllib.request.Request(
        f"{llm_server.openai_base_url}/embeddings", data=b'{"input": "x"}', method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=2)
    assert caught.value.code == 404
    assert [r.path for r in llm_server.requests] == ["/v1/embeddings"]
    assert llm_server.requests[0].body == {"input": "x"}
    assert llm_server.pending == 1
