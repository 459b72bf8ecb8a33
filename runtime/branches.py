"""Plain searches for delimiter patterns that the `regex` engine scans slowly.

`regex` skips ahead quickly when every match holds one required literal, but a pattern
that starts with `\\s*`, or alternates branches, leaves it trying a match at every
position: some 50 ns a character, 4 ms over 80K characters of reasoning, and the
reference interpreter pays the same. `Branches` finds the same match from fast searches:

- the pattern is split at its top-level `|` into branches, each searched on its own; the
  leftmost start wins, the earlier branch at an equal start (as the alternation tries them);
  a pattern `(?:A|B)S` is split as `AS|BS` (xlam's open: an alternation of openers, then a
  look-ahead for the call), and `(?:A)?S` as `AS|S` (`\\s*(?:<tool_call>\\s*)?<function=`),
  which try the same things in the same order;
- a branch written `\\s*REST` (or `\\n?REST`, `" *REST"`: one class, `*` or `?`), where
  REST can neither match empty nor begin with a character of that class, matches where
  REST matches, extended left over the run of those characters before it: the repeat is
  greedy and cannot give characters back to REST, so the leftmost match of the branch
  starts at the run before REST's leftmost match;
- a branch (or REST) that starts with a literal, or with a look-ahead for one, can only
  match where the literal occurs: `str.find` (a memchr) goes there, and one match attempt
  is made at each place; one non-capturing group around the whole pattern is looked into.

Only the match's span and named groups are used by the parser (`groupdict`), and both are
the same. Any pattern outside what this reads safely (flags in the pattern, look-behind or
anchors near a split, back-references, verbose or ASCII patterns, ...) gets None from
`split`, and is searched as it is. tests/test_branches.py checks the equivalence.
"""

from __future__ import annotations

from typing import Any

import regex

from . import automaton  # find_literal (automaton imports this module: used at call time)

# Leading classes read (each followed by `*` or `?`), and the characters each matches.
_LEADS: tuple[tuple[str, Any], ...] = (
    ("\\s", lambda: _whitespace_chars()),
    ("\\n", frozenset("\n")),
    ("\\t", frozenset("\t")),
    (" ", frozenset(" ")),
)
# Inside REST, these could make the text before it matter, or are not read here.
_UNSAFE = ("(?<", "\\b", "\\B", "\\A", "\\G", "\\Z", "\\z", "(?|", "(?P=", "(?(", "(?&", "(?R")
# Group openers that do not change flags ((?: (?P< (?= (?! (?> and named (?<name>).
_GROUP_KINDS = (":", "P<", "=", "!", ">")

_META = frozenset(".^$*+?{}[]|()")
_QUANTIFIERS = ("?", "*", "+", "{")
# Places of a branch's literal tried one match attempt each, before one regex search.
CANDIDATES = 8
# A pattern split into more parts than this is searched as it is.
MAX_PIECES = 16

_whitespace: frozenset[str] | None = None


def _whitespace_chars() -> frozenset[str]:
    """The characters `\\s` matches (Unicode), computed once, on first use."""
    global _whitespace
    if _whitespace is None:
        _whitespace = frozenset(regex.findall(r"\s", "".join(map(chr, range(0x10000)))))
    return _whitespace


def _top_level_branches(source: str) -> list[str] | None:
    """`source` split at its top-level `|`; None if it holds what is not read here."""
    branches = []
    depth = 0
    start = 0
    index = 0
    size = len(source)
    while index < size:
        char = source[index]
        if char == "\\":
            if index + 1 < size and (source[index + 1].isdigit() or source[index + 1] in "gG"):
                return None  # a back-reference, or \G (where the search started)
            index += 2
            continue
        if char == "[":
            index = _class_end(source, index)
            if index < 0:
                return None
            continue
        if char == "(":
            if source.startswith("(?", index):
                kind = source[index + 2 : index + 4]
                named = kind[:1] == "<" and kind[1:2] not in ("=", "!")
                if not (named or kind.startswith(_GROUP_KINDS)):
                    return None  # inline flags, conditionals, comments, ...
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            branches.append(source[start:index])
            start = index + 1
        index += 1
    if depth != 0:
        return None
    branches.append(source[start:])
    return branches


