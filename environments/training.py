"""A training run: the population consults the advisor day by day, everything tracked in MLflow.

Consultations of one virtual day run concurrently, through an executor (`local` asyncio tasks or
`ray` actors, environments.executors), paced by the acceleration ratio (environments.pacing);
anything that learns (memory, case base, rules base) is updated between days in consultation
order, so a seeded scripted run gives the same result whatever the concurrency or executor. After
each day's learning a checkpoint is written (environments.checkpoint) and only then are the day's
figures logged, so a killed run resumed with `resume=RUN_ID` ends as an unkilled run would.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf
from pydantic import BaseModel
from tqdm import tqdm

from casebase import learn_knowledge
from casebase.snapshot import log_snapshot
from environments.assembly import World, build_world
from environments.checkpoint import (
    Checkpoint,
    CheckpointState,
    DayLog,
    NoveltyLog,
    ResumeMismatchError,
    add_usage,
    append_lines,
    clear_collections,
    collection_names,
    fingerprint,
    load_checkpoint,
    restore_collections,
    restore_memory,
    subtract_usage,
    truncate_to,
    usage_totals,
    write_checkpoint,
)
from environments.config import AppConfig
from environments.consultation import ConsultationRecord
from environments.curves import plot_run
from environments.executors import (
    ConsultationExecutor,
    ConsultationParts,
    ConsultationResult,
    ConsultationRunner,
    RecordingNovelty,
    build_executor,
)
from environments.learning import ConsultationLearner, LearningReport, outcome_summary
from environments.pacing import Pacer, Sleep
from environments.population import Customer, coverage
from environments.tracing import ConsultationTracer, tracing_to
from environments.tracking import RunTracker, default_tracking_uri, flatten
from environments.world import arrival_time, day_of, working_day
from simulacra.llm.accounting import TaskUsage, UsageLedger
from simulacra.memory.node import MemoryKind


class RunSummary(BaseModel):
    run_id: str
    run_dir: str
    tracking_uri: str
    scripted: bool
    metrics: dict[str, float]
    # Real seconds, and CPU seconds of this process, spent in the day loop (consultations, learning).
    loop_seconds: float = 0.0
    loop_cpu_seconds: float = 0.0
    # Real seconds of that loop spent running the days' consultations (the rest is learning,
    # checkpoints and logging between days).
    consultation_seconds: float = 0.0


def consultation_metrics(record: ConsultationRecord) -> dict[str, float]:
    advisor = record.advisor_turns
    n = max(1, len(advisor))
    return {
        "consultation.first_pass_compliance": sum(bool(t.first_pass_compliant) for t in advisor) / n,
        "consultation.escalations": float(sum(t.escalated for t in advisor)),
        "consultation.holding_replies": float(sum(t.holding for t in advisor)),
        "consultation.refinements": float(sum(t.refinements for t in advisor)),
        "consultation.tokens": float(record.tokens),
    }


def summary_metrics(
    records: list[ConsultationRecord], tokens_total: int, cost_usd: float
) -> dict[str, float]:
    advisor = [t for r in records for t in r.advisor_turns]
    n = max(1, len(advisor))
    judged = outcome_summary(records)
    metrics = {
        "consultations": float(len(records)),
        "advisor_turns": float(len(advisor)),
        "first_pass_compliance_rate": sum(bool(t.first_pass_compliant) for t in advisor) / n,
        "escalation_rate": sum(t.escalated for t in advisor) / n,
        "holding_reply_rate": sum(t.holding for t in advisor) / n,
        "refinements_per_turn": sum(t.refinements for t in advisor) / n,
        "tokens_total": float(tokens_total),
        "cost_usd_total": cost_usd,
        "goal_achieved_rate": judged.goal_achieved_rate,
        "satisfaction_mean": judged.satisfaction,
        "understanding_rate": judged.understanding,
    }
    first = Counter(code for t in advisor for code in t.first_pass_violations)
    for code, count in sorted(first.items()):
        metrics[f"violations.first_pass.{code}"] = float(count)
    metrics["escalations_queued"] = float(sum(t.queued for t in advisor))
    metrics["consultations_ended_by_escalation"] = float(sum(r.ended_by == "escalation" for r in records))
    decided = Counter(t.decided_by or "none" for t in advisor)
    for stage, count in sorted(decided.items()):
        metrics[f"decided_by.{stage}"] = float(count)
    return metrics


def rate(records: list[ConsultationRecord], predicate) -> float:
    turns = [t for r in records for t in r.advisor_turns]
    return sum(bool(predicate(t)) for t in turns) / max(1, len(turns))


class LearningTotals(BaseModel):
    cases_added: int = 0
    failures_seen: int = 0
    decisions: dict[str, int] = {}

    def add(self, report: LearningReport) -> None:
        self.cases_added += report.cases_added
        self.failures_seen += report.failures_seen
        for decision, count in report.decisions.items():
            self.decisions[decision] = self.decisions.get(decision, 0) + count


def day_metrics(
    records: list[ConsultationRecord],
    latencies_ms: list[float],
    usage: TaskUsage,
    world: World,
) -> dict[str, float]:
    """One virtual day's figures, logged at the day's step.

    `latencies_ms` (wall time per advisor reply) differs from run to run; everything else here is
    determined by the seed when the model is scripted.
    """
    counts = world.bases.rules.counts()
    judged = outcome_summary(records)
    return {
        "day.first_pass_compliance_rate": rate(records, lambda t: bool(t.first_pass_compliant)),
        "day.escalation_rate": rate(records, lambda t: t.escalated),
        "day.holding_reply_rate": rate(records, lambda t: t.holding),
        "day.goal_achieved_rate": judged.goal_achieved_rate,
        "day.satisfaction": judged.satisfaction,
        "day.understanding_score": judged.understanding,
        "day.latency_p50_ms": float(statistics.median(latencies_ms)) if latencies_ms else 0.0,
        "day.tokens": float(usage.input_tokens + usage.output_tokens),
        "day.cost_usd": usage.cost_usd,
        "cases_total": float(world.bases.cases.count()),
        "rules_active": float(counts.active),
    }


TRANSCRIPTS = "transcripts.jsonl"
PLANS = "advisor_plans.jsonl"


class UsageBook:
    """LLM usage of the whole run: what a checkpoint carried over, plus the driver's ledger since
    this process started running days, plus what the executor's workers used."""

    def __init__(self, ledger: UsageLedger, executor: ConsultationExecutor, before: dict[str, TaskUsage]):
        self.ledger = ledger
        self.executor = executor
        self.before = before
        self.baseline = ledger.snapshot()

    async def snapshot(self) -> dict[str, TaskUsage]:
        since = subtract_usage(self.ledger.snapshot(), self.baseline)
        return add_usage(self.before, since, await self.executor.usage())


