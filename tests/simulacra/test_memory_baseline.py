"""The speed baseline is the reference's `new_retrieve`, quirks included; the benchmark reports its figures."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from benchmarks import reference_retrieve as ref
from benchmarks.retrieval import main as benchmark_main

NOW = datetime(2026, 4, 6, 12, 0)


def persona(n: int, rng: np.random.Generator) -> tuple[ref.Persona, np.ndarray]:
    vectors = rng.standard_normal((n, 8)).astype(np.float32)
    a_mem = ref.AssociativeMemory({f"key {i}": vectors[i] for i in range(n)})
    for i in range(n):
        a_mem.add(
            ref.ConceptNode(
                f"node_{i}",
                "event" if i % 2 else "thought",
                NOW - timedelta(days=30),
                NOW - timedelta(hours=int(rng.integers(1, 1000))),
                f"key {i}",
                int(rng.integers(1, 11)),
            )
        )
    return ref.Persona(a_mem, ref.Scratch(NOW)), vectors


def vectorised_reference(p: ref.Persona, vectors: np.ndarray, focal: np.ndarray, n_count: int) -> list[str]:
    """The same formula written with arrays: rank-based recency on an ascending sort, raw poignancy."""
    nodes = p.a_mem.seq_event + p.a_mem.seq_thought
    nodes = sorted(nodes, key=lambda node: node.last_accessed)
    recency = 0.99 ** np.arange(1, len(nodes) + 1)
    importance = np.array([node.poignancy for node in nodes], dtype=float)
    rows = [int(node.embedding_key.split()[1]) for node in nodes]
    relevance = vectors[rows] @ focal / (np.linalg.norm(vectors[rows], axis=1) * np.linalg.norm(focal))

    def minmax(x: np.ndarray) -> np.ndarray:
        return np.full(len(x), 0.5) if x.max() == x.min() else (x - x.min()) / (x.max() - x.min())

    score = 0.5 * minmax(recency) + 3 * minmax(relevance) + 2 * minmax(importance)
    order = sorted(range(len(nodes)), key=lambda i: -score[i])  # stable, like sorted() on the dict
    return [nodes[i].node_id for i in order[:n_count]]


def test_new_retrieve_matches_its_formula_and_touches_what_it_returns() -> None:
    rng = np.random.default_rng(1)
    p, vectors = persona(60, rng)
    focal = rng.standard_normal(8).astype(np.float32)
    expected = vectorised_reference(p, vectors, focal, 7)
    got = ref.new_retrieve(p, ["focal"], {"focal": focal}.__getitem__, n_count=7)["focal"]
    assert [n.node_id for n in got] == expected
    assert all(n.last_accessed == NOW for n in got)


def test_the_quirk_favours_the_least_recently_accessed() -> None:
    rng = np.random.default_rng(2)
    p, _ = persona(5, rng)
    for node in p.a_mem.seq_event + p.a_mem.seq_thought:
        node.poignancy = 5
    oldest = min(p.a_mem.seq_event + p.a_mem.seq_thought, key=lambda node: node.last_accessed)
    same = np.ones(8, dtype=np.float32)
    p.a_mem.embeddings = {key: same for key in p.a_mem.embeddings}
    got = ref.new_retrieve(p, ["focal"], {"focal": same}.__getitem__, n_count=1)["focal"]
    assert got == [oldest]


def test_chats_and_idle_nodes_are_left_out() -> None:
    a_mem = ref.AssociativeMemory({"idle": np.ones(4), "chat": np.ones(4), "event": np.ones(4)})
    a_mem.add(ref.ConceptNode("n1", "event", NOW, NOW, "idle", 9))
    a_mem.add(ref.ConceptNode("n2", "chat", NOW, NOW, "chat", 9))
    a_mem.add(ref.ConceptNode("n3", "event", NOW, NOW, "event", 1))
    got = ref.new_retrieve(ref.Persona(a_mem, ref.Scratch(NOW)), ["q"], lambda _: np.ones(4), n_count=5)
    assert [n.node_id for n in got["q"]] == ["n3"]


def test_benchmark_prints_its_figures_as_one_json_line(capsys) -> None:
    import json

    benchmark_main(["--n", "3000", "--queries", "20", "--recall-queries", "5", "--baseline-queries", "2"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in (
        "n",
        "p50_ms",
        "p95_ms",
        "baseline_p50_ms",
        "speedup",
        "peak_rss_mb",
        "recall_at_10",
        "build_seconds",
        "cpu_p50_ms",
        "blas_threads",
    ):
        assert key in result
    assert result["n"] == 3000 and result["baseline_queries"] == 2
    assert result["recall_at_10"] == 1.0  # a stream this small is scored exactly
    assert result["speedup"] > 1
