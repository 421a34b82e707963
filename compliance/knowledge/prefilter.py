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

The rule engine goes further: a `LiteralScanner` (Aho-Corasick, pyahocorasick) finds every
literal of every pattern the rules use in one pass over a text, so each pattern then runs only
its branches whose literals occur (`ScannedPattern`), on the text or any part of it, with no gate
regex at all; which regex runs for a given set of candidates is worked out once per set (search
plans); a candidate branch `re` cannot skip ahead for is first looked for by its skipping tail, and
dropped where that is absent. `found` answers "is there a match?" without working out which one,
and a `ScannedUnion` tells in one mask test whether any of several patterns has a candidate at
all. A `SliceGate` searches a whole text once with a pattern's assertions removed (`relax`) to
rule out every slice of it, so rules that check clause by clause need not split most replies.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

import ahocorasick

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
_COMMON = {1: 10_000.0, 2: 10_000.0, 3: 30.0, 4: 15.0, 5: 6.0, 6: 2.0}
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


# Compiled alternations of candidate branches kept per pattern: a knowledge base's texts use a few
# dozen sets at most; past this, sets are searched branch by branch (same results, slower).
_MAX_SUBSETS = 256
# Search plans kept per pattern (one per set of candidates met); past this, plans are made anew.
_MAX_PLANS = 512


def _no_match(_text: str) -> None:
    return None


def _no_matches(_text: str) -> Iterator[re.Match[str]]:
    return iter(())


