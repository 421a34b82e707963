"""Anthropic Messages provider on the official SDK.

Structured answers use forced tool use: one tool named after the output model whose `input_schema` is
the model's JSON schema, and `tool_choice` naming it, so the reply's tool_use block carries the answer
as an object. It is returned as JSON text; validation stays with the client, like every provider's.
The SDK client is built with `max_retries=0` because the fallback chain owns retries.

`request.temperature` is deliberately not sent: SDK 2.x speaks API version 2026-10-21, which rejects
`temperature`, `top_p` and `top_k` with a 400 whatever their value (the SDK no longer accepts them).
"""

from __future__ import annotations

import json
import os
from typing import Any

import anthropic
from anthropic import AsyncAnthropic
from pydantic import BaseModel

from simulacra.llm.errors import ConfigurationError, FailureKind, LLMError
from simulacra.llm.providers.openai_provider import classify_status, retry_after_seconds, schema_name
from simulacra.llm.types import Completion, CompletionRequest

# Anthropic's error `type`s that name the failure class outright, whatever the status code.
_KIND_BY_ERROR_TYPE = {
    "overloaded_error": FailureKind.OVERLOADED,
    "rate_limit_error": FailureKind.RATE_LIMIT,
    "authentication_error": FailureKind.AUTH,
    "permission_error": FailureKind.AUTH,
    "billing_error": FailureKind.AUTH,
    "timeout_error": FailureKind.TIMEOUT,
}


class AnthropicProvider:
    """One Claude model behind the Messages API (or a server speaking it)."""

    name = "anthropic"

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ConfigurationError(
                f"Anthropic provider for model {model!r} needs an API key: "
                "set ANTHROPIC_API_KEY or pass api_key"
            )
        self.model = model
        self.base_url = base_url
        # An explicit key stops the SDK from looking for profiles or federation credentials on disk.
        self._client = AsyncAnthropic(api_key=key, base_url=base_url, timeout=timeout, max_retries=0)

    async def aclose(self) -> None:
        await self._client.close()

    def request_params(self, request: CompletionRequest) -> dict[str, Any]:
        """The messages.create arguments for one attempt (pure, so the wire shape is testable alone)."""
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": [
                {"role": m.role, "content": m.content} for m in request.messages if m.role != "system"
            ],
        }
        if system:
            params["system"] = system
        if request.output_schema is not None:
            tool = answer_tool(request.output_schema)
            params["tools"] = [tool]
            params["tool_choice"] = {"type": "tool", "name": tool["name"]}
        return params

    async def complete(self, request: CompletionRequest) -> Completion:
        params = self.request_params(request)
        try:
            message = await self._client.messages.create(**params)
        except anthropic.AnthropicError as exc:
            raise self._translate(exc) from exc
        tool_name = params["tool_choice"]["name"] if "tool_choice" in params else None
        text = self._answer_text(message, tool_name)
        usage = message.usage
        input_tokens = (
            usage.input_tokens
            + (usage.cache_creation_input_tokens or 0)
            + (usage.cache_read_input_tokens or 0)
        )
        return Completion(
            text=text,
            input_tokens=input_tokens,
            output_tokens=usage.output_tokens,
            model=message.model or self.model,
        )

    def _answer_text(self, message: Any, tool_name: str | None) -> str:
        prose = "".join(block.text for block in message.content if block.type == "text")
        if tool_name is None:
            if not prose.strip():
                raise self._error(
                    FailureKind.BAD_OUTPUT,
                    f"empty reply (stop_reason={message.stop_reason})",
                    raw_output=prose,
                )
            return prose
        for block in message.content:
            if block.type == "tool_use" and block.name == tool_name:
                return json.dumps(block.input, ensure_ascii=False)
        raise self._error(
            FailureKind.BAD_OUTPUT,
            f"no tool_use block for {tool_name} (stop_reason={message.stop_reason})",
            raw_output=prose or None,
        )

    def _error(self, kind: FailureKind, message: str, **extra: Any) -> LLMError:
        return LLMError(kind, message, provider=self.name, model=self.model, **extra)

    def _translate(self, exc: anthropic.AnthropicError) -> LLMError:
        if isinstance(exc, anthropic.APITimeoutError):
            return self._error(FailureKind.TIMEOUT, "request timed out")
        if isinstance(exc, anthropic.APIConnectionError):
            return self._error(FailureKind.CONNECTION, f"{exc} ({exc.__cause__ or 'no detail'})")
        if isinstance(exc, anthropic.APIResponseValidationError):
            return self._error(FailureKind.BAD_OUTPUT, str(exc))
        if isinstance(exc, anthropic.APIStatusError):
            detail = json.dumps(exc.body, default=str) if exc.body is not None else ""
            kind = _KIND_BY_ERROR_TYPE.get(exc.type or "") or classify_status(
                exc.status_code, f"{exc.api_message or ''} {exc.error_code or ''} {detail}"
            )
            message = f"{exc.status_code} {exc.type or ''}: {exc.api_message or exc.message}"
            return self._error(kind, message[:600], retry_after=retry_after_seconds(exc.response.headers))
        return self._error(FailureKind.OTHER, f"{type(exc).__name__}: {exc}")


def answer_tool(output: type[BaseModel]) -> dict[str, Any]:
    """The single tool whose forced call carries a structured answer."""
    description = (output.__doc__ or "").strip() or f"Give the answer as a {output.__name__} object."
    return {
        "name": schema_name(output),
        "description": description,
        "input_schema": output.model_json_schema(),
    }
