"""The provider-neutral LLM client: tasks in, parsed answers out, through a fallback chain.

A call renders the task's versioned template with structured variables, then walks the chain
(primary, retries of it, a secondary model, another vendor). Failures are classified; each class
gets its own jittered exponential backoff; context-length and auth failures skip straight to the
next link because retrying cannot help; malformed structured output gets one repair attempt
before falling through. A call that exhausts the chain raises `LLMChainExhausted`: it never
returns made-up content.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from simulacra.llm.accounting import ConcurrencyLimiter, UsageLedger
from simulacra.llm.cache import ResponseCache, cache_key
from simulacra.llm.encoding import EncodedVariables
from simulacra.llm.errors import FailureKind, LLMChainExhausted, LLMError
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers import Provider
from simulacra.llm.types import Completion, CompletionRequest, LLMResult, Message, Task, Usage

REPAIR_INSTRUCTION = (
    "Your previous answer could not be used: {error}\n"
    "Answer again with only a JSON object that matches the required schema, and nothing else."
)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
# Retrying the same model cannot fix these: move to the next link at once.
_SKIP_LINK = {FailureKind.CONTEXT_LENGTH, FailureKind.AUTH}


class BackoffPolicy(BaseModel):
    """Per-class exponential backoff: delay = min(cap, base * 2**retry) * uniform(1-j, 1+j)."""

    base_s: dict[FailureKind, float] = Field(
        default_factory=lambda: {
            FailureKind.RATE_LIMIT: 2.0,
            FailureKind.OVERLOADED: 2.0,
            FailureKind.TIMEOUT: 1.0,
            FailureKind.CONNECTION: 0.5,
            FailureKind.OTHER: 0.5,
        }
    )
    cap_s: float = 30.0
    jitter: float = Field(default=0.5, ge=0.0, lt=1.0)

    def delay(self, error: LLMError, retry: int, rng: random.Random) -> float:
        base = self.base_s.get(error.kind, 0.5)
        delay = min(self.cap_s, base * (2**retry)) * rng.uniform(1 - self.jitter, 1 + self.jitter)
        if error.retry_after is not None:
            # The server said when; honour it, but never beyond our cap.
            delay = max(delay, min(self.cap_s, error.retry_after))
        return delay


@dataclass(frozen=True)
class ChainLink:
    provider: Provider
    attempts: int = 1
    timeout_s: float | None = None


class PreparedVariables:
    """A call's variables converted to plain JSON data once, for the same call to several clients.

    A judge panel sends one set of variables to each judge's client. Converting them and rendering
    a template cost more than a scripted answer, so the conversion happens once here and each
    rendering is kept by template file: judges whose libraries resolve the same file share it.
    The result is exactly what each client would have produced from the raw variables.
    """

    def __init__(self, variables: dict[str, Any]) -> None:
        self.data: dict[str, Any] = to_jsonable(variables)
        # Their JSON text, shared the same way: each judge's seed and cache key reuse it.
        self.encoded = EncodedVariables(self.data)
        self._rendered: dict[tuple[str, Path], list[Message]] = {}

    def messages(self, prompts: PromptLibrary, task: Task) -> list[Message]:
        key = (task.key, prompts.source_of(task))
        if key not in self._rendered:
            self._rendered[key] = prompts.render(task, self.data, self.encoded)
        return self._rendered[key]


def to_jsonable(value: Any) -> Any:
    """Variables travel as plain JSON data (the scripted provider and the cache key read them).

    Models become their JSON dump, sets and tuples lists, anything else its `str`. One pass
    through the C JSON encoder and decoder: walking the (often large, mostly plain) variables in
    Python cost more than the rest of a scripted call.
    """
    try:
        return json.loads(json.dumps(value, default=_jsonable_leaf, allow_nan=True))
    except TypeError:
        # A dict key the encoder will not write (an object, a tuple): write it as its `str`.
        return _walk(value)


def _jsonable_leaf(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset):
        return list(value)
    return str(value)


def _walk(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {_key(k): _walk(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_walk(v) for v in value]
    return to_jsonable(value)


def _key(key: Any) -> str:
    # As the encoder writes the keys it accepts (1 -> "1", True -> "true"), so both paths agree.
    if isinstance(key, str):
        return str.__str__(key)
    if isinstance(key, int | float | bool) or key is None:
        return json.dumps(key)
    return str(key)


def parse_output(task: Task, completion: Completion, provider: str) -> Any:
    if task.output is None:
        return completion.text
    text = completion.text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        return task.output.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "answer"
        raise LLMError(
            FailureKind.BAD_OUTPUT,
            f"output does not match {task.output.__name__} ({where}: {first.get('msg')})",
            provider=provider,
            model=completion.model,
            raw_output=completion.text,
        ) from exc


class LLMClient:
    def __init__(
        self,
        chain: list[ChainLink],
        prompts: PromptLibrary,
        *,
        cache: ResponseCache | None = None,
        limiter: ConcurrencyLimiter | None = None,
        ledger: UsageLedger | None = None,
        backoff: BackoffPolicy | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        temperature: float = 0.7,
        max_tokens: int = 1024,
        cache_seed: int | None = None,
    ) -> None:
        if not chain:
            raise ValueError("an LLM client needs at least one provider in its chain")
        self.chain = chain
        self.prompts = prompts
        self.cache = cache
        self.limiter = limiter or ConcurrencyLimiter()
        self.ledger = ledger or UsageLedger()
        self.backoff = backoff or BackoffPolicy()
        # Backoff jitter only; it never influences answers, so it does not break determinism.
        self._rng = rng or random.Random(0)
        self._sleep = sleep
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._cache_seed = cache_seed

    @property
    def providers(self) -> list[str]:
        return [f"{link.provider.name}/{link.provider.model}" for link in self.chain]

    @property
    def is_scripted(self) -> bool:
        return any(link.provider.name == "scripted" for link in self.chain)

    async def call(
        self,
        task: Task,
        variables: dict[str, Any] | PreparedVariables,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> LLMResult:
        if isinstance(variables, PreparedVariables):
            data, encoded = variables.data, variables.encoded
            messages = variables.messages(self.prompts, task)
        else:
            data = to_jsonable(variables)
            # Encoded once for the template, the scripted seed and the cache key alike.
            encoded = EncodedVariables(data)
            messages = self.prompts.render(task, data, encoded)
        request = CompletionRequest(
            task=task.name,
            task_version=task.version,
            variables=data,
            messages=messages,
            output_schema=task.output,
            temperature=self.temperature if temperature is None else temperature,
            max_tokens=self.max_tokens if max_tokens is None else max_tokens,
        ).with_encoded(encoded)
        failures: list[LLMError] = []
        total_attempts = 0
        for link in self.chain:
            result, attempts = await self._try_link(task, link, request, failures)
            total_attempts += attempts
            if result is not None:
                result.attempts = total_attempts
                return result
        raise LLMChainExhausted(task.key, failures)

    async def _try_link(
        self, task: Task, link: ChainLink, request: CompletionRequest, failures: list[LLMError]
    ) -> tuple[LLMResult | None, int]:
        provider = link.provider
        current = request
        repaired = False
        retries = 0
        attempts = 0
        while retries < link.attempts:
            attempts += 1
            try:
                return await self._attempt(task, link, current), attempts
            except LLMError as error:
                if not error.provider:
                    error.provider, error.model = provider.name, provider.model
                failures.append(error)
                self.ledger.record_failure(task.key)
                if error.kind == FailureKind.BAD_OUTPUT:
                    if repaired:
                        break
                    repaired = True
                    current = self._repair_request(request, error)
                    continue
                if error.kind in _SKIP_LINK:
                    break
                retries += 1
                if retries < link.attempts:
                    await self._sleep(self.backoff.delay(error, retries - 1, self._rng))
        return None, attempts

    async def _attempt(self, task: Task, link: ChainLink, request: CompletionRequest) -> LLMResult:
        provider = link.provider
        key = None
        if self.cache is not None:
            key = cache_key(provider.name, provider.model, request, self._cache_seed)
            hit = self.cache.get(key)
            if hit is not None:
                output = parse_output(task, hit, provider.name)
                self.ledger.record(task.key, hit.model, hit.input_tokens, hit.output_tokens, 0.0, cached=True)
                return self._result(task, provider, hit, output, 0.0, cached=True, cost=0.0)
        async with self.limiter.slot(provider.name):
            started = time.perf_counter()
            try:
                # A timeout scope, not wait_for: wait_for wraps the call in a task of its own,
                # which cost more CPU than a scripted answer.
                async with asyncio.timeout(link.timeout_s):
                    completion = await provider.complete(request)
            except TimeoutError as exc:
                raise LLMError(
                    FailureKind.TIMEOUT,
                    f"no answer within {link.timeout_s} s",
                    provider=provider.name,
                    model=provider.model,
                ) from exc
            latency = time.perf_counter() - started
        output = parse_output(task, completion, provider.name)
        if key is not None and self.cache is not None:
            self.cache.put(key, completion)
        cost = self.ledger.record(
            task.key,
            completion.model,
            completion.input_tokens,
            completion.output_tokens,
            latency,
            cached=False,
        )
        return self._result(task, provider, completion, output, latency, cached=False, cost=cost)

    @staticmethod
    def _repair_request(request: CompletionRequest, error: LLMError) -> CompletionRequest:
        bad = error.raw_output or ""
        messages = [
            *request.messages,
            Message(role="assistant", content=bad),
            Message(role="user", content=REPAIR_INSTRUCTION.format(error=str(error))),
        ]
        return request.model_copy(update={"messages": messages, "repair_of": bad, "repair_error": str(error)})

    @staticmethod
    def _result(
        task: Task,
        provider: Provider,
        completion: Completion,
        output: Any,
        latency: float,
        *,
        cached: bool,
        cost: float,
    ) -> LLMResult:
        return LLMResult(
            task=task.key,
            output=output,
            text=completion.text,
            usage=Usage(input_tokens=completion.input_tokens, output_tokens=completion.output_tokens),
            latency_s=latency,
            provider=provider.name,
            model=completion.model,
            cached=cached,
            cost_usd=cost,
        )
