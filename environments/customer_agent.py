"""The simulated customer as a generative agent: a memory stream of who it is and what it heard.

Each consultation gets its own `CustomerAgent` with a small in-memory `MemoryStream` on the
consultation's virtual clock. The stream starts with the customer's persona and background (what
it knows of itself, including the facts it keeps back until asked); every point the adviser
makes is observed as its own memory, with an importance the customer would give it (a figure or
a warning matters more than a greeting); before speaking, the memories most relevant to the
adviser's last reply are retrieved (recency, importance, relevance) into the prompt. After the
consultation the same memories answer the outcome questions (`environments.outcomes`).

Importance is set here from what the customer heard rather than asked of a model: it is one more
call per utterance for a judgement the segment kind already makes, and code keeps a seeded run
identical whatever the concurrency. The retrieval query is the mean of the just-heard memories'
embeddings, so speaking costs no extra embedding.

What the customer notices in a reply, beyond its words, is read by a `Listener` from the
knowledge base's jargon terms and pressure lexicons: the same data the validator's plain-language
rules use, so what confuses or rushes a customer is what those rules forbid.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from compliance.knowledge import KnowledgeBase
from compliance.text import clauses, normalise, sentences
from environments.population import Customer
from environments.tasks import CUSTOMER_REPLY, CustomerTurn, Segment
from simulacra.clock import Clock
from simulacra.embeddings.base import Embedder
from simulacra.llm.client import LLMClient
from simulacra.memory.importance import ImportanceRater
from simulacra.memory.node import MemoryKind, MemoryNode, Provenance, Scope
from simulacra.memory.stream import MemoryStream, NewMemory

# What the customer came for, in its own words (its first memory, and the query it starts from).
GOAL_WORDS = {
    "drawdown": "I want to start taking money from my pension and understand how that works.",
    "tax": "I want to know how much of my pension I can take tax-free and how the rest is taxed.",
    "consolidation": "I have pensions from old jobs and want to know about combining them.",
    "retirement_age": "I want to know when I can take my pension and when my State Pension starts.",
    "contribution_planning": "I want to know how much I can pay into my pension with tax relief.",
    "risk_assessment": "I worry about how risky the investments in my pension are.",
}
# The kinds of reply part that answer each goal; goals whose answer is a number need a figure.
ANSWER_KINDS: dict[str, frozenset[str]] = {
    "drawdown": frozenset({"information", "figure"}),
    "tax": frozenset({"figure"}),
    "consolidation": frozenset({"information"}),
    "retirement_age": frozenset({"figure"}),
    "contribution_planning": frozenset({"figure"}),
    "risk_assessment": frozenset({"information", "risk_warning"}),
}
FIGURE_GOALS = frozenset({"tax", "retirement_age", "contribution_planning"})

# How much a customer cares about each kind of point it hears (1..10, as memory importance).
HEARD_IMPORTANCE = {
    "greeting": 2,
    "closing": 2,
    "question": 4,
    "vulnerable_care": 4,
    "information": 6,
    "risk_warning": 6,
    "pension_wise": 6,
    "advice_signpost": 5,
    "figure": 8,
    "db_warning": 8,
    "scam_warning": 9,
    "recommendation": 7,
    "certainty": 6,
    "jargon": 5,
}
HOLDING_IMPORTANCE = 7  # being told to wait for someone else is remembered
PRESSURE_IMPORTANCE = 7
OWN_WORDS_IMPORTANCE = 3
HIDDEN_IMPORTANCE = {"db_scheme": 7, "scam_contact": 8, "circumstances": 8}
DEFAULT_MEMORY_K = 6


class HeardReply(BaseModel):
    """What the customer took from one adviser reply."""

    turn: int
    holding: bool = False
    kinds: list[str] = Field(default_factory=list)
    asked: list[str] = Field(default_factory=list)
    jargon: list[str] = Field(default_factory=list)  # terms met without an explanation
    pressured: bool = False


class Experience(BaseModel):
    """The customer's running account of the consultation, from what it heard and said."""

    replies: int = 0
    answered: bool = False  # heard the kind of answer its goal needs
    figures_needed: bool = False
    figures_heard: bool = False
    holding_replies: int = 0
    confusing_replies: int = 0
    pressured_replies: int = 0
    times_confused: int = 0
    left_early: bool = False  # ended before the last turn because it felt pushed


