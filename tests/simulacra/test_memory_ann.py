"""The approximate path: IVF candidates + static candidates + exact re-scoring, against exact scoring."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    RetrievalFilter,
    register_memory_handlers,
)
from simulacra.memory.matrix import EmbeddingMatrix, from_bfloat16, to_bfloat16
from simulacra.memory.retrieval import filter_mask, rank

PROMPTS = Path(__file__).resolve().parents[2] / "simulacra" / "prompts"
START = datetime(2026, 1, 1)
NOW = START + timedelta(days=200)
DIM = 32
CONFIG = RetrievalConfig(ann_threshold=2_000, candidates=800, static_candidates=100)


def rater() -> LLMImportanceRater:
    handlers = ScriptedHandlers()
    register_memory_handlers(handlers)
    return LLMImportanceRater(LLMClient([ChainLink(ScriptedProvider(handlers))], PromptLibrary([PROMPTS])))


def clustered(
    n: int, rng: np.random.Generator, topics: int = 40
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    centres = rng.standard_normal((topics, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    topic = rng.integers(0, topics, n)
    vectors = centres[topic] + 0.5 * rng.standard_normal((n, DIM)).astype(np.float32) / np.sqrt(DIM)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True), topic, centres


def populate(stream: MemoryStream, vectors: np.ndarray, rng: np.random.Generator, kinds=None) -> None:
    n = len(vectors)
    created = np.datetime64(START, "us") + (np.sort(rng.integers(0, 150 * 24 * 3600, n)) * 10**6).astype(
        "timedelta64[us]"
    )
    accessed = created + (rng.random(n) ** 3 * 40 * 24 * 3600 * 10**6).astype("timedelta64[us]")
    stream.import_rows(
        descriptions=[f"memory {len(stream) + i}" for i in range(n)],
        embeddings=vectors,
        importance=rng.integers(1, 11, n),
        kinds=kinds if kinds is not None else MemoryKind.OBSERVATION,
        provenance=[Provenance(author="agent", consultation_id=f"c-{i % 200}") for i in range(n)],
        created_at=created,
        last_accessed_at=accessed,
    )


def exact_rows(
    stream: MemoryStream, query: np.ndarray, k: int, f: RetrievalFilter | None = None
) -> list[int]:
    now = stream.table.codec.encode(stream.clock.now())
    q = query / np.linalg.norm(query)
    return rank(
        stream.table, stream.matrix, q, k, filter_mask(stream.table, f), now, stream.config
    ).rows.tolist()


def approx_rows(
    stream: MemoryStream, query: np.ndarray, k: int, f: RetrievalFilter | None = None
) -> list[int]:
    return [stream.row(s.node.id) for s in stream.retrieve(query, k=k, filter=f, touch=False)]


@pytest.fixture(scope="module")
def big() -> tuple[MemoryStream, np.ndarray]:
    rng = np.random.default_rng(3)
    vectors, _, centres = clustered(8_000, rng)
    stream = MemoryStream(HashingEmbedder(DIM), VirtualClock(NOW), rater(), CONFIG)
    populate(stream, vectors, rng)
    # Some retrievals first, so a few memories are very recent (as in a running simulation).
    for q in clustered(20, rng)[0]:
        stream.retrieve(q, k=10)
    return stream, centres


def test_large_stream_uses_the_index_and_bfloat16(big) -> None:
    stream, _ = big
    assert stream.index is not None and stream.matrix.precision == "bfloat16"
    stream.retrieve(np.ones(DIM, dtype=np.float32), k=5, touch=False)
    assert stream.last_retrieval is not None and stream.last_retrieval.approximate
    assert stream.last_retrieval.candidates < len(stream) / 2
    # Probed rows whose recency and importance cannot reach the k-th score are not even read.
    query = clustered(1, np.random.default_rng(4))[0][0]
    stream.retrieve(query, k=10, touch=False)
    assert stream.last_retrieval.candidates < len(stream.index.probe(query, CONFIG.candidates))


def test_ann_agrees_with_exact_on_clustered_data(big) -> None:
    stream, _ = big
    queries = clustered(40, np.random.default_rng(11))[0]
    overlaps = [len(set(approx_rows(stream, q, 10)) & set(exact_rows(stream, q, 10))) / 10 for q in queries]
    assert np.mean(overlaps) >= 0.95
    ranked = stream.retrieve(queries[0], k=10, touch=False)
    assert [s.score for s in ranked] == sorted((s.score for s in ranked), reverse=True)


@pytest.mark.parametrize(
    "weights",
    [
        {"alpha_recency": 0.5, "alpha_importance": 2.0, "alpha_relevance": 3.0},  # the reference's
        {"alpha_recency": 1.0, "alpha_importance": 1.0, "alpha_relevance": 1.0, "normalisation": "none"},
        {"alpha_recency": 2.0, "alpha_importance": 0.0, "alpha_relevance": 1.0, "decay": 0.9},
    ],
)
def test_pruned_candidates_still_agree_with_exact_under_other_weights(big, weights) -> None:
    """Probed rows are skipped when their recency and importance cannot reach the k-th score; that
    bound must hold whatever the weights and normalisation."""
    stream, _ = big
    original = stream.config
    stream.config = CONFIG.model_copy(update=weights)
    try:
        queries = clustered(30, np.random.default_rng(21))[0]
        overlaps = []
        for q in queries:
            got = approx_rows(stream, q, 10)
            assert stream.last_retrieval is not None and stream.last_retrieval.approximate
            overlaps.append(len(set(got) & set(exact_rows(stream, q, 10))) / 10)
        assert np.mean(overlaps) >= 0.95
    finally:
        stream.config = original


def test_recent_important_memory_far_from_the_query_is_not_lost(big) -> None:
    stream, centres = big
    query = centres[0]
    farthest = int(np.argmin(stream.matrix.dots(query)))
    stream.table.set_importance(farthest, 10)
    stream.touch([stream.get(f"mem-{farthest:06d}").id])
    assert farthest not in stream.index.probe(query, stream.config.candidates)
    assert farthest in exact_rows(stream, query, 10)
    assert farthest in approx_rows(stream, query, 10)


def test_filters_on_the_approximate_path(big) -> None:
    stream, centres = big
    selective = RetrievalFilter(consultation_id="c-17")
    got = stream.retrieve(centres[1], k=10, filter=selective, touch=False)
    assert all(s.node.provenance.consultation_id == "c-17" for s in got)
    assert [stream.row(s.node.id) for s in got] == exact_rows(stream, centres[1], 10, selective)
    broad = RetrievalFilter(min_importance=4)
    got = approx_rows(stream, centres[2], 10, broad)
    assert all(stream.table.importance[r] >= 4 for r in got)
    assert len(set(got) & set(exact_rows(stream, centres[2], 10, broad))) >= 9


def test_rows_added_after_the_index_are_found_and_growth_retrains() -> None:
    rng = np.random.default_rng(5)
    vectors, _, centres = clustered(3_000, rng)
    stream = MemoryStream(HashingEmbedder(DIM), VirtualClock(NOW), rater(), CONFIG)
    populate(stream, vectors, rng)
    index = stream.build_index()
    assert index.covered == 3_000 and index.trained_on == 3_000
    newcomer = centres[5] + 0.01 * rng.standard_normal(DIM).astype(np.float32)
    populate(stream, newcomer[None, :], rng)
    stream.table.set_importance(3_000, 10)
    assert stream.index is index and index.covered == 3_001
    assert 3_000 in index.probe(centres[5], 200)
    assert approx_rows(stream, newcomer, 10)[:1] == exact_rows(stream, newcomer, 10)[:1]
    populate(stream, clustered(3_000, rng)[0], rng)
    stream.retrieve(centres[0], k=3)
    assert stream.index is not index and stream.index.trained_on == 6_001


def test_small_streams_stay_exact_and_float32() -> None:
    rng = np.random.default_rng(2)
    stream = MemoryStream(HashingEmbedder(DIM), VirtualClock(NOW), rater(), CONFIG)
    populate(stream, clustered(500, rng)[0], rng)
    stream.retrieve(np.ones(DIM, dtype=np.float32), k=3)
    assert stream.index is None and stream.matrix.precision == "float32"
    assert stream.last_retrieval is not None and not stream.last_retrieval.approximate


def test_bfloat16_is_a_rounded_float32() -> None:
    rng = np.random.default_rng(0)
    values = rng.standard_normal((50, 16)).astype(np.float32)
    decoded = from_bfloat16(to_bfloat16(values))
    assert np.all(np.abs(decoded - values) <= np.abs(values) * 2**-8)
    assert np.array_equal(from_bfloat16(to_bfloat16(decoded)), decoded)
    matrix = EmbeddingMatrix(16, "float32")
    matrix.append(values)
    before = matrix.dots(values[0])
    matrix.compress()
    assert matrix.precision == "bfloat16" and matrix.stored().dtype == np.uint16
    assert np.allclose(matrix.dots(values[0]), before, atol=0.05)
    assert np.array_equal(matrix.dots(values[0], np.array([3, 1])), matrix.dots(values[0])[[3, 1]])


@settings(max_examples=30, deadline=None)
@given(
    dim=st.integers(1, 70),
    n=st.integers(2, 2_200),
    copies=st.integers(2, 6),
    precision=st.sampled_from(["float32", "bfloat16"]),
    seed=st.integers(0, 2**16),
)
def test_identical_rows_get_bit_identical_dots_wherever_they_sit(dim, n, copies, precision, seed) -> None:
    """Ties between identical memories are broken by creation order only if their relevance is
    exactly equal, whatever their position (chunk boundaries, alignment) and however they are read."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    positions = rng.choice(n, size=min(copies, n), replace=False)
    vectors[positions] = rng.standard_normal(dim).astype(np.float32)
    matrix = EmbeddingMatrix(dim, precision)
    matrix.append(vectors)
    query = rng.standard_normal(dim).astype(np.float32)
    every = matrix.dots(query)
    assert len(set(every[positions].tolist())) == 1
    subset = np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False))
    subset = np.union1d(subset, positions)
    assert np.array_equal(matrix.dots(query, subset), every[subset])


def test_the_approximate_path_touches_what_it_returns_and_breaks_ties_by_creation_order() -> None:
    rng = np.random.default_rng(9)
    vectors, _, centres = clustered(4_000, rng)
    twin = centres[3]
    spots = [500, 1_700, 2_900, 3_999]
    vectors[spots] = twin
    stream = MemoryStream(HashingEmbedder(DIM), VirtualClock(NOW), rater(), CONFIG)
    populate(stream, vectors, rng)
    for row in spots:  # equal in everything that is scored
        stream.table.set_importance(row, 10)
    stream.touch([f"mem-{row:06d}" for row in spots])
    stream.clock.advance(timedelta(hours=5))
    found = stream.retrieve(twin, k=6)
    assert stream.last_retrieval is not None and stream.last_retrieval.approximate
    rows = [stream.row(s.node.id) for s in found]
    assert rows[:4] == spots and len({s.score for s in found[:4]}) == 1
    for s in found:
        assert stream.get(s.node.id).last_accessed_at == NOW + timedelta(hours=5)
    untouched = next(r for r in range(len(stream)) if r not in rows and r not in spots)
    assert stream.get(f"mem-{untouched:06d}").last_accessed_at < NOW