class FilteredPattern:
    """A compiled alternation that is only run on texts holding one of its branches' literals.

    Every literal the branches need goes into one "gate" regex, built as a trie so that `re` tests
    them all in a single pass in C (and skips ahead on their first characters). A text the gate
    finds nothing in cannot match any filterable branch, so only the branches with no derivable
    literal (if any) are run; otherwise the full pattern is. Results are exactly the full
    pattern's. Quacks like `re.Pattern` for `search`, `finditer`, `findall` and `sub`; anything
    else is delegated to the full compiled pattern.

    Each branch is also compiled on its own, rewritten by `fast_form` (and split by `distribute`)
    so that `re` can jump to its first character. Given which branches can match a text (their
    literals occur in it, as a `LiteralScanner` finds for many patterns in one pass),
    `search_branches`, `finditer_branches` and `sub_branches` run only those: usually one, and
    that one fast.
    """

    __slots__ = (
        "_all",
        "_always",
        "_branch_regexes",
        "_direct_finditer_plans",
        "_direct_search_plans",
        "_empty_ok",
        "_fast_full",
        "_finditer_plans",
        "_gate",
        "_joinable",
        "_openers",
        "_search_plans",
        "_skipping",
        "_subsets",
        "_tailed",
        "_tails",
        "_unfiltered",
        "branch_literals",
        "branches",
        "flags",
        "full",
        "literals",
        "pattern",
    )

    def __init__(self, branches: Sequence[str], flags: int = 0) -> None:
        self.pattern = "|".join(f"(?:{b})" for b in branches)
        self.flags = flags
        self.full = re.compile(self.pattern, flags)
        # The same alternation with each branch led by a literal where possible: the same matches
        # and groups as `full`, for searches without a scan.
        self._fast_full = re.compile("|".join(f"(?:{fast_form(b, flags)})" for b in branches), flags)
        # Branches tied together by group references cannot run apart: each is then always run.
        independent = not any(_has_group_reference(b) for b in branches)
        # Internally a branch opening with "(?:^|, )" becomes one branch per opening: the same
        # alternation, but each part lets `re` skip ahead (see `distribute`).
        if independent:
            branches = [part for branch in branches for part in distribute(branch, flags)]
        self.branches = tuple(branches)
        literals: set[str] = set()
        unfiltered: list[str] = []
        per_branch: list[frozenset[str] | None] = []
        for branch in branches:
            found = None if _has_group_reference(branch) else required_literals(branch, flags)
            if found is None or min(len(s) for s in found) < MIN_LITERAL:
                unfiltered.append(branch)
                per_branch.append(None)
            else:
                literals |= found
                per_branch.append(found)
        # Per branch: the literals one of which it needs (None: it may match without any).
        self.branch_literals = tuple(per_branch)
        self.literals = frozenset(s for s in literals if not any(o != s and o in s for o in literals))
        self._gate = re.compile(trie_pattern(self.literals)) if self.literals else None
        fast = [fast_form(b, flags) for b in branches]
        # What still has to run when the gate finds nothing: the unfilterable branches, in order.
        self._unfiltered = (
            re.compile(
                "|".join(f"(?:{b})" for b, lits in zip(fast, per_branch, strict=True) if lits is None), flags
            )
            if unfiltered
            else None
        )
        self._branch_regexes = tuple(re.compile(b, flags) for b in fast) if independent else ()
        # Each branch as it can stand in an alternation of some of them (bare when it has no
        # top-level "|", so that alternation can open with a character class `re` skips on).
        self._joinable = tuple(b if len(split_alternation(b)) == 1 else f"(?:{b})" for b in fast)
        # Alternations of candidate branches, compiled the first time a set of candidates occurs
        # (like `re`'s own cache of compiled patterns; bounded, see `search_branches`).
        self._subsets: dict[int, re.Pattern[str]] = {}
        # Branches whose own regex skips ahead (opens with a few characters or a start anchor):
        # searched one by one, each is quick; the rest are best run as one alternation.
        self._skipping = sum(1 << i for i, b in enumerate(fast) if _skips_ahead(b, flags))
        self._all = (1 << len(branches)) - 1
        self._always = (
            sum(1 << i for i, lits in enumerate(per_branch) if lits is None) if independent else self._all
        )
        # A branch that can match the empty string makes finditer's stepping subtle: such a pattern
        # is iterated with the whole alternation instead of branch by branch.
        self._empty_ok = any(_min_width(b, flags) == 0 for b in branches)
        # The characters each branch opens with (None: not only literals), to tell when an
        # alternation of candidate branches still lets `re` skip ahead.
        self._openers = tuple(_openers(list(_p.parse(b, flags))) for b in fast)
        # How to search (and iterate) for each set of candidate branches met so far, worked out
        # once per set: `search_plan`, `finditer_plan`.
        self._search_plans: dict[int, Callable[[str], re.Match[str] | None]] = {}
        self._finditer_plans: dict[int, Callable[[str], Iterator[re.Match[str]]]] = {}
        # A branch `re` cannot skip ahead for is tried at every position of the text, however rare
        # what it needs: "\b(?:the )?government..." is a candidate wherever "pension" occurs. Its
        # longest tail that does skip ahead ("government...") is searched first: where the tail is
        # not found the branch cannot match (each match of it holds a match of the tail, in the
        # same text), so it is dropped from the candidates before the search (`_tailed_search`).
        tails: list[re.Pattern[str] | None] = []
        for index, branch in enumerate(branches):
            tail = None
            if independent and not self._skipping >> index & 1:
                suffix = skipping_suffix(branch, flags)
                tail = None if suffix is None else re.compile(suffix, flags)
            tails.append(tail)
        self._tails = tuple(tails)
        self._tailed = sum(1 << i for i, tail in enumerate(tails) if tail is not None)
        # The plans for candidates left once tails are checked, keyed by those candidates.
        self._direct_search_plans: dict[int, Callable[[str], re.Match[str] | None]] = {}
        self._direct_finditer_plans: dict[int, Callable[[str], Iterator[re.Match[str]]]] = {}

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
            return self._fast_full
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

    # --- running only some branches -----------------------------------------------------------

    def search_branches(self, text: str, branches: int, pos: int = 0) -> re.Match[str] | None:
        """`search(text, pos)`, knowing that only the branches whose bits are set in `branches`
        (bit i: branch i) can match `text`; unfilterable branches are always run.

        With one candidate its own regex is the answer; with several, the alternation of just
        those (in order), which finds what the whole one does since the others cannot match.
        (Only the span and text of the match are the same: groups are numbered within the
        branches run.) Once `_MAX_SUBSETS` sets of candidates are compiled, further sets are
        searched branch by branch: the leftmost match wins, the earlier branch on a tie, which is
        again what the alternation finds (it tries the branches in order at each position).
        """
        branches = (branches & self._all) | self._always
        if branches == self._all:
            return self._fast_full.search(text, pos)
        if not branches:
            return None
        if not branches & (branches - 1):  # one branch
            return self._branch_regexes[branches.bit_length() - 1].search(text, pos)
        return self._search_several(text, branches, pos)

    def search_plan(self, branches: int) -> Callable[[str], re.Match[str] | None]:
        """`search_branches(text, branches)` as one callable, chosen once per set of candidates:
        a compiled regex's own `search` wherever one regex can answer (every branch, one branch,
        or candidates whose alternation still opens with only a few characters, so `re` skips
        ahead for it as for each of them), else the branch-by-branch search. Candidates with a
        tail to check first (see `_tails`) are narrowed per text before that choice."""
        plan = self._search_plans.get(branches)
        if plan is not None:
            return plan
        candidates = (branches & self._all) | self._always
        if candidates & self._tailed:
            plan = partial(self._tailed_search, candidates=candidates)
        else:
            plan = self._direct_search_plan(candidates)
        if len(self._search_plans) < _MAX_PLANS:
            self._search_plans[branches] = plan
        return plan

    def _direct_search_plan(self, candidates: int) -> Callable[[str], re.Match[str] | None]:
        plan = self._direct_search_plans.get(candidates)
        if plan is not None:
            return plan
        if candidates == self._all:
            plan = self._fast_full.search
        elif not candidates:
            plan = _no_match
        elif not candidates & (candidates - 1):
            plan = self._branch_regexes[candidates.bit_length() - 1].search
        else:
            joint = self._subset(candidates) if self._skip_together(candidates) else None
            plan = (
                joint.search
                if joint is not None
                else partial(self._search_several, branches=candidates, pos=0)
            )
        if len(self._direct_search_plans) < _MAX_PLANS:
            self._direct_search_plans[candidates] = plan
        return plan

    def _without_absent_tails(self, text: str, candidates: int) -> int:
        """`candidates` less the branches whose tail does not occur in `text` (they cannot match)."""
        tails = self._tails
        checked = candidates & self._tailed
        while checked:
            low = checked & -checked
            checked ^= low
            if tails[low.bit_length() - 1].search(text) is None:  # type: ignore[union-attr]
                candidates ^= low
        return candidates

    def _tailed_search(self, text: str, candidates: int) -> re.Match[str] | None:
        # The candidates left run as `search_branches` would run them: the same match, since the
        # dropped branches match nowhere in `text`.
        return self._direct_search_plan(self._without_absent_tails(text, candidates))(text)

    def finditer_plan(self, branches: int) -> Callable[[str], Iterator[re.Match[str]]]:
        """`finditer_branches(text, branches)` as one callable, chosen once per set of candidates
        (see `search_plan`)."""
        plan = self._finditer_plans.get(branches)
        if plan is not None:
            return plan
        candidates = (branches & self._all) | self._always
        if candidates & self._tailed and not self._empty_ok:
            plan = partial(self._tailed_finditer, candidates=candidates)
        else:
            plan = self._direct_finditer_plan(candidates)
        if len(self._finditer_plans) < _MAX_PLANS:
            self._finditer_plans[branches] = plan
        return plan

    def _direct_finditer_plan(self, candidates: int) -> Callable[[str], Iterator[re.Match[str]]]:
        plan = self._direct_finditer_plans.get(candidates)
        if plan is not None:
            return plan
        if candidates == self._all or self._empty_ok:
            plan = self._fast_full.finditer
        elif not candidates:
            plan = _no_matches
        elif not candidates & (candidates - 1):
            plan = self._branch_regexes[candidates.bit_length() - 1].finditer
        else:
            joint = (
                self._subset(candidates)
                if self._skip_together(candidates) or not candidates & self._skipping
                else None
            )
            plan = joint.finditer if joint is not None else partial(self._step, branches=candidates)
        if len(self._direct_finditer_plans) < _MAX_PLANS:
            self._direct_finditer_plans[candidates] = plan
        return plan

    def _tailed_finditer(self, text: str, candidates: int) -> Iterator[re.Match[str]]:
        # Every search finditer makes (from the end of the last match) finds what it would with
        # the dropped branches: they match nowhere in `text`, from any position.
        return self._direct_finditer_plan(self._without_absent_tails(text, candidates))(text)

    def found_branches(self, text: str, branches: int) -> bool:
        """Whether `search_branches(text, branches)` finds a match, without working out which
        match it is: the candidate branches `re` skips ahead for are tried one by one and the first
        that matches settles it (the leftmost match need not be found), the others together."""
        candidates = (branches & self._all) | self._always
        if not self._branch_regexes or not candidates & (candidates - 1):
            return self.search_plan(branches)(text) is not None
        candidates = self._without_absent_tails(text, candidates)
        regexes = self._branch_regexes
        fast = candidates & self._skipping
        while fast:
            low = fast & -fast
            fast ^= low
            if regexes[low.bit_length() - 1].search(text) is not None:
                return True
        slow = candidates & ~self._skipping
        return bool(slow) and self._direct_search_plan(slow)(text) is not None

    def _skip_together(self, branches: int) -> bool:
        """Whether the alternation of these branches opens with at most `_MAX_OPENERS` characters."""
        chars: set[int] = set()
        while branches:
            low = branches & -branches
            branches ^= low
            opening = self._openers[low.bit_length() - 1]
            if opening is None:
                return False
            chars |= opening
        return len(chars) <= _MAX_OPENERS

    def _search_several(self, text: str, branches: int, pos: int) -> re.Match[str] | None:
        # Branches that skip ahead are searched one by one, the others as one alternation; the
        # leftmost match wins, the earlier branch on a tie (a tie with the alternation, whose
        # branch is unknown, is settled by the alternation of all the candidates).
        best: re.Match[str] | None = None
        best_index = -1
        regexes = self._branch_regexes
        fast = branches & self._skipping
        while fast:
            low = fast & -fast
            fast ^= low
            match = regexes[low.bit_length() - 1].search(text, pos)
            if match is not None and (best is None or match.start() < best.start()):
                best, best_index = match, low.bit_length() - 1
        slow = branches & ~self._skipping
        if not slow:
            return best
        single = not slow & (slow - 1)
        compiled = regexes[slow.bit_length() - 1] if single else self._subset(slow)
        # With no room for another alternation, the slow branches are searched one by one.
        match = self._search_each(text, slow, pos) if compiled is None else compiled.search(text, pos)
        if match is None:
            return best
        if best is None or match.start() < best.start():
            return match
        if match.start() > best.start():
            return best
        if single:
            return match if slow.bit_length() - 1 < best_index else best
        everything = self._subset(branches)
        return (
            everything.search(text, pos) if everything is not None else self._search_each(text, branches, pos)
        )

    def _search_each(self, text: str, branches: int, pos: int) -> re.Match[str] | None:
        best: re.Match[str] | None = None
        regexes = self._branch_regexes
        while branches:
            low = branches & -branches
            branches ^= low
            match = regexes[low.bit_length() - 1].search(text, pos)
            if match is not None and (best is None or match.start() < best.start()):
                best = match
        return best

    def finditer_branches(self, text: str, branches: int) -> Iterator[re.Match[str]]:
        """`finditer(text)` when only the branches set in `branches` can match (see
        `search_branches`). Successive matches are found by searching on from the end of the
        last, which is what finditer does after a non-empty match."""
        branches = (branches & self._all) | self._always
        if branches == self._all or self._empty_ok:
            return self._fast_full.finditer(text)
        if not branches:
            return iter(())
        if not branches & (branches - 1):
            return self._branch_regexes[branches.bit_length() - 1].finditer(text)
        if branches & self._skipping:
            return self._step(text, branches)
        compiled = self._subset(branches)
        return compiled.finditer(text) if compiled is not None else self._step(text, branches)

    def sub_branches(self, repl: str, text: str, branches: int) -> str:
        """`sub(repl, text)` when only the branches set in `branches` can match (see
        `search_branches`); `repl` is taken literally (no group references)."""
        branches = (branches & self._all) | self._always
        if not branches:
            return text
        if branches == self._all:
            compiled: re.Pattern[str] | None = self._fast_full
        elif not branches & (branches - 1):
            compiled = self._branch_regexes[branches.bit_length() - 1]
        else:
            compiled = self._subset(branches)
        if compiled is None:
            return self._fast_full.sub(lambda _match: repl, text)
        return compiled.sub(lambda _match: repl, text)

    def _subset(self, branches: int) -> re.Pattern[str] | None:
        compiled = self._subsets.get(branches)
        if compiled is None and len(self._subsets) < _MAX_SUBSETS:
            chosen = [b for i, b in enumerate(self._joinable) if branches >> i & 1]
            compiled = self._subsets[branches] = re.compile("|".join(chosen), self.flags)
        return compiled

    def _step(self, text: str, branches: int) -> Iterator[re.Match[str]]:
        # `branches`: two or more candidates, already combined with the always-run ones (as
        # `search_branches` would, which then hands them to `_search_several`).
        pos = 0
        while True:
            match = self._search_several(text, branches, pos)
            if match is None:
                return
            yield match
            pos = match.end()  # no branch matches the empty string, so this moves on

    def __getattr__(self, name: str) -> Any:
        return getattr(self.full, name)

    def __repr__(self) -> str:
        return f"FilteredPattern({len(self.literals)} literals, unfiltered={self._unfiltered is not None})"