class Listener:
    """Notices, in an adviser's reply, unexplained jargon and pressure to decide."""

    # How far after / before a jargon term its explanation may sit (as the validator's rule reads it).
    EXPLAIN_AFTER = 60
    EXPLAIN_BEFORE = 30

    def __init__(self, kb: KnowledgeBase) -> None:
        # Plain `re` patterns: a run builds one listener (environments.executors.runner) and every
        # consultation's customer shares it, as it holds nothing of any one consultation.
        self._terms = [(t.term, re.compile(t.pattern)) for t in kb.jargon]
        self._any = re.compile("|".join(f"(?:{t.pattern})" for t in kb.jargon))
        self._after = kb.lexicon("jargon_explained_after").regex
        self._before = kb.lexicon("jargon_explained_before").regex
        self._pressure = kb.lexicon("pressure").regex
        self._guard = kb.lexicon("pressure_guard").regex
        self._named = kb.lexicon("pressure_named").regex

    def jargon(self, text: str) -> list[str]:
        lowered = normalise(text)
        if self._any.search(lowered) is None:  # most replies have none: one scan, not one per term
            return []
        found = []
        for term, regex in self._terms:
            for match in regex.finditer(lowered):
                after = lowered[match.end() : match.end() + self.EXPLAIN_AFTER]
                before = lowered[max(0, match.start() - self.EXPLAIN_BEFORE) : match.start()]
                if not (self._after.search(after) or self._before.search(before)):
                    found.append(term)
                    break
        return found

    def pressure(self, text: str) -> bool:
        lowered = normalise(text)
        if not self._pressure.search(lowered):
            return False
        for sentence in sentences(lowered):
            for clause in clauses(sentence):
                match = self._pressure.search(clause)
                # Reassurance before the phrase ("no need to decide today") or pressure named as a
                # scam tactic ("being told to act fast is a red flag") is not the adviser pressing.
                if (
                    match
                    and self._guard.search(clause[: match.end()]) is None
                    and self._named.search(clause) is None
                ):
                    return True
        return False

    def hear(
        self, turn: int, text: str, segments: Sequence[Segment], asked: Sequence[str], holding: bool
    ) -> HeardReply:
        if holding:
            return HeardReply(turn=turn, holding=True)
        kinds = [s.kind for s in segments]
        jargon = self.jargon(text)
        if not jargon and "jargon" in kinds:
            jargon = ["jargon"]
        # Being told which option to pick is being pushed, whatever the words.
        pressured = self.pressure(text) or "recommendation" in kinds
        return HeardReply(turn=turn, kinds=kinds, asked=list(asked), jargon=jargon, pressured=pressured)


def persona(customer: Customer) -> dict[str, Any]:
    return customer.model_dump(
        include={
            "name",
            "age",
            "literacy",
            "vulnerable",
            "situation",
            "goal",
            "wants_db_transfer",
            "income_gbp",
        }
    )


def memory_item(node: MemoryNode) -> dict[str, Any]:
    """A memory as prompts (and the scripted stand-in) see it."""
    meta = node.metadata
    return {
        "id": node.id,
        "text": node.description,
        "about": meta.get("kind") or meta.get("topic") or str(node.kind),
        "turn": meta.get("turn"),
    }


