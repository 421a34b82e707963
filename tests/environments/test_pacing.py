"""The acceleration ratio: virtual time never runs ahead of real time scaled by the ratio.

A fake real clock stands in for the wall clock: it only moves when something sleeps, so these tests
check what pacing waits for without waiting.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from mlflow import MlflowClient

from environments.config import AppConfig, load_app_config
from environments.pacing import SPEC_ACCELERATION, Pacer
from environments.training import train
from environments.world import arrival_time

REPO = Path(__file__).resolve().parents[2]
START = datetime(2026, 4, 6, 9, 0)


class FakeRealTime:
    """Real time that passes only in `sleep`: a sleeper wakes at its target, never earlier."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        target = self.now + seconds
        await asyncio.sleep(0)
        self.now = max(self.now, target)


def app_config(root: Path, *extra: str) -> AppConfig:
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose(
            "config",
            overrides=[
                "embedder=hashing",
                "tracking.traces=false",
                f"paths.root={root}",
                f"tracking.uri=sqlite:///{root / 'mlflow.db'}",
                "environment.consultations=6",
                "environment.consultations_per_day=3",
                *extra,
            ],
        )
    return load_app_config(cfg)


async def test_a_paced_moment_waits_for_real_time_scaled_by_the_ratio() -> None:
    real = FakeRealTime()
    pacer = Pacer(START, 24.0, monotonic=real.monotonic, sleep=real.sleep)
    # One virtual day at 24x is one real hour.
    assert pacer.real_due(START + timedelta(days=1)) == pytest.approx(3600.0)
    assert await pacer.until(START + timedelta(hours=2)) == pytest.approx(300.0)
    assert real.now == pytest.approx(400.0)
    # Already due: no wait; a moment before the start is due at once.
    assert await pacer.until(START + timedelta(hours=1)) == 0.0
    assert await pacer.until(START - timedelta(hours=1)) == 0.0
    assert pacer.slept_s == pytest.approx(300.0)


async def test_without_a_ratio_nothing_waits() -> None:
    real = FakeRealTime()
    for ratio in (None, 0):
        pacer = Pacer(START, ratio, monotonic=real.monotonic, sleep=real.sleep)
        assert not pacer.paced
        assert await pacer.until(START + timedelta(days=30)) == 0.0
    assert real.sleeps == []
    with pytest.raises(ValueError):
        Pacer(START, -1.0)


def test_the_spec_pace_is_the_schema_default_and_the_quick_run_is_unpaced(tmp_path: Path) -> None:
    from environments.config import EnvironmentConfig

    assert EnvironmentConfig().acceleration == SPEC_ACCELERATION == 24.0
    assert app_config(tmp_path).environment.acceleration is None
    assert app_config(tmp_path, "environment=paced").environment.acceleration == SPEC_ACCELERATION


async def test_a_paced_run_starts_no_consultation_early_and_changes_nothing(tmp_path: Path) -> None:
    ratio = 3600.0  # one virtual hour per real second
    real = FakeRealTime()
    began = real.now
    paced = await train(
        app_config(tmp_path / "paced", f"environment.acceleration={ratio}"),
        progress=False,
        monotonic=real.monotonic,
        sleep=real.sleep,
    )
    app = app_config(tmp_path / "fast")
    fast = await train(app, progress=False)
    assert (
        Path(paced.run_dir, "transcripts.jsonl").read_text()
        == Path(fast.run_dir, "transcripts.jsonl").read_text()
    )
    # Real time only passed in pacing sleeps, so the run ended exactly when its last arrival was due.
    env = app.environment
    due = max(
        (arrival_time(env.start, i, env.consultations_per_day, app.seed) - env.start).total_seconds() / ratio
        for i in range(env.consultations)
    )
    assert real.sleeps, "a paced run waits"
    assert real.now - began == pytest.approx(due)


async def test_latency_per_reply_is_measured_with_the_real_clock_given(tmp_path: Path) -> None:
    ticks = iter(range(10**9))
    step_s = 0.004

    def monotonic() -> float:
        return next(ticks) * step_s

    # One consultation at a time and no pacing: the clock is read only around each reply.
    summary = await train(
        app_config(tmp_path, "environment.concurrency=1"), progress=False, monotonic=monotonic
    )
    client = MlflowClient(summary.tracking_uri)
    history = client.get_metric_history(summary.run_id, "day.latency_p50_ms")
    assert sorted(m.step for m in history) == [0, 1]
    assert all(m.value == pytest.approx(step_s * 1000) for m in history)
    # Wall-clock figures stay out of the transcript, which a seeded run reproduces byte for byte.
    assert "latenc" not in Path(summary.run_dir, "transcripts.jsonl").read_text()
    day_tokens = client.get_metric_history(summary.run_id, "day.tokens")
    assert all(m.value > 0 for m in day_tokens)
    holding = client.get_metric_history(summary.run_id, "day.holding_reply_rate")
    assert all(0.0 <= m.value <= 1.0 for m in holding) and len(holding) == 2
