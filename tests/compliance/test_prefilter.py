"""Literal pre-filters: derived from the patterns, and never changing what a pattern finds."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from compliance.knowledge.prefilter import (
    FilteredPattern,
    required_literals,
    split_alternation,
    trie_pattern,
)
from compliance.text import clauses, normalise, sentences, strip_quotes
from tests.compliance.rulekit import kb

HOLDOUT = Path(__file__).resolve().parents[2] / "compliance" / "data" / "holdout.jsonl"


def test_required_literals_come_from_the_pattern() -> None:
    assert required_literals(r"\bshould i\b") == {"should i"}
    assert required_literals(r"\bwhat (?:should|would) i do\b") == {"what should i do", "what would i do"}
    assert required_literals(r"\btransfer\w*") == {"transfer"}
    # An optional part adds nothing required; a class of a few characters is spelt out.
    assert required_literals(r"\bfinal[- ]salary\b") == {"final salary", "final-salary"}
    assert required_literals(r"\bcan(?:not|'t)? lose\b") == {"can lose", "cannot lose", "can't lose"}


def test_no_literals_when_a_match_may_hold_none() -> None:
    assert required_literals(r"\b\d{2,3}\b") is None
    assert required_literals(r"\bi\b") is None  # too short to be worth testing
    assert required_literals(r"(?i)pension") is None  # case-insensitive patterns are not filtered
    assert required_literals("pension", re.IGNORECASE) is None
    # Where one branch can be anything, the part every match still needs is what is required.
    assert required_literals(r"(?:foo|\w+) bar") == {" bar"}


def test_split_alternation_only_splits_at_the_top_level() -> None:
    assert split_alternation(r"a|b(?:c|d)|[|]e|\|f") == ["a", "b(?:c|d)", "[|]e", r"\|f"]
    assert split_alternation("abc") == ["abc"]


def test_trie_pattern_matches_exactly_the_literals() -> None:
    literals = {"should i", "shall", "what do", "what would", "whatever"}
    trie = re.compile(trie_pattern(literals))
    for literal in literals:
        assert trie.search(f"x {literal} y")
    for text in ["shoul", "sha", "what", "wha do", "would"]:
        assert trie.search(text) is None


def _corpus() -> list[str]:
    texts: set[str] = set()
    # Every other held-out case, with its sentences, clauses and some cut-off prefixes (the rules
    # also search slices of a sentence).
    for line in HOLDOUT.read_text(encoding="utf-8").splitlines()[::2]:
        case = json.loads(line)
        for raw in (case["advisor_utterance"], case["customer_utterance"]):
            text = normalise(raw)
            texts |= {text, strip_quotes(text)}
            for sentence in sentences(text):
                texts.add(sentence)
                texts.update(clauses(sentence))
                texts.update(sentence[:cut] for cut in range(0, len(sentence), 37))
    return sorted(texts)


def test_filtered_patterns_find_exactly_what_the_full_patterns_find() -> None:
    knowledge = kb()
    patterns = [lexicon.regex for lexicon in knowledge.lexicons.values()]
    patterns += [p.regex for p in knowledge.language_patterns]
    patterns += [c.regex for c in knowledge.false_claims]
    patterns += [c.regex for c in knowledge.figure_concepts]
    patterns += [f.regex for f in knowledge.scam_red_flags]
    assert all(isinstance(p, FilteredPattern) for p in patterns)
    corpus = _corpus()
    for pattern in patterns:
        for text in corpus:
            got, want = pattern.search(text), pattern.full.search(text)
            assert (got and got.span()) == (want and want.span()), (pattern.pattern[:60], text)
            if want:
                spans = [m.span() for m in pattern.finditer(text)]
                assert spans == [m.span() for m in pattern.full.finditer(text)]
                assert pattern.sub("#", text) == pattern.full.sub("#", text)
    # Most patterns have a gate, and the gate does skip texts (or there would be no speed-up).
    gated = [p for p in patterns if not p.ungated]
    assert len(gated) > 0.9 * len(patterns)
    assert sum(not p.may_match(text) for p in gated for text in corpus[:200]) > 0


_WORDS = st.sampled_from(
    ["should", "i", "you", "transfer", "drawdown", "take", "it", "the", "best", "for", "what", "do", "'"]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_WORDS, min_size=0, max_size=12).map(" ".join))
def test_a_filtered_pattern_agrees_with_its_full_pattern_on_any_text(text: str) -> None:
    pattern = FilteredPattern(
        [r"\bshould i\b", r"\btransfer\w*", r"\bthe best (?:option )?for you\b", r"^take it\b", r"\bi\b"]
    )
    want = pattern.full.search(text)
    got = pattern.search(text)
    assert (got and got.span()) == (want and want.span())
    gated_only = FilteredPattern([r"\bshould i\b", r"\bwhat do you\b"])
    assert gated_only.may_match(text) or gated_only.full.search(text) is None
