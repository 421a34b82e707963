"""Restarting the live endpoint loses nothing: `python -m environments.serve` killed in the middle
of a session and started again (SQLite), the app stopped and started again (PostgreSQL); the
reviewer's decision made while it was down is delivered, and the session goes on. Its logs hold
no keys or personal data."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from environments.live.config import compose_serve_config
from tests.environments.test_serve_harness import (  # noqa: F401 (postgres_server: a fixture)
    DB_PROFILE,
    Reviewer,
    ServerProcess,
    ServerThread,
    client,
    free_port,
    make_key,
    open_session,
    overrides_for,
    postgres_server,
    say,
    settings,
    wait_for,
)
from tests.postgres import PostgresServer

PERSON = {
    **DB_PROFILE,
    "name": "Philippa Quennell-Dawes",
    "situation": "recently widowed and caring for her mother",
}


def test_a_killed_server_resumes_the_session_and_logged_nothing_sensitive(tmp_path: Path) -> None:
    port = free_port()
    overrides = overrides_for(tmp_path / "runs", port, "server.log_level=debug")
    config = compose_serve_config(overrides)
    log = tmp_path / "server.log"
    key = make_key(config, "philippa")
    reviewer = Reviewer(config)
    first_question = "I'd like to transfer my final salary pension and cash it in."
    with ServerProcess(overrides, port, log) as server, client(server.url, key) as http:
        session_id = open_session(http, PERSON, remember=True)
        said = [say(http, session_id, "What are my options for taking money from my pension?", reviewer)]
        said.append(say(http, session_id, first_question))
        assert said[-1]["holding"], "a DB transfer is always escalated"
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGKILL)  # a crash: no shutdown at all
        server.process.wait(timeout=30)
    # The reviewer decides while the endpoint is down; it is delivered once the endpoint is back.
    reviewer.decide(said[-1]["escalation_id"])
    with ServerProcess(overrides, port, log) as server, client(server.url, key) as http:
        [*_, delivered] = wait_for(http, session_id, "review_delivery")
        said.append(say(http, session_id, "Thank you. Is there free help I can get with this?", reviewer))
        transcript = http.get(f"/v1/sessions/{session_id}/transcript").json()
    reviewer.close()
    assert said[-1]["session"]["turns"] == 3
    check_transcript(transcript["messages"], said, delivered)
    # Nothing sensitive reached the logs: not the key, not the profile, not what the customer said.
    logged = log.read_text(errors="replace")
    assert "opened by key" in logged and "delivered to session" in logged  # the logs do say things
    secret = key.split("_", 2)[2]
    for sensitive in (secret, PERSON["name"], "Quennell", PERSON["situation"], "widowed", first_question):
        assert sensitive not in logged


def test_a_restarted_server_on_postgresql_continues_the_session(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg: PostgresServer = request.getfixturevalue("postgres_server")
    port = free_port()
    config = settings(
        tmp_path / "runs",
        port,
        f"server.database_url={pg.create_database('live')}",
        f"validator.review_queue_url={pg.create_database('queue')}",
    )
    key = make_key(config, "philippa")
    reviewer = Reviewer(config)
    with ServerThread(config) as server, client(server.url, key) as http:
        session_id = open_session(http, PERSON)
        said = [say(http, session_id, "What are my options for taking money from my pension?", reviewer)]
        said.append(say(http, session_id, "I'd like to transfer my final salary pension and cash it in."))
        assert said[-1]["holding"]
    reviewer.decide(said[-1]["escalation_id"])
    with ServerThread(config) as server, client(server.url, key) as http:
        [*_, delivered] = wait_for(http, session_id, "review_delivery")
        said.append(say(http, session_id, "Thank you. Is there free help I can get with this?", reviewer))
        transcript = http.get(f"/v1/sessions/{session_id}/transcript").json()
    reviewer.close()
    check_transcript(transcript["messages"], said, delivered)


def check_transcript(messages: list[dict], said: list[dict], delivered: dict) -> None:
    customer = [m for m in messages if m["role"] == "customer"]
    assert [m["text"] for m in customer] == [s["message"]["text"] for s in said]
    assert [m["turn"] for m in customer] == [1, 2, 3]
    assert [m["id"] for m in messages] == sorted({m["id"] for m in messages})
    held = next(m for m in messages if m["id"] == said[1]["reply"]["id"])
    assert held["kind"] == "holding"
    assert messages[messages.index(held) + 1]["id"] == delivered["id"]
    assert delivered["review_item"] == said[1]["escalation_id"]
    assert messages[-1]["id"] == said[2]["reply"]["id"] or said[2]["holding"]
