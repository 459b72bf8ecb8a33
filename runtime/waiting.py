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

import regex


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
    `}` that brings it back to depth 0, however many nested objects closed before. The
    memory is (depth, where: _PLAIN, _STRING or _ESCAPE).
    """

    __slots__ = ("head",)
    run = None  # no run of one character class (see HeldRun)
    literal = "}"  # no complete match without it (CompiledParser.finalize)

    def __init__(self, head: str) -> None:
        self.head = regex.compile(head, regex.DOTALL)

    def begin(self, buf: str, start: int) -> tuple[int, int] | None:
        if not buf.startswith("{", start):
            return None
        return _nesting(buf, start, 0, _PLAIN)

    def follow(self, text: str, memory: tuple[int, int]) -> tuple[int, int] | None:
        depth, where = memory
        if where == _STRING and '"' not in text and "\\" not in text:
            return memory  # the usual chunk of a long string argument
        return _nesting(text, 0, depth, where)


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
