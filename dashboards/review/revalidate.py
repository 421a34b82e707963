"""Validating a reviewer's edited reply before it is accepted.

A human edit is new text nobody has checked, and nothing unvalidated may reach a customer, so the
edit goes through the same compliance validator as the advisor's drafts, in the setting the item
was escalated in (the customer, the conversation, the customer's last words), rebuilt from the
review payload. The edit passes when the validator finds no violation; the validator's own
escalation reasons (a DB transfer, a vulnerable customer) are ignored here, because they ask for
the human review that is happening.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from compliance.knowledge import load_knowledge
from compliance.models import CustomerProfile, Turn, UtteranceContext, Validator
from compliance.review_queue import ReviewPayload
from compliance.rules import RuleEngine
from compliance.rules_only import RulesOnlyValidator


class RuleFinding(BaseModel):
    code: str
    rule_id: str
    message: str
    source: str = ""
    evidence: str = ""


class EditCheck(BaseModel):
    """The validator's verdict on a reply, in the shape the review page shows and the store records."""

    passed: bool
    codes: list[str] = Field(default_factory=list)
    findings: list[RuleFinding] = Field(default_factory=list)
    decided_by: str


def default_validator() -> Validator:
    """The deterministic rule stage on the packaged knowledge base: no LLM, same verdict every time."""
    return RulesOnlyValidator(RuleEngine(load_knowledge()))


def utterance_context(payload: ReviewPayload, reply: str) -> UtteranceContext:
    """The validator's view of `reply` given as the answer to the escalated turn of `payload`.

    The conversation ends with the customer's words the reply answers; earlier customer and
    advisor turns become the history ("system" notes are not conversation and are left out).
    """
    turns = [t for t in payload.conversation if t.role in ("customer", "advisor")]
    last_customer = max((i for i, t in enumerate(turns) if t.role == "customer"), default=None)
    if last_customer is None:
        raise ValueError("the review payload has no customer turn to answer")
    return UtteranceContext(
        customer=CustomerProfile.model_validate(payload.customer),
        customer_utterance=turns[last_customer].text,
        advisor_utterance=reply,
        history=[Turn(speaker=t.role, text=t.text) for t in turns[:last_customer]],
    )


def check_reply(validator: Validator, payload: ReviewPayload, reply: str) -> EditCheck:
    if not reply.strip():
        raise ValueError("the edited reply is empty")
    result = asyncio.run(validator.validate(utterance_context(payload, reply)))
    return EditCheck(
        passed=result.compliant,
        codes=[str(c) for c in result.violations],
        findings=[
            RuleFinding(
                code=str(h.code), rule_id=h.rule_id, message=h.message, source=h.source, evidence=h.evidence
            )
            for h in result.rule_hits
        ],
        decided_by=result.decided_by,
    )
