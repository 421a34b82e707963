"""The review queue store, run against SQLite and a real throwaway PostgreSQL server."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from compliance.review_queue import (
    ClaimStatus,
    ConversationTurn,
    DecisionStatus,
    EventKind,
    ItemStatus,
    JudgeVerdictRecord,
    NewReviewItem,
    PriorityPolicy,
    QueueFilter,
    ReleaseStatus,
    RetrievedContext,
    RetrievedRecord,
    ReviewPayload,
    ReviewQueue,
    RiskFactor,
    RiskWeights,
    RuleHitRecord,
    cohen_kappa,
    needs_double_review,
)
from simulacra.clock import VirtualClock
from tests.postgres import PostgresServer, PostgresUnavailable, find_bin_dir

START = datetime(2026, 4, 6, 9, 0, tzinfo=UTC)
RACERS = 8


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        server = PostgresServer()
        server.start()
    except PostgresUnavailable as exc:
        pytest.fail(f"the PostgreSQL half of the review queue suite cannot run: {exc}")
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'queue.db'}"
    return request.getfixturevalue("postgres_server").create_schema("review_queue")


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(START)


@pytest.fixture
def make_queue(db_url: str, clock: VirtualClock) -> Iterator[Callable[..., ReviewQueue]]:
    opened: list[ReviewQueue] = []

    def make(**options: Any) -> ReviewQueue:
        options.setdefault("double_review_rate", 0.0)
        queue = ReviewQueue(db_url, clock, **options)
        opened.append(queue)
        return queue

    yield make
    for queue in opened:
        queue.close()


@pytest.fixture
def queue(make_queue: Callable[..., ReviewQueue]) -> ReviewQueue:
    return make_queue()


def verdict(
    judge_id: str, passed: bool | None, codes: list[str] = (), confidence: float = 0.7
) -> JudgeVerdictRecord:
    return JudgeVerdictRecord(
        judge_id=judge_id,
        vendor="openai" if judge_id.endswith("a") else "anthropic",
        model="m",
        prompt_version="v1",
        passed=passed,
        confidence=None if passed is None else confidence,
        codes=list(codes),
        reasoning="because",
        error="timeout" if passed is None else None,
    )


def new_item(
    *,
    source: str = "training",
    risk: float | None = 0.5,
    codes: list[str] = ("FALSE_CERTAINTY",),
    stage: str = "judges",
    mode: str = "training",
    reply: str = "Drawdown keeps your pot invested; an annuity pays a guaranteed income.",
    verdicts: list[JudgeVerdictRecord] = (),
    factors: list[RiskFactor] = (),
    session_id: str | None = None,
) -> NewReviewItem:
    return NewReviewItem(
        source=source,
        mode=mode,
        stage=stage,
        reason="split vote",
        codes=list(codes),
        risk=risk,
        risk_factors=list(factors),
        consultation_id="c-1",
        session_id=session_id or ("s-1" if source == "live" else None),
        payload=ReviewPayload(
            customer={"age": 58, "pots": [{"type": "DC", "value_gbp": 42000}]},
            conversation=[ConversationTurn(role="customer", text="What are my options?", at=START)],
            candidate_reply=reply,
            retrieved=RetrievedContext(cases=[RetrievedRecord(id="case-1", text="a similar consultation")]),
            rule_hits=[RuleHitRecord(rule_id="R1", code="FALSE_CERTAINTY", source="PRIN 2A")],
            verdicts=list(verdicts),
        ),
    )


def claimed(queue: ReviewQueue, item_id: str, reviewer: str) -> None:
    result = queue.claim(item_id, reviewer, 600)
    assert result.ok, result.message


def run_at_once(calls: list[Callable[[], Any]]) -> list[Any]:
    """Start every call on its own thread behind a barrier so they hit the database together."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = calls[i]()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return results


# ---------------------------------------------------------------------- enqueue, priority, filters


def test_items_round_trip_with_their_evidence(queue: ReviewQueue) -> None:
    submitted = new_item(verdicts=[verdict("j1a", False, ["FALSE_CERTAINTY"])])
    item_id = queue.enqueue(submitted)
    item = queue.get(item_id)
    assert item is not None
    assert item.id == item_id and item.created_at == START
    assert item.payload == submitted.payload
    assert item.model_dump(exclude={"id", "created_at"}) == submitted.model_dump()
    assert queue.state(item_id).status is ItemStatus.OPEN


