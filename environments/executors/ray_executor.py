"""The `ray` executor: consultations run in Ray actors, on a local Ray instance or a cluster.

Each actor builds its own consultation world from the run's config (LLM client, validator, gate,
tools, advisor memory, case and rules bases) and runs many consultations at once with asyncio.
The driver keeps the one true world: it learns into it between days, writes a checkpoint and then
sends every actor that checkpoint, so all actors read what the driver learned.

- Case and rules bases: with a Chroma server (`casebase.store.host`) the actors read the same
  collections the driver writes, so only the memory and novelty snapshot travel. With the embedded
  Chroma store (one process only) each actor keeps a read-only replica in its own scratch folder,
  emptied and refilled from the checkpoint's snapshot after each day.
- The advisor's memory stream and the validator's novelty memory are reloaded from the checkpoint.
- Escalations go to the review queue the config names: point `validator.review_queue_url` at
  PostgreSQL on a cluster (the default SQLite file only works when every actor shares the disk).
- Actors report the replies their validators saw (for the driver's novelty memory to commit) and
  their LLM usage; tracking stays with the driver.

The checkpoint travels through Ray's object store as bytes, so actors need no shared disk.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from casebase.tasks import PROMPTS_DIR as CASEBASE_PROMPTS
from compliance.escalation import ReviewQueueSink
from compliance.knowledge import load_knowledge
from compliance.review_queue import ReviewQueue
from compliance.validator_gate import ComplianceGate
from environments.assembly import (
    RATER_CACHE,
    build_run_embedder,
    build_run_validator,
    open_run_bases,
    scripted_handlers,
)
from environments.checkpoint import (
    STATE,
    Checkpoint,
    CheckpointState,
    add_usage,
    collection_names,
    restore_collections,
    restore_memory,
)
from environments.config import AppConfig
from environments.executors.novelty import record_novelty
from environments.executors.runner import ConsultationParts, ConsultationResult, ConsultationRunner
from environments.memory import AdvisorMemory
from environments.population import PopulationGenerator, load_population_data
from environments.tasks import PROMPTS_DIR
from environments.tools import AdvisorTools
from simulacra import PROMPTS_DIR as SIMULACRA_PROMPTS
from simulacra.clock import SystemClock, VirtualClock
from simulacra.llm.accounting import TaskUsage
from simulacra.llm.config import build_llm_client
from simulacra.memory.importance import LLMImportanceRater
from simulacra.memory.reflection import ReflectionConfig

REPO = Path(__file__).resolve().parents[2]


def pack(checkpoint: Checkpoint, with_bases: bool) -> dict[str, bytes]:
    """The checkpoint folder as {relative path: bytes}, to travel through Ray's object store."""
    files = {}
    for path in sorted(checkpoint.folder.rglob("*")):
        relative = path.relative_to(checkpoint.folder)
        if path.is_file() and (with_bases or relative.parts[0] != "bases"):
            files[relative.as_posix()] = path.read_bytes()
    return files


def unpack(files: dict[str, bytes], folder: Path) -> Checkpoint:
    if folder.exists():
        shutil.rmtree(folder)
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    state = CheckpointState.model_validate_json((folder / STATE).read_text(encoding="utf-8"))
    return Checkpoint(folder=folder, state=state)


