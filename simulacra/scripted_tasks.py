"""Scripted answers for simulacra's own tasks (reflection, planning, the react decision).

The scripted provider never reads prompt text, so each handler here computes its answer from the
call's variables the way a careful model would: questions from the words the recent memories share,
insights that cite the evidence they were shown, phases from the clauses of the goal, actions from a
phase's expected topics, and a react decision from whether the utterance touches what the phase
expected. Configured imperfection rates (`call.chance(...)`) make them slip the way models do, so the
code paths that catch slips run in simulations too:

- `reflection_bad_citation`: an insight cites an id that was not in the evidence.
- `react_misjudged`: the continue-or-react decision is flipped.

The generic `agent.utterance` reply is assembled from the turn's material; domains that bring their
own generation task bring its handler too.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from simulacra.agent import UTTERANCE, Utterance
from simulacra.llm.providers.scripted import ScriptedCall, ScriptedHandlers
from simulacra.memory import register_memory_handlers
from simulacra.memory.planning import (
    DECIDE_REACTION,
    DECOMPOSE_PHASE,
    PLAN_CONSULTATION,
    ActionDraft,
    ConsultationPlanDraft,
    PhaseDecomposition,
    PhaseDraft,
    ReactDecision,
)
from simulacra.memory.reflection import (
    REFLECTION_INSIGHTS,
    REFLECTION_QUESTIONS,
    Insight,
    ReflectionInsights,
    ReflectionQuestions,
)

_WORD = re.compile(r"[a-z0-9£%']+")
_STOP_WORDS = """a about above after again against all also am an and any are as at be because been
    before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me more
    most my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves i'm it's that's don't can't won't i've i'd let's get got
    want wants like just really well yes okay ok thanks thank please said says say one two also much
    many know think told tell regarding memory memories explain check address discuss understand
    ask work agree someone party party's point other respond raised"""
_STOP = frozenset(_STOP_WORDS.split())
_SPLIT = re.compile(r"\s*(?:[,;:]|\band then\b|\bthen\b|\band\b)\s*", re.IGNORECASE)


def keywords(text: str, limit: int | None = None) -> list[str]:
    """Content words in order of first appearance (lower case, no stop words, no repeats)."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        word = word.strip("'")
        if len(word) >= 3 and word not in _STOP and not word.isdigit():
            seen.setdefault(word, None)
    words = list(seen)
    return words if limit is None else words[:limit]


def _salient(text: str, limit: int) -> list[str]:
    """The longest content words (a crude stand-in for "the nouns"), in the order they were said."""
    words = keywords(text)
    chosen = set(sorted(words, key=lambda w: (-len(w), words.index(w)))[:limit])
    return [w for w in words if w in chosen]


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _stems(words: Iterable[str]) -> set[str]:
    return {_stem(w) for w in words}


def _shorten(text: str, words: int = 14) -> str:
    parts = text.strip().rstrip(".").split()
    return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")


# --- reflection -------------------------------------------------------------------------------

_QUESTION_FORMS = (
    "What do the memories about {topic} have in common?",
    "What has been learned about {topic}?",
    "What matters most about {topic} for what comes next?",
    "How has {topic} come up over time?",
)


def handle_reflection_questions(call: ScriptedCall) -> ReflectionQuestions:
    """Ask about the words most memories share, more recent memories breaking ties."""
    memories: Sequence[dict] = call.variables["memories"]
    count = int(call.variables["count"])
    spread: Counter[str] = Counter()
    latest: dict[str, int] = {}
    for position, memory in enumerate(memories):
        for word in keywords(memory["description"]):
            spread[word] += 1
            latest[word] = position
    topics = sorted(spread, key=lambda w: (-spread[w], -latest[w], w))[:count]
    if not topics:
        return ReflectionQuestions(questions=["What happened most recently, and why does it matter?"])
    return ReflectionQuestions(questions=[call.rng.choice(_QUESTION_FORMS).format(topic=t) for t in topics])


_INSIGHT_PREFIX = re.compile(r"^On [^:]{1,80}: ")


def _core(description: str) -> str:
    """A memory's statement without the "On <topic>: " lead a scripted insight starts with."""
    return _INSIGHT_PREFIX.sub("", description.strip()).rstrip(".")