def test_list_is_ordered_by_risk_and_age_from_the_clock(queue: ReviewQueue, clock: VirtualClock) -> None:
    old_low = queue.enqueue(new_item(risk=0.1))
    clock.advance(timedelta(hours=1))
    new_high = queue.enqueue(new_item(risk=0.9))
    new_mid = queue.enqueue(new_item(risk=0.5))
    entries = queue.list_open()
    assert [e.item.id for e in entries] == [new_high, new_mid, old_low]
    # priority = risk + age / 4h: the old item has 0.1 + 0.25 = 0.35
    assert [round(e.priority, 6) for e in entries] == [0.9, 0.5, 0.35]
    assert entries[2].age == timedelta(hours=1)

    clock.advance(timedelta(hours=2))  # priorities grow with waiting time, read from the clock
    assert [round(e.priority, 6) for e in queue.list_open()] == [1.4, 1.0, 0.85]
    clock.advance(timedelta(hours=3))
    # An item that waited long enough outranks a riskier newcomer: 0.1 + 1.5 > 0.9
    newcomer = queue.enqueue(new_item(risk=0.9))
    ranked = queue.list_open()
    assert [e.item.id for e in ranked] == [new_high, new_mid, old_low, newcomer]
    assert [round(e.priority, 6) for e in ranked] == [2.15, 1.75, 1.6, 0.9]


def test_live_items_rank_above_equal_training_items_and_are_told_apart(queue: ReviewQueue) -> None:
    training = queue.enqueue(new_item(source="training", risk=0.6))
    live = queue.enqueue(new_item(source="live", risk=0.4, session_id="sess-9"))
    entries = queue.list_open()
    assert [e.item.id for e in entries] == [live, training]  # 0.4 + 0.5 live bonus > 0.6
    assert entries[0].item.source == "live" and entries[0].item.session_id == "sess-9"
    assert [e.item.id for e in queue.list_open(QueueFilter(source="training"))] == [training]
    assert queue.stats().by_source == {"live": 1, "training": 1}


def test_a_live_item_must_name_its_session() -> None:
    with pytest.raises(ValidationError, match="session_id"):
        NewReviewItem(
            source="live",
            mode="production",
            stage="judges",
            reason="r",
            payload=ReviewPayload(candidate_reply="x"),
        )


def test_filters_by_code_stage_mode_source_and_age(queue: ReviewQueue, clock: VirtualClock) -> None:
    a = queue.enqueue(new_item(codes=["MISSING_DB_WARNING", "PERSONAL_RECOMMENDATION"], stage="rules"))
    clock.advance(timedelta(hours=2))
    b = queue.enqueue(new_item(codes=["PERSONAL_RECOMMENDATION"], mode="production"))
    clock.advance(timedelta(hours=2))
    c = queue.enqueue(new_item(codes=["SCAM_RISK_IGNORED"], source="live"))

    def ids(**kw: Any) -> set[str]:
        return {e.item.id for e in queue.list_open(QueueFilter(**kw))}

    assert ids(code="PERSONAL_RECOMMENDATION") == {a, b}
    assert ids(code="MISSING_DB_WARNING") == {a}
    assert ids(code="FACTUAL_ERROR") == set()
    assert ids(stage="rules") == {a}
    assert ids(mode="production") == {b}
    assert ids(source="live") == {c}
    assert ids(session_id="s-1") == {c}
    assert ids(session_id="s-2") == set()
    assert ids(min_age=timedelta(hours=1)) == {a, b}
    assert ids(max_age=timedelta(hours=3)) == {b, c}
    assert ids(min_age=timedelta(hours=1), max_age=timedelta(hours=3)) == {b}
    assert ids(code="PERSONAL_RECOMMENDATION", stage="judges") == {b}
    assert len(queue.list_open(limit=2)) == 2
    with pytest.raises(ValueError):
        queue.list_open(limit=0)


def test_stats_count_waiting_and_claimed_and_age_the_oldest(queue: ReviewQueue, clock: VirtualClock) -> None:
    empty = queue.stats()
    assert (empty.waiting, empty.claimed, empty.oldest_age, empty.oldest_item_id) == (0, 0, None, None)
    first = queue.enqueue(new_item())
    clock.advance(timedelta(minutes=30))
    second = queue.enqueue(new_item(source="live"))
    clock.advance(timedelta(minutes=15))
    claimed(queue, second, "alice")
    stats = queue.stats()
    assert (stats.waiting, stats.claimed) == (2, 1)
    assert stats.oldest_item_id == first and stats.oldest_age == timedelta(minutes=45)
    assert queue.stats(QueueFilter(source="live")).oldest_age == timedelta(minutes=15)
    claimed(queue, first, "bob")
    queue.decide(first, "bob", "approve")
    assert queue.stats().waiting == 1 and queue.stats().oldest_item_id == second


def test_risk_comes_from_factors_when_not_given(queue: ReviewQueue) -> None:
    weights = RiskWeights()
    assert weights.score([]) == 0.0
    assert weights.score([RiskFactor.DB_TRANSFER]) == pytest.approx(0.5)
    # noisy-or: 1 - (1 - 0.5)(1 - 0.4)
    assert weights.score([RiskFactor.DB_TRANSFER, RiskFactor.VULNERABLE]) == pytest.approx(0.7)
    item_id = queue.enqueue(new_item(risk=None, factors=[RiskFactor.DB_TRANSFER, RiskFactor.VULNERABLE]))
    assert queue.get(item_id).risk == pytest.approx(0.7)
    explicit = queue.enqueue(new_item(risk=0.05, factors=[RiskFactor.DB_TRANSFER]))
    assert queue.get(explicit).risk == pytest.approx(0.05)


