"""What the project's SQL stores share: an engine on SQLite or PostgreSQL, and append-only tables.

The review queue and the live endpoint's store use the same code on a SQLite file by default and
on PostgreSQL by URL. On SQLite each connection runs in WAL mode with a busy timeout and foreign
keys, and a connection marked with the store's write option takes the write lock when its
transaction begins (BEGIN IMMEDIATE): a transaction that reads and then writes would otherwise fail
at once with "database is locked" instead of waiting its turn. `sqlite_synchronous` sets how hard
a commit waits for the disk: both stores choose NORMAL, which in WAL mode keeps every commit
through a crash of the process and can lose only the last ones to an operating-system crash or
power loss (see `compliance.review_queue.schema`). Append-only tables get triggers
that refuse updates and deletes (and, on PostgreSQL, truncation), so history cannot be rewritten.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

SQLITE_BUSY_TIMEOUT_MS = 30_000


def create_store_engine(
    url: str,
    *,
    store: str,
    write_option: str,
    sqlite_synchronous: str | None = None,
    create_parent: bool = False,
    **options: Any,
) -> Engine:
    """An engine for `store` (named in errors); `sqlite_synchronous` sets PRAGMA synchronous."""
    engine = sa.create_engine(url, **options)
    if engine.dialect.name == "sqlite":
        if engine.url.database in (None, "", ":memory:"):
            # Each pooled connection would see its own empty in-memory database.
            raise ValueError(
                f"the {store} needs an SQLite file (sqlite:///path.db), not an in-memory database"
            )
        if create_parent:
            Path(engine.url.database).parent.mkdir(parents=True, exist_ok=True)
        _configure_sqlite(engine, write_option, sqlite_synchronous)
    elif engine.dialect.name != "postgresql":
        raise ValueError(f"the {store} supports SQLite and PostgreSQL, not {engine.dialect.name}")
    return engine


def _configure_sqlite(engine: Engine, write_option: str, synchronous: str | None) -> None:
    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's BEGIN below, not the driver's
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")  # readers do not wait for the writer
        if synchronous is not None:
            cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        writing = connection.get_execution_options().get(write_option, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writing else "BEGIN")


def append_only_ddl(dialect: str, tables: Sequence[str], function: str) -> list[str]:
    """Statements that make `tables` append-only; `function` names the PostgreSQL trigger function."""
    if dialect == "sqlite":
        return [
            f"CREATE TRIGGER IF NOT EXISTS {table}_no_{verb.lower()} BEFORE {verb} ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
            for table in tables
            for verb in ("UPDATE", "DELETE")
        ]
    statements = [
        f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN RAISE EXCEPTION '% is append-only', TG_TABLE_NAME; END $$"
    ]
    for table in tables:
        statements.append(
            f"CREATE OR REPLACE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {function}()"
        )
        statements.append(
            f"CREATE OR REPLACE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
        )
    return statements
