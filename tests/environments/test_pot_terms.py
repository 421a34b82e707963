"""Pot charges, exit fees and guarantees in the drawn population: sourced, within their caps,
and drawn from their own stream so the rest of each customer is unchanged."""

from __future__ import annotations

import pytest

from environments.population import PopulationGenerator, coverage, load_population_data


@pytest.fixture(scope="module")
def data():
    return load_population_data()


def test_pot_terms_name_their_sources(data) -> None:
    terms = data.pot_terms
    assert "SI 2015/879" in terms.source and "PS16/24" in terms.source
    assert terms.modern_charge_max <= 0.0075 < terms.legacy_charge_min
    assert terms.exit_fee_rate_max <= 0.01


def test_drawn_pots_have_charges_exit_fees_and_named_guarantees(data) -> None:
    customers = PopulationGenerator(data, seed=0).draw(400)
    dc = [p for c in customers for p in c.all_pots if p.type == "DC"]
    assert all(p.annual_charge_rate is not None for p in dc)
    assert all(data.pot_terms.modern_charge_min <= p.annual_charge_rate <= 0.015 for p in dc)
    legacy = [p for p in dc if p.annual_charge_rate > data.pot_terms.modern_charge_max]
    assert 0.15 < len(legacy) / len(dc) < 0.4
    # Exit fees only on legacy pots, and never above 1% of the pot (FCA PS16/24).
    assert all(p.exit_fee_gbp <= p.value_gbp * 0.01 for p in dc)
    assert all(p in legacy for p in dc if p.exit_fee_gbp > 0)
    guaranteed = [p for p in dc if p.has_guarantees]
    assert guaranteed and all(p.guarantee in data.pot_terms.guarantees and p in legacy for p in guaranteed)
    db = [p for c in customers for p in c.all_pots if p.type == "DB"]
    assert all(p.guarantee == data.pot_terms.db_guarantee and p.annual_charge_rate is None for p in db)
    assert coverage(customers).with_exit_fees > 10


def test_pot_terms_do_not_reshuffle_the_rest_of_the_customer(data) -> None:
    costly = data.model_copy(
        update={
            "pot_terms": data.pot_terms.model_copy(update={"legacy_share": 1.0, "legacy_exit_fee_share": 1.0})
        }
    )
    for plain, changed in zip(
        PopulationGenerator(data, seed=9).draw(40), PopulationGenerator(costly, seed=9).draw(40), strict=True
    ):
        terms = {"annual_charge_rate", "exit_fee_gbp", "guarantee"}
        assert plain.model_dump(exclude={"pots_on_file", "hidden"}) == changed.model_dump(
            exclude={"pots_on_file", "hidden"}
        )
        assert [p.model_dump(exclude=terms) for p in plain.all_pots] == [
            p.model_dump(exclude=terms) for p in changed.all_pots
        ]