def test_priority_policy_is_configurable(make_queue: Callable[..., ReviewQueue], clock: VirtualClock) -> None:
    queue = make_queue(priority=PriorityPolicy(age_per_risk_point=timedelta(minutes=10), live_bonus=0.0))
    old = queue.enqueue(new_item(risk=0.0))
    clock.advance(timedelta(minutes=11))
    fresh = queue.enqueue(new_item(source="live", risk=1.0))
    assert [e.item.id for e in queue.list_open()] == [old, fresh]


def test_enqueue_is_idempotent_by_id_and_refuses_a_clash(queue: ReviewQueue) -> None:
    item = new_item()
    assert queue.enqueue(item, item_id="sess-1-turn-3") == "sess-1-turn-3"
    assert queue.enqueue(item, item_id="sess-1-turn-3") == "sess-1-turn-3"
    assert len(queue.list_open()) == 1
    assert [e.kind for e in queue.history("sess-1-turn-3")] == [EventKind.CREATED]
    with pytest.raises(ValueError, match="different content"):
        queue.enqueue(new_item(reply="something else"), item_id="sess-1-turn-3")


def test_naive_clocks_get_naive_times_back(db_url: str) -> None:
    clock = VirtualClock(datetime(2026, 4, 6, 9, 0))
    with ReviewQueue(db_url, clock) as queue:
        item_id = queue.enqueue(new_item())
        clock.advance(timedelta(minutes=5))
        result = queue.claim(item_id, "alice", 60)
        assert queue.get(item_id).created_at == datetime(2026, 4, 6, 9, 0)
        assert result.lease_expires_at == datetime(2026, 4, 6, 9, 6)


# ---------------------------------------------------------------------- claims and leases


def test_concurrent_claims_have_exactly_one_winner(make_queue: Callable[..., ReviewQueue]) -> None:
    queues = [make_queue() for _ in range(RACERS)]  # one engine each, like separate app processes
    for _ in range(3):
        item_id = queues[0].enqueue(new_item())
        results = run_at_once(
            [lambda q=q, i=i, item=item_id: q.claim(item, f"reviewer-{i}", 600) for i, q in enumerate(queues)]
        )
        winners = [r for r in results if r.ok]
        assert len(winners) == 1
        losers = [r for r in results if not r.ok]
        assert {r.status for r in losers} == {ClaimStatus.HELD_BY_OTHER}
        assert {r.holder for r in losers} == {winners[0].holder}
        claims = [e for e in queues[0].history(item_id) if e.kind is EventKind.CLAIMED]
        assert [e.actor for e in claims] == [winners[0].holder]
        assert queues[0].state(item_id).lease_holder == winners[0].holder


def test_concurrent_claim_next_hands_out_distinct_items(make_queue: Callable[..., ReviewQueue]) -> None:
    queues = [make_queue() for _ in range(RACERS)]
    items = {queues[0].enqueue(new_item(risk=i / 10)) for i in range(RACERS - 2)}
    results = run_at_once(
        [lambda q=q, i=i: q.claim_next(f"reviewer-{i}", lease_seconds=600) for i, q in enumerate(queues)]
    )
    won = [r.item_id for r in results if r.ok]
    assert sorted(won) == sorted(items)  # every item claimed exactly once
    assert sum(r.status is ClaimStatus.NOTHING_AVAILABLE for r in results) == 2


def test_a_live_lease_blocks_others_with_a_clear_result(queue: ReviewQueue, clock: VirtualClock) -> None:
    item_id = queue.enqueue(new_item())
    first = queue.claim(item_id, "alice", 300)
    assert first.status is ClaimStatus.CLAIMED and first.lease_expires_at == START + timedelta(seconds=300)
    taken = queue.claim(item_id, "bob", 300)
    assert taken.status is ClaimStatus.HELD_BY_OTHER and not taken.ok
    assert taken.holder == "alice" and "alice" in taken.message
    listed = queue.list_open()[0].state
    assert listed.lease_holder == "alice" and listed.lease_expires_at == START + timedelta(seconds=300)
    clock.advance(timedelta(seconds=100))
    renewed = queue.claim(item_id, "alice", 300)
    assert renewed.status is ClaimStatus.RENEWED and renewed.lease_expires_at == START + timedelta(
        seconds=400
    )
    assert queue.claim("missing", "bob").status is ClaimStatus.NOT_FOUND
    with pytest.raises(ValueError):
        queue.claim(item_id, "  ")
    with pytest.raises(ValueError):
        queue.claim(item_id, "bob", 0)


