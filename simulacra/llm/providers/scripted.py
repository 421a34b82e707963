"""The scripted provider: a deterministic, offline stand-in for a language model.

It never reads prompt text. Each task has a handler that computes a plausible, schema-valid answer
from the call's structured variables, with a random generator seeded by the run seed and the
call's own content, so the same call always gets the same answer whatever the concurrency or the
order of calls. Handlers for domain tasks are registered by the packages that own those tasks;
`simulacra` only knows the generic ones.

Runs made with it are marked as scripted (provider name "scripted") so nobody mistakes its output
for a real model's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from simulacra.llm.errors import ConfigurationError, FailureKind, LLMError
from simulacra.llm.types import Completion, CompletionRequest


@dataclass(frozen=True)
class ScriptedCall:
    """Everything a handler may use: the variables, never the rendered prompt."""

    task: str
    version: str
    variables: Mapping[str, Any]
    output_schema: type[BaseModel] | None
    rng: random.Random
    behaviour: Mapping[str, float] = field(default_factory=dict)

    def rate(self, name: str, default: float = 0.0) -> float:
        """A configured behaviour rate (e.g. how often a mistake is made), in [0, 1]."""
        return float(self.behaviour.get(name, default))

    def chance(self, name: str, default: float = 0.0) -> bool:
        return self.rng.random() < self.rate(name, default)


ScriptedHandler = Callable[[ScriptedCall], BaseModel | str]


class ScriptedHandlers:
    """Task name → handler. Each package registers the handlers for the tasks it defines."""

    def __init__(self) -> None:
        self._handlers: dict[str, ScriptedHandler] = {}

    def register(self, task: str, handler: ScriptedHandler) -> None:
        if task in self._handlers and self._handlers[task] is not handler:
            raise ValueError(f"a scripted handler for task '{task}' is already registered")
        self._handlers[task] = handler

    def get(self, task: str) -> ScriptedHandler:
        try:
            return self._handlers[task]
        except KeyError:
            known = ", ".join(sorted(self._handlers)) or "none"
            raise ConfigurationError(
                f"the scripted provider has no handler for task '{task}' (registered: {known})"
            ) from None

    def __contains__(self, task: str) -> bool:
        return task in self._handlers


# A variable a caller may set to seed a call by a key of its own instead of by its content: two
# calls that differ only in, say, one rule in the prompt then draw the same random numbers, so a
# paired comparison (a replay with and without the rule) measures the rule and not the noise.
SEED_KEY = "scripted_seed_key"


def call_seed(seed: int, request: CompletionRequest) -> int:
    """A seed from the run seed and the call's content: order- and concurrency-independent."""
    encoded = None if SEED_KEY in request.variables else request.encoded_variables()
    if encoded is None:
        content = request.variables.get(SEED_KEY, request.variables)
        payload = json.dumps([seed, request.task, request.task_version, content], sort_keys=True, default=str)
    else:
        # The same text, with the variables' part encoded once for every judge sharing them.
        head = json.dumps([seed, request.task, request.task_version], sort_keys=True, default=str)
        payload = f"{head[:-1]}, {encoded.whole(ensure_ascii=True)}]"
    return int.from_bytes(hashlib.blake2b(payload.encode("utf-8"), digest_size=8).digest(), "little")


def approx_tokens(text: str) -> int:
    """About four characters a token, the usual rule of thumb for English with BPE tokenisers."""
    return max(1, len(text) // 4)


class ScriptedProvider:
    name = "scripted"

    def __init__(
        self,
        handlers: ScriptedHandlers,
        *,
        seed: int = 0,
        behaviour: Mapping[str, float] | None = None,
        latency_s: float = 0.0,
        model: str = "scripted-v1",
    ) -> None:
        self.handlers = handlers
        self.seed = seed
        self.behaviour = dict(behaviour or {})
        self.latency_s = latency_s
        self.model = model

    async def complete(self, request: CompletionRequest) -> Completion:
        if self.latency_s > 0:
            # Stands in for model time so throughput benchmarks measure our overhead honestly.
            await asyncio.sleep(self.latency_s)
        handler = self.handlers.get(request.task)
        rng = random.Random(call_seed(self.seed, request))
        call = ScriptedCall(
            task=request.task,
            version=request.task_version,
            variables=request.variables,
            output_schema=request.output_schema,
            rng=rng,
            behaviour=self.behaviour,
        )
        # `malformed_output` models a first-try slip; `malformed_repair` (default 0) a model that
        # cannot produce the schema even when shown its error, which exhausts the chain.
        slip = "malformed_output" if request.repair_of is None else "malformed_repair"
        if request.output_schema is not None and call.chance(slip):
            text = '{"truncated": '
        else:
            answer = handler(call)
            if isinstance(answer, BaseModel):
                if request.output_schema is not None and not isinstance(answer, request.output_schema):
                    raise LLMError(
                        FailureKind.BAD_OUTPUT,
                        f"handler returned {type(answer).__name__}, task wants {request.output_schema.__name__}",
                        provider=self.name,
                        model=self.model,
                    )
                text = answer.model_dump_json()
            else:
                text = str(answer)
        prompt_text = "".join(m.content for m in request.messages)
        return Completion(
            text=text,
            input_tokens=approx_tokens(prompt_text),
            output_tokens=approx_tokens(text),
            model=self.model,
        )
