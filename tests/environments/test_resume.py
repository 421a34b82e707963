"""Kill a training run with SIGKILL at any moment, resume it, and get what an unkilled run gets."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from mlflow import MlflowClient

from casebase import open_bases
from environments.assembly import build_run_embedder
from environments.checkpoint import (
    CHECKPOINT_DIR,
    CURRENT,
    ResumeMismatchError,
    append_lines,
    fingerprint,
    load_checkpoint,
    restore_collections,
    save_collections,
    truncate_to,
)
from environments.config import AppConfig, load_app_config
from environments.tracking import RunTracker
from environments.training import train
from simulacra.clock import VirtualClock

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf"
# Three virtual days of four consultations: small enough for CI, long enough to kill mid-run.
SIZE = ["environment.consultations=12", "environment.consultations_per_day=4"]


def overrides(root: Path) -> list[str]:
    return [
        "embedder=hashing",
        "tracking.traces=false",
        f"paths.root={root}",
        f"tracking.uri=sqlite:///{root / 'mlflow.db'}",
        *SIZE,
    ]


def app_config(root: Path, *extra: str) -> AppConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return load_app_config(compose("config", overrides=[*overrides(root), *extra]))


def start_cli(root: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}}
    return subprocess.Popen(
        [sys.executable, "-m", "environments.train", *overrides(root), *extra],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def current_checkpoint(root: Path) -> tuple[str, str] | None:
    """(run id, checkpoint folder name) once a run has written a checkpoint."""
    for pointer in root.glob(f"*/{CHECKPOINT_DIR}/{CURRENT}"):
        return pointer.parents[1].name, pointer.read_text(encoding="utf-8").strip()
    return None


def wait_for(predicate, process: subprocess.Popen[bytes], timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        if process.poll() is not None:
            raise AssertionError(f"the run ended before it could be killed: {process.stderr.read()!r}")
        time.sleep(0.02)
    raise AssertionError("timed out waiting for the run")


def kill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL


def library(root: Path, run_id: str, app: AppConfig) -> dict[str, list[str]]:
    """Every case and rule document of a finished run's library, in id order."""
    store = app.casebase.store.model_copy(update={"path": root / run_id / "casebase"})
    bases = open_bases(
        app.casebase.model_copy(update={"store": store}),
        build_run_embedder(app.embedder),
        VirtualClock(app.environment.start),
    )
    return {
        "cases": sorted(c.model_dump_json() for c in bases.cases.collection.all()),
        "rules": sorted(r.model_dump_json() for r in bases.rules.collection.all()),
    }


def metric_steps(client: MlflowClient, run_id: str, key: str) -> list[int]:
    return sorted(m.step for m in client.get_metric_history(run_id, key))


