"""A throwaway PostgreSQL server for tests: initdb into a temporary folder, start on loopback, stop.

Tests that promise "the same code runs on PostgreSQL" must run on a real server, so this helper
starts one from the distribution's binaries (Debian: /usr/lib/postgresql/<version>/bin, found on
PATH otherwise, or named by $PG_BIN). It never skips: a missing server is a broken test machine,
and the caller turns `PostgresUnavailable` into a test failure with the install line in it.

PostgreSQL refuses to run as root, so when the tests run as root the server runs as the
unprivileged `postgres` system user that Debian's package creates. Durability is switched off
(fsync, synchronous commit): the data is thrown away, and it makes each test's database fast.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

INSTALL_HINT = "install it with: apt-get update && apt-get install -y postgresql"
_SERVER_USER = "postgres"
_SUPERUSER = "postgres"
_START_ATTEMPTS = 3


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL binaries are missing or the server would not start."""


def find_bin_dir(
    env: Mapping[str, str] = os.environ,
    debian_pattern: str = "/usr/lib/postgresql/*/bin",
    path: str | None = None,
) -> Path:
    """The folder holding initdb and pg_ctl: $PG_BIN, the newest Debian install, or PATH."""
    candidates: list[Path] = []
    if env.get("PG_BIN"):
        candidates.append(Path(env["PG_BIN"]))
    debian = sorted(glob.glob(debian_pattern), key=lambda p: _version_key(Path(p).parent.name), reverse=True)
    candidates.extend(Path(p) for p in debian)
    on_path = shutil.which("initdb", path=path)
    if on_path:
        candidates.append(Path(on_path).parent)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    raise PostgresUnavailable(f"PostgreSQL server binaries (initdb, pg_ctl) not found; {INSTALL_HINT}")


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    """One server process with its own data folder; use as a context manager."""

    def __init__(self) -> None:
        self.bin_dir = find_bin_dir()
        self.port = 0
        self._root: Path | None = None
        self._as_user: str | None = None
        self._name_count = 0

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def data_dir(self) -> Path:
        assert self._root is not None, "server not started"
        return self._root / "data"

    def start(self) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="pgtest-"))
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam(_SERVER_USER)
            except KeyError as exc:
                raise PostgresUnavailable(
                    f"running as root needs the unprivileged {_SERVER_USER!r} user to run the server; "
                    f"{INSTALL_HINT}"
                ) from exc
            self._as_user = _SERVER_USER
            os.chown(self._root, account.pw_uid, account.pw_gid)
        (self._root / "socket").mkdir()
        if self._as_user:
            account = pwd.getpwnam(self._as_user)
            os.chown(self._root / "socket", account.pw_uid, account.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data_dir),
            "-U",
            _SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
            "--no-instructions",
        )
        last_error = ""
        for _ in range(_START_ATTEMPTS):
            self.port = _free_port()  # another process may take it before the server binds: retry
            options = (
                f"-h 127.0.0.1 -p {self.port} -k {self._root / 'socket'} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100"
            )
            try:
                self._run(
                    "pg_ctl",
                    "-D",
                    str(self.data_dir),
                    "-l",
                    str(self._root / "server.log"),
                    "-o",
                    options,
                    "-w",
                    "start",
                )
                return
            except PostgresUnavailable as exc:
                last_error = str(exc) + "\n" + self.log_tail()
        self.stop()
        raise PostgresUnavailable(f"the PostgreSQL server would not start:\n{last_error}")

    def stop(self) -> None:
        if self._root is None:
            return
        if (self.data_dir / "postmaster.pid").exists():
            with contextlib.suppress(PostgresUnavailable):
                self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self._root, ignore_errors=True)
        self._root = None

    def log_tail(self, lines: int = 20) -> str:
        if self._root is None or not (self._root / "server.log").exists():
            return ""
        return "\n".join((self._root / "server.log").read_text(errors="replace").splitlines()[-lines:])

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{_SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "test") -> str:
        """A new empty database; returns its SQLAlchemy URL (about 0.3 s: a copy of template0)."""
        name = self._new_name(prefix)
        self._admin(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.url(name)

    def create_schema(self, prefix: str = "test") -> str:
        """A new empty schema in the default database, as a URL whose search_path starts there.

        Much cheaper than a database per test, and just as isolated for code that names no schema.
        """
        name = self._new_name(prefix)
        self._admin(f'CREATE SCHEMA "{name}"')
        return f"{self.url()}?options=-csearch_path%3D{name}"

    def _new_name(self, prefix: str) -> str:
        self._name_count += 1
        return f"{prefix}_{os.getpid()}_{self._name_count}"

    def _admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=_SUPERUSER, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(statement)

    def _run(self, program: str, *args: str) -> None:
        result = subprocess.run(
            [str(self.bin_dir / program), *args],
            capture_output=True,
            text=True,
            check=False,
            user=self._as_user,
            cwd=self._root,
            timeout=60,
        )
        if result.returncode != 0:
            raise PostgresUnavailable(
                f"{program} failed ({result.returncode}): {result.stdout}{result.stderr}"
            )
