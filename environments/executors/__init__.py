"""Executors run a virtual day's consultations: `local` (asyncio in this process) or `ray`."""

from __future__ import annotations

from environments.config import AppConfig
from environments.executors.base import ConsultationExecutor
from environments.executors.local import LocalExecutor
from environments.executors.novelty import RecordingNovelty, record_novelty
from environments.executors.runner import (
    ConsultationParts,
    ConsultationResult,
    ConsultationRunner,
    TimedAdvisorSession,
)


def build_executor(app: AppConfig, runner: ConsultationRunner, run_id: str) -> ConsultationExecutor:
    """The executor `app.executor` names; `runner` is the driver's own (used by `local`)."""
    if app.executor.name == "ray":
        from environments.executors.ray_executor import RayExecutor  # needs the `ray` extra

        return RayExecutor(app, run_id)
    return LocalExecutor(runner, app.environment.concurrency)


__all__ = [
    "ConsultationExecutor",
    "ConsultationParts",
    "ConsultationResult",
    "ConsultationRunner",
    "LocalExecutor",
    "RecordingNovelty",
    "TimedAdvisorSession",
    "build_executor",
    "record_novelty",
]
