"""An OpenAI-compatible `/v1/chat/completions` in front of the gated advisor.

Any chat front end, or the official `openai` client with `base_url` pointed here, can talk to the
advisor. The conversation lives on the server: a request names its session in the `X-Session-Id`
header or the `user` field (open one with `POST /v1/sessions` first), and only its last message,
which must be the user's, is taken as the customer's new message. Everything else the client
sends (its copy of the history, system prompts, sampling settings, tools) is ignored, so a client
cannot rewrite the advisor's instructions: the reply is the advisor's, through the same gate.
With `stream: true` the reply is streamed in OpenAI's chunk format, after it has passed the gate.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from environments.live.deps import Caller, live, pieces, server_timing, shielded
from environments.live.keys import KeyRecord
from environments.live.runtime import LiveError, TurnResult
from environments.live.timing import start_meter

router = APIRouter(prefix="/v1", tags=["openai-compatible"])


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p.text or "" for p in self.content if p.type == "text")
        return self.content or ""


class ChatRequest(BaseModel):
    """OpenAI's request body; fields the advisor does not use are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")
    model: str = Field(max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
    stream: bool = False
    user: str | None = Field(default=None, max_length=128, description="the session id, if no X-Session-Id")
    n: int = Field(default=1, ge=1, le=1)


class ChatChoiceMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None


class ChatChoice(BaseModel):
    index: int = 0
    message: ChatChoiceMessage
    finish_reason: Literal["stop"] = "stop"
    logprobs: None = None


class ChatUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class GateInfo(BaseModel):
    """Beyond OpenAI's format: what the compliance gate did with this reply."""

    holding: bool
    escalated: bool
    escalation_id: str | None
    session_id: str
    message_id: int


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: ChatUsage
    system_fingerprint: None = None
    gate: GateInfo


class OpenAIError(LiveError):
    status = 400
    code = "invalid_request_error"


def openai_error(status: int, message: str, code: str) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse({"error": {"message": message, "type": kind, "code": code, "param": None}}, status)


def customer_text(body: ChatRequest, limit: int) -> str:
    last = body.messages[-1]
    if last.role != "user":
        raise OpenAIError("the last message must be the customer's (role 'user')")
    text = last.text()
    if not text.strip():
        raise OpenAIError("the last user message is empty")
    if len(text) > limit:
        raise OpenAIError(f"the message is {len(text)} characters; the limit is {limit}")
    return text


def completion(result: TurnResult, model: str) -> ChatCompletion:
    reply = result.advisor.text
    # Token counts from the advisor's own usage would mix drafts and judges; words are what was sent.
    prompt, completion_tokens = len(result.customer.text.split()), len(reply.split())
    return ChatCompletion(
        id=f"chatcmpl-{result.session.id[:12]}-{result.advisor.id}",
        created=int(result.advisor.created_at.timestamp()),
        model=model,
        choices=[ChatChoice(message=ChatChoiceMessage(content=reply))],
        usage=ChatUsage(
            prompt_tokens=prompt, completion_tokens=completion_tokens, total_tokens=prompt + completion_tokens
        ),
        gate=GateInfo(
            holding=result.holding,
            escalated=result.escalated,
            escalation_id=result.escalation_id,
            session_id=result.session.id,
            message_id=result.advisor.id,
        ),
    )


def chunk(completion_id: str, created: int, model: str, delta: dict[str, Any], finish: str | None) -> str:
    body = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n"


@router.get("/models", summary="The advisor, as OpenAI's model list")
async def models(request: Request, key: Caller) -> dict[str, Any]:
    name = live(request).config.advisor.name
    return {
        "object": "list",
        "data": [{"id": name, "object": "model", "created": 0, "owned_by": "pension-guidance"}],
    }


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    summary="OpenAI-compatible chat completion against the gated advisor",
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def chat_completions(
    body: ChatRequest,
    request: Request,
    key: Caller,
    x_session_id: Annotated[str | None, Header(max_length=64, description="the session to talk in")] = None,
) -> Any:
    server = live(request)
    try:
        session_id = x_session_id or body.user
        if not session_id:
            raise OpenAIError(
                "name the session in the X-Session-Id header or the user field; open one with POST /v1/sessions"
            )
        session = await server.runtime.session_for(key, session_id)
        if session.owner != key.owner:
            raise OpenAIError("only the customer whose session it is may write in it")
        text = customer_text(body, server.config.server.max_message_chars)
        server.runtime.check_open(session)
    except LiveError as exc:
        return openai_error(exc.status, exc.message, exc.code)
    model = server.config.advisor.name
    if body.stream:
        return StreamingResponse(stream(server, key, session, text, model), media_type="text/event-stream")
    meter, started = start_meter(), time.perf_counter()
    try:
        result = await shielded(server.runtime.answer(session, text))
    except LiveError as exc:
        return openai_error(exc.status, exc.message, exc.code)
    return JSONResponse(
        completion(result, model).model_dump(mode="json"), headers=server_timing(meter, started)
    )


async def stream(server: Any, key: KeyRecord, session: Any, text: str, model: str) -> AsyncIterator[str]:
    created = int(time.time())
    completion_id = f"chatcmpl-{session.id[:12]}-{session.turns + 1}"
    # The role first, at once: the client sees the stream open while the reply is drafted and checked.
    yield chunk(completion_id, created, model, {"role": "assistant", "content": ""}, None)
    try:
        result = await shielded(server.runtime.answer(session, text))
    except LiveError as exc:
        yield f"data: {json.dumps({'error': {'message': exc.message, 'type': 'invalid_request_error', 'code': exc.code}})}\n\n"
        return
    for piece in pieces(result.advisor.text):
        yield chunk(completion_id, created, model, {"content": piece}, None)
    yield chunk(completion_id, created, model, {}, "stop")
    yield "data: [DONE]\n\n"
