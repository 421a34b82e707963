"""Scoring properties, checked with hypothesis against a brute-force reference written from the spec.

score = a_rec * decay ** hours_since_access + a_imp * (importance - 1) / 9 + a_rel * cosine, each part
min-max normalised over the candidates under "minmax" (all-equal -> 0.5), raw under "none".
"""

from __future__ import annotations

import asyncio
import itertools
import math
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulacra.clock import VirtualClock
from simulacra.embeddings.hashing import HashingEmbedder
from simulacra.llm.client import ChainLink, LLMClient
from simulacra.llm.prompts import PromptLibrary
from simulacra.llm.providers.scripted import ScriptedHandlers, ScriptedProvider
from simulacra.memory import (
    LLMImportanceRater,
    MemoryKind,
    MemoryNode,
    MemoryStream,
    Provenance,
    RetrievalConfig,
    RetrievalFilter,
    Scope,
    register_memory_handlers,
)
from simulacra.memory.retrieval import (
    importance,
    normalise,
    recency,
    static_bounds,
    static_scores,
    top_k_stable,
)

PROMPTS = Path(__file__).resolve().parents[2] / "simulacra" / "prompts"
START = datetime(2026, 1, 1, 0, 0)
NOW = START + timedelta(days=400)
TOLERANCE = 1e-5  # relevance is computed in float32; the reference in float64
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

AUTHORS = ("agent", "customer_statement", "tool")
CONSULTATIONS = (None, "c-1", "c-2")
SCOPE_IDS = (None, "alice", "bob")


def rater() -> LLMImportanceRater:
    handlers = ScriptedHandlers()
    register_memory_handlers(handlers)
    return LLMImportanceRater(
        LLMClient([ChainLink(ScriptedProvider(handlers, seed=1))], PromptLibrary([PROMPTS]))
    )


@st.composite
def memories(draw, dim: int = 6, min_size: int = 1, max_size: int = 30):
    """Rows for import_rows; embeddings come from a small pool so exact ties are common."""
    n = draw(st.integers(min_size, max_size))
    pool = draw(st.lists(st.lists(st.integers(-3, 3), min_size=dim, max_size=dim), min_size=1, max_size=4))
    pool = [[*vec[:-1], 5] if not any(vec) else vec for vec in pool]
    rows = []
    for _ in range(n):
        created = draw(st.integers(0, 300 * 24 * 60))  # minutes after START
        accessed = created + draw(st.integers(0, 60 * 24 * 60))
        rows.append(
            {
                "embedding": draw(st.sampled_from(pool)),
                "importance": draw(st.integers(1, 10)),
                "kind": draw(st.sampled_from(list(MemoryKind))),
                "provenance": Provenance(
                    author=draw(st.sampled_from(AUTHORS)),
                    scope=draw(st.sampled_from(list(Scope))),
                    scope_id=draw(st.sampled_from(SCOPE_IDS)),
                    consultation_id=draw(st.sampled_from(CONSULTATIONS)),
                ),
                "created": START + timedelta(minutes=created),
                "accessed": START + timedelta(minutes=accessed),
            }
        )
    return rows


configs = st.builds(
    RetrievalConfig,
    alpha_recency=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    alpha_importance=st.sampled_from([0.0, 1.0, 2.0]),
    alpha_relevance=st.sampled_from([0.0, 1.0, 3.0]),
    decay=st.sampled_from([0.9, 0.99, 0.995, 1.0]),
    normalisation=st.sampled_from(["minmax", "none"]),
)

filters = st.builds(
    RetrievalFilter,
    kinds=st.none() | st.sets(st.sampled_from(list(MemoryKind))),
    scopes=st.none() | st.sets(st.sampled_from(list(Scope)), min_size=1),
    scope_id=st.sampled_from([None, "alice", "bob", "carol"]),
    consultation_id=st.sampled_from([None, "c-1", "c-2"]),
    authors=st.none() | st.sets(st.sampled_from(AUTHORS), min_size=1),
    since=st.none() | st.integers(0, 300).map(lambda d: START + timedelta(days=d)),
    until=st.none() | st.integers(0, 300).map(lambda d: START + timedelta(days=d)),
    min_importance=st.none() | st.integers(1, 10),
)


