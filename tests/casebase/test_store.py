"""Storage: the embedded store persists across processes, the embedder is pinned, and the same code
runs against a real Chroma server (`chroma run`, started and stopped by the test)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from casebase.config import CasebaseConfig, StoreConfig
from casebase.factory import Bases, open_bases
from casebase.rules_base import rule_collection
from casebase.store import EmbedderMismatchError, matches_where
from simulacra.embeddings.hashing import HashingEmbedder
from tests.casebase.builders import make_case, make_rule
from tests.casebase.conftest import DIMENSION
from tests.servers import chroma_cli, free_port, running_server

ROOT = Path(__file__).resolve().parents[2]
SCAM = "When a customer mentions a cold call, name the scam warning signs, because scams cost savings."
POTS = "I have three small pension pots from old jobs and want to combine them into one"
READER = """
import json, sys
from datetime import UTC, datetime
from casebase.config import CasebaseConfig, StoreConfig
from casebase.factory import open_bases
from simulacra.clock import VirtualClock
from simulacra.embeddings.factory import build_embedder
bases = open_bases(CasebaseConfig(store=StoreConfig(path=sys.argv[1])), build_embedder('hashing', dimension=int(sys.argv[3])), VirtualClock(datetime(2027, 1, 1, tzinfo=UTC)))
found = bases.cases.search(sys.argv[2], task_type="consolidation")
rules = bases.rules.search(sys.argv[2])
print(json.dumps({"cases": bases.cases.size, "case_ids": [m.case.id for m in found],
                  "rules": bases.rules.counts().model_dump(), "rule_ids": [m.rule.id for m in rules]}))
