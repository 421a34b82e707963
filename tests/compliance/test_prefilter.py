"""Literal pre-filters: derived from the patterns, and never changing what a pattern finds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compliance.knowledge.prefilter import (
    FilteredPattern,
    LiteralScanner,
    ScannedUnion,
    SliceGate,
    distribute,
    fast_form,
    literal_first,
    relax,
    required_literals,
    skipping_suffix,
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


# --- the one-pass literal scanner and the rewritten branches ------------------------------------

DEV = Path(__file__).resolve().parents[2] / "compliance" / "data" / "dev.jsonl"


def _dev_texts() -> list[tuple[str, list[str]]]:
    """Every third development case: each normalised text (and its unquoted form) with the parts
    the rules search in it (sentences, clauses, cut-off prefixes)."""
    out: list[tuple[str, list[str]]] = []
    for line in DEV.read_text(encoding="utf-8").splitlines()[::3]:
        case = json.loads(line)
        for raw in (case["advisor_utterance"], case["customer_utterance"]):
            for text in {normalise(raw), strip_quotes(normalise(raw))}:
                parts = [text]
                for sentence in sentences(text):
                    parts += [sentence, *clauses(sentence), sentence[: len(sentence) // 2]]
                out.append((text, parts))
    return out


def _kb_patterns() -> list[FilteredPattern]:
    knowledge = kb()
    patterns = [lexicon.regex for lexicon in knowledge.lexicons.values()]
    patterns += [p.regex for p in knowledge.language_patterns]
    patterns += [p.unless for p in knowledge.language_patterns if p.unless is not None]
    patterns += [c.regex for c in knowledge.false_claims]
    patterns += [c.regex for c in knowledge.figure_concepts]
    patterns += [f.regex for f in knowledge.scam_red_flags]
    return patterns


def _spans(matches) -> list[tuple[int, int]]:
    return [m.span() for m in matches]


def test_the_scanner_finds_exactly_the_branches_whose_literals_occur() -> None:
    # The candidate set one scan gives every pattern is the one testing each branch's literals
    # with `in` gives: the scan replaces those tests (and the per-pattern gate regexes).
    scanner = LiteralScanner()
    bound = [scanner.bind(p) for p in _kb_patterns()]
    for text, _parts in _dev_texts()[::4]:
        scan = scanner.scan(text)
        for scanned in bound:
            want = sum(
                1 << i
                for i, literals in enumerate(scanned.pattern.branch_literals)
                if literals is None or any(literal in text for literal in literals)
            )
            assert scanned.branches(scan) == want, (scanned.pattern.pattern[:60], text)


def test_scanned_patterns_find_exactly_what_the_full_patterns_find() -> None:
    # A scan of a text serves every part of it (sentence, clause, prefix): the candidate branches
    # find what the whole alternation finds, for search, finditer and sub.
    scanner = LiteralScanner()
    bound = [scanner.bind(p) for p in _kb_patterns()]
    for text, parts in _dev_texts():
        scan = scanner.scan(text)
        for scanned in bound:
            full = scanned.pattern.full
            for part in parts:
                got, want = scanned.search(part, scan), full.search(part)
                assert (got and got.span()) == (want and want.span()), (scanned.pattern.pattern[:60], part)
                if want is not None:
                    assert _spans(scanned.finditer(part, scan)) == _spans(full.finditer(part))
                    assert scanned.sub("#", part, scan) == full.sub("#", part)
            assert scanned.may_match(scan) or full.search(text) is None


def test_a_scan_from_another_scanner_falls_back_to_the_patterns_own_gate() -> None:
    pattern = FilteredPattern([r"\bshould i\b", r"\bwhat do you\b"])
    mine, other = LiteralScanner(), LiteralScanner()
    scanned = mine.bind(pattern)
    other.bind(FilteredPattern([r"\bunrelated\b"]))
    text = "so what do you think, should i?"
    assert scanned.search(text, other.scan(text)).span() == pattern.full.search(text).span()
    assert scanned.search(text, None).span() == pattern.full.search(text).span()
    assert scanned.search("nothing here", mine.scan("nothing here")) is None


def test_binding_a_pattern_twice_shares_its_bits() -> None:
    scanner = LiteralScanner()
    pattern = FilteredPattern([r"\bshould i\b"])
    first, second = scanner.bind(pattern), scanner.bind(pattern)
    scan = scanner.scan("should i?")
    assert first.branches(scan) == second.branches(scan) == 1


def test_literal_first_moves_the_boundary_behind_the_first_character() -> None:
    assert literal_first(r"\bshould i\b") == r"s(?<=\bs)hould i\b"
    assert literal_first(r"\b(?:i|we) can\b") == r"(?:i(?<=\bi)|w(?<=\bw)e) can\b"
    assert (
        literal_first(r"\b(?P<lead>age|at) (?P<num>\d+)") == r"(?P<lead>a(?<=\ba)ge|a(?<=\ba)t) (?P<num>\d+)"
    )
    # Nothing to move: a class, a quantified first character or group, or no leading boundary.
    for branch in [r"\b\d+", r"\bs?x", r"\b(?:a|b)?c", r"(?:^|, )x", r"\b(?=x)y"]:
        assert literal_first(branch) == branch


def test_distribute_splits_an_opening_anchor_group() -> None:
    assert distribute(r"(?:^|, )(?:take|cash) it") == [r"^(?:take|cash) it", r", (?:take|cash) it"]
    assert distribute(r"(?:a|b)c") == [r"(?:a|b)c"]
    assert distribute(r"(?:^|, )?x") == [r"(?:^|, )?x"]


def test_rewritten_branches_match_exactly_where_the_originals_do() -> None:
    # Every branch of the knowledge base, in the form the prefilter runs it, against the original.
    pairs = [(branch, pattern.flags) for pattern in _kb_patterns() for branch in pattern.branches]
    texts = [part for _text, parts in _dev_texts()[::3] for part in parts[:3]]
    checked = 0
    for branch, flags in pairs:
        original = re.compile(branch, flags)
        rewritten = [re.compile(fast_form(part, flags), flags) for part in distribute(branch, flags)]
        if len(rewritten) == 1 and rewritten[0].pattern == branch:
            continue
        checked += 1
        for text in texts:
            want = _spans(original.finditer(text))
            got = sorted({span for regex in rewritten for span in _spans(regex.finditer(text))})
            if len(rewritten) == 1:
                assert _spans(rewritten[0].finditer(text)) == want, (branch[:60], text)
            else:  # the parts together match where the branch does
                assert set(want) <= set(got), (branch[:60], text)
    assert checked > 100


_REWRITE_WORDS = st.sampled_from(
    ["should", "i", "we", "can", "x", "age", "at", "55", ",", "'", "-", " ", "isn't"]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_REWRITE_WORDS, min_size=0, max_size=12).map("".join))
def test_literal_first_agrees_with_the_original_on_any_text(text: str) -> None:
    for branch in [r"\bshould i\b", r"\b(?:i|we) can\b", r"\b(?P<lead>age|at) (?P<num>\d+)", r"\b'x"]:
        original, rewritten = re.compile(branch), re.compile(literal_first(branch))
        assert _spans(rewritten.finditer(text)) == _spans(original.finditer(text))
    parts = [re.compile(p) for p in distribute(r"(?:^|, )(?:should|can) i\b")]
    merged = min((m for m in (p.search(text) for p in parts) if m), key=lambda m: m.start(), default=None)
    want = re.search(r"(?:^|, )(?:should|can) i\b", text)
    assert (merged and merged.span()) == (want and want.span())


def test_rules_find_the_same_with_and_without_the_shared_scanner() -> None:
    # The engine's analysis carries scans; one built without a scanner makes every pattern gate
    # itself. Every rule must report the same hits either way on the development set.
    from compliance.models import load_dataset
    from compliance.rules import Analysis
    from tests.compliance.rulekit import engine

    rules_engine = engine()
    plain_reported = kb().lexicon("reported_speech").regex
    for case in load_dataset(DEV)[::2]:
        ctx = case.context()
        scanned, unscanned = rules_engine.analyse(ctx), Analysis(ctx, plain_reported)
        assert unscanned.advisor_scan is None
        for rule in rules_engine.rules:
            assert rule.check(scanned) == rule.check(unscanned), (rule.rule_id, case.id)


# --- slice gates: one search of a whole text rules out every part of it -------------------------


def test_relax_drops_every_assertion_and_keeps_what_is_consumed() -> None:
    assert relax(r"\bshould i\b") == "should i"
    assert relax(r"(?:^|, )go for\b(?! it)") == "(?:|, )go for"
    assert relax(r"s(?<=\bs)hould$") == "should"
    # Classes and escaped backslashes are copied as they are ([^...] and [\b] are no assertions).
    assert relax(r"[^\]a]b\Z") == r"[^\]a]b"
    assert relax(r"\\b[\b]x") == r"\\b[\b]x"
    # An assertion under a quantifier, a conditional or a group reference: not relaxed.
    for pattern in [r"\b?x", r"a(?=b)?", r"(a)?(?(1)b|c)", r"(a)\1", r"(?x) a # b"]:
        assert relax(pattern) is None


def test_skipping_suffix_is_the_longest_tail_that_opens_with_a_few_characters() -> None:
    pattern = "(?:the |your )?(?:most )?(?:best|right|ideal) (?:option|choice) for (?:you|people like you)"
    assert skipping_suffix(pattern) == "(?:best|right|ideal) (?:option|choice) for (?:you|people like you)"
    assert skipping_suffix(r"(?:(?:so|just)\W+)*(?:take|cash) it") == "(?:take|cash) it"
    assert skipping_suffix("should") == "should"
    # A tail opening with a space (everywhere), none at all, or one that could start inside an
    # escape or lose an inline flag: none.
    assert skipping_suffix(r"\w+ (?:a|b|c|d|e|f)x") is None
    assert skipping_suffix(r"a\x41b") is None
    assert skipping_suffix("(?i)abc") is None
    assert skipping_suffix("ab|cd") is None


def test_a_slice_gate_never_rules_out_a_text_with_a_matching_part() -> None:
    # Every knowledge-base pattern, every development text and the parts the rules search in it:
    # wherever the pattern matches a part, its gate lets the whole text through.
    scanner = LiteralScanner()
    bound = [scanner.bind(p) for p in _kb_patterns()]
    gates = [SliceGate(scanned) for scanned in bound]
    ruled_out = 0
    for text, parts in _dev_texts():
        scan = scanner.scan(text)
        for scanned, gate in zip(bound, gates, strict=True):
            allowed = gate.may_match(text, scan)
            assert allowed == gate.may_match(text, scan)  # no state kept between calls
            if not allowed:
                full = scanned.pattern.full
                assert not any(full.search(part) for part in parts), (scanned.pattern.pattern[:60], text)
                ruled_out += scanned.may_match(scan)
            # Without a scan of its scanner the gate falls back to the pattern's literal gate.
            assert gate.may_match(text, None) or scanned.pattern.full.search(text) is None
    # The gates do rule out texts the literal scan alone lets through (or they would be useless).
    assert ruled_out > 100


_SLICE_WORDS = st.sampled_from(
    ["take it", "the best option for you", "best", "it", "so", ",", ".", " ", "'", "x"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_SLICE_WORDS, min_size=0, max_size=10), st.integers(0, 10), st.integers(0, 10))
def test_a_slice_gate_agrees_on_any_text_and_slice(words: list[str], start: int, stop: int) -> None:
    scanner = LiteralScanner()
    pattern = FilteredPattern(
        [r"(?:^|, )(?:so\W+)*take it\b", r"\bthe best option for you\b(?!\w)", r"(?<![a-z])best\b", r"^it$"]
    )
    scanned = scanner.bind(pattern)
    gate = SliceGate(scanned)
    text, part = "".join(words), "".join(words[start:stop])
    if pattern.full.search(part):
        assert gate.may_match(text, scanner.scan(text)), (text, part)


_TAIL_WORDS = st.sampled_from(
    ["the ", "government", "government's ", "pension", " guidance", "pension wise", "free ", "x", " ", "."]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TAIL_WORDS, min_size=0, max_size=12), st.integers(0, 12), st.integers(0, 12))
def test_a_branch_dropped_for_its_missing_tail_changes_no_match(
    words: list[str], start: int, stop: int
) -> None:
    # "\b(?:the )?government..." cannot skip ahead (it is tried at every position) and is a
    # candidate wherever "pension" occurs; its tail "government..." is searched first, and the
    # branch dropped where that is missing. Search and finditer still find what the full
    # alternation finds, in the scanned text and in any part of it.
    scanner = LiteralScanner()
    pattern = FilteredPattern(
        [
            r"\bpension ?wise\b",
            r"\b(?:the )?government'?s? (?:free )*pensions? guidance\b",
            r"(?:(?:so|just)\W+)*(?:x|free) pension\b",
        ]
    )
    assert pattern._tailed == 0b110  # the two branches that do not skip ahead have tails
    scanned = scanner.bind(pattern)
    text, part = "".join(words), "".join(words[start:stop])
    scan = scanner.scan(text)
    for piece in (text, part):
        got, want = scanned.search(piece, scan), pattern.full.search(piece)
        assert (got and got.span()) == (want and want.span())
        assert _spans(scanned.finditer(piece, scan)) == _spans(pattern.full.finditer(piece))


def test_a_union_rules_out_a_text_only_when_every_pattern_has_no_candidate() -> None:
    scanner = LiteralScanner()
    bound = [scanner.bind(p) for p in _kb_patterns()]
    groups = [bound[i : i + 7] for i in range(0, len(bound), 7)]
    unions = [ScannedUnion(group) for group in groups]
    ruled_out = 0
    for text, parts in _dev_texts()[::2]:
        scan = scanner.scan(text)
        for group, union in zip(groups, unions, strict=True):
            assert union.may_match(scan) == any(p.may_match(scan) for p in group)
            if not union.may_match(scan):
                ruled_out += 1
                assert not any(p.pattern.full.search(part) for p in group for part in parts)
    assert ruled_out > 50
    # A branch with no literal (or tied by a group reference) runs whatever the scan: never ruled out.
    always = ScannedUnion([scanner.bind(FilteredPattern([r"\bzzz\b", r"\b\w\b"]))])
    assert always.may_match(scanner.scan("nothing scanned here"))
    tied = ScannedUnion([scanner.bind(FilteredPattern.of(r"(?P<w>qqq)|xxx (?P=w)"))])
    assert tied.may_match(scanner.scan("no literal"))


def test_a_union_without_a_scan_of_its_scanner_rules_nothing_out() -> None:
    mine, other = LiteralScanner(), LiteralScanner()
    union = ScannedUnion([mine.bind(FilteredPattern([r"\bshould i\b"]))])
    other.bind(FilteredPattern([r"\bunrelated\b"]))
    assert union.may_match(None) and union.may_match(other.scan("unrelated"))
    assert not union.may_match(mine.scan("nothing here"))
    with pytest.raises(ValueError, match="one scanner"):
        ScannedUnion([mine.bind(FilteredPattern(["abc"])), other.bind(FilteredPattern(["def"]))])


def test_the_branches_a_slice_gate_keeps_find_what_the_full_pattern_finds_in_every_part() -> None:
    # The gate searches the whole text once per candidate branch; running only the branches it
    # keeps in any part of the text (a sentence, a clause) finds what the whole alternation finds.
    scanner = LiteralScanner()
    bound = [scanner.bind(p) for p in _kb_patterns()]
    gates = [SliceGate(scanned) for scanned in bound]
    narrowed = 0
    for text, parts in _dev_texts()[::2]:
        scan = scanner.scan(text)
        for scanned, gate in zip(bound, gates, strict=True):
            kept = gate.branches(text, scan)
            assert kept is not None
            assert bool(kept) == gate.may_match(text, scan)
            narrowed += kept != scanned.branches(scan)
            full = scanned.pattern.full
            for part in parts:
                assert _spans(scanned.finditer_branches(part, kept)) == _spans(full.finditer(part))
    assert narrowed > 100
    # Without a scan of its scanner the gate keeps nothing it could vouch for.
    assert gates[0].branches("any text", None) is None


def test_found_says_whether_search_finds_a_match_in_every_part() -> None:
    scanner = LiteralScanner()
    bound = [scanner.bind(p) for p in _kb_patterns()]
    found = 0
    for text, parts in _dev_texts()[::2]:
        scan = scanner.scan(text)
        for scanned in bound:
            full = scanned.pattern.full
            for part in parts:
                want = full.search(part) is not None
                assert scanned.found(part, scan) == want, (scanned.pattern.pattern[:60], part)
                found += want
            assert scanned.found(text, None) == (full.search(text) is not None)
    assert found > 1000


def test_scan_bits_tell_what_may_match_tells() -> None:
    scanner = LiteralScanner()
    bound = [scanner.bind(p) for p in _kb_patterns()]
    for text, _parts in _dev_texts()[::6]:
        scan = scanner.scan(text)
        for scanned in bound:
            assert scanned.may_match(scan) == (scanned.runs_always or bool(scan.mask & scanned.scan_bits))
