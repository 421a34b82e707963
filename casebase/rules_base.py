"""The rules base (semantic memory): principles distilled from failures, with a life cycle.

A rule is a candidate until validation keeps it, active while it keeps helping, and retired when
later evidence drags its confidence below a floor or when it is refused. Nothing is deleted: a
retired rule keeps its validation records and the reasons for every change of status and
confidence, which is the audit trail of what the advisor learnt and unlearnt.

Before a new rule is admitted it is compared with the active rules it resembles. A near-identical
rule about the same compliance codes is a duplicate: its evidence is folded into the active rule.
A rule an LLM judges to contradict an active one is rejected, because an advisor told to do two
incompatible things does neither reliably. Both outcomes are stored with their reason.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from casebase.config import RulesBaseSettings
from casebase.jsonl import read_jsonl, write_jsonl
from casebase.models import (
    GENERAL_DOMAIN,
    ConfidenceChange,
    GuidanceRule,
    RuleStatus,
    StatusChange,
    TaskType,
    ValidationRecord,
)
from casebase.store import VectorCollection, and_where
from casebase.tasks import CONTRADICTION_TASK, ContradictionVerdict
from simulacra.clock import Clock
from simulacra.embeddings.base import Embedder
from simulacra.llm.errors import LLMChainExhausted, LLMError
from simulacra.memory.importance import LLMCaller


class RuleMatch(BaseModel):
    rule: GuidanceRule
    similarity: float


class RuleCounts(BaseModel):
    total: int
    active: int
    candidate: int
    retired: int


class Admission(BaseModel):
    """What happened to a proposed rule before validation: stored as a candidate, merged, or rejected."""

    decision: Literal["candidate", "merged", "rejected"]
    rule: GuidanceRule  # the new rule's stored record
    related_rule_id: str | None = None
    similarity: float | None = None
    reason: str


def contradiction_question(new: GuidanceRule, active: GuidanceRule) -> dict[str, dict[str, object]]:
    """What the contradiction judge is shown: both principles, their codes and domains."""
    return {
        "new_rule": {"principle": new.principle, "codes": new.codes, "domain": new.domain},
        "active_rule": {"principle": active.principle, "codes": active.codes, "domain": active.domain},
    }


def contradiction_key(new: GuidanceRule, active: GuidanceRule) -> str:
    """A verdict's identity: the question asked, so a verdict is reused only for the same question."""
    return json.dumps(contradiction_question(new, active), sort_keys=True)


def _flat_fields(rule: GuidanceRule) -> dict[str, str | int | float | bool]:
    return {
        "status": rule.status,
        "domain": rule.domain,
        "codes": ",".join(rule.codes),
        "confidence": rule.confidence,
    }


def rule_collection(
    client, name: str, embedder: Embedder, *, empty_recheck_s: float = 0.0
) -> VectorCollection[GuidanceRule]:
    return VectorCollection(
        client,
        name,
        embedder,
        GuidanceRule,
        flat_fields=_flat_fields,
        text_of=GuidanceRule.search_text,
        empty_recheck_s=empty_recheck_s,
    )


class UnknownRuleError(KeyError):
    """No rule with that id is stored."""


