"""Context budgeting: per-section budgets hold, the lowest-scoring items go first, nothing is lost."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from simulacra.context import (
    SECTIONS,
    ContextAssembler,
    ContextBudget,
    ContextItem,
    approx_tokens,
    assemble,
    fit_section,
)


def item(id_: str, chars: int, score: float) -> ContextItem:
    return ContextItem(id=id_, text="x" * chars, score=score)


def test_approx_tokens_is_four_characters_a_token_rounded_up() -> None:
    assert approx_tokens("") == 0
    assert approx_tokens("abcd") == 1
    assert approx_tokens("abcde") == 2
    assert approx_tokens("a" * 400) == 100


def test_lowest_scoring_items_are_dropped_first_and_kept_items_keep_their_order() -> None:
    items = [item("a", 40, 0.9), item("b", 40, 0.1), item("c", 40, 0.5), item("d", 40, 0.7)]
    section = fit_section("memories", items, budget=25)  # room for two 10-token items
    assert section.kept_ids == ["a", "d"]
    assert section.dropped_ids == ["b", "c"]
    assert section.used_tokens == 20


def test_a_small_low_scoring_item_is_not_kept_over_a_dropped_better_one() -> None:
    items = [item("big", 400, 0.9), item("small", 4, 0.1)]
    section = fit_section("extra", items, budget=50)
    assert section.kept_ids == []
    assert section.dropped_ids == ["small", "big"]


def test_ties_drop_the_later_item() -> None:
    items = [item("first", 40, 0.5), item("second", 40, 0.5)]
    assert fit_section("memories", items, budget=10).kept_ids == ["first"]


def test_each_section_has_its_own_budget_and_the_report_lists_kept_and_dropped() -> None:
    budget = ContextBudget(system=100, profile=5, memories=20, extra=10, domain_rules=0, generation=50)
    context = assemble(
        {
            "system": [item("sys", 80, 1.0)],
            "profile": [item("p1", 40, 1.0)],
            "memories": [item("m1", 40, 0.3), item("m2", 40, 0.8), item("m3", 40, 0.6)],
            "extra": [item("case", 40, 0.2), item("rule", 20, 0.4)],
        },
        budget,
    )
    assert context.kept_ids() == {
        "system": ["sys"],
        "profile": [],
        "memories": ["m2", "m3"],
        "extra": ["rule"],
    }
    assert context.dropped_ids() == {"system": [], "profile": ["p1"], "memories": ["m1"], "extra": ["case"]}
    assert context.prompt_tokens == 20 + 20 + 5
    assert context.generation_tokens == 50
    assert context.section("domain_rules").kept == []
    assert set(context.texts()) == set(SECTIONS)


def test_token_counter_is_injectable() -> None:
    words = ContextAssembler(ContextBudget(memories=3), count=lambda text: len(text.split()))
    context = words.assemble(
        {
            "memories": [
                ContextItem(id="a", text="one two", score=0.2),
                ContextItem(id="b", text="three", score=0.9),
                ContextItem(id="c", text="four five", score=0.5),
            ]
        }
    )
    assert context.section("memories").kept_ids == ["b", "c"]


def test_unknown_sections_and_bad_budgets_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown context section 'cases'"):
        assemble({"cases": []})
    with pytest.raises(ValueError, match="unknown context section 'generation'"):
        assemble({"generation": []})
    with pytest.raises(ValidationError):
        ContextBudget(memories=-1)
    with pytest.raises(ValidationError):
        ContextBudget.model_validate({"memory": 10})


items_strategy = st.lists(
    st.builds(
        lambda n, score: (n, score),
        st.integers(min_value=0, max_value=200),
        st.floats(min_value=-1.0, max_value=1.0, allow_nan=False),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(
    sections=st.dictionaries(st.sampled_from(SECTIONS), items_strategy, max_size=len(SECTIONS)),
    budgets=st.lists(st.integers(min_value=0, max_value=300), min_size=len(SECTIONS), max_size=len(SECTIONS)),
)
def test_budget_properties(sections: dict[str, list[tuple[int, float]]], budgets: list[int]) -> None:
    budget = ContextBudget(**dict(zip(SECTIONS, budgets, strict=True)))
    given_items = {
        name: [item(f"{name}-{i}", chars, score) for i, (chars, score) in enumerate(specs)]
        for name, specs in sections.items()
    }
    context = assemble(given_items, budget)
    for name, items in given_items.items():
        section = context.sections[name]
        costs = {it.id: approx_tokens(it.text) for it in items}
        # Every section fits its own budget, and the reported use is the real use.
        assert section.used_tokens == sum(costs[i] for i in section.kept_ids) <= budget.of(name)
        # Nothing is lost or duplicated; kept items keep their given order.
        assert sorted(section.kept_ids + section.dropped_ids) == sorted(it.id for it in items)
        order = [it.id for it in items]
        assert section.kept_ids == [i for i in order if i in set(section.kept_ids)]
        # Lowest score first: no dropped item outscores a kept one.
        if section.kept and section.dropped:
            assert max(d.score for d in section.dropped) <= min(k.score for k in section.kept)
        # Dropping stops as soon as the rest fits: putting back the last dropped would overflow.
        if section.dropped:
            assert section.used_tokens + costs[section.dropped[-1].id] > budget.of(name)
