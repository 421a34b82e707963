"""What the live endpoint's tests share: a real server on 127.0.0.1, keys, and a reviewer.

The server is the real FastAPI app under uvicorn, in a thread of the test process (or, where a
test restarts it or reads its logs, as `python -m environments.serve` in a subprocess). Clients
are real HTTP clients. This module holds no tests of its own.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn

from compliance.review_queue import QueueFilter, ReviewQueue
from environments.live.app import create_app
from environments.live.config import ServeConfig, compose_serve_config
from environments.live.keys import Scope
from environments.live.store import LiveStore
from simulacra.clock import SystemClock
from tests.postgres import PostgresServer, PostgresUnavailable

ROOT = Path(__file__).resolve().parents[2]
STARTUP_S = 120.0
WAIT_S = 30.0
_T = TypeVar("_T")

PROFILE: dict[str, Any] = {
    "name": "Ann Example",
    "age": 58,
    "pots": [{"type": "DC", "value_gbp": 42000, "provider": "Aviva"}],
    "situation": "",
    "literacy": "medium",
    "vulnerable": False,
    "goal": "drawdown",
}
DB_PROFILE: dict[str, Any] = {
    **PROFILE,
    "pots": [
        {"type": "DC", "value_gbp": 42000, "provider": "Aviva"},
        {"type": "DB", "value_gbp": 310000, "provider": "Old Works Pension Scheme", "has_guarantees": True},
    ],
}
CONSENT = {"guidance_only": True, "remember": False, "learning": True}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def overrides_for(root: Path, port: int, *extra: str) -> list[str]:
    """Hydra overrides for a test server: its own folder, the offline hashing embedder."""
    return [
        f"paths.root={root}",
        "embedder=hashing",
        "advisor.knowledge_cases=false",
        f"server.port={port}",
        "server.delivery_poll_s=0.1",
        "server.key_cache_s=0",
        *extra,
    ]


class ServerThread:
    """The app under uvicorn in a background thread, serving on 127.0.0.1."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.url = f"http://127.0.0.1:{config.server.port}"
        self.app = create_app(config)
        self.loop = asyncio.new_event_loop()
        self.server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host="127.0.0.1",
                port=config.server.port,
                log_level="warning",
                timeout_graceful_shutdown=1,
            )
        )
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.serve())

    def call(self, work: Coroutine[Any, Any, _T]) -> _T:
        """Run a coroutine on the server's own event loop (to look inside the running server)."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout=WAIT_S)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + STARTUP_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


class ServerProcess:
    """`python -m environments.serve` in a subprocess; its output is kept for the log tests."""

    def __init__(self, overrides: list[str], port: int, log: Path) -> None:
        self.overrides = overrides
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> ServerProcess:
        out = self.log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "environments.serve", *self.overrides],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + STARTUP_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text(errors='replace')[-3000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass  # not listening yet: poll again
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start in time")
            time.sleep(0.2)

    def __exit__(self, *_exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


def make_key(
    config: ServeConfig, owner: str, scope: Scope = Scope.CUSTOMER, rate_limit: int | None = None
) -> str:
    store = LiveStore(config.database_url(), SystemClock())
    try:
        return store.create_key(owner, scope, rate_limit).key
    finally:
        store.close()


def client(url: str, key: str | None) -> httpx.Client:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    return httpx.Client(base_url=url, headers=headers, timeout=60)


def open_session(http: httpx.Client, profile: dict[str, Any] | None = None, **consent: Any) -> str:
    response = http.post(
        "/v1/sessions", json={"profile": profile or PROFILE, "consent": {**CONSENT, **consent}}
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


class Reviewer:
    """A compliance officer working the review queue, as the review app does."""

    def __init__(self, config: ServeConfig, name: str = "officer-1") -> None:
        self.queue = ReviewQueue(config.review_queue_url(), SystemClock())
        self.name = name

    def close(self) -> None:
        self.queue.close()

    def pending(self, session_id: str) -> list[str]:
        return [e.item.id for e in self.queue.list_open(QueueFilter(session_id=session_id))]

    def decide(
        self, item_id: str, decision: str = "approve", edited: str | None = None, edited_passed: bool = True
    ) -> None:
        assert self.queue.claim(item_id, self.name).ok
        extra: dict[str, Any] = {}
        if decision == "reject":
            extra["reason_codes"] = ["PERSONAL_RECOMMENDATION"]
        if edited is not None:
            extra.update(edited_text=edited, edited_text_passed=edited_passed)
        result = self.queue.decide(item_id, self.name, decision, reason="checked", **extra)
        if result.outcome is None:
            # Sampled for a blind second review: a second officer decides the same way.
            other = self.queue
            assert other.claim(item_id, f"{self.name}-second").ok
            result = other.decide(item_id, f"{self.name}-second", decision, reason="checked", **extra)
        assert result.outcome is not None, result.message


def wait_for(http: httpx.Client, session_id: str, kind: str, count: int = 1) -> list[dict[str, Any]]:
    deadline = time.monotonic() + WAIT_S
    while True:
        messages = http.get(f"/v1/sessions/{session_id}/transcript").json()["messages"]
        found = [m for m in messages if m["kind"] == kind]
        if len(found) >= count:
            return found
        assert time.monotonic() < deadline, f"no {kind} message arrived: {messages}"
        time.sleep(0.1)


def say(http: httpx.Client, session_id: str, text: str, reviewer: Reviewer | None = None) -> dict[str, Any]:
    """Send a message; if the reply is held and a reviewer is given, approve it and wait for it."""
    response = http.post(f"/v1/sessions/{session_id}/messages", json={"text": text})
    assert response.status_code == 200, response.text
    body = response.json()
    if body["holding"] and reviewer is not None:
        delivered_before = len(
            [
                m
                for m in http.get(f"/v1/sessions/{session_id}/transcript").json()["messages"]
                if m["kind"].startswith("review_")
            ]
        )
        reviewer.decide(body["escalation_id"])
        wait_for(http, session_id, "review_delivery", delivered_before + 1)
    return body


def settings(root: Path, port: int, *extra: str) -> ServeConfig:
    return compose_serve_config(overrides_for(root, port, *extra))


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL server (import this fixture into a test module to use it)."""
    try:
        server = PostgresServer()
        server.start()
    except PostgresUnavailable as exc:
        pytest.fail(f"the PostgreSQL tests of the live endpoint cannot run: {exc}")
    yield server
    server.stop()
