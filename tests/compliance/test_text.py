"""Text preparation and figure extraction shared by the rules."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from compliance.figures import extract_figures
from compliance.text import advisor_clauses, clause_break, clauses, normalise, sentences, strip_quotes
from tests.compliance.rulekit import kb


def test_normalise_straightens_quotes_and_dashes() -> None:
    assert normalise("I\u2019d  say \u201cno\u201d \u2014 Thanks") == 'i\'d say "no" - thanks'


@given(
    st.lists(
        st.sampled_from(
            [
                "a",
                "B",
                " ",
                "  ",
                "\t",
                "\n",
                "\r",
                "\x0b",
                "\x1c",
                "\x1f",
                "\x7f",
                "\u00a0",
                "\u2014",
                "\u2003",
                "\u2019",
            ]
        ),
        max_size=12,
    ).map("".join)
)
def test_normalise_single_spaces_any_white_space(raw: str) -> None:
    # An already single-spaced ASCII text is only lower-cased; every other text is split and joined.
    plain = raw
    for fancy, simple in (("\u2019", "'"), ("\u2014", " - "), ("\u00a0", " ")):
        plain = plain.replace(fancy, simple)
    assert normalise(raw) == " ".join(plain.split()).lower()


def test_normalise_leaves_single_spaced_text_but_lower_case() -> None:
    assert normalise("Take 25% Now") == "take 25% now"
    assert normalise(" Take\tit\x1cnow ") == "take it now"


def test_strip_quotes_keeps_apostrophes_and_offsets() -> None:
    text = "your friend said 'take it all' and you don't agree"
    stripped = strip_quotes(text)
    assert len(stripped) == len(text)
    assert "take it all" not in stripped and "don't agree" in stripped
    assert "take" not in strip_quotes('he said "take it"')


def test_sentences_and_clauses() -> None:
    assert sentences("one. two? three!") == ["one.", "two?", "three!"]
    assert clauses("it can fall, but it could also rise; check the fees") == [
        "it can fall",
        "it could also rise",
        "check the fees",
    ]


def test_advisor_clauses_drop_reported_speech() -> None:
    reported = kb().lexicon("reported_speech").regex
    own = [
        c.text
        for c in advisor_clauses(
            normalise("Your neighbour said you should take it all. I can't say."), reported
        )
    ]
    assert own == ["i can't say."]


def test_extracts_money_percent_ages_and_years() -> None:
    figures = extract_figures(normalise("From age 55 you can take 25%, up to £268,275, since 6 April 2024."))
    kinds = [(f.kind, f.value) for f in figures]
    assert ("age", 55) in kinds and ("percent", 25) in kinds
    assert ("money", 268275) in kinds and ("year", 2024) in kinds


def test_special_forms() -> None:
    text = normalise("£1.4 million, £60k, a quarter, 2026/27, banned since 2015, and rises to 57.")
    values = {(f.kind, round(f.value, 2)) for f in extract_figures(text)}
    assert ("money", 1_400_000) in values and ("money", 60_000) in values
    assert ("percent", 25) in values and ("year", 2015) in values and ("age", 57) in values
    assert ("year", 2026) not in values  # a tax year is not a claim about a year


@given(st.integers(min_value=1, max_value=5_000_000))
def test_formatted_money_round_trips(value: int) -> None:
    found = extract_figures(normalise(f"That comes to £{value:,} in total."))
    assert [(f.kind, f.value) for f in found] == [("money", value)]


@given(st.integers(min_value=1, max_value=100))
def test_percentages_round_trip(value: int) -> None:
    assert [(f.kind, f.value) for f in extract_figures(f"about {value}% of it")] == [("percent", value)]


def test_sentences_keep_their_marks_and_split_at_line_breaks() -> None:
    assert sentences("a.\n\nb?!  c\nd") == ["a.", "b?!", "c", "d"]
    assert sentences("  ") == []
    assert normalise("No\u00a0rush\u2026 take\u2013it\u2018easy\u2019") == "no rush... take - it'easy'"


def test_half_is_a_figure() -> None:
    assert [f.value for f in extract_figures("half your pot can be taken tax-free")] == [50.0]


# The splitting and figure patterns are written so that `re` can skip ahead (opening with a
# character class or a literal, look-behinds moved after it). These are their plain forms: the
# rewritten ones must match exactly the same.
_PLAIN_FORMS = {
    "sentence end": (r"[.!?]\s+|\n+", "compliance.text", "_SENTENCE_END"),
    "clause break": (
        r"[;(),:\s](?:(?<=[;()])|(?<=:)\s|(?<=\s)-\s"
        r"|(?<=,)\s+(?:but|while|whereas|however,?|(?:al)?though|and|so)\s"
        r"|(?<=\s)\s*(?:but|while|whereas|however,?|(?:al)?though)\s)",
        "compliance.text",
        "_CLAUSE_BREAK",
    ),
    "percent": (
        r"(?<![\d.])(?P<num>\d{1,3}(?:\.\d+)?)\s?(?:%|per ?cent\b|percent\b)",
        "compliance.figures",
        "_PERCENT",
    ),
    "year": (
        r"(?<![£\d,./])\b(?P<year>19[5-9]\d|20[0-9]\d)\b(?!\s?/\s?\d)(?!%|\d|,\d)",
        "compliance.figures",
        "_YEAR",
    ),
}
_TEXT_PIECES = st.sampled_from(
    [
        " ",
        "  ",
        "\n",
        "\t",
        ".",
        "!",
        "?",
        ",",
        ";",
        ":",
        "(",
        ")",
        " - ",
        "-",
        "but",
        "and",
        "so",
        "although",
        "though",
        "however",
        "while",
        "whereas",
        "x",
        "1999",
        "2026",
        "25",
        "4.5",
        "%",
        " per cent",
        "£",
        "/",
    ]
)


@given(st.lists(_TEXT_PIECES, max_size=16).map("".join))
def test_rewritten_patterns_match_like_their_plain_forms(text: str) -> None:
    import importlib
    import re

    for plain, module, name in _PLAIN_FORMS.values():
        rewritten = getattr(importlib.import_module(module), name)
        want = [(m.span(), m.groupdict()) for m in re.finditer(plain, text)]
        assert [(m.span(), m.groupdict()) for m in rewritten.finditer(text)] == want, (name, text)


@given(st.lists(_TEXT_PIECES, max_size=16).map("".join))
def test_clause_break_chosen_for_a_sentence_breaks_it_as_the_full_pattern(text: str) -> None:
    import re

    plain = _PLAIN_FORMS["clause break"][0]
    want = [m.span() for m in re.finditer(plain, text)]
    assert [m.span() for m in clause_break(text).finditer(text)] == want, text
    assert clauses(text) == [c.strip() for c in re.split(plain, text) if c and c.strip()]


def test_sentences_without_dash_or_conjunction_break_at_punctuation_only() -> None:
    import re
    from pathlib import Path

    from compliance.models import load_dataset

    assert clauses("it is yours, so take care") == ["it is yours", "take care"]
    plain = re.compile(_PLAIN_FORMS["clause break"][0])
    dev = Path(__file__).resolve().parents[2] / "compliance" / "data" / "dev.jsonl"
    for case in load_dataset(dev):
        for sentence in sentences(normalise(case.advisor_utterance)):
            spans = [m.span() for m in clause_break(sentence).finditer(sentence)]
            assert spans == [m.span() for m in plain.finditer(sentence)], sentence
    sentence = "your pot (the dc one) is £40,000, and so: take care; it grows"
    assert clause_break(sentence).pattern.startswith("[;(),:]")
    assert clauses(sentence) == ["your pot", "the dc one", "is £40,000", "so", "take care", "it grows"]
    for sentence in ["it can fall - or rise", "it can fall, though rarely", "whereas the other"]:
        assert clause_break(sentence).pattern.startswith("[;(),:\\s]")
    assert clauses("it can fall, whereas cash, while safe, can't") == [
        "it can fall",
        "cash",
        "safe, can't",
    ]


def test_money_without_pound_words_runs_the_sign_branch_alone() -> None:
    for text in ["£1,200 and 30 pounds", "about £12.5k", "£300 a year", "3 quid"]:
        figures = [(f.kind, f.value, f.text) for f in extract_figures(text)]
        assert figures and all(kind == "money" for kind, _value, _text in figures)
    assert [f.value for f in extract_figures("£1,200 and 30 pounds")] == [1200.0, 30.0]
