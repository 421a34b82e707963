"""Executors: the local asyncio one and Ray actors on a local Ray instance give the same run, also
with every store a server (Chroma, PostgreSQL, MLflow) as on a cluster."""

from __future__ import annotations

import sys
from pathlib import Path

import chromadb
from hydra import compose, initialize_config_dir
from mlflow import MlflowClient

from compliance.review_queue import ReviewQueue
from compliance.validator import NoveltyDetector
from environments.assembly import build_run_embedder
from environments.config import AppConfig, load_app_config
from environments.executors import RecordingNovelty
from environments.training import train
from simulacra.clock import SystemClock
from tests.postgres import PostgresServer
from tests.servers import chroma_cli, free_port, running_server

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


async def test_ray_with_every_store_a_server_gives_the_local_transcripts(tmp_path: Path) -> None:
    """executor=ray with the case and rules bases on a Chroma server, the review queue on
    PostgreSQL and tracking on an MLflow server, as on a cluster: the same run as local."""
    local = await train(app_config(tmp_path / "local"), progress=False)
    chroma_port, mlflow_port = free_port(), free_port()
    chroma = [
        chroma_cli(),
        "run",
        "--path",
        str(tmp_path / "chroma"),
        "--host",
        "127.0.0.1",
        "--port",
        str(chroma_port),
    ]
    tracking = f"http://127.0.0.1:{mlflow_port}"
    mlflow_server = [
        sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(mlflow_port),
        "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
        "--artifacts-destination", str(tmp_path / "server-artifacts"), "--workers", "1",
    ]  # fmt: skip
    with (
        PostgresServer() as postgres,
        running_server(chroma, f"http://127.0.0.1:{chroma_port}/api/v2/heartbeat", tmp_path / "chroma.log"),
        running_server(mlflow_server, f"{tracking}/health", tmp_path / "mlflow.log"),
    ):
        queue_url = postgres.create_database("queue")
        app = app_config(
            tmp_path / "cluster",
            "executor=ray",
            "executor.workers=2",
            "executor.num_cpus=2",
            "casebase.store.host=127.0.0.1",
            f"casebase.store.port={chroma_port}",
            "casebase.store.collection_prefix=cluster-",
            f"validator.review_queue_url={queue_url}",
            f"tracking.uri={tracking}",
        )
        on_servers = await train(app, progress=False)
        client = MlflowClient(tracking)
        assert client.get_run(on_servers.run_id).info.status == "FINISHED"
        names = {c.name for c in chromadb.HttpClient(host="127.0.0.1", port=chroma_port).list_collections()}
        queue = ReviewQueue(queue_url, SystemClock())
        try:
            # Every escalation the run queued is on the PostgreSQL server.
            assert queue.stats().waiting == on_servers.metrics["escalations_queued"] > 0
        finally:
            queue.close()
    assert any(name.startswith("cluster-") for name in names)
    assert Path(on_servers.run_dir, "transcripts.jsonl").read_text(encoding="utf-8") == Path(
        local.run_dir, "transcripts.jsonl"
    ).read_text(encoding="utf-8")
    for key in ("cases_total", "rules_active", "first_pass_compliance_rate"):
        assert on_servers.metrics[key] == local.metrics[key], key