def handle_reflection_insights(call: ScriptedCall) -> ReflectionInsights:
    """Insights over the evidence most related to the question, each citing what it draws together."""
    question = str(call.variables["question"])
    evidence: Sequence[dict] = call.variables["evidence"]
    count = int(call.variables["count"])
    if not evidence:
        return ReflectionInsights(insights=[Insight(insight=f"Nothing is known yet about: {question}")])
    asked = _stems(keywords(question))
    words = [keywords(_core(m["description"])) for m in evidence]
    ranked = sorted(range(len(evidence)), key=lambda i: (-len(asked & _stems(words[i])), i))
    insights: list[Insight] = []
    for n in range(min(count, len(ranked))):
        size = min(call.rng.randint(1, 3), len(ranked))
        group = [ranked[(n + j) % len(ranked)] for j in range(size)]
        others = [_stems(words[i]) for i in group[1:]]
        common = [w for w in words[group[0]] if all(_stem(w) in o for o in others)]
        topic = [w for w in common if _stem(w) in asked] or common or words[group[0]][:2]
        about = " and ".join(topic[:2]) or "this"
        statements = "; ".join(_shorten(_core(evidence[i]["description"]), 10) for i in group)
        text = f"On {about}: {statements}."
        cited = list(dict.fromkeys(evidence[i]["id"] for i in group))
        if call.chance("reflection_bad_citation"):
            cited[-1] = f"{cited[-1]}-unseen"
        insights.append(Insight(insight=text, evidence=cited))
    return ReflectionInsights(insights=insights)


# --- planning ---------------------------------------------------------------------------------


def _clauses(goal: str) -> list[str]:
    return [c.strip(" .") for c in _SPLIT.split(goal) if c and len(keywords(c)) > 0]


def _title(text: str, words: int = 8) -> str:
    short = _shorten(text, words).rstrip(" .,;")
    return short[:1].upper() + short[1:]


def handle_plan_consultation(call: ScriptedCall) -> ConsultationPlanDraft:
    """One phase per clause of the goal; a full plan also opens and closes the conversation."""
    goal = str(call.variables["goal"])
    max_phases = int(call.variables["max_phases"])
    kind = call.variables.get("kind", "plan")
    middle = [
        PhaseDraft(
            title=_title(clause), description=f"Work on: {clause}.", expected_topics=keywords(clause, 4)
        )
        for clause in _clauses(goal)
    ] or [PhaseDraft(title=_title(goal), description=f"Work on: {goal}.", expected_topics=keywords(goal, 4))]
    if kind == "reaction":
        # A detour answers one point and goes back; its goal is not split into clauses.
        trigger = str(call.variables.get("trigger") or goal)
        respond = PhaseDraft(
            title=_title(goal, 10),
            description=f"Work on: {goal}.",
            expected_topics=_salient(trigger, 2) or keywords(goal, 2),
        )
        settle = PhaseDraft(
            title="Check the point is settled",
            description="Confirm the other party's point has been dealt with before going back.",
            expected_topics=_salient(trigger, 1) or keywords(goal, 1),
        )
        return ConsultationPlanDraft(phases=[respond, settle][:max_phases])
    opening = PhaseDraft(
        title="Open the conversation",
        description=f"Greet the other party and agree the aim: {goal}.",
        expected_topics=["introductions", *keywords(goal, 3)],
    )
    closing = PhaseDraft(
        title="Summarise and agree next steps",
        description="Summarise what was covered and agree what happens next.",
        expected_topics=["summary", "next steps", *keywords(goal, 2)],
    )
    if max_phases == 1:
        return ConsultationPlanDraft(phases=[middle[0]])
    if max_phases == 2:
        return ConsultationPlanDraft(phases=[middle[0], closing])
    return ConsultationPlanDraft(phases=[opening, *middle[: max_phases - 2], closing])


_ACTION_FORMS = (
    "Ask about {topic}",
    "Explain {topic}",
    "Check what the other party understands about {topic}",
)


def handle_decompose_phase(call: ScriptedCall) -> PhaseDecomposition:
    """An action per expected topic of the phase, cycling ask / explain / check."""
    phase = call.variables["phase"]
    max_actions = int(call.variables["max_actions"])
    topics = [t for t in phase.get("expected_topics", []) if t.strip()]
    if not topics:
        return PhaseDecomposition(actions=[ActionDraft(description=phase["description"])])
    offset = call.rng.randrange(len(_ACTION_FORMS))
    actions = [
        ActionDraft(description=_ACTION_FORMS[(offset + i) % len(_ACTION_FORMS)].format(topic=topic))
        for i, topic in enumerate(topics[:max_actions])
    ]
    return PhaseDecomposition(actions=actions)


