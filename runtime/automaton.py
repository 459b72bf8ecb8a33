"""The per-state delimiter automaton that generated modules declare as constants.

A parser state watches a fixed set of delimiters (see DESIGN.md, "What is watched in
each state"). For each one the scan loop asks a single question: where does its next
match start and end, and could more input still change it ("pending")? The matchers
below answer it with exactly the semantics of `regex`'s partial search, which the
reference interpreter uses: a complete match if there is one anywhere (the leftmost),
otherwise the leftmost partial match running into the end of the buffer.

Literal delimiters never call a regex engine: a complete match is `str.find`, and a
partial one is a suffix of the buffer found in the precomputed hold-back table (the set
of proper prefixes of the delimiter's literals).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

OPEN = 0
CLOSE = 1

# One scan result: (start, end, pending, match). `match` is the regex match object for
# regex delimiters (opens take their named captures from it), None for literals.
Hit = tuple[int, int, bool, Any]


class LiteralDelimiter:
    """A delimiter written as one literal or a list of literals (`open` / `close`)."""

    __slots__ = ("kind", "field", "target", "literals", "can_extend", "holdback", "longest")

    def __init__(
        self,
        kind: int,
        field: str,
        literals: tuple[str, ...],
        *,
        holdback: frozenset[str],
        can_extend: bool = False,
        target: State | None = None,
    ) -> None:
        self.kind = kind
        self.field = field
        self.target = target
        # Longest first, template order among equals: the order in which the reference's
        # alternation tries them, so a tie at one position goes to the longest literal.
        self.literals = literals
        # True when one literal is a proper prefix of another: a complete match that ends
        # at the buffer edge could then still grow, so it stays pending.
        self.can_extend = can_extend
        self.holdback = holdback
        self.longest = max(len(literal) for literal in literals)

    def search(self, buf: str, pos: int) -> Hit | None:
        start = -1
        end = 0
        for literal in self.literals:
            index = buf.find(literal, pos)
            if index != -1 and (start == -1 or index < start):
                start = index
                end = index + len(literal)
        size = len(buf)
        if start != -1:
            return start, end, self.can_extend and end == size, None
        holdback = self.holdback
        for width in range(min(self.longest - 1, size - pos), 0, -1):
            if buf[size - width :] in holdback:
                return size - width, size, True, None
        # regex would report an empty partial match at the very end; it never holds text.
        return None

    def search_final(self, buf: str, pos: int) -> Hit | None:
        """At end of stream nothing is partial: only complete matches count."""
        start = -1
        end = 0
        for literal in self.literals:
            index = buf.find(literal, pos)
            if index != -1 and (start == -1 or index < start):
                start = index
                end = index + len(literal)
        return None if start == -1 else (start, end, False, None)


class RegexDelimiter:
    """A delimiter written as a regex (`open_pattern` / `close_pattern`).

    A complete match that ends at the buffer edge is pending: more text could extend it.
    """

    __slots__ = ("kind", "field", "target", "pattern")

    def __init__(self, kind: int, field: str, pattern: Any, *, target: State | None = None) -> None:
        self.kind = kind
        self.field = field
        self.target = target
        self.pattern = pattern

    def search(self, buf: str, pos: int) -> Hit | None:
        match = self.pattern.search(buf, pos, partial=True)
        if match is None:
            return None
        start, end = match.span()
        return start, end, match.partial or end == len(buf), match

    def search_final(self, buf: str, pos: int) -> Hit | None:
        match = self.pattern.search(buf, pos)
        if match is None:
            return None
        start, end = match.span()
        return start, end, False, match


Delimiter = LiteralDelimiter | RegexDelimiter


class State:
    """One parser state: the region text is routed to, and what it watches.

    `field` is None for the null sink (templates without an implicit field). `feed` is the
    generated fast path for this state, or None when every chunk must be scanned. `close`
    is the generated method that parses, stores and reports the region's value.
    `delims` are ordered by (kind, field name): the reference's tie-break order.
    """

    __slots__ = ("field", "dirty", "implicit", "delims", "feed", "close")

    def __init__(
        self,
        field: str | None,
        *,
        delims: tuple[Delimiter, ...],
        feed: Callable[..., Any] | None,
        close: Callable[..., Any] | None,
        dirty: bool = False,
        implicit: bool = False,
    ) -> None:
        self.field = field
        self.dirty = dirty
        self.implicit = implicit
        self.delims = delims
        self.feed = feed
        self.close = close

    def __repr__(self) -> str:
        return f"<State {self.field!r}>"
