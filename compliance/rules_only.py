"""The rule stage on its own as a `Validator`: the `rules` evaluation mode, and the quick-start
gate when no LLM judge is configured.

Deterministic rules have no calibrated confidence: a failed hard rule is a certain veto (1.0), and
any other outcome is reported at the rule stage's configured confidence so that a hybrid
validator or the harness never mistakes a keyword pass for a certain one.
"""

from __future__ import annotations

from compliance.models import UtteranceContext, ValidationResult
from compliance.rules import RuleEngine
from compliance.stakes import HighStakesDetector


class RulesOnlyValidator:
    def __init__(
        self,
        engine: RuleEngine,
        stakes: HighStakesDetector | None = None,
        uncertain_confidence: float = 0.5,
    ) -> None:
        if not 0.0 <= uncertain_confidence <= 1.0:
            raise ValueError("uncertain_confidence must be within [0, 1]")
        self.engine = engine
        self.stakes = stakes or HighStakesDetector(engine.kb, engine.topics)
        self.uncertain_confidence = uncertain_confidence

    def validate_sync(self, ctx: UtteranceContext) -> ValidationResult:
        analysis = self.engine.analyse(ctx)
        hits = [hit for rule in self.engine.rules for hit in rule.check(analysis)]
        reasons = self.stakes.assess(ctx, analysis)
        hard = any(hit.hard for hit in hits)
        return ValidationResult(
            compliant=not hits,
            violations=sorted({hit.code for hit in hits}),
            escalate=bool(reasons),
            decided_by="rules",
            confidence=1.0 if hard else self.uncertain_confidence,
            rule_hits=hits,
            escalation_reasons=reasons,
        )

    async def validate(self, ctx: UtteranceContext) -> ValidationResult:
        return self.validate_sync(ctx)
