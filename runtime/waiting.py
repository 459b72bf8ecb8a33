"""Held matches that only a known text can change, and how a parser waits on them.

A scan step holds back text from a pattern's pending match (docs/design.md, "One scan
step"). Searching the held text again for every chunk costs O(held) a chunk, so a long
pending match (a tool call's body) would cost O(n^2) over the stream. When the compiler
can tell what text could change such a match, the parser waits instead: a chunk is
checked in O(len(chunk)) and kept aside until one could (RegexDelimiter.waits, and
Scanner._wait / _wake).

A wait has the pattern's `head`, which must match where the text is held, and two
methods over a memory the parser keeps while it waits:
- `begin(buf, start)`: the memory once the head matched up to `start`, or None when the
  match is not known to wait;
- `follow(text, memory)`: the memory once `text` arrived, or None when `text` could change
  the match (the parser then scans again).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import regex

from . import errors


class HeldRun:
    """A pattern's `head` up to a repeat of one character class, a pattern for a `run` of
    that class (None: any character), and the `literal` after the repeat ("" if none is
    awaited). With a run and a literal, the pattern is exactly HEAD + repeat + LITERAL
    (runtime.narrowing relies on it).

    Once HEAD has matched and the rest of the buffer is a run of that class with no
    LITERAL in it, the match is partial (or complete at the buffer's end) and stays so
    until LITERAL, or a character outside the class, arrives. The memory is the last
    characters received, which an arriving LITERAL may begin in.
    """

    __slots__ = ("head", "run", "literal", "literal_in_run")

    def __init__(self, head: str, run: str | None, literal: str = "") -> None:
        self.head = regex.compile(head, regex.DOTALL)
        self.run = None if run is None else regex.compile(run, regex.DOTALL)
        self.literal = literal
        # Whether the literal could arrive as text of the run (and then only a look for it,
        # across chunks, tells it came); otherwise its arrival breaks the run, which the
        # run test sees, and the waiting parser need not keep the text it last received.
        self.literal_in_run = bool(literal) and (
            self.run is None or self.run.fullmatch(literal) is not None
        )

    def begin(self, buf: str, start: int) -> str | None:
        if self.run is not None and self.run.fullmatch(buf, start) is None:
            return None
        if self.literal and buf.find(self.literal, start) != -1:
            return None
        return _last(buf, len(self.literal) - 1) if self.literal_in_run else ""

    def follow(self, text: str, recent: str) -> str | None:
        if self.run is not None and self.run.fullmatch(text) is None:
            return None
        if not self.literal_in_run:
            return recent
        seen = recent + text
        if self.literal in seen:
            return None
        return _last(seen, len(self.literal) - 1)


# Where a JSON object's text is: between strings, in one, right after a backslash in one.
_PLAIN, _STRING, _ESCAPE = 0, 1, 2
_PLAIN_MARK = re.compile(r'[{}"]')
_STRING_MARK = re.compile(r'["\\]')


class HeldObject:
    """A pattern's `head` followed by a JSON object: a group defined as
    `\\{(?:[^{}"]++|"(?:[^"\\\\]++|\\\\.)*+"|(?&obj))*+\\}` and called once (llama3_json;
    compiler.regex_profile._object_runs).

    Once HEAD has matched, that object is pending until the `}` that closes it: every
    other character continues it (between strings as plain text, a string's quote or a
    nested object's brace; in a string, as anything, `.` matching any character under
    DOTALL). So the parser follows the object's nesting, in O(len(text)), and wakes at the
    `}` that brings it back to depth 0, however many nested objects closed before.

    It also wakes at any `}` once a second match may have begun in the held text: HEAD
    matching later, before a `{` (after a nested `}` in llama3_json's, `}{"name": ...`).
    That match's object, if it closes first, is one the reference's partial search prefers
    to the held, partial one. The memory (a PendingObject) keeps the held text, searched
    for such a start (`later`) at a `}`, from where the last search left off, and only if
    a `{` and the literal every start has after it (`required`) came since. The compiler
    makes sure HEAD's look-arounds cannot see past the held object's `{` or a later
    object's `}` (_looks_past_object): the held text is all that search needs, and whether
    a start is there has settled by the time that start's object can close. On a stream
    where one is (found by the deep profile), each `}` after it wakes the parser: a scan
    of the held text per `}`, until the held object or the later one closes.
    """

    __slots__ = ("head", "later", "required")
    run = None  # no run of one character class (see HeldRun)
    literal = "}"  # no complete match without it (CompiledParser.finalize)

    def __init__(self, head: str, required: str = "") -> None:
        self.head = regex.compile(head, regex.DOTALL)
        # Where a second match may begin: HEAD before a `{`; it has `required` at or after
        # its start (compiler.regex_profile._required_literal), and a `{` in any case.
        self.later = regex.compile(f"(?:{head})\\{{", regex.DOTALL)
        self.required = required or "{"

    def begin(self, buf: str, start: int) -> PendingObject | None:
        if not buf.startswith("{", start):
            return None
        nesting = _nesting(buf, start, 0, _PLAIN)
        if nesting is None:
            return None
        memory = PendingObject(*nesting, buf[start:])
        return memory if self._search_later(memory) else None

    def follow(self, text: str, memory: PendingObject) -> PendingObject | None:
        if memory.where != _STRING or '"' in text or "\\" in text:  # (else: a string goes on)
            nesting = _nesting(text, 0, memory.depth, memory.where)
            if nesting is None:
                return None
            memory.depth, memory.where = nesting
        held = memory.text
        memory.text = ""  # (its one reference dropped first: CPython grows it in place)
        held += text
        memory.text = held
        if "}" not in text:
            memory.fresh = memory.fresh or "{" in text
            return memory
        # A `}`, which may close a second match's object: search for one's start if a `{`
        # came since the last search (or one pending needs more text), and the literal
        # every start has after it did too.
        if not memory.later and (memory.fresh or "{" in text):
            required = self.required
            if held.find(required, memory.required_from) == -1:
                memory.required_from = max(memory.searched, len(held) - len(required) + 1)
                memory.fresh = True
            elif not self._search_later(memory):
                return None
        return None if memory.later else memory

    def _search_later(self, memory: PendingObject) -> bool:
        """Search the held text for where a second match may begin, from where the last
        search left off: True when done, False when out of time (then the parser scans)."""
        text = memory.text
        try:
            found = self.later.search(
                text,
                memory.searched,
                partial=True,
                timeout=errors.regex_timeout(len(text) - memory.searched),
            )
        except TimeoutError:
            return False
        # A partial match past a `{` may complete with no other `{`: HEAD's look-ahead.
        memory.fresh = found is not None and found.partial and text.find("{", found.start()) != -1
        if found is None:
            memory.searched = len(text)
        elif found.partial:
            memory.searched = found.start()  # may complete: searched again from there
        else:
            memory.later = True
            memory.searched = len(text)
        memory.required_from = memory.searched
        return True


@dataclass(slots=True)
class PendingObject:
    """What a HeldObject wait keeps: the object's depth and where its text is (_PLAIN,
    _STRING, _ESCAPE); the held text from the object's `{` on; whether a second match may
    have begun in it (`later`); where the search for one goes on (from 1: not the held
    object's own `{`), and whether it must (`fresh`: a `{` came since, or a partial match
    past one is pending); and where the look for HeldObject.required goes on (it does not
    occur from `searched` up to there)."""

    depth: int
    where: int
    text: str
    later: bool = False
    searched: int = field(default=1, compare=False)
    fresh: bool = field(default=False, compare=False)
    required_from: int = field(default=1, compare=False)


def _nesting(text: str, pos: int, depth: int, where: int) -> tuple[int, int] | None:
    """The object's (depth, where) after `text[pos:]`, from (depth, where) before it; None
    if its closing `}` is in it."""
    size = len(text)
    while pos < size:
        if where == _ESCAPE:
            pos += 1
            where = _STRING
            continue
        mark = (_STRING_MARK if where == _STRING else _PLAIN_MARK).search(text, pos)
        if mark is None:
            break
        pos = mark.end()
        char = text[pos - 1]
        if where == _STRING:
            where = _PLAIN if char == '"' else _ESCAPE
        elif char == '"':
            where = _STRING
        elif char == "{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return None
    return depth, where


def _last(text: str, count: int) -> str:
    """The last `count` characters of `text` (none for count <= 0)."""
    return text[len(text) - count :] if count > 0 else ""


# One way a held match can wait.
Wait = HeldRun | HeldObject
