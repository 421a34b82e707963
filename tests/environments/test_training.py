"""The training run end to end: the command line, MLflow, determinism, the review queue, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from mlflow import MlflowClient

from casebase.accumulation import FailureCase
from casebase.reviewed_failures import ReviewedFailure, append_failure
from compliance.review_queue import ReviewQueue
from environments.config import AppConfig, load_app_config
from environments.training import train
from simulacra.clock import SystemClock

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf"


def run_cli(*overrides: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **(env or {})}
    environment.pop("OPENAI_API_KEY", None)
    environment.pop("ANTHROPIC_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "environments.train", *overrides],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


def app_config(tmp_path: Path, *overrides: str) -> AppConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(
            "config",
            overrides=[
                "embedder=hashing",
                "tracking.traces=false",
                f"paths.root={tmp_path}",
                f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
                *overrides,
            ],
        )
    return load_app_config(cfg)


def only_run(tracking_uri: str):
    client = MlflowClient(tracking_uri)
    experiments = client.search_experiments()
    runs = client.search_runs([e.experiment_id for e in experiments])
    assert len(runs) == 1
    return client, runs[0]


def transcripts(root: Path) -> str:
    (found,) = list(root.glob("*/transcripts.jsonl"))
    return found.read_text(encoding="utf-8")


def test_the_issue_command_twice_gives_identical_transcripts_and_a_tracked_run(tmp_path: Path) -> None:
    outputs = []
    for name in ("first", "second"):
        root = tmp_path / name
        result = run_cli(
            "llm=scripted",
            "seed=1",
            "environment.consultations=6",
            f"tracking.uri=sqlite:///{root / 'X.db'}",
            f"paths.root={root}",
        )
        assert result.returncode == 0, result.stderr
        assert "MLflow run id" in result.stdout and "mlflow ui --backend-store-uri" in result.stdout
        outputs.append(transcripts(root))
    assert outputs[0] == outputs[1]
    assert len(outputs[0].splitlines()) == 6

    client, run = only_run(f"sqlite:///{tmp_path / 'first' / 'X.db'}")
    metrics = run.data.metrics
    assert metrics["consultations"] == 6
    for key in ("first_pass_compliance_rate", "escalation_rate"):
        assert 0.0 <= metrics[key] <= 1.0
    assert metrics["tokens_total"] > 0
    assert run.data.tags["llm.scripted"] == "true" and run.data.tags["llm.primary"] == "scripted"
    assert "scripted" in run.data.tags["note"]
    assert run.data.params["environment.consultations"] == "6"
    assert run.data.params["seed"] == "1"
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"transcripts.jsonl", "advisor_memory.jsonl", "advisor_plans.jsonl", "config.yaml"} <= artifacts
    per_consultation = client.get_metric_history(run.info.run_id, "consultation.tokens")
    assert sorted(m.step for m in per_consultation) == list(range(6))


def test_cfg_job_prints_the_resolved_config() -> None:
    result = run_cli("--cfg", "job", "seed=7")
    assert result.returncode == 0, result.stderr
    assert "seed: 7" in result.stdout and "consultations:" in result.stdout


def test_multirun_sweeps_into_one_tracking_store(tmp_path: Path) -> None:
    result = run_cli(
        "-m",
        "seed=1,2",
        "environment.consultations=2",
        "embedder=hashing",
        f"paths.root={tmp_path}",
        f"tracking.uri=sqlite:///{tmp_path / 'sweep.db'}",
    )
    assert result.returncode == 0, result.stderr
    client = MlflowClient(f"sqlite:///{tmp_path / 'sweep.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert sorted(r.data.params["seed"] for r in runs) == ["1", "2"]


@pytest.mark.parametrize(
    ("overrides", "code", "message"),
    [
        (["+environment.bogus=1"], 2, "environment.bogus: unknown key"),
        (["environment.bogus=1"], 1, "Key 'bogus' is not in struct"),
        (["environment.consultations=many"], 2, "environment.consultations: Input should be a valid integer"),
        (["llm=nonexistent"], 1, "Could not find 'llm/nonexistent'"),
        (["llm=openai"], 2, "needs an API key: set OPENAI_API_KEY"),
        (["llm=anthropic"], 2, "ANTHROPIC_API_KEY"),
        (
            [
                "llm.scripted.behaviour.malformed_output=1.0",
                "llm.scripted.behaviour.malformed_repair=1.0",
                "environment.consultations=1",
            ],
            2,
            "failed on every provider in the fallback chain",
        ),
    ],
)
def test_bad_input_is_a_clear_message_not_a_traceback(
    tmp_path: Path, overrides: list[str], code: int, message: str
) -> None:
    result = run_cli(*overrides, "embedder=hashing", f"paths.root={tmp_path}")
    assert result.returncode == code
    assert message in result.stderr
    assert "Traceback" not in result.stderr


async def test_concurrency_does_not_change_what_happens(tmp_path: Path) -> None:
    texts = []
    for concurrency in (1, 6):
        root = tmp_path / f"c{concurrency}"
        app = app_config(
            root, "seed=3", "environment.consultations=6", f"environment.concurrency={concurrency}"
        )
        await train(app, progress=False)
        texts.append(transcripts(root))
    assert texts[0] == texts[1]


async def test_escalations_reach_the_review_queue_with_their_evidence(tmp_path: Path) -> None:
    app = app_config(tmp_path, "seed=5", "environment.consultations=8")
    summary = await train(app, progress=False)
    records = [json.loads(line) for line in transcripts(tmp_path).splitlines()]
    escalated = [(r["id"], t) for r in records for t in r["turns"] if t.get("queued")]
    assert escalated, "a seeded run of 8 scripted consultations escalates at least once"
    assert summary.metrics["escalations_queued"] == len(escalated)
    with ReviewQueue(f"sqlite:///{tmp_path / 'review_queue.db'}", SystemClock()) as queue:
        items = {e.item.consultation_id: e.item for e in queue.list_open(limit=1000)}
        assert queue.stats().waiting == len(escalated)
        for consultation, turn in escalated:
            item = items[consultation]
            assert (
                item.source == "training" and item.mode == "rules" and item.payload.run_id == summary.run_id
            )
            assert turn["draft"] in [d.text for d in item.payload.drafts]
            assert item.payload.conversation[-1].role == "customer"
            assert item.reason
    # A held turn shows the customer the holding reply, never a draft.
    for _, turn in escalated:
        assert turn["holding"] and turn["text"] == app.validator.holding_reply
    # Runs share the queue: the same seeded run again adds its own items beside the first run's.
    again = await train(app, progress=False)
    with ReviewQueue(f"sqlite:///{tmp_path / 'review_queue.db'}", SystemClock()) as queue:
        assert queue.stats().waiting == 2 * len(escalated)
        runs = {e.item.payload.run_id for e in queue.list_open(limit=1000)}
        assert runs == {summary.run_id, again.run_id}


async def test_the_advisor_memory_holds_reflections_and_plans(tmp_path: Path) -> None:
    # A lower reflection threshold than the default, so that a short run reflects.
    app = app_config(tmp_path, "seed=2", "environment.consultations=16", "advisor.reflection_threshold=40")
    summary = await train(app, progress=False)
    assert summary.metrics["reflections_total"] > 0 and summary.metrics["plans_total"] > 0
    (memory,) = list(tmp_path.glob("*/advisor_memory.jsonl"))
    nodes = [json.loads(line) for line in memory.read_text(encoding="utf-8").splitlines()]
    reflections = [n for n in nodes if n["kind"] == "reflection"]
    assert reflections and all(n["citations"] for n in reflections)
    ids = {n["id"] for n in nodes}
    assert all(c in ids for n in reflections for c in n["citations"])
    (plans,) = list(tmp_path.glob("*/advisor_plans.jsonl"))
    assert plans.read_text(encoding="utf-8").strip()


async def test_each_consultation_is_a_trace_with_its_verdicts_as_assessments(tmp_path: Path) -> None:
    app = app_config(tmp_path, "seed=4", "environment.consultations=3", "tracking.traces=true")
    summary = await train(app, progress=False)
    records = [json.loads(line) for line in transcripts(tmp_path).splitlines()]
    client = MlflowClient(summary.tracking_uri)
    run = client.get_run(summary.run_id)
    traces = client.search_traces(locations=[run.info.experiment_id])
    assert sorted(t.info.tags["consultation_id"] for t in traces) == sorted(r["id"] for r in records)
    for record in records:
        (trace,) = [t for t in traces if t.info.tags["consultation_id"] == record["id"]]
        advisor = [t for t in record["turns"] if t["speaker"] == "advisor"]
        verdicts = [a for a in trace.info.assessments if a.name == "compliance"]
        assert [a.value for a in verdicts] == [t["first_pass_compliant"] for t in advisor]
        assert all(a.source.source_type == "CODE" for a in verdicts)  # rules mode: the rules decided
        names = [s.name for s in client.get_trace(trace.info.trace_id).data.spans]
        assert names.count("validate") == len(advisor) and "consultation" in names


async def test_each_judge_has_its_span_and_its_own_assessment(tmp_path: Path) -> None:
    app = app_config(
        tmp_path, "seed=4", "environment.consultations=2", "tracking.traces=true", "validator=training"
    )
    summary = await train(app, progress=False)
    records = [json.loads(line) for line in transcripts(tmp_path).splitlines()]
    client = MlflowClient(summary.tracking_uri)
    traces = client.search_traces(locations=[client.get_run(summary.run_id).info.experiment_id])
    judged_turns = 0
    for record in records:
        (trace,) = [t for t in traces if t.info.tags["consultation_id"] == record["id"]]
        spans = client.get_trace(trace.info.trace_id).data.spans
        judge_spans = [s for s in spans if s.name.startswith("judge:")]
        answered = [
            v
            for t in record["turns"]
            if t["speaker"] == "advisor"
            for v in t["judge_verdicts"]
            if v["verdict"]
        ]
        asked = [v for t in record["turns"] if t["speaker"] == "advisor" for v in t["judge_verdicts"]]
        judged_turns += len(asked)
        assert [s.name for s in judge_spans] == [f"judge:{v['judge_id']}" for v in asked]
        by_judge = [
            a
            for a in trace.info.assessments
            if a.name == "compliance"
            and a.source.source_type == "LLM_JUDGE"
            and a.source.source_id == "judge-1"
        ]
        assert [a.value for a in by_judge] == [v["verdict"]["passed"] for v in answered]
        assert {a.span_id for a in by_judge} <= {s.span_id for s in judge_spans}
    # The rules veto a hard failure before any judge is asked; the other first drafts are judged.
    assert judged_turns > 0


async def test_replies_rejected_in_the_review_app_feed_rule_accumulation(tmp_path: Path) -> None:
    failure = FailureCase(
        consultation_id="reviewed-live-1",
        task_type="drawdown",
        customer_profile={"name": "Ann", "age": 61, "pots": [{"type": "DC", "value_gbp": 90000}]},
        customer_utterance="Which should I pick, drawdown or an annuity? Just tell me.",
        said="If I were you I'd go for drawdown, it's the best option for you.",
        violations=["PERSONAL_RECOMMENDATION", "MISSING_ADVICE_SIGNPOST"],
    )
    reviewed = ReviewedFailure(
        item_id="item-1",
        source="live",
        decision="reject",
        reviewers=["officer@example.com"],
        decided_at=datetime(2026, 4, 5, 12, 0),
        reason_codes=["PERSONAL_RECOMMENDATION"],
        failure=failure,
    )
    append_failure(tmp_path / "review_failures.jsonl", reviewed)
    app = app_config(tmp_path, "seed=6", "environment.consultations=2")
    summary = await train(app, progress=False)
    (rules,) = list(tmp_path.glob("*/casebase_snapshot/rules.jsonl"))
    records = [json.loads(line) for line in rules.read_text(encoding="utf-8").splitlines()]
    learned = [r for r in records if any(v["consultation_id"] == "reviewed-live-1" for v in r["validations"])]
    assert learned, "the rejected reply went through rule accumulation"
    assert summary.metrics["rule_accumulation_runs"] >= 1
