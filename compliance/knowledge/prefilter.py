"""Literal pre-filters for the knowledge base's regular expressions, derived from the patterns.

Most lexicon terms and language patterns are alternations of many branches that open with `\\b`,
which Python's `re` cannot skip ahead for: it tries every branch at every position. Yet nearly
every branch needs some literal text to match at all ("should i", "transfer", "pension wise").
`required_literals` reads a pattern's parse tree and returns a set of strings, one of which must
occur in any text the pattern matches. `FilteredPattern` splits an alternation into its branches
and gathers their literals into one trie-shaped "gate" regex that `re` runs in a single C pass:
a text holding none of them cannot match, so the full pattern is skipped (the usual case: most
texts say none of the phrases a given rule looks for).

Results are exactly the full pattern's: the gate only ever skips a search that would find nothing.
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
# Extra cost of a literal of this length (a short one is in most texts, so it rarely filters).
_COMMON = {1: 100.0, 2: 60.0, 3: 30.0, 4: 15.0, 5: 6.0, 6: 2.0}
# A literal shorter than this is too common to be worth testing ("i", "a ").
MIN_LITERAL = 3

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


def _cost(strings: frozenset[str]) -> float:
    """Rough cost of filtering on `strings`: a little for each (the gate tests them together), and
    much more for short ones, which turn up in most texts and so let the full regex run anyway."""
    return sum(0.25 + _COMMON.get(len(s), 0.0) for s in strings)


def _better(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    if not _usable(a):
        return b if _usable(b) else None
    if not _usable(b):
        return a
    # Equal cost: the one whose shortest string is longer (it turns up in fewer texts).
    key_a = (_cost(a), -min(len(x) for x in a))  # type: ignore[union-attr]
    key_b = (_cost(b), -min(len(x) for x in b))  # type: ignore[union-attr]
    return a if key_a <= key_b else b


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
        if info.exact is not None and len(run) * len(info.exact) > _MAX_EXACT:
            # Too many spellings to extend: keep only those with no shorter spelling as a suffix
            # (". good " can give way to "good ": a text holding one, then the next piece, also
            # holds the other, then the same piece), which often leaves few enough to go on.
            best = _better(best, run)
            run = frozenset(s for s in run if not any(t != s and s.endswith(t) for t in run))
        if info.exact is not None and len(run) * len(info.exact) <= _MAX_EXACT:
            run = frozenset(a + b for a in run for b in info.exact)
            # Every stage of the run is a candidate: "what " may filter as well as the eight
            # spellings of "what should i (to) do" at an eighth of the cost.
            best = _better(best, run)
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
    if parsed.state.flags & re.IGNORECASE:  # an inline (?i)
        return None
    best = _sequence(list(parsed)).best()
    if best is None:
        return None
    # A string containing another in the set adds nothing: the shorter one is tested.
    kept = frozenset(s for s in best if not any(o != s and o in s for o in best))
    if min(len(s) for s in kept) < MIN_LITERAL:
        return None
    return kept


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
    """A compiled alternation that is only run on texts holding one of its branches' literals.

    Every literal the branches need goes into one "gate" regex, built as a trie so that `re` tests
    them all in a single pass in C (and skips ahead on their first characters). A text the gate
    finds nothing in cannot match any filterable branch, so only the branches with no derivable
    literal (if any) are run; otherwise the full pattern is. Results are exactly the full
    pattern's. Quacks like `re.Pattern` for `search`, `finditer`, `findall` and `sub`; anything
    else is delegated to the full compiled pattern.

    (Gating branch by branch, and running only the branches that pass, was measured too: the
    per-branch bookkeeping in Python cost more than the searches it saved.)
    """

    __slots__ = ("_gate", "_unfiltered", "flags", "full", "literals", "pattern")

    def __init__(self, branches: Sequence[str], flags: int = 0) -> None:
        self.pattern = "|".join(f"(?:{b})" for b in branches)
        self.flags = flags
        self.full = re.compile(self.pattern, flags)
        literals: set[str] = set()
        unfiltered: list[str] = []
        for branch in branches:
            found = None if _has_group_reference(branch) else required_literals(branch, flags)
            if found is None or min(len(s) for s in found) < MIN_LITERAL:
                unfiltered.append(branch)
            else:
                literals |= found
        self.literals = frozenset(s for s in literals if not any(o != s and o in s for o in literals))
        self._gate = re.compile(trie_pattern(self.literals)) if self.literals else None
        # What still has to run when the gate finds nothing: the unfilterable branches, in order.
        self._unfiltered = re.compile("|".join(f"(?:{b})" for b in unfiltered), flags) if unfiltered else None

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

    @property
    def ungated(self) -> bool:
        """True when every text must be searched (no branch has a literal to gate on)."""
        return self._gate is None

    def may_match(self, text: str) -> bool:
        """False only when the pattern certainly finds nothing in `text` (one gate pass, no search)."""
        return self._gate is None or self._unfiltered is not None or self._gate.search(text) is not None

    def _for(self, text: str) -> re.Pattern[str] | None:
        if self._gate is None or self._gate.search(text) is not None:
            return self.full
        return self._unfiltered

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
        return f"FilteredPattern({len(self.literals)} literals, unfiltered={self._unfiltered is not None})"


def trie_pattern(literals: frozenset[str] | set[str]) -> str:
    """One regex matching any of `literals`, factored as a trie (a literal that extends another
    adds nothing: the shorter one already shows the text holds a literal)."""
    root: dict[str, dict] = {}
    for literal in sorted(literals, key=len):
        node = root
        for char in literal:
            if "" in node:  # a shorter literal ends here
                break
            node = node.setdefault(char, {})
        else:
            node.clear()
            node[""] = {}
    return _emit(root)


def _emit(node: dict[str, dict]) -> str:
    if "" in node:
        return ""
    parts = [re.escape(char) + _emit(child) for char, child in sorted(node.items())]
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _has_group_reference(pattern: str) -> bool:
    # Named groups or back-references tie branches together: such a branch is never filtered.
    return "(?P" in pattern or re.search(r"\\[1-9]", pattern) is not None
