"""The live endpoint's store over SQLAlchemy Core: `sqlite:///path.db` or `postgresql+psycopg://...`.

A turn is saved in one transaction (both messages, every validation, the advisor's new memories
and its resumable state), guarded by the session's version, so a crash loses a turn whole or not
at all, and two processes answering one session cannot both win. Methods are synchronous; the
server calls the ones on a reply's path through `run` (in place on SQLite, in a worker thread on
PostgreSQL) and the others from worker threads.

The statements of the per-message path (rate limit, session read, turn save) are built once with
bound parameters: building a Core statement and its cache key costs more CPU than SQLite takes to
run it, and every reply passes through them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Literal, ParamSpec, TypeVar

import sqlalchemy as sa
from pydantic import BaseModel, Field
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError

from compliance.review_queue.schema import from_us, to_us
from environments.live import schema
from environments.live.keys import IssuedKey, KeyRecord, Scope, hash_key, new_key
from simulacra.clock import Clock

_P = ParamSpec("_P")
_T = TypeVar("_T")
MessageKind = Literal["customer", "reply", "holding", "review_delivery", "review_rejection"]
OUTCOME_CURSOR = "review_outcomes"

_sessions, _messages, _rates = schema.sessions, schema.messages, schema.rate_windows
_window = sa.bindparam("start", type_=sa.BigInteger)  # the start of the current window
_HIT = (
    _rates.update()
    .where(_rates.c.key_id == sa.bindparam("key"))
    .values(
        count=sa.case((_rates.c.window_us == _window, _rates.c.count + 1), else_=1),
        window_us=_window,
    )
    .returning(_rates.c.count)
)
_SESSION = sa.select(_sessions).where(_sessions.c.id == sa.bindparam("session"))
_expected = sa.bindparam("expected", type_=sa.Integer)  # the version the turn was prepared on
_SAVE_TURN = (
    _sessions.update()
    .where(
        _sessions.c.id == sa.bindparam("session"),
        _sessions.c.version == _expected,
        _sessions.c.status == "open",
    )
    .values(
        turns=sa.bindparam("new_turns"),
        pending_item=sa.bindparam("new_pending"),
        state=sa.bindparam("new_state", type_=_sessions.c.state.type),
        version=_expected + 1,
    )
)
_ADD_MESSAGE = _messages.insert().returning(_messages.c.id)
_ADD_VALIDATIONS = schema.validations.insert()
_ADD_MEMORIES = schema.memories.insert()


class VersionConflict(Exception):
    """The session changed since it was read (another request or process saved a turn first)."""


class SessionRecord(BaseModel):
    id: str
    owner: str
    key_id: str
    status: Literal["open", "closed"]
    created_at: datetime
    closed_at: datetime | None
    profile: dict[str, Any]
    consent: dict[str, Any]
    turns: int
    pending_item: str | None
    state: dict[str, Any]
    version: int
    case_id: str | None


class NewMessage(BaseModel):
    role: Literal["customer", "advisor"]
    kind: MessageKind
    text: str
    turn: int
    item_id: str | None = None
    segment_kinds: list[str] = Field(default_factory=list)


class MessageRecord(NewMessage):
    id: int
    session_id: str
    created_at: datetime


class NewValidation(BaseModel):
    turn: int
    attempt: int
    draft: str
    compliant: bool
    escalate: bool
    violations: list[str]
    decided_by: str
    reasons: list[str]
    mode: str


class ValidationRow(NewValidation):
    id: int
    message_id: int
    created_at: datetime


class TurnWrite(BaseModel):
    customer: NewMessage
    advisor: NewMessage
    validations: list[NewValidation]
    memories: list[tuple[int, dict[str, Any]]]  # (row, node) of memories added this turn
    state: dict[str, Any]
    turns: int
    pending_item: str | None


class SavedTurn(BaseModel):
    version: int
    customer: MessageRecord
    advisor: MessageRecord


class Delivery(BaseModel):
    item_id: str
    session_id: str
    outcome_seq: int
    decision: str
    reviewers: list[str]
    reason: str


class RateDecision(BaseModel):
    allowed: bool
    limit: int
    remaining: int
    reset_at_us: int


class LiveStore:
    def __init__(self, url: str, clock: Clock, **engine_options: Any) -> None:
        self.clock = clock
        self._engine = schema.create_live_engine(url, **engine_options)
        schema.create_schema(self._engine)
        # Writers take the write lock when they begin (the option is read by the engine's begin
        # hook); set once here, since setting it on each connection costs more than the statement.
        self._writer = self._engine.execution_options(**{schema.WRITE_OPTION: True})
        # A statement on a local SQLite file takes less time than handing it to a worker thread
        # and back (about 0.1 ms of CPU, and a wake-up that waits for a core on a busy machine);
        # a PostgreSQL round trip may take longer, and must not hold up the event loop.
        self.in_place = self._engine.dialect.name == "sqlite"

    async def run(self, method: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Call one of this store's methods from async code: in place on SQLite, else in a thread.

        On SQLite a write may wait for another server process's write lock, which is held only
        for one short transaction.
        """
        if self.in_place:
            return method(*args, **kwargs)
        return await asyncio.to_thread(method, *args, **kwargs)

    def close(self) -> None:
        self._engine.dispose()

    # ------------------------------------------------------------------ API keys and rate limits

    def create_key(self, owner: str, scope: Scope, rate_limit: int | None = None) -> IssuedKey:
        if not owner.strip() or len(owner) > 128:
            raise ValueError("an owner must be a non-empty name of at most 128 characters")
        if rate_limit is not None and rate_limit < 1:
            raise ValueError("a rate limit must allow at least one request per window")
        key_id, key = new_key()
        now = self._now_us()
        with self._write() as conn:
            conn.execute(
                schema.api_keys.insert().values(
                    id=key_id,
                    secret_hash=hash_key(key),
                    owner=owner,
                    scope=scope.value,
                    rate_limit=rate_limit,
                    created_us=now,
                    revoked_us=None,
                )
            )
            conn.execute(schema.rate_windows.insert().values(key_id=key_id, window_us=0, count=0))
        return IssuedKey(
            record=KeyRecord(id=key_id, owner=owner, scope=scope, rate_limit=rate_limit), key=key
        )

    def key(self, key_id: str) -> tuple[KeyRecord, str] | None:
        """The key's record and stored hash."""
        with self._read() as conn:
            row = conn.execute(sa.select(schema.api_keys).where(schema.api_keys.c.id == key_id)).first()
        if row is None:
            return None
        return _key_record(row), row.secret_hash

    def list_keys(self) -> list[KeyRecord]:
        with self._read() as conn:
            rows = conn.execute(sa.select(schema.api_keys).order_by(schema.api_keys.c.created_us)).all()
        return [_key_record(r) for r in rows]

    def revoke_key(self, key_id: str) -> bool:
        with self._write() as conn:
            done = conn.execute(
                schema.api_keys.update()
                .where(schema.api_keys.c.id == key_id, schema.api_keys.c.revoked_us.is_(None))
                .values(revoked_us=self._now_us())
            )
        return done.rowcount == 1

    def hit(self, key_id: str, limit: int, window_s: int) -> RateDecision:
        """Count one request against the key's fixed window (shared by every server process)."""
        now = self._now_us()
        window_us = window_s * 1_000_000
        start = now - now % window_us
        with self._write() as conn:
            count = conn.execute(_HIT, {"key": key_id, "start": start}).scalar_one_or_none()
            if count is None:
                conn.execute(_rates.insert().values(key_id=key_id, window_us=start, count=1))
                count = 1
        return RateDecision(
            allowed=count <= limit,
            limit=limit,
            remaining=max(0, limit - count),
            reset_at_us=start + window_us,
        )

    # ------------------------------------------------------------------ sessions

    def create_session(
        self,
        session_id: str,
        *,
        owner: str,
        key_id: str,
        profile: dict[str, Any],
        consent: dict[str, Any],
        state: dict[str, Any],
        memories: list[tuple[int, dict[str, Any]]],
    ) -> SessionRecord:
        now = self._now_us()
        with self._write() as conn:
            conn.execute(
                schema.sessions.insert().values(
                    id=session_id,
                    owner=owner,
                    key_id=key_id,
                    status="open",
                    created_us=now,
                    closed_us=None,
                    profile=profile,
                    consent=consent,
                    turns=0,
                    pending_item=None,
                    state=state,
                    version=1,
                    case_id=None,
                )
            )
            self._add_memories(conn, session_id, memories)
            row = self._session_row(conn, session_id)
        assert row is not None
        return _session(row)

    def session(self, session_id: str) -> SessionRecord | None:
        with self._read() as conn:
            row = self._session_row(conn, session_id)
        return None if row is None else _session(row)

    def sessions(self, owner: str | None = None, limit: int = 100) -> list[SessionRecord]:
        query = sa.select(schema.sessions).order_by(schema.sessions.c.created_us.desc()).limit(limit)
        if owner is not None:
            query = query.where(schema.sessions.c.owner == owner)
        with self._read() as conn:
            return [_session(r) for r in conn.execute(query)]

    def save_turn(self, session_id: str, version: int, turn: TurnWrite) -> SavedTurn:
        now = self._now_us()
        with self._write() as conn:
            updated = conn.execute(
                _SAVE_TURN,
                {
                    "session": session_id,
                    "expected": version,
                    "new_turns": turn.turns,
                    "new_pending": turn.pending_item,
                    "new_state": turn.state,
                },
            )
            if updated.rowcount != 1:
                raise VersionConflict(f"session {session_id} changed while its reply was prepared")
            customer = self._add_message(conn, session_id, turn.customer, now)
            advisor = self._add_message(conn, session_id, turn.advisor, now)
            if turn.validations:
                conn.execute(
                    _ADD_VALIDATIONS,
                    [
                        {
                            "session_id": session_id,
                            "message_id": advisor.id,
                            "created_us": now,
                            **v.model_dump(),
                        }
                        for v in turn.validations
                    ],
                )
            self._add_memories(conn, session_id, turn.memories)
        return SavedTurn(version=version + 1, customer=customer, advisor=advisor)

    def close_session(self, session_id: str) -> SessionRecord | None:
        with self._write() as conn:
            conn.execute(
                schema.sessions.update()
                .where(schema.sessions.c.id == session_id, schema.sessions.c.status == "open")
                .values(status="closed", closed_us=self._now_us(), version=schema.sessions.c.version + 1)
            )
            row = self._session_row(conn, session_id)
        return None if row is None else _session(row)

    def mark_case(self, session_id: str, case_id: str) -> bool:
        """Record that the session became a case; False if it already had."""
        with self._write() as conn:
            done = conn.execute(
                schema.sessions.update()
                .where(schema.sessions.c.id == session_id, schema.sessions.c.case_id.is_(None))
                .values(case_id=case_id)
            )
        return done.rowcount == 1

    # ------------------------------------------------------------------ messages and audit

    def messages(self, session_id: str) -> list[MessageRecord]:
        with self._read() as conn:
            rows = conn.execute(
                sa.select(schema.messages)
                .where(schema.messages.c.session_id == session_id)
                .order_by(schema.messages.c.id)
            ).all()
        return [_message(r) for r in rows]

    def validations(self, session_id: str) -> list[ValidationRow]:
        with self._read() as conn:
            rows = conn.execute(
                sa.select(schema.validations)
                .where(schema.validations.c.session_id == session_id)
                .order_by(schema.validations.c.id)
            ).all()
        return [
            ValidationRow(
                **{k: getattr(r, k) for k in NewValidation.model_fields},
                id=r.id,
                message_id=r.message_id,
                created_at=from_us(r.created_us, aware=True),
            )
            for r in rows
        ]

    def memories(self, session_id: str) -> list[dict[str, Any]]:
        with self._read() as conn:
            rows = conn.execute(
                sa.select(schema.memories.c.node)
                .where(schema.memories.c.session_id == session_id)
                .order_by(schema.memories.c.row)
            ).all()
        return [r.node for r in rows]

    def customer_statements(self, owner: str, exclude: str, limit: int) -> list[MessageRecord]:
        """What this customer said in their other sessions where they let the advisor remember it."""
        with self._read() as conn:
            remembered = [
                r.id
                for r in conn.execute(
                    sa.select(schema.sessions.c.id, schema.sessions.c.consent).where(
                        schema.sessions.c.owner == owner, schema.sessions.c.id != exclude
                    )
                )
                if r.consent.get("remember")
            ]
            if not remembered:
                return []
            rows = conn.execute(
                sa.select(schema.messages)
                .where(schema.messages.c.session_id.in_(remembered), schema.messages.c.role == "customer")
                .order_by(schema.messages.c.id.desc())
                .limit(limit)
            ).all()
        return [_message(r) for r in reversed(rows)]

    # ------------------------------------------------------------------ reviewer decisions

    def deliver(
        self, delivery: Delivery, message: NewMessage, state: dict[str, Any] | None
    ) -> MessageRecord | None:
        """Record a reviewer's decision and the message it sends; None if it was delivered before.

        `state` (when given) replaces the session's resumable state, which now includes the reply.
        """
        now = self._now_us()
        try:
            with self._write() as conn:
                record = self._add_message(conn, delivery.session_id, message, now)
                conn.execute(
                    schema.deliveries.insert().values(
                        **delivery.model_dump(), message_id=record.id, delivered_us=now
                    )
                )
                values: dict[str, Any] = {"version": schema.sessions.c.version + 1}
                if state is not None:
                    values["state"] = state
                conn.execute(
                    schema.sessions.update()
                    .where(schema.sessions.c.id == delivery.session_id)
                    .values(
                        pending_item=sa.case(
                            (schema.sessions.c.pending_item == delivery.item_id, None),
                            else_=schema.sessions.c.pending_item,
                        ),
                        **values,
                    )
                )
        except IntegrityError:
            return None  # another process delivered it first
        return record

    def delivered_message(self, item_id: str) -> MessageRecord | None:
        with self._read() as conn:
            row = conn.execute(
                sa.select(schema.messages)
                .join(schema.deliveries, schema.deliveries.c.message_id == schema.messages.c.id)
                .where(schema.deliveries.c.item_id == item_id)
            ).first()
        return None if row is None else _message(row)

    def cursor(self, name: str = OUTCOME_CURSOR) -> int:
        with self._read() as conn:
            value = conn.execute(
                sa.select(schema.cursors.c.value).where(schema.cursors.c.name == name)
            ).scalar_one_or_none()
        return value or 0

    def advance_cursor(self, value: int, name: str = OUTCOME_CURSOR) -> None:
        with self._write() as conn:
            current = conn.execute(
                sa.select(schema.cursors.c.value).where(schema.cursors.c.name == name)
            ).scalar_one_or_none()
            if current is None:
                conn.execute(schema.cursors.insert().values(name=name, value=value))
            elif value > current:
                conn.execute(schema.cursors.update().where(schema.cursors.c.name == name).values(value=value))

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _add_message(conn: Connection, session_id: str, message: NewMessage, now_us: int) -> MessageRecord:
        fields = message.model_dump()
        new_id = conn.execute(
            _ADD_MESSAGE, {"session_id": session_id, "created_us": now_us, **fields}
        ).scalar_one()
        return MessageRecord(
            **fields, id=new_id, session_id=session_id, created_at=from_us(now_us, aware=True)
        )

    @staticmethod
    def _add_memories(conn: Connection, session_id: str, memories: list[tuple[int, dict[str, Any]]]) -> None:
        if memories:
            conn.execute(
                _ADD_MEMORIES,
                [{"session_id": session_id, "row": row, "node": node} for row, node in memories],
            )

    @staticmethod
    def _session_row(conn: Connection, session_id: str) -> Row | None:
        return conn.execute(_SESSION, {"session": session_id}).first()

    def _now_us(self) -> int:
        return to_us(self.clock.now())

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._writer.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._engine.connect() as conn, conn.begin():
            yield conn


def _key_record(row: Row) -> KeyRecord:
    return KeyRecord(
        id=row.id,
        owner=row.owner,
        scope=Scope(row.scope),
        rate_limit=row.rate_limit,
        revoked=row.revoked_us is not None,
    )


def _session(row: Row) -> SessionRecord:
    return SessionRecord(
        id=row.id,
        owner=row.owner,
        key_id=row.key_id,
        status=row.status,
        created_at=from_us(row.created_us, aware=True),
        closed_at=None if row.closed_us is None else from_us(row.closed_us, aware=True),
        profile=row.profile,
        consent=row.consent,
        turns=row.turns,
        pending_item=row.pending_item,
        state=row.state,
        version=row.version,
        case_id=row.case_id,
    )


def _message(row: Row) -> MessageRecord:
    return MessageRecord(
        id=row.id,
        session_id=row.session_id,
        role=row.role,
        kind=row.kind,
        text=row.text,
        turn=row.turn,
        item_id=row.item_id,
        segment_kinds=row.segment_kinds,
        created_at=from_us(row.created_us, aware=True),
    )