def test_an_expired_lease_can_be_claimed_again_and_is_audited(
    queue: ReviewQueue, clock: VirtualClock
) -> None:
    item_id = queue.enqueue(new_item())
    claimed_at = START
    queue.claim(item_id, "alice", 60)
    clock.advance(timedelta(seconds=59))
    assert queue.claim(item_id, "bob", 60).status is ClaimStatus.HELD_BY_OTHER
    clock.advance(timedelta(seconds=1))  # exactly at expiry the lease is over
    assert queue.state(item_id).lease_holder is None
    result = queue.claim(item_id, "bob", 60)
    assert result.status is ClaimStatus.CLAIMED and result.holder == "bob"
    events = queue.history(item_id)
    assert [(e.kind, e.actor) for e in events] == [
        (EventKind.CREATED, "validator"),
        (EventKind.CLAIMED, "alice"),
        (EventKind.LEASE_EXPIRED, "alice"),
        (EventKind.CLAIMED, "bob"),
    ]
    assert events[1].at == claimed_at
    assert events[2].at == START + timedelta(seconds=60)
    assert events[2].detail["expired_at"] == (START + timedelta(seconds=60)).isoformat()
    assert events[3].detail["reclaimed_from"] == "alice"


def test_expire_leases_sweeps_and_records(queue: ReviewQueue, clock: VirtualClock) -> None:
    a = queue.enqueue(new_item())
    b = queue.enqueue(new_item())
    queue.claim(a, "alice", 60)
    queue.claim(b, "bob", 600)
    clock.advance(timedelta(seconds=120))
    assert queue.expire_leases() == 1
    assert queue.expire_leases() == 0
    assert [e.kind for e in queue.history(a)][-1] is EventKind.LEASE_EXPIRED
    assert queue.state(b).lease_holder == "bob"
    assert queue.claim(a, "carol", 60).ok


def test_release_by_the_holder_only(queue: ReviewQueue) -> None:
    item_id = queue.enqueue(new_item())
    queue.claim(item_id, "alice", 60)
    refused = queue.release(item_id, "bob")
    assert refused.status is ReleaseStatus.NOT_HOLDER and "alice" in refused.message
    released = queue.release(item_id, "alice", "need a pension transfer specialist")
    assert released.ok
    assert queue.release("missing", "alice").status is ReleaseStatus.NOT_FOUND
    assert queue.claim(item_id, "bob", 60).ok
    event = next(e for e in queue.history(item_id) if e.kind is EventKind.RELEASED)
    assert (event.actor, event.reason) == ("alice", "need a pension transfer specialist")


def test_claim_next_takes_the_top_item_this_reviewer_may_take(queue: ReviewQueue) -> None:
    low = queue.enqueue(new_item(risk=0.1, codes=["FACTUAL_ERROR"]))
    high = queue.enqueue(new_item(risk=0.9))
    mid = queue.enqueue(new_item(risk=0.5))
    assert queue.claim(high, "bob", 600).ok
    first = queue.claim_next("alice", lease_seconds=600)
    assert first.item_id == mid  # the top item is taken by bob
    assert queue.claim_next("carol", QueueFilter(code="FACTUAL_ERROR")).item_id == low
    assert queue.claim_next("dave").status is ClaimStatus.NOTHING_AVAILABLE


# ---------------------------------------------------------------------- decisions


def test_only_the_lease_holder_decides(queue: ReviewQueue, clock: VirtualClock) -> None:
    item_id = queue.enqueue(new_item())
    unclaimed = queue.decide(item_id, "alice", "approve")
    assert unclaimed.status is DecisionStatus.NOT_HOLDER and not unclaimed.ok
    queue.claim(item_id, "alice", 60)
    other = queue.decide(item_id, "bob", "approve")
    assert other.status is DecisionStatus.HELD_BY_OTHER and "alice" in other.message
    clock.advance(timedelta(seconds=61))
    expired = queue.decide(item_id, "alice", "approve")
    assert expired.status is DecisionStatus.LEASE_EXPIRED and "claim it again" in expired.message
    queue.claim(item_id, "bob", 60)
    stolen = queue.decide(item_id, "alice", "approve")
    assert stolen.status is DecisionStatus.HELD_BY_OTHER and "bob" in stolen.message
    assert queue.decisions(item_id) == []
    done = queue.decide(item_id, "bob", "reject", ["PERSONAL_RECOMMENDATION"], "steers to drawdown")
    assert done.ok and done.decision.reviewer == "bob"
    assert queue.decide(item_id, "carol", "approve").status is DecisionStatus.CLOSED
    assert queue.decide("missing", "carol", "approve").status is DecisionStatus.NOT_FOUND


