"""The review page's actions, free of Streamlit: claim, release and the three decisions.

An edited reply is validated before anything is stored, and refused (nothing recorded) when the
validator still finds a violation: the reviewer sees the findings and edits again. Once a decision
closes an item, the feedback pump feeds the outcome into learning; the decision stands even if
that step fails, and the pump retries on its next pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel

from compliance.models import Validator
from compliance.review_queue import ClaimResult, DecisionResult, QueueFilter, ReleaseResult, ReviewQueue
from dashboards.review.feedback import CatchUp, FeedbackPump
from dashboards.review.revalidate import EditCheck, check_reply


class DecisionAttempt(BaseModel):
    """What happened to a submitted decision: recorded (or refused by the store), or an edit
    refused by the validator before reaching the store (`result` None)."""

    result: DecisionResult | None = None
    edit_check: EditCheck | None = None
    feedback: CatchUp | None = None

    @property
    def recorded(self) -> bool:
        return self.result is not None and self.result.ok


class ReviewService:
    def __init__(
        self,
        queue: ReviewQueue,
        validator: Validator,
        lease_seconds: float,
        feedback: Callable[[], FeedbackPump] | None = None,
    ) -> None:
        """`feedback` builds the pump when an item first closes, so a page that only reads the
        queue never opens the vector store."""
        self.queue = queue
        self.validator = validator
        self.lease_seconds = lease_seconds
        self.feedback = feedback

    def claim(self, item_id: str, reviewer: str) -> ClaimResult:
        return self.queue.claim(item_id, reviewer, lease_seconds=self.lease_seconds)

    def claim_next(self, reviewer: str, filters: QueueFilter | None = None) -> ClaimResult:
        return self.queue.claim_next(reviewer, filters, lease_seconds=self.lease_seconds)

    def release(self, item_id: str, reviewer: str) -> ReleaseResult:
        return self.queue.release(item_id, reviewer, reason="released without a decision")

    def check_edit(self, item_id: str, text: str) -> EditCheck:
        item = self.queue.get(item_id)
        if item is None:
            raise LookupError(f"no item {item_id}")
        return check_reply(self.validator, item.payload, text)

    def approve(self, item_id: str, reviewer: str, reason: str = "") -> DecisionAttempt:
        return self._recorded(self.queue.decide(item_id, reviewer, "approve", reason=reason))

    def reject(
        self, item_id: str, reviewer: str, reason_codes: Sequence[str], reason: str
    ) -> DecisionAttempt:
        return self._recorded(self.queue.decide(item_id, reviewer, "reject", reason_codes, reason))

    def edit_and_approve(
        self, item_id: str, reviewer: str, text: str, reason: str, reason_codes: Sequence[str] = ()
    ) -> DecisionAttempt:
        check = self.check_edit(item_id, text)
        if not check.passed:
            return DecisionAttempt(edit_check=check)
        result = self.queue.decide(
            item_id, reviewer, "edit_approve", reason_codes, reason, text, edited_text_passed=True
        )
        attempt = self._recorded(result)
        attempt.edit_check = check
        return attempt

    def _recorded(self, result: DecisionResult) -> DecisionAttempt:
        feedback = None
        if result.ok and result.outcome is not None and self.feedback is not None:
            feedback = self.feedback().catch_up()
        return DecisionAttempt(result=result, feedback=feedback)
