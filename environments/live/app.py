"""The HTTP API of the live endpoint (FastAPI): sessions, gated replies, transcripts, events.

`create_app` builds the app; its parts (models, validator, stores) are assembled when the server
starts, so a server that accepts connections is ready to answer. The OpenAI-compatible facade
lives in `environments.live.openai_facade`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from environments.live.api_models import (
    AuditOut,
    CaseOut,
    ErrorOut,
    MessageIn,
    MessageOut,
    ReplyOut,
    SessionIn,
    SessionList,
    SessionOut,
    TranscriptOut,
)
from environments.live.auth import AuthError
from environments.live.config import ServeConfig
from environments.live.deps import Caller, LiveServer, live, pieces, server_timing, shielded, sse
from environments.live.keys import KeyRecord
from environments.live.learning import learn_from_session
from environments.live.openai_facade import router as facade
from environments.live.parts import build_parts
from environments.live.runtime import (
    Forbidden,
    LibraryReadOnly,
    LiveAdvisor,
    LiveError,
    TooLarge,
    TurnResult,
)
from environments.live.store import LiveStore, SessionRecord
from environments.live.timing import start_meter
from simulacra.clock import Clock, SystemClock

log = logging.getLogger("environments.live")
CONFIG_ENV = "PENSION_LIVE_SERVE_CONFIG"  # the config, as JSON, for worker processes
MAX_BODY_BYTES = 1_000_000
KEEPALIVE_S = 15.0
SessionId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9a-f]+$")]
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "no API key, or not a valid one"},
    404: {"model": ErrorOut, "description": "no such session (or not yours)"},
    429: {"model": ErrorOut, "description": "rate limit reached; see Retry-After"},
}


def checked_text(text: str, server: LiveServer) -> str:
    limit = server.config.server.max_message_chars
    if len(text) > limit:
        raise TooLarge(f"the message is {len(text)} characters; the limit is {limit}")
    return text


def owned(session: SessionRecord, key: KeyRecord) -> SessionRecord:
    if session.owner != key.owner:
        raise Forbidden("only the customer whose session it is may write in it")
    return session


def reply_out(result: TurnResult, max_turns: int) -> ReplyOut:
    return ReplyOut(
        session=SessionOut.of(result.session, max_turns),
        message=MessageOut.of(result.customer),
        reply=MessageOut.of(result.advisor),
        holding=result.holding,
        escalated=result.escalated,
        escalation_id=result.escalation_id,
    )


router = APIRouter(prefix="/v1", responses=ERRORS)


@router.post("/sessions", status_code=201, response_model=SessionOut, summary="Open a session for a customer")
async def open_session(body: SessionIn, request: Request, key: Caller) -> SessionOut:
    server = live(request)
    if key.may_review():
        raise Forbidden("sessions are opened with a customer key")
    session = await server.runtime.open_session(key, body.profile, body.consent)
    return SessionOut.of(session, server.config.server.max_turns)


@router.get(
    "/sessions", response_model=SessionList, summary="List sessions (a customer's own; all for reviewers)"
)
async def list_sessions(
    request: Request, key: Caller, limit: Annotated[int, Query(ge=1, le=500)] = 100
) -> SessionList:
    server = live(request)
    owner = None if key.may_review() else key.owner
    found = await asyncio.to_thread(server.store.sessions, owner, limit)
    return SessionList(sessions=[SessionOut.of(s, server.config.server.max_turns) for s in found])


@router.get("/sessions/{session_id}", response_model=SessionOut, summary="A session's state")
async def get_session(session_id: SessionId, request: Request, key: Caller) -> SessionOut:
    server = live(request)
    session = await server.runtime.session_for(key, session_id)
    return SessionOut.of(session, server.config.server.max_turns)


@router.post(
    "/sessions/{session_id}/messages",
    response_model=ReplyOut,
    summary="Send the customer's message; get the advisor's validated reply",
    description="With `stream=true` (or `Accept: text/event-stream`) the reply comes as server-sent events: "
    "`status` while the reply is drafted and checked, then `delta` pieces of the reply, which has already "
    "passed the validator, then `reply` with the stored record (or `error`). A held reply is the holding "
    "message; the reviewed reply follows on `/events` when a colleague has decided.",
    responses={
        200: {"content": {"text/event-stream": {}}},
        403: {"model": ErrorOut, "description": "not the customer's own session"},
        409: {"model": ErrorOut, "description": "closed, waiting for review, at its turn limit, or busy"},
        413: {"model": ErrorOut, "description": "message longer than server.max_message_chars"},
    },
)
async def post_message(
    session_id: SessionId,
    body: MessageIn,
    request: Request,
    key: Caller,
    stream: Annotated[bool, Query(description="answer as server-sent events")] = False,
) -> Any:
    server = live(request)
    session = owned(await server.runtime.session_for(key, session_id), key)
    text = checked_text(body.text, server)
    server.runtime.check_open(session)
    max_turns = server.config.server.max_turns
    if stream or "text/event-stream" in request.headers.get("accept", ""):

        async def events() -> AsyncIterator[str]:
            meter, started = start_meter(), time.perf_counter()
            yield sse("status", {"state": "drafting"})
            try:
                result = await shielded(server.runtime.answer(session, text))
            except LiveError as exc:
                yield sse("error", {"code": exc.code, "detail": exc.message})
                return
            for piece in pieces(result.advisor.text):
                yield sse("delta", {"text": piece})
            yield sse("reply", reply_out(result, max_turns).model_dump(mode="json"))
            yield sse(
                "timing",
                {"model_ms": meter.seconds * 1000, "turn_ms": (time.perf_counter() - started) * 1000},
            )

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )
    meter, started = start_meter(), time.perf_counter()
    result = await shielded(server.runtime.answer(session, text))
    # Serialised by pydantic in one step (a dump to Python data and json.dumps cost twice that).
    return Response(
        reply_out(result, max_turns).model_dump_json(),
        media_type="application/json",
        headers=server_timing(meter, started),
    )


@router.get("/sessions/{session_id}/transcript", response_model=TranscriptOut, summary="Everything said")
async def transcript(session_id: SessionId, request: Request, key: Caller) -> TranscriptOut:
    server = live(request)
    session = await server.runtime.session_for(key, session_id)
    messages = await asyncio.to_thread(server.store.messages, session_id)
    return TranscriptOut(
        session=SessionOut.of(session, server.config.server.max_turns),
        messages=[MessageOut.of(m) for m in messages],
    )


@router.get(
    "/sessions/{session_id}/events",
    summary="Server-sent events: reviewed replies as they are delivered",
    description="Each delivered reviewer decision is an event `message` (a MessageOut, with its id as the "
    "event id). `after` (or the Last-Event-ID header) first replays what was delivered after that message.",
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def events(
    session_id: SessionId,
    request: Request,
    key: Caller,
    after: Annotated[
        int | None, Query(ge=0, le=2**62, description="replay deliveries after this message id")
    ] = None,
) -> StreamingResponse:
    server = live(request)
    await server.runtime.session_for(key, session_id)
    last_seen = request.headers.get("last-event-id", "")
    since = after if after is not None else (int(last_seen) if last_seen.isdigit() else None)

    async def stream() -> AsyncIterator[str]:
        with server.runtime.hub.subscribe(session_id) as queue:
            yield ": connected\n\n"
            sent: set[int] = set()
            if since is not None:
                for message in await asyncio.to_thread(server.store.messages, session_id):
                    if message.id > since and message.kind.startswith("review_"):
                        sent.add(message.id)
                        yield sse("message", MessageOut.of(message).model_dump(mode="json"), str(message.id))
            while not await request.is_disconnected():
                try:
                    message = await asyncio.wait_for(queue.get(), timeout=KEEPALIVE_S)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if message.id not in sent:
                    yield sse("message", MessageOut.of(message).model_dump(mode="json"), str(message.id))

    return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


@router.post(
    "/sessions/{session_id}/close",
    response_model=SessionOut,
    summary="Close a session",
    responses={403: {"model": ErrorOut, "description": "not the customer's own session"}},
)
async def close_session(session_id: SessionId, request: Request, key: Caller) -> SessionOut:
    server = live(request)
    session = owned(await server.runtime.session_for(key, session_id), key)
    closed = await server.runtime.close(session)
    return SessionOut.of(closed, server.config.server.max_turns)


@router.get(
    "/sessions/{session_id}/audit",
    response_model=AuditOut,
    summary="Every draft and validation of a session (reviewers)",
    responses={403: {"model": ErrorOut, "description": "needs a reviewer or admin key"}},
)
async def audit(session_id: SessionId, request: Request, key: Caller) -> AuditOut:
    server = live(request)
    if not key.may_review():
        raise Forbidden("the audit trail is for reviewers")
    session = await server.runtime.session_for(key, session_id)
    rows = await asyncio.to_thread(server.store.validations, session_id)
    return AuditOut(
        session=SessionOut.of(session, server.config.server.max_turns),
        owner=session.owner,
        validations=rows,
    )


@router.post(
    "/sessions/{session_id}/case",
    response_model=CaseOut,
    summary="Approve a finished consultation as a case (reviewers); it is redacted first",
    responses={
        403: {"model": ErrorOut, "description": "needs a reviewer or admin key"},
        409: {
            "model": ErrorOut,
            "description": "not eligible: no consent, still open, pending, or done; or the library is "
            "read-only (several server processes on an embedded library)",
        },
    },
)
async def approve_case(session_id: SessionId, request: Request, key: Caller) -> CaseOut:
    server = live(request)
    if not key.may_review():
        raise Forbidden("only a reviewer may approve a consultation as a case")
    if not server.config.library_writable():
        raise LibraryReadOnly(
            f"this server runs {server.config.server.workers} processes on an embedded case library, "
            "which they may only read; approve cases on a single-process server (server.workers=1) "
            "or serve the library from a Chroma server (casebase.store.host)"
        )
    session = await server.runtime.session_for(key, session_id)
    learned = await learn_from_session(server.store, server.runtime.parts.bases.cases, session, key.owner)
    log.info("session %s approved as case %s by key %s", session_id, learned.case.id, key.id)
    return CaseOut(
        session_id=session_id,
        case_id=learned.case.id,
        merged=learned.merged,
        task_type=learned.case.task_type,
        redacted=learned.redacted,
    )


class BodyLimit:
    """Refuses request bodies over `limit` bytes (413) before they are read whole."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await too_large(self.limit)(scope, receive, send)
            return
        seen = 0

        async def counted() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise BodyTooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except BodyTooLarge:
            await too_large(self.limit)(scope, receive, send)


