"""Later evidence about active rules: after each consultation, did the rules the advisor had help?

Validation is a one-off test on replays; what keeps a rule active is how it does afterwards, in
consultations it was retrieved for. The evidence is read from what the environment already knows
at the end of a consultation: which rules were in the advisor's prompt, which it cited, which
compliance codes its drafts broke before the gate (first-pass violations, since the gate hides
what the advisor would have said) and how the consultation ended.

- A rule whose codes were broken while it was in the prompt did not help: it was there and the
  advisor made the mistake anyway, whether it ignored the rule or the rule was too weak.
- A cited rule whose codes were not broken helped.
- A cited rule about no particular code helped when the consultation went well (first pass
  compliant and an outcome score of at least `good_outcome`), and did not when it went badly.
- A rule that was retrieved but neither cited nor relevant to a mistake gives no evidence.

Each piece of evidence moves the rule's confidence through `RulesBase.record_evidence`, which
retires an active rule whose confidence falls below the floor.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from pydantic import BaseModel

from casebase.models import CaseOutcome, GuidanceRule, RuleStatus
from casebase.rules_base import RulesBase


class RuleEvidence(BaseModel):
    """What one consultation said about one rule, and what it did to the rule."""

    rule_id: str
    helped: bool
    reason: str
    confidence_before: float
    confidence_after: float
    status: RuleStatus  # after the evidence: "retired" when this evidence retired it


def judge_evidence(
    rule: GuidanceRule,
    *,
    cited: bool,
    violations: Collection[str],
    outcome: CaseOutcome | None,
    good_outcome: float,
) -> tuple[bool, str] | None:
    """(helped, why) for one rule in one consultation, or None when the consultation says nothing."""
    broken = sorted(set(rule.codes) & set(violations))
    if broken:
        how = "cited" if cited else "in the prompt"
        return False, f"{', '.join(broken)} broken with the rule {how}"
    if not cited:
        return None
    if rule.codes:
        return True, f"cited, and {', '.join(rule.codes)} not broken"
    if outcome is None:
        return None
    went_well = outcome.first_pass_compliant is not False and outcome.score() >= good_outcome
    score = f"outcome score {outcome.score():.2f}"
    if went_well:
        return True, f"cited in a consultation that went well ({score})"
    first_pass = "" if outcome.first_pass_compliant is not False else ", not compliant at first pass"
    return False, f"cited in a consultation that went badly ({score}{first_pass})"


def apply_consultation_evidence(
    rules: RulesBase,
    consultation_id: str,
    *,
    retrieved: Iterable[str],
    cited: Iterable[str],
    violations: Collection[str],
    outcome: CaseOutcome | None = None,
) -> list[RuleEvidence]:
    """Record one consultation's evidence on every active rule it bears on, in a stable order.

    `retrieved` and `cited` are rule ids (cited ones count as retrieved too); `violations` are the
    compliance codes the advisor's drafts broke before the gate. Rules no longer active are skipped:
    a retired rule is not on trial any more.
    """
    cited_ids = set(cited)
    seen = list(dict.fromkeys([*retrieved, *cited_ids]))
    applied: list[RuleEvidence] = []
    for rule_id in seen:
        rule = rules.get(rule_id)
        if rule is None or rule.status != "active":
            continue
        verdict = judge_evidence(
            rule,
            cited=rule_id in cited_ids,
            violations=violations,
            outcome=outcome,
            good_outcome=rules.settings.good_outcome,
        )
        if verdict is None:
            continue
        helped, reason = verdict
        updated = rules.record_evidence(rule_id, helped, evidence_id=consultation_id, reason=reason)
        applied.append(
            RuleEvidence(
                rule_id=rule_id,
                helped=helped,
                reason=reason,
                confidence_before=rule.confidence,
                confidence_after=updated.confidence,
                status=updated.status,
            )
        )
    return applied
