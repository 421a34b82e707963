"""The shared encoding of a call's variables writes exactly what each reader's own json.dumps wrote.

The scripted seed, the cache key and `tojson` in templates reuse one encoding; any byte of
difference would change seeded transcripts and cache keys, so each is compared with the plain
`json.dumps` it replaces.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from simulacra.llm.cache import cache_key
from simulacra.llm.client import ChainLink, LLMClient, PreparedVariables, to_jsonable
from simulacra.llm.encoding import EncodedVariables, ascii_escaped, canonical_json
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers.scripted import (
    SEED_KEY,
    ScriptedCall,
    ScriptedHandlers,
    ScriptedProvider,
    call_seed,
)
from simulacra.llm.types import CompletionRequest, Message, Task

PROMPTS = Path(__file__).parent / "prompts"
TOJSON = Task("echo.tojson", "v1", None)


class Profile(BaseModel):
    name: str
    age: int


VARIABLES: list[dict[str, Any]] = [
    {},
    {"question": "plain"},
    {
        "question": 'Can I take 25% tax-free? £ and € and 😀 and a\ttab "quoted" \\ back',
        "figures": {"z_rate": 0.45, "a_allowance": 60000, "nested": {"b": [1, 2.5, None], "a": True}},
        "profile": Profile(name="Zoë Ødegård", age=57),
        "items": ("tuple", {"set-like"}, 3),
        "empty": {},
        "nan": float("nan"),
        "big": 10**30,
        "\u00e9t\u00e9": "key not ASCII",
        "lone": "\ud800 surrogate",
        "del": "\x7f",
    },
    {"b": [{"y": 1, "x": 2}], "a": "first key sorts last in insertion order", SEED_KEY: "pair-7"},
]
# The rich case without the lone surrogate, which no cache key or UTF-8 message can hold.
WRITABLE = {k: v for k, v in VARIABLES[2].items() if k != "lone"}
VARIABLES.append(WRITABLE)


@pytest.mark.parametrize("variables", VARIABLES)
def test_whole_text_equals_json_dumps_both_ways(variables: dict[str, Any]) -> None:
    data = to_jsonable(variables)
    encoded = EncodedVariables(data)
    assert encoded.whole(ensure_ascii=True) == json.dumps(data, sort_keys=True, default=str)
    assert encoded.whole(ensure_ascii=False) == json.dumps(
        data, sort_keys=True, default=str, ensure_ascii=False
    )
    for key, value in data.items():
        assert encoded.text_of(value) == canonical_json(value)
        assert encoded.text(key) == json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def test_ascii_escaping_matches_the_encoder_for_every_kind_of_character() -> None:
    text = "a é \u20ac \U0001f600 \ud800 \x7f \x00 end"
    assert ascii_escaped(canonical_json(text)) == json.dumps(text)
    assert ascii_escaped('"plain"') == '"plain"'


def test_text_of_is_by_identity_not_by_equality() -> None:
    data = {"a": [1, 2], "b": [1, 2]}
    encoded = EncodedVariables(data)
    assert encoded.text_of(data["b"]) == "[1, 2]"
    assert encoded.text_of([1, 2]) is None  # an equal list that is not one of the variables


def request(data: dict[str, Any], encoded: EncodedVariables | None) -> CompletionRequest:
    plain = CompletionRequest(
        task="echo.tojson",
        task_version="v1",
        variables=data,
        messages=[Message(role="user", content="ünïcode")],
        temperature=0.2,
        max_tokens=77,
    )
    return plain if encoded is None else plain.with_encoded(encoded)


@pytest.mark.parametrize("variables", VARIABLES)
def test_seed_and_cache_key_are_unchanged_by_the_shared_encoding(variables: dict[str, Any]) -> None:
    data = to_jsonable(variables)
    plain, shared = request(data, None), request(data, EncodedVariables(data))
    assert plain.encoded_variables() is None
    assert shared.encoded_variables() is not None
    for seed in (0, 12345):
        assert call_seed(seed, shared) == call_seed(seed, plain)
    for seed in (None, 3):
        if "lone" in data:  # a lone surrogate cannot be written as UTF-8 either way
            with pytest.raises(UnicodeEncodeError):
                cache_key("scripted", "m", plain, seed)
            with pytest.raises(UnicodeEncodeError):
                cache_key("scripted", "m", shared, seed)
        else:
            assert cache_key("scripted", "m", shared, seed) == cache_key("scripted", "m", plain, seed)


def test_an_encoding_of_other_values_is_not_used() -> None:
    data = to_jsonable(VARIABLES[2])
    stale = request(data, EncodedVariables(data)).model_copy(update={"variables": {"question": "other"}})
    assert stale.encoded_variables() is None
    assert call_seed(0, stale) == call_seed(0, request({"question": "other"}, None))
    assert request(data, EncodedVariables({"question": "x"})).encoded_variables() is None


def test_rendering_with_the_encoding_is_identical() -> None:
    library = PromptLibrary([PROMPTS])
    data = to_jsonable(WRITABLE)
    plain = library.render(TOJSON, data)
    assert library.render(TOJSON, data, EncodedVariables(data)) == plain
    assert '"name": "Zoë Ødegård"' in plain[1].content  # not ASCII-escaped, keys sorted
    assert plain[1].content.index('"age"') < plain[1].content.index('"name"')


async def test_judges_sharing_prepared_variables_get_the_same_seed_as_separate_calls() -> None:
    seeds: list[int] = []

    def handler(call: ScriptedCall) -> str:
        seeds.append(call.rng.getrandbits(64))
        return "ok"

    handlers = ScriptedHandlers()
    handlers.register("echo.tojson", handler)
    variables = WRITABLE
    clients = [
        LLMClient([ChainLink(ScriptedProvider(handlers, seed=seed))], PromptLibrary([PROMPTS]))
        for seed in (1, 2, 1)
    ]
    prepared = PreparedVariables(variables)
    shared = [await c.call(TOJSON, prepared) for c in clients]
    shared_seeds, seeds[:] = list(seeds), []
    separate = [await c.call(TOJSON, variables) for c in clients]
    assert seeds == shared_seeds
    assert shared_seeds[0] == shared_seeds[2] != shared_seeds[1]
    assert [r.text for r in shared] == [r.text for r in separate]
    assert [r.usage for r in shared] == [r.usage for r in separate]
