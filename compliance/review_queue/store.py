"""The human review queue: escalations in, leased claims, append-only decisions, outcomes out.

One store serves both the training world and real customers (told apart by `source`), the
Streamlit review app (list, claim, view, decide) and the live endpoint (which polls
`decided_since` and delivers an approved or edited reply to the waiting session).

Concurrency: every change to an item's mutable state is a compare-and-set UPDATE guarded by its
`lease_version`, so of two reviewers claiming at once exactly one UPDATE matches a row, on SQLite
(where writers are serialised) and on PostgreSQL (where the loser's UPDATE waits for the winner's
commit and then finds the version moved). A loser simply re-reads and gets a clear answer.

Time comes only from the injected clock, so leases expire in virtual time and tests can expire
them by advancing the clock.

Review rounds: most items need one decision. A deterministic sample (by item id) needs two,
blind and independent; if those disagree on what the customer should get, a third reviewer, who
sees both, adjudicates. The final decision is written once to the outcomes table with a number
that orders outcomes by commit, which is what a poller's cursor follows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError

from compliance.review_queue import schema
from compliance.review_queue.agreement import (
    JudgedOutcome,
    Label,
    candidate_label,
    cohen_kappa,
    judge_agreement_by_code,
)
from compliance.review_queue.models import (
    Agreement,
    AuditEvent,
    ClaimResult,
    ClaimStatus,
    CodeAgreement,
    Decision,
    DecisionKind,
    DecisionRequest,
    DecisionResult,
    DecisionStatus,
    EventKind,
    ItemState,
    ItemStatus,
    NewReviewItem,
    Outcome,
    QueueEntry,
    QueueFilter,
    QueueStats,
    ReleaseResult,
    ReleaseStatus,
    ReviewerView,
    ReviewItem,
    ReviewPayload,
    Source,
)
from compliance.review_queue.policy import PriorityPolicy, RiskWeights, needs_double_review
from simulacra.clock import Clock

QUEUE_ACTOR = "review_queue"  # the actor of events the queue itself records (closing, adjudication)
_MAX_ATTEMPTS = 20  # compare-and-set retries; each retry means another writer made progress
_CLAIM_NEXT_BATCH = 25
_T = TypeVar("_T")
# Statements every escalation runs, built once with bound parameters: building a Core statement
# costs more CPU than SQLite takes to run it, on the path of a customer's held reply.
_ITEM_ROW = sa.select(schema.items).where(schema.items.c.id == sa.bindparam("item"))
_ADD_ITEM = schema.items.insert()
_ADD_ITEM_CODES = schema.item_codes.insert()
_ADD_EVENT = schema.events.insert()


class ReviewQueue:
    """The review queue store over SQLAlchemy Core: `sqlite:///path.db` or `postgresql+psycopg://...`."""

    def __init__(
        self,
        url: str,
        clock: Clock,
        *,
        double_review_rate: float = 0.1,
        default_lease: timedelta = timedelta(minutes=15),
        priority: PriorityPolicy | None = None,
        risk_weights: RiskWeights | None = None,
        engine_options: dict[str, Any] | None = None,
    ) -> None:
        if not 0.0 <= double_review_rate <= 1.0:
            raise ValueError(f"double review rate must be within 0..1, got {double_review_rate}")
        if default_lease <= timedelta(0):
            raise ValueError("a lease must last a positive time")
        self.clock = clock
        self.double_review_rate = double_review_rate
        self.default_lease = default_lease
        self.priority_policy = priority or PriorityPolicy()
        self.risk_weights = risk_weights or RiskWeights()
        self._engine = schema.create_review_engine(url, **(engine_options or {}))
        schema.create_schema(self._engine)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> ReviewQueue:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ enqueue

    def enqueue(self, item: NewReviewItem, *, item_id: str | None = None, actor: str = "validator") -> str:
        """Add an escalation and return its id.

        Passing the same `item_id` again with the same content returns the id without adding
        anything, so an escalation retried after a crash is not queued twice; different content
        under a used id is an error.
        """
        _check_identity(actor, "actor")
        item_id = item_id or uuid.uuid4().hex
        if not item_id or len(item_id) > 64:
            raise ValueError("an item id must be 1 to 64 characters")
        risk = item.risk if item.risk is not None else self.risk_weights.score(item.risk_factors)
        resolved = item.model_copy(update={"risk": risk})
        for _ in range(2):
            try:
                return self._try_enqueue(resolved, item_id, actor)
            except IntegrityError:
                continue  # the same id was inserted concurrently: the retry compares contents
        raise RuntimeError(f"could not enqueue item {item_id}")

    def _try_enqueue(self, item: NewReviewItem, item_id: str, actor: str) -> str:
        now = self.clock.now()
        now_us = schema.to_us(now)
        with self._write() as conn:
            existing = self._item_row(conn, item_id)
            if existing is not None:
                stored = _item_from_row(existing, aware=now.tzinfo is not None)
                if NewReviewItem.model_validate(stored.model_dump(exclude={"id", "created_at"})) != item:
                    raise ValueError(f"item {item_id} already exists with different content")
                return item_id
            required = 2 if needs_double_review(item_id, self.double_review_rate) else 1
            conn.execute(
                _ADD_ITEM,
                {
                    "id": item_id,
                    "created_us": now_us,
                    "enqueued_by": actor,
                    "source": item.source,
                    "mode": item.mode,
                    "stage": item.stage,
                    "reason": item.reason,
                    "codes": list(item.codes),
                    "risk": item.risk,
                    "risk_factors": [str(f) for f in item.risk_factors],
                    "consultation_id": item.consultation_id,
                    "session_id": item.session_id,
                    "payload": item.payload.model_dump(mode="json"),
                    "status": ItemStatus.OPEN.value,
                    "reviews_required": required,
                    "reviews_done": 0,
                    "lease_holder": None,
                    "lease_expires_us": None,
                    "lease_version": 0,
                },
            )
            if item.codes:
                conn.execute(
                    _ADD_ITEM_CODES,
                    [{"item_id": item_id, "code": c} for c in sorted(set(item.codes))],
                )
            self._event(
                conn,
                item_id,
                EventKind.CREATED,
                actor,
                now_us,
                item.reason,
                {
                    "source": item.source,
                    "mode": item.mode,
                    "stage": item.stage,
                    "codes": list(item.codes),
                    "risk": item.risk,
                    "reviews_required": required,
                },
            )
        return item_id

    # ------------------------------------------------------------------ reading the queue

    def get(self, item_id: str) -> ReviewItem | None:
        with self._read() as conn:
            row = self._item_row(conn, item_id)
        return None if row is None else _item_from_row(row, self._aware())

    def state(self, item_id: str) -> ItemState | None:
        now_us = self._now_us()
        with self._read() as conn:
            row = self._item_row(conn, item_id)
        return None if row is None else _state_from_row(row, now_us, self._aware())

    def list_open(self, filters: QueueFilter | None = None, *, limit: int = 50) -> list[QueueEntry]:
        """Open items, highest priority first (see `PriorityPolicy`); claimed ones show their holder."""
        if limit <= 0:
            raise ValueError("limit must be positive")
        now_us = self._now_us()
        aware = self._aware()
        query = (
            self._open_items_query(filters or QueueFilter(), now_us)
            .order_by(*self._priority_order(now_us))
            .limit(limit)
        )
        with self._read() as conn:
            rows = conn.execute(query).all()
        entries = []
        for row in rows:
            age = timedelta(microseconds=now_us - row.created_us)
            entries.append(
                QueueEntry(
                    item=_item_from_row(row, aware),
                    state=_state_from_row(row, now_us, aware),
                    priority=self.priority_policy.priority(row.risk, age, row.source == "live"),
                    age=age,
                )
            )
        return entries

    def stats(self, filters: QueueFilter | None = None) -> QueueStats:
        now_us = self._now_us()
        base = self._open_items_query(filters or QueueFilter(), now_us).subquery()
        live_lease = sa.and_(base.c.lease_holder.is_not(None), base.c.lease_expires_us > now_us)
        with self._read() as conn:
            by_source = dict(
                conn.execute(sa.select(base.c.source, sa.func.count()).group_by(base.c.source)).all()
            )
            claimed = conn.execute(
                sa.select(sa.func.count()).select_from(base).where(live_lease)
            ).scalar_one()
            oldest = conn.execute(
                sa.select(base.c.id, base.c.created_us).order_by(base.c.created_us, base.c.id).limit(1)
            ).first()
        return QueueStats(
            waiting=sum(by_source.values()),
            claimed=claimed,
            oldest_age=None if oldest is None else timedelta(microseconds=now_us - oldest.created_us),
            oldest_item_id=None if oldest is None else oldest.id,
            by_source=by_source,
        )

    # ------------------------------------------------------------------ leases

    def claim(self, item_id: str, reviewer: str, lease_seconds: float | None = None) -> ClaimResult:
        """Take (or extend) the lease on an item; fails clearly while another reviewer's lease is live."""
        _check_identity(reviewer, "reviewer")
        lease_us = self._lease_us(lease_seconds)
        return self._until_settled(lambda: self._try_claim(item_id, reviewer, lease_us))

    def claim_next(
        self, reviewer: str, filters: QueueFilter | None = None, lease_seconds: float | None = None
    ) -> ClaimResult:
        """Claim the highest-priority item this reviewer may take (one they hold already counts)."""
        _check_identity(reviewer, "reviewer")
        lease_us = self._lease_us(lease_seconds)
        tried: set[str] = set()
        while True:
            now_us = self._now_us()
            already_mine = sa.select(schema.decisions.c.item_id).where(
                schema.decisions.c.reviewer == reviewer
            )
            query = (
                self._open_items_query(filters or QueueFilter(), now_us)
                .where(
                    sa.or_(
                        schema.items.c.lease_holder.is_(None),
                        schema.items.c.lease_expires_us <= now_us,
                        schema.items.c.lease_holder == reviewer,
                    ),
                    schema.items.c.id.not_in(already_mine),
                )
                .order_by(*self._priority_order(now_us))
                .limit(_CLAIM_NEXT_BATCH + len(tried))
            )
            with self._read() as conn:
                candidates = [row.id for row in conn.execute(query) if row.id not in tried]
            if not candidates:
                return ClaimResult(
                    status=ClaimStatus.NOTHING_AVAILABLE,
                    item_id=None,
                    message="no item is available to claim",
                )
            for candidate in candidates:
                result = self._until_settled(lambda c=candidate: self._try_claim(c, reviewer, lease_us))
                if result.ok:
                    return result
                tried.add(candidate)

    def release(self, item_id: str, reviewer: str, reason: str = "") -> ReleaseResult:
        """Give an item back to the queue without deciding it."""
        _check_identity(reviewer, "reviewer")
        return self._until_settled(lambda: self._try_release(item_id, reviewer, reason))

    def expire_leases(self) -> int:
        """Record every lease that has run out and free its item; returns how many.

        Claims notice expired leases on their own; this sweep lets the app show an accurate
        history and "taken" markers without waiting for someone to claim the item.
        """
        now_us = self._now_us()
        with self._read() as conn:
            due = conn.execute(
                sa.select(schema.items.c.id).where(
                    schema.items.c.status == ItemStatus.OPEN.value,
                    schema.items.c.lease_holder.is_not(None),
                    schema.items.c.lease_expires_us <= now_us,
                )
            ).all()
        expired = 0
        for (item_id,) in due:
            expired += self._until_settled(lambda i=item_id: self._try_expire(i))
        return expired

    # ------------------------------------------------------------------ decisions

    def decide(
        self,
        item_id: str,
        reviewer: str,
        decision: DecisionKind,
        reason_codes: Sequence[str] = (),
        reason: str = "",
        edited_text: str | None = None,
        *,
        edited_text_passed: bool | None = None,
    ) -> DecisionResult:
        """Record a decision by the current lease holder.

        A second submission by the same reviewer (a double-click, a retried request) stores
        nothing and returns ALREADY_DECIDED with the decision already on record. An inconsistent
        request (edit_approve without text, a rejection without reason codes) raises
        pydantic.ValidationError before anything is stored.
        """
        _check_identity(reviewer, "reviewer")
        request = DecisionRequest(
            decision=decision,
            reason_codes=list(reason_codes),
            reason=reason,
            edited_text=edited_text,
            edited_text_passed=edited_text_passed,
        )
        return self._until_settled(lambda: self._try_decide(item_id, reviewer, request))

    def decisions(self, item_id: str) -> list[Decision]:
        with self._read() as conn:
            return self._decisions(conn, item_id, self._aware())

    def view(self, item_id: str, reviewer: str) -> ReviewerView | None:
        """The item as `reviewer` may see it: during a blind second review, no one else's decision."""
        now_us = self._now_us()
        aware = self._aware()
        with self._read(snapshot=True) as conn:
            row = self._item_row(conn, item_id)
            if row is None:
                return None
            decisions = self._decisions(conn, item_id, aware)
            history = self._history(conn, item_id, aware)
        state = _state_from_row(row, now_us, aware)
        blind = state.status is ItemStatus.OPEN and state.reviews_required == 2 and state.reviews_done >= 1
        if blind:
            decisions = [d for d in decisions if d.reviewer == reviewer]
            history = [e for e in history if e.kind is not EventKind.DECIDED or e.actor == reviewer]
        return ReviewerView(
            item=_item_from_row(row, aware), state=state, blind=blind, decisions=decisions, history=history
        )

    def history(self, item_id: str) -> list[AuditEvent]:
        """Every event of an item in the order it happened: the full, unredacted audit trail."""
        with self._read() as conn:
            return self._history(conn, item_id, self._aware())

    # ------------------------------------------------------------------ outcomes and delivery

    def outcome(self, item_id: str) -> Outcome | None:
        """The final decision and the text to deliver, or None while the item is still open."""
        with self._read() as conn:
            row = conn.execute(sa.select(schema.outcomes).where(schema.outcomes.c.item_id == item_id)).first()
        return None if row is None else _outcome_from_row(row, self._aware())

    def decided_since(
        self, cursor: int = 0, *, source: Source | None = None, limit: int = 100
    ) -> list[Outcome]:
        """Outcomes numbered above `cursor`, in order; pass the last `seq` seen as the next cursor.

        Works across processes (the review app and the endpoint are separate servers), which an
        in-process callback could not; outcome numbers follow commit order, so nothing is skipped.
        """
        if limit <= 0:
            raise ValueError("limit must be positive")
        query = sa.select(schema.outcomes).where(schema.outcomes.c.seq > cursor)
        if source is not None:
            query = query.where(schema.outcomes.c.source == source)
        aware = self._aware()
        with self._read() as conn:
            rows = conn.execute(query.order_by(schema.outcomes.c.seq).limit(limit)).all()
        return [_outcome_from_row(row, aware) for row in rows]

    # ------------------------------------------------------------------ agreement

    def agreement(self, *, edit_approve_as: Label = "reject", source: Source | None = None) -> Agreement:
        """Cohen's kappa between first and second (blind) reviews over double-reviewed items."""
        query = (
            sa.select(
                schema.decisions.c.item_id, schema.decisions.c.review_round, schema.decisions.c.decision
            )
            .join(schema.items, schema.items.c.id == schema.decisions.c.item_id)
            .where(schema.decisions.c.review_round <= 2, schema.items.c.reviews_required >= 2)
        )
        if source is not None:
            query = query.where(schema.items.c.source == source)
        by_item: dict[str, dict[int, DecisionKind]] = {}
        with self._read() as conn:
            for item_id, review_round, decision in conn.execute(query):
                by_item.setdefault(item_id, {})[review_round] = decision
        pairs = [
            (candidate_label(rounds[1], edit_approve_as), candidate_label(rounds[2], edit_approve_as))
            for _, rounds in sorted(by_item.items())
            if 1 in rounds and 2 in rounds
        ]
        return cohen_kappa(pairs)

    def judge_agreement(
        self, *, edit_approve_as: Label = "reject", source: Source | None = None
    ) -> list[CodeAgreement]:
        """Per compliance code, how often the judges' verdicts matched the final human decision."""
        query = sa.select(
            schema.items.c.codes,
            schema.items.c.payload,
            schema.outcomes.c.decision,
            schema.outcomes.c.reason_codes,
        ).join(schema.outcomes, schema.outcomes.c.item_id == schema.items.c.id)
        if source is not None:
            query = query.where(schema.items.c.source == source)
        with self._read() as conn:
            rows = conn.execute(query).all()
        return judge_agreement_by_code(
            JudgedOutcome(
                codes=row.codes,
                verdicts=ReviewPayload.model_validate(row.payload).verdicts,
                human_label=candidate_label(row.decision, edit_approve_as),
                human_reason_codes=row.reason_codes,
            )
            for row in rows
        )

    # ------------------------------------------------------------------ state transitions

    def _try_claim(self, item_id: str, reviewer: str, lease_us: int) -> ClaimResult | None:
        now_us = self._now_us()
        aware = self._aware()
        with self._write() as conn:
            row = self._item_row(conn, item_id)
            if row is None:
                return ClaimResult(
                    status=ClaimStatus.NOT_FOUND, item_id=item_id, message=f"no item {item_id}"
                )
            if row.status == ItemStatus.CLOSED.value:
                return ClaimResult(
                    status=ClaimStatus.CLOSED, item_id=item_id, message=f"item {item_id} is already decided"
                )
            if self._reviewed_by(conn, item_id, reviewer):
                return ClaimResult(
                    status=ClaimStatus.ALREADY_REVIEWED,
                    item_id=item_id,
                    message=f"{reviewer} has already decided item {item_id}; "
                    "its other review must come from someone else",
                )
            holder = row.lease_holder
            live = holder is not None and row.lease_expires_us > now_us
            if live and holder != reviewer:
                until = schema.from_us(row.lease_expires_us, aware)
                return ClaimResult(
                    status=ClaimStatus.HELD_BY_OTHER,
                    item_id=item_id,
                    holder=holder,
                    lease_expires_at=until,
                    message=f"item {item_id} is claimed by {holder} until {until.isoformat()}",
                )
            expires_us = now_us + lease_us
            if not self._compare_and_set(
                conn,
                row,
                lease_holder=reviewer,
                lease_expires_us=expires_us,
                lease_version=row.lease_version + 1,
            ):
                return None
            until = schema.from_us(expires_us, aware)
            detail: dict[str, Any] = {"lease_expires_at": until.isoformat()}
            if holder is not None and not live:
                self._record_expiry(conn, row, now_us, aware)
                detail["reclaimed_from"] = holder
            renewed = live and holder == reviewer
            self._event(
                conn,
                item_id,
                EventKind.LEASE_RENEWED if renewed else EventKind.CLAIMED,
                reviewer,
                now_us,
                "lease extended by its holder" if renewed else "claimed for review",
                detail,
            )
        return ClaimResult(
            status=ClaimStatus.RENEWED if renewed else ClaimStatus.CLAIMED,
            item_id=item_id,
            holder=reviewer,
            lease_expires_at=until,
            message=f"{reviewer} holds item {item_id} until {until.isoformat()}",
        )

    def _try_release(self, item_id: str, reviewer: str, reason: str) -> ReleaseResult | None:
        now_us = self._now_us()
        with self._write() as conn:
            row = self._item_row(conn, item_id)
            if row is None:
                return ReleaseResult(status=ReleaseStatus.NOT_FOUND, message=f"no item {item_id}")
            if row.lease_holder != reviewer:
                holder = row.lease_holder or "nobody"
                return ReleaseResult(
                    status=ReleaseStatus.NOT_HOLDER,
                    message=f"{reviewer} does not hold item {item_id} (held by {holder})",
                )
            if not self._compare_and_set(
                conn, row, lease_holder=None, lease_expires_us=None, lease_version=row.lease_version + 1
            ):
                return None
            self._event(
                conn,
                item_id,
                EventKind.RELEASED,
                reviewer,
                now_us,
                reason or "released without a decision",
                {"lease_had_expired": row.lease_expires_us <= now_us},
            )
        return ReleaseResult(status=ReleaseStatus.RELEASED, message=f"{reviewer} released item {item_id}")

    def _try_expire(self, item_id: str) -> int | None:
        now_us = self._now_us()
        with self._write() as conn:
            row = self._item_row(conn, item_id)
            if (
                row is None
                or row.status != ItemStatus.OPEN.value
                or row.lease_holder is None
                or row.lease_expires_us > now_us
            ):
                return 0
            if not self._compare_and_set(
                conn, row, lease_holder=None, lease_expires_us=None, lease_version=row.lease_version + 1
            ):
                return None
            self._record_expiry(conn, row, now_us, self._aware())
        return 1

    def _try_decide(self, item_id: str, reviewer: str, request: DecisionRequest) -> DecisionResult | None:
        now_us = self._now_us()
        aware = self._aware()
        with self._write() as conn:
            row = self._item_row(conn, item_id)
            if row is None:
                return DecisionResult(status=DecisionStatus.NOT_FOUND, message=f"no item {item_id}")
            earlier = self._decisions(conn, item_id, aware)
            mine = next((d for d in earlier if d.reviewer == reviewer), None)
            if mine is not None:
                same = DecisionRequest.model_validate(
                    mine.model_dump(include=set(DecisionRequest.model_fields))
                )
                note = "" if same == request else "; the new submission differs and was not stored"
                return DecisionResult(
                    status=DecisionStatus.ALREADY_DECIDED,
                    message=f"{reviewer} already decided item {item_id} ({mine.decision}){note}",
                    decision=mine,
                )
            refusal = self._lease_refusal(row, item_id, reviewer, now_us, aware)
            if refusal is not None:
                return refusal
            review_round = row.reviews_done + 1
            new = Decision(
                **request.model_dump(),
                id=0,
                item_id=item_id,
                reviewer=reviewer,
                review_round=review_round,
                decided_at=schema.from_us(now_us, aware),
            )
            required = row.reviews_required
            adjudicate = required == 2 and review_round == 2 and _disagree(earlier[0], new, row.payload)
            if adjudicate:
                required = 3
            closing = review_round >= required
            if not self._compare_and_set(
                conn,
                row,
                lease_holder=None,
                lease_expires_us=None,
                lease_version=row.lease_version + 1,
                reviews_done=review_round,
                reviews_required=required,
                status=(ItemStatus.CLOSED if closing else ItemStatus.OPEN).value,
            ):
                return None
            inserted = conn.execute(
                schema.decisions.insert().values(
                    item_id=item_id,
                    reviewer=reviewer,
                    review_round=review_round,
                    decision=request.decision,
                    reason_codes=request.reason_codes,
                    reason=request.reason,
                    edited_text=request.edited_text,
                    edited_text_passed=request.edited_text_passed,
                    decided_us=now_us,
                )
            )
            new = new.model_copy(update={"id": inserted.inserted_primary_key[0]})
            self._event(
                conn,
                item_id,
                EventKind.DECIDED,
                reviewer,
                now_us,
                request.reason,
                {
                    "decision": request.decision,
                    "reason_codes": request.reason_codes,
                    "review_round": review_round,
                    "edited": request.edited_text is not None,
                    "edited_text_passed": request.edited_text_passed,
                },
            )
            outcome = None
            if adjudicate:
                self._event(
                    conn,
                    item_id,
                    EventKind.ADJUDICATION_REQUIRED,
                    QUEUE_ACTOR,
                    now_us,
                    "the two blind reviews disagree on what the customer should receive",
                    {"first": earlier[0].decision, "second": new.decision},
                )
            elif closing:
                outcome = self._close(conn, row, [*earlier, new], now_us, aware)
        return DecisionResult(
            status=DecisionStatus.RECORDED,
            message=f"{reviewer} decided {request.decision} on item {item_id} (review {review_round} of {required})",
            decision=new,
            outcome=outcome,
        )

    def _lease_refusal(
        self, row: Row, item_id: str, reviewer: str, now_us: int, aware: bool
    ) -> DecisionResult | None:
        if row.status == ItemStatus.CLOSED.value:
            return DecisionResult(status=DecisionStatus.CLOSED, message=f"item {item_id} is already decided")
        live = row.lease_holder is not None and row.lease_expires_us > now_us
        if row.lease_holder == reviewer and live:
            return None
        if row.lease_holder == reviewer:
            expired = schema.from_us(row.lease_expires_us, aware)
            return DecisionResult(
                status=DecisionStatus.LEASE_EXPIRED,
                message=f"{reviewer}'s lease on item {item_id} expired at {expired.isoformat()}; claim it again",
            )
        if live:
            until = schema.from_us(row.lease_expires_us, aware)
            return DecisionResult(
                status=DecisionStatus.HELD_BY_OTHER,
                message=f"item {item_id} is now claimed by {row.lease_holder} until {until.isoformat()}; "
                f"{reviewer} no longer holds it",
            )
        return DecisionResult(
            status=DecisionStatus.NOT_HOLDER,
            message=f"{reviewer} does not hold a lease on item {item_id}; claim it first",
        )

    def _close(self, conn: Connection, row: Row, rounds: list[Decision], now_us: int, aware: bool) -> Outcome:
        final = _final_decision(rounds, row.payload["candidate_reply"])
        conn.execute(
            schema.counters.update()
            .where(schema.counters.c.name == schema.OUTCOME_COUNTER)
            .values(value=schema.counters.c.value + 1)
        )
        seq = conn.execute(
            sa.select(schema.counters.c.value).where(schema.counters.c.name == schema.OUTCOME_COUNTER)
        ).scalar_one()
        values = {
            "seq": seq,
            "item_id": row.id,
            "source": row.source,
            "session_id": row.session_id,
            "consultation_id": row.consultation_id,
            "decided_us": now_us,
            **final,
        }
        conn.execute(schema.outcomes.insert().values(**values))
        self._event(
            conn,
            row.id,
            EventKind.CLOSED,
            QUEUE_ACTOR,
            now_us,
            f"final decision: {final['decision']}",
            {"outcome_seq": seq, "decision": final["decision"], "reviewers": final["reviewers"]},
        )
        return Outcome(
            **{k: v for k, v in values.items() if k != "decided_us"}, decided_at=schema.from_us(now_us, aware)
        )

    # ------------------------------------------------------------------ helpers

    def _record_expiry(self, conn: Connection, row: Row, now_us: int, aware: bool) -> None:
        expired = schema.from_us(row.lease_expires_us, aware)
        self._event(
            conn,
            row.id,
            EventKind.LEASE_EXPIRED,
            row.lease_holder,
            now_us,
            f"lease ran out at {expired.isoformat()} without a decision",
            {"expired_at": expired.isoformat()},
        )

    @staticmethod
    def _compare_and_set(conn: Connection, row: Row, **values: Any) -> bool:
        """Apply `values` only if nobody changed the item since `row` was read."""
        result = conn.execute(
            schema.items.update()
            .where(schema.items.c.id == row.id, schema.items.c.lease_version == row.lease_version)
            .values(**values)
        )
        return result.rowcount == 1

    @staticmethod
    def _event(
        conn: Connection,
        item_id: str,
        kind: EventKind,
        actor: str,
        at_us: int,
        reason: str,
        detail: dict[str, Any],
    ) -> None:
        conn.execute(
            _ADD_EVENT,
            {
                "item_id": item_id,
                "kind": kind.value,
                "actor": actor,
                "at_us": at_us,
                "reason": reason,
                "detail": detail,
            },
        )

    @staticmethod
    def _item_row(conn: Connection, item_id: str) -> Row | None:
        return conn.execute(_ITEM_ROW, {"item": item_id}).first()

    @staticmethod
    def _reviewed_by(conn: Connection, item_id: str, reviewer: str) -> bool:
        found = conn.execute(
            sa.select(schema.decisions.c.id).where(
                schema.decisions.c.item_id == item_id, schema.decisions.c.reviewer == reviewer
            )
        ).first()
        return found is not None

    @staticmethod
    def _decisions(conn: Connection, item_id: str, aware: bool) -> list[Decision]:
        rows = conn.execute(
            sa.select(schema.decisions)
            .where(schema.decisions.c.item_id == item_id)
            .order_by(schema.decisions.c.review_round)
        )
        return [_decision_from_row(row, aware) for row in rows]

    @staticmethod
    def _history(conn: Connection, item_id: str, aware: bool) -> list[AuditEvent]:
        rows = conn.execute(
            sa.select(schema.events).where(schema.events.c.item_id == item_id).order_by(schema.events.c.seq)
        )
        return [
            AuditEvent(
                seq=row.seq,
                item_id=row.item_id,
                kind=EventKind(row.kind),
                actor=row.actor,
                at=schema.from_us(row.at_us, aware),
                reason=row.reason,
                detail=row.detail,
            )
            for row in rows
        ]

    def _open_items_query(self, filters: QueueFilter, now_us: int) -> sa.Select:
        query = sa.select(schema.items).where(schema.items.c.status == ItemStatus.OPEN.value)
        if filters.code is not None:
            query = query.where(
                schema.items.c.id.in_(
                    sa.select(schema.item_codes.c.item_id).where(schema.item_codes.c.code == filters.code)
                )
            )
        for column in ("stage", "mode", "source", "session_id"):
            wanted = getattr(filters, column)
            if wanted is not None:
                query = query.where(schema.items.c[column] == wanted)
        if filters.min_age is not None:
            query = query.where(schema.items.c.created_us <= now_us - _us(filters.min_age))
        if filters.max_age is not None:
            query = query.where(schema.items.c.created_us >= now_us - _us(filters.max_age))
        return query

    def _priority_order(self, now_us: int) -> list[sa.ColumnElement[Any]]:
        """ORDER BY for `PriorityPolicy.priority`, evaluated by the database at query time."""
        policy = self.priority_policy
        age_us = sa.cast(sa.literal(now_us, sa.BigInteger) - schema.items.c.created_us, sa.Float)
        live = sa.case((schema.items.c.source == "live", sa.literal(policy.live_bonus, sa.Float)), else_=0.0)
        priority = (
            schema.items.c.risk + live + age_us / sa.literal(float(_us(policy.age_per_risk_point)), sa.Float)
        )
        return [priority.desc(), schema.items.c.created_us.asc(), schema.items.c.id.asc()]

    @staticmethod
    def _until_settled(attempt: Callable[[], _T | None]) -> _T:
        """Run a compare-and-set transaction until it settles (None means: lost a race, re-read)."""
        for _ in range(_MAX_ATTEMPTS):
            try:
                result = attempt()
            except IntegrityError:
                continue  # a concurrent identical write won; re-reading reports it clearly
            if result is not None:
                return result
        raise RuntimeError("the review queue item kept changing under concurrent writers")

    def _lease_us(self, lease_seconds: float | None) -> int:
        lease = self.default_lease if lease_seconds is None else timedelta(seconds=lease_seconds)
        if lease <= timedelta(0):
            raise ValueError("a lease must last a positive time")
        return _us(lease)

    def _now_us(self) -> int:
        return schema.to_us(self.clock.now())

    def _aware(self) -> bool:
        return self.clock.now().tzinfo is not None

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._engine.connect() as conn:
            conn = conn.execution_options(**{schema.WRITE_OPTION: True})
            with conn.begin():
                yield conn

    @contextmanager
    def _read(self, snapshot: bool = False) -> Iterator[Connection]:
        """A read transaction; `snapshot` makes all its statements see one moment.

        SQLite transactions are snapshots already; PostgreSQL's default (READ COMMITTED) gives each
        statement its own, so a multi-statement view asks for REPEATABLE READ there.
        """
        with self._engine.connect() as conn:
            if snapshot and self._engine.dialect.name == "postgresql":
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn


