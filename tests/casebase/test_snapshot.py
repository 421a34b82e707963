"""Snapshots: both bases exported as artifacts of a real MLflow run, their sizes logged as metrics."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from mlflow.tracking import MlflowClient

from casebase.factory import Bases
from casebase.jsonl import read_jsonl
from casebase.models import Case, GuidanceRule
from casebase.snapshot import SnapshotTracker, log_snapshot
from tests.casebase.builders import make_case, make_rule
from tests.casebase.conftest import DIMENSION

POTS = "I have three small pension pots from old jobs and want to combine them into one"


class MlflowRun:
    """The two calls a snapshot makes, on an MLflow run in a SQLite store under the test's folder."""

    def __init__(self, root: Path) -> None:
        self.client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
        experiment = self.client.create_experiment("casebase", artifact_location=(root / "art").as_uri())
        self.run_id = self.client.create_run(experiment).info.run_id

    def log_artifacts(self, paths: Iterable[Path], artifact_path: str | None = None) -> None:
        for path in paths:
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        for key, value in metrics.items():
            self.client.log_metric(self.run_id, key, value, step=step)


def fill(bases: Bases) -> None:
    bases.cases.add(make_case(POTS, source="c-1"))
    bases.cases.add(make_case("Can I take a tax-free lump sum?", task_type="tax", verified=False))
    rule = bases.rules.add_candidate(
        make_rule("When pots are combined, compare fees, because fees compound.", [])
    )
    bases.rules.activate(rule.id)
    bases.rules.add_candidate(
        make_rule("When asked about tax, explain emergency tax, because it surprises people.", [])
    )
    retired = bases.rules.add_candidate(
        make_rule("When asked about risk, mention scams, because they are common.", [])
    )
    bases.rules.retire(retired.id, "superseded in test")


def test_snapshot_logs_both_bases_and_their_sizes_to_an_mlflow_run(bases: Bases, tmp_path: Path) -> None:
    fill(bases)
    run = MlflowRun(tmp_path / "mlflow")
    assert isinstance(run, SnapshotTracker)
    snap = log_snapshot(bases, tmp_path / "snap-1", run, step=200, artifact_path="casebase/step-200")
    assert (snap.cases_total, snap.cases_verified) == (2, 1)
    assert (snap.rules_total, snap.rules_active, snap.rules_candidate, snap.rules_retired) == (3, 1, 1, 1)

    logged = run.client.get_run(run.run_id).data.metrics
    assert {k: logged[k] for k in ("cases_total", "rules_total", "rules_active")} == {
        "cases_total": 2.0,
        "rules_total": 3.0,
        "rules_active": 1.0,
    }
    history = run.client.get_metric_history(run.run_id, "rules_active")
    assert [(m.step, m.value) for m in history] == [(200, 1.0)]
    names = sorted(f.path for f in run.client.list_artifacts(run.run_id, "casebase/step-200"))
    assert names == [f"casebase/step-200/{n}" for n in ("cases.jsonl", "rules.jsonl", "summary.json")]

    # What MLflow holds is the bases themselves: download and read them back.
    local = Path(run.client.download_artifacts(run.run_id, "casebase/step-200", str(tmp_path / "dl")))
    assert read_jsonl(local / "cases.jsonl", Case) == bases.cases.all()
    assert read_jsonl(local / "rules.jsonl", GuidanceRule) == bases.rules.all()
    summary = json.loads((local / "summary.json").read_text())
    assert summary["embedder"] == "hashing" and summary["dimension"] == DIMENSION
    assert summary["rules_active"] == 1
