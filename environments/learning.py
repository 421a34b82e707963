"""Learning from finished consultations: the case base and the rules base (Agent Hospital style).

Between virtual days, in consultation order:
- every active rule the advisor retrieved or cited gains or loses confidence from how the
  consultation went (`casebase.apply_consultation_evidence`);
- a consultation that succeeded (it ran to its end with every reply delivered, each having passed
  the validator, after refinement if need be, and the customer got what it came for and
  understood it, as judged by `environments.outcomes`) becomes a case, covering the compliance
  codes its delivered replies handled;
- a suboptimal consultation goes through rule accumulation: one whose first draft broke a rule,
  and one that, every reply delivered, left the customer without its goal or its understanding
  when the outcome names the protections it went without (`ConsultationOutcome.gaps`).
  Accumulation reflects on the failure, replays it (and past cases of the same task type) with
  the candidate rule, keeps the rule only if the failure improves and nothing regresses, then
  refines and judges it.

Evidence and new cases come first, for every consultation of the day in order; then the day's
failures are all proposed at once (`RuleAccumulator.propose_all`: reflection, replays, refinement and
judgement only read the bases, so their model calls overlap and learning takes a few model
round trips rather than a few per failure), the contradiction questions deciding them may raise
are asked at once (`RuleAccumulator.prefetch_contradictions`), and the proposals are decided
(admitted and stored) one by one in consultation order. Each proposal reads the bases as the
day's evidence and cases left them, whatever the others find, so the result does not depend on
how the calls interleave. The day's writes are held in memory and stored in one call per base
when learning ends (`VectorCollection.deferred`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

from casebase import Bases
from casebase.accumulation import FailureCase, RuleAccumulator
from casebase.evidence import apply_consultation_evidence
from casebase.models import Case, CaseOutcome
from casebase.reviewed_failures import read_failures
from compliance.codes import ComplianceCode
from environments.consultation import ConsultationRecord, TurnRecord
from environments.outcomes import UNDERSTANDING_PASS
from environments.population import Customer
from environments.replay import situation_profile

# The delivered part of a reply that shows a protection handled, and the code it protects against.
SEGMENT_CODES: dict[str, ComplianceCode] = {
    "db_warning": ComplianceCode.MISSING_DB_WARNING,
    "advice_signpost": ComplianceCode.MISSING_ADVICE_SIGNPOST,
    "risk_warning": ComplianceCode.MISSING_RISK_DISCLOSURE,
    "pension_wise": ComplianceCode.MISSING_PENSION_WISE_NUDGE,
    "scam_warning": ComplianceCode.SCAM_RISK_IGNORED,
    "vulnerable_care": ComplianceCode.UNSUITABLE_FOR_VULNERABLE,
}


class LearningReport(BaseModel):
    cases_added: int = 0
    failures_seen: int = 0
    decisions: Counter[str] = Field(default_factory=Counter)
    evidence_updates: int = 0


def outcome_of(record: ConsultationRecord) -> CaseOutcome:
    """The case-base view of how a consultation went: the independent judgement where there is
    one, else (a record made before outcomes were judged) what the transcript shows."""
    advisor = record.advisor_turns
    first_pass = all(t.first_pass_compliant for t in advisor)
    escalated = record.ended_by == "escalation"
    judged = record.outcome
    if judged is not None:
        return CaseOutcome(
            satisfaction=judged.satisfaction,
            goal_achieved=judged.goal_achieved,
            understanding=judged.understanding,
            first_pass_compliant=first_pass,
            escalated=escalated,
            notes=judged.reason,
        )
    customer = [t for t in record.turns if t.speaker == "customer"]
    return CaseOutcome(
        first_pass_compliant=first_pass,
        escalated=escalated,
        understanding=1.0 - sum(t.confused for t in customer) / max(1, len(customer)),
        goal_achieved=record.ended_by == "customer" and not any(t.holding for t in advisor),
    )


class OutcomeSummary(BaseModel):
    """Outcome figures over a set of consultations (a virtual day, or a whole run)."""

    goal_achieved_rate: float
    satisfaction: float  # mean satisfaction on [0, 1] over the judged consultations
    understanding: float  # mean quiz score over the consultations that had a quiz


def outcome_summary(records: list[ConsultationRecord]) -> OutcomeSummary:
    outcomes = [outcome_of(r) for r in records]
    rated = [o.satisfaction for o in outcomes if o.satisfaction is not None]
    quizzed = [o.understanding for o in outcomes if o.understanding is not None]
    return OutcomeSummary(
        goal_achieved_rate=sum(bool(o.goal_achieved) for o in outcomes) / max(1, len(outcomes)),
        satisfaction=sum(rated) / max(1, len(rated)),
        understanding=sum(quizzed) / max(1, len(quizzed)),
    )


def succeeded(record: ConsultationRecord, outcome: CaseOutcome) -> bool:
    """Worth keeping as a case: every reply delivered, the goal achieved and understood."""
    delivered = record.ended_by == "customer" and not any(t.holding for t in record.advisor_turns)
    understood = outcome.understanding is None or outcome.understanding >= UNDERSTANDING_PASS
    return delivered and bool(outcome.goal_achieved) and understood


def failure_codes(record: ConsultationRecord, outcome: CaseOutcome) -> list[str]:
    """What rule accumulation should learn from: the first-pass violations, else, when the outcome
    was suboptimal although every reply reached the customer, the protections it went without.

    A held reply is not a reply that lacked something: it went to the review queue, and what the
    reviewers reject comes back through the reviewed-failures file.
    """
    first_pass = sorted({c for t in record.advisor_turns for c in t.first_pass_violations})
    held = any(t.holding for t in record.advisor_turns)
    if first_pass or held or record.outcome is None or succeeded(record, outcome):
        return first_pass
    return list(record.outcome.gaps)


def covered_codes(turns: list[TurnRecord]) -> list[str]:
    codes = {str(SEGMENT_CODES[k]) for t in turns for k in t.delivered_kinds if k in SEGMENT_CODES}
    if any("advice_signpost" in t.delivered_kinds for t in turns):
        # Signposting advice while explaining options is the guidance/advice boundary done right.
        codes.add(str(ComplianceCode.PERSONAL_RECOMMENDATION))
    return sorted(codes)


def customer_before(record: ConsultationRecord, turn: TurnRecord) -> str:
    index = record.turns.index(turn)
    return next(t.text for t in reversed(record.turns[:index]) if t.speaker == "customer")


class ConsultationLearner:
    def __init__(
        self,
        bases: Bases,
        accumulator: RuleAccumulator | None,
        customers: dict[str, Customer],
        *,
        learn_cases: bool,
        learn_rules: bool,
    ) -> None:
        self.bases = bases
        self.accumulator = accumulator
        self.customers = customers
        self.learn_cases = learn_cases
        self.learn_rules = learn_rules
        self.reviewed_seen = 0  # lines of the reviewed-failures file already learned from

    async def learn_reviewed(self, path: Path) -> LearningReport:
        """Accumulate rules from replies compliance staff rejected since the last call."""
        report = LearningReport()
        if not self.learn_rules or self.accumulator is None:
            return report
        fresh = read_failures(path, start=self.reviewed_seen)
        self.reviewed_seen += len(fresh)
        await self.accumulate([reviewed.failure for reviewed in fresh], report)
        return report

    async def accumulate(self, failures: list[FailureCase], report: LearningReport) -> None:
        """Propose a rule for every failure at once, then decide them one by one, in order."""
        if not failures or self.accumulator is None:
            return
        accumulator = self.accumulator
        proposals = await accumulator.propose_all(failures)
        for proposal in await accumulator.prefetch_contradictions(proposals):
            report.failures_seen += 1
            result = await accumulator.decide(proposal)
            report.decisions[result.decision] += 1

    async def learn(self, records: list[ConsultationRecord]) -> LearningReport:
        # The day's writes to the bases are stored together when learning ends (each Chroma write
        # waits on the disk); everything learning reads sees them meanwhile.
        with self.bases.rules.collection.deferred(), self.bases.cases.collection.deferred():
            return await self._learn(records)

    async def _learn(self, records: list[ConsultationRecord]) -> LearningReport:
        report = LearningReport()
        failures: list[FailureCase] = []
        for record in sorted(records, key=lambda r: r.index):
            advisor = record.advisor_turns
            if not advisor:
                continue
            outcome = outcome_of(record)
            first_pass = sorted({c for t in advisor for c in t.first_pass_violations})
            failed = failure_codes(record, outcome)
            if self.learn_rules:
                report.evidence_updates += len(
                    apply_consultation_evidence(
                        self.bases.rules,
                        record.id,
                        retrieved=[i for t in advisor for i in t.retrieved.get("rules", [])],
                        cited=[i for t in advisor for i in t.used_rule_ids],
                        violations=first_pass,
                        outcome=outcome,
                    )
                )
            if self.learn_cases and succeeded(record, outcome):
                self.bases.cases.add(self.case_from(record, outcome))
                report.cases_added += 1
            if self.learn_rules and failed and self.accumulator is not None:
                failures.append(self.failure_from(record, outcome, failed))
        await self.accumulate(failures, report)
        return report

    def profile(self, record: ConsultationRecord, turn: TurnRecord) -> dict:
        customer = self.customers[record.customer_id]
        known = customer.profile(set(turn.situation.get("disclosed", [])))
        return situation_profile(known, customer.name, **turn.situation)

    def case_from(self, record: ConsultationRecord, outcome: CaseOutcome) -> Case:
        advisor = record.advisor_turns
        delivered = " ".join(t.text for t in advisor)
        codes = covered_codes(advisor)
        return Case(
            task_type=record.goal,
            customer_profile=self.profile(record, advisor[-1]),
            context=customer_before(record, advisor[0]),
            guidance=delivered,
            reasoning="Every reply passed the compliance check"
            + (f"; it handled {', '.join(codes)}" if codes else ""),
            outcome=outcome,
            compliance_verified=True,
            covered_codes=codes,
            provenance="virtual_training",
            source_ids=[record.id],
        )

    def failure_from(self, record: ConsultationRecord, outcome: CaseOutcome, codes: list[str]) -> FailureCase:
        failed = next((t for t in record.advisor_turns if t.first_pass_violations), None)
        if failed is not None:
            return FailureCase(
                consultation_id=record.id,
                task_type=record.goal,
                customer_profile=self.profile(record, failed),
                customer_utterance=customer_before(record, failed),
                said=failed.draft or failed.text,
                violations=list(failed.first_pass_violations),
                outcome=outcome,
                notes=f"{failed.refinements} refinement(s); "
                + ("held for review" if failed.holding else "delivered"),
            )
        # Every reply passed, yet the customer left without what it needed: learn from the last
        # reply, the one given with the most known about the customer.
        last = record.advisor_turns[-1]
        judged = record.outcome
        assert judged is not None, "only a judged outcome names protections the customer went without"
        return FailureCase(
            consultation_id=record.id,
            task_type=record.goal,
            customer_profile=self.profile(record, last),
            customer_utterance=customer_before(record, last),
            said=last.text,
            violations=codes,
            outcome=outcome,
            notes="every reply passed the validator, but the customer "
            + ("did not get what it came for" if not judged.goal_achieved else "did not understand")
            + f" (understanding {judged.understanding if judged.understanding is not None else 'n/a'}, "
            + f"satisfaction {judged.rating}/5): {judged.reason}",
        )
