"""The scripted answers to casebase's tasks: computed from each call's variables, repeatable per seed.

Calls go through the real LLM client, so every template is rendered with the same variables the
handlers read (a variable a template needs but the pipeline does not pass fails here).
"""

from __future__ import annotations

from typing import Any

from casebase.codes import code_guidance, known_codes
from casebase.tasks import (
    CLASSIFY_TASK,
    CONTRADICTION_TASK,
    JUDGE_TASK,
    REFINE_TASK,
    REFLECT_TASK,
    ContradictionVerdict,
    RefinedPrinciple,
    RuleJudgement,
    RuleReflection,
    TaskClassification,
)
from simulacra.llm.client import LLMClient
from tests.casebase.builders import DB_PROFILE
from tests.casebase.conftest import scripted_llm


def reflect_variables(
    violations: list[str], task_type: str = "consolidation", said: str = "Go ahead."
) -> dict:
    return {
        "task_type": task_type,
        "customer_profile": DB_PROFILE,
        "customer_utterance": "Can I move my final salary pension and cash it in?",
        "said": said,
        "violations": violations,
        "outcome": None,
        "notes": "",
        "code_guidance": [g.model_dump() for g in code_guidance(violations)],
        "known_codes": sorted(known_codes()),
        "existing_rules": [],
    }


async def reflect(llm: LLMClient, variables: dict) -> RuleReflection:
    return (await llm.call(REFLECT_TASK, variables)).parsed(RuleReflection)


async def test_reflection_states_the_remedy_for_the_codes_that_were_broken() -> None:
    llm = scripted_llm()
    db = await reflect(llm, reflect_variables(["MISSING_DB_WARNING"]))
    both = await reflect(llm, reflect_variables(["MISSING_DB_WARNING", "SCAM_RISK_IGNORED"]))
    (db_guidance,) = code_guidance(["MISSING_DB_WARNING"])
    (scam_guidance,) = code_guidance(["SCAM_RISK_IGNORED"])
    assert db.codes == ["MISSING_DB_WARNING"] and both.codes == ["MISSING_DB_WARNING", "SCAM_RISK_IGNORED"]
    assert db_guidance.do[1:] in db.principle and db_guidance.because in db.principle
    assert db_guidance.do[1:] in both.principle and scam_guidance.do in both.principle
    assert "Go ahead." in db.better_alternative


async def test_an_off_target_reflection_is_about_the_topic_and_another_code() -> None:
    llm = scripted_llm(behaviour={"reflect_off_target": 1.0})
    vague = await reflect(llm, reflect_variables(["MISSING_DB_WARNING"], task_type="retirement_age"))
    assert "retirement age" in vague.principle
    assert len(vague.codes) == 1 and vague.codes[0] in known_codes() - {"MISSING_DB_WARNING"}


async def test_refinement_cuts_the_given_principle_into_its_three_parts() -> None:
    llm = scripted_llm()
    principle = (await reflect(llm, reflect_variables(["SCAM_RISK_IGNORED"]))).principle
    refined = (
        await llm.call(
            REFINE_TASK,
            {
                "principle": principle,
                "codes": ["SCAM_RISK_IGNORED"],
                "task_type": "risk_assessment",
                "customer_profile": DB_PROFILE,
                "customer_utterance": "Someone called me about a free pension review.",
                "code_guidance": [g.model_dump() for g in code_guidance(["SCAM_RISK_IGNORED"])],
            },
        )
    ).parsed(RefinedPrinciple)
    (scam,) = code_guidance(["SCAM_RISK_IGNORED"])
    assert refined.situation == scam.situation
    assert refined.action.lower() == scam.do.lower()
    assert refined.principle() == f"When {scam.situation}, {scam.do}, because {scam.because}."


def judge_variables(codes: list[str], violations: list[str], replays: list[dict[str, Any]]) -> dict:
    return {
        "principle": "When a customer has a defined benefit pension, warn about guarantees, because they matter.",
        "codes": codes,
        "task_type": "consolidation",
        "customer_utterance": "Can I transfer my final salary pension?",
        "said": "Yes.",
        "violations": violations,
        "replays": replays,
    }


def replay(role: str, before: float, after: float, regression: bool = False, sid: str = "s") -> dict:
    return {
        "situation_id": sid,
        "role": role,
        "score_before": before,
        "score_after": after,
        "violations_before": [],
        "violations_after": [],
        "regression": regression,
    }


async def test_the_judge_reads_the_codes_and_the_replays() -> None:
    llm = scripted_llm()

    async def judge(codes, violations, replays) -> RuleJudgement:
        return (await llm.call(JUDGE_TASK, judge_variables(codes, violations, replays))).parsed(RuleJudgement)

    db = ["MISSING_DB_WARNING"]
    fixed = [replay("failed_situation", 0.0, 1.0)]
    assert (await judge(db, db, fixed)).helpful
    assert not (await judge(["SCAM_RISK_IGNORED"], db, fixed)).helpful
    assert not (await judge(db, db, [replay("failed_situation", 0.5, 0.5)])).helpful
    hurt = await judge(db, db, [*fixed, replay("past_case", 1.0, 0.5, regression=True, sid="case-7")])
    assert not hurt.helpful and "case-7" in hurt.reason


async def test_contradiction_needs_shared_codes_similar_words_and_opposite_instructions() -> None:
    llm = scripted_llm()
    warn = "When a customer mentions a final salary transfer, warn that guarantees are lost, because they matter."
    dont = "When a customer mentions a final salary transfer, do not warn that guarantees are lost, because it worries."

    async def contradicts(new: str, new_codes: list[str], active: str, active_codes: list[str]) -> bool:
        verdict = (
            await llm.call(
                CONTRADICTION_TASK,
                {
                    "new_rule": {"principle": new, "codes": new_codes, "domain": "consolidation"},
                    "active_rule": {"principle": active, "codes": active_codes, "domain": "consolidation"},
                },
            )
        ).parsed(ContradictionVerdict)
        return verdict.contradicts

    db = ["MISSING_DB_WARNING"]
    assert await contradicts(dont, db, warn, db)
    assert not await contradicts(warn, db, warn, db)
    assert not await contradicts(dont, ["SCAM_RISK_IGNORED"], warn, db)
    assert not await contradicts(
        "When asked about tax, do not guess figures, because errors cost.", db, warn, db
    )


async def slips(seed: int, n: int = 24) -> list[str]:
    """The task types a classifier with a 50% slip rate gives for the same question n times over
    (the question is varied by a counter so each call is a distinct call)."""
    llm = scripted_llm(seed=seed, behaviour={"classify_wrong": 0.5})
    answers = []
    for i in range(n):
        result = await llm.call(
            CLASSIFY_TASK,
            {
                "query": f"Will I pay income tax on withdrawal number {i}?",
                "task_types": [
                    {"name": "tax", "description": "tax"},
                    {"name": "drawdown", "description": "drawdown"},
                ],
            },
        )
        answers.append(result.parsed(TaskClassification).task_type)
    return answers


async def test_answers_repeat_exactly_for_a_seed_and_differ_between_seeds() -> None:
    first, again, other = await slips(seed=1), await slips(seed=1), await slips(seed=2)
    assert first == again
    assert first != other
    assert 0 < first.count("tax") < len(first)  # the slip rate shows: some right, some wrong