async def test_a_run_killed_twice_resumes_to_what_an_unkilled_run_gives(tmp_path: Path) -> None:
    whole_root, killed_root = tmp_path / "whole", tmp_path / "killed"
    whole = await train(app_config(whole_root), progress=False)

    # First kill: just after the first day's checkpoint appears.
    first = start_cli(killed_root)
    run_id, _ = wait_for(
        lambda: (found := current_checkpoint(killed_root)) and found[1].startswith("day-00001") and found,
        first,
    )
    kill(first)
    # Second kill: at a random moment of the resumed run (seeded, so a failure can be replayed).
    second = start_cli(killed_root, f"resume={run_id}")
    time.sleep(random.Random(6).uniform(2.0, 8.0))
    if second.poll() is None:
        kill(second)
    assert current_checkpoint(killed_root)[0] == run_id
    finished = subprocess.run(
        [sys.executable, "-m", "environments.train", *overrides(killed_root), f"resume={run_id}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert run_id in finished.stdout

    ran = Path(killed_root / run_id / "transcripts.jsonl").read_text(encoding="utf-8")
    expected = Path(whole.run_dir, "transcripts.jsonl").read_text(encoding="utf-8")
    indices = [json.loads(line)["index"] for line in ran.splitlines()]
    assert indices == list(range(12)), "every consultation exactly once, in order"
    assert ran == expected
    assert (
        Path(killed_root / run_id / "advisor_plans.jsonl").read_text()
        == Path(whole.run_dir, "advisor_plans.jsonl").read_text()
    )
    app = app_config(killed_root)
    assert library(killed_root, run_id, app) == library(whole_root, whole.run_id, app)

    client = MlflowClient(f"sqlite:///{killed_root / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.info.run_id for r in runs] == [run_id], "the killed run was carried on, not restarted"
    assert runs[0].info.status == "FINISHED"
    # Each day and each consultation logged once, however often the run was killed and resumed.
    assert metric_steps(client, run_id, "day.first_pass_compliance_rate") == [0, 1, 2]
    assert metric_steps(client, run_id, "consultation.tokens") == list(range(12))
    whole_client = MlflowClient(f"sqlite:///{whole_root / 'mlflow.db'}")
    for key in ("first_pass_compliance_rate", "tokens_total", "cases_total", "rules_active"):
        assert runs[0].data.metrics[key] == whole_client.get_run(whole.run_id).data.metrics[key], key
    for key in ("day.tokens", "cases_total", "day.holding_reply_rate"):
        killed_history = [(m.step, m.value) for m in client.get_metric_history(run_id, key)]
        whole_history = [(m.step, m.value) for m in whole_client.get_metric_history(whole.run_id, key)]
        assert sorted(killed_history) == sorted(whole_history), key


async def test_resuming_with_different_settings_is_refused(tmp_path: Path) -> None:
    summary = await train(app_config(tmp_path, "environment.consultations=4"), progress=False)
    with pytest.raises(ResumeMismatchError):
        await train(app_config(tmp_path, "environment.consultations=4", f"resume={summary.run_id}", "seed=1"))
    # Only how it runs may change: concurrency, pace, executor, traces.
    again = await train(
        app_config(
            tmp_path, "environment.consultations=4", f"resume={summary.run_id}", "environment.concurrency=1"
        ),
        progress=False,
    )
    assert again.run_id == summary.run_id
    assert again.metrics["consultations"] == 4


def test_the_fingerprint_ignores_only_how_a_run_is_carried_out(tmp_path: Path) -> None:
    base = app_config(tmp_path)
    assert fingerprint(base) == fingerprint(app_config(tmp_path, "environment.concurrency=2", "resume=x"))
    assert fingerprint(base) == fingerprint(app_config(tmp_path, "environment.acceleration=100"))
    assert fingerprint(base) != fingerprint(app_config(tmp_path, "seed=4"))
    assert fingerprint(base) != fingerprint(app_config(tmp_path, "advisor.max_turns=2"))


def test_truncating_cuts_an_append_only_file_back_to_what_the_checkpoint_saw(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    length = append_lines(path, ["one", "two"])
    append_lines(path, ["three, half written"])
    truncate_to(path, length)
    assert path.read_text() == "one\ntwo\n"
    with pytest.raises(ValueError, match="shorter"):
        truncate_to(path, length + 1)


def test_a_restored_library_holds_exactly_the_snapshot(tmp_path: Path) -> None:
    from casebase.models import Case, CaseOutcome

    app = app_config(tmp_path)
    embedder = build_run_embedder(app.embedder)
    store = app.casebase.store.model_copy(update={"path": tmp_path / "lib"})
    bases = open_bases(
        app.casebase.model_copy(update={"store": store}), embedder, VirtualClock(app.environment.start)
    )

    def case(text: str) -> Case:
        return Case(
            task_type="consolidation",
            customer_profile={},
            context=text,
            guidance=f"guidance about {text}",
            reasoning="test",
            outcome=CaseOutcome(first_pass_compliant=True, escalated=False, goal_achieved=True),
            compliance_verified=True,
            provenance="virtual_training",
        )

    for text in ("small pots", "a lost pension"):
        bases.cases.add(case(text))
    names = [store.cases_collection, store.rules_collection]
    save_collections(bases, names, tmp_path / "snap")
    before = sorted(c.model_dump_json() for c in bases.cases.collection.all())
    bases.cases.add(case("a transfer out of a defined benefit scheme"))
    restore_collections(bases, names, tmp_path / "snap")
    assert sorted(c.model_dump_json() for c in bases.cases.collection.all()) == before
    raw = bases.client.get_collection(store.cases_collection, embedding_function=None)
    stored = raw.get(include=["embeddings"])
    saved = np.load(tmp_path / "snap" / f"{store.cases_collection}.npy")
    assert np.allclose(np.asarray(stored["embeddings"]), saved)


async def test_a_checkpoint_is_written_after_every_day_and_names_the_files_it_saw(tmp_path: Path) -> None:
    summary = await train(app_config(tmp_path), progress=False)
    checkpoint = load_checkpoint(Path(summary.run_dir))
    assert checkpoint is not None
    assert checkpoint.state.day == 2
    assert checkpoint.state.pending_log is None, "the last day's figures reached MLflow"
    transcripts = Path(summary.run_dir, "transcripts.jsonl")
    assert checkpoint.state.files["transcripts.jsonl"] == transcripts.stat().st_size
    assert [p.name for p in (Path(summary.run_dir) / CHECKPOINT_DIR).iterdir() if p.is_dir()] == [
        checkpoint.folder.name
    ], "older checkpoints are removed once a newer one is current"


async def test_a_day_killed_while_its_figures_went_to_mlflow_is_logged_once_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = ["tracking.traces=true", "environment.consultations=4", "environment.consultations_per_day=2"]
    log_steps = RunTracker.log_steps

    def dies_halfway_through_day_one(self, by_step, timestamp_ms=None):
        if min(by_step) >= 2:  # the second day's consultations: log one, then the process "dies"
            log_steps(self, {2: by_step[2]}, timestamp_ms)
            raise RuntimeError("killed while logging")
        return log_steps(self, by_step, timestamp_ms)

    monkeypatch.setattr(RunTracker, "log_steps", dies_halfway_through_day_one)
    with pytest.raises(RuntimeError, match="killed while logging"):
        await train(app_config(tmp_path, *extra), progress=False)
    monkeypatch.undo()
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    checkpoint = load_checkpoint(tmp_path / run.info.run_id)
    assert checkpoint is not None and checkpoint.state.pending_log is not None

    summary = await train(app_config(tmp_path, *extra, f"resume={run.info.run_id}"), progress=False)
    assert summary.run_id == run.info.run_id
    assert metric_steps(client, run.info.run_id, "consultation.tokens") == [0, 1, 2, 3]
    assert metric_steps(client, run.info.run_id, "day.tokens") == [0, 1]
    traces = client.search_traces(locations=[run.info.experiment_id], include_spans=False)
    traced = sorted(t.info.tags["consultation_id"] for t in traces)
    assert traced == [f"consultation-{i:05d}" for i in range(4)], "one trace per consultation"
    assert client.get_run(run.info.run_id).info.status == "FINISHED"