class Scan:
    """The literals a `LiteralScanner` found in one text, as a bit mask over the branches of every
    pattern it serves (bit set: that branch's literal occurs, so the branch may match)."""

    __slots__ = ("mask", "scanner")

    def __init__(self, mask: int, scanner: LiteralScanner) -> None:
        self.mask = mask
        self.scanner = scanner


class LiteralScanner:
    """One Aho-Corasick pass over a text that tells, for every registered pattern at once, which of
    its branches can match the text or any part of it.

    Each filterable branch of each registered pattern owns one bit; every literal maps to the bits
    of the branches it serves. Scanning a text ORs the masks of the literals it holds: a branch
    whose bit is clear has none of its literals there, nor in any substring, so cannot match. A
    rule scans the utterance's texts once (`Analysis` keeps the scans) and then runs only the
    candidate branches of each pattern, on the whole text or on its sentences and clauses.
    """

    def __init__(self) -> None:
        self._offsets: dict[int, tuple[FilteredPattern, int]] = {}
        self._literal_bits: dict[str, int] = {}
        self._width = 0
        self._automaton: Any = None

    def bind(self, pattern: FilteredPattern) -> ScannedPattern:
        """Register `pattern` (once, however often it is bound) and return it tied to this scanner."""
        known = self._offsets.get(id(pattern))
        if known is not None and known[0] is pattern:
            return ScannedPattern(pattern, self, known[1])
        offset = self._width
        for index, literals in enumerate(pattern.branch_literals):
            # A literal spanning a line break could occur in a text joined from lines (one clause a
            # line) but in none of the lines: such a branch is never filtered here.
            if literals is None or any("\n" in literal for literal in literals):
                continue
            bit = 1 << (offset + index)
            for literal in literals:
                self._literal_bits[literal] = self._literal_bits.get(literal, 0) | bit
        self._width += len(pattern.branches)
        self._offsets[id(pattern)] = (pattern, offset)
        self._automaton = None  # rebuilt on the next scan
        return ScannedPattern(pattern, self, offset)

    def prepare(self) -> None:
        """Build the automaton now (scans build it when needed; this keeps that out of a first scan)."""
        if self._automaton is None:
            self._build()

    def _build(self) -> Any:
        automaton = ahocorasick.Automaton()
        for literal, bits in self._literal_bits.items():
            automaton.add_word(literal, bits)
        if len(automaton):
            automaton.make_automaton()
        self._automaton = automaton
        return automaton

    def scan(self, text: str) -> Scan:
        automaton = self._automaton if self._automaton is not None else self._build()
        mask = 0
        if len(automaton):
            for _end, bits in automaton.iter(text):
                mask |= bits
        return Scan(mask, self)

    def literals_in(self, text: str) -> set[str]:
        """The registered literals occurring in `text` (for tests and diagnostics)."""
        return {literal for literal in self._literal_bits if literal in text}


