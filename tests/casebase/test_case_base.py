"""The case base on a real Chroma store: merging near-duplicates, verified-only search, exchange."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from casebase.config import CasebaseConfig, StoreConfig
from casebase.factory import Bases, open_bases
from tests.casebase.builders import make_case

POTS = "I have three small pension pots from old jobs and want to combine them into one"
POTS_AGAIN = "I have three small pension pots from old jobs and I want to combine them into one"
FOUR_POTS = "I have four small pension pots from old jobs and want to combine them into one pot"


def test_search_returns_only_verified_cases(bases: Bases) -> None:
    bases.cases.add(make_case(POTS, verified=True, source="c-1"))
    bases.cases.add(
        make_case("Should I merge my workplace pensions before I retire?", verified=False, source="c-2")
    )
    found = bases.cases.search("merge my pensions", k=5)
    assert [m.case.source_ids for m in found] == [["c-1"]]
    assert all(m.case.compliance_verified for m in found)
    assert bases.cases.size == 2
    assert bases.cases.count(verified_only=True) == 1


def test_search_stays_within_the_task_type_and_ranks_by_similarity(bases: Bases) -> None:
    bases.cases.add(make_case(POTS, task_type="consolidation", source="c-1"))
    bases.cases.add(make_case(FOUR_POTS, task_type="consolidation", source="c-2"))
    bases.cases.add(make_case("Can I take a tax-free lump sum at 55?", task_type="tax", source="c-3"))
    consolidation = bases.cases.search(POTS, task_type="consolidation", k=3)
    assert [m.case.source_ids[0] for m in consolidation] == ["c-1", "c-2"]
    assert consolidation[0].similarity > consolidation[1].similarity
    assert [m.case.task_type for m in bases.cases.search(POTS, task_type="tax")] == ["tax"]
    assert len(bases.cases.search(POTS, k=1)) == 1


def test_near_duplicate_merges_into_the_existing_record(bases: Bases, clock) -> None:
    first = bases.cases.add(
        make_case(POTS, satisfaction=0.4, source="c-1", codes=["MISSING_RISK_DISCLOSURE"])
    )
    clock.advance(timedelta(days=2))
    better = make_case(
        POTS_AGAIN, guidance="A better explanation of the options.", satisfaction=0.9, source="c-2"
    )
    result = bases.cases.add(better)
    assert result.merged and result.merged_into == first.case.id
    assert result.similarity is not None and result.similarity >= 0.93
    assert bases.cases.size == 1
    stored = bases.cases.get(first.case.id)
    assert stored is not None
    # The better-judged text speaks for both; the id, the first time seen and every source remain.
    assert stored.guidance == "A better explanation of the options."
    assert stored.outcome.satisfaction == 0.9
    assert stored.source_ids == ["c-1", "c-2"]
    assert stored.merged_from == [better.id]
    assert stored.created_at == first.case.created_at
    assert stored.updated_at == clock.now() != stored.created_at
    # The merged record is found by its new situation text.
    assert bases.cases.search(POTS_AGAIN, task_type="consolidation")[0].case.id == first.case.id


def test_a_worse_duplicate_only_adds_its_source(bases: Bases) -> None:
    first = bases.cases.add(make_case(POTS, satisfaction=0.9, source="c-1"))
    bases.cases.add(make_case(POTS_AGAIN, guidance="Worse.", satisfaction=0.1, source="c-2"))
    stored = bases.cases.get(first.case.id)
    assert stored is not None and stored.guidance == first.case.guidance and stored.context == POTS
    assert stored.source_ids == ["c-1", "c-2"]


def test_similar_but_distinct_cases_and_other_task_types_are_not_merged(bases: Bases) -> None:
    bases.cases.add(make_case(POTS, source="c-1"))
    assert not bases.cases.add(make_case(FOUR_POTS, source="c-2")).merged
    assert not bases.cases.add(make_case(POTS_AGAIN, task_type="risk_assessment", source="c-3")).merged
    assert bases.cases.size == 3


def test_adding_the_same_case_twice_is_idempotent(bases: Bases, clock) -> None:
    case = make_case(POTS)
    first = bases.cases.add(case).case
    clock.advance(timedelta(days=1))
    again = bases.cases.add(case)
    assert not again.merged and bases.cases.size == 1
    assert again.case.created_at == first.created_at and again.case.updated_at == clock.now()


def test_re_adding_a_case_records_its_new_verdict(bases: Bases) -> None:
    """The same case checked again (say by a stricter validator) keeps one record, with the new verdict."""
    case = make_case(POTS, verified=True)
    bases.cases.add(case)
    assert bases.cases.search(POTS, task_type="consolidation")
    bases.cases.add(case.model_copy(update={"compliance_verified": False}))
    assert bases.cases.size == 1 and bases.cases.search(POTS, task_type="consolidation") == []


def test_timestamps_come_from_the_injected_clock(bases: Bases, clock) -> None:
    clock.advance(timedelta(hours=5))
    stored = bases.cases.add(make_case(POTS)).case
    assert stored.created_at == stored.updated_at == clock.now()


def test_jsonl_round_trip_is_exact(bases: Bases, tmp_path: Path, embedder, clock) -> None:
    bases.cases.add(make_case(POTS, source="c-1"))
    bases.cases.add(make_case(POTS_AGAIN, satisfaction=0.95, source="c-2"))  # merged record
    bases.cases.add(
        make_case("Can I take a tax-free lump sum at 55?", task_type="tax", verified=False, source="c-3")
    )
    path = tmp_path / "export" / "cases.jsonl"
    assert bases.cases.export_jsonl(path) == 2
    other = open_bases(CasebaseConfig(store=StoreConfig(path=tmp_path / "other")), embedder, clock)
    assert other.cases.import_jsonl(path) == 2
    assert other.cases.all() == bases.cases.all()
    again = tmp_path / "again.jsonl"
    other.cases.export_jsonl(again)
    assert again.read_bytes() == path.read_bytes()
    # Imported cases are searchable (re-embedded on import).
    assert other.cases.search(POTS, task_type="consolidation")[0].case.source_ids == ["c-1", "c-2"]


def test_import_with_merge_folds_records_into_near_duplicates(bases: Bases, tmp_path: Path) -> None:
    bases.cases.add(make_case(POTS, source="c-1"))
    path = tmp_path / "cases.jsonl"
    bases.cases.export_jsonl(path)
    bases.cases.add(make_case("Can I take a tax-free lump sum at 55?", task_type="tax", source="c-3"))
    # The export's case is already here: importing with merge changes nothing but counts it.
    assert bases.cases.import_jsonl(path, merge=True) == 1
    assert bases.cases.size == 2


def test_re_adding_a_case_that_others_were_merged_into_keeps_them(bases: Bases) -> None:
    first = make_case(POTS, satisfaction=0.4, source="c-1")
    bases.cases.add(first)
    bases.cases.add(make_case(POTS_AGAIN, guidance="A better explanation.", satisfaction=0.9, source="c-2"))
    again = bases.cases.add(first)
    assert not again.merged and bases.cases.size == 1
    stored = bases.cases.get(first.id)
    assert stored is not None and stored.guidance == "A better explanation."
    assert stored.source_ids == ["c-1", "c-2"] and len(stored.merged_from) == 1


def test_search_returns_three_cases_by_default(bases: Bases) -> None:
    for n, count in enumerate(["two", "three", "four", "five", "six"]):
        bases.cases.add(make_case(f"I have {count} old pension pots to combine", source=f"c-{n}"))
    assert bases.cases.size == 5
    assert len(bases.cases.search("combine my old pots", task_type="consolidation")) == 3