@dataclass
class RunLoop:
    """What the day loop works on; `checkpoint` is the latest one written or resumed from."""

    app: AppConfig
    world: World
    customers: list[Customer]
    executor: ConsultationExecutor
    learner: ConsultationLearner
    learning: LearningTotals
    usage: UsageBook
    tracer: ConsultationTracer | None
    run_dir: Path
    checkpoint: Checkpoint | None
    pacer: Pacer
    progress: bool
    monotonic: Callable[[], float] = time.perf_counter
    consultation_seconds: float = 0.0  # real time spent in the days' consultations

    @property
    def reviewed(self) -> Path | None:
        name = self.app.advisor.reviewed_failures
        return Path(self.app.paths.root) / name if name else None

    def files(self) -> dict[str, int]:
        return dict(self.checkpoint.state.files) if self.checkpoint else {TRANSCRIPTS: 0, PLANS: 0}

    async def save(self, day: int, files: dict[str, int], pending_log: DayLog | None) -> Checkpoint:
        novelty = self.world.validator.novelty
        state = CheckpointState(
            fingerprint=fingerprint(self.app),
            day=day,
            files=files,
            memory_clock=self.world.memory_clock.now(),
            learning=self.learning.model_dump(),
            reviewed_seen=self.learner.reviewed_seen,
            usage=await self.usage.snapshot(),
            pending_log=pending_log,
        )
        self.checkpoint = write_checkpoint(
            self.run_dir,
            state,
            bases=self.world.bases,
            collections=collection_names(self.app),
            memory=self.world.memory,
            novelty=NoveltyLog(batches=novelty.batches, pending=novelty.pending())
            if isinstance(novelty, RecordingNovelty)
            else None,
        )
        return self.checkpoint

    def log_day(self, log: DayLog, records: list[ConsultationRecord], relogging: bool) -> None:
        """Log a day's figures and traces; after a kill, again (MLflow drops the exact repeats)."""
        tracker = self.world.tracker
        if self.tracer is not None:
            done = tracker.traced_consultations() if relogging else set()
            self.tracer.log_all([r for r in records if r.id not in done])
        tracker.log_steps(log.consultation_metrics, timestamp_ms=log.timestamp_ms)
        tracker.log_metrics(log.day_metrics, step=log.day, timestamp_ms=log.timestamp_ms)
        if self.checkpoint is not None:
            self.checkpoint.mark_logged()

    async def run_day(self, day: int, indices: list[int], bar: tqdm) -> None:
        app, world = self.app, self.world
        env = app.environment

        async def one(index: int) -> ConsultationResult:
            await self.pacer.until(arrival_time(env.start, index, env.consultations_per_day, app.seed))
            result = await self.executor.run(index)
            bar.update(1)
            return result

        usage_before = await self.usage.snapshot()
        began = self.monotonic()
        finished = sorted(await asyncio.gather(*(one(i) for i in indices)), key=lambda r: r.record.index)
        self.consultation_seconds += self.monotonic() - began
        records = [f.record for f in finished]
        files = self.files()
        files[TRANSCRIPTS] = append_lines(self.run_dir / TRANSCRIPTS, (r.model_dump_json() for r in records))
        files[PLANS] = append_lines(
            self.run_dir / PLANS, (json.dumps(node) for f in finished for node in f.plans)
        )
        # Learning, in consultation order, whatever order the consultations finished in.
        world.memory_clock.set(max(world.memory_clock.now(), max(r.ended_at for r in records)))
        if app.advisor.use_memory:
            await world.memory.consolidate(records)
        novelty = world.validator.novelty
        for text in await self.executor.end_day():
            if novelty is not None:
                novelty.is_novel(text)  # replies validated by workers join the driver's commit
        world.validator.commit_seen()
        self.learning.add(await self.learner.learn(records))
        if self.reviewed is not None:
            self.learning.add(await self.learner.learn_reviewed(self.reviewed))
        usage = usage_totals(subtract_usage(await self.usage.snapshot(), usage_before))
        log = DayLog(
            day=day,
            timestamp_ms=int(time.time() * 1000),
            consultation_metrics={r.index: consultation_metrics(r) for r in records},
            day_metrics=day_metrics(records, [ms for f in finished for ms in f.latencies_ms], usage, world),
            consultation_ids=[r.id for r in records],
        )
        checkpoint = await self.save(day, files, log)
        await self.executor.refresh(checkpoint)
        self.log_day(log, records, relogging=False)

    async def run(self) -> None:
        env = self.app.environment
        days = sorted({day_of(i, env.consultations_per_day) for i in range(env.consultations)})
        done = self.checkpoint.state.day if self.checkpoint else -1
        day_bar = tqdm(
            total=len(days), initial=sum(d <= done for d in days), desc="days", unit="day",
            position=0, disable=not self.progress,
        )  # fmt: skip
        for day in (d for d in days if d > done):
            indices = [i for i in range(env.consultations) if day_of(i, env.consultations_per_day) == day]
            bar = tqdm(
                total=len(indices), desc=f"day {day} consultations", unit="consultation",
                position=1, leave=False, disable=not self.progress,
            )  # fmt: skip
            await self.run_day(day, indices, bar)
            bar.close()
            day_bar.update(1)
        day_bar.close()


