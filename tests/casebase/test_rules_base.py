"""The rules base: life cycle, confidence from evidence, duplicates and contradictions, exchange."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from casebase.config import CasebaseConfig, StoreConfig
from casebase.factory import Bases, open_bases
from casebase.rules_base import UnknownRuleError, contradiction_key
from casebase.tasks import ContradictionVerdict
from tests.casebase.builders import make_rule

DB_RULE = (
    "When a customer with a defined benefit pension mentions transferring, warn that a transfer gives up "
    "a guaranteed income for life, because safeguarded benefits are valuable."
)
DB_RULE_AGAIN = (
    "When a customer with a defined benefit pension mentions transferring, warn that the transfer gives up "
    "a guaranteed income for life, because safeguarded benefits are valuable."
)
DB_RULE_OPPOSITE = (
    "When a customer with a defined benefit pension mentions transferring, do not warn that a transfer gives up "
    "a guaranteed income for life, because warnings about safeguarded benefits worry customers."
)
SCAM_RULE = (
    "When a customer mentions a cold call or a free pension review, name the scam warning signs, "
    "because scams cost people their savings."
)


def active(bases: Bases, principle: str, codes: list[str], **kwargs) -> str:
    rule = bases.rules.add_candidate(make_rule(principle, codes, **kwargs))
    return bases.rules.activate(rule.id, "validated in test").id


def test_only_active_rules_are_found(bases: Bases) -> None:
    candidate = bases.rules.add_candidate(make_rule(DB_RULE, ["MISSING_DB_WARNING"]))
    assert candidate.status == "candidate"
    assert bases.rules.search("defined benefit transfer") == []
    bases.rules.activate(candidate.id, "validated")
    found = bases.rules.search("defined benefit transfer")
    assert [m.rule.id for m in found] == [candidate.id]
    bases.rules.retire(candidate.id, "superseded in test")
    assert bases.rules.search("defined benefit transfer") == []
    stored = bases.rules.get(candidate.id)
    assert stored is not None
    assert [c.status for c in stored.status_history] == ["candidate", "active", "retired"]
    assert stored.retired_reason == "superseded in test"
    assert bases.rules.counts().model_dump() == {"total": 1, "active": 0, "candidate": 0, "retired": 1}


def test_search_by_domain_includes_general_rules(bases: Bases) -> None:
    db = active(bases, DB_RULE, ["MISSING_DB_WARNING"], domain="consolidation")
    scam = active(bases, SCAM_RULE, ["SCAM_RISK_IGNORED"], domain="general")
    active(
        bases,
        "When a customer asks about tax on withdrawals, explain emergency tax, because it surprises people.",
        [],
        domain="tax",
    )
    found = {m.rule.id for m in bases.rules.search("pension transfer", k=4, domain="consolidation")}
    assert found == {db, scam}


def test_retiring_needs_a_reason_and_an_existing_rule(bases: Bases) -> None:
    rule_id = active(bases, DB_RULE, ["MISSING_DB_WARNING"])
    with pytest.raises(ValueError):
        bases.rules.retire(rule_id, "  ")
    with pytest.raises(UnknownRuleError):
        bases.rules.retire("rule-missing", "no such rule")


def test_confidence_rises_with_help_and_falls_until_the_rule_retires(bases: Bases, clock) -> None:
    rule_id = active(bases, DB_RULE, ["MISSING_DB_WARNING"], confidence=0.6)
    helped = bases.rules.record_evidence(rule_id, True, evidence_id="c-10")
    assert helped.confidence == pytest.approx(0.64)  # 0.6 + 0.1 * (1 - 0.6)
    assert "c-10" in helped.supporting_evidence
    clock.advance(timedelta(days=1))
    after = helped.confidence
    for n in range(2):
        after = bases.rules.record_evidence(rule_id, False, evidence_id=f"c-{20 + n}").confidence
    assert after == pytest.approx(0.34)
    assert bases.rules.get(rule_id).status == "active"  # type: ignore[union-attr]
    retired = bases.rules.record_evidence(
        rule_id, False, evidence_id="c-22", reason="customer still confused"
    )
    assert retired.status == "retired" and retired.confidence == pytest.approx(0.19)
    assert (
        "fell below 0.30" in retired.status_history[-1].reason and "c-22" in retired.status_history[-1].reason
    )
    assert [c.evidence_id for c in retired.confidence_history] == ["c-10", "c-20", "c-21", "c-22"]
    assert retired.confidence_history[-1].reason == "customer still confused"
    assert retired.confidence_history[-1].at == clock.now()
    assert bases.rules.search("defined benefit transfer") == []


async def test_a_duplicate_is_merged_into_the_active_rule(bases: Bases) -> None:
    rule_id = active(bases, DB_RULE, ["MISSING_DB_WARNING"])
    admission = await bases.rules.admit(
        make_rule(DB_RULE_AGAIN, ["MISSING_DB_WARNING"], source="c-50"), evidence_id="c-50"
    )
    assert admission.decision == "merged" and admission.related_rule_id == rule_id
    assert "duplicate of active rule" in admission.reason and "same codes" in admission.reason
    assert admission.rule.status == "retired" and admission.rule.retired_reason == admission.reason
    assert admission.rule.validations[-1].decision == "merged"
    kept = bases.rules.get(rule_id)
    assert kept is not None
    assert kept.confidence == pytest.approx(0.65) and "c-50" in kept.supporting_evidence
    assert bases.rules.counts().active == 1


async def test_same_words_about_other_codes_are_not_a_duplicate(bases: Bases) -> None:
    active(bases, DB_RULE, ["MISSING_DB_WARNING"])
    admission = await bases.rules.admit(make_rule(DB_RULE_AGAIN, ["MISSING_ADVICE_SIGNPOST"]))
    assert admission.decision == "candidate"
    assert "checked against 1 related active rule" in admission.reason


async def test_a_contradiction_is_rejected_with_the_judges_reason(bases: Bases) -> None:
    rule_id = active(bases, DB_RULE, ["MISSING_DB_WARNING"])
    admission = await bases.rules.admit(make_rule(DB_RULE_OPPOSITE, ["MISSING_DB_WARNING"]))
    assert admission.decision == "rejected" and admission.related_rule_id == rule_id
    assert admission.reason.startswith(f"contradicts active rule {rule_id}")
    assert "MISSING_DB_WARNING" in admission.reason
    stored = bases.rules.get(admission.rule.id)
    assert stored is not None and stored.status == "retired" and stored.validations[-1].decision == "refused"
    assert bases.rules.search("defined benefit transfer", k=4)[0].rule.id == rule_id


async def test_an_unrelated_rule_becomes_a_candidate(bases: Bases) -> None:
    active(bases, DB_RULE, ["MISSING_DB_WARNING"])
    admission = await bases.rules.admit(make_rule(SCAM_RULE, ["SCAM_RISK_IGNORED"]))
    assert admission.decision == "candidate" and admission.rule.status == "candidate"


async def test_without_a_contradiction_judge_related_rules_are_refused(
    tmp_path: Path, embedder, clock
) -> None:
    bases = open_bases(CasebaseConfig(store=StoreConfig(path=tmp_path / "nollm")), embedder, clock, llm=None)
    first = await bases.rules.admit(make_rule(DB_RULE, ["MISSING_DB_WARNING"]))
    assert first.decision == "candidate" and first.reason == "no related active rule"
    bases.rules.activate(first.rule.id)
    second = await bases.rules.admit(make_rule(DB_RULE_OPPOSITE, ["MISSING_DB_WARNING"]))
    assert second.decision == "rejected" and "no LLM configured" in second.reason


def test_jsonl_round_trip_is_exact(bases: Bases, tmp_path: Path, embedder, clock) -> None:
    rule_id = active(bases, DB_RULE, ["MISSING_DB_WARNING"])
    bases.rules.record_evidence(rule_id, True, evidence_id="c-2")
    bases.rules.add_candidate(make_rule(SCAM_RULE, ["SCAM_RISK_IGNORED"], domain="general"))
    path = tmp_path / "rules.jsonl"
    assert bases.rules.export_jsonl(path) == 2
    other = open_bases(CasebaseConfig(store=StoreConfig(path=tmp_path / "other")), embedder, clock)
    assert other.rules.import_jsonl(path) == 2
    assert other.rules.all() == bases.rules.all()
    assert other.rules.counts() == bases.rules.counts()
    assert [m.rule.id for m in other.rules.search("defined benefit")] == [rule_id]


def test_search_returns_four_active_rules_by_default(bases: Bases) -> None:
    topics = ["fees", "exit charges", "lost guarantees", "scheme rules", "transfer times", "paperwork"]
    for topic in topics:
        active(bases, f"When pots are combined, check {topic}, because {topic} matter.", [])
    assert len(bases.rules.search("combining pots")) == 4


async def test_a_verdict_asked_ahead_is_used_and_a_refused_rule_is_not_asked_about(
    tmp_path: Path, embedder, clock
) -> None:
    # No LLM at all: admission can only decide from verdicts asked ahead, or not ask.
    bases = open_bases(CasebaseConfig(store=StoreConfig(path=tmp_path / "ahead")), embedder, clock, llm=None)
    kept_id = active(bases, DB_RULE, ["MISSING_DB_WARNING"])
    kept = bases.rules.get(kept_id)
    assert kept is not None
    opposite = make_rule(DB_RULE_OPPOSITE, ["MISSING_DB_WARNING"])
    verdict = ContradictionVerdict(contradicts=True, reason="one says warn, the other not to")
    rejected = await bases.rules.admit(opposite, known={contradiction_key(opposite, kept): verdict})
    assert rejected.decision == "rejected" and rejected.reason.endswith("one says warn, the other not to")
    unasked = await bases.rules.admit(
        make_rule(DB_RULE_OPPOSITE, ["MISSING_DB_WARNING"]), check_contradictions=False
    )
    assert unasked.decision == "candidate" and "not asked about contradictions" in unasked.reason
    # A question that could not be asked is left out, so admission asks it again (and here fails).
    assert await bases.rules.contradictions([(opposite, kept)]) == {}


async def test_contradiction_questions_asked_together_match_those_asked_one_by_one(bases: Bases) -> None:
    kept = bases.rules.get(active(bases, DB_RULE, ["MISSING_DB_WARNING"]))
    assert kept is not None
    new = [
        make_rule(DB_RULE_OPPOSITE, ["MISSING_DB_WARNING"]),
        make_rule(DB_RULE_AGAIN, ["MISSING_DB_WARNING"]),
    ]
    together = await bases.rules.contradictions([(rule, kept) for rule in new] * 2)
    assert len(together) == 2  # the same question twice is asked once
    for rule in new:
        alone = await bases.rules.contradictions([(rule, kept)])
        assert alone == {contradiction_key(rule, kept): together[contradiction_key(rule, kept)]}
    assert [together[contradiction_key(r, kept)].contradicts for r in new] == [True, False]
