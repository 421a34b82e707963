"""Judges, their consensus, and the scripted judge's behaviour."""

from __future__ import annotations

import asyncio

import pytest

from compliance.config import PROMPTS_DIR, JudgeConfig, ValidatorConfig, build_judge_panel
from compliance.judges import JudgeRecord, JudgeVerdict, consensus
from compliance.scripted import register_compliance_handlers
from simulacra.llm.config import LLMConfig
from simulacra.llm.errors import ConfigurationError
from simulacra.llm.providers.scripted import ScriptedHandlers

SCRIPTED = LLMConfig(name="scripted", chain=[{"provider": "scripted", "model": "scripted-v1"}])


def scripted_llm(**behaviour: float) -> LLMConfig:
    return LLMConfig.model_validate({**SCRIPTED.model_dump(), "scripted": {"behaviour": behaviour}})


def record(passed: bool | None, confidence: float = 0.9, codes: tuple[str, ...] = ()) -> JudgeRecord:
    verdict = (
        None if passed is None else JudgeVerdict(passed=passed, confidence=confidence, codes=list(codes))
    )
    return JudgeRecord(
        judge_id="j",
        vendor="v",
        model="m",
        prompt_version="v1",
        verdict=verdict,
        error=None if verdict else "failed",
    )


def test_two_of_three_majority_with_confidence_averaged_over_the_majority() -> None:
    result = consensus(
        [
            record(False, 0.8, ("PERSONAL_RECOMMENDATION",)),
            record(False, 0.6, ("PERSONAL_RECOMMENDATION", "FALSE_CERTAINTY")),
            record(True, 0.99),
        ]
    )
    assert result.passed is False and not result.unanimous
    assert result.confidence == pytest.approx(0.7)
    assert result.codes == ["FALSE_CERTAINTY", "PERSONAL_RECOMMENDATION"]
    assert (result.votes_for, result.votes_against) == (1, 2)


def test_unanimous_pass_has_no_codes() -> None:
    result = consensus([record(True, 0.9), record(True, 0.95), record(True, 1.0)])
    assert result.passed and result.unanimous and result.codes == []
    assert result.confidence == pytest.approx(0.95)


def test_a_tie_after_a_failed_judge_is_resolved_towards_caution() -> None:
    result = consensus([record(True, 0.9), record(False, 0.9, ("MISSING_RISK_DISCLOSURE",)), record(None)])
    assert result.passed is False and result.failed == 1


def test_no_usable_verdict_decides_nothing() -> None:
    result = consensus([record(None), record(None)])
    assert result.passed is None and result.confidence == 0.0


def handlers() -> ScriptedHandlers:
    h = ScriptedHandlers()
    register_compliance_handlers(h)
    return h


def judge_vars(findings: list[str], kinds: list[str] | None = None) -> dict:
    return {
        "customer": {"age": 60, "pots": [], "situation": "", "literacy": "medium", "vulnerable": False},
        "customer_utterance": "what are my options?",
        "history": [],
        "facts": {},
        "figures": {},
        "tax_year": "2026/27",
        "rule_findings": [{"code": c, "rule": "r", "message": "m"} for c in findings],
        "advisor_utterance": "reply",
        "annotations": {"segment_kinds": kinds or []},
    }


def test_scripted_panel_flags_what_the_rules_and_segments_show() -> None:
    config = ValidatorConfig(
        mode="production",
        threshold=0.9,
        holding_reply="wait",
        judges=[JudgeConfig(id=f"j{i}", prompt_version=v) for i, v in enumerate(["v1", "v2", "v1"])],
    )
    quiet = scripted_llm(judge_error=0.0)
    panel = build_judge_panel(config, quiet, handlers=handlers(), seed=0)
    assert panel is not None and {j.task.version for j in panel.judges} == {"v1", "v2"}
    bad, records = asyncio.run(panel.assess(judge_vars(["MISSING_RISK_DISCLOSURE"], ["recommendation"])))
    assert bad.passed is False and bad.unanimous
    assert bad.codes == ["MISSING_RISK_DISCLOSURE", "PERSONAL_RECOMMENDATION"]
    assert all(r.vendor == "scripted" and r.verdict is not None for r in records)
    good, _ = asyncio.run(panel.assess(judge_vars([])))
    assert good.passed and good.confidence > 0.8


def test_noisy_judges_sometimes_disagree_and_lose_confidence() -> None:
    noisy = scripted_llm(judge_error=0.5)
    config = ValidatorConfig(
        mode="production",
        threshold=0.9,
        holding_reply="wait",
        judges=[JudgeConfig(id=f"j{i}", prompt_version=v) for i, v in enumerate(["v1", "v2", "v1"])],
    )
    results = []
    for seed in range(30):
        panel = build_judge_panel(config, noisy, handlers=handlers(), seed=seed)
        results.append(asyncio.run(panel.assess(judge_vars(["MISSING_PENSION_WISE_NUDGE"])))[0])
    assert any(not r.unanimous for r in results)
    assert any(r.confidence < 0.9 for r in results)


def test_production_panel_from_one_real_vendor_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    openai = LLMConfig(
        name="openai", chain=[{"provider": "openai", "model": "gpt-a", "api_key_env": "OPENAI_API_KEY"}]
    )
    config = ValidatorConfig(
        mode="production",
        threshold=0.9,
        holding_reply="wait",
        judges=[JudgeConfig(id="a"), JudgeConfig(id="b", prompt_version="v2")],
    )
    with pytest.raises(ConfigurationError, match="at least two vendors"):
        build_judge_panel(config, openai, handlers=handlers(), seed=0)


def test_judge_prompts_render_with_the_variables_given() -> None:
    from compliance.judges import judge_task
    from simulacra.llm.prompts import PromptLibrary

    library = PromptLibrary([PROMPTS_DIR])
    for version in ("v1", "v2"):
        messages = library.render(judge_task(version), judge_vars(["FALSE_CERTAINTY"]))
        assert "FALSE_CERTAINTY" in messages[1].content and "reply" in messages[1].content