def read_records(path: Path, ids: set[str] | None = None) -> list[ConsultationRecord]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as lines:
        records = (ConsultationRecord.model_validate_json(line) for line in lines if line.strip())
        return [r for r in records if ids is None or r.id in ids]


def write_artifacts(
    run_dir: Path, app: AppConfig, world: World, customers: list[Customer], usage: dict[str, TaskUsage]
) -> list[Path]:
    """Everything but the transcripts and plans, which the day loop has appended as it went."""
    memory = world.memory.export_jsonl(run_dir / "advisor_memory.jsonl")
    plan_file = run_dir / PLANS
    plan_file.touch()
    transcripts = run_dir / TRANSCRIPTS
    cover = run_dir / "population_coverage.json"
    cover.write_text(coverage(customers).model_dump_json(indent=2), encoding="utf-8")
    usage_file = run_dir / "llm_usage.json"
    usage_file.write_text(
        json.dumps({k: v.model_dump() for k, v in usage.items()}, indent=2), encoding="utf-8"
    )
    config = run_dir / "config.yaml"
    config.write_text(OmegaConf.to_yaml(OmegaConf.create(app.model_dump(mode="json"))), encoding="utf-8")
    return [transcripts, cover, usage_file, config, memory, plan_file]


def open_tracker(app: AppConfig, tracking_uri: str, scripted: bool) -> RunTracker:
    """A new MLflow run, or with `resume` the killed one (still to be `reopen`ed)."""
    if app.resume:
        return RunTracker.attach(tracking_uri, app.resume)
    tags = {
        "llm.providers": ",".join(f"{link.provider}/{link.model}" for link in app.llm.chain),
        "llm.primary": app.llm.chain[0].provider,
        "llm.scripted": str(scripted).lower(),
        "embedder": app.embedder.name,
        "validator.mode": app.validator.mode,
        "seed": str(app.seed),
    }
    if scripted:
        tags["note"] = "made with the scripted offline stand-in model, not a real LLM"
    root = Path(app.paths.root)
    return RunTracker.start(
        tracking_uri, app.tracking.experiment, root / "mlartifacts", app.tracking.run_name, tags
    )


