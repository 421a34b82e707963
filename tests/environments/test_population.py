"""The customer population: seeded, sourced, varied, and reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from environments.population import PopulationGenerator, coverage, load_population_data


@pytest.fixture(scope="module")
def data():
    return load_population_data()


def test_every_distribution_names_its_source(data) -> None:
    blocks = [
        data.age,
        data.dc_pots,
        data.db_membership,
        data.income,
        data.literacy,
        data.vulnerability,
        data.goals,
        data.scams,
        data.names,
    ]
    assert all(len(block.source) > 20 for block in blocks)
    assert data.tax_year == "2026/27"


def test_customer_depends_only_on_seed_and_index(data) -> None:
    gen = PopulationGenerator(data, seed=4)
    assert gen.customer(17) == PopulationGenerator(data, seed=4).draw(20)[17]
    assert gen.customer(17) != PopulationGenerator(data, seed=5).customer(17)


def test_population_covers_the_hard_segments(data) -> None:
    customers = PopulationGenerator(data, seed=0).draw(400)
    report = coverage(customers)
    assert report.customers == 400
    assert set(report.by_goal) == {
        "drawdown",
        "tax",
        "consolidation",
        "retirement_age",
        "contribution_planning",
        "risk_assessment",
    }
    assert report.with_db > 60 and report.wanting_db_transfer > 10
    assert report.with_scam_approach > 20 and report.with_multiple_pots > 150
    assert set(report.by_vulnerability_driver) == {"health", "life_events", "resilience", "capability"}
    assert set(report.by_literacy) == {"low", "medium", "high"}


def test_hidden_facts_stay_hidden_until_revealed(data) -> None:
    gen = PopulationGenerator(data, seed=1)
    customer = next(c for c in gen.draw(200) if c.has_db and c.vulnerable and len(c.pots_on_file) == 1)
    before = customer.profile()
    assert all(p.type == "DC" for p in before.pots) and not before.vulnerable
    after = customer.profile({"db_scheme", "circumstances", "other_pensions"})
    assert any(p.type == "DB" and p.has_guarantees for p in after.pots)
    assert after.vulnerable and after.situation == customer.situation


def test_overrides_reshape_the_population(data) -> None:
    everyone = PopulationGenerator(data, seed=2, vulnerable_share=1.0, scam_exposure_share=0.0).draw(50)
    assert all(c.vulnerable for c in everyone) and not any(c.scam_approach for c in everyone)


def test_bad_data_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "population.yaml"
    bad.write_text("tax_year: '2026/27'\nage: {source: x, bands: []}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"population data file .* is invalid: dc_pots"):
        load_population_data(bad)
