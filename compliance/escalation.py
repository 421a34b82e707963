"""Escalations into the human review queue: the `EscalationSink` the gate hands held replies to.

Everything the reviewer needs travels with the item: the customer, the conversation so far, every
draft with its verdict, the rule hits, each judge's verdict and what the advisor retrieved. The
item id is derived from the consultation and turn, so a retried escalation is never queued twice.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field

from compliance.codes import ComplianceCode
from compliance.models import UtteranceContext
from compliance.review_queue import ReviewQueue
from compliance.review_queue.models import (
    ConversationTurn,
    DraftRecord,
    JudgeVerdictRecord,
    NewReviewItem,
    RetrievedContext,
    ReviewPayload,
    RiskFactor,
    RuleHitRecord,
)
from compliance.validator_gate import GateAttempt

# Words in an escalation reason (from the stakes detector and the hybrid validator) and the risk
# factor each one stands for; tests check every reason those produce maps to at least one factor.
REASON_FACTORS: dict[str, RiskFactor] = {
    "db transfer": RiskFactor.DB_TRANSFER,
    "vulnerable": RiskFactor.VULNERABLE,
    "pension wealth": RiskFactor.LARGE_POT,
    "confidence": RiskFactor.LOW_CONFIDENCE,
    "no judge": RiskFactor.LOW_CONFIDENCE,
    "split vote": RiskFactor.SPLIT_VOTE,
    "unlike any": RiskFactor.NOVEL_PATTERN,
}


class EscalationContext(BaseModel):
    """Who and where an escalation comes from, beyond the utterance itself."""

    consultation_id: str | None = None
    session_id: str | None = None
    turn: int = 0
    retrieved: RetrievedContext = Field(default_factory=RetrievedContext)


def risk_factors(reasons: list[str], codes: list[str], ctx: UtteranceContext) -> list[RiskFactor]:
    found: list[RiskFactor] = []
    for reason in reasons:
        lowered = reason.lower()
        found += [factor for words, factor in REASON_FACTORS.items() if words in lowered]
    if ComplianceCode.SCAM_RISK_IGNORED in codes:
        found.append(RiskFactor.SCAM_SUSPECTED)
    if ctx.customer.vulnerable:
        found.append(RiskFactor.VULNERABLE)
    return list(dict.fromkeys(found))


def review_item(
    ctx: UtteranceContext,
    attempts: list[GateAttempt],
    reason: str,
    *,
    source: Literal["training", "live"],
    mode: str,
    where: EscalationContext,
    run_id: str | None = None,
) -> NewReviewItem:
    last = attempts[-1].validation
    reasons = [reason, *dict.fromkeys(r for a in attempts for r in a.validation.escalation_reasons)]
    codes = [str(c) for c in last.violations]
    refined_out = not last.escalate and not last.compliant
    payload = ReviewPayload(
        customer=ctx.customer.model_dump(mode="json"),
        conversation=[ConversationTurn(role=t.speaker, text=t.text) for t in ctx.history]
        + [ConversationTurn(role="customer", text=ctx.customer_utterance)],
        candidate_reply=attempts[-1].draft,
        drafts=[
            DraftRecord(
                text=a.draft,
                compliant=a.validation.compliant,
                codes=[str(c) for c in a.validation.violations],
                decided_by=a.validation.decided_by,
            )
            for a in attempts
        ],
        retrieved=where.retrieved,
        rule_hits=[
            RuleHitRecord(rule_id=h.rule_id, code=str(h.code), source=h.source, detail=h.message)
            for h in last.rule_hits
        ],
        verdicts=[judge_record(v) for v in last.judge_verdicts],
        run_id=run_id,
    )
    return NewReviewItem(
        source=source,
        mode=mode,
        stage="refinement" if refined_out else last.decided_by,
        reason="; ".join(reasons),
        codes=codes,
        risk_factors=risk_factors(reasons, codes, ctx),
        consultation_id=where.consultation_id,
        session_id=where.session_id,
        payload=payload,
    )


def judge_record(raw: dict) -> JudgeVerdictRecord:
    verdict = raw.get("verdict") or {}
    return JudgeVerdictRecord(
        judge_id=raw["judge_id"],
        vendor=raw["vendor"],
        model=raw["model"],
        prompt_version=raw["prompt_version"],
        passed=verdict.get("passed"),
        confidence=verdict.get("confidence"),
        codes=list(verdict.get("codes", [])),
        reasoning=verdict.get("reasoning", ""),
        error=raw.get("error"),
    )


def escalation_id(where: EscalationContext, ctx: UtteranceContext, source: str, run_id: str | None) -> str:
    key = (
        f"{source}|{run_id}|{where.consultation_id}|{where.session_id}|{where.turn}|{ctx.customer_utterance}"
    )
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


class ReviewQueueSink:
    """Sends held replies to a `ReviewQueue` as training or live escalations.

    `run_id` (a training run's MLflow id) goes into each item and its id, because consultation
    ids repeat from run to run and several runs share one queue.
    """

    def __init__(
        self, queue: ReviewQueue, *, source: Literal["training", "live"], mode: str, run_id: str | None = None
    ) -> None:
        self.queue = queue
        self.source = source
        self.mode = mode
        self.run_id = run_id

    async def escalate(
        self,
        ctx: UtteranceContext,
        attempts: list[GateAttempt],
        reason: str,
        where: EscalationContext | None = None,
    ) -> str:
        where = where or EscalationContext()
        item = review_item(
            ctx, attempts, reason, source=self.source, mode=self.mode, where=where, run_id=self.run_id
        )
        return self.queue.enqueue(item, item_id=escalation_id(where, ctx, self.source, self.run_id))
