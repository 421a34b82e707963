"""What a closed review item teaches the advisor: a human-validated case, a reviewed failure, or both.

- approve: the candidate reply becomes a case (compliance-verified by a person);
- edit_approve: the edited reply becomes a case, and the candidate, which could not go out as
  written, becomes a failure whose better alternative is the reviewer's text;
- reject: the candidate becomes a failure with the reviewer's reason codes as its violations.

Training items become `virtual_training` cases (a person checked them, but the customer was
simulated); live items become `human_validated_live` cases. The item does not say which kind of
consultation it was, so the task type is read from the customer's words by the case base's own
keyword classifier.
"""

from __future__ import annotations

from casebase.accumulation import FailureCase
from casebase.classify import KeywordClassifier
from casebase.models import Case, CaseOutcome, TaskType
from casebase.reviewed_failures import ReviewedFailure
from compliance.review_queue import Outcome, ReviewItem
from dashboards.review.revalidate import EditCheck


def customer_words(item: ReviewItem) -> list[str]:
    return [t.text for t in item.payload.conversation if t.role == "customer"]


def answered_utterance(item: ReviewItem) -> str:
    """What the customer said that the held reply answers (the last customer turn)."""
    words = customer_words(item)
    if not words:
        raise ValueError(f"item {item.id} has no customer turn")
    return words[-1]


def task_type_of(item: ReviewItem, classifier: KeywordClassifier) -> TaskType:
    return classifier.classify(" ".join(customer_words(item))).task_type


def first_pass_compliant(item: ReviewItem) -> bool | None:
    return item.payload.drafts[0].compliant if item.payload.drafts else None


def origin_id(item: ReviewItem) -> str:
    return item.consultation_id or item.session_id or item.id


def reviewed_case(
    item: ReviewItem, outcome: Outcome, final_check: EditCheck, classifier: KeywordClassifier
) -> Case | None:
    """The case an approved item adds to the case base, or None when the reply was rejected.

    `final_check` is the validator's verdict on the delivered text; the codes the validator had
    flagged on the way here and that the delivered text no longer breaks are what the case shows
    done right (`covered_codes`).
    """
    if outcome.decision == "reject" or outcome.text is None:
        return None
    flagged = set(item.codes) | {c for d in item.payload.drafts for c in d.codes}
    covered = sorted(flagged - set(final_check.codes))
    who = ", ".join(outcome.reviewers)
    how = "edited and approved" if outcome.decision == "edit_approve" else "approved"
    reasoning = f"Compliance review {how} this reply ({who})"
    if outcome.reason:
        reasoning += f": {outcome.reason}"
    return Case(
        task_type=task_type_of(item, classifier),
        customer_profile=dict(item.payload.customer),
        context=answered_utterance(item),
        guidance=outcome.text,
        reasoning=reasoning,
        outcome=CaseOutcome(
            first_pass_compliant=first_pass_compliant(item),
            escalated=True,
            notes=f"review item {item.id}; escalated at stage {item.stage}: {item.reason}",
        ),
        compliance_verified=True,
        covered_codes=covered,
        provenance="human_validated_live" if item.source == "live" else "virtual_training",
        source_ids=[origin_id(item), f"review:{item.id}"],
    )


def reviewed_failure(
    item: ReviewItem, outcome: Outcome, classifier: KeywordClassifier
) -> ReviewedFailure | None:
    """The failure a rejected (or corrected) candidate reply feeds to rule accumulation."""
    if outcome.decision == "approve":
        return None
    violations = list(outcome.reason_codes) or list(item.codes)
    who = ", ".join(outcome.reviewers)
    notes = f"review item {item.id}: {outcome.decision} by {who}"
    if outcome.reason:
        notes += f" ({outcome.reason})"
    corrected = outcome.text if outcome.decision == "edit_approve" else None
    if corrected:
        notes += f". The reviewer's corrected reply: {corrected}"
    return ReviewedFailure(
        item_id=item.id,
        source=item.source,
        decision=outcome.decision,
        reviewers=list(outcome.reviewers),
        decided_at=outcome.decided_at,
        reason_codes=list(outcome.reason_codes),
        reason=outcome.reason,
        corrected_reply=corrected,
        failure=FailureCase(
            consultation_id=origin_id(item),
            task_type=task_type_of(item, classifier),
            customer_profile=dict(item.payload.customer),
            customer_utterance=answered_utterance(item),
            said=item.payload.candidate_reply,
            violations=violations,
            outcome=CaseOutcome(first_pass_compliant=first_pass_compliant(item), escalated=True),
            notes=notes,
        ),
    )