class RulesBase:
    def __init__(
        self,
        collection: VectorCollection[GuidanceRule],
        clock: Clock,
        settings: RulesBaseSettings | None = None,
        llm: LLMCaller | None = None,
    ) -> None:
        self.collection = collection
        self.clock = clock
        self.settings = settings or RulesBaseSettings()
        self.llm = llm

    @property
    def embedder(self) -> Embedder:
        return self.collection.embedder

    # --- life cycle ------------------------------------------------------------------------

    def get(self, rule_id: str) -> GuidanceRule | None:
        return self.collection.get(rule_id)

    def _require(self, rule_id: str) -> GuidanceRule:
        rule = self.collection.get(rule_id)
        if rule is None:
            raise UnknownRuleError(f"no rule with id {rule_id!r}")
        return rule

    def _with_status(self, rule: GuidanceRule, status: RuleStatus, reason: str) -> GuidanceRule:
        now = self.clock.now()
        return rule.model_copy(
            update={
                "status": status,
                "updated_at": now,
                "status_history": [*rule.status_history, StatusChange(status=status, reason=reason, at=now)],
            }
        )

    def add_candidate(self, rule: GuidanceRule, reason: str = "proposed") -> GuidanceRule:
        now = self.clock.now()
        rule = self._with_status(
            rule.model_copy(update={"created_at": rule.created_at or now}), "candidate", reason
        )
        self.collection.upsert([rule])
        return rule

    def save(self, rule: GuidanceRule) -> GuidanceRule:
        """Store a rule as it is; re-embeds only when its principle changed since it was stored."""
        stored = self.collection.get(rule.id)
        if stored is not None and stored.principle == rule.principle:
            self.collection.replace(rule)
        else:
            self.collection.upsert([rule])
        return rule

    def activate(self, rule_id: str, reason: str = "validated") -> GuidanceRule:
        rule = self._require(rule_id)
        if rule.status == "active":
            return rule
        return self.save(self._with_status(rule, "active", reason))

    def retire(self, rule_id: str, reason: str) -> GuidanceRule:
        if not reason.strip():
            raise ValueError("retiring a rule needs a reason")
        rule = self._require(rule_id)
        return self.save(self._with_status(rule, "retired", reason))

    def record_validation(self, rule_id: str, record: ValidationRecord) -> GuidanceRule:
        rule = self._require(rule_id)
        return self.save(rule.model_copy(update={"validations": [*rule.validations, record]}))

    def record_evidence(
        self, rule_id: str, helped: bool, evidence_id: str | None = None, reason: str = ""
    ) -> GuidanceRule:
        """Later experience with a rule moves its confidence; an active rule that falls too low retires.

        Help closes a share (`step_up`) of the distance to full confidence, so confidence approaches
        1 but a long record still matters; a failure costs a fixed `step_down`, so a few failures in
        a row retire even a well-supported rule that has stopped working.
        """
        rule = self._require(rule_id)
        s = self.settings
        before = rule.confidence
        after = before + s.step_up * (1.0 - before) if helped else before - s.step_down
        after = round(min(1.0, max(0.0, after)), 6)
        now = self.clock.now()
        why = reason or ("helped" if helped else "did not help")
        evidence = rule.supporting_evidence
        if helped and evidence_id:
            evidence = [*evidence, evidence_id]
        rule = rule.model_copy(
            update={
                "confidence": after,
                "supporting_evidence": list(dict.fromkeys(evidence)),
                "updated_at": now,
                "confidence_history": [
                    *rule.confidence_history,
                    ConfidenceChange(before=before, after=after, reason=why, evidence_id=evidence_id, at=now),
                ],
            }
        )
        if rule.status == "active" and after < s.retire_below:
            rule = self._with_status(
                rule,
                "retired",
                f"confidence {after:.2f} fell below {s.retire_below:.2f} after evidence "
                f"{evidence_id or 'unnamed'} ({why})",
            )
        return self.save(rule)

    # --- admission: duplicates and contradictions ------------------------------------------

    def related_active(self, rule: GuidanceRule) -> list[RuleMatch]:
        """Active rules nearest the proposal, by the closest of any wording each has had.

        A proposal is usually reflected wording, while an active rule was refined after it was
        proposed; comparing with its earlier wordings too lets the same lesson learnt again be
        recognised as the same rule.
        """
        vector = self.collection.embed([rule.search_text()])[0]
        found = self.collection.query(vector, self.settings.related_k, where={"status": "active"})
        matches = []
        for other, similarity in found:
            if other.id == rule.id:
                continue
            if other.previous_principles:
                earlier = self.collection.embed(other.previous_principles) @ vector
                similarity = max(similarity, float(earlier.max()))
            matches.append(RuleMatch(rule=other, similarity=similarity))
        return sorted(matches, key=lambda m: -m.similarity)

    def duplicate_of(self, rule: GuidanceRule, related: list[RuleMatch]) -> RuleMatch | None:
        """The first related active rule the proposal duplicates: near-identical, about the same codes."""
        for match in related:
            if match.similarity >= self.settings.duplicate_threshold and set(match.rule.codes) == set(
                rule.codes
            ):
                return match
        return None

    async def admit(
        self,
        rule: GuidanceRule,
        evidence_id: str | None = None,
        *,
        known: Mapping[str, ContradictionVerdict] | None = None,
        check_contradictions: bool = True,
    ) -> Admission:
        """Store a proposed rule as a candidate, unless it duplicates or contradicts an active rule.

        A duplicate's evidence goes to the active rule (which gains a little confidence) and the
        proposal is stored retired, pointing at it; a contradicting proposal is stored retired with
        the judge's reason. If the contradiction judge cannot be asked, the proposal is rejected:
        an unchecked contradiction would do more harm than a rule learnt a little later.

        `known` holds contradiction verdicts already asked (`contradictions`, keyed by
        `contradiction_key`), so a pair is not asked twice. `check_contradictions=False` is for a
        proposal already refused by validation: it is stored retired whatever it contradicts, so
        only whether it duplicates an active rule (whose confidence its evidence then raises) matters.
        """
        related = self.related_active(rule)
        duplicate = self.duplicate_of(rule, related)
        if duplicate is not None:
            return self._merge_duplicate(rule, duplicate, evidence_id)
        for match in related if check_contradictions else []:
            if match.similarity < self.settings.related_threshold:
                continue
            asked = (known or {}).get(contradiction_key(rule, match.rule))
            verdict = asked if asked is not None else await self._contradiction(rule, match.rule)
            if isinstance(verdict, str):
                return self._reject(
                    rule, match, f"contradiction check against {match.rule.id} failed: {verdict}"
                )
            if verdict.contradicts:
                return self._reject(rule, match, f"contradicts active rule {match.rule.id}: {verdict.reason}")
        if not related:
            checked = "no related active rule"
        elif check_contradictions:
            checked = f"checked against {len(related)} related active rule(s)"
        else:
            checked = f"{len(related)} related active rule(s), not asked about contradictions (refused)"
        stored = self.add_candidate(rule, reason=f"proposed; {checked}")
        return Admission(decision="candidate", rule=stored, reason=checked)

    async def contradictions(
        self, pairs: Sequence[tuple[GuidanceRule, GuidanceRule]]
    ) -> dict[str, ContradictionVerdict]:
        """Ask whether each (new, active) pair contradicts, all at once (the calls overlap).

        Keyed by `contradiction_key`; a pair whose question failed is left out, so admission asks
        it again rather than rejecting a rule for an error that may have passed.
        """
        unique = {contradiction_key(new, active): (new, active) for new, active in pairs}
        answers = await asyncio.gather(*(self._contradiction(new, active) for new, active in unique.values()))
        return {key: a for key, a in zip(unique, answers, strict=True) if not isinstance(a, str)}

    async def _contradiction(self, new: GuidanceRule, active: GuidanceRule) -> ContradictionVerdict | str:
        if self.llm is None:
            return "no LLM configured to judge contradictions"
        try:
            result = await self.llm.call(CONTRADICTION_TASK, contradiction_question(new, active))
        except (LLMChainExhausted, LLMError) as exc:
            return str(exc)
        return result.parsed(ContradictionVerdict)

    def _merge_duplicate(self, rule: GuidanceRule, match: RuleMatch, evidence_id: str | None) -> Admission:
        active = match.rule
        now = self.clock.now()
        before = active.confidence
        after = round(min(1.0, before + self.settings.merge_boost), 6)
        new_evidence = [*rule.supporting_evidence, *([evidence_id] if evidence_id else [])]
        reason = f"duplicate of active rule {active.id} (cosine {match.similarity:.3f}, same codes)"
        self.save(
            active.model_copy(
                update={
                    "confidence": after,
                    "supporting_evidence": list(dict.fromkeys([*active.supporting_evidence, *new_evidence])),
                    "updated_at": now,
                    "confidence_history": [
                        *active.confidence_history,
                        ConfidenceChange(
                            before=before,
                            after=after,
                            reason=f"merged duplicate {rule.id}",
                            evidence_id=evidence_id,
                            at=now,
                        ),
                    ],
                }
            )
        )
        record = ValidationRecord(
            consultation_id=rule.created_from, decision="merged", reason=reason, decided_at=now
        )
        stored = self._store_retired(
            rule.model_copy(update={"validations": [*rule.validations, record]}), reason
        )
        return Admission(
            decision="merged",
            rule=stored,
            related_rule_id=active.id,
            similarity=match.similarity,
            reason=reason,
        )

    def _reject(self, rule: GuidanceRule, match: RuleMatch, reason: str) -> Admission:
        now = self.clock.now()
        record = ValidationRecord(
            consultation_id=rule.created_from, decision="refused", reason=reason, decided_at=now
        )
        stored = self._store_retired(
            rule.model_copy(update={"validations": [*rule.validations, record]}), reason
        )
        return Admission(
            decision="rejected",
            rule=stored,
            related_rule_id=match.rule.id,
            similarity=match.similarity,
            reason=reason,
        )

    def _store_retired(self, rule: GuidanceRule, reason: str) -> GuidanceRule:
        now = self.clock.now()
        rule = self._with_status(
            rule.model_copy(update={"created_at": rule.created_at or now}), "retired", reason
        )
        self.collection.upsert([rule])
        return rule

    # --- reading ---------------------------------------------------------------------------

    def search(self, query: str, k: int | None = None, domain: TaskType | None = None) -> list[RuleMatch]:
        """The most relevant active rules (for the domain and general ones, when a domain is given)."""
        where = and_where(
            {"status": "active"}, {"domain": {"$in": [domain, GENERAL_DOMAIN]}} if domain else None
        )
        vector = self.collection.embed([query])[0]
        found = self.collection.query(vector, k or self.settings.k, where=where)
        return [RuleMatch(rule=rule, similarity=similarity) for rule, similarity in found]

    def all(self, status: RuleStatus | None = None) -> list[GuidanceRule]:
        rules = self.collection.all(where={"status": status} if status else None)
        return sorted(rules, key=lambda r: (r.created_at is None, r.created_at, r.id))

    def counts(self) -> RuleCounts:
        by_status = {
            status: self.collection.count({"status": status}) for status in ("active", "candidate", "retired")
        }
        return RuleCounts(total=self.collection.count(), **by_status)

    @property
    def size(self) -> int:
        return self.collection.count()

    # --- exchange --------------------------------------------------------------------------

    def export_jsonl(self, path: Path) -> int:
        return write_jsonl(path, self.all())

    def import_jsonl(self, path: Path) -> int:
        rules = read_jsonl(path, GuidanceRule)
        for start in range(0, len(rules), 500):
            self.collection.upsert(rules[start : start + 500])
        return len(rules)
