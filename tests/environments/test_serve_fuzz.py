"""Property-based fuzzing of the live endpoint from its own OpenAPI spec: no input gets a 5xx.

Schemathesis generates requests for every documented operation (valid and invalid bodies,
parameters and headers) and sends them to the real server. Half of the cases that name a session
are pointed at real sessions of the caller, so the fuzzing reaches past the 404.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from environments.live.keys import Scope
from tests.environments.test_serve_harness import (
    DB_PROFILE,
    PROFILE,
    ServerThread,
    client,
    free_port,
    make_key,
    open_session,
)
from tests.environments.test_serve_harness import (
    settings as serve_settings,
)

FUZZ_RATE_LIMIT = 100_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    config = serve_settings(tmp_path_factory.mktemp("fuzz"), free_port(), "server.max_message_chars=500")
    with ServerThread(config) as running:
        yield running


@pytest.fixture(scope="module")
def keys(server: ServerThread) -> dict[str, str]:
    return {
        scope.value: make_key(server.config, f"fuzz-{scope.value}", scope, rate_limit=FUZZ_RATE_LIMIT)
        for scope in Scope
    }


@pytest.fixture(scope="module")
def sessions(server: ServerThread, keys: dict[str, str]) -> list[str]:
    with client(server.url, keys["customer"]) as http:
        return [open_session(http, profile) for profile in (PROFILE, DB_PROFILE, PROFILE, DB_PROFILE)]


@pytest.fixture(scope="module")
def api_schema(server: ServerThread) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{server.url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.exclude(path_regex=r"/events$").parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_server_error(
    case: schemathesis.Case, server: ServerThread, keys: dict[str, str], sessions: list[str]
) -> None:
    params = case.path_parameters or {}
    if "session_id" in params:
        pick = zlib.crc32(str(params["session_id"]).encode())
        if pick % 2 == 0:
            params["session_id"] = sessions[pick % len(sessions)]
    if (
        isinstance(case.body, dict)
        and "user" in case.body
        and zlib.crc32(str(case.body["user"]).encode()) % 2
    ):
        case.body["user"] = sessions[0]
    scope = ("customer", "customer", "reviewer", "admin")[zlib.crc32(repr(case.body).encode()) % 4]
    # A valid key always: the generated ones would all stop at 401 (auth has its own tests).
    headers = {**(case.headers or {}), "Authorization": f"Bearer {keys[scope]}"}
    response = case.call(base_url=server.url, headers=headers, timeout=60)
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path}: {response.status_code} {response.text}"
    )
