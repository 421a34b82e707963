"""Executors: the local asyncio one and Ray actors on a local Ray instance give the same run."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

from compliance.validator import NoveltyDetector
from environments.assembly import build_run_embedder
from environments.config import AppConfig, load_app_config
from environments.executors import RecordingNovelty
from environments.training import train

REPO = Path(__file__).resolve().parents[2]


def app_config(root: Path, *extra: str) -> AppConfig:
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose(
            "config",
            overrides=[
                "embedder=hashing",
                "tracking.traces=false",
                f"paths.root={root}",
                f"tracking.uri=sqlite:///{root / 'mlflow.db'}",
                "environment.consultations=8",
                "environment.consultations_per_day=4",
                "seed=5",
                *extra,
            ],
        )
    return load_app_config(cfg)


def test_the_executor_group_composes_local_by_default_and_ray_on_request(tmp_path: Path) -> None:
    assert app_config(tmp_path).executor.name == "local"
    ray = app_config(tmp_path, "executor=ray", "executor.workers=3").executor
    assert (ray.name, ray.address, ray.workers) == ("ray", None, 3)


def test_replaying_the_novelty_log_rebuilds_the_same_novelty_memory(tmp_path: Path) -> None:
    embedder = build_run_embedder(app_config(tmp_path).embedder)
    live = RecordingNovelty(NoveltyDetector(embedder, threshold=0.35, warmup=2))
    for day in (["a pension", "a lump sum"], ["drawdown income", "a pension"], ["an annuity"]):
        for text in day:
            live.is_novel(text)
        live.commit()
    live.is_novel("shown after the last commit")
    rebuilt = RecordingNovelty(NoveltyDetector(embedder, threshold=0.35, warmup=2))
    rebuilt.replay(live.batches, live.pending())
    assert rebuilt.batches == live.batches
    assert rebuilt.pending() == ["shown after the last commit"]
    for probe in ("a pension", "something else entirely", "drawdown"):
        assert rebuilt.is_novel(probe) == live.is_novel(probe)
    assert rebuilt.commit() == live.commit()


async def test_a_seeded_scripted_run_on_ray_gives_the_local_transcripts(tmp_path: Path) -> None:
    local = await train(app_config(tmp_path / "local"), progress=False)
    on_ray = await train(
        app_config(tmp_path / "ray", "executor=ray", "executor.workers=2", "executor.num_cpus=2"),
        progress=False,
    )
    local_text = Path(local.run_dir, "transcripts.jsonl").read_text(encoding="utf-8")
    ray_text = Path(on_ray.run_dir, "transcripts.jsonl").read_text(encoding="utf-8")
    assert local_text.count("\n") == 8
    assert ray_text == local_text
    assert (
        Path(on_ray.run_dir, "advisor_plans.jsonl").read_text()
        == Path(local.run_dir, "advisor_plans.jsonl").read_text()
    )
    for key in ("cases_total", "rules_active", "first_pass_compliance_rate", "tokens_total"):
        assert on_ray.metrics[key] == local.metrics[key], key
