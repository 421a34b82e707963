"""Rule accumulation: turning a consultation that went wrong into a validated guidance rule.

Agent Hospital kept a principle if re-answering the one failed case with it got that case right.
Their accuracy curve dipped, which they put down to unhelpful experience: a rule can fix its own
case and break others. Here a rule must pass four gates, and every rule, kept or refused, is
stored with the record of what it was tested on and what each gate said:

1. reflect: an LLM compares what was said with a better alternative and states a principle,
   naming the compliance codes it is about;
2. admit: a duplicate of an active rule is merged into it, a contradiction of one is rejected;
3. validate: the failed situation and a sample of past cases of the same task type are replayed
   without and with the rule (through the `Replayer` the environment provides); the rule is kept
   only if the failed situation improves and no past case regresses (its score falls beyond the
   tolerance, or it gains a violation it did not have), and the compliance validator passes the
   principle's own text;
4. refine and judge: the principle is rewritten as "When <situation>, <do>, because <reason>."
   (and re-checked for compliance), and a separate LLM judgement (optionally another model)
   decides whether it truly helps.

Steps 1, 3 and 4 only read the bases (`RuleAccumulator.propose`), so the failures of a virtual day
can be proposed at once, their model calls overlapping; step 2 and storing the decision
(`RuleAccumulator.decide`) write, and are made one failure at a time, in order. The contradiction
questions admission asks are asked ahead, at once: about the active rules while proposing (a rule
that duplicates or contradicts one is not worth replays), and about the day's own kept rules by
`RuleAccumulator.prefetch_contradictions`, so deciding in order seldom waits for a model.

After that, `casebase.evidence` moves a kept rule's confidence with each later consultation it
was retrieved for, and the rules base retires it when it stops helping.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from casebase.case_base import CaseBase
from casebase.codes import code_guidance, known_codes
from casebase.config import AccumulationSettings
from casebase.models import (
    MERGEABLE_PROVENANCE,
    CaseOutcome,
    GuidanceRule,
    ReplayComparison,
    TaskType,
    ValidationRecord,
)
from casebase.rules_base import RulesBase, contradiction_key
from casebase.tasks import (
    JUDGE_TASK,
    REFINE_TASK,
    REFLECT_TASK,
    ContradictionVerdict,
    RefinedPrinciple,
    RuleJudgement,
    RuleReflection,
)
from simulacra.clock import Clock
from simulacra.embeddings.base import normalise_rows
from simulacra.llm.errors import LLMChainExhausted, LLMError
from simulacra.memory.importance import LLMCaller

# How far below the related threshold a pair of the day's own rules is still asked about ahead of
# deciding: a kept rule is stored in its refined wording, which sits a little apart from the wording
# compared here, and a question asked in vain costs less than one asked while deciding waits.
PREFETCH_MARGIN = 0.05


class FailureCase(BaseModel):
    """A consultation that ended suboptimally, as the environment saw it."""

    model_config = ConfigDict(extra="forbid")

    consultation_id: str
    task_type: TaskType
    customer_profile: dict[str, Any] = Field(default_factory=dict)
    customer_utterance: str = Field(min_length=1)
    said: str = Field(min_length=1, description="what the advisor said")
    violations: list[str] = Field(default_factory=list)
    outcome: CaseOutcome | None = None
    notes: str = ""


class ReplaySituation(BaseModel):
    """One situation to answer again: the failed one, or a past case from the case base."""

    model_config = ConfigDict(extra="forbid")

    id: str
    role: Literal["failed_situation", "past_case"]
    task_type: TaskType
    customer_profile: dict[str, Any] = Field(default_factory=dict)
    customer_utterance: str
    said: str  # the original reply, for reference


class ReplayScore(BaseModel):
    """How good a replayed reply is: a score in [0, 1] (higher is better) and what the validator found."""

    score: float = Field(ge=0.0, le=1.0)
    compliant: bool
    violations: list[str] = Field(default_factory=list)
    text: str = ""


@runtime_checkable
class Replayer(Protocol):
    """Answers a situation again with the given rules in the prompt and scores the answer."""

    async def replay(self, situation: ReplaySituation, rules: list[GuidanceRule]) -> ReplayScore: ...


class PrincipleVerdict(BaseModel):
    compliant: bool
    violations: list[str] = Field(default_factory=list)
    detail: str = ""


@runtime_checkable
class RuleCompliance(Protocol):
    """Checks that a principle's own words are compliant (a rule must not teach a violation)."""

    async def check_principle(self, principle: str, codes: list[str]) -> PrincipleVerdict: ...


