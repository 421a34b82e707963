"""The simulated customer population: seeded, drawn from data files with sources.

Each customer has a profile the firm holds on file (age, the pots it knows about) and hidden
facts the advisor only learns by asking: pensions held elsewhere, a DB scheme from an old
employer, health or bereavement, a scammer's approach, what they really want.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compliance.models import CustomerProfile, Pot

TaskType = Literal[
    "risk_assessment", "consolidation", "contribution_planning", "drawdown", "tax", "retirement_age"
]
HiddenTopic = Literal["other_pensions", "db_scheme", "circumstances", "scam_contact", "retirement_plans"]


class Sourced(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str


class AgeBand(BaseModel):
    min: int
    max: int
    weight: float


class AgeDist(Sourced):
    bands: list[AgeBand]


class DCDist(Sourced):
    count_weights: dict[int, float]
    value_log_mean: float
    value_log_sd: float
    value_min_gbp: float
    value_max_gbp: float
    providers: list[str]


class DBDist(Sourced):
    share_with_db: float
    value_log_mean: float
    value_log_sd: float
    value_min_gbp: float
    value_max_gbp: float
    share_with_guarantees_in_dc: float
    schemes: list[str]


class PotTermsDist(Sourced):
    """Charges, exit fees and guarantees of the pots (fractions of the pot's value a year)."""

    modern_charge_min: float = Field(ge=0, lt=1)
    modern_charge_max: float = Field(ge=0, lt=1)
    legacy_share: float = Field(ge=0, le=1)
    legacy_charge_min: float = Field(ge=0, lt=1)
    legacy_charge_max: float = Field(ge=0, lt=1)
    legacy_exit_fee_share: float = Field(ge=0, le=1)
    exit_fee_rate_max: float = Field(ge=0, lt=1)
    guarantees: list[str] = Field(min_length=1)
    db_guarantee: str


class IncomeDist(Sourced):
    log_mean: float
    log_sd: float


class LiteracyDist(Sourced):
    weights: dict[Literal["low", "medium", "high"], float]


class Driver(BaseModel):
    weight: float
    situations: list[str]


class VulnerabilityDist(Sourced):
    share: float
    drivers: dict[Literal["health", "life_events", "resilience", "capability"], Driver]


class GoalDist(Sourced):
    weights: dict[TaskType, float]
    db_transfer_share_among_db_members: float


class ScamDist(Sourced):
    exposure_share: float
    approaches: list[str]


class NameLists(Sourced):
    first: list[str]
    last: list[str]


class PopulationData(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tax_year: str
    age: AgeDist
    dc_pots: DCDist
    db_membership: DBDist
    pot_terms: PotTermsDist
    income: IncomeDist
    literacy: LiteracyDist
    vulnerability: VulnerabilityDist
    goals: GoalDist
    scams: ScamDist
    names: NameLists


def load_population_data(path: Path | str | None = None) -> PopulationData:
    if path is None:
        text = resources.files("environments.data").joinpath("population.yaml").read_text(encoding="utf-8")
        where = "environments/data/population.yaml"
    else:
        text = Path(path).read_text(encoding="utf-8")
        where = str(path)
    try:
        return PopulationData.model_validate(yaml.safe_load(text))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"population data file {where} is invalid: {problems}") from None


class HiddenFact(BaseModel):
    """Something true of the customer that the advisor must ask about to learn."""

    topic: HiddenTopic
    statement: str  # how the customer says it once asked
    pot: Pot | None = None  # a pension that becomes known when revealed


class Customer(BaseModel):
    id: str
    name: str
    age: int
    income_gbp: float
    literacy: Literal["low", "medium", "high"]
    vulnerable: bool
    vulnerability_drivers: list[str] = Field(default_factory=list)
    situation: str
    goal: TaskType
    wants_db_transfer: bool = False
    scam_approach: str | None = None
    pots_on_file: list[Pot]
    hidden: list[HiddenFact] = Field(default_factory=list)

    @property
    def all_pots(self) -> list[Pot]:
        return self.pots_on_file + [f.pot for f in self.hidden if f.pot is not None]

    @property
    def has_db(self) -> bool:
        return any(p.type == "DB" for p in self.all_pots)

    def profile(self, revealed: set[str] | None = None) -> CustomerProfile:
        """The profile as the firm knows it: what is on file plus what has been revealed."""
        revealed = revealed or set()
        pots = list(self.pots_on_file)
        pots += [f.pot for f in self.hidden if f.pot is not None and f.topic in revealed]
        known_vulnerable = self.vulnerable and ("circumstances" in revealed or not self._vulnerability_hidden)
        return CustomerProfile(
            age=self.age,
            pots=pots,
            situation=self.situation if known_vulnerable or not self.vulnerable else "",
            literacy=self.literacy,
            vulnerable=known_vulnerable,
        )

    @property
    def _vulnerability_hidden(self) -> bool:
        return any(f.topic == "circumstances" for f in self.hidden)


def _weighted(rng: random.Random, weights: dict) -> object:
    keys = list(weights)
    return rng.choices(keys, weights=[weights[k] for k in keys], k=1)[0]


def _with_terms(rng: random.Random, pot: Pot, terms: PotTermsDist) -> Pot:
    """A DC pot with its charge, exit fee and guarantee drawn; pots with guarantees are legacy ones."""
    legacy = pot.has_guarantees or rng.random() < terms.legacy_share
    if legacy:
        charge = rng.uniform(terms.legacy_charge_min, terms.legacy_charge_max)
    else:
        charge = rng.uniform(terms.modern_charge_min, terms.modern_charge_max)
    exit_fee = 0.0
    if legacy and rng.random() < terms.legacy_exit_fee_share:
        exit_fee = float(round(pot.value_gbp * rng.uniform(0, terms.exit_fee_rate_max)))
    return pot.model_copy(
        update={
            # Charges are quoted to hundredths of a percent on statements.
            "annual_charge_rate": round(charge, 4),
            "exit_fee_gbp": exit_fee,
            "guarantee": rng.choice(terms.guarantees) if pot.has_guarantees else "",
        }
    )


def _lognormal(rng: random.Random, mean: float, sd: float, lo: float, hi: float) -> float:
    value = math.exp(rng.gauss(mean, sd))
    # Round to the nearest £100: statements show pounds, and round figures read naturally.
    return float(round(min(hi, max(lo, value)) / 100.0) * 100)


class PopulationGenerator:
    """Draws customers reproducibly: customer i depends only on (seed, i), not on draw order."""

    def __init__(
        self,
        data: PopulationData,
        seed: int,
        *,
        vulnerable_share: float | None = None,
        scam_exposure_share: float | None = None,
    ) -> None:
        self.data = data
        self.seed = seed
        self.vulnerable_share = data.vulnerability.share if vulnerable_share is None else vulnerable_share
        self.scam_share = data.scams.exposure_share if scam_exposure_share is None else scam_exposure_share

    def customer(self, index: int) -> Customer:
        d = self.data
        rng = random.Random(f"customer:{self.seed}:{index}")
        band = rng.choices(d.age.bands, weights=[b.weight for b in d.age.bands], k=1)[0]
        age = rng.randint(band.min, band.max)
        name = f"{rng.choice(d.names.first)} {rng.choice(d.names.last)}"
        literacy = _weighted(rng, d.literacy.weights)
        n_dc = int(_weighted(rng, d.dc_pots.count_weights))
        dc = d.dc_pots
        pots = [
            Pot(
                type="DC",
                value_gbp=_lognormal(
                    rng, dc.value_log_mean, dc.value_log_sd, dc.value_min_gbp, dc.value_max_gbp
                ),
                provider=rng.choice(dc.providers),
                has_guarantees=rng.random() < d.db_membership.share_with_guarantees_in_dc,
            )
            for _ in range(n_dc)
        ]
        # Pot terms come from their own stream, so adding them left every other draw unchanged.
        terms = random.Random(f"pot-terms:{self.seed}:{index}")
        pots = [_with_terms(terms, p, d.pot_terms) for p in pots]
        hidden: list[HiddenFact] = []
        # The provider knows its own pot; others are held elsewhere and come out when asked.
        on_file, elsewhere = pots[:1], pots[1:]
        if elsewhere:
            total = sum(p.value_gbp for p in elsewhere)
            hidden += [
                HiddenFact(
                    topic="other_pensions",
                    statement=f"I've also got {len(elsewhere)} other pension(s) from old jobs, about £{total:,.0f} altogether.",
                    pot=p,
                )
                for p in elsewhere
            ]
        db = d.db_membership
        has_db = rng.random() < db.share_with_db
        if has_db:
            scheme = rng.choice(db.schemes)
            db_pot = Pot(
                type="DB",
                value_gbp=_lognormal(
                    rng, db.value_log_mean, db.value_log_sd, db.value_min_gbp, db.value_max_gbp
                ),
                provider=scheme,
                has_guarantees=True,
                guarantee=d.pot_terms.db_guarantee,
            )
            hidden.append(
                HiddenFact(
                    topic="db_scheme",
                    statement=f"Oh, and there's a {scheme} — the transfer value letter said £{db_pot.value_gbp:,.0f}.",
                    pot=db_pot,
                )
            )
        goal = _weighted(rng, d.goals.weights)
        wants_db_transfer = has_db and rng.random() < d.goals.db_transfer_share_among_db_members
        vulnerable = rng.random() < self.vulnerable_share
        drivers: list[str] = []
        situation = "planning ahead"
        if vulnerable:
            vd = d.vulnerability.drivers
            driver = _weighted(rng, {k: v.weight for k, v in vd.items()})
            drivers = [str(driver)]
            situation = rng.choice(vd[driver].situations)
            hidden.append(HiddenFact(topic="circumstances", statement=f"To be honest, I'm {situation}."))
        scam = rng.choice(d.scams.approaches) if rng.random() < self.scam_share else None
        if scam:
            hidden.append(HiddenFact(topic="scam_contact", statement=f"I had a {scam}."))
        retire_at = rng.choice([55, 57, 60, 62, 65, 66, 67, 68])
        hidden.append(
            HiddenFact(topic="retirement_plans", statement=f"I'm hoping to stop work at about {retire_at}.")
        )
        income = _lognormal(rng, d.income.log_mean, d.income.log_sd, 8000, 400000)
        return Customer(
            id=f"c{self.seed}-{index:05d}",
            name=name,
            age=age,
            income_gbp=income,
            literacy=literacy,
            vulnerable=vulnerable,
            vulnerability_drivers=drivers,
            situation=situation,
            goal=goal,
            wants_db_transfer=wants_db_transfer,
            scam_approach=scam,
            pots_on_file=on_file,
            hidden=hidden,
        )

    def draw(self, n: int, start: int = 0) -> list[Customer]:
        return [self.customer(i) for i in range(start, start + n)]


class CoverageReport(BaseModel):
    """How many customers of each segment a run drew: the world's curriculum at a glance."""

    customers: int
    by_goal: dict[str, int]
    by_literacy: dict[str, int]
    by_age_band: dict[str, int]
    by_vulnerability_driver: dict[str, int]
    with_db: int
    wanting_db_transfer: int
    with_scam_approach: int
    with_multiple_pots: int
    with_guarantees: int
    with_exit_fees: int


def coverage(customers: list[Customer]) -> CoverageReport:
    def band(age: int) -> str:
        lo = (age // 5) * 5
        return f"{lo}-{lo + 4}"

    return CoverageReport(
        customers=len(customers),
        by_goal=dict(sorted(Counter(c.goal for c in customers).items())),
        by_literacy=dict(sorted(Counter(c.literacy for c in customers).items())),
        by_age_band=dict(sorted(Counter(band(c.age) for c in customers).items())),
        by_vulnerability_driver=dict(
            sorted(Counter(d for c in customers for d in c.vulnerability_drivers).items())
        ),
        with_db=sum(c.has_db for c in customers),
        wanting_db_transfer=sum(c.wants_db_transfer for c in customers),
        with_scam_approach=sum(c.scam_approach is not None for c in customers),
        with_multiple_pots=sum(len(c.all_pots) > 1 for c in customers),
        with_guarantees=sum(any(p.has_guarantees for p in c.all_pots) for c in customers),
        with_exit_fees=sum(any(p.exit_fee_gbp > 0 for p in c.all_pots) for c in customers),
    )