class ScannedPattern:
    """A `FilteredPattern` bound to a `LiteralScanner`: searched with the scan of a text that
    contains the one searched (the text itself, or the utterance a sentence or clause comes from),
    it runs only the branches whose literals that scan found. Without a scan of its own scanner it
    falls back to the pattern's own gate, so results never depend on which is used."""

    __slots__ = ("_always", "_idle", "_offset", "_width", "pattern", "scanner")

    def __init__(self, pattern: FilteredPattern, scanner: LiteralScanner, offset: int) -> None:
        self.pattern = pattern
        self.scanner = scanner
        self._offset = offset
        self._width = (1 << len(pattern.branches)) - 1
        # Branches the scanner does not filter (no literal, or one spanning lines) always run.
        self._always = sum(
            1 << i
            for i, literals in enumerate(pattern.branch_literals)
            if literals is None or any("\n" in literal for literal in literals)
        )
        # With no candidate branch nothing runs, unless the pattern runs some branches whatever the
        # scan finds (branches tied together by a group reference all run).
        self._idle = not pattern._always

    @property
    def scan_bits(self) -> int:
        """This pattern's bits in the mask of a scan of its scanner: with none of them set (and no
        branch that runs whatever the scan finds, `runs_always`) it has no candidate branch."""
        return self._width << self._offset

    @property
    def runs_always(self) -> bool:
        return bool(self._always)

    def branches(self, scan: Scan) -> int:
        """The pattern's candidate branches (bit i: branch i) in any text inside the scanned one."""
        return ((scan.mask >> self._offset) & self._width) | self._always

    def may_match(self, scan: Scan | None, text: str = "") -> bool:
        """False only when the pattern certainly matches nowhere in the scanned text (without a
        scan of this scanner: nowhere in `text`)."""
        if scan is None or scan.scanner is not self.scanner:
            return self.pattern.may_match(text)
        return bool(((scan.mask >> self._offset) & self._width) | self._always)

    def search(self, text: str, scan: Scan | None) -> re.Match[str] | None:
        if scan is None or scan.scanner is not self.scanner:
            return self.pattern.search(text)
        branches = ((scan.mask >> self._offset) & self._width) | self._always
        if not branches and self._idle:  # no candidate (most searches): nothing to run
            return None
        # The plan for these candidates, looked up here rather than through a call (this runs
        # dozens of times per utterance).
        plan = self.pattern._search_plans.get(branches)
        return (plan or self.pattern.search_plan(branches))(text)

    def finditer(self, text: str, scan: Scan | None) -> Iterator[re.Match[str]]:
        if scan is None or scan.scanner is not self.scanner:
            return self.pattern.finditer(text)
        branches = ((scan.mask >> self._offset) & self._width) | self._always
        if not branches and self._idle:
            return iter(())
        plan = self.pattern._finditer_plans.get(branches)
        return (plan or self.pattern.finditer_plan(branches))(text)

    def found(self, text: str, scan: Scan | None) -> bool:
        """`search(text, scan) is not None`, settled by the first candidate branch that matches."""
        if scan is None or scan.scanner is not self.scanner:
            return self.pattern.search(text) is not None
        branches = ((scan.mask >> self._offset) & self._width) | self._always
        if not branches and self._idle:
            return False
        if not branches & (branches - 1):  # one candidate at most: its search settles it
            plan = self.pattern._search_plans.get(branches)
            return (plan or self.pattern.search_plan(branches))(text) is not None
        return self.pattern.found_branches(text, branches)

    def finditer_branches(self, text: str, branches: int) -> Iterator[re.Match[str]]:
        """`finditer(text)` running only `branches` (bit i: branch i), known to hold every branch
        that can match `text` (as `SliceGate.branches` tells for every slice of a text)."""
        plan = self.pattern._finditer_plans.get(branches)
        return (plan or self.pattern.finditer_plan(branches))(text)

    def sub(self, repl: str, text: str, scan: Scan | None) -> str:
        """`sub` with `repl` taken literally, running only the candidate branches."""
        if scan is None or scan.scanner is not self.scanner:
            return self.pattern.sub(lambda _match: repl, text)
        branches = ((scan.mask >> self._offset) & self._width) | self._always
        return self.pattern.sub_branches(repl, text, branches) if branches else text

    def over(self, scan: Scan | None) -> ScannedSearch:
        """This pattern with `scan` fixed, for code that expects `search(text)` (texts inside the
        scanned one only)."""
        return ScannedSearch(self, scan)

    def __repr__(self) -> str:
        return f"ScannedPattern({self.pattern!r}, bits {self._offset}..)"


