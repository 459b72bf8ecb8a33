r"""A pattern's held match, followed a character at a time as the stream goes on.

A scan step holds back text from a pattern's pending match (docs/design.md, "One scan
step"), and while more chunks arrive and the match stays pending, the scanner holds them
too without a scan (Scanner._still_held). Past the pattern's short span, telling that it
stays pending took regex calls under the time bound, whose set-up alone costs about 2 us
a call: deepseek_v3's call open, about 80 characters held over twenty 4-character chunks,
cost 5 to 10 us a chunk, more than half of a stream of parallel calls.

For a pattern built of characters, classes, alternations and repeats, with look-behinds
at literals and a look-ahead at its very end, the question "does a match from the hold's
start still go on, and has none, from there or later, completed?" is answered by an
automaton over the pattern's positions, as in Thompson's construction: a set of the
positions the match from the hold's start can be at, and a set of those any match
started since can be at (with look-behinds, and the end of the text they can still read).
While the first set is not empty and neither holds the pattern's end, the regex engine's
partial search from the hold's start finds that match pending there: every way through
the pattern is one the engine tries, and it prefers a complete match, of which there is
none. Once either changes, the scanner asks the regex engine, which decides the rest.
Lazy repeats other than `.*?` are not followed: the engine's partial matches of those
are its own (`<v>\s*?x` is partial on `<v>y`).

The states are numbered as they are met and each one's next state by character is kept
(a lazily built DFA), so a chunk costs a dict look-up per character. At most MAX_STATES
states and MAX_TRANSITIONS transitions are kept per pattern: past them, the scanner asks
the regex engine.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable
from typing import Any

import regex

if sys.version_info >= (3, 11):
    import re._constants as _sre
    import re._parser as _sre_parse
else:  # pragma: no cover - Python 3.10
    import sre_constants as _sre
    import sre_parse as _sre_parse

# The states a pattern's automaton keeps, and the transitions between them (then it adds
# no more, and the scanner asks the regex engine wherever they would be needed): its
# memory is bounded, whatever characters a stream holds.
MAX_STATES = 512
MAX_TRANSITIONS = 16384
# Repeats with a finite upper bound are written out, up to this many copies in all; and a
# pattern of more positions than this is not followed (a step costs O(positions); the
# catalog's largest has 113).
MAX_COPIES = 64
MAX_POSITIONS = 512
# A transition that ends the following: a match completed, or the held one stopped.
STOP = -1

# What the regex engine (not `re`) matches for each class escape.
_CATEGORIES = {
    _sre.CATEGORY_DIGIT: r"\d",
    _sre.CATEGORY_NOT_DIGIT: r"\D",
    _sre.CATEGORY_SPACE: r"\s",
    _sre.CATEGORY_NOT_SPACE: r"\S",
    _sre.CATEGORY_WORD: r"\w",
    _sre.CATEGORY_NOT_WORD: r"\W",
}
_FLAGS = re.DOTALL | re.UNICODE  # the flags a template's pattern is compiled with


class Unsupported(Exception):
    """The pattern holds something the automaton does not follow."""


Test = Callable[[str], bool]


class _Positions:
    """The pattern as positions: each consumes a character that passes its test and goes on
    to `next` (`tests[i]` not None), or goes on without one to each of `next` (a fork). A
    fork in `guards` goes on only where the text before ends with its literal (a
    look-behind)."""

    def __init__(self) -> None:
        self.tests: list[Test | None] = []
        self.next: list[tuple[int, ...]] = []
        self.guards: dict[int, str] = {}
        self.end = self._add(None, ())  # the pattern's end: a complete match

    def _add(self, test: Test | None, following: tuple[int, ...]) -> int:
        if len(self.tests) >= MAX_POSITIONS:
            raise Unsupported("too many positions")
        self.tests.append(test)
        self.next.append(following)
        return len(self.tests) - 1

    def sequence(self, items: list[Any], after: int) -> int:
        """The first position of `items` followed by position `after`."""
        for index in range(len(items) - 1, -1, -1):
            after = self.item(items[index], after)
        return after

    def item(self, item: tuple[Any, Any], after: int) -> int:
        op, av = item
        if op in (_sre.LITERAL, _sre.NOT_LITERAL, _sre.IN, _sre.ANY, _sre.CATEGORY):
            return self._add(_test(op, av), (after,))
        if op is _sre.SUBPATTERN:
            _group, add_flags, del_flags, body = av
            if add_flags or del_flags:
                raise Unsupported("a group with flags")
            return self.sequence(list(body), after)
        if op is _sre.BRANCH:
            return self._add(None, tuple(self.sequence(list(way), after) for way in av[1]))
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
            low, high, body = av
            body = list(body)
            if op is _sre.MIN_REPEAT and body != [(_sre.ANY, None)]:
                # The regex engine's partial match of a lazy repeat other than `.*?` is not
                # the automaton's: `<v>\s*?x` on `<v>y` is partial to it.
                raise Unsupported("a lazy repeat")
            copies = low + (0 if high == _sre.MAXREPEAT else high - low)
            if copies > MAX_COPIES:
                raise Unsupported("a repeat of too many copies")
            if high == _sre.MAXREPEAT:
                loop = self._add(None, ())
                self.next[loop] = (self.sequence(body, loop), after)
                after = loop
            else:
                for _ in range(high - low):
                    after = self._add(None, (self.sequence(body, after), after))
            for _ in range(low):
                after = self.sequence(body, after)
            return after
        if op is _sre.ASSERT and av[0] > 0 and after == self.end:
            # A look-ahead that ends the pattern: its text must be there for the match to be
            # complete, which is all the automaton tells.
            return self.sequence(list(av[1]), after)
        if op is _sre.ASSERT and av[0] < 0 and av[1] and all(o is _sre.LITERAL for o, _ in av[1]):
            # A look-behind at a literal: a fork that goes on only after it.
            guard = self._add(None, (after,))
            self.guards[guard] = "".join(chr(code) for _, code in av[1])
            return guard
        raise Unsupported(f"{op}")


def _test(op: Any, av: Any) -> Test:
    """The test of a one-character item, as the regex engine reads it."""
    if op is _sre.LITERAL:
        char = chr(av)
        return char.__eq__
    if op is _sre.NOT_LITERAL:
        char = chr(av)
        return char.__ne__
    if op is _sre.ANY:  # (DOTALL)
        return lambda _char: True
    if op is _sre.CATEGORY:
        return _category(av)
    negate = False
    tests: list[Test] = []
    for inner_op, inner_av in av:
        if inner_op is _sre.NEGATE:
            negate = True
        elif inner_op is _sre.RANGE:
            tests.append(_in_range(*inner_av))
        elif inner_op in (_sre.LITERAL, _sre.NOT_LITERAL, _sre.CATEGORY):
            tests.append(_test(inner_op, inner_av))
        else:
            raise Unsupported(f"{inner_op} in a class")
    if negate:
        return lambda char: not any(test(char) for test in tests)
    return lambda char: any(test(char) for test in tests)


def _in_range(low: int, high: int) -> Test:
    return lambda char: low <= ord(char) <= high


def _category(av: Any) -> Test:
    source = _CATEGORIES.get(av)
    if source is None:
        raise Unsupported(f"{av}")
    compiled = regex.compile(source)
    return lambda char: compiled.match(char) is not None


class HeldMatch:
    """Follows a pattern's match from a hold's start over the text that arrives (module
    docstring). `start(before)` is the state at the hold's start after the text `before`
    (the left context, which look-behinds read); `go_on(state, text)` the state once `text`
    arrived. Either is None where the regex engine must decide: a match completed (from
    the hold's start or later), the held one stopped, or the automaton reached its bounds.

    A state is the pair of position sets and, for a pattern with look-behinds, the longest
    end of the text so far that begins one of their literals (all a look-behind can still
    tell from it, as in Knuth-Morris-Pratt: the next such end is one of that end plus the
    next character)."""

    __slots__ = (
        "_positions",
        "_entry",
        "_reach",
        "_ends",
        "_states",
        "_numbers",
        "_rows",
        "_starts",
        "_lock",
        "_transitions",
    )

    def __init__(self, positions: _Positions, entry: int) -> None:
        self._positions = positions
        self._entry = (entry,)
        # How much of the text before a position its look-behinds may read.
        self._reach = max(map(len, positions.guards.values()), default=0)
        # The pieces their literals begin with, at the end of a text: the leftmost that
        # matches is the longest (`_tail`).
        pieces = {
            text[:cut] for text in positions.guards.values() for cut in range(1, len(text) + 1)
        }
        longest_first = sorted(pieces, key=len, reverse=True)
        self._ends = re.compile("(?:" + "|".join(map(re.escape, longest_first)) + ")\\Z")
        self._states: list[tuple[frozenset[int], frozenset[int], str]] = []
        self._numbers: dict[tuple[frozenset[int], frozenset[int], str], int] = {}
        self._rows: list[dict[str, int]] = []
        self._starts: dict[str, int] = {}  # the state at a hold's start, by what lies before
        # The automaton belongs to its pattern, which every parser of a template shares, in
        # any thread: a state is added, and then a transition to it, under the lock; `go_on`
        # and `start` read them without it (a dict look-up is atomic in CPython).
        self._lock = threading.Lock()
        self._transitions = 0

    @classmethod
    def of(cls, source: str) -> HeldMatch | None:
        """The automaton of a pattern the compiler analysed (read by `re`'s parser as the
        regex engine reads it), or None when it holds what the automaton does not follow:
        anchors, look-behinds but at a literal, look-aheads but at its end, back-references,
        atomic groups, possessive repeats, lazy repeats but `.*?`, flags."""
        try:
            tree = _sre_parse.parse(source, re.DOTALL)
            if tree.state.flags & ~_FLAGS:
                raise Unsupported("flags")
            positions = _Positions()
            entry = positions.sequence(tree.data, positions.end)
        except (Unsupported, re.error, RecursionError, OverflowError, ValueError):
            return None
        return cls(positions, entry)

    def start(self, before: str) -> int | None:
        """The state at the hold's start, `before` being the text before it."""
        tail = self._tail(before)
        known = self._starts.get(tail)
        if known is not None:
            return None if known == STOP else known
        with self._lock:
            first = _closure(self._positions, self._entry, tail)
            number = self._number(first, first, tail)
            if number != STOP or len(self._states) < MAX_STATES:
                self._starts[tail] = number
        return None if number == STOP else number

    def go_on(self, state: int, text: str) -> int | None:
        """The state once `text` arrived after `state`."""
        rows = self._rows
        for char in text:
            following = rows[state].get(char)
            if following is None:
                following = self._step(state, char)
            if following == STOP:
                return None
            state = following
        return state

    def _step(self, state: int, char: str) -> int:
        with self._lock:
            known = self._rows[state].get(char)
            if known is not None:  # (added by another thread meanwhile)
                return known
            if self._transitions >= MAX_TRANSITIONS:
                return STOP
            held, anywhere, tail = self._states[state]
            tail = self._tail(tail + char)
            held = self._consume(held, char, tail)
            anywhere = self._consume(anywhere, char, tail)
            anywhere |= _closure(self._positions, self._entry, tail)
            following = self._number(held, anywhere, tail)
            if following != STOP or len(self._states) < MAX_STATES:
                self._rows[state][char] = following  # (a STOP past the bound is not kept)
                self._transitions += 1
            return following

    def _number(self, held: frozenset[int], anywhere: frozenset[int], tail: str) -> int:
        end = self._positions.end
        if not held or end in anywhere:  # (`held` is part of `anywhere`)
            return STOP
        key = (held, anywhere, tail)
        number = self._numbers.get(key)
        if number is None:
            if len(self._states) >= MAX_STATES:
                return STOP
            number = len(self._states)
            self._states.append(key)
            self._rows.append({})
            self._numbers[key] = number
        return number

    def _tail(self, text: str) -> str:
        """The longest end of `text` that begins a look-behind's literal ("" if none)."""
        if not self._reach:
            return ""
        found = self._ends.search(text, max(0, len(text) - self._reach))
        return "" if found is None else found.group()

    def _consume(self, positions: frozenset[int], char: str, tail: str) -> frozenset[int]:
        tests, following = self._positions.tests, self._positions.next
        reached = [following[p][0] for p in positions if (test := tests[p]) and test(char)]
        return _closure(self._positions, reached, tail)


def _closure(positions: _Positions, start: Any, tail: str) -> frozenset[int]:
    """The positions of `start` and every one forks lead to from them, less the forks, at a
    place the text before which ends with `tail` (as far as look-behinds read)."""
    tests, following, guards = positions.tests, positions.next, positions.guards
    seen: set[int] = set()
    todo = list(start)
    while todo:
        position = todo.pop()
        if position in seen:
            continue
        seen.add(position)
        if tests[position] is None:
            guard = guards.get(position)
            if guard is None or tail.endswith(guard):
                todo.extend(following[position])
    return frozenset(p for p in seen if tests[p] is not None or p == positions.end)
