"""Literal pre-filters for the knowledge base's regular expressions, derived from the patterns.

Most lexicon terms and language patterns are alternations of many branches that open with `\\b`,
which Python's `re` cannot skip ahead for: it tries every branch at every position. Yet nearly
every branch needs some literal text to match at all ("should i", "transfer", "pension wise").
`required_literals` reads a pattern's parse tree and returns a set of strings, one of which must
occur in any text the pattern matches. `FilteredPattern` splits an alternation into its branches,
checks each branch's literals with plain substring tests, and searches with only the branches that
can match (the compiled subset is cached), so a text that cannot match skips the regex entirely.

The subset regex keeps the branches' order, and a branch whose literals are absent cannot match
anywhere in the text, so `search`, `finditer` and `sub` return exactly what the full pattern would.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

try:  # Python 3.11+
    import re._constants as _c
    import re._parser as _p
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _p  # type: ignore[no-redef]

# Bounds that keep the derivation cheap and the literal sets small.
_MAX_EXACT = 48  # strings an exact set may hold before it is cut into a required fragment
_MAX_CLASS = 6  # characters a class may have and still be expanded ([- ], [eo])
# A literal shorter than this is too common to be worth testing ("i", "a ").
MIN_LITERAL = 3
# Distinct branch subsets kept compiled per pattern; past this the full regex is used.
_MAX_SUBSETS = 512

_ZERO_WIDTH = {_c.AT, _c.ASSERT, _c.ASSERT_NOT}
_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", _c.MAX_REPEAT)}


class _Info:
    """What a parse node can match: its complete set of strings when small (`exact`), and a set of
    strings one of which every match contains (`required`); None when unknown."""

    __slots__ = ("exact", "required")

    def __init__(self, exact: frozenset[str] | None, required: frozenset[str] | None) -> None:
        self.exact = exact
        self.required = required

    def best(self) -> frozenset[str] | None:
        return _better(self.exact if _usable(self.exact) else None, self.required)


_UNKNOWN = _Info(None, None)
_EMPTY = _Info(frozenset({""}), None)


def _usable(strings: frozenset[str] | None) -> bool:
    return bool(strings) and all(strings)  # type: ignore[arg-type]


def _score(strings: frozenset[str]) -> tuple[int, int]:
    # Longer shortest string first (fewer chance hits), then fewer strings (fewer tests).
    return (min(len(s) for s in strings), -len(strings))


def _better(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    if not _usable(a):
        return b if _usable(b) else None
    if not _usable(b):
        return a
    return a if _score(a) >= _score(b) else b  # type: ignore[arg-type]


def _class_chars(items: list[tuple[Any, Any]]) -> frozenset[str] | None:
    chars: set[str] = set()
    for op, arg in items:
        if op is _c.LITERAL:
            chars.add(chr(arg))
        elif op is _c.RANGE and arg[1] - arg[0] < _MAX_CLASS:
            chars.update(chr(i) for i in range(arg[0], arg[1] + 1))
        else:
            return None
        if len(chars) > _MAX_CLASS:
            return None
    return frozenset(chars)


def _node(op: Any, arg: Any) -> _Info:
    if op is _c.LITERAL:
        s = frozenset({chr(arg)})
        return _Info(s, s)
    if op in _ZERO_WIDTH:
        return _EMPTY
    if op is _c.IN:
        chars = _class_chars(arg)
        return _Info(chars, chars) if chars else _UNKNOWN
    if op is _c.SUBPATTERN:
        _group, add_flags, del_flags, seq = arg
        if (add_flags | del_flags) & _c.SRE_FLAG_IGNORECASE:
            return _UNKNOWN
        return _sequence(seq)
    if op is getattr(_c, "ATOMIC_GROUP", None):
        return _sequence(arg)
    if op is _c.BRANCH:
        return _branch(arg[1])
    if op in _REPEATS:
        low, high, seq = arg
        body = _sequence(seq)
        if low == 0:
            if high == 1 and body.exact is not None and len(body.exact) < _MAX_EXACT:
                return _Info(body.exact | {""}, None)
            return _Info(None, None)
        if low == high == 1:
            return body
        return _Info(None, body.best())
    return _UNKNOWN  # any, categories, negated classes, group references


def _branch(alternatives: list[Any]) -> _Info:
    infos = [_sequence(alt) for alt in alternatives]
    exact: frozenset[str] | None = None
    if all(i.exact is not None for i in infos):
        union = frozenset().union(*(i.exact for i in infos))  # type: ignore[misc]
        exact = union if len(union) <= _MAX_EXACT else None
    required: set[str] = set()
    for info in infos:
        best = info.best()
        if best is None:
            return _Info(exact, None)
        required |= best
    return _Info(exact, frozenset(required))


def _sequence(seq: Sequence[tuple[Any, Any]]) -> _Info:
    best: frozenset[str] | None = None
    run: frozenset[str] = frozenset({""})
    whole_exact = True
    for op, arg in seq:
        info = _node(op, arg)
        if info.exact is not None and len(run) * len(info.exact) <= _MAX_EXACT:
            run = frozenset(a + b for a in run for b in info.exact)
            continue
        # The run of exact pieces ends here: what it spelt is a required fragment.
        whole_exact = False
        best = _better(best, run)
        best = _better(best, info.best())
        run = info.exact if info.exact is not None else frozenset({""})
    best = _better(best, run)
    return _Info(run if whole_exact else None, best)


def required_literals(pattern: str, flags: int = 0) -> frozenset[str] | None:
    """Strings one of which occurs in every match of `pattern`, or None when none can be derived
    (or the shortest would be under MIN_LITERAL characters, too common to filter on)."""
    if flags & re.IGNORECASE:
        return None
    try:
        parsed = _p.parse(pattern, flags)
    except re.error:
        return None
    best = _sequence(list(parsed)).best()
    if best is None or min(len(s) for s in best) < MIN_LITERAL:
        return None
    # A string containing another in the set adds nothing: the shorter one is tested.
    kept = [s for s in best if not any(o != s and o in s for o in best)]
    return frozenset(kept)


def split_alternation(pattern: str) -> list[str]:
    """The top-level branches of `pattern` (the pattern itself when it has one branch)."""
    parts: list[str] = []
    depth = 0
    in_class = False
    start = 0
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            if ch == "]" and not (pattern[i - 1] == "[" or pattern[i - 2 : i] == "[^"):
                in_class = False
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    parts.append(pattern[start:])
    return parts


class FilteredPattern:
    """A compiled alternation that only runs the branches whose literals occur in the text.

    Quacks like `re.Pattern` for `search`, `finditer`, `findall` and `sub`; anything else is
    delegated to the full compiled pattern.
    """

    __slots__ = ("full", "pattern", "flags", "_branches", "_checks", "_always", "_subsets", "_all_mask")

    def __init__(self, branches: Sequence[str], flags: int = 0) -> None:
        self.pattern = "|".join(f"(?:{b})" for b in branches)
        self.flags = flags
        self.full = re.compile(self.pattern, flags)
        self._branches = list(branches)
        checks: list[tuple[int, tuple[str, ...]]] = []
        always = 0
        for index, branch in enumerate(self._branches):
            literals = None if _has_group_reference(branch) else required_literals(branch, flags)
            if literals is None:
                always |= 1 << index
            else:
                checks.append((1 << index, tuple(sorted(literals, key=len, reverse=True))))
        self._checks = checks
        self._always = always
        self._all_mask = (1 << len(self._branches)) - 1
        self._subsets: dict[int, re.Pattern[str] | None] = {}

    @classmethod
    def of(cls, pattern: str, flags: int = 0) -> FilteredPattern:
        """Filter one pattern, splitting it at its top-level alternation."""
        branches = split_alternation(pattern)
        for branch in branches:  # a branch that does not compile alone cannot be split out
            try:
                re.compile(branch, flags)
            except re.error:
                return cls([pattern], flags)
        return cls(branches, flags)

    def _for(self, text: str) -> re.Pattern[str] | None:
        mask = self._always
        for bit, literals in self._checks:
            for literal in literals:
                if literal in text:
                    mask |= bit
                    break
        if mask == self._all_mask:
            return self.full
        try:
            return self._subsets[mask]
        except KeyError:
            pass
        if mask == 0:
            compiled = None
        elif len(self._subsets) >= _MAX_SUBSETS:
            return self.full
        else:
            chosen = [b for i, b in enumerate(self._branches) if mask >> i & 1]
            compiled = re.compile("|".join(f"(?:{b})" for b in chosen), self.flags)
        self._subsets[mask] = compiled
        return compiled

    def search(self, text: str, *args: int) -> re.Match[str] | None:
        compiled = self._for(text)
        return None if compiled is None else compiled.search(text, *args)

    def finditer(self, text: str, *args: int) -> Iterator[re.Match[str]]:
        compiled = self._for(text)
        return iter(()) if compiled is None else compiled.finditer(text, *args)

    def findall(self, text: str, *args: int) -> list[Any]:
        compiled = self._for(text)
        return [] if compiled is None else compiled.findall(text, *args)

    def sub(self, repl: Any, text: str, count: int = 0) -> str:
        compiled = self._for(text)
        return text if compiled is None else compiled.sub(repl, text, count)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.full, name)

    def __repr__(self) -> str:
        return f"FilteredPattern({len(self._branches)} branches, {len(self._checks)} filtered)"


def _has_group_reference(pattern: str) -> bool:
    # Named groups or back-references tie branches together: such a branch is never filtered.
    return "(?P" in pattern or re.search(r"\\[1-9]", pattern) is not None
