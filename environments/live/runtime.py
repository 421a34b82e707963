"""Live consultations: the advisor answering real customers, every word through the gate.

The store is the source of truth. An advisor session is kept in memory between messages together
with the store version it reflects; whenever that version is not the latest (after a restart, or
once a reviewer's decision was delivered) the session is rebuilt from the store. A turn is saved
whole, and only then is the reply returned, so a customer never sees a reply the audit trail does
not hold.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from typing import Any

from pydantic import BaseModel

from compliance.review_queue import Outcome
from environments.advisor import AdvisorSession, AdvisorTurn, ConsultationState
from environments.live.config import ServeConfig
from environments.live.customer import Consent, LiveCustomer, LiveProfile
from environments.live.deliveries import DeliveryHub
from environments.live.interpret import read_message
from environments.live.keys import KeyRecord
from environments.live.memory import (
    CUSTOMER_MEMORY,
    CustomerMemory,
    ResumableClock,
    new_nodes,
    restore_nodes,
)
from environments.live.parts import AdvisorParts
from environments.live.store import (
    Delivery,
    LiveStore,
    MessageRecord,
    NewMessage,
    NewValidation,
    SessionRecord,
    TurnWrite,
    VersionConflict,
)
from environments.live.timing import current_meter
from simulacra.agent import AgentState, ExtraSource
from simulacra.clock import Clock

log = logging.getLogger("environments.live")
CACHED_SESSIONS = 2000  # advisor sessions kept in memory; older ones are rebuilt from the store
CUSTOMER_STATEMENTS = 50  # how much of a customer's earlier sessions their memory holds


class LiveError(Exception):
    """A request the endpoint refuses; `status` is the HTTP status it maps to."""

    status = 409
    code = "conflict"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SessionNotFound(LiveError):
    status = 404
    code = "session_not_found"


class SessionClosed(LiveError):
    code = "session_closed"


class AwaitingReview(LiveError):
    code = "awaiting_review"


class TurnLimit(LiveError):
    code = "turn_limit"


class Busy(LiveError):
    code = "busy"


class NotEligible(LiveError):
    code = "not_eligible"


class Forbidden(LiveError):
    status = 403
    code = "forbidden"


class LibraryReadOnly(LiveError):
    code = "library_read_only"


class TooLarge(LiveError):
    status = 413
    code = "too_large"


class TurnResult(BaseModel):
    session: SessionRecord
    customer: MessageRecord
    advisor: MessageRecord
    holding: bool
    escalated: bool
    escalation_id: str | None
    refinements: int
    tokens: int


class LiveSession:
    """An advisor session in memory, and the store version it reflects."""

    def __init__(self, advisor: AdvisorSession, customer: LiveCustomer, clock: ResumableClock, version: int):
        self.advisor = advisor
        self.customer = customer
        self.clock = clock
        self.version = version
        self.saved_rows = len(advisor.stream)

    def state(self) -> dict[str, Any]:
        return {
            "customer": self.customer.model_dump(mode="json"),
            "consultation": self.advisor.state.model_dump(mode="json", exclude={"customer"}),
            "agent": self.advisor.agent.state().model_dump(mode="json"),
        }


def visible_to(session: SessionRecord | None, key: KeyRecord) -> bool:
    """A customer sees only their own sessions; reviewers and admins see all."""
    return session is not None and (key.may_review() or session.owner == key.owner)


class LiveAdvisor:
    def __init__(self, app: ServeConfig, parts: AdvisorParts, store: LiveStore, clock: Clock) -> None:
        self.app = app
        self.parts = parts
        self.store = store
        self.clock = clock
        self.hub = DeliveryHub()
        self._cache: OrderedDict[str, LiveSession] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self._handled: int | None = None  # the last review outcome this process delivered

    # ------------------------------------------------------------------ sessions

    async def session_for(self, key: KeyRecord, session_id: str) -> SessionRecord:
        session = await self.store.run(self.store.session, session_id)
        if not visible_to(session, key):
            # The same answer for someone else's session as for none: ids are not confirmed.
            raise SessionNotFound(f"no session {session_id}")
        assert session is not None
        return session

    async def open_session(self, key: KeyRecord, profile: LiveProfile, consent: Consent) -> SessionRecord:
        session_id = uuid.uuid4().hex
        customer = LiveCustomer.from_profile(key.owner, profile)
        live = await self._build(
            session_id,
            key.owner,
            customer,
            ConsultationState(consultation_id=session_id, customer=customer, session_id=session_id),
            None,
            remember=consent.remember,
        )
        await live.advisor.open()
        record = await self.store.run(
            self.store.create_session,
            session_id,
            owner=key.owner,
            key_id=key.id,
            profile=profile.model_dump(mode="json"),
            consent=consent.model_dump(mode="json"),
            state=live.state(),
            memories=new_nodes(live.advisor.stream, 0),
        )
        live.version = record.version
        live.saved_rows = len(live.advisor.stream)
        self._remember(session_id, live)
        log.info("session %s opened by key %s", session_id, key.id)
        return record

    async def close(self, session: SessionRecord) -> SessionRecord:
        async with self._lock(session.id):
            closed = await asyncio.to_thread(self.store.close_session, session.id)
        self._cache.pop(session.id, None)
        assert closed is not None
        return closed

    # ------------------------------------------------------------------ a turn

    def check_open(self, session: SessionRecord, *, holding_lock: bool = False) -> None:
        """Refuse a message the session cannot take now, with what the customer can do about it."""
        if session.status != "open":
            raise SessionClosed(f"session {session.id} is closed; open a new session to continue")
        if session.pending_item is not None:
            raise AwaitingReview(
                f"session {session.id} is waiting for a colleague to check the last reply "
                f"(review item {session.pending_item}); it will arrive on the session's event stream"
            )
        if session.turns >= self.app.server.max_turns:
            raise TurnLimit(
                f"session {session.id} has had its {self.app.server.max_turns} replies; close it and open a new one"
            )
        if not holding_lock and self._lock(session.id).locked():
            raise Busy(f"the previous message of session {session.id} is still being answered")

    async def answer(self, session: SessionRecord, text: str) -> TurnResult:
        self.check_open(session)
        async with self._lock(session.id):
            cached = self._cache.get(session.id)
            if cached is not None and cached.version == session.version:
                # The record was read just before the lock, and this process saved or loaded that
                # version last, so no turn of ours has moved it on; a change by another process in
                # between fails the versioned save as Busy, as it would after a read here.
                fresh = session
            else:
                read = await self.store.run(self.store.session, session.id)
                assert read is not None
                fresh = read
            self.check_open(fresh, holding_lock=True)
            live = await self.resume(fresh)
            try:
                return await self._turn(fresh, live, text)
            except BaseException:
                # The in-memory session may be half way through a turn that was not saved.
                self._cache.pop(session.id, None)
                raise

    async def _turn(self, session: SessionRecord, live: LiveSession, text: str) -> TurnResult:
        reading = read_message(text)
        state = live.advisor.state
        for topic in reading.turn.revealed:
            if topic not in state.revealed and topic != "circumstances":
                live.customer.tell(topic, text)
        if reading.vulnerability:
            live.customer.tell("circumstances", text)
            live.customer.became_vulnerable("told us of " + ", ".join(reading.vulnerability))
        state.record_customer(reading.turn)
        number = session.turns + 1
        started = time.perf_counter()
        turn = await live.advisor.reply(turn=number, max_turns=self.app.server.max_turns)
        meter = current_meter()
        if meter is not None:
            meter.advisor_seconds += time.perf_counter() - started
        outcome = turn.outcome
        state.record_advisor(outcome.delivered_text)
        write = TurnWrite(
            customer=NewMessage(role="customer", kind="customer", text=text, turn=number),
            advisor=NewMessage(
                role="advisor",
                kind="holding" if outcome.holding else "reply",
                text=outcome.delivered_text,
                turn=number,
                item_id=outcome.escalation_id,
                segment_kinds=[s.kind for s in turn.delivered_segments],
            ),
            validations=self._validations(number, turn),
            memories=new_nodes(live.advisor.stream, live.saved_rows),
            state=live.state(),
            turns=number,
            pending_item=outcome.escalation_id if outcome.escalated else None,
        )
        try:
            saved = await self.store.run(self.store.save_turn, session.id, session.version, write)
        except VersionConflict as exc:
            raise Busy(str(exc)) from None
        live.version = saved.version
        live.saved_rows = len(live.advisor.stream)
        updated = session.model_copy(
            update={"turns": number, "pending_item": write.pending_item, "version": saved.version}
        )
        return TurnResult(
            session=updated,
            customer=saved.customer,
            advisor=saved.advisor,
            holding=outcome.holding,
            escalated=outcome.escalated,
            escalation_id=outcome.escalation_id,
            refinements=outcome.refinements,
            tokens=turn.tokens,
        )

    def _validations(self, number: int, turn: AdvisorTurn) -> list[NewValidation]:
        return [
            NewValidation(
                turn=number,
                attempt=i,
                draft=a.draft,
                compliant=a.validation.compliant,
                escalate=a.validation.escalate,
                violations=[str(c) for c in a.validation.violations],
                decided_by=a.validation.decided_by,
                reasons=list(a.validation.escalation_reasons),
                mode=self.app.validator.mode,
            )
            for i, a in enumerate(turn.outcome.attempts)
        ]

    # ------------------------------------------------------------------ building and restoring

    async def resume(self, session: SessionRecord) -> LiveSession:
        """The session in memory, rebuilt from the store unless the copy held is its latest version."""
        cached = self._cache.get(session.id)
        if cached is not None and cached.version == session.version:
            self._cache.move_to_end(session.id)
            return cached
        saved = session.state
        customer = LiveCustomer.model_validate(saved["customer"])
        state = ConsultationState.model_validate({**saved["consultation"], "customer": customer})
        live = await self._build(
            session.id,
            session.owner,
            customer,
            state,
            AgentState.model_validate(saved["agent"]),
            remember=bool(session.consent.get("remember")),
        )
        nodes = await asyncio.to_thread(self.store.memories, session.id)
        await restore_nodes(live.advisor.stream, live.clock, nodes)
        live.version = session.version
        live.saved_rows = len(live.advisor.stream)
        self._remember(session.id, live)
        return live

    async def _build(
        self,
        session_id: str,
        owner: str,
        customer: LiveCustomer,
        state: ConsultationState,
        agent_state: AgentState | None,
        *,
        remember: bool,
    ) -> LiveSession:
        parts = self.parts
        clock = ResumableClock(self.clock)
        retrievers = parts.retrievers(self.app.advisor.use_cases, self.app.advisor.use_rules)
        if remember and self.app.advisor.use_memory:
            statements = await asyncio.to_thread(
                self.store.customer_statements, owner, session_id, CUSTOMER_STATEMENTS
            )
            if statements:
                memory = await CustomerMemory(owner, parts.embedder, self.clock, parts.rater).load(statements)
                retrievers.append(ExtraSource(CUSTOMER_MEMORY, memory, k=self.app.advisor.memories_k))
        advisor = AdvisorSession(
            state,
            llm=parts.llm,
            gate=parts.gate,
            tools=parts.tools,
            embedder=parts.embedder,
            rater=parts.rater,
            clock=clock,
            retrievers=retrievers,
            config=parts.agent_config,
            agent_state=agent_state,
        )
        return LiveSession(advisor, customer, clock, version=0)

    def _remember(self, session_id: str, live: LiveSession) -> None:
        self._cache[session_id] = live
        self._cache.move_to_end(session_id)
        while len(self._cache) > CACHED_SESSIONS:
            evicted, _ = self._cache.popitem(last=False)
            lock = self._locks.get(evicted)
            if lock is not None and not lock.locked():
                del self._locks[evicted]

    def _lock(self, session_id: str) -> asyncio.Lock:
        return self._locks.setdefault(session_id, asyncio.Lock())

    # ------------------------------------------------------------------ reviewer decisions

    async def deliver_decisions(self) -> int:
        """Deliver every reviewer decision on a live item since the last one this process handled.

        Each server process keeps its own cursor (starting from the store's, which survives
        restarts): the first process to reach a decision delivers it, the others find it
        delivered and still push it to the customers connected to them.
        """
        if self._handled is None:
            self._handled = await asyncio.to_thread(self.store.cursor)
        outcomes = await asyncio.to_thread(
            self.parts.review_queue.decided_since, self._handled, source="live", limit=100
        )
        for outcome in outcomes:
            await self._deliver(outcome)
        if outcomes:
            self._handled = outcomes[-1].seq
            await asyncio.to_thread(self.store.advance_cursor, outcomes[-1].seq)
        return len(outcomes)

    async def _deliver(self, outcome: Outcome) -> None:
        if outcome.session_id is None:
            return
        async with self._lock(outcome.session_id):
            session = await asyncio.to_thread(self.store.session, outcome.session_id)
            if session is None:
                return  # a session of another endpoint sharing the review queue
            # An edited reply reaches the customer only if it passed the validator again: nothing
            # unvalidated is delivered, even from a reviewer.
            approved = outcome.text is not None and (
                outcome.decision != "edit_approve" or outcome.edited_text_passed is True
            )
            text = outcome.text if approved else self.app.server.rejection_reply
            assert text is not None
            state = dict(session.state)
            consultation = dict(state["consultation"])
            consultation["conversation"] = [
                *consultation["conversation"],
                {"speaker": "advisor", "text": text},
            ]
            state["consultation"] = consultation
            message = await asyncio.to_thread(
                self.store.deliver,
                Delivery(
                    item_id=outcome.item_id,
                    session_id=session.id,
                    outcome_seq=outcome.seq,
                    decision=outcome.decision,
                    reviewers=list(outcome.reviewers),
                    reason=outcome.reason,
                ),
                NewMessage(
                    role="advisor",
                    kind="review_delivery" if approved else "review_rejection",
                    text=text,
                    turn=session.turns,
                    item_id=outcome.item_id,
                ),
                state,
            )
            if message is None:
                message = await asyncio.to_thread(self.store.delivered_message, outcome.item_id)
            self._cache.pop(session.id, None)
        if message is not None:
            log.info("review item %s delivered to session %s", outcome.item_id, session.id)
            self.hub.publish(session.id, message)

    async def deliver_forever(self, interval_s: float) -> None:
        while True:
            try:
                await self.deliver_decisions()
            except Exception:
                log.exception("delivering reviewer decisions failed; retrying")
            await asyncio.sleep(interval_s)