class ScannedUnion:
    """Several patterns bound to one `LiteralScanner`, asked at once whether any may match a text:
    one mask test where asking each pattern is a call apiece. A rule with many patterns, of which
    most texts give none a candidate branch, is skipped on that answer."""

    __slots__ = ("_always", "_bits", "scanner")

    def __init__(self, patterns: Sequence[ScannedPattern]) -> None:
        scanners = {id(p.scanner) for p in patterns}
        if len(scanners) > 1:
            raise ValueError("patterns of one scanner only")
        self.scanner = patterns[0].scanner if patterns else None
        self._bits = 0
        for pattern in patterns:
            self._bits |= pattern.scan_bits
        # A branch run whatever the scan finds (no literal, or tied to others by a group reference).
        self._always = any(pattern._always or pattern.pattern._always for pattern in patterns)

    def may_match(self, scan: Scan | None) -> bool:
        """False only when no pattern has a candidate branch under `scan` (so none can match the
        scanned text or any part of it); True without a scan of this scanner."""
        if scan is None or scan.scanner is not self.scanner:
            return True
        return self._always or bool(scan.mask & self._bits)


class SliceGate:
    """Whether a `ScannedPattern` may match some slice of a text (a sentence, a clause, any part),
    told by searching the whole text once: each candidate branch (under the text's scan) is
    searched with its zero-width assertions removed (`relax`). Where none is found, no slice can
    match, so a rule checking a reply clause by clause need not split it at all. A branch that
    does not relax into a pattern `re` skips ahead on (a clause-start anchor before an open
    alternation, say) is not searched: it counts as possibly matching wherever its literals occur.
    """

    __slots__ = ("_kept", "_pattern", "_regexes")

    def __init__(self, pattern: ScannedPattern) -> None:
        self._pattern = pattern
        filtered = pattern.pattern
        regexes: list[re.Pattern[str] | None] = []
        kept = 0
        for index, branch in enumerate(filtered.branches):
            relaxed = relax(branch, filtered.flags)
            searched = None if relaxed is None else skipping_suffix(relaxed, filtered.flags)
            if searched is None:
                kept |= 1 << index
                regexes.append(None)
            else:
                regexes.append(re.compile(searched, filtered.flags))
        self._kept = kept
        self._regexes = tuple(regexes)

    def may_match(self, text: str, scan: Scan | None) -> bool:
        """False only when the pattern matches no slice of `text` (`scan`: the scan of `text`)."""
        pattern = self._pattern
        if scan is None or scan.scanner is not pattern.scanner:
            return pattern.pattern.may_match(text)
        branches = ((scan.mask >> pattern._offset) & pattern._width) | pattern._always
        if branches & self._kept:
            return True
        regexes = self._regexes
        while branches:
            low = branches & -branches
            branches ^= low
            if regexes[low.bit_length() - 1].search(text) is not None:  # type: ignore[union-attr]
                return True
        return False

    def branches(self, text: str, scan: Scan | None) -> int | None:
        """The branches that may match some slice of `text` (bit i: branch i; 0: none can): the
        candidates under `scan` (the scan of `text`) that cannot be relaxed or whose relaxed form
        occurs in `text`. None without a scan of the pattern's scanner. A rule checking a reply
        part by part runs only these in every part (`ScannedPattern.finditer_branches`), having
        searched the whole reply once per branch rather than each part."""
        pattern = self._pattern
        if scan is None or scan.scanner is not pattern.scanner:
            return None
        branches = ((scan.mask >> pattern._offset) & pattern._width) | pattern._always
        found = branches & self._kept
        unknown = branches & ~self._kept
        regexes = self._regexes
        while unknown:
            low = unknown & -unknown
            unknown ^= low
            if regexes[low.bit_length() - 1].search(text) is not None:  # type: ignore[union-attr]
                found |= low
        return found


