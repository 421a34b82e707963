"""A local HTTP server that speaks the OpenAI and Anthropic wire formats, for testing real SDK clients.

Why a server and not SDK mocks: the providers' job is to drive the official SDKs correctly (request
shape, headers, error classes, retry-after headers, timeouts). Only a real socket exercises all of that.

Usage::

    with FakeLLMServer() as server:
        server.enqueue(rate_limited(retry_after=2.0), ok_text("hello"))
        openai_provider = OpenAIProvider("gpt-x", api_key="k", base_url=server.openai_base_url)
        anthropic_provider = AnthropicProvider("claude-x", api_key="k", base_url=server.base_url)
        ...
        server.requests[-1].body  # the JSON the SDK sent

Routes (matched by path suffix, so both SDKs' usual base URLs work):
- ``.../chat/completions``: OpenAI chat completions (``openai_base_url`` = ``base_url + "/v1"``);
- ``.../messages``: Anthropic messages (``base_url`` as is; the SDK adds ``/v1/messages``).

Each request consumes one queued `Reply` (first in, first out); when the queue is empty the server
answers with `default` (``ok_text("ok")`` unless changed). Every request is recorded, parsed, with
lower-cased headers, whatever the reply.

Replies and how each wire renders them:

======================  ======================================  =========================================
constructor             OpenAI                                  Anthropic
======================  ======================================  =========================================
ok_text(text)           message content ``text``                one text block
ok_structured(data)     message content ``json.dumps(data)``    one tool_use block (named after the tool
                                                                the request forced) with input ``data``
malformed_json(raw)     message content ``raw``                 one text block ``raw``, no tool_use block
empty_reply()           ``choices: []``                         ``content: []``
rate_limited(...)       429 + retry-after / retry-after-ms      429 rate_limit_error + same headers
server_error()          500                                     500 api_error
service_unavailable()   503                                     503 api_error
overloaded()            529                                     529 overloaded_error
context_length_...()    400 code context_length_exceeded        400 "prompt is too long: ..."
unauthorized()          401 invalid_api_key                     401 authentication_error
hang(seconds)           answers ok_text only after ``seconds``: longer than the client timeout
======================  ======================================  =========================================

Schema-mismatching structured answers are ``ok_structured({...wrong fields...})``. Every ok reply
reports ``input_tokens`` / ``output_tokens`` usage so token accounting can be asserted.

Threads: one daemon thread per connection and ``Connection: close`` on every answer, so nothing
lingers; ``stop()`` wakes any handler that is hanging, so a timeout test never delays shutdown.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

ReplyKind = Literal["text", "structured", "malformed", "empty", "error", "hang"]


@dataclass(frozen=True)
class Reply:
    """One programmed answer. Build it with the constructors below rather than by hand."""

    kind: ReplyKind
    text: str = ""
    data: dict[str, Any] | None = None
    status: int = 200
    openai_message: str = ""
    openai_type: str = ""
    openai_code: str | None = None
    anthropic_type: str = ""
    anthropic_message: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    input_tokens: int = 21
    output_tokens: int = 8


def ok_text(text: str = "ok", *, input_tokens: int = 21, output_tokens: int = 8) -> Reply:
    return Reply("text", text=text, input_tokens=input_tokens, output_tokens=output_tokens)


def ok_structured(data: dict[str, Any], *, input_tokens: int = 21, output_tokens: int = 8) -> Reply:
    return Reply("structured", data=data, input_tokens=input_tokens, output_tokens=output_tokens)


def malformed_json(raw: str = '{"answer": "unterminated') -> Reply:
    """A structured answer that is not JSON (OpenAI) or carries no tool_use block (Anthropic)."""
    return Reply("malformed", text=raw)


def empty_reply() -> Reply:
    return Reply("empty")


def http_error(
    status: int,
    message: str,
    *,
    openai_type: str = "api_error",
    openai_code: str | None = None,
    anthropic_type: str = "api_error",
    anthropic_message: str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """Any error status; the named constructors below cover the ones the fallback chain classifies."""
    return Reply(
        "error",
        status=status,
        openai_message=message,
        openai_type=openai_type,
        openai_code=openai_code,
        anthropic_type=anthropic_type,
        anthropic_message=message if anthropic_message is None else anthropic_message,
        headers=tuple((headers or {}).items()),
    )


def rate_limited(retry_after: float | None = 1.0, *, retry_after_ms: float | None = None) -> Reply:
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    if retry_after_ms is not None:
        headers["retry-after-ms"] = f"{retry_after_ms:g}"
    return http_error(
        429,
        "Rate limit reached for requests",
        openai_type="requests",
        openai_code="rate_limit_exceeded",
        anthropic_type="rate_limit_error",
        headers=headers,
    )


def server_error() -> Reply:
    return http_error(500, "The server had an error while processing your request")


def service_unavailable() -> Reply:
    return http_error(503, "The engine is currently overloaded, please try again later")


def overloaded() -> Reply:
    return http_error(529, "Overloaded", openai_type="overloaded_error", anthropic_type="overloaded_error")


def context_length_exceeded() -> Reply:
    """400 with each vendor's real wording: OpenAI's error code, Anthropic's message."""
    return http_error(
        400,
        "This model's maximum context length is 8192 tokens. However, your messages resulted in "
        "9120 tokens. Please reduce the length of the messages.",
        openai_type="invalid_request_error",
        openai_code="context_length_exceeded",
        anthropic_type="invalid_request_error",
        anthropic_message="prompt is too long: 210931 tokens > 200000 maximum",
    )