class ConsultationWorker:
    """One Ray actor's consultation world (wrapped with `ray.remote` by `RayExecutor`)."""

    def __init__(self, app_json: str, run_id: str) -> None:
        app = AppConfig.model_validate_json(app_json)
        self.app = app
        self.scratch = Path(tempfile.mkdtemp(prefix="consultation-worker-"))
        handlers = scripted_handlers()
        self.llm = build_llm_client(
            app.llm,
            handlers=handlers,
            prompt_folders=[PROMPTS_DIR, SIMULACRA_PROMPTS, CASEBASE_PROMPTS],
            seed=app.seed,
            cache_dir=self.scratch,
        )
        knowledge = load_knowledge()
        embedder = build_run_embedder(app.embedder)
        validator = build_run_validator(app, knowledge, handlers, embedder)
        self.novelty = record_novelty(validator)
        self.memory_clock = VirtualClock(app.environment.start)
        rater = LLMImportanceRater(self.llm, cache_size=RATER_CACHE)
        memory = AdvisorMemory(
            embedder,
            self.memory_clock,
            rater,
            self.llm,
            ReflectionConfig(threshold=app.advisor.reflection_threshold),
        )
        queue_url = (
            app.validator.review_queue_url
            or f"sqlite:///{Path(app.paths.root).resolve() / 'review_queue.db'}"
        )
        self.review_queue = ReviewQueue(queue_url, SystemClock())
        gate = ComplianceGate(
            validator,
            holding_reply=app.validator.holding_reply,
            max_refinements=app.validator.max_refinements,
            escalations=ReviewQueueSink(
                self.review_queue, source="training", mode=app.validator.mode, run_id=run_id
            ),
        )
        # A relative store path opens a replica in this worker's scratch folder; a server is shared.
        self.replica = not app.casebase.store.remote
        store_app = app
        if self.replica:
            store = app.casebase.store.model_copy(update={"path": Path("casebase")})
            store_app = app.model_copy(update={"casebase": app.casebase.model_copy(update={"store": store})})
        bases = open_run_bases(store_app, self.scratch, embedder, self.memory_clock, self.llm)
        parts = ConsultationParts(
            llm=self.llm,
            embedder=embedder,
            gate=gate,
            tools=AdvisorTools(knowledge),
            rater=rater,
            memory=memory,
            bases=bases,
        )
        population = PopulationGenerator(
            load_population_data(app.customers.data_file),
            app.seed,
            vulnerable_share=app.customers.vulnerable_share,
            scam_exposure_share=app.customers.scam_exposure_share,
        )
        self.runner = ConsultationRunner(app, parts, population.draw(app.environment.consultations))
        self.applied_batches = 0

    async def refresh(self, files: dict[str, bytes]) -> int:
        """Load the driver's checkpoint: bases (if a replica), memory, clock and novelty memory."""
        checkpoint = unpack(files, self.scratch / "checkpoint")
        parts = self.runner.parts
        if self.replica:
            restore_collections(parts.bases, collection_names(self.app), checkpoint.bases())
        restore_memory(parts.memory, checkpoint.memory(), self.app)
        if self.memory_clock.now() < checkpoint.state.memory_clock:
            self.memory_clock.set(checkpoint.state.memory_clock)
        if self.novelty is not None:
            # Only committed batches: what the driver's learning showed its validator since its
            # last commit is committed with the next day, and compared against only after that.
            batches = checkpoint.novelty().batches
            self.novelty.replay(batches[self.applied_batches :])
            self.applied_batches = len(batches)
        return checkpoint.state.day

    async def run(self, index: int) -> str:
        result = await self.runner.run(index)
        return result.model_dump_json()

    async def drain_seen(self) -> list[str]:
        return self.novelty.drain_seen() if self.novelty is not None else []

    async def usage(self) -> dict[str, Any]:
        return {task: usage.model_dump() for task, usage in self.llm.ledger.snapshot().items()}

    async def shutdown(self) -> None:
        self.review_queue.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


class RayExecutor:
    name = "ray"

    def __init__(self, app: AppConfig, run_id: str) -> None:
        import ray  # an optional dependency: only this executor needs it

        self.ray = ray
        cfg = app.executor
        self.started_ray = False
        if not ray.is_initialized():
            runtime_env = dict(cfg.runtime_env)
            if cfg.address is None:
                # A local instance: workers import the project from this checkout.
                env_vars = dict(runtime_env.get("env_vars", {}))
                env_vars.setdefault("PYTHONPATH", str(REPO))
                runtime_env["env_vars"] = env_vars
            ray.init(
                address=cfg.address,
                num_cpus=cfg.num_cpus if cfg.address is None else None,
                include_dashboard=False,
                runtime_env=runtime_env or None,
                log_to_driver=cfg.log_to_driver,
            )
            self.started_ray = True
        worker = ray.remote(num_cpus=cfg.worker_cpus)(ConsultationWorker)
        app_json = app.model_dump_json()
        self.actors = [worker.remote(app_json, run_id) for _ in range(cfg.workers)]
        self.replica = not app.casebase.store.remote
        self.concurrency = app.environment.concurrency
        self._limit: asyncio.Semaphore | None = None
        self._next = 0
        self._pending_by_actor: list[int] = [0] * len(self.actors)

    def _actor(self) -> int:
        """The actor with the fewest consultations in flight (ties: round robin)."""
        count = len(self.actors)
        order = [(self._next + k) % count for k in range(count)]
        chosen = min(order, key=lambda i: self._pending_by_actor[i])
        self._next = (chosen + 1) % count
        return chosen

    async def run(self, index: int) -> ConsultationResult:
        if self._limit is None:
            self._limit = asyncio.Semaphore(self.concurrency)
        async with self._limit:
            chosen = self._actor()
            self._pending_by_actor[chosen] += 1
            try:
                raw = await self.actors[chosen].run.remote(index)
            finally:
                self._pending_by_actor[chosen] -= 1
        return ConsultationResult.model_validate_json(raw)

    async def end_day(self) -> list[str]:
        seen = await asyncio.gather(*(actor.drain_seen.remote() for actor in self.actors))
        return sorted({text for batch in seen for text in batch})

    async def refresh(self, checkpoint: Checkpoint) -> None:
        files = self.ray.put(pack(checkpoint, with_bases=self.replica))
        await asyncio.gather(*(actor.refresh.remote(files) for actor in self.actors))

    async def usage(self) -> dict[str, TaskUsage]:
        reports = await asyncio.gather(*(actor.usage.remote() for actor in self.actors))
        return add_usage(
            *({task: TaskUsage.model_validate(u) for task, u in report.items()} for report in reports)
        )

    async def close(self) -> None:
        await asyncio.gather(*(actor.shutdown.remote() for actor in self.actors), return_exceptions=True)
        for actor in self.actors:
            self.ray.kill(actor)
        if self.started_ray:
            self.ray.shutdown()