def build(rows: list[dict], config: RetrievalConfig | None = None, dim: int = 6) -> MemoryStream:
    stream = MemoryStream(
        HashingEmbedder(max(dim, 8)) if dim >= 8 else _Dim(dim), VirtualClock(NOW), rater(), config
    )
    if rows:
        stream.import_rows(
            descriptions=[f"memory {i}" for i in range(len(rows))],
            embeddings=np.array([r["embedding"] for r in rows], dtype=np.float32),
            importance=np.array([r["importance"] for r in rows]),
            kinds=[r["kind"] for r in rows],
            provenance=[r["provenance"] for r in rows],
            created_at=np.array([r["created"] for r in rows], dtype="datetime64[us]"),
            last_accessed_at=np.array([r["accessed"] for r in rows], dtype="datetime64[us]"),
        )
    return stream


class _Dim(HashingEmbedder):
    """The hashing embedder needs 8+ dimensions; these tests only pass vectors, so any size will do."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension


def passes(node: MemoryNode, f: RetrievalFilter | None) -> bool:
    if f is None:
        return True
    p = node.provenance
    return (
        (f.kinds is None or node.kind in f.kinds)
        and (f.scopes is None or p.scope in f.scopes)
        and (f.scope_id is None or p.scope_id == f.scope_id)
        and (f.consultation_id is None or p.consultation_id == f.consultation_id)
        and (f.authors is None or p.author in f.authors)
        and (f.since is None or node.created_at >= f.since)
        and (f.until is None or node.created_at < f.until)
        and (f.min_importance is None or node.importance >= f.min_importance)
    )


def _minmax(values: list[float]) -> list[float]:
    lo, hi = min(values), max(values)
    return [0.5] * len(values) if hi == lo else [(v - lo) / (hi - lo) for v in values]


def reference(stream: MemoryStream, query: np.ndarray, config: RetrievalConfig, f: RetrievalFilter | None):
    """Brute force, straight from the formula: {node id: score} over every eligible memory."""
    nodes = [n for n in stream.nodes(include_retired=False) if passes(n, f)]
    if not nodes:
        return {}
    q = np.asarray(query, dtype=np.float64)
    q = q / np.linalg.norm(q)
    now = stream.clock.now()
    rec = [config.decay ** ((now - n.last_accessed_at).total_seconds() / 3600) for n in nodes]
    imp = [(n.importance - 1) / 9 for n in nodes]
    rel = [float(stream.embedding(n.id).astype(np.float64) @ q) for n in nodes]
    if config.normalisation == "minmax":
        rec, imp, rel = _minmax(rec), _minmax(imp), _minmax(rel)
    return {
        n.id: config.alpha_recency * a + config.alpha_importance * b + config.alpha_relevance * c
        for n, a, b, c in zip(nodes, rec, imp, rel, strict=True)
    }


def check_top_k(stream, query, k, config, f) -> None:
    expected = reference(stream, query, config, f)
    got = stream.retrieve(query, k=k, filter=f, touch=False)
    assert len(got) == min(k, len(expected))
    returned = {s.node.id for s in got}
    for scored in got:
        assert passes(scored.node, f)
        assert math.isclose(scored.score, expected[scored.node.id], abs_tol=TOLERANCE)
        parts = config.alpha_recency * scored.recency + config.alpha_importance * scored.importance
        assert math.isclose(parts + config.alpha_relevance * scored.relevance, scored.score, abs_tol=1e-9)
    scores = [s.score for s in got]
    assert scores == sorted(scores, reverse=True)
    worst_returned = min((expected[i] for i in returned), default=math.inf)
    best_left_out = max((v for i, v in expected.items() if i not in returned), default=-math.inf)
    assert worst_returned >= best_left_out - TOLERANCE


@SETTINGS
@given(
    rows=memories(),
    query=st.lists(st.integers(-3, 3), min_size=6, max_size=6),
    k=st.integers(1, 12),
    config=configs,
)
def test_top_k_are_the_k_best(rows, query, k, config) -> None:
    query = np.array(query if any(query) else [1, 0, 0, 0, 0, 0], dtype=np.float32)
    check_top_k(build(rows, config), query, k, config, None)


@SETTINGS
@given(
    rows=memories(),
    query=st.lists(st.integers(-3, 3), min_size=6, max_size=6),
    k=st.integers(1, 12),
    f=filters,
)
def test_filters_are_respected(rows, query, k, f) -> None:
    query = np.array(query if any(query) else [0, 1, 0, 0, 0, 0], dtype=np.float32)
    config = RetrievalConfig()
    stream = build(rows, config)
    check_top_k(stream, query, k, config, f)
    assert [n.id for n in stream.nodes(filter=f)] == [n.id for n in stream.nodes() if passes(n, f)]


@SETTINGS
@given(
    dim=st.integers(1, 70),
    others=st.integers(0, 20),
    copies=st.integers(2, 25),
    k=st.integers(1, 30),
    seed=st.integers(0, 2**16),
    normalisation=st.sampled_from(["minmax", "none"]),
)
def test_ties_come_out_in_creation_order(dim, others, copies, k, seed, normalisation) -> None:
    rng = np.random.default_rng(seed)
    twin = rng.standard_normal(dim).astype(np.float32)
    twin_time = START + timedelta(days=3)
    rows = []
    positions = sorted(rng.choice(others + copies, size=copies, replace=False).tolist())
    for i in range(others + copies):
        is_twin = i in positions
        rows.append(
            {
                "embedding": twin if is_twin else rng.standard_normal(dim).astype(np.float32),
                "importance": 7 if is_twin else int(rng.integers(1, 11)),
                "kind": MemoryKind.OBSERVATION,
                "provenance": Provenance(author="agent"),
                "created": twin_time if is_twin else START,
                "accessed": twin_time if is_twin else START + timedelta(minutes=int(rng.integers(0, 10_000))),
            }
        )
    config = RetrievalConfig(normalisation=normalisation)
    stream = build(rows, config, dim=dim)
    first = stream.retrieve(twin, k=k, touch=False)
    assert [s.node.id for s in stream.retrieve(twin, k=k, touch=False)] == [s.node.id for s in first]
    # Equal scores appear in creation order; the twins are exactly equal to one another.
    for a, b in itertools.pairwise(first):
        if a.score == b.score:
            assert a.node.id < b.node.id
    twin_ids = [f"mem-{p:06d}" for p in positions]
    twin_scores = {s.score for s in first if s.node.id in twin_ids}
    assert len(twin_scores) <= 1
    returned_twins = [s.node.id for s in first if s.node.id in twin_ids]
    assert returned_twins == twin_ids[: len(returned_twins)]


@SETTINGS
@given(
    ages=st.lists(st.integers(1, 365 * 24 * 60), min_size=2, max_size=8, unique=True),
    decay=st.floats(0.95, 0.999),
)
def test_recency_falls_with_age(ages, decay) -> None:
    now = 10**15
    values = recency(np.array([now - a * 60_000_000 for a in ages], dtype=np.int64), now, decay)
    by_age = [v for _, v in sorted(zip(ages, values, strict=True))]
    assert all(a > b for a, b in itertools.pairwise(by_age))
    assert all(0 < v < 1 for v in values)
    # End to end: otherwise identical memories rank by how recently they were accessed.
    rows = [
        {
            "embedding": [1, 0, 0, 0, 0, 0],
            "importance": 5,
            "kind": MemoryKind.OBSERVATION,
            "provenance": Provenance(author="agent"),
            "created": START,
            "accessed": NOW - timedelta(minutes=a),
        }
        for a in ages
    ]
    # Only recency counts here: added to the other parts, a recency of 1e-17 is lost in rounding.
    config = RetrievalConfig(decay=decay, normalisation="none", alpha_importance=0, alpha_relevance=0)
    got = build(rows, config).retrieve(
        np.array([1, 0, 0, 0, 0, 0], dtype=np.float32), k=len(ages), touch=False
    )
    assert [int(s.node.id[4:]) for s in got] == sorted(range(len(ages)), key=lambda i: ages[i])
    assert all(a.recency > b.recency for a, b in itertools.pairwise(got))


@settings(max_examples=200, deadline=None)
@given(scores=st.lists(st.integers(0, 5), max_size=60), k=st.integers(0, 70))
def test_top_k_stable_matches_a_full_stable_sort(scores, k) -> None:
    values = np.array(scores, dtype=np.float64)
    expected = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]
    assert top_k_stable(values, k).tolist() == expected


def test_minmax_all_equal_is_one_half_and_none_is_raw() -> None:
    assert normalise(np.array([3.0, 3.0, 3.0]), "minmax").tolist() == [0.5, 0.5, 0.5]
    assert normalise(np.array([1.0, 2.0, 3.0]), "minmax").tolist() == [0.0, 0.5, 1.0]
    assert normalise(np.array([1.0, 2.0, 3.0]), "none").tolist() == [1.0, 2.0, 3.0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=st.lists(
        st.tuples(
            st.lists(st.integers(0, 40), max_size=4),  # indices of earlier nodes (may not exist yet)
            st.booleans(),  # add one bogus id too
            st.sampled_from(list(MemoryKind)),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_citations_always_resolve(plan) -> None:
    async def run() -> None:
        stream = MemoryStream(HashingEmbedder(16), VirtualClock(NOW), rater())
        for cited, bogus, kind in plan:
            ids = [f"mem-{i:06d}" for i in cited] + (["mem-x"] if bogus else [])
            valid = not bogus and all(i < len(stream) for i in cited)
            before = len(stream)
            try:
                node = await stream.add(
                    f"memory citing {cited}", kind, Provenance(author="agent"), citations=ids
                )
            except ValueError:
                assert not valid and len(stream) == before
                continue
            assert valid and node.citations == list(dict.fromkeys(ids))
        for node in stream.nodes(include_retired=True):
            assert all(c in stream for c in node.citations)
            assert set(stream.explain(node.id).ids()) <= {n.id for n in stream.nodes()}

    asyncio.run(run())


@SETTINGS
@given(
    ages_min=st.lists(st.integers(-60, 3 * 365 * 24 * 60), min_size=1, max_size=40),
    ratings=st.lists(st.integers(1, 10), min_size=1, max_size=40),
    config=configs,
)
def test_static_part_of_the_large_path_matches_the_formula(ages_min, ratings, config) -> None:
    """The approximate path picks candidates by a float32 recency + importance computed with
    whole-column bounds; it must agree with the float64 formula (negative ages: accessed 'in the
    future', counted as now)."""
    n = min(len(ages_min), len(ratings))
    now = 10**15
    last = np.array([now - a * 60_000_000 for a in ages_min[:n]], dtype=np.int64)
    rated = np.array(ratings[:n], dtype=np.int8)
    rec, imp = recency(last, now, config.decay), importance(rated)
    rec_bounds, imp_bounds = static_bounds(last, rated, now, config.decay)
    assert rec_bounds == (float(rec.min()), float(rec.max()))
    assert imp_bounds == (float(imp.min()), float(imp.max()))
    got = static_scores(last, rated, now, config, rec_bounds, imp_bounds)
    mode = config.normalisation
    want = config.alpha_recency * normalise(rec, mode) + config.alpha_importance * normalise(imp, mode)
    assert got.dtype == np.float32
    assert np.allclose(got, want, rtol=0, atol=1e-5 * (1 + config.alpha_recency + config.alpha_importance))