def unauthorized() -> Reply:
    return http_error(
        401,
        "Incorrect API key provided",
        openai_type="invalid_request_error",
        openai_code="invalid_api_key",
        anthropic_type="authentication_error",
    )


def hang(seconds: float = 5.0) -> Reply:
    """Answer only after `seconds` (or when the server stops): use a client timeout well below it."""
    return Reply("hang", text="too late", delay_s=seconds)


@dataclass(frozen=True)
class RecordedRequest:
    """What an SDK sent: path, lower-cased headers and the parsed JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def wire(self) -> Literal["openai", "anthropic", "unknown"]:
        if self.path.endswith("/chat/completions"):
            return "openai"
        if self.path.endswith("/messages"):
            return "anthropic"
        return "unknown"


@dataclass
class _State:
    """Shared between the server object and its handler threads; guarded by `lock`."""

    default: Reply
    queue: deque[Reply] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    counter: int = 0

    def record(self, request: RecordedRequest) -> None:
        with self.lock:
            self.requests.append(request)

    def take(self, request: RecordedRequest) -> tuple[Reply, int]:
        with self.lock:
            self.requests.append(request)
            self.counter += 1
            reply = self.queue.popleft() if self.queue else self.default
            return reply, self.counter


class FakeLLMServer:
    """Threaded HTTP server on 127.0.0.1 (a free port) with a programmable queue of replies."""

    def __init__(self, default: Reply | None = None) -> None:
        self._state = _State(default=default or ok_text("ok"))
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> FakeLLMServer:
        if self._httpd is not None:
            raise RuntimeError("FakeLLMServer already started")
        handler = type("_BoundHandler", (_Handler,), {"state": self._state})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True  # a hanging handler must never hold up interpreter exit
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, name="fake-llm-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._state.stopping.set()  # wake hanging handlers first
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # addresses ---------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """Root URL: pass as the Anthropic SDK's base_url."""
        if self._httpd is None:
            raise RuntimeError("FakeLLMServer not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        """Root URL + /v1: pass as the OpenAI SDK's base_url, like a vLLM or llama.cpp server's."""
        return f"{self.base_url}/v1"

    # programming and inspection ------------------------------------------------------------------------
    def enqueue(self, *replies: Reply) -> None:
        with self._state.lock:
            self._state.queue.extend(replies)

    @property
    def default(self) -> Reply:
        return self._state.default

    @default.setter
    def default(self, reply: Reply) -> None:
        with self._state.lock:
            self._state.default = reply

    @property
    def pending(self) -> int:
        """Queued replies not yet consumed."""
        with self._state.lock:
            return len(self._state.queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._state.lock:
            return list(self._state.requests)

    def reset(self) -> None:
        """Forget queued replies and recorded requests (the default reply is kept)."""
        with self._state.lock:
            self._state.queue.clear()
            self._state.requests.clear()


class _Handler(BaseHTTPRequestHandler):
    state: _State
    protocol_version = "HTTP/1.0"  # one request per connection: no idle keep-alive threads

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request stderr line."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        request = RecordedRequest(
            method="POST",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body if isinstance(body, dict) else {"_body": body},
        )
        if request.wire == "unknown":
            self.state.record(request)  # recorded (a wrong base_url shows up here) but consumes no reply
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        reply, serial = self.state.take(request)
        if reply.kind == "hang":
            if self.state.stopping.wait(reply.delay_s):
                return
            reply = ok_text(reply.text)
        if reply.kind == "error":
            self._send(reply.status, _error_body(request.wire, reply), dict(reply.headers))
        elif request.wire == "openai":
            self._send(200, _openai_completion(request.body, reply, serial))
        else:
            self._send(200, _anthropic_message(request.body, reply, serial))

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        try:
            self.send_response(status, _reason_phrase(status))
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("connection", "close")
            self.send_header("x-request-id", "req_fake")
            self.send_header("request-id", "req_fake")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout fired): nothing to deliver


def _reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Overloaded" if status == 529 else "Error"


def _error_body(wire: str, reply: Reply) -> dict[str, Any]:
    if wire == "openai":
        error = {
            "message": reply.openai_message,
            "type": reply.openai_type,
            "param": None,
            "code": reply.openai_code,
        }
        return {"error": error}
    error = {"type": reply.anthropic_type, "message": reply.anthropic_message}
    return {"type": "error", "error": error, "request_id": "req_fake"}


def _openai_completion(body: dict[str, Any], reply: Reply, serial: int) -> dict[str, Any]:
    usage = {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }
    base = {
        "id": f"chatcmpl-fake{serial}",
        "object": "chat.completion",
        "created": 1_700_000_000 + serial,
        "model": body.get("model", "fake-model"),
        "usage": usage,
    }
    if reply.kind == "empty":
        return {**base, "choices": []}
    content = json.dumps(reply.data) if reply.kind == "structured" else reply.text
    message = {"role": "assistant", "content": content, "refusal": None}
    return {**base, "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}]}


def _anthropic_message(body: dict[str, Any], reply: Reply, serial: int) -> dict[str, Any]:
    content: list[dict[str, Any]]
    stop_reason = "end_turn"
    if reply.kind == "empty":
        content = []
    elif reply.kind == "structured":
        tool_choice = body.get("tool_choice") or {}
        tools = body.get("tools") or [{}]
        name = tool_choice.get("name") or tools[0].get("name") or "answer"
        content = [{"type": "tool_use", "id": f"toolu_fake{serial}", "name": name, "input": reply.data}]
        stop_reason = "tool_use"
    else:
        content = [{"type": "text", "text": reply.text}]
    return {
        "id": f"msg_fake{serial}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "fake-model"),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }
