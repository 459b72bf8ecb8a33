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
import sys
from dataclasses import dataclass, field
from typing import Any

import regex

from . import errors

if sys.version_info >= (3, 11):
    import re._constants as _sre_constants
    import re._parser as _sre_parse
else:  # pragma: no cover - Python 3.10
    import sre_constants as _sre_constants
    import sre_parse as _sre_parse


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

    __slots__ = ("head", "run", "literal", "literal_in_run", "stop", "quiet")

    def __init__(self, head: str, run: str | None, literal: str = "") -> None:
        self.head = regex.compile(head, regex.DOTALL)
        self.run = None if run is None else regex.compile(run, regex.DOTALL)
        self.literal = literal
        # The one character the run stops at (a run `[^<]*`), which `in` finds faster than
        # the run's pattern tells a run (inkling's sink, 4-character chunks of prose), or None.
        stops = None if run is None else _negated_class(run)
        self.stop = stops if stops is not None and len(stops) == 1 else None
        # Whether the literal could arrive as text of the run (and then only a look for it,
        # across chunks, tells it came); otherwise its arrival breaks the run, which the
        # run test sees, and the waiting parser need not keep the text it last received.
        self.literal_in_run = bool(literal) and (
            self.run is None or self.run.fullmatch(literal) is not None
        )
        # The stop character when nothing else tells: a chunk without it leaves the wait
        # and its memory as they are (Scanner._scan_feed checks, before any call).
        self.quiet = None if self.literal_in_run else self.stop

    def begin(self, buf: str, start: int) -> str | None:
        if self.run is not None and self.run.fullmatch(buf, start) is None:
            return None
        if self.literal and buf.find(self.literal, start) != -1:
            return None
        return _last(buf, len(self.literal) - 1) if self.literal_in_run else ""

    def only_held(self, buf: str, hold: int, start: int) -> bool:
        """Once `begin` took HEAD's match from `hold` to `start`: whether no match but the
        held one can be complete in `buf` from `hold` on, as the text tells. So it is when
        HEAD matched nothing (a match beginning later lies in the run, where REST cannot
        begin), or when LITERAL, which every complete match holds, is nowhere in HEAD's
        match (nor after it: `begin`). Otherwise one beginning inside HEAD's match may be."""
        if start == hold:
            return True
        return (
            bool(self.literal) and buf.find(self.literal, hold, start + len(self.literal) - 1) == -1
        )

    def follow(self, text: str, recent: str) -> str | None:
        stop = self.stop
        if stop is not None:
            if stop in text:
                return None
        elif self.run is not None and self.run.fullmatch(text) is None:
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
    quiet = None  # (see HeldRun)
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

    def only_held(self, buf: str, hold: int, start: int) -> bool:
        """True (see HeldRun): HEAD consumes no `{`, so a match beginning inside HEAD's
        match has the held object as its own, which has not closed."""
        return True

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


