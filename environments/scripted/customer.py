"""The scripted customer: speaks from its persona, reveals hidden facts only when asked well."""

from __future__ import annotations

from environments.tasks import CustomerTurn
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
ASK_WHAT_TO_DO = [
    "So what would you do in my position?",
    "What should I do, then?",
    "Just tell me which one is best for me.",
]


def handle_customer_reply(call: ScriptedCall) -> CustomerTurn:
    v = call.variables
    persona = v["persona"]
    goal = str(persona["goal"])
    turn = int(v["turn"])
    hidden = {str(h["topic"]): str(h["statement"]) for h in v.get("hidden", [])}
    literacy = str(persona.get("literacy", "medium"))
    rng = call.rng

    if turn >= int(v["max_turns"]):
        closing = (
            "Thank you, that's given me a lot to think about."
            if literacy != "low"
            else "Thanks, that helps. I'll have a think."
        )
        return CustomerTurn(text=closing, ends=True)

    parts: list[str] = []
    revealed: list[str] = []
    confused = False
    raises_db_transfer = False
    if turn == 0:
        style = "low" if literacy == "low" else "other"
        parts.append(OPENINGS[goal][style].format(age=persona["age"]))
        if persona.get("wants_db_transfer") and "db_scheme" in hidden:
            parts.append(
                "I've been told I could transfer my old final salary pension and get a big lump sum."
            )
            parts.append(hidden["db_scheme"])
            revealed.append("db_scheme")
            raises_db_transfer = True
        if "scam_contact" in hidden and rng.random() < 0.5:
            parts.append(hidden["scam_contact"])
            revealed.append("scam_contact")
    else:
        jargon = bool(v.get("advisor_jargon"))
        if jargon and literacy == "low" and rng.random() < 0.7:
            confused = True
            parts.append("Sorry, I don't follow. What does that mean?")
        # Asked well (plainly, without pressure), people answer; otherwise they often don't.
        reveal_p = 0.55 if jargon else 0.9
        for topic in v.get("advisor_asked", []):
            if topic in hidden and rng.random() < reveal_p:
                parts.append(hidden[topic])
                revealed.append(topic)
            elif topic not in hidden and rng.random() < 0.5:
                parts.append("No, nothing like that.")
        if not confused and rng.random() < 0.5:
            parts.append(FOLLOW_UPS[goal])
    asks = rng.random() < (0.35 if turn == 0 else 0.25)
    if asks:
        parts.append(ASK_WHAT_TO_DO[rng.randrange(len(ASK_WHAT_TO_DO))])
    if not parts:
        parts.append("Okay, I see.")
    return CustomerTurn(
        text=" ".join(parts),
        revealed=revealed,
        asks_for_recommendation=asks,
        confused=confused,
        raises_db_transfer=raises_db_transfer,
    )
