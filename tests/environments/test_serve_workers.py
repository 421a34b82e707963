"""Several server processes (`server.workers`) sharing one port, one store and one review queue.

`python -m environments.serve server.workers=2` in a subprocess: turns are answered whichever
process takes the connection, a reviewer's decision reaches customers connected to any process,
and the embedded case library, which Chroma does not let several processes write, is read-only.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from environments.live.config import compose_serve_config
from environments.live.keys import Scope
from tests.environments.test_serve_api import events_until
from tests.environments.test_serve_harness import (
    DB_PROFILE,
    Reviewer,
    ServerProcess,
    client,
    free_port,
    make_key,
    open_session,
    overrides_for,
)

LISTENERS = 6  # separate connections, so both processes are likely to hold some


def processes_answering(url: str, wanted: int, timeout_s: float = 120) -> set[int]:
    seen: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while len(seen) < wanted and time.monotonic() < deadline:
        seen.add(httpx.get(f"{url}/healthz", timeout=5).json()["process"])  # a new connection each
    return seen


def test_library_writable_only_for_one_process_or_a_chroma_server(tmp_path: Path) -> None:
    one = compose_serve_config([f"paths.root={tmp_path}"])
    two = compose_serve_config([f"paths.root={tmp_path}", "server.workers=2"])
    served = compose_serve_config(
        [f"paths.root={tmp_path}", "server.workers=2", "casebase.store.host=chroma"]
    )
    assert one.library_writable() and not two.library_writable() and served.library_writable()


def test_two_processes_share_sessions_reviews_and_refuse_library_writes(tmp_path: Path) -> None:
    port = free_port()
    overrides = overrides_for(tmp_path / "runs", port, "server.workers=2")
    config = compose_serve_config(overrides)
    key = make_key(config, "gus")
    officer_key = make_key(config, "compliance-team", Scope.REVIEWER)
    reviewer = Reviewer(config)
    try:
        with ServerProcess(overrides, port, tmp_path / "server.log") as server:
            assert len(processes_answering(server.url, 2)) == 2
            with client(server.url, key) as http:
                session_id = open_session(http, DB_PROFILE)
                held = http.post(
                    f"/v1/sessions/{session_id}/messages",
                    json={"text": "I want to transfer my final salary pension and take the cash now."},
                )
                assert held.status_code == 200, held.text
                assert held.json()["holding"] and reviewer.pending(session_id) == [
                    held.json()["escalation_id"]
                ]

                listeners = [client(server.url, key) for _ in range(LISTENERS)]
                readies = [threading.Event() for _ in listeners]
                got: list[list[dict]] = [[] for _ in listeners]
                readers = [
                    threading.Thread(
                        target=lambda i=i: got[i].extend(
                            events_until(listeners[i], session_id, 1, readies[i])
                        )
                    )
                    for i in range(LISTENERS)
                ]
                for reader in readers:
                    reader.start()
                assert all(ready.wait(30) for ready in readies)
                reviewer.decide(held.json()["escalation_id"])
                for reader in readers:
                    reader.join(timeout=30)
                for listener in listeners:
                    listener.close()
                # Every connection was told, whichever process held it, and the reply was stored once.
                assert all([m["kind"] for m in messages] == ["review_delivery"] for messages in got)
                transcript = http.get(f"/v1/sessions/{session_id}/transcript").json()
                assert [m["kind"] for m in transcript["messages"]] == [
                    "customer",
                    "holding",
                    "review_delivery",
                ]
                # The session goes on, whichever process answers next (it rebuilds from the store).
                answered = http.post(
                    f"/v1/sessions/{session_id}/messages", json={"text": "I see, thank you."}
                )
                assert answered.status_code == 200, answered.text
                assert http.post(f"/v1/sessions/{session_id}/close").status_code == 200
            with client(server.url, officer_key) as officer:
                refused = officer.post(f"/v1/sessions/{session_id}/case")
                assert refused.status_code == 409 and refused.json()["code"] == "library_read_only"
                assert "server.workers=1" in refused.json()["detail"]
    finally:
        reviewer.close()