"""


def test_a_run_folder_is_read_back_by_another_process(tmp_path: Path, embedder, clock) -> None:
    folder = tmp_path / "run-1" / "casebase"
    bases = open_bases(CasebaseConfig(store=StoreConfig(path=folder)), embedder, clock)
    case = bases.cases.add(make_case(POTS)).case
    rule = bases.rules.add_candidate(
        make_rule("When pots are combined, compare fees, because fees compound.", [])
    )
    bases.rules.activate(rule.id)
    done = subprocess.run(
        [sys.executable, "-c", READER, str(folder), POTS, str(DIMENSION)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "cases": 1,
        "case_ids": [case.id],
        "rules": {"total": 1, "active": 1, "candidate": 0, "retired": 0},
        "rule_ids": [rule.id],
    }


def test_a_shared_library_folder_builds_across_runs(tmp_path: Path, embedder, clock) -> None:
    library = CasebaseConfig(store=StoreConfig(path=tmp_path / "library"))
    first = open_bases(library, embedder, clock)
    first.cases.add(make_case(POTS, source="run-1"))
    second = open_bases(library, embedder, clock)  # a later run opening the same library
    second.cases.add(
        make_case("When can I take my State Pension?", task_type="retirement_age", source="run-2")
    )
    assert second.cases.size == 2 and first.cases.size == 2


def test_opening_with_another_embedder_is_a_clear_error(tmp_path: Path, embedder, clock) -> None:
    config = CasebaseConfig(store=StoreConfig(path=tmp_path / "bases"))
    open_bases(config, embedder, clock).cases.add(make_case(POTS))
    with pytest.raises(
        EmbedderMismatchError,
        match=rf"built with embedder 'hashing' \(dimension {DIMENSION}\).*dimension 128",
    ):
        open_bases(config, HashingEmbedder(128), clock)

    class Renamed(HashingEmbedder):
        name = "minilm"

    with pytest.raises(EmbedderMismatchError, match="export it to JSON Lines"):
        open_bases(config, Renamed(DIMENSION), clock)


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    command = [
        chroma_cli(),
        "run",
        "--path",
        str(tmp_path / "server-data"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with running_server(command, f"http://127.0.0.1:{port}/api/v2/heartbeat", tmp_path / "chroma.log", 30):
        yield "127.0.0.1", port


def test_the_same_bases_run_against_a_chroma_server(chroma_server, embedder, clock, llm) -> None:
    host, port = chroma_server
    config = CasebaseConfig(store=StoreConfig(host=host, port=port, collection_prefix="run1-"))
    bases = open_bases(config, embedder, clock, llm)
    assert type(bases.client).__name__ != "PersistentClient"
    case = bases.cases.add(make_case(POTS, source="c-1")).case
    merged = bases.cases.add(make_case(POTS.replace("and want", "and I want"), source="c-2"))
    assert merged.merged and bases.cases.size == 1
    rule = bases.rules.add_candidate(
        make_rule("When pots are combined, compare fees, because fees compound.", [])
    )
    bases.rules.activate(rule.id)
    # A second client (another worker) sees the same data; a different prefix is a different base.
    again = open_bases(config, embedder, clock)
    assert [m.case.id for m in again.cases.search(POTS, task_type="consolidation")] == [case.id]
    assert [m.rule.id for m in again.rules.search("combine pots fees")] == [rule.id]
    other = open_bases(
        config.model_copy(update={"store": config.store.model_copy(update={"collection_prefix": "run2-"})}),
        embedder,
        clock,
    )
    assert other.cases.size == 0
    with pytest.raises(EmbedderMismatchError):
        open_bases(config, HashingEmbedder(DIMENSION * 2), clock)


def test_held_writes_are_read_back_at_once_and_stored_together_when_the_block_ends(
    bases: Bases, embedder
) -> None:
    stored = bases.rules.add_candidate(
        make_rule("When pots are combined, compare fees, because fees compound.", [])
    )
    bases.rules.activate(stored.id)
    other_view = rule_collection(bases.client, bases.rules.collection.name, embedder)
    with bases.rules.collection.deferred():
        fresh = bases.rules.add_candidate(make_rule(SCAM, ["SCAM_RISK_IGNORED"], domain="general"))
        bases.rules.activate(fresh.id)
        bases.rules.retire(stored.id, "superseded in test")
        # Read inside the block: the held versions, not the stored ones.
        assert bases.rules.get(stored.id).status == "retired"  # type: ignore[union-attr]
        found = [m.rule.id for m in bases.rules.search("cold call about my pension", k=4)]
        assert found == [fresh.id]  # the retired rule's stored (active) version is not returned
        assert bases.rules.counts().active == 1
        # Nothing has reached Chroma but what `counts` flushed: another reader sees the same.
        assert other_view.count({"status": "active"}) == 1
        bases.rules.record_evidence(fresh.id, True, evidence_id="c-1")
        assert other_view.get(fresh.id).supporting_evidence == [  # type: ignore[union-attr]
            "consultation-9"
        ]
    assert other_view.get(fresh.id).supporting_evidence == ["consultation-9", "c-1"]  # type: ignore[union-attr]
    assert [m.rule.id for m in bases.rules.search("cold call about my pension", k=4)] == [fresh.id]


def test_held_writes_are_stored_when_the_block_fails_and_blocks_do_not_nest(bases: Bases) -> None:
    with pytest.raises(RuntimeError, match="already holding"), bases.cases.collection.deferred():
        added = bases.cases.add(make_case(POTS)).case
        with bases.cases.collection.deferred():
            raise AssertionError("a nested block must be refused before its body runs")
    assert bases.cases.get(added.id) == added
    with pytest.raises(ValueError, match="boom"), bases.cases.collection.deferred():
        second = bases.cases.add(make_case("Can I take my tax-free cash in stages?", task_type="tax")).case
        raise ValueError("boom")
    assert bases.cases.get(second.id) == second and bases.cases.size == 2


def test_held_records_are_filtered_like_chroma_filters() -> None:
    fields = {"status": "active", "domain": "tax", "confidence": 0.6}
    assert matches_where(fields, None)
    assert matches_where(fields, {"status": "active"})
    assert not matches_where(fields, {"status": "retired"})
    assert matches_where(fields, {"$and": [{"status": "active"}, {"domain": {"$in": ["tax", "general"]}}]})
    assert not matches_where(fields, {"$and": [{"status": "active"}, {"domain": {"$nin": ["tax"]}}]})
    assert matches_where(fields, {"$or": [{"status": "retired"}, {"domain": {"$eq": "tax"}}]})
    assert matches_where(fields, {"domain": {"$ne": "general"}})
    with pytest.raises(ValueError, match=r"\$gt"):
        matches_where(fields, {"confidence": {"$gt": 0.5}})


def test_an_empty_collection_is_counted_again_only_after_the_recheck_time(bases: Bases, embedder) -> None:
    name = bases.rules.collection.name
    patient = rule_collection(bases.client, name, embedder, empty_recheck_s=3600)
    eager = rule_collection(bases.client, name, embedder)
    writer = rule_collection(bases.client, name, embedder)
    vector = embedder.embed(["cold call"])[0]
    assert patient.query(vector, 4) == [] and eager.query(vector, 4) == []
    rule = make_rule(SCAM, ["SCAM_RISK_IGNORED"], domain="general")
    writer.upsert([rule])  # another writer: the patient reader takes the store to be empty still
    assert patient.query(vector, 4) == []
    assert [r.id for r, _ in eager.query(vector, 4)] == [rule.id]
    own = make_rule("When pots are combined, compare fees, because fees compound.", [])
    patient.upsert([own])  # its own write is seen at once, and so is everything stored
    assert {r.id for r, _ in patient.query(vector, 4)} == {rule.id, own.id}