class BodyTooLarge(Exception):
    """The request body grew past the limit while it was being read."""


def too_large(limit: int) -> JSONResponse:
    return JSONResponse({"detail": f"the request body is larger than {limit} bytes"}, status_code=413)


def create_app(config: ServeConfig, clock: Clock | None = None) -> FastAPI:
    clock = clock or SystemClock()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = LiveStore(config.database_url(), clock)
        parts = await build_parts(config, clock)
        runtime = LiveAdvisor(config, parts, store, clock)
        app.state.live = LiveServer(config, runtime, store)
        poller = asyncio.create_task(runtime.deliver_forever(config.server.delivery_poll_s))
        log.info("live advisor ready (validator %s, llm %s)", config.validator.mode, config.llm.name)
        try:
            yield
        finally:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
            parts.review_queue.close()
            store.close()

    app = FastAPI(
        title="Pension guidance advisor: live endpoint",
        version="1",
        description="Real customers consult the trained advisor; every reply passes the FCA compliance gate "
        "(production validation by default). Guidance only, never regulated advice.",
        lifespan=lifespan,
    )

    @app.exception_handler(LiveError)
    async def live_error(request: Request, exc: LiveError) -> JSONResponse:
        return JSONResponse({"detail": exc.message, "code": exc.code}, status_code=exc.status)

    @app.exception_handler(AuthError)
    async def auth_error(request: Request, exc: AuthError) -> JSONResponse:
        return JSONResponse({"detail": exc.message}, status_code=exc.status, headers=exc.headers)

    @app.get("/healthz", include_in_schema=False)
    async def health() -> dict[str, str | int]:
        # The process id tells a caller (the benchmark) that every worker is up.
        return {"status": "ok", "process": os.getpid()}

    app.include_router(router)
    app.include_router(facade)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    return app


def app_from_environment() -> FastAPI:
    """The app of one worker process (`server.workers` > 1): its config comes in `CONFIG_ENV`."""
    config = ServeConfig.model_validate_json(os.environ[CONFIG_ENV])
    logging.getLogger("environments.live").setLevel(config.server.log_level.upper())
    return create_app(config)
