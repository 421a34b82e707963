"""The rule accumulation pipeline: reflect, admit, validate by replay, refine, judge; every decision recorded.

The replayer here is a small deterministic advisor: a reply handles a compliance code when a rule
about that code is in its prompt (or the situation was already handled well), and a rule can clash
with a situation (the way an over-applied warning spoils a reply that did not need it).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from casebase.accumulation import FailureCase, ReplayScore, ReplaySituation, RuleAccumulator
from casebase.compliance_check import ValidatorRuleCompliance
from casebase.config import AccumulationSettings, CasebaseConfig, StoreConfig
from casebase.factory import Bases, open_bases
from casebase.models import CaseOutcome, GuidanceRule
from casebase.scripted import register_casebase_handlers
from casebase.tasks import JUDGE_TASK, PROMPTS_DIR, REFLECT_TASK, RuleJudgement, RuleReflection
from compliance.knowledge import load_knowledge
from compliance.rules import RuleEngine
from compliance.rules_only import RulesOnlyValidator
from simulacra.llm.client import ChainLink, LLMClient
from simulacra.llm.errors import FailureKind, LLMError
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers.scripted import ScriptedCall, ScriptedHandlers, ScriptedProvider
from tests.casebase.builders import DB_PROFILE, make_case, make_rule
from tests.casebase.conftest import scripted_llm

FAILED = "consultation-db-1"
FAILURE = FailureCase(
    consultation_id=FAILED,
    task_type="consolidation",
    customer_profile=DB_PROFILE,
    customer_utterance="My old final salary scheme wrote to me. I am thinking of transferring it so I can combine my pots.",
    said="Transferring would let you combine everything in one place and you could access it from 55.",
    violations=["MISSING_DB_WARNING"],
    outcome=CaseOutcome(satisfaction=0.6, goal_achieved=False, understanding=0.2, first_pass_compliant=False),
)


class CodeCoverageReplayer:
    """Scores a reply by the share of the codes the situation needs that it handles.

    `needs`: situation id -> codes a good reply must handle; `clashes`: (situation id, code) pairs
    where a rule about the code in the prompt spoils the reply (a new problem, half the score);
    `dilutes`: pairs where it only makes the reply a little worse (a tenth off, no new problem).
    Records every call.
    """

    def __init__(
        self,
        needs: dict[str, set[str]],
        clashes: frozenset[tuple[str, str]] = frozenset(),
        dilutes: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self.needs = needs
        self.clashes = clashes
        self.dilutes = dilutes
        self.calls: list[tuple[str, list[str]]] = []

    async def replay(self, situation: ReplaySituation, rules: list[GuidanceRule]) -> ReplayScore:
        self.calls.append((situation.id, [r.id for r in rules]))
        in_prompt = {code for rule in rules for code in rule.codes}
        needed = self.needs.get(situation.id, set())
        missing = needed - in_prompt
        score = 1.0 - len(missing) / len(needed) if needed else 1.0
        clashing = sorted(code for code in in_prompt if (situation.id, code) in self.clashes)
        diluting = [code for code in in_prompt if (situation.id, code) in self.dilutes]
        score = max(0.0, score - 0.5 * len(clashing) - 0.1 * len(diluting))
        return ReplayScore(
            score=score,
            compliant=not missing,
            violations=sorted(missing) + [f"CLASH:{c}" for c in clashing],
            text=f"reply to {situation.customer_utterance} with {sorted(in_prompt)}",
        )


@pytest.fixture(scope="module")
def rule_compliance() -> ValidatorRuleCompliance:
    return ValidatorRuleCompliance(RulesOnlyValidator(RuleEngine(load_knowledge())))


def past_cases(bases: Bases) -> list[str]:
    ids = []
    for n, text in enumerate(
        [
            "I have three workplace pensions and want to combine them into one pot",
            "Should I transfer my old personal pension to my new employer's scheme?",
        ]
    ):
        ids.append(bases.cases.add(make_case(text, source=f"past-{n}")).case.id)
    return ids


def accumulator(
    bases: Bases, replayer, compliance, clock, llm: LLMClient | None = None, **settings
) -> RuleAccumulator:
    return RuleAccumulator(
        llm or scripted_llm(),
        bases.rules,
        bases.cases,
        replayer,
        compliance,
        clock,
        AccumulationSettings(**settings),
    )


def llm_with_reflection(principle: str, codes: list[str]) -> LLMClient:
    """The scripted LLM, except that reflection states the given principle."""

    def reflect(call: ScriptedCall) -> RuleReflection:
        return RuleReflection(better_alternative="another reply", principle=principle, codes=codes)

    handlers = ScriptedHandlers()
    handlers.register(REFLECT_TASK.name, reflect)
    base = ScriptedHandlers()
    register_casebase_handlers(base)
    for name in ("casebase.refine", "casebase.judge_rule", "casebase.contradiction", "casebase.classify"):
        handlers.register(name, base.get(name))
    return LLMClient([ChainLink(ScriptedProvider(handlers), attempts=1)], PromptLibrary([PROMPTS_DIR]))


async def test_a_rule_that_fixes_its_case_and_breaks_nothing_is_kept(
    bases: Bases, clock, rule_compliance
) -> None:
    past = past_cases(bases)
    # Neither another task type's case nor an unverified one is part of the held-out sample.
    bases.cases.add(make_case("Should I transfer my pension to cut the tax I pay?", task_type="tax"))
    bases.cases.add(make_case("Should I transfer my old pensions into one?", verified=False, source="u-1"))
    clock.advance(timedelta(days=3))
    replayer = CodeCoverageReplayer({FAILED: {"MISSING_DB_WARNING"}})
    result = await accumulator(bases, replayer, rule_compliance, clock).accumulate(FAILURE)
    assert result.decision == "kept", result.reason
    rule = result.rule
    assert rule is not None and rule.status == "active" and rule.fca_compliant
    assert rule.codes == ["MISSING_DB_WARNING"] and rule.domain == "consolidation"
    assert rule.created_from == FAILED and rule.supporting_evidence == [FAILED]
    # Refined into the common form; the reflected wording is kept as history.
    assert (
        rule.principle.startswith("When ") and ", because " in rule.principle and rule.principle.endswith(".")
    )
    assert rule.version == 2 and len(rule.previous_principles) == 1
    record = rule.validations[-1]
    assert record.decision == "kept" and record.decided_at == clock.now()
    assert record.tested_on[0] == FAILED and sorted(record.tested_on[1:]) == sorted(past)
    failed = record.replays[0]
    assert (failed.role, failed.score_before, failed.score_after) == ("failed_situation", 0.0, 1.0)
    assert failed.violations_before == ["MISSING_DB_WARNING"] and failed.violations_after == []
    assert failed.resolved == ["MISSING_DB_WARNING"] and failed.introduced == []
    assert all(r.score_after >= r.score_before for r in record.replays)
    assert record.failed_improved and record.regressions == []
    assert record.validator_compliant and record.judge_helpful and record.judge_verdict
    assert [s.status for s in rule.status_history] == ["candidate", "active"]
    # It is now what the advisor retrieves for such situations, and the stored record matches.
    assert bases.rules.search(FAILURE.customer_utterance, domain="consolidation")[0].rule == rule
    assert bases.rules.get(rule.id) == rule


async def test_a_rule_that_regresses_a_past_case_is_refused(bases: Bases, clock, rule_compliance) -> None:
    past = past_cases(bases)
    replayer = CodeCoverageReplayer(
        {FAILED: {"MISSING_DB_WARNING"}}, clashes=frozenset({(past[1], "MISSING_DB_WARNING")})
    )
    result = await accumulator(bases, replayer, rule_compliance, clock).accumulate(FAILURE)
    assert result.decision == "refused" and result.reason == "regressed on 1 past case(s)"
    assert result.rule is not None and result.rule.status == "retired"
    assert result.rule.retired_reason == "refused: regressed on 1 past case(s)"
    record = result.record
    assert record is not None and record.decision == "refused"
    assert record.failed_improved and record.regressions == [past[1]]
    regressed = next(r for r in record.replays if r.situation_id == past[1])
    assert regressed.regression and regressed.score_after < regressed.score_before
    assert record.judge_helpful is None  # refused before the judge was asked
    assert bases.rules.search(FAILURE.customer_utterance) == []
    assert bases.rules.counts().model_dump() == {"total": 1, "active": 0, "candidate": 0, "retired": 1}


async def test_a_tolerated_small_drop_is_not_a_regression(bases: Bases, clock, rule_compliance) -> None:
    past = past_cases(bases)
    replayer = CodeCoverageReplayer(
        {FAILED: {"MISSING_DB_WARNING"}}, dilutes=frozenset({(past[0], "MISSING_DB_WARNING")})
    )
    strict = await accumulator(bases, replayer, rule_compliance, clock).accumulate(FAILURE)
    assert strict.decision == "refused" and strict.record is not None
    assert strict.record.regressions == [past[0]]
    again = FAILURE.model_copy(update={"consultation_id": "consultation-db-2"})
    replayer.needs = {"consultation-db-2": {"MISSING_DB_WARNING"}}
    tolerant = await accumulator(
        bases, replayer, rule_compliance, clock, regression_tolerance=0.2
    ).accumulate(again)
    assert tolerant.decision == "kept", tolerant.reason
    diluted = next(r for r in tolerant.rule.validations[-1].replays if r.situation_id == past[0])  # type: ignore[union-attr]
    assert diluted.delta == pytest.approx(-0.1) and not diluted.regression


async def test_a_new_violation_on_a_past_case_is_never_tolerated(
    bases: Bases, clock, rule_compliance
) -> None:
    past = past_cases(bases)
    replayer = CodeCoverageReplayer(
        {FAILED: {"MISSING_DB_WARNING"}}, clashes=frozenset({(past[0], "MISSING_DB_WARNING")})
    )
    result = await accumulator(bases, replayer, rule_compliance, clock, regression_tolerance=0.9).accumulate(
        FAILURE
    )
    assert result.decision == "refused" and result.record is not None
    clashed = next(r for r in result.record.replays if r.situation_id == past[0])
    assert clashed.regression and clashed.introduced == ["CLASH:MISSING_DB_WARNING"]
    assert result.record.regressions == [past[0]]


async def test_a_rule_that_does_not_fix_its_own_case_is_refused_without_further_replays(
    bases: Bases, clock, rule_compliance
) -> None:
    past_cases(bases)
    replayer = CodeCoverageReplayer({FAILED: {"MISSING_DB_WARNING"}})
    llm = scripted_llm(behaviour={"reflect_off_target": 1.0})
    result = await accumulator(bases, replayer, rule_compliance, clock, llm).accumulate(FAILURE)
    assert result.decision == "refused" and result.reason == "the failed situation did not improve"
    record = result.record
    assert record is not None and record.tested_on == [FAILED] and record.failed_improved is False
    assert [situation for situation, _ in replayer.calls] == [FAILED, FAILED]


async def test_a_principle_that_is_itself_non_compliant_is_refused(
    bases: Bases, clock, rule_compliance
) -> None:
    past_cases(bases)
    principle = "If I were in your shoes I'd transfer the final salary pension and combine it with the rest."
    llm = llm_with_reflection(principle, ["MISSING_DB_WARNING"])
    replayer = CodeCoverageReplayer({FAILED: {"MISSING_DB_WARNING"}})
    result = await accumulator(bases, replayer, rule_compliance, clock, llm).accumulate(FAILURE)
    assert result.decision == "refused" and result.reason == "the principle itself is not compliant"
    record = result.record
    assert record is not None and record.validator_compliant is False
    assert "PERSONAL_RECOMMENDATION" in record.validator_verdict
    assert result.rule is not None and not result.rule.fca_compliant and result.rule.status == "retired"


async def test_a_rule_the_judge_finds_unhelpful_is_refused(bases: Bases, clock, rule_compliance) -> None:
    past_cases(bases)
    replayer = CodeCoverageReplayer({FAILED: {"MISSING_DB_WARNING"}})
    llm = scripted_llm(behaviour={"rule_judge_misjudged": 1.0})
    result = await accumulator(bases, replayer, rule_compliance, clock, llm).accumulate(FAILURE)
    assert result.decision == "refused" and result.reason.startswith("judged not helpful")
    record = result.record
    assert record is not None and record.judge_helpful is False and record.validator_compliant is True
    assert result.rule is not None and result.rule.version == 2  # it was refined before being judged


async def test_the_same_lesson_learnt_twice_is_merged_into_the_active_rule(
    bases: Bases, clock, rule_compliance
) -> None:
    past_cases(bases)
    first = await accumulator(
        bases, CodeCoverageReplayer({FAILED: {"MISSING_DB_WARNING"}}), rule_compliance, clock
    ).accumulate(FAILURE)
    assert first.decision == "kept" and first.rule is not None
    again = FAILURE.model_copy(update={"consultation_id": "consultation-db-2"})
    replayer = CodeCoverageReplayer({"consultation-db-2": {"MISSING_DB_WARNING"}})
    second = await accumulator(bases, replayer, rule_compliance, clock).accumulate(again)
    assert second.decision == "merged" and second.related_rule_id == first.rule.id
    assert replayer.calls == []  # a duplicate costs no replays
    assert second.record is not None and second.record.decision == "merged"
    kept = bases.rules.get(first.rule.id)
    assert kept is not None and "consultation-db-2" in kept.supporting_evidence
    assert bases.rules.counts().active == 1


async def test_a_rule_contradicting_an_active_one_is_rejected(bases: Bases, clock, rule_compliance) -> None:
    opposite = bases.rules.add_candidate(
        make_rule(
            "When a customer wants to transfer a final salary pension, do not warn that transferring gives up "
            "a guaranteed income for life, because warnings about guarantees worry customers.",
            ["MISSING_DB_WARNING"],
        )
    )
    bases.rules.activate(opposite.id)
    replayer = CodeCoverageReplayer({FAILED: {"MISSING_DB_WARNING"}})
    result = await accumulator(bases, replayer, rule_compliance, clock).accumulate(FAILURE)
    assert result.decision == "rejected" and result.related_rule_id == opposite.id
    assert result.reason.startswith(f"contradicts active rule {opposite.id}")
    assert replayer.calls == []


async def test_replays_keep_the_active_rules_the_advisor_would_have_anyway(
    bases: Bases, clock, rule_compliance
) -> None:
    scam = bases.rules.add_candidate(
        make_rule(
            "When a customer mentions a cold call, name the scam warning signs, because scams cost savings.",
            ["SCAM_RISK_IGNORED"],
            domain="general",
        )
    )
    bases.rules.activate(scam.id)
    replayer = CodeCoverageReplayer({FAILED: {"MISSING_DB_WARNING"}})
    result = await accumulator(bases, replayer, rule_compliance, clock, validation_cases=0).accumulate(
        FAILURE
    )
    assert result.decision == "kept"
    assert result.rule is not None
    assert sorted(replayer.calls, key=len) == sorted(
        [(FAILED, [scam.id]), (FAILED, [scam.id, result.rule.id])], key=len
    )


async def test_a_failed_reflection_produces_no_rule(bases: Bases, clock, rule_compliance) -> None:
    def broken(call: ScriptedCall):
        raise LLMError(FailureKind.TIMEOUT, "no answer")

    handlers = ScriptedHandlers()
    handlers.register(REFLECT_TASK.name, broken)
    llm = LLMClient([ChainLink(ScriptedProvider(handlers), attempts=1)], PromptLibrary([PROMPTS_DIR]))
    result = await accumulator(bases, CodeCoverageReplayer({}), rule_compliance, clock, llm).accumulate(
        FAILURE
    )
    assert result.decision == "no_rule" and "reflection failed" in result.reason and result.rule is None
    assert bases.rules.size == 0


async def test_the_judge_can_be_another_model(bases: Bases, clock, rule_compliance) -> None:
    asked: list[dict] = []

    def sceptic(call: ScriptedCall) -> RuleJudgement:
        asked.append(dict(call.variables))
        return RuleJudgement(helpful=False, reason=f"{call.variables['principle'][:20]}... is too broad")

    handlers = ScriptedHandlers()
    handlers.register(JUDGE_TASK.name, sceptic)
    judge = LLMClient([ChainLink(ScriptedProvider(handlers), attempts=1)], PromptLibrary([PROMPTS_DIR]))
    replayer = CodeCoverageReplayer({FAILED: {"MISSING_DB_WARNING"}})
    result = await RuleAccumulator(
        scripted_llm(), bases.rules, bases.cases, replayer, rule_compliance, clock, judge_llm=judge
    ).accumulate(FAILURE)
    assert result.decision == "refused" and result.reason.endswith("is too broad")
    assert len(asked) == 1 and asked[0]["principle"] == result.rule.principle  # type: ignore[union-attr]
    assert asked[0]["replays"][0]["situation_id"] == FAILED


def counting_llm(reflections: dict[str, tuple[str, list[str]]], asked: list[dict]) -> LLMClient:
    """The scripted LLM, with reflection stating a principle per customer utterance and every
    contradiction question recorded in `asked`."""
    base = ScriptedHandlers()
    register_casebase_handlers(base)
    contradiction = base.get("casebase.contradiction")

    def reflect(call: ScriptedCall) -> RuleReflection:
        principle, codes = reflections[call.variables["customer_utterance"]]
        return RuleReflection(better_alternative="another reply", principle=principle, codes=codes)

    def counted(call: ScriptedCall):
        asked.append(dict(call.variables))
        return contradiction(call)

    handlers = ScriptedHandlers()
    handlers.register(REFLECT_TASK.name, reflect)
    handlers.register("casebase.contradiction", counted)
    for name in ("casebase.refine", "casebase.judge_rule", "casebase.classify"):
        handlers.register(name, base.get(name))
    return LLMClient([ChainLink(ScriptedProvider(handlers), attempts=1)], PromptLibrary([PROMPTS_DIR]))


SIGNPOST_FAILURE = FAILURE.model_copy(
    update={
        "consultation_id": "consultation-db-2",
        "customer_utterance": "My final salary transfer value is 80,000 pounds, should I move it?",
        "violations": ["MISSING_ADVICE_SIGNPOST"],
    }
)
SAME_WORDS = (
    "When a customer with a defined benefit pension mentions transferring, explain that a transfer gives up "
    "a guaranteed income for life and that regulated advice is needed above 30,000 pounds, because "
    "safeguarded benefits are valuable."
)


async def test_a_days_own_contradiction_questions_are_asked_ahead_and_decide_the_same(
    tmp_path, embedder, clock, rule_compliance
) -> None:
    reflections = {
        FAILURE.customer_utterance: (SAME_WORDS, ["MISSING_DB_WARNING"]),
        # The same words about another code: related to the first rule, not a duplicate of it.
        SIGNPOST_FAILURE.customer_utterance: (SAME_WORDS, ["MISSING_ADVICE_SIGNPOST"]),
    }
    needs = {FAILED: {"MISSING_DB_WARNING"}, "consultation-db-2": {"MISSING_ADVICE_SIGNPOST"}}
    decided: dict[bool, list[tuple[str, str]]] = {}
    for ahead in (True, False):
        asked: list[dict] = []
        day = open_bases(
            CasebaseConfig(store=StoreConfig(path=tmp_path / f"ahead-{ahead}")), embedder, clock, llm=None
        )
        acc = RuleAccumulator(
            counting_llm(reflections, asked),
            day.rules,
            day.cases,
            CodeCoverageReplayer(needs),
            rule_compliance,
            clock,
            AccumulationSettings(validation_cases=0),
        )
        day.rules.llm = acc.llm  # admission's contradiction judge
        proposals = [await acc.propose(FAILURE), await acc.propose(SIGNPOST_FAILURE)]
        assert asked == []  # nothing was active while proposing
        assert [p.validation.decision for p in proposals if p.validation] == ["kept", "kept"]
        if ahead:
            proposals = await acc.prefetch_contradictions(proposals)
            assert len(asked) == 1 and proposals[0].verdicts == {} and len(proposals[1].verdicts) == 1
            assert asked[0]["new_rule"]["codes"] == ["MISSING_ADVICE_SIGNPOST"]
        before = len(asked)
        results = [await acc.decide(p) for p in proposals]
        # Asked ahead, deciding asks nothing; otherwise the second decision asks the same question.
        assert len(asked) - before == (0 if ahead else 1)
        decided[ahead] = [(r.decision, r.reason) for r in results]
    assert decided[True] == decided[False]
    assert [d for d, _ in decided[True]] == ["kept", "kept"]


async def test_proposing_together_replays_a_shared_baseline_once(
    bases: Bases, clock, rule_compliance
) -> None:
    past_cases(bases)
    again = FAILURE.model_copy(update={"consultation_id": "consultation-db-2"})
    needs = {FAILED: {"MISSING_DB_WARNING"}, "consultation-db-2": {"MISSING_DB_WARNING"}}
    alone = CodeCoverageReplayer(needs)
    separately = [
        await accumulator(bases, alone, rule_compliance, clock).propose(f) for f in (FAILURE, again)
    ]
    together = CodeCoverageReplayer(needs)
    proposed = await accumulator(bases, together, rule_compliance, clock).propose_all([FAILURE, again])
    # Each failure: its own situation without and with its rule; each of the two past cases
    # without the rule (the same baseline for both failures) and with the failure's own rule.
    assert len(alone.calls) == 2 * (2 + 2 * 2)
    assert len(together.calls) == len(alone.calls) - 2
    assert [p.validation.decision for p in proposed if p.validation] == ["kept", "kept"]

    def scores(ps):
        return [[(r.situation_id, r.score_before, r.score_after) for r in p.validation.replays] for p in ps]

    assert scores(proposed) == scores(separately)
