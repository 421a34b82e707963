"""The live endpoint's tables: one schema for SQLite (default) and PostgreSQL (by URL).

The audit trail (messages, validations, deliveries, memories) is append-only, enforced by
triggers as in the review queue: a regulator's audit trail must not depend on every later piece
of code being careful. Sessions, keys and rate-limit windows are the only mutable rows; a
session's row carries a version, so two processes answering the same session cannot both commit.

Times are integer microseconds since 1970 (UTC), as in the review queue.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from compliance.sql import append_only_ddl, create_store_engine

APPEND_ONLY_TABLES = ("live_messages", "live_validations", "live_deliveries", "live_memories")
WRITE_OPTION = "live_store_write"
_SCHEMA_LOCK_KEY = 0x6C69766573746F72  # any fixed 63-bit number: "livestor" in ASCII
_BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

metadata = sa.MetaData()

api_keys = sa.Table(
    "live_api_keys",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),  # the public part of the key
    sa.Column("secret_hash", sa.String(64), nullable=False),
    sa.Column("owner", sa.String(128), nullable=False, index=True),
    sa.Column("scope", sa.String(16), nullable=False),
    sa.Column("rate_limit", sa.Integer),  # requests per window; null: the server's default
    sa.Column("created_us", sa.BigInteger, nullable=False),
    sa.Column("revoked_us", sa.BigInteger),
)

rate_windows = sa.Table(
    "live_rate_windows",
    metadata,
    sa.Column("key_id", sa.String(32), primary_key=True),
    sa.Column("window_us", sa.BigInteger, nullable=False),
    sa.Column("count", sa.Integer, nullable=False),
)

sessions = sa.Table(
    "live_sessions",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("owner", sa.String(128), nullable=False, index=True),
    sa.Column("key_id", sa.String(32), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),  # open, closed
    sa.Column("created_us", sa.BigInteger, nullable=False),
    sa.Column("closed_us", sa.BigInteger),
    sa.Column("profile", sa.JSON, nullable=False),
    sa.Column("consent", sa.JSON, nullable=False),
    sa.Column("turns", sa.Integer, nullable=False),
    # The review item a held reply waits on; the customer cannot write again until it is decided.
    sa.Column("pending_item", sa.String(64)),
    sa.Column("state", sa.JSON, nullable=False),  # what the advisor knows, to resume after a restart
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("case_id", sa.String(64)),  # set once a human approved it as a case
)

messages = sa.Table(
    "live_messages",
    metadata,
    sa.Column("id", _BigId, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(64), sa.ForeignKey("live_sessions.id"), nullable=False, index=True),
    sa.Column("role", sa.String(16), nullable=False),  # customer, advisor
    # customer, reply, holding, review_delivery, review_rejection
    sa.Column("kind", sa.String(24), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("turn", sa.Integer, nullable=False),
    sa.Column("item_id", sa.String(64)),  # the review item a holding reply or delivery belongs to
    sa.Column("segment_kinds", sa.JSON, nullable=False),  # parts of a delivered reply (for learning)
    sa.Column("created_us", sa.BigInteger, nullable=False),
)

validations = sa.Table(
    "live_validations",
    metadata,
    sa.Column("id", _BigId, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(64), sa.ForeignKey("live_sessions.id"), nullable=False, index=True),
    sa.Column("message_id", sa.BigInteger, nullable=False, index=True),  # the advisor message it decided
    sa.Column("turn", sa.Integer, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("draft", sa.Text, nullable=False),  # never shown to the customer unless it passed
    sa.Column("compliant", sa.Boolean, nullable=False),
    sa.Column("escalate", sa.Boolean, nullable=False),
    sa.Column("violations", sa.JSON, nullable=False),
    sa.Column("decided_by", sa.String(32), nullable=False),
    sa.Column("reasons", sa.JSON, nullable=False),
    sa.Column("mode", sa.String(32), nullable=False),
    sa.Column("created_us", sa.BigInteger, nullable=False),
)

deliveries = sa.Table(
    "live_deliveries",
    metadata,
    # One row per reviewed item: delivering the same decision twice is impossible.
    sa.Column("item_id", sa.String(64), primary_key=True),
    sa.Column("session_id", sa.String(64), sa.ForeignKey("live_sessions.id"), nullable=False, index=True),
    sa.Column("outcome_seq", sa.BigInteger, nullable=False),
    sa.Column("decision", sa.String(16), nullable=False),
    sa.Column("reviewers", sa.JSON, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("message_id", sa.BigInteger, nullable=False),
    sa.Column("delivered_us", sa.BigInteger, nullable=False),
)

memories = sa.Table(
    "live_memories",
    metadata,
    sa.Column("session_id", sa.String(64), sa.ForeignKey("live_sessions.id"), primary_key=True),
    sa.Column("row", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("node", sa.JSON, nullable=False),
)

cursors = sa.Table(
    "live_cursors",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)


def create_live_engine(url: str, **options: Any) -> Engine:
    # In WAL mode NORMAL loses no committed transaction on a process crash (only on power loss).
    return create_store_engine(
        url,
        store="live store",
        write_option=WRITE_OPTION,
        sqlite_synchronous="NORMAL",
        create_parent=True,
        **options,
    )


def create_schema(engine: Engine) -> None:
    with engine.connect() as conn:
        conn = conn.execution_options(**{WRITE_OPTION: True})
        with conn.begin():
            if engine.dialect.name == "postgresql":
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK_KEY})
            metadata.create_all(conn)
            for statement in append_only_ddl(
                engine.dialect.name, APPEND_ONLY_TABLES, "live_store_append_only"
            ):
                conn.execute(sa.text(statement))
