"""Snapshots of both bases for a run's tracker: JSON Lines artifacts and their sizes as metrics.

A training run logs what its advisor knew at the end (and, if it likes, along the way): the case
base and rules base exported whole, so any run's memory can be read, compared or imported into a
new store later, and the sizes the casebase issue names (`cases_total`, `rules_total`,
`rules_active`) so runs can be compared at a glance. The tracker is anything with the two methods
below; environments pass their MLflow run tracker.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from casebase.factory import Bases


@runtime_checkable
class SnapshotTracker(Protocol):
    """The part of a run tracker a snapshot needs (environments' MLflow `RunTracker` has it)."""

    def log_artifacts(self, paths: Iterable[Path], artifact_path: str | None = None) -> None: ...

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None: ...


class Snapshot(BaseModel):
    cases_path: Path
    rules_path: Path
    summary_path: Path
    cases_total: int
    cases_verified: int
    rules_total: int
    rules_active: int
    rules_candidate: int
    rules_retired: int
    embedder: str
    dimension: int

    def metrics(self) -> dict[str, float]:
        """The sizes a training run logs; the first three names are fixed by the casebase issue."""
        return {
            "cases_total": float(self.cases_total),
            "rules_total": float(self.rules_total),
            "rules_active": float(self.rules_active),
            "cases_verified": float(self.cases_verified),
            "rules_candidate": float(self.rules_candidate),
            "rules_retired": float(self.rules_retired),
        }

    @property
    def paths(self) -> list[Path]:
        return [self.cases_path, self.rules_path, self.summary_path]


def snapshot(bases: Bases, folder: Path) -> Snapshot:
    """Export both bases to JSON Lines in `folder`, with a summary naming their sizes and embedder."""
    folder = Path(folder)
    cases_path, rules_path = folder / "cases.jsonl", folder / "rules.jsonl"
    summary_path = folder / "summary.json"
    cases_total = bases.cases.export_jsonl(cases_path)
    rules_total = bases.rules.export_jsonl(rules_path)
    counts = bases.rules.counts()
    embedder = bases.cases.embedder
    snap = Snapshot(
        cases_path=cases_path,
        rules_path=rules_path,
        summary_path=summary_path,
        cases_total=cases_total,
        cases_verified=bases.cases.count(verified_only=True),
        rules_total=rules_total,
        rules_active=counts.active,
        rules_candidate=counts.candidate,
        rules_retired=counts.retired,
        embedder=embedder.name,
        dimension=int(embedder.dimension),
    )
    summary = snap.model_dump(mode="json", exclude={"cases_path", "rules_path", "summary_path"})
    summary_path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return snap


def log_snapshot(
    bases: Bases,
    folder: Path,
    tracker: SnapshotTracker,
    *,
    step: int = 0,
    artifact_path: str = "casebase",
) -> Snapshot:
    """Snapshot both bases into `folder` and log the files as artifacts and the sizes as metrics.

    Give each snapshot of one run its own `artifact_path` (e.g. "casebase/step-200") to keep them
    all; the metrics are logged at `step`, so their curve over the run is kept either way.
    """
    snap = snapshot(bases, folder)
    tracker.log_artifacts(snap.paths, artifact_path)
    tracker.log_metrics(snap.metrics(), step=step)
    return snap
