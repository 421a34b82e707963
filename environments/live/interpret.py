"""Reading a real customer's message into what the advisor's turn needs to know.

The simulated customer says outright which topics it revealed and whether it asked for a
recommendation; a real customer just writes. These cues recover the same signals from the text.
They only ever make the advisor more careful (ask for the advice signpost, the DB warning, the
scam warning, plain words), never less, and the gate checks the reply whatever they find.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from environments.tasks import CustomerTurn

# Phrases (matched as lower-case substrings) that reveal a topic the advisor asks about.
TOPIC_CUES: dict[str, tuple[str, ...]] = {
    "other_pensions": (
        "other pension",
        "another pension",
        "pensions from old",
        "old job",
        "old employer",
        "previous employer",
        "two pensions",
        "three pensions",
        "several pensions",
    ),
    "db_scheme": (
        "final salary",
        "defined benefit",
        "db pension",
        "db scheme",
        "career average",
        "transfer value",
        "guaranteed pension",
    ),
    "scam_contact": (
        "cold call",
        "out of the blue",
        "free pension review",
        "pension review",
        "guaranteed return",
        "unlock my pension",
        "pension loan",
        "overseas investment",
        "contacted me about my pension",
        "someone called",
        "someone rang",
    ),
    "retirement_plans": ("retire at", "retire in", "stop work", "stop working", "retiring", "plan to retire"),
}
# Vulnerability drivers (FCA FG21/1: health, life events, resilience, capability) and their cues.
VULNERABILITY_CUES: dict[str, tuple[str, ...]] = {
    "health": ("diagnos", "cancer", "terminal", "seriously ill", "dementia", "disabled", "stroke"),
    "life events": (
        "bereave",
        "passed away",
        "husband died",
        "wife died",
        "partner died",
        "widow",
        "divorc",
        "redundan",
        "lost my job",
        "caring for",
    ),
    "resilience": ("debt", "can't pay", "cannot pay", "struggling", "arrears", "bailiff"),
    "capability": ("don't understand", "do not understand", "confus", "never used the internet"),
}
RECOMMENDATION_CUES = (
    "should i",
    "which fund",
    "which pension",
    "which option",
    "which provider",
    "which one",
    "what would you do",
    "recommend",
    "advise me",
    "your advice",
    "best option",
    "best fund",
    "what's best",
    "what is best",
    "tell me what to do",
    "tell me which",
)
DB_TRANSFER_CUES = ("transfer", "cash in", "cash it in", "move my", "take the money", "take it all")
_SPACES = re.compile(r"\s+")


class Reading(BaseModel):
    turn: CustomerTurn
    vulnerability: list[str]  # drivers whose cues the message carries


def _has(text: str, cues: tuple[str, ...]) -> bool:
    return any(cue in text for cue in cues)


def read_message(text: str) -> Reading:
    lowered = _SPACES.sub(" ", text.lower().replace("’", "'"))
    revealed = [topic for topic, cues in TOPIC_CUES.items() if _has(lowered, cues)]
    drivers = [driver for driver, cues in VULNERABILITY_CUES.items() if _has(lowered, cues)]
    if drivers:
        revealed.append("circumstances")
    db = "db_scheme" in revealed
    return Reading(
        turn=CustomerTurn(
            text=text,
            revealed=revealed,
            asks_for_recommendation=_has(lowered, RECOMMENDATION_CUES),
            raises_db_transfer=db and _has(lowered, DB_TRANSFER_CUES),
        ),
        vulnerability=drivers,
    )