# ---------------------------------------------------------------------- row mapping and rules


def _us(delta: timedelta) -> int:
    return delta // timedelta(microseconds=1)


def _check_identity(name: str, what: str) -> None:
    if not isinstance(name, str) or not name.strip() or len(name) > 128:
        raise ValueError(f"{what} must be a non-empty name of at most 128 characters")


def _delivered_text(decision: Decision, candidate: str) -> str | None:
    if decision.decision == "approve":
        return candidate
    if decision.decision == "edit_approve":
        return decision.edited_text
    return None


def _disagree(first: Decision, second: Decision, payload: dict[str, Any]) -> bool:
    """Two blind reviews disagree when they would send the customer something different."""
    if first.decision != second.decision:
        return True
    candidate = payload["candidate_reply"]
    return _delivered_text(first, candidate) != _delivered_text(second, candidate)


def _final_decision(rounds: list[Decision], candidate: str) -> dict[str, Any]:
    """The outcome of a closed item: the adjudicator's word, or the (agreeing) reviews combined."""
    deciding = rounds[-1]
    if deciding.review_round == 3:
        reason_codes = list(deciding.reason_codes)
        reasons = [deciding.reason]
    else:
        reason_codes = sorted({code for d in rounds for code in d.reason_codes})
        reasons = list(dict.fromkeys(d.reason for d in rounds if d.reason))
    return {
        "decision": deciding.decision,
        "text": _delivered_text(deciding, candidate),
        "edited_text_passed": deciding.edited_text_passed,
        "reason_codes": reason_codes,
        "reason": "; ".join(r for r in reasons if r),
        "reviewers": [d.reviewer for d in rounds],
    }