def _class_end(source: str, index: int) -> int:
    """Index just after the character class opening at `index`, or -1 (nested sets)."""
    index += 1
    if source.startswith("^", index):
        index += 1
    if source.startswith("]", index):
        index += 1
    while index < len(source):
        char = source[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            return -1  # a nested set (regex's V1 syntax) or a POSIX class
        if char == "]":
            return index + 1
        index += 1
    return -1


def _without_classes(source: str) -> str:
    """`source` with its character classes removed (for the _UNSAFE test)."""
    out = []
    index = 0
    while index < len(source):
        char = source[index]
        if char == "\\":
            out.append(source[index : index + 2])
            index += 2
        elif char == "[":
            end = _class_end(source, index)
            index = len(source) if end < 0 else end
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _literal_prefix(source: str) -> str:
    """Text every match of `source` (one branch, no flags) starts with, or starts before
    (a leading look-ahead's text: the match sits where it occurs); "" if none is known."""
    if source.startswith("(?="):
        end = _group_close(source, 0)
        body = source[3:end] if end > 0 else ""
        branches = _top_level_branches(body)
        if branches is None or len(branches) != 1:
            return ""
        source = body
    out = []
    index = 0
    while index < len(source):
        char = source[index]
        step = 1
        if char == "\\":
            char = source[index + 1 : index + 2]
            if not char or char.isalnum() or char == "_":
                break  # a class (\s, \d, ...), an escape or a reference
            step = 2
        elif char in _META:
            break
        if source[index + step : index + step + 1] in _QUANTIFIERS:
            break  # this character is repeated or optional
        out.append(char)
        index += step
    return "".join(out)


def _group_close(source: str, index: int) -> int:
    """Index of the `)` closing the group that opens at `index`, or -1."""
    depth = 0
    while index < len(source):
        char = source[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            index = _class_end(source, index)
            if index < 0:
                return -1
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index
        index += 1
    return -1


class Branches:
    """A split pattern: per top-level branch, in order, the characters of its lead and the
    most of them it takes (0: no lead), its rest compiled, that rest made to attempt single
    matches cheaply (see RegexDelimiter.attempts), and the literal every match of the rest
    starts with ("" if none is known)."""

    __slots__ = ("parts", "literal_led", "lead_led", "keys")

    def __init__(self, parts: list[tuple[frozenset[str], int, Any, Any, str]]) -> None:
        self.parts = parts
        # The memo key of each part's match (`search`).
        self.keys = tuple(object() for _ in parts)
        # Whether some part has a lead: the whole pattern's search then tries a match at
        # every position of a run of the lead's characters.
        self.lead_led = any(part[1] for part in parts)
        # Whether every rest starts with a literal (or is anchored at the start of the text,
        # `^` without MULTILINE): then `partial` can run, each search being quick.
        self.literal_led = all(
            part[4] or (part[2].pattern.startswith("^") and not part[2].flags & regex.MULTILINE)
            for part in parts
        )

    def partial(self, buf: str, pos: int, timeout: float) -> tuple[int, int, Any] | None:
        """For a pattern with no complete match at or after `pos`, and literal-led rests:
        (start, end, match) of its leftmost partial match, or None.

        A partial match of the pattern is one of a branch, and one of `LEAD REST` is one
        of REST (at the end of the lead's run; REST cannot start inside it), extended left
        as for a complete match. A partial search of a literal-led REST is one quick pass
        (`regex` finds its literal's places), unlike one of the whole pattern.
        """
        best: tuple[int, int, Any] | None = None
        for chars, most, rest, _attempt, _literal in self.parts:
            match = rest.search(buf, pos, partial=True, timeout=timeout, concurrent=True)
            if match is None:
                continue
            start = match.start()
            if most:
                stop = max(pos, start - most)
                while start > stop and buf[start - 1] in chars:
                    start -= 1
            if best is None or start < best[0]:
                best = (start, match.end(), match)
        return best

    def search(
        self, buf: str, pos: int, timeout: float, memo: dict[Any, Any] | None = None
    ) -> tuple[int, int, Any] | None:
        """(start, end, match with the pattern's named groups) of the leftmost match at or
        after `pos`, as the whole pattern's search finds it; None if there is none.

        With `memo` (a scan's, over one buffer), each part's leftmost match of REST is kept
        with where its search started, and serves a later search from up to where it
        starts: each part then searches each stretch of the buffer once. Otherwise a part
        whose literal occurs nowhere ahead, or only where REST does not match, searches on
        to the end of the buffer from every region crossing (step3's call open, whose parts
        start with literals that occur inside every call: parse() over 8x the calls took
        13x the time)."""
        best: tuple[int, int, Any] | None = None
        size = len(buf)
        for key, (chars, most, rest, attempt, literal) in zip(self.keys, self.parts, strict=True):
            known = None if memo is None else memo.get(key)
            if (
                known is not None
                and known[0] <= pos
                and (known[1] is None or known[1].start() >= pos)
            ):
                match = known[1]
            else:
                match = self._rest_match(buf, pos, size, timeout, rest, attempt, literal)
                if memo is not None:
                    memo[key] = (pos, match)
            if match is None:
                continue
            start = match.start()
            if most:  # the lead takes what of its characters lie before REST's match
                stop = max(pos, start - most)
                while start > stop and buf[start - 1] in chars:
                    start -= 1
            if best is None or start < best[0]:
                best = (start, match.end(), match)
        return best

    @staticmethod
    def _rest_match(
        buf: str, pos: int, size: int, timeout: float, rest: Any, attempt: Any, literal: str
    ) -> Any:
        """A part's leftmost match of REST at or after `pos`, or None."""
        match = None
        at = pos
        if literal:  # memchr to each place the literal occurs, one attempt there
            for _ in range(CANDIDATES):
                at = automaton.find_literal(buf, literal, at, size)
                if at == -1:
                    return None
                match = attempt.match(buf, at, timeout=timeout, concurrent=True)
                if match is not None:
                    return match
                at += 1
        return rest.search(buf, at, timeout=timeout, concurrent=True)


def _lead(branch: str) -> tuple[frozenset[str], int, str] | None:
    """A branch's leading optional repeat of one character class, as (the characters, the
    most it takes, the rest of the branch); None if it has none."""
    for token, chars in _LEADS:
        if branch.startswith(token):
            quantifier = branch[len(token) : len(token) + 1]
            if quantifier in ("*", "?") and branch[len(token) + 1 : len(token) + 2] not in (
                "?",
                "+",
                "*",
                "{",
            ):
                most = 1 if quantifier == "?" else 1 << 62
                return chars() if callable(chars) else chars, most, branch[len(token) + 1 :]
    return None


def split(pattern: Any) -> Branches | None:
    """A faster way to search `pattern` (see the module docstring), or None."""
    if pattern.flags & (regex.VERBOSE | regex.ASCII | regex.VERSION1):
        return None
    branches = _top_level_branches(_unwrapped(pattern.pattern))
    if branches is None:
        return None
    parts: list[tuple[frozenset[str], int, Any, Any, str]] = []
    for branch in branches:
        lead = _lead(branch)
        chars, most, whole = lead if lead is not None else (frozenset(), 0, branch)
        for rest in _alternatives(whole):
            part = _part(pattern, chars, most, rest, lead is not None)
            if part is None:
                return None
            parts.append(part)
    if len(parts) == 1 and not parts[0][1] and not parts[0][4]:
        return None  # nothing to gain: the pattern itself
    if len(parts) > MAX_PIECES:
        return None
    return Branches(parts)


def _part(
    pattern: Any, chars: frozenset[str], most: int, rest: str, led: bool
) -> tuple[frozenset[str], int, Any, Any, str] | None:
    """One part of a split pattern (see Branches), or None if REST is not read safely."""
    try:
        compiled = regex.compile(rest, pattern.flags)
    except regex.error:
        return None
    if compiled.flags != pattern.flags:
        return None
    if led and not _starts_without(chars, rest, compiled):
        return None
    literal = "" if pattern.flags & regex.IGNORECASE else _literal_prefix(rest)
    attempt = regex.compile(f"(?:{rest})|(?!)", pattern.flags) if literal else compiled
    return chars, most, compiled, attempt, literal


def _unwrapped(source: str) -> str:
    """`source` without one non-capturing group around it all."""
    if source.startswith("(?:") and _group_close(source, 0) == len(source) - 1:
        return source[3:-1]
    return source


def _alternatives(source: str) -> list[str]:
    """`source` as patterns tried one after the other: `(?:A|B)S` as `AS`, `BS`, and
    `(?:A|B)?S` as `AS`, `BS`, `S` (S expanded in turn), which is the order in which the
    alternation, or the greedy optional group, tries them, backtracking included. Each
    is compiled on its own, so a named group in S is in each copy. [source] for any other
    shape (a group under another quantifier, a top-level `|` in S), or past MAX_PIECES."""
    if not source.startswith("(?:"):
        return [source]
    close = _group_close(source, 0)
    if close < 0:
        return [source]
    inner = _top_level_branches(source[3:close])
    suffix = source[close + 1 :]
    if inner is None:
        return [source]
    if suffix.startswith("?") and suffix[1:2] not in ("?", "+"):
        options = [*inner, ""]  # greedy: each branch first, then nothing
        suffix = suffix[1:]
    elif suffix[:1] in _QUANTIFIERS or len(inner) < 2:
        return [source]
    else:
        options = inner
    if _top_level_branches(suffix) != [suffix]:
        return [source]
    rests = _alternatives(suffix)
    out = [option + rest for option in options for rest in rests]
    return out if len(out) <= MAX_PIECES else [source]


def _starts_without(chars: frozenset[str], source: str, compiled: Any) -> bool:
    """Whether REST can neither match empty nor begin with one of `chars`, judged from the
    text alone (nothing before it may matter: no look-behind or anchor)."""
    bare = _without_classes(source)
    if any(unsafe in bare for unsafe in _UNSAFE) or "^" in bare or "$" in bare:
        return False
    if compiled.match("") is not None:
        return False
    return all(compiled.match(char, partial=True) is None for char in chars)
