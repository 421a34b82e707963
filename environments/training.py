"""A training run: the population consults the advisor day by day, everything tracked in MLflow.

Consultations of one virtual day run concurrently; anything that learns (memory, case base,
rules base) is updated between days in consultation order, so a seeded scripted run gives the
same result whatever the concurrency.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

from omegaconf import OmegaConf
from pydantic import BaseModel
from tqdm import tqdm

from casebase import CaseRetriever, RuleRetriever
from casebase.snapshot import log_snapshot
from environments.advisor import AdvisorSession, ConsultationState
from environments.assembly import World, build_world
from environments.config import AppConfig
from environments.consultation import ConsultationRecord, consultation_id, run_consultation
from environments.learning import ConsultationLearner, LearningReport, outcome_of
from environments.population import Customer, coverage
from environments.tracing import ConsultationTracer, tracing_to
from environments.tracking import RunTracker, default_tracking_uri, flatten
from environments.world import arrival_time, day_of
from simulacra.agent import AgentConfig, ExtraSource
from simulacra.clock import VirtualClock
from simulacra.memory.node import MemoryKind
from simulacra.memory.reflection import ReflectionConfig


class RunSummary(BaseModel):
    run_id: str
    run_dir: str
    tracking_uri: str
    scripted: bool
    metrics: dict[str, float]


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
    outcomes = [outcome_of(r) for r in records]
    metrics = {
        "consultations": float(len(records)),
        "advisor_turns": float(len(advisor)),
        "first_pass_compliance_rate": sum(bool(t.first_pass_compliant) for t in advisor) / n,
        "escalation_rate": sum(t.escalated for t in advisor) / n,
        "holding_reply_rate": sum(t.holding for t in advisor) / n,
        "refinements_per_turn": sum(t.refinements for t in advisor) / n,
        "tokens_total": float(tokens_total),
        "cost_usd_total": cost_usd,
        "goal_achieved_rate": sum(bool(o.goal_achieved) for o in outcomes) / max(1, len(outcomes)),
        "understanding_rate": sum(o.understanding or 0.0 for o in outcomes) / max(1, len(outcomes)),
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


async def run_days(
    app: AppConfig,
    world: World,
    customers: list[Customer],
    progress: bool,
    plans: list[dict],
    transcripts: Path,
    learning: LearningTotals,
    tracer: ConsultationTracer | None,
) -> list[ConsultationRecord]:
    """Run the consultations day by day, appending each finished day to `transcripts` so a killed
    run keeps every consultation it completed."""
    env = app.environment
    records: list[ConsultationRecord] = []
    limit = asyncio.Semaphore(env.concurrency)

    agent_config = AgentConfig(
        memories_k=app.advisor.memories_k,
        reflection=ReflectionConfig(threshold=app.advisor.reflection_threshold),
    )

    learner = ConsultationLearner(
        world.bases,
        world.accumulator,
        {c.id: c for c in customers},
        learn_cases=app.advisor.use_cases,
        learn_rules=app.advisor.use_rules,
    )

    def session_for(index: int, clock: VirtualClock) -> AdvisorSession:
        customer = customers[index]
        retrievers = []
        if app.advisor.use_memory:
            retrievers.append(ExtraSource("experience", world.memory.retriever(), k=app.advisor.memories_k))
        # The consultation's topic is known from the start, so cases are searched within it
        # rather than classifying every utterance again.
        if app.advisor.use_cases:
            cases = CaseRetriever(world.bases.cases, task_type_fn=lambda _query: customer.goal)
            retrievers.append(ExtraSource("cases", cases, k=app.casebase.cases.k))
        if app.advisor.use_rules:
            rules = RuleRetriever(world.bases.rules, domain_fn=lambda _query: customer.goal)
            retrievers.append(ExtraSource("rules", rules, k=app.casebase.rules.k, section="domain_rules"))
        return AdvisorSession(
            ConsultationState(consultation_id=consultation_id(index), customer=customer),
            llm=world.llm,
            gate=world.gate,
            tools=world.tools,
            embedder=world.embedder,
            rater=world.rater,
            clock=clock,
            retrievers=retrievers,
            config=agent_config,
        )

    async def one(index: int) -> tuple[ConsultationRecord, AdvisorSession]:
        async with limit:
            clock = VirtualClock(arrival_time(env.start, index, env.consultations_per_day, app.seed))
            session = session_for(index, clock)
            record = await run_consultation(
                index, customers[index], session, world.llm, clock, app.advisor.max_turns
            )
            return record, session

    reviewed = Path(app.paths.root) / app.advisor.reviewed_failures if app.advisor.reviewed_failures else None
    if reviewed is not None:
        # What reviewers rejected before this run started is learned from before the first day.
        learning.add(await learner.learn_reviewed(reviewed))
    days = sorted({day_of(i, env.consultations_per_day) for i in range(env.consultations)})
    bar = tqdm(total=env.consultations, desc="consultations", unit="consultation", disable=not progress)
    for day in days:
        indices = [i for i in range(env.consultations) if day_of(i, env.consultations_per_day) == day]
        finished = sorted(await asyncio.gather(*(one(i) for i in indices)), key=lambda rs: rs[0].index)
        day_records = [record for record, _ in finished]
        with transcripts.open("a", encoding="utf-8") as out:
            for record, _ in finished:
                out.write(record.model_dump_json() + "\n")
        if tracer is not None:
            tracer.log_all(day_records)
        for record, session in finished:
            records.append(record)
            plans.extend(session.plan_nodes())
            world.tracker.log_metrics(consultation_metrics(record), step=record.index)
            bar.update(1)
        world.memory_clock.set(max(world.memory_clock.now(), max(r.ended_at for r in day_records)))
        if app.advisor.use_memory:
            await world.memory.consolidate(day_records)
        world.validator.commit_seen()
        learned = await learner.learn(day_records)
        learning.add(learned)
        if reviewed is not None:
            learning.add(await learner.learn_reviewed(reviewed))
        counts = world.bases.rules.counts()
        world.tracker.log_metrics(
            {
                "day.first_pass_compliance_rate": rate(day_records, lambda t: bool(t.first_pass_compliant)),
                "day.escalation_rate": rate(day_records, lambda t: t.escalated),
                "day.goal_achieved_rate": sum(outcome_of(r).goal_achieved for r in day_records)
                / len(day_records),
                "cases_total": float(world.bases.cases.count()),
                "rules_active": float(counts.active),
            },
            step=day,
        )
    bar.close()
    return records


def write_artifacts(
    run_dir: Path, app: AppConfig, world: World, plans: list[dict], customers: list[Customer]
) -> list[Path]:
    """Everything but the transcripts, which `run_days` has written as it went."""
    memory = world.memory.export_jsonl(run_dir / "advisor_memory.jsonl")
    plan_file = run_dir / "advisor_plans.jsonl"
    with plan_file.open("w", encoding="utf-8") as out:
        for node in plans:
            out.write(json.dumps(node) + "\n")
    transcripts = run_dir / "transcripts.jsonl"
    cover = run_dir / "population_coverage.json"
    cover.write_text(coverage(customers).model_dump_json(indent=2), encoding="utf-8")
    usage = run_dir / "llm_usage.json"
    usage.write_text(
        json.dumps({k: v.model_dump() for k, v in world.llm.ledger.snapshot().items()}, indent=2),
        encoding="utf-8",
    )
    config = run_dir / "config.yaml"
    config.write_text(OmegaConf.to_yaml(OmegaConf.create(app.model_dump(mode="json"))), encoding="utf-8")
    return [transcripts, cover, usage, config, memory, plan_file]


async def train(app: AppConfig, progress: bool = True) -> RunSummary:
    root = Path(app.paths.root)
    root.mkdir(parents=True, exist_ok=True)
    tracking_uri = app.tracking.uri or default_tracking_uri(root)
    scripted = any(link.provider == "scripted" for link in app.llm.chain)
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
    tracker = RunTracker.start(
        tracking_uri, app.tracking.experiment, root / "mlartifacts", app.tracking.run_name, tags
    )
    run_dir = root / tracker.run_id
    world: World | None = None
    try:
        world = await build_world(app, tracker, run_dir)
        tracker.log_params(flatten(app.model_dump(mode="json")))
        plans: list[dict] = []
        run_dir.mkdir(parents=True, exist_ok=True)
        learning = LearningTotals()
        tracer = (
            ConsultationTracer(tracker.client, tracker.experiment_id, tracker.run_id)
            if app.tracking.traces
            else None
        )
        customers = world.population.draw(app.environment.consultations)
        with tracing_to(tracking_uri):
            records = await run_days(
                app, world, customers, progress, plans, run_dir / "transcripts.jsonl", learning, tracer
            )
        totals = world.llm.ledger.totals()
        metrics = summary_metrics(records, totals.input_tokens + totals.output_tokens, totals.cost_usd)
        metrics["memories_total"] = float(len(world.memory.stream))
        metrics["reflections_total"] = float(len(world.memory.stream.nodes(kind=MemoryKind.REFLECTION)))
        metrics["plans_total"] = float(len(plans))
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
        tracker.log_artifacts(write_artifacts(run_dir, app, world, plans, customers))
    except BaseException:
        tracker.finish("FAILED")
        raise
    finally:
        if world is not None:
            world.review_queue.close()
    tracker.finish()
    return RunSummary(
        run_id=tracker.run_id,
        run_dir=str(run_dir),
        tracking_uri=tracking_uri,
        scripted=scripted,
        metrics=metrics,
    )
