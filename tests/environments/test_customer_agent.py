"""The customer agent: its memory stream, what it notices, what it reveals, when it stops."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from compliance.knowledge import KnowledgeBase, load_knowledge
from compliance.models import Pot
from environments.assembly import scripted_handlers
from environments.customer_agent import CustomerAgent, Listener
from environments.outcomes import OutcomeJudge, compliance_record, quiz_for
from environments.population import Customer, HiddenFact
from environments.scripted import phrases
from environments.tasks import CUSTOMER_QUIZ, CUSTOMER_RATING, CUSTOMER_REPLY, PROMPTS_DIR, Segment
from simulacra import PROMPTS_DIR as SIMULACRA_PROMPTS
from simulacra.clock import VirtualClock
from simulacra.embeddings.base import CachedEmbedder, Embedder
from simulacra.embeddings.hashing import HashingEmbedder
from simulacra.llm.client import ChainLink, LLMClient
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers.scripted import ScriptedProvider
from simulacra.memory.importance import LLMImportanceRater
from simulacra.memory.node import MemoryKind

START = datetime(2026, 4, 6, 10, 0)
SEEDS = range(20)


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_knowledge()


def scripted_llm(seed: int) -> LLMClient:
    return LLMClient(
        [ChainLink(ScriptedProvider(scripted_handlers(), seed=seed))],
        PromptLibrary([PROMPTS_DIR, SIMULACRA_PROMPTS]),
    )


def make_customer(**changes: object) -> Customer:
    base: dict[str, object] = {
        "id": "c-test",
        "name": "Ann Lee",
        "age": 60,
        "income_gbp": 30000.0,
        "literacy": "medium",
        "vulnerable": False,
        "situation": "planning ahead",
        "goal": "drawdown",
        "pots_on_file": [Pot(type="DC", value_gbp=40000, provider="Aviva")],
        "hidden": [
            HiddenFact(
                topic="other_pensions",
                statement="I've also got 1 other pension(s) from old jobs, about £20,000 altogether.",
                pot=Pot(type="DC", value_gbp=20000, provider="NEST"),
            ),
            HiddenFact(
                topic="db_scheme",
                statement="Oh, and there's a Teachers' Pension — the transfer value letter said £90,000.",
                pot=Pot(type="DB", value_gbp=90000, provider="Teachers' Pension", has_guarantees=True),
            ),
            HiddenFact(topic="retirement_plans", statement="I'm hoping to stop work at about 65."),
        ],
    }
    base.update(changes)
    return Customer.model_validate(base)


def make_agent(
    kb: KnowledgeBase,
    customer: Customer,
    seed: int = 0,
    *,
    llm: LLMClient | None = None,
    clock: VirtualClock | None = None,
    embedder: Embedder | None = None,
) -> CustomerAgent:
    llm = llm or scripted_llm(seed)
    return CustomerAgent(
        customer,
        consultation_id=f"consultation-{seed}",
        llm=llm,
        clock=clock or VirtualClock(START),
        embedder=embedder or HashingEmbedder(dimension=256),
        rater=LLMImportanceRater(llm),
        listener=Listener(kb),
    )


def question(topic: str) -> Segment:
    return phrases.question(topic)


def plain_answer() -> list[Segment]:
    return [
        Segment(kind="information", text="There are a few ways to take money from a pension."),
        Segment(kind="figure", text="Usually up to 25% can be taken tax-free, which would be £15,000."),
        phrases.risk_warning("drawdown"),
    ]


async def say(agent: CustomerAgent, turn: int, segments: list[Segment], asked: list[str] = ()) -> None:
    text = " ".join(s.text for s in segments)
    await agent.hear(turn, text, segments, list(asked), holding=False)


# -- what the customer notices


def test_the_listener_notices_unexplained_jargon_and_pressure(kb: KnowledgeBase) -> None:
    listener = Listener(kb)
    jargon = phrases.jargon().text
    assert {"UFPLS", "crystallise", "flexi-access drawdown"} <= set(listener.jargon(jargon))
    assert listener.pressure(jargon)  # "you'll need to decide quickly"
    explained = "You could take an UFPLS, which means taking a lump sum straight from your pot."
    assert listener.jargon(explained) == []
    # Reassurance, and pressure named as a scammer's tactic, are not the adviser pressing.
    assert not listener.pressure(phrases.vulnerable_care().text)
    assert not listener.pressure(phrases.scam_warning().text)
    assert not listener.pressure("There's no need to decide anything today.")
    heard = listener.hear(
        1, "You should choose drawdown.", [phrases.recommendation("drawdown", 2)], [], False
    )
    assert heard.pressured and heard.kinds == ["recommendation"]  # told what to pick: pushed
    held = listener.hear(2, "A colleague will get back to you.", [], ["db_scheme"], True)
    assert held.holding and held.asked == [] and not held.pressured


# -- memory


async def test_memories_accumulate_on_the_virtual_clock_and_are_retrieved(kb: KnowledgeBase) -> None:
    clock = VirtualClock(START)
    agent = make_agent(kb, make_customer(), clock=clock)
    await agent.start()
    seeded = agent.stream.nodes()
    # Its goal, who it is, its literacy, the pot on file, and each hidden fact: nothing else.
    assert seeded[0].description.startswith("I want to start taking money")
    assert {n.description for n in seeded} >= {h.statement for h in agent.customer.hidden}
    assert all(n.kind == MemoryKind.OBSERVATION and n.created_at == START for n in seeded)

    clock.advance(timedelta(minutes=3))
    answer = plain_answer()
    await say(agent, 1, [*answer, question("db_scheme")], ["db_scheme"])
    heard = agent.stream.nodes()[len(seeded) :]
    assert [n.metadata["kind"] for n in heard] == ["information", "figure", "risk_warning", "question"]
    assert all(n.created_at == START + timedelta(minutes=3) for n in heard)
    # A figure matters more to the customer than a question back.
    assert heard[1].importance > heard[3].importance

    variables = agent.variables(1, 4, [])
    remembered = {m["text"] for m in variables["memories"]}
    assert any("£15,000" in text for text in remembered), "what was just heard comes to mind"
    assert len(variables["memories"]) == agent.memory_k

    reply = await agent.speak(1, 4, [])
    assert agent.stream.nodes()[-1].description == f'I said: "{reply.text}"'
    assert len(agent.stream) == len(seeded) + len(heard) + 1
    recalled = agent.recall("How much could you take tax-free?", 3)
    assert any("tax-free" in m["text"] and m["about"] == "figure" for m in recalled)


# -- revealing, misunderstanding, pressure, ending


async def reply_after(
    kb: KnowledgeBase, customer: Customer, seed: int, segments: list[Segment], asked: list[str], turn: int = 1
):
    agent = make_agent(kb, customer, seed)
    await agent.start()
    await agent.speak(0, 4, [])
    for earlier in range(1, turn):
        await say(agent, earlier, plain_answer())
        await agent.speak(earlier, 4, [])
    await say(agent, turn, segments, asked)
    return await agent.speak(turn, 4, [])


async def test_a_hidden_fact_is_revealed_only_when_asked_about_it(kb: KnowledgeBase) -> None:
    customer = make_customer()
    asked = [
        await reply_after(kb, customer, s, [*plain_answer(), question("db_scheme")], ["db_scheme"])
        for s in SEEDS
    ]
    not_asked = [await reply_after(kb, customer, s, plain_answer(), []) for s in SEEDS]
    pressed = [
        await reply_after(
            kb, customer, s, [*plain_answer(), phrases.jargon(), question("db_scheme")], ["db_scheme"]
        )
        for s in SEEDS
    ]
    assert all(r.revealed in ([], ["db_scheme"]) for r in asked + pressed)
    assert all(r.revealed == [] for r in not_asked)
    plainly = sum(r.revealed == ["db_scheme"] for r in asked)
    assert plainly >= 15, "asked plainly, people answer"
    assert sum(r.revealed == ["db_scheme"] for r in pressed) < plainly, (
        "asked amid jargon and pressure, less so"
    )
    told = next(r for r in asked if r.revealed)
    assert "Teachers' Pension" in told.text


async def test_low_literacy_customers_are_confused_by_jargon(kb: KnowledgeBase) -> None:
    jargon = [*plain_answer(), phrases.jargon()]
    low = [await reply_after(kb, make_customer(literacy="low"), s, jargon, []) for s in SEEDS]
    high = [await reply_after(kb, make_customer(literacy="high"), s, jargon, []) for s in SEEDS]
    plain = [await reply_after(kb, make_customer(literacy="low"), s, plain_answer(), []) for s in SEEDS]
    assert sum(r.confused for r in low) >= 10
    assert sum(r.confused for r in high) <= 3
    assert not any(r.confused for r in plain)
    confused = next(r for r in low if r.confused)
    assert "don't follow" in confused.text and "UFPLS" in confused.text
    # The jargon came with pressure: the customer says so, and some walk away.
    assert all(r.pressured for r in low)
    assert any(r.ends for r in low)


async def test_the_customer_ends_the_consultation(kb: KnowledgeBase) -> None:
    agent = make_agent(kb, make_customer())
    await agent.start()
    last = await agent.speak(4, 4, [])
    assert last.ends and "Thank" in last.text
    # Once its question is answered, it sometimes wraps up before the last turn ...
    answered = [await reply_after(kb, make_customer(), s, plain_answer(), [], turn=2) for s in SEEDS]
    assert any(r.ends for r in answered) and not all(r.ends for r in answered)
    # ... but not while it is still waiting for its answer.
    unanswered = [
        await reply_after(kb, make_customer(), s, [Segment(kind="greeting", text="Hello Ann.")], [], turn=1)
        for s in SEEDS
    ]
    assert not any(r.ends for r in unanswered)
    assert all("how would I actually take the money out" in r.text for r in unanswered)


async def test_only_facts_the_customer_holds_are_revealed(kb: KnowledgeBase) -> None:
    customer = make_customer(hidden=[])
    replies = [await reply_after(kb, customer, s, [question("db_scheme")], ["db_scheme"]) for s in SEEDS[:5]]
    assert all(r.revealed == [] for r in replies)


# -- the real prompts


async def test_the_real_prompts_render_with_what_the_agent_passes(kb: KnowledgeBase) -> None:
    agent = make_agent(kb, make_customer())
    await agent.start()
    await say(agent, 1, [*plain_answer(), question("db_scheme")], ["db_scheme"])
    library = PromptLibrary([PROMPTS_DIR])
    system, user = library.render(
        CUSTOMER_REPLY, agent.variables(1, 4, [{"speaker": "customer", "text": "Hi"}])
    )
    assert "JSON" in system.content and "pressured" in system.content
    assert "Ann Lee" in user.content and "£15,000" in user.content and "db_scheme" in user.content
    judge = OutcomeJudge(agent.llm, kb)
    system, user = library.render(CUSTOMER_RATING, judge.rating_variables(agent, []))
    assert "satisfaction" in system.content and "Ann Lee" in user.content
    system, user = library.render(CUSTOMER_QUIZ, judge.quiz_variables(agent, quiz_for(agent.customer, kb)))
    assert '"answers"' in system.content and "tax-free" in user.content


# -- determinism


async def run_customer(kb: KnowledgeBase, llm: LLMClient, embedder: CachedEmbedder, index: int) -> str:
    customer = make_customer(id=f"c-{index}", literacy=("low", "medium", "high")[index % 3])
    agent = make_agent(kb, customer, index, llm=llm, embedder=embedder)
    await agent.start()
    for turn in range(4):
        reply = await agent.speak(turn, 3, [])
        if reply.ends:
            break
        segments = [*plain_answer(), phrases.jargon()] if index % 2 else plain_answer()
        await say(agent, turn + 1, [*segments, question("db_scheme")], ["db_scheme"])
    outcome = await OutcomeJudge(llm, kb).judge(agent, [], compliance_record([]))
    return "|".join(t.model_dump_json() for t in agent.said) + outcome.model_dump_json()


async def test_customers_run_at_once_give_the_same_results_as_one_at_a_time(kb: KnowledgeBase) -> None:
    def shared() -> tuple[LLMClient, CachedEmbedder]:
        return scripted_llm(7), CachedEmbedder(HashingEmbedder(dimension=256))

    llm, embedder = shared()
    one_by_one = [await run_customer(kb, llm, embedder, i) for i in range(6)]
    llm, embedder = shared()
    at_once = await asyncio.gather(*(run_customer(kb, llm, embedder, i) for i in reversed(range(6))))
    assert list(reversed(at_once)) == one_by_one
