"""Queue policy: how risky an item is, which item comes first, and which items are reviewed twice.

These are operating choices of the compliance team, not regulatory figures, so they are plain
models with defaults that the Hydra config can override.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field

from compliance.review_queue.models import RiskFactor

_DEFAULT_WEIGHTS: dict[RiskFactor, float] = {
    RiskFactor.DB_TRANSFER: 0.5,
    RiskFactor.SCAM_SUSPECTED: 0.5,
    RiskFactor.VULNERABLE: 0.4,
    RiskFactor.LARGE_POT: 0.3,
    RiskFactor.SPLIT_VOTE: 0.2,
    RiskFactor.LOW_CONFIDENCE: 0.2,
    RiskFactor.NOVEL_PATTERN: 0.2,
}


class RiskWeights(BaseModel):
    """Per-factor weights combined as a noisy-or: risk = 1 - prod(1 - w) over the item's factors.

    A noisy-or stays within 0..1 however many factors pile up, and each extra factor still raises
    the risk, which a capped sum would not do once it hit the cap.
    """

    model_config = ConfigDict(frozen=True)

    weights: dict[RiskFactor, float] = Field(default_factory=lambda: dict(_DEFAULT_WEIGHTS))

    def score(self, factors: list[RiskFactor]) -> float:
        keep = 1.0
        for factor in set(factors):
            weight = self.weights.get(factor, 0.0)
            if not 0.0 <= weight <= 1.0:
                raise ValueError(f"risk weight for {factor} must be within 0..1, got {weight}")
            keep *= 1.0 - weight
        return 1.0 - keep


class PriorityPolicy(BaseModel):
    """priority = risk + live_bonus (live items only) + age / age_per_risk_point.

    Computed at query time from the injected clock, so an item's priority rises while it waits:
    with the defaults a risk-0 training item that has waited 4 hours ranks level with a fresh
    risk-1 item, so nothing starves. Live items get a bonus because a real customer is waiting
    for the answer, while a training escalation only delays the simulation's learning.
    """

    model_config = ConfigDict(frozen=True)

    age_per_risk_point: timedelta = timedelta(hours=4)
    live_bonus: float = Field(default=0.5, ge=0.0)

    def priority(self, risk: float, age: timedelta, live: bool) -> float:
        return risk + (self.live_bonus if live else 0.0) + age / self.age_per_risk_point


def needs_double_review(item_id: str, rate: float) -> bool:
    """Whether an item is in the blind double-review sample.

    Deterministic in the item id (a hash, not a random draw) so every process agrees, re-running
    a simulation selects the same items, and an auditor can recompute the sample.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"double review rate must be within 0..1, got {rate}")
    digest = hashlib.sha256(item_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") < rate * 2**64
