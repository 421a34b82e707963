"""What the API's routes share: the running server, the caller's key, timing and SSE framing."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from environments.live.auth import Authenticator, rate_headers
from environments.live.config import ServeConfig
from environments.live.keys import KeyRecord
from environments.live.runtime import LiveAdvisor
from environments.live.store import LiveStore
from environments.live.timing import ModelMeter

_T = TypeVar("_T")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


class LiveServer:
    """What a running server holds: the advisor runtime, the store and the authenticator."""

    def __init__(self, config: ServeConfig, runtime: LiveAdvisor, store: LiveStore) -> None:
        self.config = config
        self.runtime = runtime
        self.store = store
        self.auth = Authenticator(store, config.server)


def live(request: Request) -> LiveServer:
    return request.app.state.live


bearer = HTTPBearer(
    auto_error=False, description="an API key made with `python -m environments.serve keys create`"
)


async def caller(
    request: Request,
    response: Response,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> KeyRecord:
    header = None if credentials is None else f"{credentials.scheme} {credentials.credentials}"
    key, decision = await live(request).auth.authenticate(header)
    response.headers.update(rate_headers(decision))
    request.state.key_id = key.id
    return key


Caller = Annotated[KeyRecord, Depends(caller)]


async def shielded(work: Awaitable[_T]) -> _T:
    """Finish a turn even if the client goes away: it is saved, and the transcript will show it."""
    return await asyncio.shield(asyncio.ensure_future(work))


def server_timing(meter: ModelMeter, started: float) -> dict[str, str]:
    total_ms = (time.perf_counter() - started) * 1000
    # model: inside the LLM providers; advisor: the advisor's turn (model included); turn: the
    # whole request after authentication (advisor, store and serialisation).
    return {
        "Server-Timing": f'model;dur={meter.seconds * 1000:.3f};desc="LLM calls ({meter.calls})", '
        f"advisor;dur={meter.advisor_seconds * 1000:.3f}, turn;dur={total_ms:.3f}"
    }


def sse(event: str, data: Any, event_id: str | None = None) -> str:
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"data: {json.dumps(data, default=str)}")
    return "\n".join(lines) + "\n\n"


def pieces(text: str) -> list[str]:
    """The validated reply in sentence-sized pieces, each with the space that followed it."""
    parts = _SENTENCE.split(text)
    return [p + (" " if i < len(parts) - 1 else "") for i, p in enumerate(parts)]
