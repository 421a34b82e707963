"""Human decisions as MLflow assessments on the consultation's trace, next to the judges' ones.

Each consultation has one trace, tagged `consultation_id` (live sessions: `session_id`), on which
the validator logs its verdicts as assessments named "compliance". A reviewer's decision is logged
under the same name with a HUMAN source, so MLflow's evaluation views can set judges against
people. The value answers the judges' question about the candidate reply as written: True when
the reviewer approved it unchanged, False when they rejected or had to edit it.

Consultation ids repeat across runs (every run numbers its consultations from zero) and review
items do not name their run, so when several traces carry the id, the one from the run that was
going when the item was escalated is taken (training traces carry their run; a trace's own start is
the consultation's virtual time, which says nothing about when it ran); a trace without a run is
matched by its start time. The human assessment goes on the trace's last `validate` span, the turn
that was escalated, where the validator's own verdict sits. Logging is idempotent per item and
review round (the assessment's metadata says which), so replaying the outcome stream never doubles
an assessment.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from mlflow.entities import AssessmentSource, AssessmentSourceType, Feedback
from mlflow.entities.trace_info import TraceInfo
from mlflow.exceptions import MlflowException
from mlflow.tracing.client import TracingClient
from mlflow.tracking import MlflowClient
from pydantic import BaseModel, Field

from compliance.review_queue import Decision, ReviewItem

ASSESSMENT_NAME = "compliance"  # the validator's assessment name on consultation traces
VALIDATE_SPAN = "validate"  # the span of an advisor turn that holds its compliance verdict
_MAX_TRACES = 200


class LogStatus(StrEnum):
    LOGGED = "logged"
    ALREADY_LOGGED = "already_logged"
    NO_TRACE = "no_trace"


class AssessmentLog(BaseModel):
    status: LogStatus
    trace_id: str | None = None
    assessment_ids: list[str] = Field(default_factory=list)
    message: str


def candidate_approved(decision: Decision) -> bool:
    return decision.decision == "approve"


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


class HumanAssessmentLogger:
    """Finds a review item's trace and logs each of its human decisions on it."""

    def __init__(self, tracking_uri: str, experiments: list[str]) -> None:
        self.client = MlflowClient(tracking_uri=tracking_uri)
        # `mlflow.log_feedback` is this call on a client bound to the global tracking URI; binding
        # our own keeps the dashboards free of process-wide MLflow state.
        self.tracing = TracingClient(tracking_uri)
        self.experiments = experiments

    def _experiment_ids(self) -> list[str]:
        found = (self.client.get_experiment_by_name(name) for name in self.experiments)
        return [e.experiment_id for e in found if e is not None]

    def find_trace(self, item: ReviewItem) -> TraceInfo | None:
        if item.consultation_id:
            tag, value = "consultation_id", item.consultation_id
        elif item.session_id:
            tag, value = "session_id", item.session_id
        else:
            return None
        ids = self._experiment_ids()
        if not ids:
            return None
        filters = f"tags.{tag} = {_quoted(value)}"
        if item.payload.run_id:
            # Training items name their run: consultation ids repeat from run to run.
            filters += f" AND tags.run_id = {_quoted(item.payload.run_id)}"
        traces = self.client.search_traces(
            locations=ids,
            filter_string=filters,
            max_results=_MAX_TRACES,
            include_spans=False,
        )
        if not traces:
            return None
        escalated = _ms(item.created_at)
        # Items without a run id (live ones, older ones) take the trace whose run was going then.
        return min((t.info for t in traces), key=lambda info: self._distance(info, escalated))

    def _distance(self, info: TraceInfo, escalated_ms: int) -> int:
        """How far (ms) the escalation lies from the trace's run, or from the trace itself."""
        run_id = info.tags.get("run_id") or info.trace_metadata.get("mlflow.sourceRun")
        if not run_id:
            return abs(info.request_time - escalated_ms)
        try:
            run = self.client.get_run(run_id).info
        except MlflowException:
            return abs(info.request_time - escalated_ms)
        end = run.end_time or escalated_ms  # a run still going covers now
        if run.start_time <= escalated_ms <= end:
            return 0
        return min(abs(run.start_time - escalated_ms), abs(end - escalated_ms))

    def _escalated_span(self, trace_id: str) -> str | None:
        spans = self.tracing.get_trace(trace_id).data.spans
        validated = [s for s in spans if s.name == VALIDATE_SPAN]
        return max(validated, key=lambda s: s.start_time_ns).span_id if validated else None

    def log_decisions(self, item: ReviewItem, decisions: list[Decision]) -> AssessmentLog:
        trace = self.find_trace(item)
        if trace is None:
            return AssessmentLog(
                status=LogStatus.NO_TRACE,
                message=f"no MLflow trace is tagged with item {item.id}'s consultation "
                f"({item.consultation_id or item.session_id or 'none'}); nothing logged",
            )
        logged_rounds = {
            a.metadata.get("review_round")
            for a in self.tracing.get_trace_info(trace.trace_id).assessments
            if a.name == ASSESSMENT_NAME
            and a.source.source_type == AssessmentSourceType.HUMAN
            and (a.metadata or {}).get("review_item_id") == item.id
        }
        span_id = self._escalated_span(trace.trace_id)
        created: list[str] = []
        for decision in decisions:
            if str(decision.review_round) in logged_rounds:
                continue
            rationale = decision.reason or f"{decision.decision} by {decision.reviewer}"
            if decision.reason_codes:
                rationale += f" [{', '.join(decision.reason_codes)}]"
            assessment = self.tracing.log_assessment(
                trace.trace_id,
                Feedback(
                    name=ASSESSMENT_NAME,
                    value=candidate_approved(decision),
                    rationale=rationale,
                    source=AssessmentSource(
                        source_type=AssessmentSourceType.HUMAN, source_id=decision.reviewer
                    ),
                    metadata={
                        "review_item_id": item.id,
                        "review_round": str(decision.review_round),
                        "decision": decision.decision,
                        "reason_codes": ",".join(decision.reason_codes),
                        "decided_at": decision.decided_at.isoformat(),
                        "source": item.source,
                    },
                    span_id=span_id,
                ),
            )
            created.append(assessment.assessment_id)
        if not created:
            return AssessmentLog(
                status=LogStatus.ALREADY_LOGGED,
                trace_id=trace.trace_id,
                message=f"item {item.id}'s decisions are already on trace {trace.trace_id}",
            )
        return AssessmentLog(
            status=LogStatus.LOGGED,
            trace_id=trace.trace_id,
            assessment_ids=created,
            message=f"{len(created)} human assessment(s) logged on trace {trace.trace_id}",
        )
