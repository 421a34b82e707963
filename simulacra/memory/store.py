"""Saving a memory stream to a folder and loading it back, exactly and crash-safely.

Layout of a stream folder:

    CURRENT                    the name of the live snapshot (replaced atomically)
    snapshot-<token>/
        manifest.json          format version, size, embedder name and dimension, storage precision
        memories.sqlite        one row per memory: every field, queryable with any SQLite tool
        embeddings.npy         the embedding matrix as stored (float32 or bfloat16 bit patterns)
        ann.npz                the IVF index, when there is one (saves retraining on reload)

A save writes a whole new snapshot beside the old one and only then points CURRENT at it, so a
process killed mid-save leaves the previous snapshot intact and loadable; leftovers of an
interrupted save are removed by the next save.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sqlite3
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from simulacra.memory.ann import IVFIndex
from simulacra.memory.columns import (
    KIND_CODE,
    KINDS,
    SCOPE_CODE,
    SCOPES,
    MemoryTable,
    TimeCodec,
    node_id,
    row_of,
)
from simulacra.memory.matrix import EmbeddingMatrix, Precision

FORMAT_VERSION = 1
_CURRENT = "CURRENT"
_SNAPSHOT_PREFIX = "snapshot-"
_PARTIAL_PREFIX = ".partial-"

_SCHEMA = """
CREATE TABLE memories (
    row INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL,
    kind TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    last_accessed_us INTEGER NOT NULL,
    importance INTEGER NOT NULL,
    author TEXT NOT NULL,
    scope TEXT NOT NULL,
    scope_id TEXT,
    consultation_id TEXT,
    citations TEXT NOT NULL,
    metadata TEXT NOT NULL,
    active INTEGER NOT NULL
);
CREATE VIEW memories_readable AS
SELECT id, description, kind, importance, author, scope, scope_id, consultation_id,
       strftime('%Y-%m-%dT%H:%M:%f', created_us / 1e6, 'unixepoch') AS created_at,
       strftime('%Y-%m-%dT%H:%M:%f', last_accessed_us / 1e6, 'unixepoch') AS last_accessed_at,
       citations, metadata, active
