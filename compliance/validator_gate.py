"""The gate every advisor utterance passes: validate, refine and retry, or hold and escalate.

A draft is delivered only if the validator passes it without asking for escalation. A failed
draft is rewritten with the validator's findings as feedback and validated again, a bounded
number of times. When the validator asks for a human (high stakes, low confidence, a split vote)
or the refinements run out, the customer gets the holding reply and the case goes to the review
queue with every draft and verdict. Nothing unvalidated is ever delivered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pydantic import BaseModel, Field

from compliance.models import UtteranceContext, ValidationResult, Validator


class GateAttempt(BaseModel):
    draft: str
    validation: ValidationResult


class GateOutcome(BaseModel):
    """What the gate did with one utterance: the audit record of a turn."""

    delivered_text: str
    holding: bool
    escalated: bool
    escalation_id: str | None = None
    hold_reason: str | None = None
    attempts: list[GateAttempt] = Field(min_length=1)

    @property
    def first_pass(self) -> ValidationResult:
        return self.attempts[0].validation

    @property
    def final(self) -> ValidationResult:
        return self.attempts[-1].validation

    @property
    def refinements(self) -> int:
        return len(self.attempts) - 1

    @property
    def first_pass_compliant(self) -> bool:
        return self.first_pass.compliant


# Given the rejected draft and its validation, return a rewritten draft.
Refiner = Callable[[str, ValidationResult], Awaitable[str]]


class EscalationSink(Protocol):
    """Where a held utterance goes for a human decision (the review queue).

    `where` is whatever the caller passed to `pass_through` to say where the turn comes from
    (for the review queue, a `compliance.escalation.EscalationContext`).
    """

    async def escalate(
        self, ctx: UtteranceContext, attempts: list[GateAttempt], reason: str, where: Any = None
    ) -> str: ...


class ComplianceGate:
    def __init__(
        self,
        validator: Validator,
        *,
        holding_reply: str,
        max_refinements: int = 2,
        escalations: EscalationSink | None = None,
    ) -> None:
        if max_refinements < 0:
            raise ValueError("max_refinements cannot be negative")
        self.validator = validator
        self.holding_reply = holding_reply
        self.max_refinements = max_refinements
        self.escalations = escalations

    async def pass_through(
        self,
        ctx: UtteranceContext,
        draft: str,
        refine: Refiner,
        annotations_for: Callable[[str], dict[str, Any]] | None = None,
        where: Any = None,
    ) -> GateOutcome:
        """`annotations_for` gives structured facts about a draft (its parts) that judges may use."""
        attempts: list[GateAttempt] = []
        current = draft
        while True:
            update: dict[str, Any] = {"advisor_utterance": current}
            if annotations_for is not None:
                update["annotations"] = annotations_for(current)
            checked = ctx.model_copy(update=update)
            validation = await self.validator.validate(checked)
            attempts.append(GateAttempt(draft=current, validation=validation))
            if validation.escalate:
                return await self._hold(ctx, attempts, "the validator asked for a human decision", where)
            if validation.compliant:
                return GateOutcome(delivered_text=current, holding=False, escalated=False, attempts=attempts)
            if len(attempts) > self.max_refinements:
                return await self._hold(
                    ctx, attempts, f"still non-compliant after {self.max_refinements} refinements", where
                )
            current = await refine(current, validation)

    async def _hold(
        self, ctx: UtteranceContext, attempts: list[GateAttempt], reason: str, where: Any
    ) -> GateOutcome:
        escalation_id = None
        if self.escalations is not None:
            escalation_id = await self.escalations.escalate(ctx, attempts, reason, where)
        return GateOutcome(
            delivered_text=self.holding_reply,
            holding=True,
            escalated=True,
            escalation_id=escalation_id,
            hold_reason=reason,
            attempts=attempts,
        )