class AccumulationResult(BaseModel):
    decision: Literal["kept", "refused", "merged", "rejected", "no_rule"]
    reason: str
    rule: GuidanceRule | None = None  # the stored record (None only when reflection produced nothing)
    related_rule_id: str | None = None
    record: ValidationRecord | None = None

    @property
    def kept(self) -> bool:
        return self.decision == "kept"


class Validation(BaseModel):
    """What replaying, checking, refining and judging a proposed rule found (steps 3 and 4)."""

    decision: Literal["kept", "refused"]
    reason: str
    replays: list[ReplayComparison] = Field(default_factory=list)
    regressions: list[str] = Field(default_factory=list)
    improved: bool = False
    verdict: PrincipleVerdict | None = None
    judgement: RuleJudgement | None = None
    refined: str | None = None  # the refined wording, when refinement changed it and it passed


class Proposal(BaseModel):
    """A failure's rule and its validation, made without writing to the bases (`RuleAccumulator.propose`).

    `rule` is None when reflection failed (`failed` says why); `validation` is None when the rule
    duplicates an active rule or contradicts one, so admission will merge or reject it and testing
    it would be wasted. `verdicts` holds the contradiction questions already asked for it (keyed by
    `contradiction_key`), which admission then does not ask again.
    """

    failure: FailureCase
    rule: GuidanceRule | None = None
    validation: Validation | None = None
    verdicts: dict[str, ContradictionVerdict] = Field(default_factory=dict)
    failed: str = ""