FROM memories;
"""


class StreamManifest(BaseModel):
    format: int = FORMAT_VERSION
    count: int
    dimension: int
    embedder: str
    precision: Precision
    aware: bool | None
    has_index: bool


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_CHUNK = 50_000  # rows converted at a time: keeps a million-row save or load from doubling memory
_COLUMNS = (
    "kind",
    "created_us",
    "last_us",
    "importance",
    "author",
    "scope",
    "scope_id",
    "consultation",
    "active",
)


def _records(table: MemoryTable, start: int, stop: int) -> list[tuple]:
    cols = {name: table.column(name)[start:stop].tolist() for name in _COLUMNS}
    authors, scope_ids, consultations = table.authors, table.scope_ids, table.consultations
    out = []
    for i, row in enumerate(range(start, stop)):
        meta = table.metadata[row]
        out.append(
            (
                row,
                node_id(row),
                table.descriptions[row],
                KINDS[cols["kind"][i]].value,
                cols["created_us"][i],
                cols["last_us"][i],
                cols["importance"][i],
                authors.values[cols["author"][i]],
                SCOPES[cols["scope"][i]].value,
                scope_ids.value(cols["scope_id"][i]),
                consultations.value(cols["consultation"][i]),
                json.dumps([node_id(r) for r in table.citations[row]]),
                json.dumps(meta, ensure_ascii=False, sort_keys=True) if meta else "{}",
                int(cols["active"][i]),
            )
        )
    return out


def _write_sqlite(path: Path, table: MemoryTable) -> None:
    conn = sqlite3.connect(str(path))
    try:
        # The file is fsynced as a whole before it becomes visible, so SQLite's own journaling
        # would only slow the bulk insert down.
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.executescript(_SCHEMA)
        for start in range(0, table.n, _CHUNK):
            records = _records(table, start, min(table.n, start + _CHUNK))
            conn.executemany("INSERT INTO memories VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", records)
        conn.commit()
    finally:
        conn.close()


def _read_sqlite(path: Path, codec: TimeCodec, count: int) -> MemoryTable:
    table = MemoryTable(codec)
    table.reserve(count)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        cursor = conn.execute(
            "SELECT description, kind, created_us, last_accessed_us, importance, author, scope, scope_id,"
            " consultation_id, citations, metadata, active FROM memories ORDER BY row"
        )
        while records := cursor.fetchmany(_CHUNK):
            _append_records(table, records)
    finally:
        conn.close()
    return table


def _append_records(table: MemoryTable, records: list[tuple]) -> None:
    (
        descriptions,
        kinds,
        created,
        last,
        importance,
        authors,
        scopes,
        scope_ids,
        consultations,
        citations,
        metadata,
        active,
    ) = zip(*records, strict=True)
    n = len(records)
    table.append(
        descriptions=descriptions,
        kinds=np.fromiter((KIND_CODE[k] for k in kinds), np.int8, n),
        created_us=np.fromiter(created, np.int64, n),
        last_us=np.fromiter(last, np.int64, n),
        importance=np.fromiter(importance, np.int8, n),
        provenance_codes=(
            np.fromiter((SCOPE_CODE[s] for s in scopes), np.int8, n),
            np.fromiter((table.authors.code(a) for a in authors), np.int32, n),
            np.fromiter((table.scope_ids.code(s) for s in scope_ids), np.int32, n),
            np.fromiter((table.consultations.code(c) for c in consultations), np.int32, n),
        ),
        citations=[() if c == "[]" else _citation_rows(c) for c in citations],
        metadata=[None if m == "{}" else json.loads(m) for m in metadata],
        active=np.fromiter(active, np.bool_, n),
    )


def _citation_rows(text: str) -> tuple[int, ...]:
    rows = []
    for cited in json.loads(text):
        row = row_of(cited)
        if row is None:
            raise ValueError(f"stored citation {cited!r} is not a memory id")
        rows.append(row)
    return tuple(rows)


def save_stream(
    folder: Path | str,
    table: MemoryTable,
    matrix: EmbeddingMatrix,
    index: IVFIndex | None,
    *,
    embedder: str,
) -> Path:
    """Write a new snapshot and switch CURRENT to it; returns the snapshot's folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(6)
    partial = folder / f"{_PARTIAL_PREFIX}{token}"
    partial.mkdir()
    manifest = StreamManifest(
        count=table.n,
        dimension=matrix.dimension,
        embedder=embedder,
        precision=matrix.precision,
        aware=table.codec.aware,
        has_index=index is not None and index.covered == table.n,
    )
    files = [partial / "manifest.json", partial / "memories.sqlite", partial / "embeddings.npy"]
    files[0].write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
    _write_sqlite(files[1], table)
    np.save(files[2], matrix.stored(), allow_pickle=False)
    if manifest.has_index and index is not None:
        files.append(partial / "ann.npz")
        np.savez(files[-1], **index.state())
    for path in files:
        _fsync_file(path)
    _fsync_dir(partial)
    snapshot = folder / f"{_SNAPSHOT_PREFIX}{token}"
    os.rename(partial, snapshot)
    pointer = folder / f"{_PARTIAL_PREFIX}{token}.current"
    pointer.write_text(snapshot.name, encoding="utf-8")
    _fsync_file(pointer)
    os.replace(pointer, folder / _CURRENT)
    _fsync_dir(folder)
    for other in folder.iterdir():
        stale = other.name.startswith(_PARTIAL_PREFIX) or (
            other.name.startswith(_SNAPSHOT_PREFIX) and other.name != snapshot.name
        )
        if stale and other.is_dir():
            shutil.rmtree(other)
        elif stale:
            other.unlink()
    return snapshot


def current_snapshot(folder: Path | str) -> Path:
    folder = Path(folder)
    pointer = folder / _CURRENT
    if not pointer.is_file():
        raise FileNotFoundError(f"{folder} holds no saved memory stream (no {_CURRENT} file)")
    snapshot = folder / pointer.read_text(encoding="utf-8").strip()
    if not snapshot.is_dir():
        raise FileNotFoundError(f"{folder}/{_CURRENT} names {snapshot.name}, which does not exist")
    return snapshot


def load_stream(folder: Path | str) -> tuple[StreamManifest, MemoryTable, EmbeddingMatrix, IVFIndex | None]:
    snapshot = current_snapshot(folder)
    manifest = StreamManifest.model_validate_json((snapshot / "manifest.json").read_text(encoding="utf-8"))
    if manifest.format != FORMAT_VERSION:
        raise ValueError(
            f"memory stream format {manifest.format} is not supported (expected {FORMAT_VERSION})"
        )
    table = _read_sqlite(snapshot / "memories.sqlite", TimeCodec(manifest.aware), manifest.count)
    matrix = EmbeddingMatrix.from_stored(np.load(snapshot / "embeddings.npy"), manifest.precision)
    if table.n != manifest.count or matrix.n != manifest.count:
        raise ValueError(
            f"snapshot {snapshot} is inconsistent: manifest says {manifest.count} memories, "
            f"table has {table.n}, embeddings have {matrix.n}"
        )
    index = None
    if manifest.has_index:
        with np.load(snapshot / "ann.npz") as state:
            index = IVFIndex.from_state({key: state[key] for key in state.files})
    return manifest, table, matrix, index
