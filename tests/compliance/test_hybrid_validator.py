"""The hybrid validator (rules, judges, escalation), the gate, and escalations into the queue."""

from __future__ import annotations

from pathlib import Path

import pytest

from compliance.config import JudgeConfig, ValidatorConfig, build_judge_panel, build_validator
from compliance.escalation import REASON_FACTORS, EscalationContext, ReviewQueueSink, risk_factors
from compliance.knowledge import load_knowledge
from compliance.models import CustomerProfile, Pot, UtteranceContext, ValidationResult
from compliance.review_queue import ReviewQueue
from compliance.review_queue.models import RetrievedContext, RetrievedRecord, RiskFactor
from compliance.scripted import register_compliance_handlers
from compliance.stakes import HighStakesDetector
from compliance.validator import NoveltyDetector
from compliance.validator_gate import ComplianceGate
from simulacra.clock import SystemClock
from simulacra.embeddings.factory import build_embedder
from simulacra.llm.config import LLMConfig
from simulacra.llm.providers.scripted import ScriptedHandlers
from tests.fakes.llm_server import FakeLLMServer, ok_structured, server_error

KB = load_knowledge()
HOLDING = "A colleague will come back to you shortly."
SCRIPTED = LLMConfig(name="scripted", chain=[{"provider": "scripted", "model": "scripted-v1"}])

DC_ONLY = CustomerProfile(age=60, pots=[Pot(type="DC", value_gbp=40_000)], literacy="medium")
GOOD = (
    "I can't tell you which option to choose, but I can explain them. Drawdown keeps your money "
    "invested, so its value can fall as well as rise and it could run out. Pension Wise, a free and "
    "impartial government service from MoneyHelper, can talk you through your options."
)
RECOMMENDS = "If I were you I'd go for drawdown, it's the best option for you."


def ctx(advisor: str, customer: str = "What are my options for taking my pension?", profile=DC_ONLY):
    return UtteranceContext(customer=profile, customer_utterance=customer, advisor_utterance=advisor)


def handlers() -> ScriptedHandlers:
    h = ScriptedHandlers()
    register_compliance_handlers(h)
    return h


