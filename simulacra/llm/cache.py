"""An on-disk response cache (SQLite) so a run can be replayed exactly.

The key covers everything that determines an answer: provider, model, the rendered messages, the
output schema, the sampling parameters and, for the scripted provider, the task and its variables
(it answers from those, not from the text).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path

from simulacra.llm.types import Completion, CompletionRequest


def cache_key(provider: str, model: str, request: CompletionRequest, seed: int | None = None) -> str:
    payload = {
        "provider": provider,
        "model": model,
        "task": request.task,
        "version": request.task_version,
        "variables": request.variables,
        "messages": [m.model_dump() for m in request.messages],
        "schema": request.schema_json(),
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "seed": seed,
    }
    encoded = request.encoded_variables()
    if encoded is None:
        blob = json.dumps(payload, sort_keys=True, default=str, ensure_ascii=False)
    else:
        # The same text with the variables spliced in from the client's encoding: keys sort
        # "temperature" < "variables" < "version", and the encoder joins items with ", ".
        del payload["variables"]
        version = {"version": payload.pop("version")}
        head = json.dumps(payload, sort_keys=True, default=str, ensure_ascii=False)
        tail = json.dumps(version, sort_keys=True, default=str, ensure_ascii=False)
        blob = f'{head[:-1]}, "variables": {encoded.whole(ensure_ascii=False)}, {tail[1:]}'
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection shared by the event loop's coroutines and worker threads; the lock keeps
        # sqlite3's single-connection rule.
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, completion TEXT NOT NULL)"
        )
        self._lock = threading.Lock()

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._conn.execute("SELECT completion FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else Completion.model_validate_json(row[0])

    def put(self, key: str, completion: Completion) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses (key, completion) VALUES (?, ?)",
                (key, completion.model_dump_json()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
