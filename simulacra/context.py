"""Context budgeting: fit each prompt section into its own token budget.

A prompt for one utterance is built from several sections (the system text, the other party's
profile, retrieved memories, items from extra retrievers such as cases and rules, domain rules) plus
room left for the answer. Without a budget, a long consultation or a large case base silently pushes
the prompt past the model's context window, or crowds out the parts that matter. Each section gets
its own budget so one noisy retriever cannot starve the others, and within a section the
lowest-scoring items are dropped first, so what survives is what retrieval ranked highest. What was
kept and what was dropped is reported, so a run can show which memories an utterance rested on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

TokenCounter = Callable[[str], int]

# The sections a prompt is made of; "generation" is the space reserved for the answer, not items.
SECTIONS: tuple[str, ...] = ("system", "profile", "memories", "extra", "domain_rules")


def approx_tokens(text: str) -> int:
    """About four characters a token (English under BPE tokenisers), rounded up; "" costs nothing."""
    return (len(text) + 3) // 4


class ContextBudget(BaseModel):
    """Token budget of each prompt section; the Hydra schema of the agent's `context` config."""

    model_config = ConfigDict(extra="forbid")

    system: int = Field(default=800, ge=0)
    profile: int = Field(default=400, ge=0)
    memories: int = Field(default=1200, ge=0)
    extra: int = Field(default=800, ge=0)
    domain_rules: int = Field(default=600, ge=0)
    generation: int = Field(default=600, ge=1, description="tokens reserved for the model's answer")

    def of(self, section: str) -> int:
        if section not in SECTIONS:
            raise ValueError(f"unknown context section '{section}' (sections: {', '.join(SECTIONS)})")
        return int(getattr(self, section))

    @property
    def prompt_tokens(self) -> int:
        return sum(self.of(s) for s in SECTIONS)

    @property
    def total(self) -> int:
        """The whole window the prompt and its answer may take."""
        return self.prompt_tokens + self.generation


class ContextItem(BaseModel):
    """One piece of text competing for room in a section; `score` is its retrieval score."""

    model_config = ConfigDict(frozen=True)

    id: str
    text: str
    score: float = 0.0
    source: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


class AssembledSection(BaseModel):
    name: str
    budget: int
    used_tokens: int
    kept: list[ContextItem]  # in the order they were given (retrievers' order), not score order
    dropped: list[ContextItem]  # lowest score first: the order they were dropped in

    @property
    def kept_ids(self) -> list[str]:
        return [item.id for item in self.kept]

    @property
    def dropped_ids(self) -> list[str]:
        return [item.id for item in self.dropped]

    @property
    def texts(self) -> list[str]:
        return [item.text for item in self.kept]


class AssembledContext(BaseModel):
    """The prompt's sections after budgeting, with the account of what was kept and dropped."""

    sections: dict[str, AssembledSection]
    generation_tokens: int

    @property
    def prompt_tokens(self) -> int:
        return sum(s.used_tokens for s in self.sections.values())

    def section(self, name: str) -> AssembledSection:
        """A section by name; a section that was not given is empty (so templates can rely on it)."""
        if name in self.sections:
            return self.sections[name]
        return AssembledSection(name=name, budget=0, used_tokens=0, kept=[], dropped=[])

    def kept_ids(self) -> dict[str, list[str]]:
        return {name: s.kept_ids for name, s in self.sections.items()}

    def dropped_ids(self) -> dict[str, list[str]]:
        return {name: s.dropped_ids for name, s in self.sections.items()}

    def texts(self) -> dict[str, list[str]]:
        """Every known section's kept texts, for template variables."""
        return {name: self.section(name).texts for name in SECTIONS}


def fit_section(
    name: str, items: Sequence[ContextItem], budget: int, count: TokenCounter = approx_tokens
) -> AssembledSection:
    """Drop the lowest-scoring items until the rest fit `budget`.

    Equal scores keep the earlier item (retrievers list their best first), so the outcome is
    deterministic. The kept set is exactly the longest run of the score ranking that fits: an item is
    never kept while a higher-scoring one is dropped, even if the smaller one would have fitted,
    because a prompt that quietly prefers short items over relevant ones is worse than a shorter one.
    """
    costs = [count(item.text) for item in items]
    if any(c < 0 for c in costs):
        raise ValueError("a token counter returned a negative count")
    ranking = sorted(range(len(items)), key=lambda i: (-items[i].score, i))
    used = sum(costs)
    cut = len(ranking)
    while used > budget and cut > 0:
        cut -= 1
        used -= costs[ranking[cut]]
    kept_positions = sorted(ranking[:cut])
    return AssembledSection(
        name=name,
        budget=budget,
        used_tokens=used,
        kept=[items[i] for i in kept_positions],
        dropped=[items[i] for i in reversed(ranking[cut:])],
    )


def assemble(
    sections: Mapping[str, Sequence[ContextItem]],
    budget: ContextBudget | None = None,
    count: TokenCounter = approx_tokens,
) -> AssembledContext:
    """Fit every given section into its budget; unknown section names are an error, not ignored."""
    budget = budget or ContextBudget()
    fitted = {name: fit_section(name, items, budget.of(name), count) for name, items in sections.items()}
    return AssembledContext(sections=fitted, generation_tokens=budget.generation)


class ContextAssembler:
    """A budget and a token counter bound together, so the agent is configured once."""

    def __init__(self, budget: ContextBudget | None = None, count: TokenCounter = approx_tokens) -> None:
        self.budget = budget or ContextBudget()
        self.count = count

    def assemble(self, sections: Mapping[str, Sequence[ContextItem]]) -> AssembledContext:
        return assemble(sections, self.budget, self.count)