def _item_from_row(row: Row, aware: bool) -> ReviewItem:
    return ReviewItem(
        id=row.id,
        created_at=schema.from_us(row.created_us, aware),
        source=row.source,
        mode=row.mode,
        stage=row.stage,
        reason=row.reason,
        codes=row.codes,
        risk=row.risk,
        risk_factors=row.risk_factors,
        consultation_id=row.consultation_id,
        session_id=row.session_id,
        payload=ReviewPayload.model_validate(row.payload),
    )


def _state_from_row(row: Row, now_us: int, aware: bool) -> ItemState:
    live = row.lease_holder is not None and row.lease_expires_us > now_us
    return ItemState(
        status=ItemStatus(row.status),
        reviews_required=row.reviews_required,
        reviews_done=row.reviews_done,
        lease_holder=row.lease_holder if live else None,
        lease_expires_at=schema.from_us(row.lease_expires_us, aware) if live else None,
    )


def _decision_from_row(row: Row, aware: bool) -> Decision:
    return Decision(
        id=row.id,
        item_id=row.item_id,
        reviewer=row.reviewer,
        review_round=row.review_round,
        decision=row.decision,
        reason_codes=row.reason_codes,
        reason=row.reason,
        edited_text=row.edited_text,
        edited_text_passed=row.edited_text_passed,
        decided_at=schema.from_us(row.decided_us, aware),
    )


def _outcome_from_row(row: Row, aware: bool) -> Outcome:
    return Outcome(
        seq=row.seq,
        item_id=row.item_id,
        source=row.source,
        session_id=row.session_id,
        consultation_id=row.consultation_id,
        decision=row.decision,
        text=row.text,
        edited_text_passed=row.edited_text_passed,
        reason_codes=row.reason_codes,
        reason=row.reason,
        reviewers=row.reviewers,
        decided_at=schema.from_us(row.decided_us, aware),
    )
