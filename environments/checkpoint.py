"""Checkpoints of a training run, so a run killed at any moment resumes where it stood.

A checkpoint is written after each virtual day's learning, and once before the first day. It is a
folder under `RUN_DIR/checkpoint/` holding everything that learning changes:

- `state.json`: the last day learned from, the byte length of each append-only run file
  (transcripts, plans), the memory clock, learning totals, LLM usage, how many reviewed failures
  were read, and the day's MLflow figures until they are known to be logged;
- `bases/`: every record of the case and rules collections with its embedding, in store order;
- `memory/`: the advisor's memory stream (`MemoryStream.save`);
- `novelty.json`: the replies the validator's novelty check has committed, day by day.

The folder is written beside the current one and then `CURRENT` is switched to it with an atomic
rename, so a kill leaves either the old checkpoint or the new one, never half of one.

On resume the run's append-only files are cut back to the checkpoint's lengths, the bases are
emptied and refilled from the snapshot, and the memory stream and novelty memory are reloaded.
A day that had finished (or half finished) but was not yet learned from is run again from its
seeds: a seeded scripted consultation is deterministic, so it is redone rather than remembered,
and nothing is learned from twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from casebase import Bases
from environments.config import AppConfig
from environments.memory import EXPERIENCE, AdvisorMemory
from simulacra.llm.accounting import TaskUsage
from simulacra.memory.reflection import ReflectionConfig, Reflector
from simulacra.memory.stream import MemoryStream

CHECKPOINT_DIR = "checkpoint"
CURRENT = "CURRENT"
STATE = "state.json"
FORMAT = 1
_PAGE = 1000

# Settings that change how a run is carried out but not what happens in it: they may differ
# between the killed run and its resumption.
HOW_NOT_WHAT = {
    ("resume",),
    ("executor",),
    ("environment", "concurrency"),
    ("environment", "acceleration"),
    ("tracking", "traces"),
}


class DayLog(BaseModel):
    """A day's MLflow figures, kept until they are logged so a resumed run logs them exactly once.

    Logging again after a kill reuses the same timestamp, and MLflow ignores a metric whose key,
    step, timestamp and value it already holds.
    """

    day: int
    timestamp_ms: int
    consultation_metrics: dict[int, dict[str, float]] = Field(default_factory=dict)
    day_metrics: dict[str, float] = Field(default_factory=dict)
    consultation_ids: list[str] = Field(default_factory=list)


class CheckpointState(BaseModel):
    format: int = FORMAT
    fingerprint: str
    day: int  # last virtual day learned from; -1 before the first day
    files: dict[str, int]  # append-only run file -> its length in bytes at this checkpoint
    memory_clock: datetime
    learning: dict[str, Any]
    reviewed_seen: int
    usage: dict[str, TaskUsage]
    pending_log: DayLog | None = None


class NoveltyLog(BaseModel):
    """The replies the validator's novelty memory holds: committed day by day, and shown since."""

    batches: list[list[str]] = Field(default_factory=list)
    pending: list[str] = Field(default_factory=list)


class ResumeMismatchError(Exception):
    """The resumed command differs from the killed one in something that changes the run."""


def fingerprint(app: AppConfig) -> str:
    """A digest of every setting that decides what happens in the run."""
    data = app.model_dump(mode="json")
    for path in HOW_NOT_WHAT:
        node: Any = data
        for key in path[:-1]:
            node = node.get(key, {})
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


# --- files ------------------------------------------------------------------------------------


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    with partial.open("w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
    fsync_dir(path.parent)


def append_lines(path: Path, lines: Iterable[str]) -> int:
    """Append lines, flush them to disk and return the file's new length."""
    with path.open("a", encoding="utf-8") as out:
        for line in lines:
            out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())
        return out.tell()


def truncate_to(path: Path, length: int) -> None:
    """Cut an append-only file back to `length` bytes (what a checkpoint saw of it)."""
    if not path.exists():
        if length:
            raise FileNotFoundError(f"{path} is missing but the checkpoint saw {length} bytes of it")
        return
    if path.stat().st_size < length:
        raise ValueError(f"{path} is shorter than the checkpoint saw ({length} bytes)")
    with path.open("r+b") as out:
        out.truncate(length)
        out.flush()
        os.fsync(out.fileno())


# --- case and rules bases ----------------------------------------------------------------------


def collection_names(app: AppConfig) -> list[str]:
    store = app.casebase.store
    return [
        store.collection_prefix + store.cases_collection,
        store.collection_prefix + store.rules_collection,
    ]