def resumable_checkpoint(app: AppConfig, run_dir: Path) -> Checkpoint | None:
    """The checkpoint to carry on from; refuses a command that would change what happens."""
    checkpoint = load_checkpoint(run_dir) if app.resume else None
    if checkpoint is not None and checkpoint.state.fingerprint != fingerprint(app):
        raise ResumeMismatchError(
            f"run {app.resume} was started with different settings: resume it with the same command "
            "plus resume=RUN_ID (only the executor, concurrency, acceleration and traces may differ)"
        )
    return checkpoint


async def prepare_world(
    app: AppConfig, tracker: RunTracker, run_dir: Path, checkpoint: Checkpoint | None
) -> World:
    """Build the world; when resuming, put it back in the state of the checkpoint (if any)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if not app.resume:
        return await build_world(app, tracker, run_dir)
    # The library is emptied and refilled in place rather than deleted: Chroma keeps one client
    # per folder and process, which a deleted folder would leave dangling.
    world = await build_world(app, tracker, run_dir, seed_knowledge=False)
    names = collection_names(app)
    if checkpoint is None:
        # Killed before its first checkpoint: start again from an empty run.
        for name in (TRANSCRIPTS, PLANS):
            (run_dir / name).unlink(missing_ok=True)
        if not app.casebase.store.remote and not app.casebase.store.path.is_absolute():
            clear_collections(world.bases, names)
        if app.advisor.use_cases and app.advisor.knowledge_cases:
            await learn_knowledge(world.bases.cases, world.knowledge, world.validator)
        return world
    for name, length in checkpoint.state.files.items():
        truncate_to(run_dir / name, length)
    restore_collections(world.bases, names, checkpoint.bases())
    restore_memory(world.memory, checkpoint.memory(), app)
    world.memory_clock.set(checkpoint.state.memory_clock)
    novelty = world.validator.novelty
    if isinstance(novelty, RecordingNovelty):
        log = checkpoint.novelty()
        novelty.replay(log.batches, log.pending)
    return world


async def train(
    app: AppConfig,
    progress: bool = True,
    *,
    monotonic: Callable[[], float] = time.perf_counter,
    sleep: Sleep = asyncio.sleep,
) -> RunSummary:
    """Run (or with `app.resume`, carry on) a training run. `monotonic` and `sleep` are the real
    clock for latency and pacing, injectable for tests."""
    root = Path(app.paths.root)
    root.mkdir(parents=True, exist_ok=True)
    tracking_uri = app.tracking.uri or default_tracking_uri(root)
    scripted = any(link.provider == "scripted" for link in app.llm.chain)
    tracker = open_tracker(app, tracking_uri, scripted)
    run_dir = root / tracker.run_id
    checkpoint = resumable_checkpoint(app, run_dir)
    if app.resume:
        tracker.reopen()
    world: World | None = None
    executor: ConsultationExecutor | None = None
    try:
        world = await prepare_world(app, tracker, run_dir, checkpoint)
        logged = tracker.params() if app.resume else {}
        params = flatten(app.model_dump(mode="json", exclude={"resume"}))
        tracker.log_params({k: v for k, v in params.items() if k not in logged})
        customers = world.population.draw(app.environment.consultations)
        learning = (
            LearningTotals.model_validate(checkpoint.state.learning) if checkpoint else LearningTotals()
        )
        learner = ConsultationLearner(
            world.bases,
            world.accumulator,
            {c.id: c for c in customers},
            learn_cases=app.advisor.use_cases,
            learn_rules=app.advisor.use_rules,
        )
        parts = ConsultationParts(
            llm=world.llm,
            embedder=world.embedder,
            gate=world.gate,
            tools=world.tools,
            rater=world.rater,
            memory=world.memory,
            bases=world.bases,
        )
        runner = ConsultationRunner(app, parts, customers, monotonic)
        executor = build_executor(app, runner, tracker.run_id)
        tracer = (
            ConsultationTracer(tracker.client, tracker.experiment_id, tracker.run_id)
            if app.tracking.traces
            else None
        )
        usage = UsageBook(world.llm.ledger, executor, checkpoint.state.usage if checkpoint else {})
        if checkpoint is not None:
            learner.reviewed_seen = checkpoint.state.reviewed_seen
        else:
            usage.baseline = {}  # a new run counts what building its world cost
        next_day = checkpoint.state.day + 1 if checkpoint else 0
        loop = RunLoop(
            app=app,
            world=world,
            customers=customers,
            executor=executor,
            learner=learner,
            learning=learning,
            usage=usage,
            tracer=tracer,
            run_dir=run_dir,
            checkpoint=checkpoint,
            pacer=Pacer(
                working_day(app.environment.start, next_day),
                app.environment.acceleration,
                monotonic=monotonic,
                sleep=sleep,
            ),
            progress=progress,
            monotonic=monotonic,
        )
        with tracing_to(tracking_uri):
            if checkpoint is None:
                if loop.reviewed is not None:
                    # What reviewers rejected before this run started is learned from before day one.
                    learning.add(await learner.learn_reviewed(loop.reviewed))
                checkpoint = await loop.save(-1, loop.files(), None)
            elif checkpoint.state.pending_log is not None:
                pending = checkpoint.state.pending_log
                day_records = read_records(run_dir / TRANSCRIPTS, set(pending.consultation_ids))
                loop.log_day(pending, day_records, relogging=True)
            await executor.refresh(checkpoint)
            began, cpu_began = monotonic(), time.process_time()
            await loop.run()
            loop_seconds, loop_cpu_seconds = monotonic() - began, time.process_time() - cpu_began
        records = read_records(run_dir / TRANSCRIPTS)
        run_usage = await usage.snapshot()
        totals = usage_totals(run_usage)
        metrics = summary_metrics(records, totals.input_tokens + totals.output_tokens, totals.cost_usd)
        metrics["memories_total"] = float(len(world.memory.stream))
        metrics["reflections_total"] = float(len(world.memory.stream.nodes(kind=MemoryKind.REFLECTION)))
        with (run_dir / PLANS).open(encoding="utf-8") as plan_lines:
            metrics["plans_total"] = float(sum(1 for line in plan_lines if line.strip()))
        metrics["cases_added"] = float(learning.cases_added)
        metrics["rule_accumulation_runs"] = float(learning.failures_seen)
        for decision, count in sorted(learning.decisions.items()):
            metrics[f"rule_accumulation.{decision}"] = float(count)
        snapshot = log_snapshot(
            world.bases, run_dir / "casebase_snapshot", tracker, step=app.environment.consultations
        )
        metrics.update(
            cases_total=float(snapshot.cases_total),
            rules_total=float(snapshot.rules_total),
            rules_active=float(snapshot.rules_active),
        )
        tracker.log_metrics(metrics, step=app.environment.consultations)
        tracker.log_artifacts(write_artifacts(run_dir, app, world, customers, run_usage))
        curves = plot_run(
            tracker.client,
            tracker.run_id,
            run_dir / "learning_curves.png",
            f"{app.tracking.experiment}: {app.environment.consultations} consultations",
        )
        if curves is not None:
            tracker.log_artifacts([curves])
    except BaseException:
        tracker.finish("FAILED")
        raise
    finally:
        if executor is not None:
            await executor.close()
        if world is not None:
            world.review_queue.close()
    tracker.finish()
    return RunSummary(
        run_id=tracker.run_id,
        run_dir=str(run_dir),
        tracking_uri=tracking_uri,
        scripted=scripted,
        metrics=metrics,
        loop_seconds=loop_seconds,
        loop_cpu_seconds=loop_cpu_seconds,
        consultation_seconds=loop.consultation_seconds,
    )
