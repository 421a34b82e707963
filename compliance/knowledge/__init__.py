"""The FCA knowledge base: regulations, 2026/27 figures, key dates and language patterns as data.

`load_knowledge()` reads every YAML file in this folder (or another folder, e.g. a later tax year),
validates each against `KnowledgeFile`, and merges them. Code never writes a figure inline: it asks
the knowledge base (`kb.figure("lump_sum_allowance")`), so a new tax year is a data change.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from compliance.knowledge.schema import (
    EscalationPolicy,
    FalseClaim,
    Figure,
    FigureCheckSettings,
    FigureConcept,
    JargonTerm,
    KeyDate,
    KnowledgeFile,
    LanguagePattern,
    Lexicon,
    Meta,
    Regulation,
    ScamRedFlag,
    StatePensionAgeBand,
)

__all__ = [
    "Figure",
    "KeyDate",
    "KnowledgeBase",
    "KnowledgeError",
    "load_knowledge",
]

DEFAULT_FOLDER = Path(__file__).resolve().parent


class KnowledgeError(ValueError):
    """A knowledge file that cannot be used; the message names the file and the field."""


class KnowledgeBase:
    """The merged, validated knowledge. Read-only after loading."""

    def __init__(
        self,
        meta: Meta,
        figures: dict[str, Figure],
        key_dates: dict[str, KeyDate],
        state_pension_age_bands: list[StatePensionAgeBand],
        regulations: dict[str, Regulation],
        lexicons: dict[str, Lexicon],
        language_patterns: list[LanguagePattern],
        false_claims: list[FalseClaim],
        figure_concepts: list[FigureConcept],
        scam_red_flags: list[ScamRedFlag],
        jargon: list[JargonTerm],
        escalation: EscalationPolicy,
        figure_check: FigureCheckSettings,
    ) -> None:
        self.meta = meta
        self.figures = figures
        self.key_dates = key_dates
        self.state_pension_age_bands = state_pension_age_bands
        self.regulations = regulations
        self.lexicons = lexicons
        self.language_patterns = language_patterns
        self.false_claims = false_claims
        self.figure_concepts = figure_concepts
        self.scam_red_flags = scam_red_flags
        self.jargon = jargon
        self.escalation = escalation
        self.figure_check = figure_check

    def figure(self, key: str) -> Figure:
        try:
            return self.figures[key]
        except KeyError:
            raise KeyError(
                f"knowledge base has no figure {key!r} (known: {', '.join(sorted(self.figures))})"
            ) from None

    def figure_table(self, keys: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """Figures (all, or `keys`) with value, unit, tax year and source, as prompts show them."""
        chosen = sorted(self.figures) if keys is None else list(keys)
        return {
            key: {"value": f.value, "unit": f.unit, "tax_year": f.tax_year, "source": f.source}
            for key, f in ((key, self.figure(key)) for key in chosen)
        }

    def key_date(self, key: str) -> KeyDate:
        try:
            return self.key_dates[key]
        except KeyError:
            known = ", ".join(sorted(self.key_dates))
            raise KeyError(f"knowledge base has no key date {key!r} (known: {known})") from None

    def lexicon(self, key: str) -> Lexicon:
        try:
            return self.lexicons[key]
        except KeyError:
            known = ", ".join(sorted(self.lexicons))
            raise KeyError(f"knowledge base has no lexicon {key!r} (known: {known})") from None

    def regulation(self, regulation_id: str) -> Regulation:
        try:
            return self.regulations[regulation_id]
        except KeyError:
            known = ", ".join(sorted(self.regulations))
            raise KeyError(f"knowledge base has no regulation {regulation_id!r} (known: {known})") from None

    def patterns(self, kind: str, code: str | None = None) -> list[LanguagePattern]:
        return [p for p in self.language_patterns if p.kind == kind and (code is None or p.code == code)]


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"]) or "<file>"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def _read(path: Path) -> KnowledgeFile:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise KnowledgeError(f"{path.name}: not valid YAML: {exc}") from exc
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise KnowledgeError(f"{path.name}: expected a mapping of sections at the top level")
    try:
        return KnowledgeFile.model_validate(raw)
    except ValidationError as exc:
        raise KnowledgeError(f"{path.name}: {_describe(exc)}") from exc


def _merge_keyed(target: dict, items: list, key: str, section: str, origin: dict, filename: str) -> None:
    for item in items:
        name = getattr(item, key)
        if name in target:
            raise KnowledgeError(
                f"{filename}: {section} {name!r} is already defined in {origin[(section, name)]}"
            )
        target[name] = item
        origin[(section, name)] = filename


def load_knowledge(folder: str | Path | None = None) -> KnowledgeBase:
    folder = DEFAULT_FOLDER if folder is None else Path(folder)
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise KnowledgeError(f"{folder}: no knowledge files (*.yaml)")
    origin: dict[tuple[str, str], str] = {}
    meta: Meta | None = None
    escalation: EscalationPolicy | None = None
    figure_check: FigureCheckSettings | None = None
    figures: dict[str, Figure] = {}
    key_dates: dict[str, KeyDate] = {}
    regulations: dict[str, Regulation] = {}
    lexicons: dict[str, Lexicon] = {}
    bands: list[StatePensionAgeBand] = []
    patterns: list[LanguagePattern] = []
    claims: list[FalseClaim] = []
    concepts: list[FigureConcept] = []
    flags: list[ScamRedFlag] = []
    jargon: list[JargonTerm] = []
    for path in files:
        part = _read(path)
        for section in ("meta", "escalation", "figure_check"):
            value = getattr(part, section)
            if value is None:
                continue
            if (section, "") in origin:
                raise KnowledgeError(f"{path.name}: {section} is already defined in {origin[(section, '')]}")
            origin[(section, "")] = path.name
            if section == "meta":
                meta = value
            elif section == "escalation":
                escalation = value
            else:
                figure_check = value
        _merge_keyed(figures, part.figures, "key", "figure", origin, path.name)
        _merge_keyed(key_dates, part.key_dates, "key", "key date", origin, path.name)
        _merge_keyed(regulations, part.regulations, "id", "regulation", origin, path.name)
        _merge_keyed(lexicons, part.lexicons, "key", "lexicon", origin, path.name)
        for collection, items, section in (
            (patterns, part.language_patterns, "language pattern"),
            (claims, part.false_claims, "false claim"),
            (concepts, part.figure_concepts, "figure concept"),
            (flags, part.scam_red_flags, "scam red flag"),
        ):
            seen: dict = {}
            _merge_keyed(
                seen, items, "key" if section == "figure concept" else "id", section, origin, path.name
            )
            collection.extend(items)
        bands.extend(part.state_pension_age_bands)
        jargon.extend(part.jargon)
    for section, value in (("meta", meta), ("escalation", escalation), ("figure_check", figure_check)):
        if value is None:
            raise KnowledgeError(f"{folder}: no file defines the {section} section")
    for concept in concepts:
        for key in (*concept.accepts, *concept.historical_accepts):
            if concept.kind == "year":
                if key not in key_dates:
                    raise KnowledgeError(
                        f"{origin[('figure concept', concept.key)]}: figure concept {concept.key!r} "
                        f"accepts unknown key date {key!r}"
                    )
            elif key not in figures:
                raise KnowledgeError(
                    f"{origin[('figure concept', concept.key)]}: figure concept {concept.key!r} "
                    f"accepts unknown figure {key!r}"
                )
    return KnowledgeBase(
        meta=meta,
        figures=figures,
        key_dates=key_dates,
        state_pension_age_bands=bands,
        regulations=regulations,
        lexicons=lexicons,
        language_patterns=patterns,
        false_claims=claims,
        figure_concepts=concepts,
        scam_red_flags=flags,
        jargon=jargon,
        escalation=escalation,
        figure_check=figure_check,
    )
