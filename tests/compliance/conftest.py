"""Fixtures for the compliance tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.llm_server import FakeLLMServer


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    """A started fake OpenAI/Anthropic server on 127.0.0.1, stopped after the test."""
    with FakeLLMServer() as server:
        yield server