class ScannedSearch:
    """A `ScannedPattern` and one scan: quacks like `re.Pattern` for `search` and `finditer`."""

    __slots__ = ("_pattern", "_scan")

    def __init__(self, pattern: ScannedPattern, scan: Scan | None) -> None:
        self._pattern = pattern
        self._scan = scan

    def search(self, text: str) -> re.Match[str] | None:
        return self._pattern.search(text, self._scan)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self._pattern.finditer(text, self._scan)


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


def _skips_ahead(pattern: str, flags: int) -> bool:
    """Whether `re` can skip ahead when searching for `pattern`: it opens with at most
    `_MAX_OPENERS` characters, or with `^` outside MULTILINE mode (only the start is tried)."""
    parsed = list(_p.parse(pattern, flags))
    if not flags & re.MULTILINE and parsed and parsed[0] == (_c.AT, _c.AT_BEGINNING):
        return True
    openers = _openers(parsed)
    return openers is not None and len(openers) <= _MAX_OPENERS


def _min_width(pattern: str, flags: int) -> int:
    return _p.parse(pattern, flags).getwidth()[0]


# Characters that stand for themselves in a pattern and may lead a rewritten branch.
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789'\"£%")
_QUANTIFIERS = frozenset("*+?{")


def literal_first(branch: str) -> str:
    """`branch` with a leading word boundary moved behind the first character: `\\bshould`
    becomes `s(?<=\\bs)hould`, and `\\b(?:i|we) ...` becomes `(?:i(?<=\\bi)|w(?<=\\bw)e) ...`
    (a capturing group likewise, keeping its number and name).

    Both match exactly where the original does (the look-behind checks the same boundary at the
    same place), but a pattern that opens with a character lets `re` jump from one occurrence of
    it to the next instead of trying the pattern at every position: 10-20x faster on a typical
    reply. A branch that cannot be rewritten this way is returned unchanged.
    """
    if not branch.startswith("\\b"):
        return branch
    rest = branch[2:]
    if rest[:1] in _PLAIN and rest[1:2] not in _QUANTIFIERS:
        return f"{rest[0]}(?<=\\b{rest[0]}){rest[1:]}"
    opener = _group_opener(rest)
    if opener is None:
        return branch
    close = _closing_paren(rest, 0)
    if close is None or rest[close + 1 : close + 2] in _QUANTIFIERS:
        return branch
    alternatives = [literal_first("\\b" + alt) for alt in split_alternation(rest[len(opener) : close])]
    if any(alt.startswith("\\b") for alt in alternatives):
        return branch
    return opener + "|".join(alternatives) + rest[close:]