def test_a_double_click_records_one_decision(queue: ReviewQueue) -> None:
    item_id = queue.enqueue(new_item())
    claimed(queue, item_id, "alice")
    first = queue.decide(item_id, "alice", "approve", reason="fine")
    again = queue.decide(item_id, "alice", "approve", reason="fine")
    assert first.ok and again.status is DecisionStatus.ALREADY_DECIDED
    assert again.decision == first.decision and again.outcome is None
    different = queue.decide(item_id, "alice", "reject", ["FALSE_CERTAINTY"])
    assert different.status is DecisionStatus.ALREADY_DECIDED and "not stored" in different.message
    assert [d.decision for d in queue.decisions(item_id)] == ["approve"]
    assert queue.outcome(item_id).decision == "approve"


def test_simultaneous_double_clicks_record_one_decision(make_queue: Callable[..., ReviewQueue]) -> None:
    queues = [make_queue() for _ in range(4)]
    item_id = queues[0].enqueue(new_item())
    claimed(queues[0], item_id, "alice")
    results = run_at_once([lambda q=q: q.decide(item_id, "alice", "approve", reason="ok") for q in queues])
    assert sorted(r.status for r in results) == sorted(
        [DecisionStatus.RECORDED] + [DecisionStatus.ALREADY_DECIDED] * 3
    )
    assert len(queues[0].decisions(item_id)) == 1
    assert len(queues[0].decided_since()) == 1
    assert [e.kind for e in queues[0].history(item_id)].count(EventKind.DECIDED) == 1


def test_edit_approve_needs_text_and_records_its_validation(queue: ReviewQueue) -> None:
    item_id = queue.enqueue(new_item(source="live", session_id="sess-7"))
    claimed(queue, item_id, "alice")
    with pytest.raises(ValidationError, match="edited text"):
        queue.decide(item_id, "alice", "edit_approve", reason="tone")
    with pytest.raises(ValidationError, match="edited text"):
        queue.decide(item_id, "alice", "edit_approve", edited_text="   ", edited_text_passed=True)
    with pytest.raises(ValidationError, match="edited_text_passed"):
        queue.decide(item_id, "alice", "edit_approve", edited_text="Better text.")
    with pytest.raises(ValidationError, match="no edited text"):
        queue.decide(item_id, "alice", "approve", edited_text="Better text.")
    with pytest.raises(ValidationError, match="reason code"):
        queue.decide(item_id, "alice", "reject", reason="no codes")
    assert queue.decisions(item_id) == []  # nothing stored by refused requests
    result = queue.decide(
        item_id,
        "alice",
        "edit_approve",
        ["MISSING_RISK_DISCLOSURE"],
        "added the risk warning",
        "Better text with the risk warning.",
        edited_text_passed=True,
    )
    assert result.ok
    assert result.decision.edited_text_passed is True
    outcome = queue.outcome(item_id)
    assert outcome.decision == "edit_approve"
    assert outcome.text == "Better text with the risk warning."
    assert outcome.edited_text_passed is True
    assert (outcome.source, outcome.session_id) == ("live", "sess-7")


def test_history_is_complete_and_in_order(queue: ReviewQueue, clock: VirtualClock) -> None:
    item_id = queue.enqueue(new_item(), actor="validator:production")
    clock.advance(timedelta(minutes=1))
    queue.claim(item_id, "alice", 60)
    clock.advance(timedelta(seconds=30))
    queue.release(item_id, "alice", "conflict of interest")
    queue.claim(item_id, "bob", 60)
    clock.advance(timedelta(minutes=5))
    queue.claim(item_id, "carol", 120)
    clock.advance(timedelta(minutes=1))
    queue.decide(item_id, "carol", "reject", ["PERSONAL_RECOMMENDATION"], "recommends drawdown")
    events = queue.history(item_id)
    t0 = START
    assert [(e.kind, e.actor, e.at - t0) for e in events] == [
        (EventKind.CREATED, "validator:production", timedelta(0)),
        (EventKind.CLAIMED, "alice", timedelta(minutes=1)),
        (EventKind.RELEASED, "alice", timedelta(minutes=1, seconds=30)),
        (EventKind.CLAIMED, "bob", timedelta(minutes=1, seconds=30)),
        (EventKind.LEASE_EXPIRED, "bob", timedelta(minutes=6, seconds=30)),
        (EventKind.CLAIMED, "carol", timedelta(minutes=6, seconds=30)),
        (EventKind.DECIDED, "carol", timedelta(minutes=7, seconds=30)),
        (EventKind.CLOSED, "review_queue", timedelta(minutes=7, seconds=30)),
    ]
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert events[0].reason == "split vote"
    assert events[2].reason == "conflict of interest"
    assert events[6].reason == "recommends drawdown"
    assert events[6].detail["decision"] == "reject"
    assert events[6].detail["reason_codes"] == ["PERSONAL_RECOMMENDATION"]


