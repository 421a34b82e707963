"""The review actions and what a closed item feeds back: revalidated edits, cases, failures, MLflow."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from mlflow.entities import AssessmentSourceType
from mlflow.tracing.client import TracingClient

from casebase.accumulation import FailureCase
from casebase.reviewed_failures import ReviewedFailure, append_failure, read_failures
from compliance.review_queue import DecisionStatus, ItemStatus, ReviewQueue
from dashboards.resources import build_pump, build_service, open_case_base
from dashboards.review.assessments import HumanAssessmentLogger, LogStatus
from dashboards.review.revalidate import check_reply, utterance_context
from dashboards.settings import DashboardSettings
from tests.dashboards.conftest import (
    DB_BAD_REPLY,
    DB_GOOD_REPLY,
    DB_QUESTION,
    NOW,
    VULNERABLE_CUSTOMER,
    VULNERABLE_QUESTION,
    VULNERABLE_REPLY,
    escalate,
    make_trace,
    rules_validator,
)

ALICE = "alice@example.com"
BOB = "bob@example.com"


def test_the_validator_sees_an_edit_as_the_answer_to_the_escalated_turn(queue: ReviewQueue) -> None:
    item = queue.get(escalate(queue, reply=DB_BAD_REPLY))
    ctx = utterance_context(item.payload, "An edited reply.")
    assert ctx.customer_utterance == DB_QUESTION
    assert ctx.advisor_utterance == "An edited reply."
    assert ctx.customer.has_db
    validator = rules_validator()
    assert check_reply(validator, item.payload, DB_GOOD_REPLY).passed
    refused = check_reply(validator, item.payload, DB_BAD_REPLY)
    assert not refused.passed
    assert "PERSONAL_RECOMMENDATION" in refused.codes
    assert any(f.rule_id and f.message for f in refused.findings)


def test_a_failing_edit_is_refused_before_anything_is_stored(
    settings: DashboardSettings, queue: ReviewQueue
) -> None:
    service = build_service(settings, queue, rules_validator())
    item_id = escalate(queue, reply=DB_BAD_REPLY)
    assert service.claim(item_id, ALICE).ok
    attempt = service.edit_and_approve(item_id, ALICE, DB_BAD_REPLY + " Trust me.", "tidied")
    assert attempt.result is None and not attempt.recorded
    assert attempt.edit_check is not None and not attempt.edit_check.passed
    assert queue.decisions(item_id) == []
    assert queue.state(item_id).lease_holder == ALICE  # still held: the reviewer edits again

    attempt = service.edit_and_approve(item_id, ALICE, DB_GOOD_REPLY, "removed the recommendation")
    assert attempt.recorded
    outcome = queue.outcome(item_id)
    assert outcome.decision == "edit_approve"
    assert outcome.text == DB_GOOD_REPLY
    assert outcome.edited_text_passed is True


def test_an_approved_training_reply_becomes_a_verified_case(
    settings: DashboardSettings, queue: ReviewQueue
) -> None:
    service = build_service(settings, queue, rules_validator())
    item_id = escalate(queue)
    assert service.claim(item_id, ALICE).ok
    attempt = service.approve(item_id, ALICE, "the DB warning and the signpost are both there")
    assert attempt.recorded and attempt.feedback is not None and attempt.feedback.error is None
    [report] = attempt.feedback.reports
    cases = open_case_base(settings)
    case = cases.get(report.case_id)
    assert case.provenance == "virtual_training"
    assert case.compliance_verified
    assert case.guidance == DB_GOOD_REPLY
    assert case.context == DB_QUESTION
    assert f"review:{item_id}" in case.source_ids and "consultation-00002" in case.source_ids
    assert ALICE in case.reasoning
    assert cases.search(DB_QUESTION, task_type=case.task_type)[0].case.id == case.id
    assert read_failures(settings.failures_path) == []


def test_an_approved_live_reply_is_a_human_validated_live_case(
    settings: DashboardSettings, queue: ReviewQueue
) -> None:
    service = build_service(settings, queue, rules_validator())
    item_id = escalate(
        queue,
        customer=VULNERABLE_CUSTOMER,
        question=VULNERABLE_QUESTION,
        reply=VULNERABLE_REPLY,
        source="live",
        mode="production",
        consultation_id=None,
        session_id="session-77",
    )
    assert service.claim(item_id, ALICE).ok
    attempt = service.approve(item_id, ALICE, "kind, clear and unhurried")
    [report] = attempt.feedback.reports
    case = open_case_base(settings).get(report.case_id)
    assert case.provenance == "human_validated_live"
    assert "session-77" in case.source_ids


def test_a_rejection_becomes_a_failure_for_rule_accumulation(
    settings: DashboardSettings, queue: ReviewQueue
) -> None:
    service = build_service(settings, queue, rules_validator())
    item_id = escalate(queue, reply=DB_BAD_REPLY)
    assert service.claim(item_id, ALICE).ok
    attempt = service.reject(
        item_id, ALICE, ["PERSONAL_RECOMMENDATION", "MISSING_DB_WARNING"], "steers to a transfer"
    )
    assert attempt.recorded
    [report] = attempt.feedback.reports
    assert report.case_id is None and report.failure_line == 1 and report.failure_appended
    [reviewed] = read_failures(settings.failures_path)
    assert reviewed.item_id == item_id and reviewed.reviewers == [ALICE]
    failure = reviewed.failure
    assert isinstance(failure, FailureCase)
    assert failure.said == DB_BAD_REPLY
    assert failure.customer_utterance == DB_QUESTION
    assert failure.violations == ["MISSING_DB_WARNING", "PERSONAL_RECOMMENDATION"]
    assert failure.consultation_id == "consultation-00002"
    assert open_case_base(settings).size == 0


def test_an_edit_teaches_both_the_corrected_case_and_the_failure(
    settings: DashboardSettings, queue: ReviewQueue
) -> None:
    service = build_service(settings, queue, rules_validator())
    item_id = escalate(queue, reply=DB_BAD_REPLY)
    assert service.claim(item_id, ALICE).ok
    attempt = service.edit_and_approve(
        item_id, ALICE, DB_GOOD_REPLY, "rewrote it as guidance", ["PERSONAL_RECOMMENDATION"]
    )
    [report] = attempt.feedback.reports
    case = open_case_base(settings).get(report.case_id)
    assert case.guidance == DB_GOOD_REPLY
    # The validator had flagged these on the candidate; the corrected reply handles them.
    assert {"PERSONAL_RECOMMENDATION", "MISSING_DB_WARNING"} <= set(case.covered_codes)
    [reviewed] = read_failures(settings.failures_path)
    assert reviewed.corrected_reply == DB_GOOD_REPLY
    assert reviewed.failure.said == DB_BAD_REPLY


def test_feedback_is_idempotent_and_follows_a_cursor(settings: DashboardSettings, queue: ReviewQueue) -> None:
    service = build_service(settings, queue, rules_validator())
    approve_id = escalate(queue)
    reject_id = escalate(queue, reply=DB_BAD_REPLY, consultation_id="consultation-00003")
    service.claim(approve_id, ALICE)
    service.approve(approve_id, ALICE)
    service.claim(reject_id, ALICE)
    service.reject(reject_id, ALICE, ["PERSONAL_RECOMMENDATION"], "advice")
    pump = build_pump(settings, queue, rules_validator())
    assert pump.cursor.read().seq == 2
    assert pump.catch_up().reports == []  # nothing new past the cursor
    # Replaying every outcome (a lost cursor file) adds nothing twice.
    settings.feedback_cursor_path.unlink()
    replay = pump.catch_up()
    assert [r.item_id for r in replay.reports] == [approve_id, reject_id]
    assert replay.reports[1].failure_appended is False
    assert len(read_failures(settings.failures_path)) == 1
    assert open_case_base(settings).size == 1


def test_a_failed_sink_keeps_the_outcome_for_the_next_pass(
    settings: DashboardSettings, queue: ReviewQueue, tmp_path: Path
) -> None:
    blocked = settings.model_copy(update={"failures_path": tmp_path / "not-a-file"})
    blocked.failures_path.mkdir()
    service = build_service(blocked, queue, rules_validator())
    item_id = escalate(queue, reply=DB_BAD_REPLY)
    service.claim(item_id, ALICE)
    attempt = service.reject(item_id, ALICE, ["PERSONAL_RECOMMENDATION"], "advice")
    assert attempt.recorded  # the decision stands
    assert attempt.feedback.error is not None and item_id in attempt.feedback.error
    assert attempt.feedback.cursor == 0
    blocked.failures_path.rmdir()
    again = build_pump(blocked, queue, rules_validator()).catch_up()
    assert again.error is None and [r.item_id for r in again.reports] == [item_id]
    assert len(read_failures(blocked.failures_path)) == 1


def test_a_double_reviewed_item_feeds_learning_once_both_reviews_are_in(
    settings: DashboardSettings, clock
) -> None:
    with ReviewQueue(settings.review_queue_url, clock, double_review_rate=1.0) as queue:
        service = build_service(settings, queue, rules_validator())
        item_id = escalate(queue)
        service.claim(item_id, ALICE)
        first = service.approve(item_id, ALICE)
        assert first.recorded and first.result.outcome is None and first.feedback is None
        assert queue.state(item_id).status is ItemStatus.OPEN
        assert service.claim(item_id, ALICE).status == "already_reviewed"
        service.claim(item_id, BOB)
        second = service.approve(item_id, BOB)
        assert second.result.outcome is not None
        assert second.result.outcome.reviewers == [ALICE, BOB]
        assert [r.item_id for r in second.feedback.reports] == [item_id]


def test_a_decision_after_the_lease_ran_out_is_refused(
    settings: DashboardSettings, queue: ReviewQueue, clock
) -> None:
    service = build_service(settings, queue, rules_validator())
    item_id = escalate(queue)
    service.claim(item_id, ALICE)
    clock.advance(timedelta(seconds=settings.lease_seconds + 1))
    attempt = service.approve(item_id, ALICE)
    assert attempt.result.status is DecisionStatus.LEASE_EXPIRED
    assert attempt.feedback is None and queue.decisions(item_id) == []


def test_human_decisions_are_logged_on_the_consultations_trace(
    settings: DashboardSettings, queue: ReviewQueue, tmp_path: Path
) -> None:
    # Two runs both had a consultation-00002; the one going when the item was escalated is its run.
    older = make_trace(
        settings.tracking_uri,
        tmp_path,
        "consultation-00002",
        (NOW - timedelta(days=3), NOW - timedelta(days=2)),
    )
    trace_id = make_trace(
        settings.tracking_uri,
        tmp_path,
        "consultation-00002",
        (NOW - timedelta(minutes=5), NOW + timedelta(hours=1)),
    )
    service = build_service(settings, queue, rules_validator())
    item_id = escalate(queue, reply=DB_BAD_REPLY)
    service.claim(item_id, ALICE)
    attempt = service.reject(item_id, ALICE, ["PERSONAL_RECOMMENDATION"], "steers to a transfer")
    [report] = attempt.feedback.reports
    assert report.assessment.status is LogStatus.LOGGED and report.assessment.trace_id == trace_id

    tracing = TracingClient(settings.tracking_uri)
    compliance = [a for a in tracing.get_trace_info(trace_id).assessments if a.name == "compliance"]
    [human] = [a for a in compliance if a.source.source_type == AssessmentSourceType.HUMAN]
    [validator] = [a for a in compliance if a.source.source_type != AssessmentSourceType.HUMAN]
    assert human.span_id == validator.span_id  # beside the validator's verdict on the escalated turn
    assert human.value is False
    assert human.source.source_id == ALICE
    assert "steers to a transfer" in human.rationale and "PERSONAL_RECOMMENDATION" in human.rationale
    assert human.metadata["review_item_id"] == item_id
    assert all(
        a.source.source_type != AssessmentSourceType.HUMAN for a in tracing.get_trace_info(older).assessments
    )

    logger = HumanAssessmentLogger(settings.tracking_uri, [settings.experiment])
    again = logger.log_decisions(queue.get(item_id), queue.decisions(item_id))
    assert again.status is LogStatus.ALREADY_LOGGED
    assert len(tracing.get_trace_info(trace_id).assessments) == 2


def test_an_assessment_waits_for_a_trace_written_after_the_decision(
    settings: DashboardSettings, queue: ReviewQueue, tmp_path: Path
) -> None:
    service = build_service(settings, queue, rules_validator())
    item_id = escalate(queue)
    service.claim(item_id, ALICE)
    attempt = service.approve(item_id, ALICE, "fine")
    assert attempt.feedback.reports[0].assessment.status is LogStatus.NO_TRACE
    pump = build_pump(settings, queue, rules_validator())
    assert pump.cursor.read().pending_assessments == [item_id]
    # The training run writes the day's traces; the next pass finds this one and logs the decision.
    trace_id = make_trace(
        settings.tracking_uri,
        tmp_path,
        "consultation-00002",
        (NOW - timedelta(minutes=5), NOW + timedelta(hours=1)),
    )
    later = pump.catch_up()
    assert later.reports == [] and [log.trace_id for log in later.retried] == [trace_id]
    assert pump.cursor.read().pending_assessments == []
    human = [
        a
        for a in TracingClient(settings.tracking_uri).get_trace_info(trace_id).assessments
        if a.source.source_type == AssessmentSourceType.HUMAN
    ]
    assert [a.value for a in human] == [True]


def test_an_item_without_a_trace_is_reported_not_guessed(
    settings: DashboardSettings, queue: ReviewQueue
) -> None:
    logger = HumanAssessmentLogger(settings.tracking_uri, [settings.experiment])
    item_id = escalate(queue, consultation_id="consultation-04242")
    assert logger.log_decisions(queue.get(item_id), []).status is LogStatus.NO_TRACE


def test_the_failures_file_holds_one_line_per_item(queue: ReviewQueue, tmp_path: Path) -> None:

    path = tmp_path / "failures.jsonl"
    failure = FailureCase(
        consultation_id="consultation-00001",
        task_type="drawdown",
        customer_utterance="Can I take it all?",
        said="Take it all now.",
        violations=["PERSONAL_RECOMMENDATION"],
    )
    first = ReviewedFailure(
        item_id="a", source="training", decision="reject", reviewers=[ALICE], decided_at=NOW, failure=failure
    )
    assert append_failure(path, first).model_dump() == {"appended": True, "line": 1}
    assert append_failure(path, first).model_dump() == {"appended": False, "line": 1}
    second = first.model_copy(update={"item_id": "b"})
    assert append_failure(path, second).line == 2
    assert [f.item_id for f in read_failures(path)] == ["a", "b"]
    assert [f.item_id for f in read_failures(path, start=1)] == ["b"]
