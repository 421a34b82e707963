"""A real customer: the profile and consent given when a session opens, and what they say later.

`LiveCustomer` is what the advisor sees (it satisfies `environments.advisor.AdvisedCustomer`).
Unlike a simulated customer it has no secrets: a fact is added to `hidden` only once the
customer has said it, with their own words as the statement, and its topic is revealed at once.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from compliance.models import CustomerProfile, Pot
from environments.population import HiddenFact, TaskType


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PotIn(Strict):
    type: Literal["DC", "DB"]
    value_gbp: float = Field(ge=0, le=1_000_000_000)
    provider: str = Field(default="", max_length=120)
    has_guarantees: bool = False


class LiveProfile(Strict):
    """What the firm holds on file for the customer; only what guidance needs."""

    name: str = Field(min_length=1, max_length=120, description="how the advisor addresses them")
    age: int = Field(ge=16, le=120)
    pots: list[PotIn] = Field(default_factory=list, max_length=20)
    situation: str = Field(default="", max_length=500)
    literacy: Literal["low", "medium", "high"] = "medium"
    vulnerable: bool = False
    goal: TaskType = Field(description="what they want guidance on")


class Consent(Strict):
    """What the customer agreed to when the session opened."""

    guidance_only: Literal[True] = Field(
        description="they understand this is guidance, not regulated advice (required)"
    )
    remember: bool = Field(
        default=False, description="the advisor may recall this conversation in their later sessions"
    )
    learning: bool = Field(
        default=False,
        description="once a person has approved it, a redacted copy may teach the advisor",
    )


class LiveCustomer(BaseModel):
    id: str
    name: str
    age: int
    goal: TaskType
    literacy: Literal["low", "medium", "high"]
    vulnerable: bool
    situation: str
    pots: list[Pot]
    hidden: list[HiddenFact] = Field(default_factory=list)

    @classmethod
    def from_profile(cls, owner: str, profile: LiveProfile) -> LiveCustomer:
        return cls(
            id=owner,
            name=profile.name,
            age=profile.age,
            goal=profile.goal,
            literacy=profile.literacy,
            vulnerable=profile.vulnerable,
            situation=profile.situation,
            pots=[Pot.model_validate(p.model_dump()) for p in profile.pots],
        )

    def profile(self, revealed: set[str] | None = None) -> CustomerProfile:
        return CustomerProfile(
            age=self.age,
            pots=list(self.pots),
            situation=self.situation,
            literacy=self.literacy,
            vulnerable=self.vulnerable,
        )

    def tell(self, topic: str, statement: str) -> None:
        self.hidden.append(HiddenFact(topic=topic, statement=statement))

    def became_vulnerable(self, situation: str) -> None:
        """The customer told us something that makes them vulnerable (FCA FG21/1 drivers)."""
        self.vulnerable = True
        self.situation = situation if not self.situation else f"{self.situation}; {situation}"
