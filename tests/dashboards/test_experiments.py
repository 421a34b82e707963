"""The experiment dashboard on a real MLflow store filled the way training runs fill it."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboards.experiments.data import ExperimentStore
from dashboards.experiments.tables import (
    ablation_frame,
    consultations_behind,
    curve_frame,
    curve_metrics,
    runs_table,
    violations_frame,
)
from environments.consultation import ConsultationRecord, TurnRecord
from environments.tracking import RunTracker
from tests.dashboards.conftest import EXPERIMENT

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "dashboards" / "views" / "experiments.py"
START = datetime(2026, 4, 6, 9, 0)
PER_DAY = 2


def consultation(index: int, compliant: bool) -> ConsultationRecord:
    at = START + timedelta(days=index // PER_DAY, minutes=index)
    return ConsultationRecord(
        id=f"consultation-{index:05d}",
        index=index,
        customer_id=f"c0-{index:05d}",
        goal="drawdown",
        vulnerable=False,
        has_db=False,
        started_at=at,
        ended_at=at + timedelta(minutes=6),
        revealed=[],
        turns=[
            TurnRecord(speaker="customer", text=f"Question {index}: can I take my pension as cash?", at=at),
            TurnRecord(
                speaker="advisor",
                text=f"Reply {index}: you can usually take a quarter tax-free.",
                at=at + timedelta(minutes=3),
                first_pass_compliant=compliant,
                first_pass_violations=[] if compliant else ["MISSING_RISK_DISCLOSURE"],
                decided_by="rules",
            ),
        ],
        tokens=1000 + index,
    )


def log_run(
    tracking_uri: str, root: Path, name: str, use_rules: bool, compliant: list[bool], log_transcripts: bool
):
    tracker = RunTracker.start(tracking_uri, EXPERIMENT, root / "mlartifacts", name, {"llm.scripted": "true"})
    tracker.log_params(
        {
            "advisor.use_memory": "True",
            "advisor.use_cases": "True",
            "advisor.use_rules": str(use_rules),
            "validator.mode": "rules",
            "environment.consultations_per_day": str(PER_DAY),
            "paths.root": str(root),
        }
    )
    records = [consultation(i, ok) for i, ok in enumerate(compliant)]
    run_dir = root / tracker.run_id
    run_dir.mkdir(parents=True)
    transcripts = run_dir / "transcripts.jsonl"
    transcripts.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")
    for record in records:
        tracker.log_metrics(
            {"consultation.first_pass_compliance": float(record.advisor_turns[0].first_pass_compliant)},
            step=record.index,
        )
    for day in range(len(records) // PER_DAY):
        day_records = records[day * PER_DAY : (day + 1) * PER_DAY]
        rate = sum(bool(r.advisor_turns[0].first_pass_compliant) for r in day_records) / len(day_records)
        tracker.log_metrics({"day.first_pass_compliance_rate": rate}, step=day)
    failures = compliant.count(False)
    summary = {
        "consultations": float(len(records)),
        "first_pass_compliance_rate": compliant.count(True) / len(records),
        "escalation_rate": 0.0,
        "tokens_total": float(sum(r.tokens for r in records)),
        "cost_usd_total": 0.0,
        "decided_by.rules": float(len(records)),
    }
    if failures:
        summary["violations.first_pass.MISSING_RISK_DISCLOSURE"] = float(failures)
    tracker.log_metrics(summary, step=len(records))
    if log_transcripts:
        tracker.log_artifacts([transcripts])
    tracker.finish()
    return tracker.run_id


@pytest.fixture
def tracking(tmp_path: Path, mlflow_template: Path) -> tuple[str, dict[str, str]]:
    shutil.copy(mlflow_template, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    runs = {
        "with-rules": log_run(
            uri, tmp_path, "with-rules", True, [False, False, True, True, True, True], True
        ),
        # A run killed before it logged its transcripts: they are read from its run folder.
        "no-rules": log_run(
            uri, tmp_path, "no-rules", False, [False, True, False, True, False, False], False
        ),
    }
    return uri, runs


def test_runs_are_read_with_their_ablation_and_summary(tracking) -> None:
    uri, _ = tracking
    runs = ExperimentStore(uri, EXPERIMENT).runs()
    by_name = {r.name: r for r in runs}
    assert by_name["with-rules"].ablation == "memory+cases+rules"
    assert by_name["no-rules"].ablation == "memory+cases"
    assert by_name["with-rules"].scripted
    table = runs_table(runs).set_index("ablation")
    assert table.loc["memory+cases+rules", "first_pass_compliance_rate"] == pytest.approx(4 / 6)
    assert table.loc["memory+cases", "tokens / consultation"] == pytest.approx((6000 + 15) / 6)
    ablations = ablation_frame(runs).set_index("ablation")
    assert ablations.loc["memory+cases", "first_pass_compliance_rate"] == pytest.approx(2 / 6)
    violations = violations_frame(runs).set_index("run")
    assert violations.loc[by_name["no-rules"].label, "per consultation"] == pytest.approx(4 / 6)
    assert curve_metrics(runs) == ["consultation.first_pass_compliance", "day.first_pass_compliance_rate"]


def test_a_curve_point_leads_to_the_consultations_behind_it(tracking) -> None:
    uri, _ = tracking
    store = ExperimentStore(uri, EXPERIMENT)
    run = next(r for r in store.runs() if r.name == "with-rules")
    history = store.history(run.run_id, "consultation.first_pass_compliance")
    assert history == [(0, 0.0), (1, 0.0), (2, 1.0), (3, 1.0), (4, 1.0), (5, 1.0)]
    curve = curve_frame({run.label: history}, window=3)
    assert curve["smoothed"].round(3).tolist() == [0.0, 0.0, 0.333, 0.667, 1.0, 1.0]
    records = store.transcripts(run)
    assert [
        r.index for r in consultations_behind(records, "consultation.first_pass_compliance", 3, 3, PER_DAY)
    ] == [
        1,
        2,
        3,
    ]
    assert [
        r.index for r in consultations_behind(records, "day.first_pass_compliance_rate", 1, 1, PER_DAY)
    ] == [2, 3]
    killed = next(r for r in store.runs() if r.name == "no-rules")
    assert len(store.transcripts(killed)) == 6  # from the run folder: no artifact was logged


def test_the_page_compares_runs_and_drills_down_to_a_transcript(tracking) -> None:
    uri, _ = tracking
    at = AppTest.from_file(str(EXPERIMENTS), default_timeout=60)
    at.secrets["tracking_uri"] = uri
    at.secrets["experiment"] = EXPERIMENT
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert sorted(at.dataframe[0].value["ablation"]) == ["memory+cases", "memory+cases+rules"]
    assert any("scripted offline stand-in" in w.value for w in at.warning)
    assert at.selectbox(key="curve_metric").options == [
        "consultation.first_pass_compliance",
        "day.first_pass_compliance_rate",
    ]
    label = next(o for o in at.selectbox(key="drill_run").options if o.startswith("with-rules"))
    at.selectbox(key="drill_run").set_value(label)
    at.slider(key="curve_window").set_value(2)
    at.number_input(key="drill_step").set_value(5).run()
    assert not at.exception, [e.value for e in at.exception]
    behind = at.dataframe[-1].value
    assert behind["consultation"].tolist() == ["consultation-00004", "consultation-00005"]
    at.selectbox(key="drill_consultation").set_value("consultation-00005").run()
    said = [m.markdown[0].value for m in at.chat_message]
    assert said == [
        "Question 5: can I take my pension as cash?",
        "Reply 5: you can usually take a quarter tax-free.",
    ]


def test_an_empty_store_says_how_to_make_a_run(tmp_path: Path, mlflow_template: Path) -> None:
    shutil.copy(mlflow_template, tmp_path / "mlflow.db")
    at = AppTest.from_file(str(EXPERIMENTS), default_timeout=60)
    at.secrets["tracking_uri"] = f"sqlite:///{tmp_path / 'mlflow.db'}"
    at.run()
    assert not at.exception
    assert any("No training run yet" in i.value for i in at.info)
