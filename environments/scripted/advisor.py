"""The scripted advisor: composes a reply from the known profile, tools, figures, rules and cases."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from environments.scripted import phrases
from environments.tasks import AdvisorDraft, Segment, render_segments
from simulacra.llm.providers.scripted import ScriptedCall

# Behaviour key (a configured mistake rate) → the compliance code that mistake violates.
MISTAKE_CODES = {
    "personal_recommendation": "PERSONAL_RECOMMENDATION",
    "missing_db_warning": "MISSING_DB_WARNING",
    "missing_advice_signpost": "MISSING_ADVICE_SIGNPOST",
    "missing_risk_disclosure": "MISSING_RISK_DISCLOSURE",
    "missing_pension_wise_nudge": "MISSING_PENSION_WISE_NUDGE",
    "wrong_figure": "FACTUAL_ERROR",
    "false_certainty": "FALSE_CERTAINTY",
    "scam_ignored": "SCAM_RISK_IGNORED",
    "jargon_with_vulnerable": "UNSUITABLE_FOR_VULNERABLE",
}
ACCESS_GOALS = {"drawdown", "tax", "retirement_age"}
DB_GOALS = {"drawdown", "tax", "consolidation", "retirement_age"}


class Guidance:
    """Decides, for one call, which mistakes the stand-in model makes.

    A mistake is made at its configured rate unless a retrieved rule (or, less reliably, a past
    case) that addresses its code is followed; followed items are reported as used.
    """

    def __init__(self, call: ScriptedCall) -> None:
        self.call = call
        # Each mistake draws from its own stream, so following one rule does not reshuffle whether
        # the model slips elsewhere (a paired replay with and without a rule differs only there).
        self._base = call.rng.getrandbits(64)
        self.rules: list[Mapping[str, Any]] = list(call.variables.get("rules", []))
        self.cases: list[Mapping[str, Any]] = list(call.variables.get("cases", []))
        self.used_rules: list[str] = []
        self.used_cases: list[str] = []

    def slips(self, key: str) -> bool:
        rng = random.Random(f"{self._base}:{key}")
        if rng.random() >= self.call.rate(key):
            return False
        code = MISTAKE_CODES[key]
        for rule in self.rules:
            if code in rule.get("codes", []):
                if rng.random() < self.call.rate("rule_obedience"):
                    self._use(self.used_rules, str(rule["id"]))
                    return False
                break
        for case in self.cases:
            if code in case.get("covered_codes", []):
                if rng.random() < self.call.rate("case_obedience"):
                    self._use(self.used_cases, str(case["id"]))
                    return False
                break
        return True

    @staticmethod
    def _use(bucket: list[str], item: str) -> None:
        if item not in bucket:
            bucket.append(item)


def disclosed_topics(variables: Mapping[str, Any]) -> set[str]:
    return {str(d["topic"]) for d in variables.get("disclosed", [])}


def required_segments(variables: Mapping[str, Any], guidance: Guidance) -> list[Segment]:
    """The warnings this situation calls for, minus the ones the model slips on."""
    goal = str(variables["goal"])
    out: list[Segment] = []
    # Once a DB scheme is on the table (the goal touches it, the customer named one, or asked about
    # a transfer) a careful model flags its guarantees every time it discusses options.
    transfer_raised = bool(variables.get("db_transfer_raised"))
    db_in_play = phrases.has_db(variables) and (
        goal in DB_GOALS or "db_scheme" in disclosed_topics(variables) or transfer_raised
    )
    if db_in_play and not guidance.slips("missing_db_warning"):
        out.append(phrases.db_warning())
    db_over_threshold = db_in_play and phrases.db_value(variables) > phrases.figure(
        variables, "db_advice_threshold"
    )
    if (db_over_threshold or variables.get("asks_for_recommendation")) and not guidance.slips(
        "missing_advice_signpost"
    ):
        out.append(phrases.advice_signpost(variables, db_transfer=db_over_threshold))
    if not guidance.slips("missing_risk_disclosure"):
        out.append(phrases.risk_warning(goal))
    if (goal in ACCESS_GOALS or transfer_raised) and not guidance.slips("missing_pension_wise_nudge"):
        out.append(phrases.pension_wise())
    if "scam_contact" in disclosed_topics(variables) and not guidance.slips("scam_ignored"):
        out.append(phrases.scam_warning())
    return out


def handle_advisor_reply(call: ScriptedCall) -> AdvisorDraft:
    v = call.variables
    goal = str(v["goal"])
    turn = int(v["turn"])
    guidance = Guidance(call)
    segments: list[Segment] = []
    if turn == 1:
        segments.append(phrases.greeting(v))
    wrong_figure = guidance.slips("wrong_figure")
    segments += phrases.information(goal, v, wrong_figure)
    segments += required_segments(v, guidance)
    if guidance.slips("personal_recommendation"):
        segments.append(phrases.recommendation(goal, call.rng.randrange(3)))
    if guidance.slips("false_certainty"):
        segments.append(phrases.certainty(goal))
    if phrases.plain(v):
        if guidance.slips("jargon_with_vulnerable"):
            segments.append(phrases.jargon())
        else:
            segments.append(phrases.vulnerable_care())
    asked: list[str] = []
    if turn < int(v["max_turns"]):
        unasked = [t for t in v.get("unasked_topics", []) if t in phrases.QUESTIONS]
        # A careful advisor asks about what can change the guidance most first.
        priority = ["db_scheme", "other_pensions", "scam_contact", "circumstances", "retirement_plans"]
        unasked.sort(key=priority.index)
        asked = unasked[: 1 + call.rng.randrange(2)]
        segments += [phrases.question(t) for t in asked]
    else:
        segments.append(phrases.closing())
    return AdvisorDraft(
        text=render_segments(segments),
        segments=segments,
        asked_topics=asked,
        used_rule_ids=guidance.used_rules,
        used_case_ids=guidance.used_cases,
    )


def handle_advisor_refine(call: ScriptedCall) -> AdvisorDraft:
    """Fix each reported issue, each with the configured success rate; keep everything else."""
    v = call.variables
    goal = str(v["goal"])
    draft = AdvisorDraft.model_validate(v["draft"])
    segments = list(draft.segments)
    codes = [str(issue["code"]) for issue in v.get("issues", [])]
    success = call.rate("refine_success", 0.8)

    def fixes() -> bool:
        return call.rng.random() < success

    def ensure(kind: str, segment: Segment) -> None:
        if not any(s.kind == kind for s in segments):
            # Warnings go before the questions and closing, where a reader meets them.
            at = next((i for i, s in enumerate(segments) if s.kind in ("question", "closing")), len(segments))
            segments.insert(at, segment)

    for code in dict.fromkeys(codes):
        if not fixes():
            continue
        if code in ("PERSONAL_RECOMMENDATION", "PROMISES_OUTCOME", "FALSE_CERTAINTY"):
            segments = [s for s in segments if s.kind not in ("recommendation", "certainty")]
            if code == "PERSONAL_RECOMMENDATION":
                ensure("advice_signpost", phrases.advice_signpost(v, db_transfer=False))
        elif code == "MISSING_DB_WARNING":
            ensure("db_warning", phrases.db_warning())
        elif code == "MISSING_ADVICE_SIGNPOST":
            db_transfer = phrases.has_db(v) and phrases.db_value(v) > phrases.figure(v, "db_advice_threshold")
            ensure("advice_signpost", phrases.advice_signpost(v, db_transfer=db_transfer))
        elif code == "MISSING_RISK_DISCLOSURE":
            ensure("risk_warning", phrases.risk_warning(goal))
        elif code == "MISSING_PENSION_WISE_NUDGE":
            ensure("pension_wise", phrases.pension_wise())
        elif code == "SCAM_RISK_IGNORED":
            ensure("scam_warning", phrases.scam_warning())
        elif code == "UNSUITABLE_FOR_VULNERABLE":
            segments = [s for s in segments if s.kind != "jargon"]
            ensure("vulnerable_care", phrases.vulnerable_care())
        elif code == "FACTUAL_ERROR":
            correct = phrases.information(goal, v, wrong_figure=False)
            segments = [s for s in segments if s.kind not in ("information", "figure")]
            at = 1 if segments and segments[0].kind == "greeting" else 0
            segments[at:at] = correct
    return AdvisorDraft(
        text=render_segments(segments),
        segments=segments,
        asked_topics=draft.asked_topics,
        used_rule_ids=draft.used_rule_ids,
        used_case_ids=draft.used_case_ids,
    )
