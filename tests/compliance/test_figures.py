"""Money amounts found alone are exactly the money figures `extract_figures` finds."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from compliance.figures import extract_figures, money_amounts
from compliance.models import load_dataset
from compliance.text import normalise

DEV = Path(__file__).resolve().parents[2] / "compliance" / "data" / "dev.jsonl"


def _money(text: str) -> list[float]:
    return [f.value for f in extract_figures(text) if f.kind == "money"]


def test_money_amounts_are_the_money_figures() -> None:
    assert money_amounts("£268,275 or 25%, at 55, from 2028; £1.07 million and 500 quid") == [
        268275.0,
        1070000.0,
        500.0,
    ]
    assert money_amounts("no figure here") == []
    assert money_amounts("pounds and quid but no number") == []
    assert money_amounts("25% at 55 in 2028") == []


def test_money_amounts_agree_on_every_development_text() -> None:
    found = 0
    for case in load_dataset(DEV):
        for raw in (case.customer_utterance, case.advisor_utterance):
            text = normalise(raw)
            assert money_amounts(text) == _money(text), text
            found += bool(money_amounts(text))
    assert found > 100


_PIECES = st.sampled_from(
    [
        "£",
        "£ ",
        "5",
        "30",
        ",000",
        ".5",
        ".50",
        " k",
        "k",
        " million",
        "m",
        " pounds",
        " quid",
        "%",
        " ",
        ".",
        "x",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, min_size=0, max_size=12))
def test_money_amounts_agree_on_any_text(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert money_amounts(text) == _money(text)