def test_decision_and_audit_tables_are_append_only(queue: ReviewQueue, db_url: str) -> None:
    statements: list[str] = []

    def spy(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement.upper())

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", spy)
    try:
        item_id = queue.enqueue(new_item())
        queue.claim(item_id, "alice", 60)
        queue.decide(item_id, "alice", "approve")
        queue.decide(item_id, "alice", "approve")
        other = queue.enqueue(new_item())
        queue.claim(other, "alice", 60)
        queue.release(other, "alice")
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", spy)
    writes = [s for s in statements if s.lstrip().startswith(("UPDATE", "DELETE"))]
    assert writes, "the spy saw no writes at all"
    protected = ("REVIEW_DECISIONS", "REVIEW_EVENTS", "REVIEW_OUTCOMES")
    assert not [s for s in writes if any(t in s.split("SET")[0] for t in protected)]

    # And the database itself refuses, whoever tries.
    raw = sa.create_engine(db_url)
    try:
        for table in ("review_decisions", "review_events", "review_outcomes"):
            for statement in (f"UPDATE {table} SET item_id = item_id", f"DELETE FROM {table}"):
                with pytest.raises(sa.exc.DatabaseError, match="append-only"), raw.begin() as conn:
                    conn.execute(sa.text(statement))
    finally:
        raw.dispose()
    assert len(queue.decisions(item_id)) == 1


# ---------------------------------------------------------------------- double review and agreement


def test_double_review_sample_is_deterministic_by_id() -> None:
    ids = [f"item-{i}" for i in range(4000)]
    sample = [i for i in ids if needs_double_review(i, 0.25)]
    assert sample == [i for i in ids if needs_double_review(i, 0.25)]
    assert 0.22 < len(sample) / len(ids) < 0.28
    assert not any(needs_double_review(i, 0.0) for i in ids)
    assert all(needs_double_review(i, 1.0) for i in ids)
    assert set(sample) <= {i for i in ids if needs_double_review(i, 0.5)}  # a larger rate is a superset
    with pytest.raises(ValueError):
        needs_double_review("x", 1.5)


def test_the_queue_applies_the_sample_rate(make_queue: Callable[..., ReviewQueue]) -> None:
    queue = make_queue(double_review_rate=0.5)
    ids = [f"item-{i}" for i in range(12)]
    for item_id in ids:
        queue.enqueue(new_item(), item_id=item_id)
    required = {i: queue.state(i).reviews_required for i in ids}
    assert required == {i: 2 if needs_double_review(i, 0.5) else 1 for i in ids}
    assert set(required.values()) == {1, 2}


def test_second_review_is_blind_and_independent(make_queue: Callable[..., ReviewQueue]) -> None:
    queue = make_queue(double_review_rate=1.0)
    item_id = queue.enqueue(new_item())
    claimed(queue, item_id, "alice")
    first = queue.decide(item_id, "alice", "approve", reason="alice thinks it is fine")
    assert first.ok and first.outcome is None
    state = queue.state(item_id)
    assert (state.status, state.reviews_done, state.reviews_required) == (ItemStatus.OPEN, 1, 2)
    assert queue.outcome(item_id) is None

    bobs = queue.view(item_id, "bob")
    assert bobs.blind and bobs.decisions == []
    assert EventKind.DECIDED not in [e.kind for e in bobs.history]
    assert "alice thinks" not in bobs.model_dump_json()
    assert "alice thinks" not in queue.list_open()[0].model_dump_json()
    assert [d.reviewer for d in queue.view(item_id, "alice").decisions] == ["alice"]

    again = queue.claim(item_id, "alice", 60)
    assert again.status is ClaimStatus.ALREADY_REVIEWED
    assert queue.claim_next("alice").status is ClaimStatus.NOTHING_AVAILABLE
    assert queue.claim_next("bob").item_id == item_id
    second = queue.decide(item_id, "bob", "approve", reason="bob agrees")
    assert second.ok and second.decision.review_round == 2
    outcome = second.outcome
    assert outcome.decision == "approve" and outcome.reviewers == ["alice", "bob"]
    assert outcome.reason == "alice thinks it is fine; bob agrees"
    after = queue.view(item_id, "bob")
    assert not after.blind and [d.reviewer for d in after.decisions] == ["alice", "bob"]


def test_disagreeing_reviews_go_to_an_adjudicator_who_sees_both(
    make_queue: Callable[..., ReviewQueue],
) -> None:
    queue = make_queue(double_review_rate=1.0)
    item_id = queue.enqueue(new_item())
    claimed(queue, item_id, "alice")
    queue.decide(item_id, "alice", "approve")
    claimed(queue, item_id, "bob")
    second = queue.decide(item_id, "bob", "reject", ["PERSONAL_RECOMMENDATION"], "steers")
    assert second.ok and second.outcome is None
    state = queue.state(item_id)
    assert (state.status, state.reviews_done, state.reviews_required) == (ItemStatus.OPEN, 2, 3)
    assert EventKind.ADJUDICATION_REQUIRED in [e.kind for e in queue.history(item_id)]
    assert queue.claim(item_id, "bob", 60).status is ClaimStatus.ALREADY_REVIEWED
    carols = queue.view(item_id, "carol")
    assert not carols.blind and [d.decision for d in carols.decisions] == ["approve", "reject"]
    claimed(queue, item_id, "carol")
    final = queue.decide(item_id, "carol", "reject", ["PERSONAL_RECOMMENDATION"], "adjudicated")
    assert final.outcome.decision == "reject" and final.outcome.text is None
    assert final.outcome.reviewers == ["alice", "bob", "carol"]
    assert final.outcome.reason == "adjudicated"


