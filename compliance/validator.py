"""The hybrid validator: deterministic rules first, then a panel of LLM judges, then a human.

- A failed hard rule (a constraint the FCA leaves no judgement on) vetoes at once: no judge is
  called, and the result says the rules decided.
- Otherwise the judges vote; the consensus decides, with the soft rule findings shown to them.
- The result asks for escalation to a human when the consensus confidence is below the mode's
  threshold, the vote was split, no judge could answer, the situation is high-stakes, or the
  utterance is unlike anything validated before.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from compliance.judges import JudgePanel
from compliance.models import RuleHit, UtteranceContext, ValidationResult
from compliance.rules_only import RulesOnlyValidator
from simulacra.embeddings.base import Embedder


class ModeSettings(BaseModel):
    """How strict a validation mode is (training, production, batch QA)."""

    name: str
    threshold: float = Field(ge=0.0, le=1.0)
    escalate_split_votes: bool = True


class NoveltyDetector:
    """Flags an utterance unlike any validated before (cosine below `threshold` to all of them).

    It stays quiet until it knows `warmup` utterances, so a fresh deployment does not escalate
    everything. What it sees is only compared against after `commit()`: a training run commits
    between virtual days, in a fixed order, so consultations running at the same time cannot change
    each other's verdicts and a seeded run replays exactly; a live service commits at once.
    """

    def __init__(self, embedder: Embedder, threshold: float = 0.35, warmup: int = 50) -> None:
        if not -1.0 <= threshold <= 1.0:
            raise ValueError("a cosine threshold lies within [-1, 1]")
        self.embedder = embedder
        self.threshold = threshold
        self.warmup = warmup
        self._known = np.zeros((0, embedder.dimension), dtype=np.float32)
        self._pending: dict[str, np.ndarray] = {}

    def is_novel(self, text: str) -> bool:
        vector = np.asarray(self.embedder.embed([text])[0], dtype=np.float32)
        self._pending.setdefault(text, vector)
        if len(self._known) < self.warmup:
            return False
        return float(np.max(self._known @ vector)) < self.threshold

    def commit(self) -> int:
        """Make everything seen so far known; returns how many utterances are known."""
        if self._pending:
            fresh = [self._pending[t] for t in sorted(self._pending)]
            self._known = np.vstack([self._known, *[v[None, :] for v in fresh]])
            self._pending.clear()
        return len(self._known)


def judge_variables(
    ctx: UtteranceContext, soft_hits: list[RuleHit], figures: dict[str, Any], tax_year: str
) -> dict[str, Any]:
    return {
        "customer": ctx.customer.model_dump(mode="json"),
        "customer_utterance": ctx.customer_utterance,
        "history": [t.model_dump(mode="json") for t in ctx.history],
        "facts": ctx.facts,
        "figures": figures,
        "tax_year": tax_year,
        "rule_findings": [{"code": str(h.code), "rule": h.rule_id, "message": h.message} for h in soft_hits],
        "advisor_utterance": ctx.advisor_utterance,
        "annotations": ctx.annotations,
    }


class HybridComplianceValidator:
    """Rules, then judges, then (by asking for escalation) a human.

    The rule stage is a `RulesOnlyValidator`, so the `rules` mode and the hybrid modes decide the
    hard constraints and the high-stakes reasons with exactly the same code.
    """

    def __init__(
        self,
        rules: RulesOnlyValidator,
        panel: JudgePanel | None,
        mode: ModeSettings,
        *,
        figures: dict[str, Any],
        tax_year: str,
        novelty: NoveltyDetector | None = None,
    ) -> None:
        self.rules = rules
        self.panel = panel
        self.mode = mode
        self.figures = figures
        self.tax_year = tax_year
        self.novelty = novelty

    async def validate(self, ctx: UtteranceContext) -> ValidationResult:
        result = await self._decide(ctx)
        if self.novelty is not None and result.compliant and self.novelty.is_novel(ctx.advisor_utterance):
            reason = "unlike any utterance validated before"
            result = result.model_copy(
                update={"escalate": True, "escalation_reasons": [*result.escalation_reasons, reason]}
            )
        return result

    def commit_seen(self) -> None:
        """Let the novelty check compare against what was validated so far (see NoveltyDetector)."""
        if self.novelty is not None:
            self.novelty.commit()

    async def _decide(self, ctx: UtteranceContext) -> ValidationResult:
        first = self.rules.validate_sync(ctx)
        hard = any(h.hard for h in first.rule_hits)
        if hard or self.panel is None:
            # A hard failure is certain whatever the mode; without judges a soft outcome is only
            # as sure as the rule stage says it is.
            return first
        soft = list(first.rule_hits)
        consensus, records = await self.panel.assess(judge_variables(ctx, soft, self.figures, self.tax_year))
        verdicts = [r.model_dump(mode="json") for r in records]
        reasons = list(first.escalation_reasons)
        if consensus.passed is None:
            reasons.append("no judge could give a verdict")
        elif consensus.confidence < self.mode.threshold:
            reasons.append(
                f"judge confidence {consensus.confidence:.2f} below the {self.mode.name} threshold"
            )
        if consensus.passed is not None and not consensus.unanimous and self.mode.escalate_split_votes:
            reasons.append(f"split vote ({consensus.votes_for} pass, {consensus.votes_against} fail)")
        passed = bool(consensus.passed)
        codes = consensus.codes or ([] if passed else [str(h.code) for h in soft])
        return ValidationResult(
            compliant=passed,
            violations=list(dict.fromkeys(codes)),
            escalate=bool(reasons),
            decided_by="judges",
            confidence=consensus.confidence,
            rule_hits=first.rule_hits,
            judge_verdicts=verdicts,
            escalation_reasons=reasons,
        )
