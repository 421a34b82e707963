"""The HTTP API's request and response bodies (its OpenAPI schema is generated from these)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from environments.live.customer import Consent, LiveProfile
from environments.live.store import MessageKind, MessageRecord, SessionRecord, ValidationRow

# A hard ceiling for any message; the configured limit (server.max_message_chars) is usually lower.
MESSAGE_CEILING = 100_000


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionIn(Strict):
    profile: LiveProfile
    consent: Consent


class MessageIn(Strict):
    text: str = Field(min_length=1, max_length=MESSAGE_CEILING, pattern=r"\S")


class SessionOut(BaseModel):
    id: str
    status: Literal["open", "closed"]
    created_at: datetime
    closed_at: datetime | None
    turns: int
    max_turns: int
    awaiting_review: bool
    case_id: str | None

    @classmethod
    def of(cls, session: SessionRecord, max_turns: int) -> SessionOut:
        return cls(
            id=session.id,
            status=session.status,
            created_at=session.created_at,
            closed_at=session.closed_at,
            turns=session.turns,
            max_turns=max_turns,
            awaiting_review=session.pending_item is not None,
            case_id=session.case_id,
        )


class SessionList(BaseModel):
    sessions: list[SessionOut]


class MessageOut(BaseModel):
    id: int
    role: Literal["customer", "advisor"]
    kind: MessageKind
    text: str
    turn: int
    created_at: datetime
    review_item: str | None

    @classmethod
    def of(cls, message: MessageRecord) -> MessageOut:
        return cls(
            id=message.id,
            role=message.role,
            kind=message.kind,
            text=message.text,
            turn=message.turn,
            created_at=message.created_at,
            review_item=message.item_id,
        )


class ReplyOut(BaseModel):
    """The advisor's answer to one message: validated, or the holding reply while a colleague checks."""

    session: SessionOut
    message: MessageOut  # the customer's message as stored
    reply: MessageOut
    holding: bool
    escalated: bool
    escalation_id: str | None


class TranscriptOut(BaseModel):
    session: SessionOut
    messages: list[MessageOut]


class AuditOut(BaseModel):
    session: SessionOut
    owner: str
    validations: list[ValidationRow]  # every draft of every turn, with its verdict


class CaseOut(BaseModel):
    session_id: str
    case_id: str
    merged: bool
    task_type: str
    redacted: dict[str, int]


class ErrorOut(BaseModel):
    detail: str