class CustomerAgent:
    """One simulated customer in one consultation."""

    def __init__(
        self,
        customer: Customer,
        *,
        consultation_id: str,
        llm: LLMClient,
        clock: Clock,
        embedder: Embedder,
        rater: ImportanceRater,
        listener: Listener,
        memory_k: int = DEFAULT_MEMORY_K,
    ) -> None:
        """`rater` rates only memories stored without an importance (this class gives every one)."""
        self.customer = customer
        self.llm = llm
        self.listener = listener
        self.memory_k = memory_k
        self.stream = MemoryStream(embedder, clock, rater)
        self.own = Provenance(author="customer", scope=Scope.SESSION, consultation_id=consultation_id)
        self.adviser = Provenance(
            author="advisor_statement", scope=Scope.SESSION, consultation_id=consultation_id
        )
        self.heard: list[HeardReply] = []
        self.said: list[CustomerTurn] = []
        self.revealed: set[str] = set()
        self.tokens = 0
        self._focus: list[str] = []  # ids of the memories the next reply starts from

    # -- memory

    async def start(self) -> None:
        """Seed the stream with who the customer is: its goal first, then its background."""
        c = self.customer
        items = [(GOAL_WORDS[c.goal], 9, {"kind": "goal"})]
        items.append((f"I am {c.name}, aged {c.age}.", 3, {"kind": "self"}))
        literacy = {
            "low": ("Money matters and financial words often confuse me.", 6),
            "medium": ("I understand the basics of pensions but not the details.", 3),
            "high": ("I'm comfortable with financial terms.", 3),
        }[c.literacy]
        items.append((literacy[0], literacy[1], {"kind": "self"}))
        if c.vulnerable:
            items.append((f"I'm {c.situation}.", 8, {"kind": "circumstances"}))
        items += [
            (
                f"My pension with {p.provider or 'my provider'} is worth about £{p.value_gbp:,.0f}.",
                5,
                {"kind": "pot"},
            )
            for p in c.pots_on_file
        ]
        if c.wants_db_transfer:
            items.append(
                (
                    "I've been told I could transfer my final salary pension for a big lump sum.",
                    7,
                    {"kind": "plan"},
                )
            )
        seen: set[str] = set()
        for fact in c.hidden:
            if fact.statement in seen:  # several pots elsewhere share one statement
                continue
            seen.add(fact.statement)
            items.append(
                (
                    fact.statement,
                    HIDDEN_IMPORTANCE.get(fact.topic, 5),
                    {"kind": "hidden", "topic": fact.topic},
                )
            )
        nodes = await self.stream.add_many(
            [
                NewMemory(
                    description=text,
                    kind=MemoryKind.OBSERVATION,
                    provenance=self.own,
                    importance=importance,
                    metadata=meta,
                )
                for text, importance, meta in items
            ]
        )
        self._focus = [nodes[0].id]

    async def hear(
        self, turn: int, text: str, segments: Sequence[Segment], asked: Sequence[str], holding: bool
    ) -> HeardReply:
        """Observe one adviser reply: each point it made becomes a memory."""
        heard = self.listener.hear(turn, text, segments, asked, holding)
        self.heard.append(heard)
        if holding:
            items = [(f"The adviser could not answer me yet and said: {text}", HOLDING_IMPORTANCE, "holding")]
        else:
            parts = [(s.text, s.kind) for s in segments if s.text.strip()] or [(text, "information")]
            items = [(f"The adviser said: {t}", HEARD_IMPORTANCE.get(k, 5), k) for t, k in parts]
            if heard.pressured:
                items.append(("The adviser was pushing me to decide.", PRESSURE_IMPORTANCE, "pressure"))
        nodes = await self.stream.add_many(
            [
                NewMemory(
                    description=description,
                    kind=MemoryKind.OBSERVATION,
                    provenance=self.adviser,
                    importance=importance,
                    metadata={"kind": kind, "turn": turn},
                )
                for description, importance, kind in items
            ]
        )
        self._focus = [n.id for n in nodes]
        return heard

    def recall(self, query: str | np.ndarray, k: int) -> list[dict[str, Any]]:
        """The k memories most worth bringing to mind for the query, best first."""
        return [memory_item(s.node) for s in self.stream.retrieve(query, k=k)]

    def _focus_vector(self) -> np.ndarray:
        vectors = np.stack([self.stream.embedding(i) for i in self._focus])
        return vectors.mean(axis=0)

    # -- speaking

    def experience(self) -> Experience:
        goal = self.customer.goal
        kinds = {k for h in self.heard for k in h.kinds}
        return Experience(
            replies=len(self.heard),
            answered=bool(kinds & ANSWER_KINDS[goal]),
            figures_needed=goal in FIGURE_GOALS,
            figures_heard="figure" in kinds,
            holding_replies=sum(h.holding for h in self.heard),
            confusing_replies=sum(bool(h.jargon) for h in self.heard),
            pressured_replies=sum(h.pressured for h in self.heard),
            times_confused=sum(t.confused for t in self.said),
            left_early=any(t.ends and t.pressured for t in self.said),
        )

    def variables(self, turn: int, max_turns: int, conversation: list[dict[str, Any]]) -> dict[str, Any]:
        last = self.heard[-1] if self.heard else None
        return {
            "persona": persona(self.customer),
            "hidden": [
                h.model_dump(include={"topic", "statement"})
                for h in self.customer.hidden
                if h.topic not in self.revealed
            ],
            "memories": self.recall(self._focus_vector(), self.memory_k),
            "advisor_asked": list(last.asked) if last else [],
            "advisor_jargon": list(last.jargon) if last else [],
            "advisor_pressure": bool(last and last.pressured),
            "advisor_holding": bool(last and last.holding),
            "experience": self.experience().model_dump(),
            "conversation": conversation,
            "turn": turn,
            "max_turns": max_turns,
        }

    async def speak(self, turn: int, max_turns: int, conversation: list[dict[str, Any]]) -> CustomerTurn:
        """The customer's next utterance; it remembers what it said."""
        result = await self.llm.call(CUSTOMER_REPLY, self.variables(turn, max_turns, conversation))
        self.tokens += result.usage.total
        reply: CustomerTurn = result.output
        # Only facts it actually holds can be revealed, whatever a model claims.
        hidden_topics = {h.topic for h in self.customer.hidden}
        reply = reply.model_copy(update={"revealed": [t for t in reply.revealed if t in hidden_topics]})
        self.revealed.update(reply.revealed)
        self.said.append(reply)
        await self.stream.add(
            f'I said: "{reply.text}"',
            MemoryKind.OBSERVATION,
            self.own,
            importance=OWN_WORDS_IMPORTANCE,
            metadata={"kind": "own_words", "turn": turn},
        )
        return reply
