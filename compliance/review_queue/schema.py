"""Tables, engine set-up and time encoding for the review queue, one schema for SQLite and PostgreSQL.

Times are stored as integer microseconds since 1970 (UTC): both databases compare and subtract
integers the same way, so leases and priorities are computed in SQL identically on each, and no
timezone conversion can differ between drivers.

Decisions, outcomes and audit events are append-only, and the database enforces it with triggers
that abort any UPDATE or DELETE (and TRUNCATE on PostgreSQL): the audit trail a regulator asks for
must not depend on every future piece of code being careful.

On SQLite every write transaction starts with BEGIN IMMEDIATE, taking the write lock up front:
with the driver's default deferred BEGIN, two transactions that read and then write can both hold
read locks and one fails at once with "database is locked" instead of waiting its turn.

SQLite runs in WAL mode with `synchronous=NORMAL` (`SQLITE_SYNCHRONOUS`): a commit is appended to
the write-ahead log without waiting for the disk, which is fsynced at checkpoints. A committed item
survives any crash of the process (the failure the queue's idempotent enqueue and leases are built
for); only an operating-system crash or power loss can roll back the last few commits, and then
the database is still consistent. FULL would fsync on every commit, ~10-15 ms of disk wait per
escalation on a busy machine, on the path of a customer's reply. The live endpoint's store makes
the same choice, and the two are separate files: after a power loss a session may wait on an item
lost with the queue's last commits (the customer can close it and open another), or an item
may outlive its turn. A deployment that must keep every commit through power loss uses
PostgreSQL (the production setting), or passes `engine_options={"sqlite_synchronous": "FULL"}`
to `ReviewQueue`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from compliance.sql import append_only_ddl, create_store_engine

WRITE_OPTION = "review_queue_write"
OUTCOME_COUNTER = "outcome"
APPEND_ONLY_TABLES = ("review_decisions", "review_outcomes", "review_events")
_SCHEMA_LOCK_KEY = 0x7265766965777100  # any fixed 63-bit number, "reviewq" in ASCII
SQLITE_SYNCHRONOUS = "NORMAL"  # see the module docstring

_EPOCH_NAIVE = datetime(1970, 1, 1)
_EPOCH_AWARE = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)

# Ids autoincrement as BIGINT on PostgreSQL; SQLite only autoincrements an INTEGER primary key.
_BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

metadata = sa.MetaData()

items = sa.Table(
    "review_items",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("created_us", sa.BigInteger, nullable=False, index=True),
    sa.Column("enqueued_by", sa.String(128), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("mode", sa.String(32), nullable=False),
    sa.Column("stage", sa.String(32), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("codes", sa.JSON, nullable=False),
    sa.Column("risk", sa.Float, nullable=False),
    sa.Column("risk_factors", sa.JSON, nullable=False),
    sa.Column("consultation_id", sa.String(128)),
    sa.Column("session_id", sa.String(128), index=True),
    sa.Column("payload", sa.JSON, nullable=False),
    # Mutable state. Every change goes through a compare-and-set on lease_version.
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("reviews_required", sa.Integer, nullable=False),
    sa.Column("reviews_done", sa.Integer, nullable=False),
    sa.Column("lease_holder", sa.String(128)),
    sa.Column("lease_expires_us", sa.BigInteger),
    sa.Column("lease_version", sa.Integer, nullable=False),
)

item_codes = sa.Table(
    "review_item_codes",
    metadata,
    sa.Column("item_id", sa.String(64), sa.ForeignKey("review_items.id"), primary_key=True),
    sa.Column("code", sa.String(64), primary_key=True, index=True),
)

decisions = sa.Table(
    "review_decisions",
    metadata,
    sa.Column("id", _BigId, primary_key=True, autoincrement=True),
    sa.Column("item_id", sa.String(64), sa.ForeignKey("review_items.id"), nullable=False, index=True),
    sa.Column("reviewer", sa.String(128), nullable=False),
    sa.Column("review_round", sa.Integer, nullable=False),
    sa.Column("decision", sa.String(16), nullable=False),
    sa.Column("reason_codes", sa.JSON, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("edited_text", sa.Text),
    sa.Column("edited_text_passed", sa.Boolean),
    sa.Column("decided_us", sa.BigInteger, nullable=False),
    # One decision per reviewer per item (a double-click cannot add a second) and per round.
    sa.UniqueConstraint("item_id", "reviewer", name="uq_review_decisions_item_reviewer"),
    sa.UniqueConstraint("item_id", "review_round", name="uq_review_decisions_item_round"),
)

outcomes = sa.Table(
    "review_outcomes",
    metadata,
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("item_id", sa.String(64), sa.ForeignKey("review_items.id"), nullable=False, unique=True),
    sa.Column("source", sa.String(16), nullable=False, index=True),
    sa.Column("session_id", sa.String(128)),
    sa.Column("consultation_id", sa.String(128)),
    sa.Column("decision", sa.String(16), nullable=False),
    sa.Column("text", sa.Text),
    sa.Column("edited_text_passed", sa.Boolean),
    sa.Column("reason_codes", sa.JSON, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("reviewers", sa.JSON, nullable=False),
    sa.Column("decided_us", sa.BigInteger, nullable=False),
)

events = sa.Table(
    "review_events",
    metadata,
    sa.Column("seq", _BigId, primary_key=True, autoincrement=True),
    sa.Column("item_id", sa.String(64), sa.ForeignKey("review_items.id"), nullable=False, index=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("actor", sa.String(128), nullable=False),
    sa.Column("at_us", sa.BigInteger, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("detail", sa.JSON, nullable=False),
)

# A single row per counter. Taking the next outcome number locks the row until commit, so
# outcomes commit in the order of their numbers and a poller's cursor can never skip one.
counters = sa.Table(
    "review_counters",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)


def to_us(moment: datetime) -> int:
    """Microseconds since 1970; naive datetimes are taken to be UTC, as the simulation's are."""
    epoch = _EPOCH_AWARE if moment.tzinfo is not None else _EPOCH_NAIVE
    return (moment - epoch) // _ONE_US


def from_us(value: int, aware: bool) -> datetime:
    return (_EPOCH_AWARE if aware else _EPOCH_NAIVE) + timedelta(microseconds=value)


def create_review_engine(url: str, **engine_options: Any) -> Engine:
    options = {"sqlite_synchronous": SQLITE_SYNCHRONOUS, **engine_options}
    return create_store_engine(url, store="review queue", write_option=WRITE_OPTION, **options)


def create_schema(engine: Engine) -> None:
    """Create the tables, the append-only triggers and the counters, safely from several processes."""
    with engine.connect() as conn:
        conn = conn.execution_options(**{WRITE_OPTION: True})
        with conn.begin():
            if engine.dialect.name == "postgresql":
                # Two processes creating the same tables at once collide in the catalogue.
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK_KEY})
            metadata.create_all(conn)
            for statement in append_only_ddl(
                engine.dialect.name, APPEND_ONLY_TABLES, "review_queue_append_only"
            ):
                conn.execute(sa.text(statement))
            present = conn.execute(
                sa.select(counters.c.name).where(counters.c.name == OUTCOME_COUNTER)
            ).first()
            if present is None:
                conn.execute(counters.insert().values(name=OUTCOME_COUNTER, value=0))
