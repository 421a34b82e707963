"""The knowledge base: every item carries its source, every figure its tax year, and a broken file
fails at load time with the file and field named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from compliance.knowledge import DEFAULT_FOLDER, KnowledgeError, load_knowledge
from tests.compliance.rulekit import kb


def test_figures_from_the_issue_hold_for_2026_27() -> None:
    expected = {
        "tax_free_cash_fraction": 0.25,
        "lump_sum_allowance": 268275,
        "lump_sum_and_death_benefit_allowance": 1073100,
        "annual_allowance": 60000,
        "money_purchase_annual_allowance": 10000,
        "normal_minimum_pension_age": 55,
        "normal_minimum_pension_age_from_2028": 57,
        "full_new_state_pension_weekly": 241.30,
        "db_advice_threshold": 30000,
    }
    for key, value in expected.items():
        figure = kb().figure(key)
        assert figure.value == value, key
        assert figure.tax_year == "2026/27", key
    assert kb().meta.tax_year == "2026/27"


def test_every_item_has_a_source_and_every_figure_a_tax_year() -> None:
    base = kb()
    for figure in base.figures.values():
        assert figure.source and figure.tax_year, figure.key
    groups = [
        base.key_dates.values(),
        base.regulations.values(),
        base.lexicons.values(),
        base.language_patterns,
        base.false_claims,
        base.figure_concepts,
        base.scam_red_flags,
        base.jargon,
        base.state_pension_age_bands,
    ]
    for group in groups:
        for item in group:
            assert len(item.source) >= 3, item
    assert base.escalation.source and base.figure_check.source


def test_the_regulations_the_issue_names_are_present() -> None:
    sources = " ".join(r.source for r in kb().regulations.values())
    for reference in (
        "RAO art 53",
        "PERG 8.30B",
        "Pension Schemes Act 2015 s48",
        "COBS 19.7",
        "ScamSmart",
        "FG21/1",
    ):
        assert reference in sources


def test_examples_of_language_patterns_hold() -> None:
    for pattern in kb().language_patterns:
        for example in pattern.examples:
            assert pattern.regex.search(example.lower()), (pattern.id, example)


def test_lookups_of_unknown_keys_name_what_is_known() -> None:
    with pytest.raises(KeyError, match="annual_allowance"):
        kb().figure("no_such_figure")
    with pytest.raises(KeyError, match="known"):
        kb().lexicon("no_such_lexicon")


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "kb"
    shutil.copytree(DEFAULT_FOLDER, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return folder


def test_malformed_yaml_is_a_clear_error_naming_the_file(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "figures.yaml").write_text("figures:\n  - key: [unclosed\n", encoding="utf-8")
    with pytest.raises(KnowledgeError, match=r"figures\.yaml: not valid YAML"):
        load_knowledge(folder)


def test_a_figure_without_tax_year_names_file_and_field(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "extra.yaml").write_text(
        "figures:\n  - key: new_thing\n    value: 1\n    unit: GBP\n    source: somewhere\n", encoding="utf-8"
    )
    with pytest.raises(KnowledgeError, match=r"extra\.yaml: figures\.0\.tax_year"):
        load_knowledge(folder)


def test_a_broken_example_or_regex_fails_at_load(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    bad = folder / "extra.yaml"
    bad.write_text(
        "lexicons:\n  - key: x\n    description: d\n    source: src\n    terms: ['\\bfoo\\b']\n"
        "    examples: ['bar']\n",
        encoding="utf-8",
    )
    with pytest.raises(KnowledgeError, match=r"extra\.yaml: .*examples\[0\] 'bar' is not matched"):
        load_knowledge(folder)
    bad.write_text(
        "lexicons:\n  - key: x\n    description: d\n    source: src\n    terms: ['(unclosed']\n",
        encoding="utf-8",
    )
    with pytest.raises(KnowledgeError, match=r"extra\.yaml: .*invalid regular expression"):
        load_knowledge(folder)


def test_a_duplicate_key_names_both_files(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "zz.yaml").write_text(
        "figures:\n  - key: annual_allowance\n    value: 1\n    unit: GBP\n    tax_year: '2026/27'\n"
        "    source: somewhere\n",
        encoding="utf-8",
    )
    with pytest.raises(
        KnowledgeError, match=r"zz\.yaml: figure 'annual_allowance' is already defined in figures\.yaml"
    ):
        load_knowledge(folder)


def test_a_concept_accepting_an_unknown_figure_is_refused(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "zz.yaml").write_text(
        "figure_concepts:\n  - key: zz\n    kind: money\n    phrases: ['zz']\n    accepts: [nope]\n    source: src\n",
        encoding="utf-8",
    )
    with pytest.raises(KnowledgeError, match="accepts unknown figure 'nope'"):
        load_knowledge(folder)


def test_an_empty_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KnowledgeError, match="no knowledge files"):
        load_knowledge(tmp_path)
