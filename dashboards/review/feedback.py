"""Feeding closed review items back into learning: case base, failures file, MLflow.

The pump follows the queue's outcome stream (`ReviewQueue.decided_since`) with a cursor kept in a
small JSON file, rather than acting inside the click handler alone: the decision is committed to
the queue first, and whatever fails after that (the vector store is busy, the tracking server is
down) is retried on the next pass instead of being lost. Every sink is idempotent per item (case
ids are content hashes, the failures file skips an item it holds, assessments carry the item and
round), so two app processes or a replay after a crash never feed an item in twice.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from casebase.case_base import CaseBase
from casebase.classify import KeywordClassifier
from casebase.reviewed_failures import append_failure
from compliance.models import Validator
from compliance.review_queue import Outcome, ReviewQueue
from dashboards.review.assessments import AssessmentLog, HumanAssessmentLogger, LogStatus
from dashboards.review.learning import reviewed_case, reviewed_failure
from dashboards.review.revalidate import check_reply


class FeedbackReport(BaseModel):
    """What one closed item fed into learning."""

    item_id: str
    seq: int
    decision: str
    case_id: str | None = None
    case_merged_into: str | None = None
    failure_line: int | None = None
    failure_appended: bool = False
    assessment: AssessmentLog | None = None

    def summary(self) -> str:
        parts = []
        if self.case_id:
            merged = f" (merged into {self.case_merged_into})" if self.case_merged_into else ""
            parts.append(f"case {self.case_id} added to the case base{merged}")
        if self.failure_line is not None:
            verb = "appended as" if self.failure_appended else "already at"
            parts.append(f"failure {verb} line {self.failure_line} of the failures file")
        if self.assessment is not None:
            parts.append(self.assessment.message)
        return "; ".join(parts) or "nothing to learn"


class CatchUp(BaseModel):
    reports: list[FeedbackReport] = Field(default_factory=list)
    cursor: int
    error: str | None = None  # the first failure; the cursor stops before its outcome
    retried: list[AssessmentLog] = Field(default_factory=list)  # waiting assessments now logged


class FeedbackState(BaseModel):
    seq: int = 0  # the last outcome fed into learning
    # Items whose consultation trace was not in MLflow yet (a training run writes its traces at the
    # end of each virtual day): their human assessments are tried again on every pass.
    pending_assessments: list[str] = Field(default_factory=list)


class CursorFile:
    """How far the feedback has followed the outcome stream, in a JSON file shared by app processes."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> FeedbackState:
        if not self.path.exists():
            return FeedbackState()
        return FeedbackState.model_validate_json(self.path.read_text(encoding="utf-8"))

    def update(self, seq: int, pending: Sequence[str] = (), settled: Sequence[str] = ()) -> FeedbackState:
        """Move the cursor to `seq` (never back: another process may be further on), add items
        whose assessment must wait for their trace and drop those now logged."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.with_name(self.path.name + ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                current = self.read()
                waiting = [
                    i for i in dict.fromkeys([*current.pending_assessments, *pending]) if i not in settled
                ]
                state = FeedbackState(seq=max(current.seq, seq), pending_assessments=waiting)
                tmp = self.path.with_name(self.path.name + ".tmp")
                tmp.write_text(state.model_dump_json(), encoding="utf-8")
                os.replace(tmp, self.path)
                return state
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


class FeedbackPump:
    def __init__(
        self,
        queue: ReviewQueue,
        cases: CaseBase,
        failures_path: Path,
        cursor: CursorFile,
        validator: Validator,
        assessments: HumanAssessmentLogger | None,
        classifier: KeywordClassifier | None = None,
    ) -> None:
        self.queue = queue
        self.cases = cases
        self.failures_path = failures_path
        self.cursor = cursor
        self.validator = validator
        self.assessments = assessments
        self.classifier = classifier or KeywordClassifier()

    def process(self, outcome: Outcome) -> FeedbackReport:
        item = self.queue.get(outcome.item_id)
        if item is None:
            raise LookupError(
                f"outcome {outcome.seq} names item {outcome.item_id}, which is not in the queue"
            )
        report = FeedbackReport(item_id=item.id, seq=outcome.seq, decision=outcome.decision)
        if outcome.text is not None:
            final = check_reply(self.validator, item.payload, outcome.text)
            case = reviewed_case(item, outcome, final, self.classifier)
            if case is not None:
                added = self.cases.add(case)
                report.case_id = added.case.id
                report.case_merged_into = added.merged_into
        failure = reviewed_failure(item, outcome, self.classifier)
        if failure is not None:
            appended = append_failure(self.failures_path, failure)
            report.failure_line = appended.line
            report.failure_appended = appended.appended
        if self.assessments is not None:
            report.assessment = self.assessments.log_decisions(item, self.queue.decisions(item.id))
        return report

    def catch_up(self, limit: int = 100) -> CatchUp:
        """Feed every outcome after the cursor into learning, in order, stopping at the first error;
        then try again the assessments that were waiting for their trace."""
        state = self.cursor.read()
        position = state.seq
        reports: list[FeedbackReport] = []
        for outcome in self.queue.decided_since(position, limit=limit):
            try:
                report = self.process(outcome)
            except Exception as exc:  # reported on the page; the outcome is retried on the next pass
                return CatchUp(reports=reports, cursor=position, error=f"item {outcome.item_id}: {exc}")
            reports.append(report)
            waiting = [report.item_id] if self._trace_may_come(report) else []
            position = self.cursor.update(outcome.seq, pending=waiting).seq
        return CatchUp(reports=reports, cursor=position, retried=self.retry_assessments())

    def retry_assessments(self) -> list[AssessmentLog]:
        if self.assessments is None:
            return []
        logged: list[AssessmentLog] = []
        settled: list[str] = []
        for item_id in self.cursor.read().pending_assessments:
            item = self.queue.get(item_id)
            if item is None:
                settled.append(item_id)
                continue
            log = self.assessments.log_decisions(item, self.queue.decisions(item_id))
            if log.status is not LogStatus.NO_TRACE:
                settled.append(item_id)
                logged.append(log)
        if settled:
            self.cursor.update(0, settled=settled)
        return logged

    def _trace_may_come(self, report: FeedbackReport) -> bool:
        item = self.queue.get(report.item_id)
        return (
            report.assessment is not None
            and report.assessment.status is LogStatus.NO_TRACE
            and item is not None
            and bool(item.consultation_id or item.session_id)
        )
