"""Scripted answers for casebase's tasks, computed from the call's variables as a careful model would.

- classify: the keyword classifier over the query;
- reflect: the good-practice remedy for the codes that were broken (shown in the variables);
- refine: the principle cut into situation, action and reason;
- judge: helpful when the rule is about what went wrong and its replays improved without regressing;
- contradiction: two rules about the same codes whose wording agrees but whose instructions point
  opposite ways (one says to do, the other not to).

Configured slips (`call.chance(...)`) make them fail the way models do, so the pipeline's gates are
exercised in simulations: `classify_wrong`, `reflect_off_target` (a vague principle about a code that
was not broken), `rule_judge_misjudged`, `contradiction_misjudged`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from casebase.classify import KeywordClassifier
from casebase.models import TASK_TYPES
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
from simulacra.llm.providers.scripted import ScriptedCall, ScriptedHandlers
from simulacra.scripted_tasks import keywords

_BECAUSE = ". This matters because "
_NEGATION = re.compile(
    r"\b(never|not|don't|do not|must not|should not|avoid|avoiding|without|no need|skip|refrain)\b",
    re.IGNORECASE,
)
_VAGUE = "Be clear and helpful and make sure the customer feels well informed"


def _sentence_case(text: str) -> str:
    return text[:1].upper() + text[1:]


def handle_classify(call: ScriptedCall) -> TaskClassification:
    query = str(call.variables["query"])
    names = [t["name"] for t in call.variables["task_types"]] or list(TASK_TYPES)
    classification = KeywordClassifier().classify(query)
    task_type = classification.task_type
    reason = classification.reason
    if call.chance("classify_wrong"):
        task_type = call.rng.choice([n for n in names if n != task_type])
        reason = "misread the question"
    return TaskClassification(
        task_type=task_type, confidence=max(0.3, classification.confidence), reason=reason
    )


def handle_reflect(call: ScriptedCall) -> RuleReflection:
    guidance: Sequence[Mapping[str, Any]] = call.variables["code_guidance"]
    violations = [str(c) for c in call.variables["violations"]]
    known = [str(c) for c in call.variables["known_codes"]]
    if call.chance("reflect_off_target") or not guidance:
        # The slip a weak model makes: a platitude about the topic, tagged with a code that was not
        # at stake, which fixes nothing and so must be refused by validation.
        others = [c for c in known if c not in violations] or known
        code = call.rng.choice(others) if others else None
        topic = str(call.variables["task_type"]).replace("_", " ")
        return RuleReflection(
            better_alternative=f"A clearer reply about {topic} than: {call.variables['said']}",
            principle=f"{_VAGUE} about {topic}{_BECAUSE}customers should understand what they are told.",
            codes=[code] if code else [],
        )
    actions = "; and ".join(str(g["do"]) for g in guidance)
    principle = f"{_sentence_case(actions)}{_BECAUSE}{guidance[0]['because']}."
    return RuleReflection(
        better_alternative=f"A reply that would {actions}, instead of: {call.variables['said']}",
        principle=principle,
        codes=[str(g["code"]) for g in guidance],
    )


def handle_refine(call: ScriptedCall) -> RefinedPrinciple:
    principle = str(call.variables["principle"]).strip()
    guidance: Sequence[Mapping[str, Any]] = call.variables["code_guidance"]
    if _BECAUSE in principle:
        action, reason = principle.split(_BECAUSE, 1)
    else:
        action, reason = (
            principle,
            str(guidance[0]["because"]) if guidance else "it serves the customer better",
        )
    situation = (
        str(guidance[0]["situation"])
        if guidance
        else f"a customer asks about {str(call.variables['task_type']).replace('_', ' ')}"
    )
    action = action.strip().rstrip(".")
    return RefinedPrinciple(situation=situation, action=action[:1].lower() + action[1:], reason=reason)


def handle_judge(call: ScriptedCall) -> RuleJudgement:
    codes = set(call.variables["codes"])
    violations = set(call.variables["violations"])
    replays: Sequence[Mapping[str, Any]] = call.variables["replays"]
    failed = [r for r in replays if r["role"] == "failed_situation"]
    improved = bool(failed) and all(r["score_after"] > r["score_before"] for r in failed)
    regressed = [r["situation_id"] for r in replays if r["role"] == "past_case" and r["regression"]]
    on_target = bool(codes & violations) if violations else bool(codes)
    helpful = on_target and improved and not regressed
    if helpful:
        reason = f"addresses {', '.join(sorted(codes & violations) or sorted(codes))} and fixed its case"
    elif not on_target:
        reason = "it is not about what went wrong in the consultation"
    elif not improved:
        reason = "replaying the failed situation with it did not help"
    else:
        reason = f"it made past cases worse: {', '.join(regressed)}"
    if call.chance("rule_judge_misjudged"):
        helpful = not helpful
        reason = f"misjudged: {reason}"
    return RuleJudgement(helpful=helpful, reason=reason)


def _polarity(text: str) -> bool:
    return bool(_NEGATION.search(text))


def handle_contradiction(call: ScriptedCall) -> ContradictionVerdict:
    new = call.variables["new_rule"]
    active = call.variables["active_rule"]
    new_codes, active_codes = set(new["codes"]), set(active["codes"])
    shared = new_codes & active_codes if new_codes or active_codes else {"(none)"}
    new_words, active_words = set(keywords(new["principle"])), set(keywords(active["principle"]))
    overlap = len(new_words & active_words) / max(1, len(new_words | active_words))
    opposite = _polarity(new["principle"]) != _polarity(active["principle"])
    contradicts = bool(shared) and opposite and overlap >= 0.25
    if contradicts:
        reason = f"both concern {', '.join(sorted(shared))} but one says to do what the other says not to"
    elif not shared:
        reason = "they are about different compliance codes"
    else:
        reason = "they point the same way" if not opposite else "they concern different situations"
    if call.chance("contradiction_misjudged"):
        contradicts = not contradicts
        reason = f"misjudged: {reason}"
    return ContradictionVerdict(contradicts=contradicts, reason=reason)


def register_casebase_handlers(handlers: ScriptedHandlers) -> None:
    handlers.register(CLASSIFY_TASK.name, handle_classify)
    handlers.register(REFLECT_TASK.name, handle_reflect)
    handlers.register(REFINE_TASK.name, handle_refine)
    handlers.register(JUDGE_TASK.name, handle_judge)
    handlers.register(CONTRADICTION_TASK.name, handle_contradiction)
