"""MLflow bookkeeping for training runs, through `MlflowClient` (no global tracking state).

By default the store is a SQLite file under `paths.root` with artifacts beside it, so a fresh
machine needs no server; `tracking.uri` points the same code at a tracking server.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

MAX_BATCH = 900  # MLflow accepts at most 1000 metrics per log_batch call.


def default_tracking_uri(root: Path) -> str:
    return f"sqlite:///{(root / 'mlflow.db').resolve()}"


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value):
                out.update(flatten(item, f"{name}.{i}."))
        else:
            out[name] = json.dumps(value, default=str) if isinstance(value, list | tuple) else str(value)
    return out


class RunTracker:
    """One MLflow run: params, metrics by step, artifacts, tags."""

    def __init__(self, client: MlflowClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id
        self.experiment_id = client.get_run(run_id).info.experiment_id

    @classmethod
    def start(
        cls,
        tracking_uri: str,
        experiment: str,
        artifact_root: Path,
        run_name: str | None,
        tags: Mapping[str, str],
    ) -> RunTracker:
        client = MlflowClient(tracking_uri=tracking_uri)
        found = client.get_experiment_by_name(experiment)
        if found is None:
            artifact_root.mkdir(parents=True, exist_ok=True)
            experiment_id = client.create_experiment(
                experiment, artifact_location=artifact_root.resolve().as_uri()
            )
        else:
            experiment_id = found.experiment_id
        run = client.create_run(experiment_id, run_name=run_name, tags=dict(tags))
        return cls(client, run.info.run_id)

    @classmethod
    def attach(cls, tracking_uri: str, run_id: str) -> RunTracker:
        client = MlflowClient(tracking_uri=tracking_uri)
        client.get_run(run_id)  # raises a clear MlflowException when the id is unknown
        return cls(client, run_id)

    def reopen(self) -> None:
        """Mark a run that was killed (or had finished) as running again, to carry it on."""
        self.client.update_run(self.run_id, status="RUNNING")

    def params(self) -> dict[str, str]:
        return dict(self.client.get_run(self.run_id).data.params)

    def traced_consultations(self) -> set[str]:
        """The `consultation_id` tags of the traces this run has logged."""
        found: set[str] = set()
        token = None
        while True:
            page = self.client.search_traces(
                locations=[self.experiment_id],
                filter_string=f"tags.run_id = '{self.run_id}'",
                max_results=500,
                page_token=token,
                include_spans=False,
            )
            found.update(t.info.tags.get("consultation_id", "") for t in page)
            token = page.token
            if not token:
                return found - {""}

    def log_params(self, params: Mapping[str, str]) -> None:
        items = [Param(k, v[:6000]) for k, v in sorted(params.items())]
        for i in range(0, len(items), 90):
            self.client.log_batch(self.run_id, params=items[i : i + 90])

    def log_metrics(
        self, metrics: Mapping[str, float], step: int = 0, timestamp_ms: int | None = None
    ) -> None:
        stamp = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        batch = [Metric(k, float(v), stamp, step) for k, v in sorted(metrics.items())]
        for i in range(0, len(batch), MAX_BATCH):
            self.client.log_batch(self.run_id, metrics=batch[i : i + MAX_BATCH])

    def log_steps(self, by_step: Mapping[int, Mapping[str, float]], timestamp_ms: int | None = None) -> None:
        """Metrics of many steps (e.g. every consultation of a day) in as few calls as MLflow allows."""
        stamp = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        batch = [
            Metric(k, float(v), stamp, step)
            for step, metrics in sorted(by_step.items())
            for k, v in sorted(metrics.items())
        ]
        for i in range(0, len(batch), MAX_BATCH):
            self.client.log_batch(self.run_id, metrics=batch[i : i + MAX_BATCH])

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_artifacts(self, paths: Iterable[Path], artifact_path: str | None = None) -> None:
        for path in paths:
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def finish(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.run_id, status=status)