class RuleAccumulator:
    def __init__(
        self,
        llm: LLMCaller,
        rules: RulesBase,
        cases: CaseBase,
        replayer: Replayer,
        compliance: RuleCompliance,
        clock: Clock,
        settings: AccumulationSettings | None = None,
        *,
        existing_rules_k: int = 3,
        judge_llm: LLMCaller | None = None,
    ) -> None:
        """`judge_llm` asks the helpfulness question of another model (another vendor, ideally), so
        the model that proposed a rule is not the only one to think it helps; default: `llm`."""
        self.llm = llm
        self.judge_llm = judge_llm or llm
        self.rules = rules
        self.cases = cases
        self.replayer = replayer
        self.compliance = compliance
        self.clock = clock
        self.settings = settings or AccumulationSettings()
        self.existing_rules_k = existing_rules_k
        # Replays shared by the proposals of one `propose_all`, keyed by situation and rules.
        self._replays: dict[str, asyncio.Future[ReplayScore]] | None = None

    async def accumulate(self, failure: FailureCase) -> AccumulationResult:
        """Learn from one failure: `propose`, then `decide`."""
        return await self.decide(await self.propose(failure))

    async def propose_all(self, failures: list[FailureCase]) -> list[Proposal]:
        """`propose` for several failures at once, their model calls overlapping.

        Their replays often share a situation and the rules around the candidate (the baseline of
        a past case near several failures): each such replay is made once and its score shared,
        which for a seeded model is exactly what replaying it again would give, and for a sampled
        one compares the candidates against the same baseline draws.
        """
        self._replays = {}
        try:
            return list(await asyncio.gather(*(self.propose(f) for f in failures)))
        finally:
            self._replays = None

    async def _replay_once(self, situation: ReplaySituation, rules: list[GuidanceRule]) -> ReplayScore:
        if self._replays is None:
            return await self.replayer.replay(situation, rules)
        key = json.dumps(
            [situation.model_dump(mode="json"), [r.model_dump(mode="json") for r in rules]], sort_keys=True
        )
        found = self._replays.get(key)
        if found is None:
            found = self._replays[key] = asyncio.ensure_future(self.replayer.replay(situation, rules))
        return await asyncio.shield(found)

    async def propose(self, failure: FailureCase) -> Proposal:
        """Reflect on a failure and test the rule it suggests, changing nothing in the bases.

        Proposals for several failures can therefore run at once: each reads the rules and case
        bases as they stand, and all their model calls (reflection, replays, refinement, judgement)
        overlap. Their `decide` calls, which write, are then made one at a time, in order.
        """
        # 1. Reflect.
        try:
            reflection = await self._reflect(failure)
        except (LLMChainExhausted, LLMError) as exc:
            return Proposal(failure=failure, failed=f"reflection failed: {exc}")
        codes = [c for c in reflection.codes if c in known_codes()]
        rule = GuidanceRule(
            principle=reflection.principle.strip(),
            confidence=self.rules.settings.initial_confidence,
            supporting_evidence=[failure.consultation_id],
            domain=failure.task_type,
            codes=codes,
            created_from=failure.consultation_id,
        )
        # A rule that duplicates an active one will be merged into it, and one that contradicts an
        # active rule rejected: neither is worth replays. The contradiction questions are asked
        # here, for the active rules as they stand, so deciding does not wait for them.
        related = self.rules.related_active(rule)
        if self.rules.duplicate_of(rule, related) is not None:
            return Proposal(failure=failure, rule=rule)
        near = [m.rule for m in related if m.similarity >= self.rules.settings.related_threshold]
        verdicts = await self.rules.contradictions([(rule, active) for active in near])
        if len(verdicts) < len(near) or any(v.contradicts for v in verdicts.values()):
            return Proposal(failure=failure, rule=rule, verdicts=verdicts)
        return Proposal(
            failure=failure, rule=rule, validation=await self._validate(rule, failure), verdicts=verdicts
        )

    async def prefetch_contradictions(self, proposals: list[Proposal]) -> list[Proposal]:
        """Ask at once the contradiction questions deciding `proposals` in order may raise among
        themselves, and return the proposals with those verdicts added.

        `propose` asked about the rules active before the proposals; deciding in order also
        compares each rule with the ones kept before it, which `decide` would otherwise ask one
        after another. A rule may be compared with an earlier one whose validation kept it and that
        is near enough to be related (with a margin, since its stored wording is the refined one);
        a question that turns out not to be needed (the earlier rule was merged or rejected) is
        wasted, and one missed here is asked when deciding, so the decisions are the same either way.
        """
        threshold = self.rules.settings.related_threshold - PREFETCH_MARGIN
        duplicate = self.rules.settings.duplicate_threshold
        embed = self.rules.collection.embed
        earlier: list[tuple[GuidanceRule, np.ndarray]] = []  # kept by validation, as it would be stored
        pairs: dict[int, list[tuple[GuidanceRule, GuidanceRule]]] = {}  # proposal index -> questions
        for i, proposal in enumerate(proposals):
            rule, v = proposal.rule, proposal.validation
            if rule is None or v is None or v.decision != "kept":
                continue
            vector = normalise_rows(embed([rule.search_text()]))[0]
            pairs[i] = [
                (rule, other)
                for other, vectors in earlier
                if threshold <= (similarity := float((vectors @ vector).max()))
                # A duplicate is merged into the earlier rule if that was kept, without a question;
                # if it was not, the questions about the others are the ones needed.
                and not (similarity >= duplicate and set(other.codes) == set(rule.codes))
            ]
            stored = rule if v.refined is None else rule.model_copy(update={"principle": v.refined})
            texts = [stored.search_text(), *([rule.principle] if v.refined is not None else [])]
            earlier.append((stored, normalise_rows(embed(texts))))
        verdicts = await self.rules.contradictions(
            [pair for questions in pairs.values() for pair in questions]
        )
        answered = list(proposals)
        for i, questions in pairs.items():
            found = {
                key: verdicts[key] for pair in questions if (key := contradiction_key(*pair)) in verdicts
            }
            if found:
                answered[i] = proposals[i].model_copy(update={"verdicts": {**proposals[i].verdicts, **found}})
        return answered

    async def decide(self, proposal: Proposal) -> AccumulationResult:
        """Admit a proposed rule and store the decision: the one step that writes to the rules base."""
        if proposal.rule is None:
            return AccumulationResult(decision="no_rule", reason=proposal.failed)
        failure = proposal.failure
        # 2. Admit: duplicates merge, contradictions are rejected. A rule its validation already
        # refused is retired whatever it contradicts, so only a duplicate is looked for.
        refused = proposal.validation is not None and proposal.validation.decision == "refused"
        admission = await self.rules.admit(
            proposal.rule,
            evidence_id=failure.consultation_id,
            known=proposal.verdicts,
            check_contradictions=not refused,
        )
        if admission.decision != "candidate":
            return AccumulationResult(
                decision="merged" if admission.decision == "merged" else "rejected",
                reason=admission.reason,
                rule=admission.rule,
                related_rule_id=admission.related_rule_id,
                record=admission.rule.validations[-1],
            )
        rule = admission.rule
        # Proposed near an active rule, and admitted all the same: test it now.
        v = proposal.validation or await self._validate(rule, failure)
        if v.refined is not None:
            rule = rule.model_copy(
                update={
                    "principle": v.refined,
                    "previous_principles": [*rule.previous_principles, rule.principle],
                    "version": rule.version + 1,
                }
            )
        if v.decision == "refused":
            return self._refuse(
                rule,
                failure,
                v.replays,
                v.regressions,
                v.improved,
                v.reason,
                verdict=v.verdict,
                judgement=v.judgement,
            )
        record = self._record(
            failure, v.replays, v.regressions, v.improved, "kept", v.reason, v.verdict, v.judgement
        )
        rule = rule.model_copy(
            update={
                "fca_compliant": True,
                "validations": [*rule.validations, record],
                "updated_at": self.clock.now(),
            }
        )
        self.rules.save(rule)
        kept = self.rules.activate(rule.id, reason=record.reason)
        return AccumulationResult(decision="kept", reason=record.reason, rule=kept, record=record)

    async def _validate(self, rule: GuidanceRule, failure: FailureCase) -> Validation:
        """Steps 3 and 4 for a rule not yet stored: replay, check, refine, judge."""
        # 3. Validate by replay, then the principle's own compliance.
        replays, regressions, improved = await self._replay(failure, rule)

        def refused(reason: str, **found: Any) -> Validation:
            return Validation(
                decision="refused",
                reason=reason,
                replays=replays,
                regressions=regressions,
                improved=improved,
                **found,
            )

        if not improved:
            return refused("the failed situation did not improve")
        if regressions:
            return refused(f"regressed on {len(regressions)} past case(s)")
        verdict = await self.compliance.check_principle(rule.principle, rule.codes)
        if not verdict.compliant:
            return refused("the principle itself is not compliant", verdict=verdict)

        # 4. Refine into the common form, re-check it, then judge.
        try:
            refined = await self._refine(rule, failure)
        except (LLMChainExhausted, LLMError) as exc:
            return refused(f"refinement failed: {exc}", verdict=verdict)
        refined_text: str | None = refined.principle()
        if refined_text != rule.principle:
            refined_verdict = await self.compliance.check_principle(refined_text, rule.codes)
            if not refined_verdict.compliant:
                return refused("the refined principle is not compliant", verdict=refined_verdict)
            rule = rule.model_copy(update={"principle": refined_text})
            verdict = refined_verdict
        else:
            refined_text = None
        try:
            judgement = await self._judge(rule, failure, replays)
        except (LLMChainExhausted, LLMError) as exc:
            return refused(f"the judge could not be asked: {exc}", verdict=verdict, refined=refined_text)
        if not judgement.helpful:
            return refused(
                f"judged not helpful: {judgement.reason}",
                verdict=verdict,
                judgement=judgement,
                refined=refined_text,
            )
        return Validation(
            decision="kept",
            reason="validated, refined and judged helpful",
            replays=replays,
            regressions=regressions,
            improved=improved,
            verdict=verdict,
            judgement=judgement,
            refined=refined_text,
        )

    # --- steps -----------------------------------------------------------------------------

    def _code_guidance(self, codes: list[str]) -> list[dict[str, str]]:
        return [g.model_dump() for g in code_guidance(codes)]

    async def _reflect(self, failure: FailureCase) -> RuleReflection:
        existing = self.rules.search(
            failure.customer_utterance, k=self.existing_rules_k, domain=failure.task_type
        )
        variables = {
            "task_type": failure.task_type,
            "customer_profile": failure.customer_profile,
            "customer_utterance": failure.customer_utterance,
            "said": failure.said,
            "violations": failure.violations,
            "outcome": None if failure.outcome is None else failure.outcome.model_dump(mode="json"),
            "notes": failure.notes,
            "code_guidance": self._code_guidance(failure.violations),
            "known_codes": sorted(known_codes()),
            "existing_rules": [m.rule.principle for m in existing],
        }
        result = await self.llm.call(REFLECT_TASK, variables)
        return result.parsed(RuleReflection)

    def _situations(self, failure: FailureCase) -> list[ReplaySituation]:
        """The failed situation, then the past cases nearest to it: the ones where the rule will
        actually be retrieved, so the ones it can break."""
        failed = ReplaySituation(
            id=failure.consultation_id,
            role="failed_situation",
            task_type=failure.task_type,
            customer_profile=failure.customer_profile,
            customer_utterance=failure.customer_utterance,
            said=failure.said,
        )
        n = self.settings.validation_cases
        # Past consultations only: a knowledge-learning case has no customer to replay it for.
        found = self.cases.search(failure.customer_utterance, failure.task_type, k=3 * n) if n else []
        past = [m for m in found if m.case.provenance in MERGEABLE_PROVENANCE][:n]
        return [
            failed,
            *(
                ReplaySituation(
                    id=m.case.id,
                    role="past_case",
                    task_type=m.case.task_type,
                    customer_profile=m.case.customer_profile,
                    customer_utterance=m.case.context,
                    said=m.case.guidance,
                )
                for m in past
            ),
        ]

    async def _compare(self, situation: ReplaySituation, rule: GuidanceRule) -> ReplayComparison:
        # The baseline keeps whatever active rules the advisor would retrieve anyway, so a rule is
        # tested for what it adds to them (and for clashing with them), not against an empty prompt.
        others = [
            m.rule
            for m in self.rules.search(
                situation.customer_utterance, k=max(1, self.rules.settings.k - 1), domain=situation.task_type
            )
            if m.rule.id != rule.id
        ]
        before, after = await asyncio.gather(
            self._replay_once(situation, others), self._replay_once(situation, [*others, rule])
        )
        # A past case regresses when its score drops beyond the tolerance, or when the rule brings in
        # a problem it did not have: a new compliance violation is never tolerated.
        introduced = set(after.violations) - set(before.violations)
        regression = situation.role == "past_case" and (
            after.score < before.score - self.settings.regression_tolerance or bool(introduced)
        )
        return ReplayComparison(
            situation_id=situation.id,
            role=situation.role,
            score_before=before.score,
            score_after=after.score,
            violations_before=before.violations,
            violations_after=after.violations,
            regression=regression,
        )

    async def _replay(
        self, failure: FailureCase, rule: GuidanceRule
    ) -> tuple[list[ReplayComparison], list[str], bool]:
        failed, *past = self._situations(failure)
        first = await self._compare(failed, rule)
        improved = first.delta > self.settings.min_improvement
        if not improved:
            # No point paying for the held-out replays of a rule that does not fix its own case.
            return [first], [], False
        rest = await asyncio.gather(*(self._compare(s, rule) for s in past))
        replays = [first, *rest]
        return replays, [r.situation_id for r in rest if r.regression], True

    async def _refine(self, rule: GuidanceRule, failure: FailureCase) -> RefinedPrinciple:
        variables = {
            "principle": rule.principle,
            "codes": rule.codes,
            "task_type": failure.task_type,
            "customer_profile": failure.customer_profile,
            "customer_utterance": failure.customer_utterance,
            "code_guidance": self._code_guidance(rule.codes),
        }
        result = await self.llm.call(REFINE_TASK, variables)
        return result.parsed(RefinedPrinciple)

    async def _judge(
        self, rule: GuidanceRule, failure: FailureCase, replays: list[ReplayComparison]
    ) -> RuleJudgement:
        variables = {
            "principle": rule.principle,
            "codes": rule.codes,
            "task_type": failure.task_type,
            "customer_utterance": failure.customer_utterance,
            "said": failure.said,
            "violations": failure.violations,
            "replays": [r.model_dump(mode="json") for r in replays],
        }
        result = await self.judge_llm.call(JUDGE_TASK, variables)
        return result.parsed(RuleJudgement)

    # --- records ---------------------------------------------------------------------------

    def _record(
        self,
        failure: FailureCase,
        replays: list[ReplayComparison],
        regressions: list[str],
        improved: bool,
        decision: Literal["kept", "refused"],
        reason: str,
        verdict: PrincipleVerdict | None,
        judgement: RuleJudgement | None,
    ) -> ValidationRecord:
        return ValidationRecord(
            consultation_id=failure.consultation_id,
            replays=replays,
            failed_improved=improved,
            regressions=regressions,
            validator_compliant=None if verdict is None else verdict.compliant,
            validator_verdict=""
            if verdict is None
            else (verdict.detail or ("compliant" if verdict.compliant else ", ".join(verdict.violations))),
            judge_helpful=None if judgement is None else judgement.helpful,
            judge_verdict="" if judgement is None else judgement.reason,
            decision=decision,
            reason=reason,
            decided_at=self.clock.now(),
        )

    def _refuse(
        self,
        rule: GuidanceRule,
        failure: FailureCase,
        replays: list[ReplayComparison],
        regressions: list[str],
        improved: bool,
        reason: str,
        *,
        verdict: PrincipleVerdict | None = None,
        judgement: RuleJudgement | None = None,
    ) -> AccumulationResult:
        record = self._record(failure, replays, regressions, improved, "refused", reason, verdict, judgement)
        rule = rule.model_copy(
            update={
                "fca_compliant": bool(verdict and verdict.compliant),
                "validations": [*rule.validations, record],
            }
        )
        self.rules.save(rule)
        retired = self.rules.retire(rule.id, reason=f"refused: {reason}")
        return AccumulationResult(decision="refused", reason=reason, rule=retired, record=record)