class BrokenRun:
    r"""Where a scan of a state holds its text back, told without the scan, for a state
    whose patterns all wait on one kind of run: each is HEAD + [^B]* + LITERAL, with the
    same HEAD, empty or an optional literal, and the same run, every LITERAL and HEAD's
    literal starting with a character of B, the breaks (inkling's sink, whose opens are
    `(?:<\|message_model\|>)?[^<]*<\|content_text\|>` and two more alike).

    A match, complete or partial, that takes in a break takes it as the start of a LITERAL
    or of a piece of one at the buffer's end, or within HEAD's literal: from a break, the
    text is one of the `leads` (each LITERAL, and HEAD's literal from each of its breaks)
    or a piece of one. Where no break of the text starts a lead or a piece of one, no match
    takes a break in: none is complete (a LITERAL starts with one), and a partial one runs
    into the buffer's end, so it starts after the last break, where one does start (HEAD
    empty, then the run). A
    scan step from the start of the text then routes everything up to that place and
    holds the rest: `hold` tells where, in O(len(text)), instead of a search per pattern
    (4-character chunks of text dense in `<`: each chunk with a `<` cost a scan of 20 us).
    The scan needs no left context for this (the parser's CONTEXT is 0), and the held run
    then waits on the first pattern's run, as the scan would (`wait`).
    """

    __slots__ = (
        "stop",
        "breaks",
        "leads",
        "width",
        "pieces",
        "literal_pieces",
        "opener_pieces",
        "wait",
    )

    def __init__(self, breaks: str, literals: list[str], opener: str, wait: HeldRun) -> None:
        self.stop = breaks if len(breaks) == 1 else None
        self.breaks = re.compile(f"[{re.escape(breaks)}]")
        # What a break can start in a match: a LITERAL, or HEAD's literal from one of its
        # breaks on.
        interior = [opener[at:] for at, char in enumerate(opener) if char in breaks]
        leads = tuple(dict.fromkeys(literals + interior))
        self.leads = leads
        self.width = max(map(len, leads))
        # Every piece of a lead, the lead included (a short rest after a break is one).
        self.pieces = frozenset(lead[:end] for lead in leads for end in range(1, len(lead) + 1))
        self.literal_pieces = frozenset(
            literal[:end] for literal in literals for end in range(1, len(literal))
        )
        self.opener_pieces = frozenset(opener[:end] for end in range(1, len(opener)))
        self.wait = wait

    @classmethod
    def of(cls, patterns: tuple[Any, ...]) -> BrokenRun | None:
        """The shape of a state's `patterns` (RegexDelimiters), or None if they do not have it."""
        shapes = set()
        literals: list[str] = []
        for delim in patterns:
            if len(delim.runs) != 1 or delim.pattern.flags & (regex.IGNORECASE | regex.REVERSE):
                return None
            held = delim.runs[0]
            if held.run is None or not held.literal:
                return None
            whole = delim.pattern.pattern
            start = held.head.pattern + held.run.pattern
            if not whole.startswith(start) or _literal(whole[len(start) :]) != held.literal:
                return None
            shapes.add((held.head.pattern, held.run.pattern))
            literals.append(held.literal)
        if len(shapes) != 1:
            return None
        head, run = shapes.pop()
        breaks = _negated_class(run)
        opener = "" if not head else _optional_literal(head)
        if not breaks or opener is None or (opener and opener[0] not in breaks):
            return None
        if any(literal[0] not in breaks for literal in literals):
            return None
        return cls(breaks, literals, opener, patterns[0].runs[0])

    def hold(self, text: str) -> tuple[int, bool] | None:
        """Where a scan step from the start of `text` holds back its end, when no match is
        complete, and whether what it holds is a run (which waits); None when a break may
        start a complete match, or nothing would be held: only the scan can tell then.

        A break may start a piece of a lead that runs to the end of `text`, with no break
        after it: a partial match then starts after the break before it, through a run, when
        the piece is one of a LITERAL; on the break itself when it is one of HEAD's literal
        alone. (Where a break follows, it may start a complete match, which `regex`'s
        partial search returns before an earlier partial one.)"""
        stop = self.stop
        at = text.find(stop) if stop is not None else self._next_break(text, 0)
        if at == -1:
            return (0, True) if text else None
        leads, pieces, width = self.leads, self.pieces, self.width
        last = -1
        while at != -1:
            rest = text[at : at + width]
            if rest.startswith(leads):
                return None
            if rest in pieces:  # (so it runs to the end: a piece shorter than a lead)
                # A later break in the piece may start a complete match, which a partial
                # search returns before an earlier partial one (`<m\nx` with HEAD
                # `(?:<m\nx>)?` and LITERAL `\nx`): the scan tells.
                later = (
                    text.find(stop, at + 1) if stop is not None else self._next_break(text, at + 1)
                )
                if later != -1:
                    return None
                if rest in self.literal_pieces:
                    return last + 1, False
                return (at, False) if rest in self.opener_pieces else None
            last = at
            at = text.find(stop, at + 1) if stop is not None else self._next_break(text, at + 1)
        return None if last + 1 == len(text) else (last + 1, True)

    def _next_break(self, text: str, start: int) -> int:
        """Where the first break at or after `start` is in `text`, or -1."""
        found = self.breaks.search(text, start)
        return -1 if found is None else found.start()


def _parsed(pattern: str) -> Any:
    """`pattern` as the standard library's regex parser reads it, or None if it does not,
    or sets a flag that changes what its characters match (`(?i)`)."""
    try:
        parsed = _sre_parse.parse(pattern)
    except Exception:  # not a pattern the standard library reads: its shape is not known
        return None
    if parsed.state.flags & ~(re.UNICODE | re.DOTALL | re.MULTILINE | re.VERBOSE):
        return None
    return parsed.data


def _literal(pattern: str) -> str | None:
    """The one text `pattern` matches, when it is a literal (escapes allowed), else None."""
    items = _parsed(pattern)
    if items is None or any(kind is not _sre_constants.LITERAL for kind, _ in items):
        return None
    return "".join(chr(char) for _, char in items)


def _repeated(pattern: str, high: Any) -> Any:
    """The parsed PART of a pattern `(?:PART){0,high}` (`PART*` for MAXREPEAT), or None
    if it is not one."""
    items = _parsed(pattern)
    if items is None or len(items) != 1 or items[0][0] is not _sre_constants.MAX_REPEAT:
        return None
    low, top, body = items[0][1]
    return body if (low, top) == (0, high) else None


def _negated_class(run: str) -> str | None:
    """The characters of a run `[^...]*` of a negated set of characters, or None."""
    body = _repeated(run, _sre_constants.MAXREPEAT)
    if body is None or len(body) != 1:
        return None
    kind, value = body[0]
    if kind is _sre_constants.NOT_LITERAL:
        return chr(value)
    if kind is not _sre_constants.IN or not value or value[0][0] is not _sre_constants.NEGATE:
        return None
    if any(item is not _sre_constants.LITERAL for item, _ in value[1:]):
        return None
    return "".join(chr(char) for _, char in value[1:])


def _optional_literal(head: str) -> str | None:
    """The literal of a HEAD `(?:LITERAL)?`, or None if it is not one."""
    body = _repeated(head, 1)
    if not body or any(kind is not _sre_constants.LITERAL for kind, _ in body):
        return None
    return "".join(chr(char) for _, char in body)


def _last(text: str, count: int) -> str:
    """The last `count` characters of `text` (none for count <= 0)."""
    return text[len(text) - count :] if count > 0 else ""


# One way a held match can wait.
Wait = HeldRun | HeldObject
