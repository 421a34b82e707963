"""Boundary models of the LLM client: what a provider is asked, what it answers, what callers get."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from simulacra.llm.encoding import EncodedVariables

OutputT = TypeVar("OutputT", bound=BaseModel)


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class Task(Generic[OutputT]):
    """A named, versioned prompt template and, for structured answers, the pydantic model it returns.

    The template lives in a file `<name>.<version>.j2` in one of the prompt library's folders, so
    a prompt change is a reviewable file change with a new version rather than an edited string.
    """

    name: str
    version: str
    output: type[OutputT] | None = None

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"


class CompletionRequest(BaseModel):
    """One provider attempt. Real providers send `messages`; the scripted one reads `variables`."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    task: str
    task_version: str
    variables: dict[str, Any]
    messages: list[Message]
    output_schema: type[BaseModel] | None = None
    temperature: float = 0.7
    max_tokens: int = 1024
    # Set on the one repair attempt after malformed structured output.
    repair_of: str | None = None
    repair_error: str | None = None
    # The client's encoding of `variables`, so the scripted seed and the cache key reuse it.
    _encoded: EncodedVariables | None = PrivateAttr(default=None)

    def with_encoded(self, encoded: EncodedVariables) -> CompletionRequest:
        """Attach the encoding of this request's variables (ignored if it describes other values)."""
        if encoded.describes(self.variables):
            self._encoded = encoded
        return self

    def encoded_variables(self) -> EncodedVariables | None:
        """The attached encoding, if it still describes `variables` (a copy may have replaced them)."""
        encoded = self._encoded
        return encoded if encoded is not None and encoded.describes(self.variables) else None

    def schema_json(self) -> dict[str, Any] | None:
        return None if self.output_schema is None else self.output_schema.model_json_schema()


class Completion(BaseModel):
    """A provider's raw answer: text (JSON text for structured tasks) and token usage."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    model: str


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


class LLMResult(BaseModel, Generic[OutputT]):
    """What a caller gets back: the parsed answer plus everything needed to account for it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    task: str
    output: Any  # the parsed pydantic model for structured tasks, else the text
    text: str
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    provider: str
    model: str
    cached: bool = False
    cost_usd: float = 0.0
    attempts: int = 1

    def parsed(self, model: type[OutputT]) -> OutputT:
        if not isinstance(self.output, model):
            raise TypeError(f"task {self.task} returned {type(self.output).__name__}, not {model.__name__}")
        return self.output