def handle_react_decision(call: ScriptedCall) -> ReactDecision:
    """React when the utterance shares no content word with what the phase and the plan expected."""
    variables = call.variables
    said = keywords(str(variables["utterance"]))
    phase = variables["phase"]
    expected_text = " ".join(
        [
            *phase.get("expected_topics", []),
            phase.get("title", ""),
            phase.get("description", ""),
            variables.get("action") or "",
            variables.get("goal", ""),
        ]
    )
    expected = _stems(keywords(expected_text))
    overlap = [w for w in said if _stem(w) in expected]
    react = len(said) >= 3 and not overlap
    if call.chance("react_misjudged"):
        react = not react and len(said) > 0
    if react and not variables.get("can_react", True):
        return ReactDecision(
            decision="continue", reason="the utterance was unexpected, but no further detour is possible now"
        )
    if react:
        topic = ", ".join(_salient(str(variables["utterance"]), 3))
        return ReactDecision(
            decision="react",
            reason=f"the utterance raises {topic}, which the current phase did not expect",
            sub_goal=f"address the point raised about {topic}",
        )
    reason = (
        f"the utterance fits what the phase expected ({', '.join(overlap[:3])})"
        if overlap
        else "the utterance adds nothing the plan must change for"
    )
    return ReactDecision(decision="continue", reason=reason)


# --- the generic utterance --------------------------------------------------------------------

_QUOTED = re.compile(r"['\"‘“]([^'\"’”]{2,60})['\"’”]")


def handle_utterance(call: ScriptedCall) -> Utterance:
    """A reply assembled from the turn's material: what was said, the planned action, a memory, a note.

    After a held draft it leaves out whatever the gate's reasons quoted, the way a model told
    "do not say X" usually complies.
    """
    variables = call.variables
    sections = variables.get("sections", {})
    plan = variables.get("plan") or {}
    parts: list[str] = []
    observation = variables.get("observation")
    if observation:
        heard = _salient(str(observation), 3)
        parts.append(f"You mentioned {', '.join(heard)}." if heard else "Thank you for that.")
    else:
        parts.append("Hello, thank you for coming.")
    action = plan.get("action") or plan.get("phase_description")
    if action:
        parts.append(f"Next I would like to {action[:1].lower()}{action[1:].rstrip('.')}.")
    # Recalling one's own earlier words back at the listener would be odd; recall something else.
    recalled = [m for m in sections.get("memories", []) if not m.startswith("I said")]
    if recalled:
        parts.append(f"I remember: {_shorten(recalled[0], 12)}.")
    if sections.get("extra"):
        parts.append(f"A note that may help: {_shorten(sections['extra'][0], 12)}.")
    text = " ".join(parts)
    for reason in variables.get("feedback", []):
        for phrase in _QUOTED.findall(str(reason)):
            text = re.sub(re.escape(phrase), "that", text, flags=re.IGNORECASE)
    return Utterance(text=text)


# --- registration -----------------------------------------------------------------------------


def register_reflection_handlers(handlers: ScriptedHandlers) -> None:
    handlers.register(REFLECTION_QUESTIONS.name, handle_reflection_questions)
    handlers.register(REFLECTION_INSIGHTS.name, handle_reflection_insights)


def register_planning_handlers(handlers: ScriptedHandlers) -> None:
    handlers.register(PLAN_CONSULTATION.name, handle_plan_consultation)
    handlers.register(DECOMPOSE_PHASE.name, handle_decompose_phase)


def register_agent_handlers(handlers: ScriptedHandlers) -> None:
    handlers.register(DECIDE_REACTION.name, handle_react_decision)
    handlers.register(UTTERANCE.name, handle_utterance)


def register_simulacra_handlers(handlers: ScriptedHandlers) -> None:
    """Every scripted handler of simulacra's own tasks, the memory tasks (importance, summaries) included."""
    register_memory_handlers(handlers)
    register_reflection_handlers(handlers)
    register_planning_handlers(handlers)
    register_agent_handlers(handlers)