# `re` jumps ahead on a pattern's opening characters only while they are few: an alternation opening
# with many different letters is tried at most positions anyway, and is then faster left as it is
# (measured over the knowledge base's branches: a median of 0.1x the time with one opening
# character, 0.6x with four, about 1x from seven).
_MAX_OPENERS = 4


def fast_form(branch: str, flags: int = 0) -> str:
    """`literal_first(branch)` when that lets `re` skip ahead (it opens with at most
    `_MAX_OPENERS` characters), else `branch`. Either way the same matches."""
    rewritten = literal_first(branch)
    if rewritten == branch:
        return branch
    openers = _openers(list(_p.parse(rewritten, flags)))
    return rewritten if openers is not None and len(openers) <= _MAX_OPENERS else branch


def _openers(seq: list[tuple[Any, Any]]) -> set[int] | None:
    """The characters every match of a parsed pattern opens with (None: not only literals)."""
    if not seq:
        return None
    op, arg = seq[0]
    if op is _c.LITERAL:
        return {arg}
    if op is _c.SUBPATTERN:
        return _openers(list(arg[3]))
    if op is _c.BRANCH:
        found: set[int] = set()
        for alternative in arg[1]:
            chars = _openers(list(alternative))
            if chars is None:
                return None
            found |= chars
        return found
    return None


def distribute(branch: str, flags: int = 0) -> list[str]:
    """`(?:^|, )rest` as `["^rest", ", rest"]`: a branch opening with a group that has a bare `^`
    among its alternatives, split into one branch per alternative. Together they match what the
    branch does (an alternation distributes over what follows it, in order), but each opens with
    an anchor or a character, where the original is tried at every position (20x slower on a
    typical reply). Any other branch is returned alone."""
    if not branch.startswith("(?:") or "(?P" in branch:  # a named group cannot appear twice
        return [branch]
    close = _closing_paren(branch, 0)
    if close is None or branch[close + 1 : close + 2] in _QUANTIFIERS:
        return [branch]
    alternatives = split_alternation(branch[3:close])
    if "^" not in alternatives or len(alternatives) > _MAX_OPENERS:
        return [branch]
    parts = [alternative + branch[close + 1 :] for alternative in alternatives]
    try:
        for part in parts:
            re.compile(part, flags)
    except re.error:
        return [branch]
    return parts


_GROUP_OPENER = re.compile(r"\((?:\?:|\?P<\w+>|(?!\?))")