def save_collections(bases: Bases, names: list[str], folder: Path) -> None:
    """Every record of each collection, in store order, with the embedding it was stored with."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        collection = bases.client.get_collection(name, embedding_function=None)
        ids: list[str] = []
        documents: list[str | None] = []
        metadatas: list[Any] = []
        vectors: list[np.ndarray] = []
        offset = 0
        while True:
            page = collection.get(
                include=["documents", "metadatas", "embeddings"], limit=_PAGE, offset=offset
            )
            ids.extend(page["ids"])
            documents.extend(page["documents"] or [])
            metadatas.extend(page["metadatas"] or [])
            if len(page["ids"]):
                vectors.append(np.asarray(page["embeddings"], dtype=np.float32))
            if len(page["ids"]) < _PAGE:
                break
            offset += _PAGE
        records = {"ids": ids, "documents": documents, "metadatas": metadatas}
        (folder / f"{name}.json").write_text(json.dumps(records), encoding="utf-8")
        dimension = collection.metadata.get("dimension", 0) if collection.metadata else 0
        matrix = np.vstack(vectors) if vectors else np.zeros((0, int(dimension)), dtype=np.float32)
        np.save(folder / f"{name}.npy", matrix, allow_pickle=False)


def clear_collections(bases: Bases, names: list[str]) -> None:
    """Empty the collections in place (the bases keep their handles on them)."""
    batch = max(1, bases.client.get_max_batch_size())
    for name in names:
        collection = bases.client.get_collection(name, embedding_function=None)
        while True:
            present = collection.get(include=[], limit=batch)["ids"]
            if not present:
                break
            collection.delete(ids=present)


def restore_collections(bases: Bases, names: list[str], folder: Path) -> None:
    """Make each collection hold exactly what the snapshot holds, added in the snapshot's order."""
    clear_collections(bases, names)
    batch = max(1, bases.client.get_max_batch_size())
    for name in names:
        collection = bases.client.get_collection(name, embedding_function=None)
        records = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
        matrix = np.load(folder / f"{name}.npy", allow_pickle=False)
        ids = records["ids"]
        for start in range(0, len(ids), batch):
            end = start + batch
            collection.add(
                ids=ids[start:end],
                embeddings=matrix[start:end],
                documents=records["documents"][start:end],
                metadatas=records["metadatas"][start:end] or None,
            )


# --- the advisor's memory -----------------------------------------------------------------------


def restore_memory(memory: AdvisorMemory, folder: Path, app: AppConfig) -> None:
    """Load the saved stream into `memory`, with a reflector that counts from its last reflection."""
    stream = MemoryStream.load(folder, memory.stream.embedder, memory.stream.clock, memory.stream.rater)
    memory.stream = stream
    memory.reflector = Reflector.from_config(
        stream,
        memory.reflector.llm,
        ReflectionConfig(threshold=app.advisor.reflection_threshold),
        provenance=EXPERIENCE,
    )


# --- the checkpoint folder ----------------------------------------------------------------------


class Checkpoint(BaseModel):
    """A checkpoint on disk: its state and the folder with its snapshots."""

    folder: Path
    state: CheckpointState

    def bases(self) -> Path:
        return self.folder / "bases"

    def memory(self) -> Path:
        return self.folder / "memory"

    def novelty(self) -> NoveltyLog:
        path = self.folder / "novelty.json"
        return (
            NoveltyLog.model_validate_json(path.read_text(encoding="utf-8"))
            if path.exists()
            else NoveltyLog()
        )

    def mark_logged(self) -> None:
        self.state = self.state.model_copy(update={"pending_log": None})
        write_atomically(self.folder / STATE, self.state.model_dump_json(indent=2))


def write_checkpoint(
    run_dir: Path,
    state: CheckpointState,
    *,
    bases: Bases,
    collections: list[str],
    memory: AdvisorMemory,
    novelty: NoveltyLog | None,
) -> Checkpoint:
    root = run_dir / CHECKPOINT_DIR
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"day-{state.day + 1:05d}-{secrets.token_hex(3)}"
    folder.mkdir()
    save_collections(bases, collections, folder / "bases")
    memory.save(folder / "memory")
    if novelty is not None:
        (folder / "novelty.json").write_text(novelty.model_dump_json(), encoding="utf-8")
    (folder / STATE).write_text(state.model_dump_json(indent=2), encoding="utf-8")
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
    fsync_dir(folder)
    write_atomically(root / CURRENT, folder.name)
    # Older checkpoints (and any half-written one from a killed run) are no longer needed.
    for other in root.iterdir():
        if other.is_dir() and other.name != folder.name:
            shutil.rmtree(other, ignore_errors=True)
    return Checkpoint(folder=folder, state=state)


def load_checkpoint(run_dir: Path) -> Checkpoint | None:
    pointer = run_dir / CHECKPOINT_DIR / CURRENT
    if not pointer.exists():
        return None
    folder = pointer.parent / pointer.read_text(encoding="utf-8").strip()
    state = CheckpointState.model_validate_json((folder / STATE).read_text(encoding="utf-8"))
    if state.format != FORMAT:
        raise ValueError(f"checkpoint {folder} has format {state.format}, expected {FORMAT}")
    return Checkpoint(folder=folder, state=state)


# --- usage ------------------------------------------------------------------------------------


def add_usage(*parts: dict[str, TaskUsage]) -> dict[str, TaskUsage]:
    """Usage per task summed over several ledgers (the driver's, each worker's, a checkpoint's)."""
    total: dict[str, TaskUsage] = {}
    for part in parts:
        for task, usage in part.items():
            into = total.setdefault(task, TaskUsage())
            for name in TaskUsage.model_fields:
                setattr(into, name, getattr(into, name) + getattr(usage, name))
    return dict(sorted(total.items()))


def subtract_usage(after: dict[str, TaskUsage], before: dict[str, TaskUsage]) -> dict[str, TaskUsage]:
    out: dict[str, TaskUsage] = {}
    for task, usage in after.items():
        earlier = before.get(task, TaskUsage())
        out[task] = TaskUsage(
            **{name: getattr(usage, name) - getattr(earlier, name) for name in TaskUsage.model_fields}
        )
    return out


def usage_totals(usage: dict[str, TaskUsage]) -> TaskUsage:
    total = TaskUsage()
    for task_usage in usage.values():
        for name in TaskUsage.model_fields:
            setattr(total, name, getattr(total, name) + getattr(task_usage, name))
    return total
