"""A real consultation becomes a case only when a person approves it, and only redacted.

Conditions, all checked: the customer agreed to it (`Consent.learning`), the session is closed,
no reply is still waiting for review, it has not become a case already, and it delivered at
least one reply. The case keeps the situation and the guidance that passed the gate (or a
reviewer), with names, addresses, dates, account and National Insurance numbers and the like
removed first (`environments.live.redaction`); the customer's name is never stored.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from casebase import CaseBase
from casebase.models import Case, CaseOutcome
from compliance.codes import ComplianceCode
from compliance.models import CustomerProfile
from environments.learning import SEGMENT_CODES
from environments.live.redaction import Redactor
from environments.live.runtime import NotEligible
from environments.live.store import LiveStore, MessageRecord, SessionRecord, ValidationRow
from environments.replay import situation_profile

DELIVERED_KINDS = ("reply", "review_delivery")


class LearnedCase(BaseModel):
    case: Case
    merged: bool
    redacted: dict[str, int]  # label -> how many were removed


def covered_codes(messages: list[MessageRecord]) -> list[str]:
    kinds = {k for m in messages for k in m.segment_kinds}
    codes = {str(SEGMENT_CODES[k]) for k in kinds if k in SEGMENT_CODES}
    if "advice_signpost" in kinds:
        codes.add(str(ComplianceCode.PERSONAL_RECOMMENDATION))
    return sorted(codes)


def eligibility(session: SessionRecord, delivered: list[MessageRecord]) -> str | None:
    """Why the session cannot become a case, or None if it can."""
    if not session.consent.get("learning"):
        return "the customer did not agree to their consultation being used for learning"
    if session.status != "closed":
        return "the session is still open; close it first"
    if session.pending_item is not None:
        return "a reply is still waiting for review"
    if session.case_id is not None:
        return f"it already became case {session.case_id}"
    if not delivered:
        return "it delivered no reply to learn from"
    return None


def case_from(
    session: SessionRecord, messages: list[MessageRecord], validations: list[ValidationRow], reviewer: str
) -> tuple[Case, dict[str, int]]:
    customer = [m for m in messages if m.role == "customer"]
    delivered = [m for m in messages if m.kind in DELIVERED_KINDS]
    profile = session.profile
    texts = [m.text for m in customer] + [m.text for m in delivered] + [profile.get("situation", "")]
    redacted, found = Redactor([profile["name"]]).redact_all(texts)
    said, guidance, situation = redacted[: len(customer)], redacted[len(customer) : -1], redacted[-1]
    known = session.state["customer"]
    first_passes = [v for v in validations if v.attempt == 0]
    codes = covered_codes(delivered)
    case = Case(
        task_type=profile["goal"],
        customer_profile=situation_profile(
            CustomerProfile(
                age=profile["age"],
                pots=known["pots"],
                situation=situation,
                literacy=profile["literacy"],
                vulnerable=bool(known["vulnerable"]),
            ),
            "[NAME]",
            disclosed=sorted(session.state["consultation"]["revealed"]),
        ),
        context=said[0],
        guidance=" ".join(guidance),
        reasoning=f"A live consultation approved by reviewer {reviewer}; every reply passed the compliance "
        "gate or a reviewer" + (f"; it handled {', '.join(codes)}" if codes else ""),
        outcome=CaseOutcome(
            first_pass_compliant=all(v.compliant for v in first_passes),
            escalated=any(m.kind == "holding" for m in messages),
        ),
        compliance_verified=True,
        covered_codes=codes,
        provenance="human_validated_live",
        source_ids=[session.id],
    )
    return case, found


async def learn_from_session(
    store: LiveStore, cases: CaseBase, session: SessionRecord, reviewer: str
) -> LearnedCase:
    messages = await asyncio.to_thread(store.messages, session.id)
    delivered = [m for m in messages if m.kind in DELIVERED_KINDS]
    refusal = eligibility(session, delivered)
    if refusal is not None:
        raise NotEligible(f"session {session.id} cannot become a case: {refusal}")
    validations = await asyncio.to_thread(store.validations, session.id)
    case, found = case_from(session, messages, validations, reviewer)
    # Adding first: a case's id is a hash of its content, so adding it again after a crash
    # between the two steps rewrites the same record instead of making a second one.
    added = await asyncio.to_thread(cases.add, case)
    await asyncio.to_thread(store.mark_case, session.id, added.case.id)
    return LearnedCase(case=added.case, merged=added.merged, redacted=found)
