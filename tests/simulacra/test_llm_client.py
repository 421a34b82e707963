"""The LLM client's contract: parsing, repair, fallback classes, backoff, cache, accounting."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from pydantic import BaseModel

from simulacra.llm.accounting import ModelPrice, UsageLedger
from simulacra.llm.cache import ResponseCache
from simulacra.llm.client import BackoffPolicy, ChainLink, LLMClient
from simulacra.llm.errors import ConfigurationError, FailureKind, LLMChainExhausted, LLMError
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers.scripted import ScriptedCall, ScriptedHandlers, ScriptedProvider
from simulacra.llm.types import Completion, CompletionRequest, Task

PROMPTS = Path(__file__).parent / "prompts"


class Answer(BaseModel):
    answer: str
    confidence: float


ANSWER = Task("echo.answer", "v1", Answer)
TEXT = Task("echo.answer", "v1", None)


class SequenceProvider:
    """A provider that plays back a list of outcomes (a Completion text or an LLMError), in order."""

    def __init__(self, name: str, model: str, outcomes: list[str | LLMError]) -> None:
        self.name = name
        self.model = model
        self.outcomes = list(outcomes)
        self.requests: list[CompletionRequest] = []

    async def complete(self, request: CompletionRequest) -> Completion:
        self.requests.append(request)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, LLMError):
            raise outcome
        return Completion(text=outcome, input_tokens=10, output_tokens=5, model=self.model)


class SleepRecorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def client(*links: ChainLink, **kwargs) -> tuple[LLMClient, SleepRecorder]:
    sleeper = SleepRecorder()
    return LLMClient(list(links), PromptLibrary([PROMPTS]), sleep=sleeper, **kwargs), sleeper


GOOD = '{"answer": "yes", "confidence": 0.9}'


async def test_structured_answer_is_parsed_and_accounted() -> None:
    provider = SequenceProvider("openai", "m1", [GOOD])
    ledger = UsageLedger({"m1": ModelPrice(input_per_mtok=1_000_000, output_per_mtok=2_000_000)})
    llm, _ = client(ChainLink(provider), ledger=ledger)
    result = await llm.call(ANSWER, {"subject": "tax", "question": "is it?"})
    assert result.output == Answer(answer="yes", confidence=0.9)
    assert (result.usage.input_tokens, result.usage.output_tokens) == (10, 5)
    assert result.cost_usd == pytest.approx(10 * 1 + 5 * 2)
    assert result.provider == "openai" and result.model == "m1" and not result.cached
    assert ledger.snapshot()["echo.answer@v1"].calls == 1
    sent = provider.requests[0]
    assert sent.messages[0].content == "You answer questions about tax."
    assert sent.variables == {"subject": "tax", "question": "is it?"}


async def test_code_fenced_json_is_accepted() -> None:
    provider = SequenceProvider("openai", "m1", ["```json\n" + GOOD + "\n```"])
    llm, _ = client(ChainLink(provider))
    assert (await llm.call(ANSWER, {"subject": "s", "question": "q"})).output.answer == "yes"


async def test_missing_template_variable_is_a_clear_error() -> None:
    llm, _ = client(ChainLink(SequenceProvider("openai", "m1", [GOOD])))
    with pytest.raises(ConfigurationError, match="question"):
        await llm.call(ANSWER, {"subject": "s"})


async def test_malformed_output_gets_one_repair_then_succeeds() -> None:
    provider = SequenceProvider("openai", "m1", ['{"answer": "yes"', GOOD])
    llm, _ = client(ChainLink(provider, attempts=1))
    result = await llm.call(ANSWER, {"subject": "s", "question": "q"})
    assert result.output.answer == "yes"
    repair = provider.requests[1]
    assert repair.repair_of == '{"answer": "yes"'
    assert [m.role for m in repair.messages] == ["system", "user", "assistant", "user"]
    assert "could not be used" in repair.messages[-1].content


async def test_malformed_twice_falls_through_to_next_link() -> None:
    bad = SequenceProvider("openai", "m1", ["not json", '{"answer": 1}'])
    good = SequenceProvider("anthropic", "m2", [GOOD])
    llm, _ = client(ChainLink(bad, attempts=3), ChainLink(good))
    result = await llm.call(ANSWER, {"subject": "s", "question": "q"})
    assert result.provider == "anthropic"
    assert len(bad.requests) == 2  # the attempt and its one repair, not three retries
    assert result.attempts == 3


async def test_rate_limit_retries_same_link_with_retry_after() -> None:
    provider = SequenceProvider(
        "openai", "m1", [LLMError(FailureKind.RATE_LIMIT, "slow down", retry_after=7.0), GOOD]
    )
    llm, sleeper = client(ChainLink(provider, attempts=2), rng=random.Random(1))
    result = await llm.call(ANSWER, {"subject": "s", "question": "q"})
    assert result.output.answer == "yes"
    assert len(sleeper.delays) == 1 and sleeper.delays[0] >= 7.0


async def test_context_length_skips_to_next_link_without_retrying() -> None:
    first = SequenceProvider("openai", "small", [LLMError(FailureKind.CONTEXT_LENGTH, "too long"), GOOD])
    second = SequenceProvider("openai", "large", [GOOD])
    llm, sleeper = client(ChainLink(first, attempts=3), ChainLink(second))
    result = await llm.call(ANSWER, {"subject": "s", "question": "q"})
    assert result.model == "large"
    assert len(first.requests) == 1 and sleeper.delays == []


async def test_exhausted_chain_raises_with_every_attempt_and_no_content() -> None:
    a = SequenceProvider("openai", "m1", [LLMError(FailureKind.OVERLOADED, "busy")] * 2)
    b = SequenceProvider("anthropic", "m2", [LLMError(FailureKind.TIMEOUT, "slow")])
    llm, sleeper = client(ChainLink(a, attempts=2), ChainLink(b))
    with pytest.raises(LLMChainExhausted) as info:
        await llm.call(ANSWER, {"subject": "s", "question": "q"})
    assert [e.kind for e in info.value.attempts] == [FailureKind.OVERLOADED] * 2 + [FailureKind.TIMEOUT]
    assert "echo.answer@v1" in str(info.value) and "anthropic/m2" in str(info.value)
    assert len(sleeper.delays) == 1


async def test_client_timeout_is_classified() -> None:
    class Slow:
        name, model = "openai", "slow"

        async def complete(self, request: CompletionRequest) -> Completion:
            await asyncio.sleep(5)
            raise AssertionError("unreachable")

    llm, _ = client(ChainLink(Slow(), timeout_s=0.05))
    with pytest.raises(LLMChainExhausted) as info:
        await llm.call(TEXT, {"subject": "s", "question": "q"})
    assert info.value.attempts[0].kind == FailureKind.TIMEOUT


def test_backoff_grows_per_class_and_is_capped() -> None:
    policy = BackoffPolicy(jitter=0.0, cap_s=10.0)
    rng = random.Random(0)
    rate = LLMError(FailureKind.RATE_LIMIT, "x")
    timeout = LLMError(FailureKind.TIMEOUT, "x")
    assert [policy.delay(rate, n, rng) for n in range(4)] == [2.0, 4.0, 8.0, 10.0]
    assert policy.delay(timeout, 0, rng) == 1.0
    jittered = BackoffPolicy(jitter=0.5).delay(rate, 0, random.Random(3))
    assert 1.0 <= jittered <= 3.0


async def test_cache_replays_exactly_without_calling_the_provider(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    first = SequenceProvider("openai", "m1", [GOOD])
    llm, _ = client(ChainLink(first), cache=cache)
    original = await llm.call(ANSWER, {"subject": "s", "question": "q"})
    replay_provider = SequenceProvider("openai", "m1", [])
    replay, _ = client(ChainLink(replay_provider), cache=ResponseCache(tmp_path / "cache.sqlite"))
    again = await replay.call(ANSWER, {"subject": "s", "question": "q"})
    assert again.cached and again.output == original.output and replay_provider.requests == []
    other = SequenceProvider("openai", "m1", [GOOD])
    fresh, _ = client(ChainLink(other), cache=cache)
    await fresh.call(ANSWER, {"subject": "s", "question": "another"})
    assert len(other.requests) == 1  # a different question is a different key


async def test_concurrency_limit_per_provider_is_respected() -> None:
    from simulacra.llm.accounting import ConcurrencyLimiter, ProviderLimits

    active = 0
    peak = 0

    class Counting:
        name, model = "openai", "m"

        async def complete(self, request: CompletionRequest) -> Completion:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.01)
            active -= 1
            return Completion(text="ok", model="m")

    limiter = ConcurrencyLimiter({"openai": ProviderLimits(max_concurrency=3)})
    llm, _ = client(ChainLink(Counting()), limiter=limiter)
    await asyncio.gather(*(llm.call(TEXT, {"subject": "s", "question": str(i)}) for i in range(12)))
    assert peak == 3


def _handlers() -> ScriptedHandlers:
    handlers = ScriptedHandlers()

    def answer(call: ScriptedCall) -> Answer:
        return Answer(answer=f"about {call.variables['subject']}", confidence=round(call.rng.random(), 3))

    handlers.register("echo.answer", answer)
    return handlers


async def test_scripted_provider_answers_from_variables_deterministically() -> None:
    results = []
    for _ in range(2):
        llm, _ = client(ChainLink(ScriptedProvider(_handlers(), seed=5)))
        results.append(await llm.call(ANSWER, {"subject": "tax", "question": "q"}))
    assert results[0].output == results[1].output
    assert results[0].output.answer == "about tax"
    llm, _ = client(ChainLink(ScriptedProvider(_handlers(), seed=6)))
    other_seed = await llm.call(ANSWER, {"subject": "tax", "question": "q"})
    assert other_seed.output.confidence != results[0].output.confidence
    assert results[0].provider == "scripted"


async def test_scripted_provider_unknown_task_is_a_clear_error() -> None:
    llm, _ = client(ChainLink(ScriptedProvider(ScriptedHandlers(), seed=0)))
    with pytest.raises(ConfigurationError, match=r"no handler for task 'echo\.answer'"):
        await llm.call(ANSWER, {"subject": "s", "question": "q"})


async def test_scripted_malformed_output_is_repaired() -> None:
    provider = ScriptedProvider(_handlers(), seed=0, behaviour={"malformed_output": 1.0})
    llm, _ = client(ChainLink(provider))
    result = await llm.call(ANSWER, {"subject": "s", "question": "q"})
    assert result.output.answer == "about s" and result.attempts == 2