def test_different_edits_also_need_adjudication(make_queue: Callable[..., ReviewQueue]) -> None:
    queue = make_queue(double_review_rate=1.0)
    item_id = queue.enqueue(new_item())
    for reviewer, text in (("alice", "Text A."), ("bob", "Text B.")):
        claimed(queue, item_id, reviewer)
        queue.decide(
            item_id, reviewer, "edit_approve", ["FALSE_CERTAINTY"], "", text, edited_text_passed=True
        )
    assert queue.state(item_id).reviews_required == 3
    same = queue.enqueue(new_item())
    for reviewer in ("alice", "bob"):
        claimed(queue, same, reviewer)
        queue.decide(same, reviewer, "reject", [f"CODE_{reviewer.upper()}"])
    outcome = queue.outcome(same)
    assert outcome.decision == "reject" and outcome.reason_codes == ["CODE_ALICE", "CODE_BOB"]


def test_cohen_kappa_on_known_tables() -> None:
    # 50 items: 20 both approve, 5 approve/reject, 10 reject/approve, 15 both reject.
    pairs = [("approve", "approve")] * 20 + [("approve", "reject")] * 5
    pairs += [("reject", "approve")] * 10 + [("reject", "reject")] * 15
    result = cohen_kappa(pairs)
    assert result.items == 50
    assert result.observed == pytest.approx(0.7) and result.expected == pytest.approx(0.5)
    assert result.kappa == pytest.approx(0.4)
    assert cohen_kappa([("approve", "approve")] * 3).kappa is None  # chance agreement is 1
    assert cohen_kappa([]).kappa is None
    perfect = cohen_kappa([("approve", "approve"), ("reject", "reject")])
    assert perfect.kappa == pytest.approx(1.0)


def test_reviewer_agreement_over_double_reviewed_items(make_queue: Callable[..., ReviewQueue]) -> None:
    queue = make_queue(double_review_rate=1.0)
    # 6 both approve (one of them as edit-and-approve vs edit: counted on the candidate as written),
    # 1 approve/reject, 1 reject/approve, 2 both reject.
    plan = [("approve", "approve")] * 6 + [("approve", "reject"), ("reject", "approve")]
    plan += [("reject", "reject")] * 2
    for first, second in plan:
        item_id = queue.enqueue(new_item())
        for reviewer, decision in (("alice", first), ("bob", second)):
            claimed(queue, item_id, reviewer)
            codes = ["FALSE_CERTAINTY"] if decision == "reject" else []
            assert queue.decide(item_id, reviewer, decision, codes).ok
    single = make_queue(double_review_rate=0.0)  # a single-review item does not count
    lone = single.enqueue(new_item())
    claimed(single, lone, "carol")
    single.decide(lone, "carol", "reject", ["FALSE_CERTAINTY"])

    agreement = queue.agreement()
    # p_o = 0.8; each reviewer approved 7 of 10: p_e = 0.49 + 0.09 = 0.58; kappa = 0.22 / 0.42
    assert agreement.items == 10
    assert agreement.observed == pytest.approx(0.8)
    assert agreement.expected == pytest.approx(0.58)
    assert agreement.kappa == pytest.approx(0.22 / 0.42)
    assert queue.agreement(source="live").items == 0


def test_edit_approve_counts_against_the_candidate_unless_told_otherwise(
    make_queue: Callable[..., ReviewQueue],
) -> None:
    queue = make_queue(double_review_rate=1.0)
    plan = [("edit_approve", "approve"), ("approve", "approve"), ("reject", "reject")]
    for first, second in plan:
        item_id = queue.enqueue(new_item())
        for reviewer, decision in (("alice", first), ("bob", second)):
            claimed(queue, item_id, reviewer)
            extra: dict[str, Any] = {}
            if decision == "edit_approve":
                extra = {"edited_text": "Edited.", "edited_text_passed": True}
            codes = [] if decision == "approve" else ["FALSE_CERTAINTY"]
            queue.decide(item_id, reviewer, decision, codes, **extra)
    assert queue.agreement().observed == pytest.approx(2 / 3)
    assert queue.agreement(edit_approve_as="approve").observed == pytest.approx(1.0)


