"""Scripted-provider handler for the judge task: an offline judge of configurable accuracy.

It sees what a real judge is given as structured data: the rule stage's soft findings and, when
the drafting side provides them, the kinds of the reply's segments (a recommendation, a claim of
certainty, jargon). It reports each real problem but misses one with the `judge_error` rate, and
now and then raises a false alarm, with a confidence that drops when it is unsure. Each prompt
version draws its own errors, so a panel of two versions disagrees the way real judges do.
"""

from __future__ import annotations

from compliance.codes import ComplianceCode
from compliance.judges import JudgeVerdict
from simulacra.llm.providers.scripted import ScriptedCall, ScriptedHandlers

SEGMENT_CODES = {
    "recommendation": ComplianceCode.PERSONAL_RECOMMENDATION,
    "certainty": ComplianceCode.FALSE_CERTAINTY,
    "jargon": ComplianceCode.UNSUITABLE_FOR_VULNERABLE,
}


def handle_judge(call: ScriptedCall) -> JudgeVerdict:
    v = call.variables
    rng = call.rng
    error = call.rate("judge_error", 0.08)
    truth = {str(f["code"]) for f in v.get("rule_findings", [])}
    kinds = (v.get("annotations") or {}).get("segment_kinds", [])
    truth |= {str(SEGMENT_CODES[k]) for k in kinds if k in SEGMENT_CODES}
    found = {code for code in sorted(truth) if rng.random() >= error}
    if not truth and rng.random() < error / 2:
        found.add(str(rng.choice(list(ComplianceCode))))
    wrong = len(truth ^ found)
    confidence = min(0.99, max(0.5, rng.gauss(0.92 - 0.2 * wrong, 0.04)))
    if found:
        reasoning = "The reply falls short on " + ", ".join(sorted(found)) + "."
    else:
        reasoning = "The reply explains options and risks without steering the customer."
    return JudgeVerdict(
        passed=not found, confidence=round(confidence, 3), codes=sorted(found), reasoning=reasoning
    )


def register_compliance_handlers(handlers: ScriptedHandlers) -> None:
    handlers.register("judge.compliance", handle_judge)
