"""Saving and loading a memory stream: exact round trips, crash safety, refusing mismatched embedders."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from simulacra.clock import VirtualClock
from simulacra.embeddings.hashing import HashingEmbedder
from simulacra.llm.client import ChainLink, LLMClient
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers.scripted import ScriptedHandlers, ScriptedProvider
from simulacra.memory import (
    LLMImportanceRater,
    MemoryKind,
    MemoryStream,
    Provenance,
    RetrievalConfig,
    Scope,
    merge_near_duplicates,
    register_memory_handlers,
)
from simulacra.memory.store import current_snapshot

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ROOT / "simulacra" / "prompts"
START = datetime(2026, 4, 6, 9, 0)
DIM = 32


def rater() -> LLMImportanceRater:
    handlers = ScriptedHandlers()
    register_memory_handlers(handlers)
    return LLMImportanceRater(LLMClient([ChainLink(ScriptedProvider(handlers))], PromptLibrary([PROMPTS])))


def assert_same(a: MemoryStream, b: MemoryStream, queries: list[str]) -> None:
    assert len(a) == len(b)
    assert a.nodes(include_retired=True) == b.nodes(include_retired=True)
    assert a.matrix.precision == b.matrix.precision
    assert np.array_equal(a.matrix.stored(), b.matrix.stored())
    if a.index is None:
        assert b.index is None
    else:
        assert b.index is not None
        for key, value in a.index.state().items():
            assert np.array_equal(value, b.index.state()[key])
    for query in queries:
        assert a.retrieve(query, k=7, touch=False) == b.retrieve(query, k=7, touch=False)


async def filled_stream(clock: VirtualClock, config: RetrievalConfig | None = None) -> MemoryStream:
    stream = MemoryStream(HashingEmbedder(DIM), clock, rater(), config)
    customer = Provenance(
        author="customer_statement", scope=Scope.SESSION, scope_id="s-1", consultation_id="c-1"
    )
    first = await stream.add("She has a final salary pension worth £80,000", MemoryKind.OBSERVATION, customer)
    clock.advance(timedelta(minutes=5))
    await stream.add("She has a final salary pension worth £80,000", MemoryKind.OBSERVATION, customer)
    second = await stream.add("She is worried about running out of money", MemoryKind.OBSERVATION, customer)
    clock.advance(timedelta(hours=2))
    await stream.add(
        "Worry about money drives her questions",
        MemoryKind.REFLECTION,
        Provenance(author="agent", scope=Scope.CUSTOMER, scope_id="alice"),
        citations=[first.id, second.id],
        metadata={"question": "What drives her?", "round": 1, "nested": {"ok": [1, 2.5, None, "é"]}},
    )
    await stream.add(
        "Explain the options, then signpost Pension Wise", MemoryKind.PLAN, Provenance(author="agent")
    )
    merge_near_duplicates(stream, 0.99)
    stream.retrieve("money worries", k=2)
    return stream


async def test_round_trip_is_exact(tmp_path: Path) -> None:
    clock = VirtualClock(START)
    stream = await filled_stream(clock)
    assert any(not n for n in [stream.table.active.all()])  # one duplicate was retired
    stream.save(tmp_path / "memory")
    loaded = MemoryStream.load(tmp_path / "memory", HashingEmbedder(DIM), clock, rater())
    assert_same(stream, loaded, ["pension", "money worries", "plan"])
    # The loaded stream carries on: ids continue, citations to old nodes resolve.
    node = await loaded.add(
        "Later", MemoryKind.REFLECTION, Provenance(author="agent"), citations=["mem-000000"]
    )
    assert node.id == f"mem-{len(stream):06d}"


async def test_round_trip_with_index_bfloat16_and_aware_times(tmp_path: Path) -> None:
    clock = VirtualClock(datetime(2026, 4, 6, 9, 0, tzinfo=UTC))
    config = RetrievalConfig(ann_threshold=500, candidates=200, static_candidates=50)
    stream = await filled_stream(clock, config)
    rng = np.random.default_rng(0)
    n = 1_500
    stream.import_rows(
        descriptions=[f"bulk {i}" for i in range(n)],
        embeddings=rng.standard_normal((n, DIM)).astype(np.float32),
        importance=rng.integers(1, 11, n),
        kinds=MemoryKind.OBSERVATION,
        provenance=Provenance(author="tool", scope=Scope.APPLICATION),
        created_at=np.full(n, np.datetime64("2026-01-01T00:00:00.123456", "us")),
    )
    stream.retrieve("pension", k=3)
    assert stream.index is not None and stream.matrix.precision == "bfloat16"
    stream.save(tmp_path)
    loaded = MemoryStream.load(tmp_path, HashingEmbedder(DIM), clock, rater(), config)
    assert_same(stream, loaded, ["pension", "bulk 7", "worried"])
    assert loaded.get("mem-000010").created_at == datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)


async def test_saving_again_replaces_the_snapshot_and_sqlite_is_readable(tmp_path: Path) -> None:
    clock = VirtualClock(START)
    stream = await filled_stream(clock)
    first = stream.save(tmp_path)
    await stream.add("one more", MemoryKind.OBSERVATION, Provenance(author="agent"), importance=2)
    second = stream.save(tmp_path)
    assert first != second and not first.exists() and current_snapshot(tmp_path) == second
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["CURRENT", second.name])
    with sqlite3.connect(second / "memories.sqlite") as conn:
        rows = conn.execute(
            "SELECT id, kind, created_at, citations FROM memories_readable ORDER BY id"
        ).fetchall()
    assert rows[0][:3] == ("mem-000000", "observation", "2026-04-06T09:00:00.000")
    assert rows[3][3] == '["mem-000000", "mem-000002"]'


async def test_empty_stream_round_trips(tmp_path: Path) -> None:
    clock = VirtualClock(START)
    MemoryStream(HashingEmbedder(DIM), clock, rater()).save(tmp_path)
    loaded = MemoryStream.load(tmp_path, HashingEmbedder(DIM), clock, rater())
    assert len(loaded) == 0 and loaded.retrieve("anything") == []


async def test_load_refuses_another_embedder_and_missing_folders(tmp_path: Path) -> None:
    clock = VirtualClock(START)
    (await filled_stream(clock)).save(tmp_path)
    with pytest.raises(ValueError, match="embedder"):
        MemoryStream.load(tmp_path, HashingEmbedder(DIM * 2), clock, rater())
    with pytest.raises(FileNotFoundError, match="no saved memory stream"):
        MemoryStream.load(tmp_path / "nothing", HashingEmbedder(DIM), clock, rater())


_SAVER = textwrap.dedent(
    """
    import sys
    from datetime import datetime, timedelta
    import numpy as np
    from simulacra.clock import VirtualClock
    from simulacra.embeddings.hashing import HashingEmbedder
    from simulacra.memory import MemoryKind, MemoryStream, Provenance
    from tests.simulacra.test_memory_persistence import rater

    folder, n = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(42)
    clock = VirtualClock(datetime(2026, 1, 1))
    stream = MemoryStream(HashingEmbedder(32), clock, rater())
    stream.import_rows(
        descriptions=[f"memory {i}" for i in range(n)],
        embeddings=rng.standard_normal((n, 32)).astype(np.float32),
        importance=rng.integers(1, 11, n),
        kinds=MemoryKind.OBSERVATION,
        provenance=Provenance(author="agent"),
        created_at=np.full(n, np.datetime64("2025-06-01", "us")),
    )
    step = 0
    while True:
        step += 1
        clock.advance(timedelta(hours=1))
        stream.touch([f"mem-{i:06d}" for i in range(step % 50)])
        stream.save(folder)
        print(step, flush=True)
    """
)


def test_a_save_killed_midway_leaves_the_last_complete_snapshot(tmp_path: Path) -> None:
    n = 20_000
    folder = tmp_path / "memory"
    interrupted = 0
    for attempt in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", _SAVER, str(folder), str(n)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert child.stdout is not None
        child.stdout.readline()  # one complete save exists
        time.sleep(0.05 + 0.1 * attempt)
        child.send_signal(signal.SIGKILL)
        child.wait()
        leftovers = [p.name for p in folder.iterdir() if p.name != "CURRENT"]
        interrupted += len(leftovers) > 1
        loaded = MemoryStream.load(folder, HashingEmbedder(32), VirtualClock(datetime(2027, 1, 1)), rater())
        assert len(loaded) == n
        expected = np.random.default_rng(42).standard_normal((n, 32)).astype(np.float32)
        expected /= np.linalg.norm(expected, axis=1, keepdims=True)
        assert np.array_equal(loaded.matrix.stored(), expected)
        touched = {node.last_accessed_at for node in loaded.nodes()[:50]}
        assert len(touched) <= 2  # the rows one step touched share one time; the rest are untouched
    assert interrupted >= 1
    # The next save clears the debris of interrupted ones.
    loaded.save(folder)
    assert len([p for p in folder.iterdir() if p.name != "CURRENT"]) == 1
