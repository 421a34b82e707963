"""Task classification: the LLM task, and the keyword classifier that answers when it cannot."""

from __future__ import annotations

import pytest

from casebase.classify import KeywordClassifier, TaskClassifier, task_type_catalogue
from casebase.models import TASK_TYPES
from casebase.scripted import register_casebase_handlers
from casebase.tasks import CLASSIFY_TASK, PROMPTS_DIR
from simulacra.llm.client import ChainLink, LLMClient
from simulacra.llm.errors import FailureKind, LLMError
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers.scripted import ScriptedCall, ScriptedHandlers, ScriptedProvider
from tests.casebase.conftest import scripted_llm


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("I have four old pots from different jobs, should I combine them?", "consolidation"),
        (
            "How much should I pay in to my workplace pension to get the employer match?",
            "contribution_planning",
        ),
        ("Is drawdown or an annuity better for taking an income?", "drawdown"),
        ("Will I pay income tax on my pension withdrawal?", "tax"),
        ("When can I retire and what is my State Pension age?", "retirement_age"),
        ("Someone cold called me about a free pension review with guaranteed returns", "risk_assessment"),
    ],
)
def test_keyword_classifier_reads_ordinary_questions(query: str, expected: str) -> None:
    result = KeywordClassifier().classify(query)
    assert result.task_type == expected
    assert result.method == "keywords" and 0 < result.confidence <= 1


def test_keyword_classifier_uses_its_default_when_nothing_matches() -> None:
    result = KeywordClassifier(default="tax").classify("hello there")
    assert (result.task_type, result.confidence) == ("tax", 0.0)


def test_keyword_matching_respects_word_boundaries() -> None:
    # "tax" must not match inside "taxi", nor "risk" inside "brisket".
    assert KeywordClassifier().scores("my taxi and brisket")["tax"] == 0


def test_catalogue_covers_every_task_type() -> None:
    assert tuple(task_type_catalogue()) == TASK_TYPES


async def test_llm_classification_is_used_when_it_answers() -> None:
    classifier = TaskClassifier(scripted_llm())
    result = await classifier.classify("Is drawdown or an annuity better for taking an income?")
    assert (result.task_type, result.method) == ("drawdown", "llm")
    assert classifier.fallbacks == 0


async def test_a_failing_llm_falls_back_to_keywords() -> None:
    def overloaded(call: ScriptedCall):
        raise LLMError(FailureKind.OVERLOADED, "model overloaded")

    handlers = ScriptedHandlers()
    handlers.register(CLASSIFY_TASK.name, overloaded)
    llm = LLMClient([ChainLink(ScriptedProvider(handlers), attempts=1)], PromptLibrary([PROMPTS_DIR]))
    classifier = TaskClassifier(llm)
    result = await classifier.classify("Will I pay income tax on my pension withdrawal?")
    assert (result.task_type, result.method) == ("tax", "keywords")
    assert "LLM classifier failed" in result.reason and "overloaded" in result.reason
    assert classifier.fallbacks == 1


async def test_no_llm_means_keywords() -> None:
    classifier = TaskClassifier(None)
    result = await classifier.classify("When can I retire?")
    assert (result.task_type, result.method) == ("retirement_age", "keywords")


async def test_scripted_classifier_slips_at_its_configured_rate() -> None:
    llm = scripted_llm(behaviour={"classify_wrong": 1.0})
    result = await TaskClassifier(llm).classify("Will I pay income tax on my pension withdrawal?")
    assert result.method == "llm" and result.task_type != "tax"


def test_handlers_register_once_per_task() -> None:
    handlers = ScriptedHandlers()
    register_casebase_handlers(handlers)
    assert CLASSIFY_TASK.name in handlers
    with pytest.raises(ValueError):
        handlers.register(CLASSIFY_TASK.name, lambda call: "other")
