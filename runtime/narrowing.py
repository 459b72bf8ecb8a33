"""Where a search of a pattern HEAD + C* + LITERAL over a long buffer can start.

A pattern such as `(?:<\\|message_model\\|>)?[^<]*<\\|content_text\\|>` can start almost
anywhere: each start position the `regex` engine tries runs `[^<]*` to the next `<`
before it fails, so a search costs O(n x the distance between two `<`), and one over a
text with few `<` is quadratic (seconds on 80K characters, and the reference pays the
same). Its shape says much more about where a match can be:

- every complete match ends with LITERAL, at some occurrence q of it; its C-run ends at q
  and, when LITERAL's first character is not in C, lies within the longest run of C
  ending at q, which starts at m(q); HEAD takes at most W characters (its greatest
  width) before that run. So a match starts at or after m(q) - W. Occurrences after the
  first one, q1, have runs that start after q1 (the run cannot cross LITERAL's first
  character at q1), so no match starts before m(q1) - W; and with no occurrence ahead
  there is no complete match at all;
- a partial match runs into the buffer's end: HEAD, a run of C, then a proper prefix of
  LITERAL (maybe empty) at the buffer's end; or part of HEAD alone, in the last W
  characters. So it starts at or after m(k) - W for the start k of such a piece.

A search from that bound finds the same leftmost match as one from the scan position:
nothing can start in between, and `regex` still sees the text before the bound for any
look-behind. The first attempt from the bound runs along C's run once, and HEAD being
at most W characters wide, the attempts that fail before it are bounded too.
The shape comes from the compiler's analysis (`HeldRun`: HEAD, the run, LITERAL, the
whole pattern); W is read from HEAD with the standard library's regex parser, which
read the pattern when the compiler found its runs.
"""

from __future__ import annotations

import sys
from typing import Any

import regex

from . import automaton  # find_literal (automaton imports this module: used at call time)

if sys.version_info >= (3, 11):
    import re._parser as _sre_parse
else:  # pragma: no cover - Python 3.10
    import sre_parse as _sre_parse

# A HEAD wider than this gives no useful bound: such patterns are searched as they are.
MAX_HEAD = 4096


def head_width(head: str) -> int | None:
    """The most characters a match of `head` takes, or None if unbounded or unknown."""
    try:
        width = _sre_parse.parse(head).getwidth()[1]
    except Exception:  # anything the stdlib parser does not read: no bound is known
        return None
    return width if width <= MAX_HEAD else None


class RunToLiteral:
    """A pattern's shape HEAD + C* + LITERAL (see the module docstring), to narrow its
    searches: `run_back` matches the run of C that ends where a match ends, `width` is
    HEAD's greatest width."""

    __slots__ = ("literal", "width", "run_back")

    def __init__(self, literal: str, width: int, run: Any) -> None:
        self.literal = literal
        self.width = width
        # The run of C read backwards from a position: one C-level pass over the run.
        self.run_back = regex.compile(run.pattern, run.flags | regex.REVERSE)

    @classmethod
    def of(cls, pattern: Any, runs: tuple[Any, ...]) -> RunToLiteral | None:
        """The shape of `pattern` from its held runs (runtime.waiting.HeldRun), or None
        when none of them is HEAD + C* + LITERAL with LITERAL not starting with a C."""
        if pattern.flags & (regex.IGNORECASE | regex.REVERSE):
            return None
        for held in runs:
            literal = held.literal
            if held.run is None or not literal or held.run.fullmatch(literal[0]) is not None:
                continue
            if not pattern.pattern.startswith(held.head.pattern):
                continue  # not this pattern's own run
            width = head_width(held.head.pattern)
            if width is not None:
                return cls(literal, width, held.run)
        return None

    def _run_start(self, buf: str, pos: int, end: int) -> int:
        """Start of the longest run of C that ends at `end`, not before `pos`."""
        match = self.run_back.match(buf, pos, end)
        return end if match is None else match.start()

    def complete_from(self, buf: str, pos: int) -> int:
        """Where a search for a complete match from `pos` can start, or -1 if there is
        no complete match at or after `pos`."""
        found = automaton.find_literal(buf, self.literal, pos, len(buf))
        if found == -1:
            return -1
        return max(pos, self._run_start(buf, pos, found) - self.width)

    def partial_from(self, buf: str, pos: int) -> int:
        """Where a search for a partial match from `pos` can start, when no complete match
        starts at or after `pos`."""
        size = len(buf)
        earliest = self._run_start(buf, pos, size)
        literal = self.literal
        lead = literal[0]
        index = buf.find(lead, max(pos, size - len(literal) + 1))
        while index != -1:  # each piece of LITERAL at the end, and the run before it
            if literal.startswith(buf[index:]):
                earliest = min(earliest, self._run_start(buf, pos, index))
            index = buf.find(lead, index + 1)
        return max(pos, earliest - self.width)