def test_judge_agreement_per_code(queue: ReviewQueue) -> None:
    # Item 1: the human rejects for PERSONAL_RECOMMENDATION. Judge A flagged it, judge B passed it,
    # judge C failed to answer (left out).
    one = queue.enqueue(
        new_item(
            codes=["PERSONAL_RECOMMENDATION"],
            verdicts=[
                verdict("ja", False, ["PERSONAL_RECOMMENDATION"]),
                verdict("jb", True),
                verdict("jc", None),
            ],
        )
    )
    claimed(queue, one, "alice")
    queue.decide(one, "alice", "reject", ["PERSONAL_RECOMMENDATION"])
    # Item 2: the human approves. Judge A flagged FALSE_CERTAINTY, judge B passed.
    two = queue.enqueue(
        new_item(
            codes=["PERSONAL_RECOMMENDATION"],
            verdicts=[verdict("ja", False, ["FALSE_CERTAINTY"]), verdict("jb", True)],
        )
    )
    claimed(queue, two, "alice")
    queue.decide(two, "alice", "approve")
    # Item 3: still open, so it does not count.
    queue.enqueue(new_item(codes=["FACTUAL_ERROR"], verdicts=[verdict("ja", False, ["FACTUAL_ERROR"])]))

    by_code = {row.code: row for row in queue.judge_agreement()}
    assert set(by_code) == {"PERSONAL_RECOMMENDATION", "FALSE_CERTAINTY"}
    pr = by_code["PERSONAL_RECOMMENDATION"]
    # item 1: ja agrees (both flag), jb disagrees; item 2: both judges agree (nobody flags it)
    assert (pr.comparisons, pr.matches, pr.judge_flagged, pr.human_flagged) == (4, 3, 1, 1)
    assert pr.rate == pytest.approx(0.75)
    fc = by_code["FALSE_CERTAINTY"]
    # only item 2 involves it: ja flagged, the human approved, jb passed
    assert (fc.comparisons, fc.matches, fc.judge_flagged, fc.human_flagged) == (2, 1, 1, 0)


# ---------------------------------------------------------------------- delivery to live sessions


def test_outcomes_are_delivered_in_order_with_a_cursor(queue: ReviewQueue) -> None:
    live_ok = queue.enqueue(new_item(source="live", session_id="sess-1", reply="Here are your options."))
    training = queue.enqueue(new_item(source="training"))
    live_no = queue.enqueue(new_item(source="live", session_id="sess-2"))
    assert queue.outcome(live_ok) is None
    assert queue.decided_since() == []

    claimed(queue, live_ok, "alice")
    queue.decide(live_ok, "alice", "approve", reason="fine")
    claimed(queue, training, "alice")
    queue.decide(training, "alice", "approve")
    claimed(queue, live_no, "bob")
    queue.decide(live_no, "bob", "reject", ["SCAM_RISK_IGNORED"], "missed the cold call")

    everything = queue.decided_since(0)
    assert [o.item_id for o in everything] == [live_ok, training, live_no]
    assert [o.seq for o in everything] == [1, 2, 3]
    live = queue.decided_since(0, source="live")
    assert [(o.session_id, o.decision, o.text) for o in live] == [
        ("sess-1", "approve", "Here are your options."),
        ("sess-2", "reject", None),
    ]
    assert queue.decided_since(live[0].seq, source="live") == live[1:]
    assert queue.decided_since(3) == []
    assert queue.decided_since(0, limit=1) == everything[:1]
    rejected = queue.outcome(live_no)
    assert rejected.reason_codes == ["SCAM_RISK_IGNORED"] and rejected.reviewers == ["bob"]


def test_outcome_numbers_follow_commit_order_under_concurrency(
    make_queue: Callable[..., ReviewQueue],
) -> None:
    queues = [make_queue() for _ in range(RACERS)]
    items = []
    for i, q in enumerate(queues):
        item_id = q.enqueue(new_item(source="live", session_id=f"sess-{i}"))
        claimed(q, item_id, f"reviewer-{i}")
        items.append(item_id)
    results = run_at_once(
        [lambda q=q, i=i: q.decide(items[i], f"reviewer-{i}", "approve") for i, q in enumerate(queues)]
    )
    assert all(r.ok for r in results)
    seqs = sorted(r.outcome.seq for r in results)
    assert seqs == list(range(1, RACERS + 1))
    assert [o.seq for o in queues[0].decided_since(0)] == seqs


# ---------------------------------------------------------------------- the PostgreSQL helper


def test_missing_postgres_binaries_fail_with_the_install_line(tmp_path: Path) -> None:
    with pytest.raises(PostgresUnavailable, match="apt-get install -y postgresql"):
        find_bin_dir(env={}, debian_pattern=str(tmp_path / "none" / "*" / "bin"), path="")
    fake = tmp_path / "pg" / "bin"
    fake.mkdir(parents=True)
    (fake / "initdb").write_text("")
    (fake / "pg_ctl").write_text("")
    assert find_bin_dir(env={"PG_BIN": str(fake)}, debian_pattern=str(tmp_path / "none"), path="") == fake
