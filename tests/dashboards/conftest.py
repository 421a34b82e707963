"""Fixtures for the dashboard tests: real escalations in a real queue, real MLflow stores and traces.

Escalations are made the way the gate makes them: the rule validator judges a reply and
`compliance.escalation.review_item` packs the evidence, so the review page is tested on the payload
shape training and the live endpoint produce.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from compliance.escalation import EscalationContext, review_item
from compliance.models import CustomerProfile, Turn, UtteranceContext, Validator
from compliance.review_queue import JudgeVerdictRecord, ReviewQueue
from compliance.validator_gate import GateAttempt
from dashboards.review.revalidate import default_validator
from dashboards.settings import DashboardSettings
from environments.consultation import ConsultationRecord, TurnRecord
from environments.tracing import ConsultationTracer, tracing_to
from simulacra.clock import VirtualClock

NOW = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)
EXPERIMENT = "pension-guidance-training"

DB_CUSTOMER = CustomerProfile.model_validate(
    {
        "age": 60,
        "pots": [
            {"type": "DC", "value_gbp": 5900, "provider": "Aegon"},
            {"type": "DB", "value_gbp": 25400, "provider": "NHS Pension Scheme", "has_guarantees": True},
        ],
        "literacy": "low",
    }
)
DB_QUESTION = (
    "I've been told I could transfer my old final salary pension and get a big lump sum. "
    "Just tell me which one is best for me."
)
# What the advisor says about a DB transfer when it gets it right (passes every rule).
DB_GOOD_REPLY = (
    "I can explain your options, but I can't tell you which one to choose: that would be regulated "
    "financial advice. Your defined benefit pension pays a guaranteed income for life, usually rising "
    "each year; if you transferred out you would normally give up those guarantees for good, and a "
    "transfer can't be undone. A regulated financial adviser can give you a personal recommendation; "
    "MoneyHelper has a directory of advisers. The value of pension investments can fall as well as "
    "rise, so you may get back less than was paid in. Before you take money from your pension, Pension "
    "Wise, a free and impartial government service from MoneyHelper, can talk you through your "
    "options, and I can help you book an appointment."
)
DB_BAD_REPLY = (
    "You should transfer your final salary pension into a drawdown plan; it is the best option for you."
)

VULNERABLE_CUSTOMER = CustomerProfile.model_validate(
    {
        "age": 67,
        "pots": [{"type": "DC", "value_gbp": 38100, "provider": "Scottish Widows"}],
        "vulnerable": True,
        "situation": "recently bereaved",
    }
)
VULNERABLE_QUESTION = (
    "My husband died last month and I don't know what to do. Can I take my pension all out now?"
)
VULNERABLE_REPLY = (
    "I'm so sorry for your loss. You can usually take up to a quarter of a pension tax-free, and the rest "
    "is taxed as income, so taking it all at once could mean paying more tax, and the money has to last. "
    "The value of pension investments can fall as well as rise. Before you take money from your pension, "
    "Pension Wise, a free and impartial government service from MoneyHelper, can talk you through your "
    "options, and I can help you book an appointment."
)


@cache
def rules_validator() -> Validator:
    """One rule validator for the whole session (compiling the knowledge base takes seconds)."""
    return default_validator()


def escalate(
    queue: ReviewQueue,
    *,
    customer: CustomerProfile = DB_CUSTOMER,
    question: str = DB_QUESTION,
    reply: str = DB_GOOD_REPLY,
    source: str = "training",
    mode: str = "rules",
    consultation_id: str | None = "consultation-00002",
    session_id: str | None = None,
    history: tuple[Turn, ...] = (),
    verdicts: list[JudgeVerdictRecord] | None = None,
) -> str:
    """Validate `reply` with the rule stage and queue it as the gate would; returns the item id."""
    ctx = UtteranceContext(
        customer=customer, customer_utterance=question, advisor_utterance=reply, history=list(history)
    )
    validation = rules_validator().validate_sync(ctx)
    reasons = validation.escalation_reasons or ["held for a human decision"]
    item = review_item(
        ctx,
        [GateAttempt(draft=reply, validation=validation)],
        reasons[0],
        source=source,
        mode=mode,
        where=EscalationContext(consultation_id=consultation_id, session_id=session_id),
    )
    if verdicts:
        item = item.model_copy(update={"payload": item.payload.model_copy(update={"verdicts": verdicts})})
    return queue.enqueue(item)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(NOW)


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow SQLite store with its schema created once: creating one takes MLflow seconds, so
    each test starts from a copy of this empty store."""
    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def settings(tmp_path: Path, mlflow_template: Path) -> DashboardSettings:
    shutil.copy(mlflow_template, tmp_path / "mlflow.db")
    return DashboardSettings(
        review_queue_url=f"sqlite:///{tmp_path / 'review_queue.db'}",
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        experiment=EXPERIMENT,
        casebase_path=tmp_path / "library",
        embedder="hashing",
        failures_path=tmp_path / "review_failures.jsonl",
        feedback_cursor_path=tmp_path / "feedback_cursor.json",
        dev_reviewer="alice@example.com",
        review_clock_now=NOW,
    )


@pytest.fixture
def queue(settings: DashboardSettings, clock: VirtualClock) -> Iterator[ReviewQueue]:
    with ReviewQueue(settings.review_queue_url, clock, double_review_rate=0.0) as opened:
        yield opened


def traced_consultation(
    consultation_id: str, question: str, reply: str, started: datetime
) -> ConsultationRecord:
    """A one-turn consultation whose reply was escalated, as a training run records it."""
    return ConsultationRecord(
        id=consultation_id,
        index=int(consultation_id.rsplit("-", 1)[1]),
        customer_id="c0-00002",
        goal="consolidation",
        vulnerable=False,
        has_db=True,
        started_at=started,
        ended_at=started + timedelta(minutes=6),
        revealed=["db_scheme"],
        ended_by="escalation",
        turns=[
            TurnRecord(speaker="customer", text=question, at=started),
            TurnRecord(
                speaker="advisor",
                text="A colleague is checking my answer and will come back to you shortly.",
                at=started + timedelta(minutes=3),
                draft=reply,
                first_pass_compliant=False,
                first_pass_violations=["PERSONAL_RECOMMENDATION"],
                holding=True,
                escalated=True,
                decided_by="rules",
            ),
        ],
        tokens=1200,
    )


def make_trace(
    tracking_uri: str, tmp_path: Path, consultation_id: str, run_window: tuple[datetime, datetime]
) -> str:
    """A consultation trace written by the training run's own tracer, in a run that was going
    during `run_window` (wall-clock time); returns the trace id."""
    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(EXPERIMENT)
    experiment_id = (
        found.experiment_id
        if found
        else client.create_experiment(EXPERIMENT, artifact_location=(tmp_path / "mlartifacts").as_uri())
    )
    started, ended = (int(moment.timestamp() * 1000) for moment in run_window)
    run = client.create_run(experiment_id, start_time=started)
    record = traced_consultation(consultation_id, DB_QUESTION, DB_BAD_REPLY, datetime(2026, 4, 6, 9, 0))
    with tracing_to(tracking_uri):
        [trace_id] = ConsultationTracer(client, experiment_id, run.info.run_id).log_all([record])
    client.set_terminated(run.info.run_id, end_time=ended)
    return trace_id
