"""One MLflow trace per consultation, with the compliance verdicts as assessments.

The trace mirrors the consultation in virtual time: a root span for the consultation and, for each
advisor turn, a span with `retrieve`, `generate` and `validate` children, and under `validate` a
`judge:<id>` span per judge of the panel (none with the rules-only validator). Each turn's
first-pass verdict is logged as an assessment named `compliance` on its `validate` span, with the
stage that decided as the source (CODE for the rules, LLM_JUDGE for the judges), and each judge's
own verdict on its span (LLM_JUDGE, source id the judge, its confidence as metadata); reviewers' decisions in the
review app are logged under the same name with a HUMAN source, so judges can be measured against
people. Traces are found again by their `consultation_id` tag.

MLflow's tracing writes through its process-wide tracking URI, so `tracing_to` points it at the
run's store for the duration of a run and restores it afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import mlflow
from mlflow import MlflowClient
from mlflow.entities import AssessmentSource
from mlflow.tracking._tracking_service.utils import is_tracking_uri_set
from pydantic import BaseModel

from environments.consultation import ConsultationRecord

ASSESSMENT_NAME = "compliance"


def ns(moment: datetime) -> int:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return int(aware.timestamp() * 1_000_000_000)


@contextmanager
def tracing_to(tracking_uri: str) -> Iterator[None]:
    """Point MLflow's process-wide tracking URI at `tracking_uri` for the block, then put back
    exactly what was there before (nothing, if nothing was set)."""
    was_set = is_tracking_uri_set()
    previous = mlflow.get_tracking_uri() if was_set else None
    mlflow.set_tracking_uri(tracking_uri)
    try:
        yield
    finally:
        mlflow.flush_trace_async_logging()
        if previous is None:
            mlflow.set_tracking_uri(None)
        else:
            mlflow.set_tracking_uri(previous)


class JudgeAssessment(BaseModel):
    span_id: str
    judge_id: str
    passed: bool
    confidence: float
    codes: list[str]
    reasoning: str


class ConsultationTracer:
    def __init__(self, client: MlflowClient, experiment_id: str, run_id: str) -> None:
        self.client = client
        self.experiment_id = experiment_id
        self.run_id = run_id

    def log_all(self, records: list[ConsultationRecord]) -> list[str]:
        """Trace each consultation, then attach every verdict: exporting is asynchronous, so the
        assessments wait for one flush instead of one per consultation."""
        traced = [self._trace(record) for record in records]
        mlflow.flush_trace_async_logging()
        for trace_id, verdicts, judged in traced:
            # Each judge's own verdict on its span, named by the judge: the panel's members can be
            # compared with each other and with the reviewers' HUMAN assessments.
            for judge in judged:
                mlflow.log_feedback(
                    trace_id=trace_id,
                    name=ASSESSMENT_NAME,
                    value=judge.passed,
                    source=AssessmentSource("LLM_JUDGE", judge.judge_id),
                    rationale=judge.reasoning or (", ".join(judge.codes) or "passed"),
                    metadata={"confidence": judge.confidence, "codes": ",".join(judge.codes)},
                    span_id=judge.span_id,
                )
            for span_id, passed, stage, codes in verdicts:
                mlflow.log_feedback(
                    trace_id=trace_id,
                    name=ASSESSMENT_NAME,
                    value=passed,
                    source=AssessmentSource("LLM_JUDGE" if stage == "judges" else "CODE", stage),
                    rationale=", ".join(codes) or "passed",
                    span_id=span_id,
                )
        return [trace_id for trace_id, _, _ in traced]

    def _judge_spans(
        self, trace_id: str, parent_id: str, verdicts: list[dict[str, Any]], at_ns: int
    ) -> list[JudgeAssessment]:
        """A span per judge under `validate`; a judge that failed to answer gets its error there
        and no assessment."""
        judged = []
        for record in verdicts:
            judge_id = str(record.get("judge_id", "judge"))
            span = self.client.start_span(
                f"judge:{judge_id}",
                trace_id=trace_id,
                parent_id=parent_id,
                inputs={k: record.get(k) for k in ("vendor", "model", "prompt_version")},
                start_time_ns=at_ns,
            )
            verdict = record.get("verdict")
            self.client.end_span(
                trace_id,
                span.span_id,
                outputs={"verdict": verdict, "error": record.get("error")},
                end_time_ns=at_ns,
            )
            if verdict:
                judged.append(
                    JudgeAssessment(
                        span_id=span.span_id,
                        judge_id=judge_id,
                        passed=bool(verdict.get("passed")),
                        confidence=float(verdict.get("confidence", 0.0)),
                        codes=[str(c) for c in verdict.get("codes", [])],
                        reasoning=str(verdict.get("reasoning", "")),
                    )
                )
        return judged

    def _trace(
        self, record: ConsultationRecord
    ) -> tuple[str, list[tuple[str, bool, str, list[str]]], list[JudgeAssessment]]:
        c = self.client
        root = c.start_trace(
            "consultation",
            inputs={"consultation_id": record.id, "customer_id": record.customer_id, "goal": record.goal},
            tags={"consultation_id": record.id, "run_id": self.run_id},
            experiment_id=self.experiment_id,
            run_id=self.run_id,
            start_time_ns=ns(record.started_at),
        )
        trace_id = root.trace_id
        verdicts: list[tuple[str, bool, str, list[str]]] = []
        judge_verdicts: list[JudgeAssessment] = []
        previous = ""
        for number, turn in enumerate(record.turns):
            if turn.speaker == "customer":
                previous = turn.text
                continue
            start = ns(turn.at)
            span = c.start_span(
                f"advisor_turn_{number}",
                trace_id=trace_id,
                parent_id=root.span_id,
                inputs={"customer": previous},
                start_time_ns=start,
            )
            retrieve = c.start_span(
                "retrieve",
                trace_id=trace_id,
                parent_id=span.span_id,
                inputs={"query": previous},
                start_time_ns=start,
            )
            c.end_span(trace_id, retrieve.span_id, outputs=turn.retrieved, end_time_ns=start)
            generate = c.start_span(
                "generate", trace_id=trace_id, parent_id=span.span_id, start_time_ns=start
            )
            c.end_span(trace_id, generate.span_id, outputs={"draft": turn.draft}, end_time_ns=start)
            validate = c.start_span(
                "validate",
                trace_id=trace_id,
                parent_id=span.span_id,
                inputs={"draft": turn.draft},
                start_time_ns=start,
            )
            judged = self._judge_spans(trace_id, validate.span_id, turn.judge_verdicts, start)
            c.end_span(
                trace_id,
                validate.span_id,
                outputs={
                    "first_pass_compliant": turn.first_pass_compliant,
                    "first_pass_violations": turn.first_pass_violations,
                    "refinements": turn.refinements,
                    "escalated": turn.escalated,
                    "escalation_reasons": turn.escalation_reasons,
                    "decided_by": turn.decided_by,
                },
                end_time_ns=start,
            )
            c.end_span(trace_id, span.span_id, outputs={"delivered": turn.text}, end_time_ns=start)
            verdicts.append(
                (
                    validate.span_id,
                    bool(turn.first_pass_compliant),
                    turn.decided_by or "rules",
                    turn.first_pass_violations,
                )
            )
            judge_verdicts.extend(judged)
        c.end_trace(
            trace_id,
            outputs={"ended_by": record.ended_by, "turns": len(record.turns)},
            end_time_ns=ns(record.ended_at),
        )
        return trace_id, verdicts, judge_verdicts