def _group_opener(pattern: str) -> str | None:
    """The opening of the group `pattern` starts with, if it is a plain, non-capturing or named
    group (not a look-around, flags or a conditional)."""
    match = _GROUP_OPENER.match(pattern)
    return None if match is None else match.group()


def _closing_paren(pattern: str, open_index: int) -> int | None:
    """Index of the parenthesis closing the group opened at `open_index` (None if unbalanced)."""
    depth = 0
    in_class = False
    i = open_index
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
            if depth == 0:
                return i
        i += 1
    return None


_ASSERTION_ESCAPES = frozenset(("\\b", "\\B", "\\A", "\\Z"))
_LOOKAROUNDS = ("(?=", "(?!", "(?<=", "(?<!")


def relax(pattern: str, flags: int = 0) -> str | None:
    """`pattern` with every zero-width assertion (`\\b`, `\\B`, `^`, `$`, `\\A`, `\\Z`, look-aheads
    and look-behinds) removed, or None when that cannot be done safely (an assertion under a
    quantifier, a conditional, a group reference, verbose mode, or a result that does not compile).

    Assertions only ever turn matches away, and what is left matches on the characters it consumes
    alone. So wherever `pattern` matches any part of a text (a clause, a sentence: with whatever
    lies at that part's edges), the relaxed pattern matches the whole text at the same span: one
    search of the whole text that finds nothing rules out every part of it at once.
    """
    if flags & re.VERBOSE or "(?x" in pattern or _has_group_reference(pattern) or "(?(" in pattern:
        return None
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            escape = pattern[i : i + 2]
            i += 2
            if escape in _ASSERTION_ESCAPES:
                if pattern[i : i + 1] in _QUANTIFIERS:
                    return None
                continue
            out.append(escape)
        elif ch == "[":
            end = _class_end(pattern, i)
            if end is None:
                return None
            out.append(pattern[i:end])
            i = end
        elif ch in "^$":
            i += 1
            if pattern[i : i + 1] in _QUANTIFIERS:
                return None
        elif pattern.startswith(_LOOKAROUNDS, i):
            close = _closing_paren(pattern, i)
            if close is None or pattern[close + 1 : close + 2] in _QUANTIFIERS:
                return None
            i = close + 1
        else:
            out.append(ch)
            i += 1
    relaxed = "".join(out)
    try:
        re.compile(relaxed, flags)
    except re.error:
        return None
    return relaxed


def _class_end(pattern: str, open_index: int) -> int | None:
    """Index just past the character class opened at `open_index` (None if it never closes)."""
    i = open_index + 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":  # a "]" first in a class stands for itself
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]":
            return i + 1
        i += 1
    return None


def skipping_suffix(pattern: str, flags: int = 0) -> str | None:
    """The longest tail of `pattern` (a sequence with no top-level "|" and no assertions) that
    `re` can skip ahead for: it opens with a few characters, not a space (which is everywhere),
    and needs at least `MIN_LITERAL` characters. None when no tail does.

    Any match of a sequence holds a match of each of its tails, so a text where the tail is not
    found has no match of the pattern either: "(?:the |your )?(?:best|right) option for you" is
    looked for as " option for you" would be, were that its first skipping tail.
    """
    if len(split_alternation(pattern)) != 1:
        return None
    items = _top_items(pattern)
    if items is None:
        return None
    for start in range(len(items)):
        tail = "".join(items[start:])
        try:
            parsed = list(_p.parse(tail, flags))
        except re.error:
            continue
        openers = _openers(parsed)
        if (
            openers is not None
            and len(openers) <= _MAX_OPENERS
            and ord(" ") not in openers
            and _p.parse(tail, flags).getwidth()[0] >= MIN_LITERAL
        ):
            return tail
    return None


def _top_items(pattern: str) -> list[str] | None:
    """`pattern` cut into its top-level pieces (a character, escape, class or group, each with its
    quantifier), or None when it cannot be read."""
    if _UNSPLITTABLE.search(pattern):
        return None
    items: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            end = i + 2
        elif ch == "[":
            found = _class_end(pattern, i)
            if found is None:
                return None
            end = found
        elif ch == "(":
            close = _closing_paren(pattern, i)
            if close is None:
                return None
            end = close + 1
        else:
            end = i + 1
        quantifier = _QUANTIFIER_AT.match(pattern, end)
        if quantifier is not None:
            end = quantifier.end()
        items.append(pattern[i:end])
        i = end
    return items


# Escapes longer than two characters (a tail could start inside them) and inline flags (a tail
# would lose them): a pattern holding either is not cut.
_UNSPLITTABLE = re.compile(r"\\[xuUN0-7g]|\(\?[aiLmsux-]")
_QUANTIFIER_AT = re.compile(r"(?:[*+?]|\{\d*(?:,\d*)?\})[?+]?")
