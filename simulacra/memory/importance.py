"""Importance (poignancy) ratings: how much a memory matters, 1 (mundane) to 10 (life-changing).

The paper asks the model once per memory; we rate a batch of memories in one call and cache
ratings by text, because the same phrases recur across thousands of simulated consultations and
every call costs money and time. Ratings the model leaves out are asked for again (twice by
default); if one is still missing the batch fails loudly rather than storing a made-up number.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field, field_validator

from simulacra.llm.providers.scripted import ScriptedCall, ScriptedHandlers
from simulacra.llm.types import LLMResult, Task
from simulacra.memory.node import IMPORTANCE_MAX, IMPORTANCE_MIN


class ImportanceRater(Protocol):
    async def rate(self, descriptions: list[str]) -> list[int]: ...


class LLMCaller(Protocol):
    """What the rater needs of an LLM client."""

    async def call(self, task: Task, variables: dict[str, Any]) -> LLMResult: ...


def clamp_importance(value: int) -> int:
    return max(IMPORTANCE_MIN, min(IMPORTANCE_MAX, int(value)))


class ImportanceRating(BaseModel):
    index: int = Field(ge=0)
    importance: int

    @field_validator("importance")
    @classmethod
    def _clamp(cls, value: int) -> int:
        # A model answering 0 or 11 meant "as low/high as it goes"; refusing the batch would waste it.
        return clamp_importance(value)


class ImportanceRatings(BaseModel):
    ratings: list[ImportanceRating]


IMPORTANCE_TASK: Task[ImportanceRatings] = Task("memory.importance", "v1", ImportanceRatings)


class ImportanceRatingError(RuntimeError):
    """The model did not rate every memory it was given, even when asked again."""


class LLMImportanceRater:
    def __init__(
        self,
        llm: LLMCaller,
        batch_size: int = 16,
        *,
        agent: str = "",
        cache_size: int = 100_000,
        retries: int = 2,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.retries = retries
        self.llm = llm
        self.batch_size = batch_size
        self.agent = agent
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._cache_size = cache_size
        self.calls = 0

    async def rate(self, descriptions: list[str]) -> list[int]:
        missing = list(dict.fromkeys(d for d in descriptions if d not in self._cache))
        batches = [missing[i : i + self.batch_size] for i in range(0, len(missing), self.batch_size)]
        results = await asyncio.gather(*(self._rate_batch(batch) for batch in batches))
        fresh = {text: rating for result in results for text, rating in result.items()}
        out = []
        for text in descriptions:
            rating = fresh.get(text)
            if rating is None:
                rating = self._cache[text]
                self._cache.move_to_end(text)
            out.append(rating)
        for text, rating in fresh.items():
            self._cache[text] = rating
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return out

    async def _rate_batch(self, batch: Sequence[str]) -> dict[str, int]:
        rated: dict[str, int] = {}
        left = list(batch)
        for attempt in range(1, 2 + self.retries):
            answered = await self._ask(left, attempt)
            rated.update({left[i]: rating for i, rating in answered.items()})
            left = [text for text in left if text not in rated]
            if not left:
                return rated
        raise ImportanceRatingError(
            f"the model left {len(left)} of {len(batch)} memories unrated after {1 + self.retries} calls; "
            f"first unrated: {left[0]!r}"
        )

    async def _ask(self, batch: Sequence[str], attempt: int) -> dict[int, int]:
        self.calls += 1
        # The attempt number is part of the call, so a retry is not answered from a cache or seed.
        variables = {"memories": list(batch), "agent": self.agent, "attempt": attempt}
        result = await self.llm.call(IMPORTANCE_TASK, variables)
        ratings: ImportanceRatings = result.parsed(ImportanceRatings)
        out: dict[int, int] = {}
        for rating in ratings.ratings:
            if rating.index < len(batch):
                out.setdefault(rating.index, rating.importance)
        return out


# -- the scripted stand-in: rates from what the memory says, like a careful reader would

_CUES: tuple[tuple[int, tuple[str, ...]], ...] = (
    # Loss, harm and life events: the most poignant.
    (
        5,
        (
            "died",
            "death",
            "bereave",
            "funeral",
            "divorce",
            "diagnos",
            "terminal",
            "cancer",
            "redundan",
            "lost",
            "loss",
            "fraud",
            "scam",
            "stolen",
            "evict",
            "emergency",
            "crisis",
            "grief",
            "widow",
        ),
    ),
    # Decisions and commitments change what happens next.
    (
        3,
        (
            "decided",
            "decide",
            "decision",
            "chose",
            "choose",
            "agreed",
            "agree",
            "signed",
            "commit",
            "cancel",
            "transfer",
            "withdraw",
            "retire",
            "resign",
            "accept",
            "refuse",
            "complain",
        ),
    ),
    # Money and obligations.
    (
        2,
        (
            "money",
            "£",
            "$",
            "€",
            "debt",
            "loan",
            "mortgage",
            "savings",
            "salary",
            "income",
            "tax",
            "invest",
            "pay",
            "cost",
            "fee",
            "bill",
            "price",
            "fund",
            "worth",
            "lump sum",
        ),
    ),
    # Feelings worth remembering.
    (1, ("worried", "anxious", "afraid", "upset", "angry", "confused", "stress", "happy", "relieved")),
)
_ROUTINE = (
    "hello",
    "greet",
    "thank",
    "weather",
    "waited",
    "waiting",
    "coffee",
    "tea",
    "walked",
    "sat",
    "said goodbye",
    "goodbye",
    "nodded",
    "logged in",
    "opened",
    "routine",
    "idle",
    "small talk",
)
_NUMBER = re.compile(r"\d")


def score_description(text: str) -> int:
    """A deterministic importance from cue words: loss > decisions > money > feelings > routine."""
    lowered = text.lower()
    score = 2
    for weight, cues in _CUES:
        if any(cue in lowered for cue in cues):
            score += weight
    if _NUMBER.search(lowered):
        score += 1
    if score == 2 and any(cue in lowered for cue in _ROUTINE):
        score = 1
    return clamp_importance(score)


def handle_importance(call: ScriptedCall) -> ImportanceRatings:
    """Rate each memory from its content, with a little seeded jitter (and an optional omission)."""
    memories = list(call.variables["memories"])
    ratings = []
    for index, text in enumerate(memories):
        if call.chance("importance_omission"):
            continue
        jitter = call.rng.choice((-1, 0, 0, 0, 1))
        ratings.append(
            ImportanceRating(index=index, importance=clamp_importance(score_description(text) + jitter))
        )
    return ImportanceRatings(ratings=ratings)


def register_importance_handlers(handlers: ScriptedHandlers) -> None:
    handlers.register(IMPORTANCE_TASK.name, handle_importance)
