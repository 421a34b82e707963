"""OpenAI chat-completions provider on the official SDK; `base_url` also reaches vLLM, Ollama, llama.cpp.

The SDK client is built with `max_retries=0`: retries and backoff belong to the fallback chain, which
needs every failure back at once, classified, to decide between waiting, repairing and switching
vendor. Structured answers use `response_format` and come back as JSON text; parsing them into the
task's pydantic model is the client's job, so a malformed answer can get the client's repair attempt.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import math
import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal
from urllib.parse import urlsplit

import openai
from openai import AsyncOpenAI
from pydantic import BaseModel

from simulacra.llm.errors import ConfigurationError, FailureKind, LLMError
from simulacra.llm.types import Completion, CompletionRequest

StructuredMode = Literal["json_schema", "json_object"]

# Placeholder key for local OpenAI-compatible servers, which accept any key (or need none).
LOCAL_SERVER_KEY = "sk-local-no-key-required"
_OFFICIAL_HOST = "api.openai.com"

# JSON Schema keywords OpenAI's strict Structured Outputs accept. A schema using anything else is sent
# with strict=False rather than rejected by the API on every call.
_STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "anyOf", "enum", "const",
        "$ref", "$defs", "description", "title", "format", "pattern", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
    }
)  # fmt: skip
# Annotations with no effect on what is generated; strict mode rejects `default`, so they are dropped.
_ANNOTATIONS = frozenset({"default", "examples"})

_CONTEXT_PATTERN = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|too many tokens|prompt is too long"
    r"|input is too long|exceed_context_size",
    re.IGNORECASE,
)


class OpenAIProvider:
    """One model behind an OpenAI-compatible chat-completions endpoint."""

    name = "openai"

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        structured_mode: StructuredMode = "json_schema",
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        if structured_mode not in ("json_schema", "json_object"):
            raise ConfigurationError(
                f"structured_mode must be 'json_schema' or 'json_object', not {structured_mode!r}"
            )
        effective_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if effective_url is None or not is_local_url(effective_url):
                raise ConfigurationError(
                    f"OpenAI provider for model {model!r} needs an API key: set OPENAI_API_KEY or pass "
                    "api_key (a local base_url such as http://localhost:8000/v1 may omit it)"
                )
            key = LOCAL_SERVER_KEY
        self.model = model
        self.base_url = effective_url
        self.structured_mode: StructuredMode = structured_mode
        # OpenAI's own API deprecates `max_tokens` (its reasoning models reject it); compatible servers
        # (vLLM, Ollama, llama.cpp) all understand `max_tokens`, not all `max_completion_tokens`.
        self._official_api = effective_url is None or urlsplit(effective_url).hostname == _OFFICIAL_HOST
        self._client = AsyncOpenAI(
            api_key=key,
            base_url=effective_url,
            timeout=timeout,
            max_retries=0,
            default_headers=dict(extra_headers) if extra_headers else None,
        )

    async def aclose(self) -> None:
        await self._client.close()

    def request_params(self, request: CompletionRequest) -> dict[str, Any]:
        """The chat.completions arguments for one attempt (pure, so the wire shape is testable alone)."""
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
        }
        params["max_completion_tokens" if self._official_api else "max_tokens"] = request.max_tokens
        if request.output_schema is not None:
            params["response_format"] = self.response_format(request.output_schema)
        return params

    async def complete(self, request: CompletionRequest) -> Completion:
        try:
            response = await self._client.chat.completions.create(**self.request_params(request))
        except openai.OpenAIError as exc:
            raise self._translate(exc) from exc
        if not response.choices:
            raise self._error(FailureKind.BAD_OUTPUT, "the response has no choices")
        choice = response.choices[0]
        text = choice.message.content
        if text is None or not text.strip():
            refusal = getattr(choice.message, "refusal", None)
            reason = (
                f"refused: {refusal}" if refusal else f"empty content (finish_reason={choice.finish_reason})"
            )
            raise self._error(FailureKind.BAD_OUTPUT, reason, raw_output=text)
        usage = response.usage
        return Completion(
            text=text,
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            model=response.model or self.model,
        )

    def response_format(self, output: type[BaseModel]) -> dict[str, Any]:
        """The `response_format` for a structured task, strict whenever the schema allows it."""
        schema = output.model_json_schema()
        if self.structured_mode == "json_object":
            # llama.cpp's server constrains generation with `schema` here; it rejects `json_schema`.
            return {"type": "json_object", "schema": schema}
        strict = strict_json_schema(schema)
        return {
            "type": "json_schema",
            "json_schema": {
                "name": schema_name(output),
                "schema": strict if strict is not None else schema,
                "strict": strict is not None,
            },
        }

    def _error(self, kind: FailureKind, message: str, **extra: Any) -> LLMError:
        return LLMError(kind, message, provider=self.name, model=self.model, **extra)

    def _translate(self, exc: openai.OpenAIError) -> LLMError:
        if isinstance(exc, openai.APITimeoutError):
            return self._error(FailureKind.TIMEOUT, str(exc))
        if isinstance(exc, openai.APIConnectionError):
            return self._error(FailureKind.CONNECTION, f"{exc} ({exc.__cause__ or 'no detail'})")
        if isinstance(exc, openai.APIResponseValidationError):
            return self._error(FailureKind.BAD_OUTPUT, str(exc))
        if isinstance(exc, openai.APIStatusError):
            detail = json.dumps(exc.body, default=str) if exc.body is not None else ""
            kind = classify_status(exc.status_code, f"{exc.message} {detail}")
            return self._error(kind, _clip(str(exc)), retry_after=retry_after_seconds(exc.response.headers))
        return self._error(FailureKind.OTHER, f"{type(exc).__name__}: {exc}")


def classify_status(status: int, text: str) -> FailureKind:
    """Map an HTTP error status (and the error text, for 400s and quota 429s) to a failure class."""
    if status in (401, 402, 403):
        return FailureKind.AUTH
    if status == 429:
        # An exhausted quota or spend limit is a billing state, not congestion: waiting will not help.
        quota = "insufficient_quota" in text or "spend_limit" in text
        return FailureKind.AUTH if quota else FailureKind.RATE_LIMIT
    if status in (408, 504):
        return FailureKind.TIMEOUT
    if status in (400, 413, 422) and _CONTEXT_PATTERN.search(text):
        return FailureKind.CONTEXT_LENGTH
    if status >= 500:
        return FailureKind.OVERLOADED
    return FailureKind.OTHER


def retry_after_seconds(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, else `retry-after` (seconds or HTTP date)."""
    milliseconds = _as_float(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000.0
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = _as_float(raw)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _as_float(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def is_local_url(url: str) -> bool:
    """Loopback, private-network, `.local`/`.internal` or bare (docker service) hosts count as local."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return bool(host) and "." not in host
    return address.is_loopback or address.is_private or address.is_unspecified


def schema_name(output: type[BaseModel]) -> str:
    """The model's name in the form OpenAI's `json_schema.name` and Anthropic's tool names accept."""
    cleaned = re.sub(r"[^a-zA-Z0-9_-]+", "_", output.__name__).strip("_")
    return (cleaned or "answer")[:64]


def strict_json_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """A strict-mode copy of `schema`, or None when it needs features strict mode lacks.

    Strict mode wants every object closed (`additionalProperties: false`) with all properties
    required, `$ref` without sibling keywords, and no `default`. Optional fields stay optional in
    effect: pydantic renders them as `anyOf [..., null]`, so the model answers null. A schema with
    open objects (dict fields), `oneOf`, tuples or unsupported constraints returns None.
    """
    root = copy.deepcopy(schema)
    defs = root.get("$defs", {})
    try:
        result = _strictify(root, defs, depth=0)
    except _NotStrict:
        return None
    if isinstance(defs, dict) and defs:
        result["$defs"] = {name: _strictify(sub, defs, depth=0) for name, sub in defs.items()}
    return result


class _NotStrict(Exception):
    """A JSON schema that OpenAI's strict structured-output mode cannot express."""


def _strictify(node: Any, defs: dict[str, Any], depth: int) -> dict[str, Any]:
    if not isinstance(node, dict) or depth > 64:
        raise _NotStrict
    node = {k: v for k, v in node.items() if k not in _ANNOTATIONS and k != "$defs"}
    if any(key not in _STRICT_KEYWORDS for key in node):
        raise _NotStrict
    ref = node.get("$ref")
    if ref is not None and len(node) > 1:
        target = defs.get(str(ref).removeprefix("#/$defs/")) if str(ref).startswith("#/$defs/") else None
        if target is None:
            raise _NotStrict
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _strictify(merged, defs, depth + 1)
    if "properties" in node or node.get("type") == "object":
        if node.get("additionalProperties", False) is not False:
            raise _NotStrict
        properties = node.get("properties", {})
        node["properties"] = {name: _strictify(sub, defs, depth + 1) for name, sub in properties.items()}
        node["required"] = list(properties)
        node["additionalProperties"] = False
    if "items" in node:
        node["items"] = _strictify(node["items"], defs, depth + 1)
    if "anyOf" in node:
        node["anyOf"] = [_strictify(sub, defs, depth + 1) for sub in node["anyOf"]]
    return node


def _clip(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
