"""The scripted customer: speaks from its persona and what it remembers, reveals hidden facts only
when asked well, gets confused by jargon and put off by pressure, ends the consultation when it
has its answer (or has had enough), and afterwards rates the consultation and answers the
understanding quiz from the memories it retrieved.

Everything comes from the call's variables and `call.rng`, which is seeded by the run seed and the
call's content, so a seeded run is the same whatever the concurrency.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from compliance.text import normalise
from environments.tasks import CustomerRating, CustomerTurn, QuizAnswer, QuizAnswers
from simulacra.llm.providers.scripted import ScriptedCall

OPENINGS = {
    "drawdown": {
        "low": "I'm {age} and I want to start getting money out of my pension but I don't really get how it works.",
        "other": "I'm {age} and I'd like to start taking an income from my pension. What are my options?",
    },
    "tax": {
        "low": "How much of my pension can I have without paying tax? I'm a bit lost with all of it.",
        "other": "How much of my pension can I take tax-free, and how is the rest taxed?",
    },
    "consolidation": {
        "low": "I've got pensions all over the place from old jobs. Can they go in one place?",
        "other": "I have several pensions from previous employers and I'm wondering about combining them.",
    },
    "retirement_age": {
        "low": "When can I actually get my pension money and my State Pension?",
        "other": "At what age can I access my pension savings, and when does my State Pension start?",
    },
    "contribution_planning": {
        "low": "Can I put more money into my pension? Is there a limit?",
        "other": "How much can I pay into my pension each year and still get tax relief?",
    },
    "risk_assessment": {
        "low": "I'm scared my pension is in something risky. Could I lose it?",
        "other": "I'd like to understand how risky the funds my pension is invested in are.",
    },
}
FOLLOW_UPS = {
    "drawdown": "What happens to what's left if I die?",
    "tax": "Do I have to take the tax-free part all at once?",
    "consolidation": "Would I lose anything by moving them?",
    "retirement_age": "Can I keep working and still take some of it?",
    "contribution_planning": "Does my employer's money count towards that limit?",
    "risk_assessment": "How do I find out what my pension is actually invested in?",
}
# Asked again when the reply did not answer what the customer came for.
STILL_ASKING = {
    "drawdown": "But how would I actually take the money out?",
    "tax": "Sorry, but how much of it could I actually take tax-free?",
    "consolidation": "But can I actually put them together, and is it worth it?",
    "retirement_age": "But what age would that be for me?",
    "contribution_planning": "But how much can I actually pay in?",
    "risk_assessment": "But is my money actually at risk?",
}
ASK_WHAT_TO_DO = [
    "So what would you do in my position?",
    "What should I do, then?",
    "Just tell me which one is best for me.",
]

# How likely an asked question is answered: plainly asked, or asked amid jargon or pressure.
REVEAL_PLAIN = 0.9
REVEAL_JARGON = 0.55
REVEAL_PRESSED = 0.35
# Jargon confuses customers with little financial literacy most.
CONFUSED_BY_JARGON = {"low": 0.75, "medium": 0.3, "high": 0.05}
# A customer who feels pushed may walk away, the vulnerable and the unsure most readily.
LEAVES_WHEN_PRESSED = {"vulnerable_or_low": 0.5, "other": 0.15}
# Once its question is answered, a customer wraps up at this rate each turn.
ENDS_WHEN_ANSWERED = 0.3
# Chance of recalling correctly what was heard, by literacy; confusion makes recall worse.
RECALL = {"low": 0.7, "medium": 0.85, "high": 0.95}
RECALL_CONFUSED_PENALTY = 0.15
GUESS_YES = 0.4  # answering yes to a yes/no question it never heard about


def handle_customer_reply(call: ScriptedCall) -> CustomerTurn:
    v = call.variables
    persona = v["persona"]
    goal = str(persona["goal"])
    turn = int(v["turn"])
    hidden = {str(h["topic"]): str(h["statement"]) for h in v.get("hidden", [])}
    literacy = str(persona.get("literacy", "medium"))
    experience: Mapping[str, Any] = v.get("experience", {})
    rng = call.rng

    if turn >= int(v["max_turns"]):
        closing = (
            "Thank you, that's given me a lot to think about."
            if literacy != "low"
            else "Thanks, that helps. I'll have a think."
        )
        return CustomerTurn(text=closing, ends=True)

    if turn == 0:
        return opening(v, goal, literacy, hidden, rng)

    jargon = list(v.get("advisor_jargon", []))
    pressed = bool(v.get("advisor_pressure"))
    unsure = bool(persona.get("vulnerable")) or literacy == "low"
    parts: list[str] = []
    revealed: list[str] = []
    confused = bool(jargon) and rng.random() < CONFUSED_BY_JARGON.get(literacy, 0.3)
    if confused:
        term = jargon[0]
        parts.append(
            "Sorry, I don't follow. What does that mean?"
            if term == "jargon"
            else f"Sorry, I don't follow. What does {term} mean?"
        )
    if pressed:
        parts.append("I don't want to be rushed into anything.")
        if rng.random() < LEAVES_WHEN_PRESSED["vulnerable_or_low" if unsure else "other"]:
            parts.append("I think I'll leave it there for now.")
            return CustomerTurn(text=" ".join(parts), confused=confused, pressured=True, ends=True)
    # Asked well (plainly, without pressure), people answer; otherwise they often don't.
    reveal_p = REVEAL_PRESSED if pressed else REVEAL_JARGON if jargon else REVEAL_PLAIN
    for topic in v.get("advisor_asked", []):
        if topic in hidden and rng.random() < reveal_p:
            parts.append(hidden[topic])
            revealed.append(topic)
        elif topic not in hidden and rng.random() < 0.5:
            parts.append("No, nothing like that.")
    answered = bool(experience.get("answered")) and (
        not experience.get("figures_needed") or bool(experience.get("figures_heard"))
    )
    if not confused:
        if not answered:
            parts.append(STILL_ASKING[goal])
        elif turn >= 2 and not revealed and not pressed and rng.random() < ENDS_WHEN_ANSWERED:
            parts.append("That answers what I wanted to know. Thank you.")
            return CustomerTurn(text=" ".join(parts), ends=True)
        elif rng.random() < 0.5:
            parts.append(FOLLOW_UPS[goal])
    asks = rng.random() < 0.25
    if asks:
        parts.append(ASK_WHAT_TO_DO[rng.randrange(len(ASK_WHAT_TO_DO))])
    if not parts:
        parts.append("Okay, I see.")
    return CustomerTurn(
        text=" ".join(parts),
        revealed=revealed,
        asks_for_recommendation=asks,
        confused=confused,
        pressured=pressed,
    )


def opening(
    v: Mapping[str, Any], goal: str, literacy: str, hidden: dict[str, str], rng: random.Random
) -> CustomerTurn:
    persona = v["persona"]
    style = "low" if literacy == "low" else "other"
    parts = [OPENINGS[goal][style].format(age=persona["age"])]
    revealed: list[str] = []
    raises_db_transfer = False
    if persona.get("wants_db_transfer") and "db_scheme" in hidden:
        parts.append("I've been told I could transfer my old final salary pension and get a big lump sum.")
        parts.append(hidden["db_scheme"])
        revealed.append("db_scheme")
        raises_db_transfer = True
    if "scam_contact" in hidden and rng.random() < 0.5:
        parts.append(hidden["scam_contact"])
        revealed.append("scam_contact")
    asks = rng.random() < 0.35
    if asks:
        parts.append(ASK_WHAT_TO_DO[rng.randrange(len(ASK_WHAT_TO_DO))])
    return CustomerTurn(
        text=" ".join(parts),
        revealed=revealed,
        asks_for_recommendation=asks,
        raises_db_transfer=raises_db_transfer,
    )


# -- after the consultation: the customer's own verdict


def handle_customer_rating(call: ScriptedCall) -> CustomerRating:
    """Satisfaction from what the customer lived through: answered, given its figures, not left
    confused, not pushed, not handed to someone else without an answer."""
    e: Mapping[str, Any] = call.variables["experience"]
    rng = call.rng
    score = 5
    reasons = []
    if not e.get("answered"):
        score -= 2
        reasons.append("my question wasn't really answered")
    elif e.get("figures_needed") and not e.get("figures_heard"):
        score -= 1
        reasons.append("I didn't get the figures I needed")
    if e.get("holding_replies"):
        score -= 2
        reasons.append("I was told someone else would get back to me")
    if e.get("confusing_replies") or e.get("times_confused"):
        score -= 1
        reasons.append("some of it went over my head")
    if e.get("pressured_replies"):
        score -= 1
        reasons.append("I felt pushed")
    if e.get("left_early"):
        score -= 1
    if rng.random() < 0.2:  # people's ratings are noisy
        score += rng.choice((-1, 1))
    goal_achieved = (
        bool(e.get("answered"))
        and (not e.get("figures_needed") or bool(e.get("figures_heard")))
        and not e.get("holding_replies")
        and not e.get("left_early")
    )
    return CustomerRating(
        satisfaction=max(1, min(5, score)),
        goal_achieved=goal_achieved,
        reason="; ".join(reasons) or "I got what I came for",
    )


# -- after the consultation: the understanding quiz, answered from retrieved memories

_MONEY = r"£\s?(\d{1,3}(?:,\d{3})+|\d+)(?:\.\d{1,2})?"
# What a listener takes as "my figure" in what it was told (latest mention first).
FIGURE_CUES = {
    "tax_free_cash": re.compile(r"tax-free[^.;]*?would be " + _MONEY),
    "annual_allowance": re.compile(r"pay in up to " + _MONEY),
    "state_pension_age": re.compile(r"state pension age is (\d{2})(?: years and (\d{1,2}) months?)?"),
}
# Which heard points answer each yes/no question (memory `about` and words in it).
YES_NO_EVIDENCE: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "db_guarantees": (frozenset({"db_warning"}), ("give up those guarantees",)),
    "pension_wise": (frozenset({"pension_wise"}), ("pension wise",)),
    "investment_risk": (frozenset({"risk_warning"}), ("fall as well as rise", "go down as well as up")),
    "transfer_losses": (frozenset({"db_warning"}), ("can be lost on transfer", "lost benefits")),
}


def heard_figure(topic: str, memories: Sequence[Mapping[str, Any]]) -> float | None:
    """The figure the customer was told for `topic`, from its latest mention in the memories."""
    cue = FIGURE_CUES[topic]
    latest: tuple[int, float] | None = None
    for memory in memories:
        match = cue.search(normalise(str(memory["text"])))
        if match is None:
            continue
        if topic == "state_pension_age":
            value = int(match.group(1)) + int(match.group(2) or 0) / 12
        else:
            value = float(match.group(1).replace(",", ""))
        turn = int(memory.get("turn") or 0)
        if latest is None or turn > latest[0]:
            latest = (turn, value)
    return None if latest is None else latest[1]


def heard_yes(topic: str, memories: Sequence[Mapping[str, Any]]) -> bool:
    kinds, phrases = YES_NO_EVIDENCE[topic]
    for memory in memories:
        text = normalise(str(memory["text"]))
        if memory.get("about") in kinds or any(p in text for p in phrases):
            return True
    return False


def answer_question(question: Mapping[str, Any], recall: float, rng: random.Random) -> QuizAnswer:
    qid, topic, memories = str(question["id"]), str(question["topic"]), question.get("memories", [])
    if topic in FIGURE_CUES:
        value = heard_figure(topic, memories)
        if value is None:
            return QuizAnswer(id=qid, answer="I don't know, I wasn't told.")
        if rng.random() >= recall:  # misremembered: an age by a year or two, an amount by a lot
            value = (
                value + rng.choice((-2, -1, 1, 2))
                if topic == "state_pension_age"
                else value * rng.choice((0.5, 0.75, 1.5))
            )
        shown = f"about {value:g}" if topic == "state_pension_age" else f"about £{value:,.0f}"
        return QuizAnswer(id=qid, answer=f"I think it's {shown}.", value=value)
    if heard_yes(topic, memories):
        if rng.random() >= recall:
            return QuizAnswer(id=qid, answer="I can't remember what they said about that.")
        if topic == "pension_wise":
            return QuizAnswer(id=qid, answer="Yes, Pension Wise. It's free.", yes=True)
        return QuizAnswer(id=qid, answer="Yes, I was told that.", yes=True)
    if rng.random() < GUESS_YES:
        return QuizAnswer(id=qid, answer="I suppose so, but I'm not sure.", yes=True)
    return QuizAnswer(id=qid, answer="I don't think so.", yes=False)


def handle_customer_quiz(call: ScriptedCall) -> QuizAnswers:
    v = call.variables
    literacy = str(v["persona"].get("literacy", "medium"))
    recall = RECALL.get(literacy, 0.85)
    if v.get("experience", {}).get("times_confused"):
        recall -= RECALL_CONFUSED_PENALTY
    rng = call.rng
    return QuizAnswers(answers=[answer_question(q, recall, rng) for q in v["questions"]])
