"""Training runs as the experiment page reads them from the MLflow tracking store.

Each run logs summary metrics at its last step (rates, token and cost totals, first-pass
violations per code, which stage decided each turn), per-consultation metrics with the
consultation's index as the step, per-day metrics with the virtual day as the step, its config as
flattened params (so `advisor.use_cases` / `advisor.use_rules` name an ablation) and its
transcripts as an artifact. Nothing here knows about Streamlit.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from pydantic import BaseModel, Field

from environments.consultation import ConsultationRecord

TRANSCRIPTS = "transcripts.jsonl"
ABLATION_PARAMS = ("advisor.use_memory", "advisor.use_cases", "advisor.use_rules")
SHOWN_PARAMS = (
    *ABLATION_PARAMS,
    "validator.mode",
    "embedder.name",
    "environment.consultations",
    "environment.consultations_per_day",
    "paths.root",
    "seed",
)


class RunInfo(BaseModel):
    run_id: str
    name: str
    status: str
    started: datetime
    params: dict[str, str] = Field(default_factory=dict)
    tags: dict[str, str] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)

    @property
    def ablation(self) -> str:
        """Which learning parts the advisor used: 'memory+cases+rules', 'memory', 'none'..."""
        used = [p.split("_", 1)[1] for p in ABLATION_PARAMS if self.params.get(p, "True") == "True"]
        return "+".join(used) or "none"

    @property
    def scripted(self) -> bool:
        return self.tags.get("llm.scripted") == "true"

    @property
    def label(self) -> str:
        return f"{self.name} ({self.run_id[:6]})"

    @property
    def consultations_per_day(self) -> int:
        return int(self.params.get("environment.consultations_per_day", "8"))


class ExperimentStore:
    """Reads one experiment of a tracking store (SQLite file, server, anything MLflow reaches)."""

    def __init__(self, tracking_uri: str, experiment: str) -> None:
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.client = MlflowClient(tracking_uri=tracking_uri)

    def experiment_id(self) -> str | None:
        found = self.client.get_experiment_by_name(self.experiment)
        return None if found is None else found.experiment_id

    def runs(self, max_results: int = 500) -> list[RunInfo]:
        """The experiment's runs, newest first."""
        experiment_id = self.experiment_id()
        if experiment_id is None:
            return []
        runs = self.client.search_runs(
            [experiment_id], max_results=max_results, order_by=["attributes.start_time DESC"]
        )
        return [
            RunInfo(
                run_id=r.info.run_id,
                name=r.info.run_name or r.info.run_id[:8],
                status=r.info.status,
                started=datetime.fromtimestamp(r.info.start_time / 1000, tz=UTC),
                params={k: v for k, v in r.data.params.items() if k in SHOWN_PARAMS},
                tags={k: v for k, v in r.data.tags.items() if not k.startswith("mlflow.")},
                metrics=dict(r.data.metrics),
            )
            for r in runs
        ]

    def history(self, run_id: str, metric: str) -> list[tuple[int, float]]:
        """A metric's values by step, in step order (the last value logged at a step wins)."""
        by_step: dict[int, tuple[int, float]] = {}
        for m in self.client.get_metric_history(run_id, metric):
            if m.step not in by_step or m.timestamp >= by_step[m.step][0]:
                by_step[m.step] = (m.timestamp, m.value)
        return [(step, value) for step, (_, value) in sorted(by_step.items())]

    def transcripts(self, run: RunInfo) -> list[ConsultationRecord]:
        """The run's consultations: its logged artifact, or, while the run is still going (or was
        killed before logging it), the file it appends to in its run folder."""
        path = self._downloaded(run.run_id)
        if path is None:
            root = run.params.get("paths.root")
            local = Path(root) / run.run_id / TRANSCRIPTS if root else None
            if local is None or not local.exists():
                return []
            path = local
        with path.open(encoding="utf-8") as handle:
            return [ConsultationRecord.model_validate_json(line) for line in handle if line.strip()]

    def _downloaded(self, run_id: str) -> Path | None:
        names = {a.path for a in self.client.list_artifacts(run_id)}
        if TRANSCRIPTS not in names:
            return None
        target = Path(tempfile.mkdtemp(prefix=f"transcripts-{run_id[:8]}-"))
        try:
            return Path(self.client.download_artifacts(run_id, TRANSCRIPTS, str(target)))
        except MlflowException:
            return None