def openai_judge_llm(server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> LLMConfig:
    """An OpenAI judge chain pointed at the fake server on 127.0.0.1."""
    monkeypatch.setenv("FAKE_KEY", "k")
    link = {"provider": "openai", "model": "m", "base_url": server.openai_base_url, "api_key_env": "FAKE_KEY"}
    return LLMConfig(name="openai", chain=[link])


def validator_for(mode: str, judges: list[JudgeConfig], threshold: float, llm: LLMConfig = SCRIPTED, **kw):
    config = ValidatorConfig(mode=mode, threshold=threshold, judges=judges, holding_reply=HOLDING, **kw)
    panel = build_judge_panel(config, llm, handlers=handlers(), seed=0)
    return build_validator(config, KB, panel)


async def test_a_failed_hard_rule_vetoes_without_calling_any_judge(llm_server: FakeLLMServer, monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "k")
    llm = LLMConfig(
        name="openai",
        chain=[
            {
                "provider": "openai",
                "model": "m",
                "base_url": llm_server.openai_base_url,
                "api_key_env": "FAKE_KEY",
            }
        ],
    )
    validator = validator_for("training", [JudgeConfig(id="j")], 0.6, llm)
    result = await validator.validate(ctx(RECOMMENDS))
    assert not result.compliant and result.decided_by == "rules" and result.confidence == 1.0
    assert "PERSONAL_RECOMMENDATION" in result.violations
    assert llm_server.requests == []


async def test_two_vendor_panel_over_the_real_sdks_decides_by_majority(
    llm_server: FakeLLMServer, monkeypatch
):
    monkeypatch.setenv("FAKE_KEY", "k")

    def link(provider: str) -> dict:
        base = llm_server.openai_base_url if provider == "openai" else llm_server.base_url
        return {
            "provider": provider,
            "model": f"{provider}-judge",
            "base_url": base,
            "api_key_env": "FAKE_KEY",
        }

    judges = [
        JudgeConfig(id="openai-v1", prompt_version="v1", chain=[link("openai")]),
        JudgeConfig(id="anthropic-v2", prompt_version="v2", chain=[link("anthropic")]),
        JudgeConfig(id="openai-v2", prompt_version="v2", chain=[link("openai")]),
    ]
    # Every judge passes it, but one is unsure: the majority decides, its confidence is averaged.
    llm_server.default = ok_structured({"passed": True, "confidence": 0.95, "codes": [], "reasoning": "fine"})
    validator = validator_for("production", judges, 0.9)
    result = await validator.validate(ctx(GOOD))
    assert result.compliant and result.decided_by == "judges" and not result.escalate
    assert {v["vendor"] for v in result.judge_verdicts} == {"openai", "anthropic"}
    assert {r.wire for r in llm_server.requests} == {"openai", "anthropic"}

    # A split vote below the threshold goes to a human.
    llm_server.default = ok_structured({"passed": True, "confidence": 0.7, "codes": [], "reasoning": "hmm"})
    llm_server.enqueue(ok_structured({"passed": False, "confidence": 0.8, "codes": ["FALSE_CERTAINTY"]}))
    result = await validator.validate(ctx(GOOD + " "))
    assert result.escalate
    assert any("split vote" in r for r in result.escalation_reasons)
    assert any("below the production threshold" in r for r in result.escalation_reasons)


async def test_judges_that_cannot_answer_escalate(llm_server: FakeLLMServer, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_KEY", "k")
    llm = LLMConfig(
        name="openai",
        chain=[
            {
                "provider": "openai",
                "model": "m",
                "base_url": llm_server.openai_base_url,
                "api_key_env": "FAKE_KEY",
            }
        ],
    )
    llm_server.default = server_error()
    validator = validator_for("training", [JudgeConfig(id="j")], 0.6, llm)
    result = await validator.validate(ctx(GOOD))
    assert not result.compliant and result.escalate
    assert "no judge could give a verdict" in result.escalation_reasons


async def test_rules_mode_is_the_rule_stage_alone() -> None:
    validator = validator_for("rules", [], 1.0)
    passed = await validator.validate(ctx(GOOD))
    assert passed.compliant and passed.decided_by == "rules" and not passed.judge_verdicts
    assert passed.confidence < 1.0  # a keyword pass is never reported as certain


def test_every_stakes_reason_maps_to_a_risk_factor() -> None:
    detector = HighStakesDetector(KB)
    db = CustomerProfile(
        age=62,
        pots=[Pot(type="DB", value_gbp=600_000, has_guarantees=True), Pot(type="DC", value_gbp=400_000)],
        vulnerable=True,
        literacy="low",
        situation="recently bereaved",
    )
    asks = "I want to transfer my final salary pension and cash it all in now. What should I do?"
    reasons = detector.assess(ctx("I can explain your options.", asks, db))
    assert reasons
    for reason in reasons:
        assert any(words in reason.lower() for words in REASON_FACTORS), reason
    factors = risk_factors(reasons, ["SCAM_RISK_IGNORED"], ctx("x", asks, db))
    assert {RiskFactor.DB_TRANSFER, RiskFactor.VULNERABLE, RiskFactor.SCAM_SUSPECTED} <= set(factors)


class CountingRefiner:
    def __init__(self, fixed: str | None) -> None:
        self.fixed = fixed
        self.calls = 0

    async def __call__(self, text: str, validation: ValidationResult) -> str:
        self.calls += 1
        assert validation.violations, "a refinement is always told what was wrong"
        return self.fixed or text


async def test_gate_refines_a_failed_draft_and_delivers_the_fix() -> None:
    gate = ComplianceGate(validator_for("rules", [], 1.0), holding_reply=HOLDING, max_refinements=2)
    refiner = CountingRefiner(GOOD)
    outcome = await gate.pass_through(ctx(""), RECOMMENDS, refiner)
    assert outcome.delivered_text == GOOD and not outcome.holding
    assert not outcome.first_pass_compliant and outcome.final.compliant and refiner.calls == 1


async def test_gate_never_delivers_an_unfixed_draft_and_queues_it(tmp_path: Path) -> None:
    with ReviewQueue(f"sqlite:///{tmp_path / 'q.db'}", SystemClock()) as queue:
        sink = ReviewQueueSink(queue, source="training", mode="rules")
        gate = ComplianceGate(
            validator_for("rules", [], 1.0), holding_reply=HOLDING, max_refinements=2, escalations=sink
        )
        refiner = CountingRefiner(None)
        where = EscalationContext(
            consultation_id="consultation-00007",
            turn=2,
            retrieved=RetrievedContext(rules=[RetrievedRecord(id="rule-1", text="Never steer.")]),
        )
        outcome = await gate.pass_through(ctx(""), RECOMMENDS, refiner, where=where)
        assert outcome.holding and outcome.delivered_text == HOLDING and refiner.calls == 2
        assert len(outcome.attempts) == 3 and "after 2 refinements" in outcome.hold_reason
        item = queue.get(outcome.escalation_id)
        assert item.consultation_id == "consultation-00007" and item.stage == "refinement"
        assert item.payload.candidate_reply == RECOMMENDS and len(item.payload.drafts) == 3
        assert item.payload.retrieved.rules[0].id == "rule-1"
        assert "PERSONAL_RECOMMENDATION" in item.codes
        # The same turn escalated again (a retry after a crash) is not queued twice.
        again = await gate.pass_through(ctx(""), RECOMMENDS, CountingRefiner(None), where=where)
        assert again.escalation_id == outcome.escalation_id and queue.stats().waiting == 1


async def test_high_stakes_holds_even_a_compliant_reply(tmp_path: Path) -> None:
    db = CustomerProfile(age=58, pots=[Pot(type="DB", value_gbp=250_000, has_guarantees=True)])
    customer = "I'd like to transfer my final salary pension into a SIPP and take the cash."
    reply = (
        "Your defined benefit pension gives you guaranteed benefits that you would usually lose if you "
        "transfer. Because it is worth more than £30,000 the law requires you to take regulated advice "
        "from a pension transfer specialist before transferring. I can't tell you whether to transfer. "
        "Transferring carries risks: the value of investments can fall as well as rise. Pension Wise, "
        "a free and impartial government service from MoneyHelper, can talk you through your options."
    )
    with ReviewQueue(f"sqlite:///{tmp_path / 'q.db'}", SystemClock()) as queue:
        gate = ComplianceGate(
            validator_for("rules", [], 1.0),
            holding_reply=HOLDING,
            escalations=ReviewQueueSink(queue, source="live", mode="rules"),
        )
        with pytest.raises(ValueError, match="session_id"):
            await gate.pass_through(ctx("", customer, db), reply, CountingRefiner(None))
        outcome = await gate.pass_through(
            ctx("", customer, db), reply, CountingRefiner(None), where=EscalationContext(session_id="s-1")
        )
        assert outcome.first_pass_compliant and outcome.holding
        item = queue.get(outcome.escalation_id)
        assert item.source == "live" and RiskFactor.DB_TRANSFER in item.risk_factors


def test_novelty_only_compares_against_what_was_committed() -> None:
    detector = NoveltyDetector(build_embedder("hashing", dimension=256), threshold=0.5, warmup=2)
    familiar = ["Drawdown keeps your pension invested.", "An annuity pays an income for life."]
    assert not any(detector.is_novel(t) for t in familiar)  # nothing known yet: the warm-up
    assert detector.commit() == 2
    assert not detector.is_novel("Drawdown keeps your pension invested and you take income.")
    assert detector.is_novel("Quantum bananas orbit the ledger at midnight.")
    # Unknown until committed, then known: consultations of one day cannot influence each other.
    assert detector.is_novel("Quantum bananas orbit the ledger at midnight.")
    detector.commit()
    assert not detector.is_novel("Quantum bananas orbit the ledger at midnight.")


async def test_a_novel_compliant_reply_goes_to_a_human() -> None:
    config = ValidatorConfig(mode="rules", holding_reply=HOLDING, novelty_threshold=0.5, novelty_warmup=1)
    validator = build_validator(config, KB, None, build_embedder("hashing", dimension=256))
    first = await validator.validate(ctx(GOOD))
    assert first.compliant and not first.escalate
    validator.commit_seen()
    assert not (await validator.validate(ctx(GOOD))).escalate
    odd = "Thank you for asking. Penguins and velvet curtains are lovely this time of year."
    result = await validator.validate(ctx(odd, customer="Hello, nice to meet you."))
    assert result.compliant and result.escalate
    assert "unlike any utterance validated before" in result.escalation_reasons
