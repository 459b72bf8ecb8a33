"""The searches of the per-state delimiter automaton that generated modules declare.

A parser state watches a fixed set of delimiters (docs/design.md, "What is watched in each
state"). One scan step asks, of each: where is its next match, and could more input
still change it ("pending")? The reference answers with `regex`'s partial search: a
complete match if there is one anywhere (the leftmost; the longest literal of a list at
that position), otherwise the leftmost partial match running into the end of the buffer.
The searches here give the same answers; the decision between them (the best complete
match, earliest, then longest, then opens before closes and by field name, is committed
if it starts before every pending match) is the generated scan step of each state
(`State.scan`), with that order written into its code.

Literal delimiters are searched together, with one alternation over all of a state's
literals (stdlib `re`: one C-level pass, however many literals). Only the leftmost hit
matters: every delimiter with a literal there has its own leftmost match there. A partial
match can only be a buffer suffix shorter than the longest literal (`literal_reach`); it is
looked for (`piece_at_end`) only when the decision depends on that suffix.

Within one scan loop the buffer does not change, so a search result that still lies
ahead of the scan position is reused (`memo`): one-shot parsing of a long text then
searches each stretch of it once, not once per region.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from types import MethodType
from typing import Any

import regex

from . import errors
from .branches import split
from .held_match import HeldMatch
from .narrowing import RunToLiteral
from .waiting import BrokenRun, Wait

OPEN = 0
CLOSE = 1

# A chosen match: (start, end, delimiter, regex match object or None for a literal).
Hit = tuple[int, int, Any, Any]
# What one scan step decides: the match to commit (or None), and where held-back text starts.
Step = tuple["Hit | None", int]
# Search results one scan loop reuses while they lie ahead (State.next_literal, next_hit).
Memo = dict[Any, Any]
# A generated scan step: (state, buffer, position, end of stream, memo) -> Step.
ScanStep = Callable[["State", str, int, bool, Memo], Step]
_UNSEEN: Any = object()
# A regex search that was cut short: nothing starts early enough to matter.
IRRELEVANT: Any = object()
# A search over at most SHORT_SPANS[k] characters with a cheap pattern of k unbounded
# one-character repeats (RegexDelimiter short_span) runs without the time bound: it takes
# O(n^(k + 1)) steps at worst, and a partial one with a required literal O(n^2)
# (RegexDelimiter.attempts), so these are the n whose n^max(k + 1, 2) is about 2^20.
SHORT_SPANS = (1024, 1024, 101, 32)
# A partial search over at most this many characters is one search, not split in parts.
SHORT_SPAN = 32
# Seconds of CPU time State.holds gives a search that its pattern's short span does not
# cover (Scanner._still_held, on at most WAIT_AFTER characters): past them, a scan decides.
HOLD_SECONDS = 0.002
# How many later texts of a pattern led by a run `pending_at` tries a match attempt at
# (RegexDelimiter._led_pending_at), each under HOLD_SECONDS; past them, it searches.
LATER_TEXTS = 4
# How many held texts a pattern remembers the answer of `State.holds` for (then it forgets
# them all and starts again).
HELD_TEXTS = 256
# A text this short is searched once for a start text or a piece of one at its end
# (State.starts_or_piece, a chunk's usual test); a longer one first for a start text, then
# for a piece near its end: the combined regex tries its pieces at every position (155 us
# on 13K characters, against 3.5 us for the two searches).
ONE_SEARCH_SPAN = 16
# What `\s` matches in a template's pattern (the `regex` module's Unicode White_Space), as a
# class for `re`, whose own `\s` also matches \x1c-\x1f (as str.isspace does), and whose
# searches of a short text cost half what `regex`'s do (State.starts_or_held; on 4 to 10
# characters, 0.5 against 1.1 us). tests/test_automaton.py checks it code point by code point.
SPACE_CLASS = (
    "[\\t\\n\\x0b\\x0c\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
)
# A state builds one regex over its start texts' proper prefixes when those prefixes total
# at most this many characters (State.piece_at_end): L(L-1)/2 for a literal of L, so a
# long literal is checked with startswith instead and still costs O(L) to declare.
MAX_PIECES = 4096
# Candidate positions (memchr on a first character) are checked one by one (find_literal,
# first_match): a check costs about what a multi-character search costs over some SPARSE
# characters. Where DENSE checked in a row lie closer than that on average, a window of
# SPARSE characters is searched instead, each further window GROWTH times as wide (a
# window costs a call, ~0.5 us, besides its search) while they stay dense, back to SPARSE
# once they are sparse again (a search over prose costs several times a memchr).
SPARSE = 512
DENSE = 3
GROWTH = 4
# A rest of the buffer this short is searched for a state's literals with one regex search
# (State.next_literal): there the memchr passes save nothing, and their calls cost more (a
# chunk that completes a tool call's open or close, in 4-character chunks, searches a
# rest of 4 to 16 characters).
SHORT_REST = 64
# A window is searched for each of this many texts or fewer with `str.find`, for more with
# one regex (first_match).
FEW_TEXTS = 2
# Start positions tried one match attempt at a time, when only those can matter, before
# one partial search over the rest of the buffer is cheaper (RegexDelimiter.partial).
ATTEMPTS = 32
# A pattern led by a run is asked whether it can start at or before the step's best match
# so far, when that is this close, by a look at each place (RegexDelimiter._may_start_by).
NEAR = 8
# A partial search of a pattern led by a run tries at most this many places one by one
# (RegexDelimiter._partial_led); with more, it searches.
LED_ATTEMPTS = 64
# Buffers longer than this are searched through runtime.branches when the pattern splits.
SPLIT_AFTER = 256
# ... and shorter ones, for a partial search of a pattern with a lead (`\s*`), when they
# are longer than this many characters per part (RegexDelimiter._partial_search).
LEAD_SPAN = 64


def remember(memory: dict[Any, Any], key: Any, value: Any) -> None:
    """Keep `value` under `key` in one of a parser class's memories of held texts (State.holds,
    Scanner._held_window): once it holds HELD_TEXTS entries it forgets them all first, so
    texts that never repeat cost a bounded memory."""
    if len(memory) >= HELD_TEXTS:
        memory.clear()
    memory[key] = value


def find_literal(buf: str, literal: str, start: int, end: int) -> int:
    """`buf.find(literal, start, end)`, faster when literal[0] is rare in the text.

    str.find on one character is a memchr, several times faster than a multi-character
    search on ordinary prose, where a delimiter's first character seldom occurs: each place
    of it is checked. Where DENSE places in a row lie less than SPARSE characters apart on
    average (XML, code, a tool call's body, `f` in English), one search covers the next
    SPARSE characters, and each later window GROWTH times as many while they stay dense,
    so that a text dense in that character all through costs O(log n) searches, O(n) in
    all. (Checking 16 places before one search of the rest cost 2.3 us to find
    `</tool_call>` past the tags of a call's XML, where one search takes 0.2 us; three
    places and a window, 1.6 us.)
    """
    find = buf.find
    if end - start <= SPARSE:  # no longer than one check costs
        return find(literal, start, end)
    lead = literal[0]
    width = SPARSE
    checked, since = 0, start  # places checked one by one since `since`
    index = find(lead, start, end)
    while index != -1:
        if buf.startswith(literal, index, end):
            return index
        checked += 1
        if checked < DENSE:
            index = find(lead, index + 1, end)
            continue
        if index - since >= checked * SPARSE:  # sparse: go on checking places
            width, checked, since = SPARSE, 0, index
            index = find(lead, index + 1, end)
            continue
        stop = min(end, index + 1 + width)
        found = find(literal, index + 1, stop)
        if found != -1 or stop == end:
            return found
        # On from the first place whose match the window could not hold whole.
        width *= GROWTH
        index = find(lead, max(index + 1, stop - len(literal) + 1), end)
        checked, since = 0, index
    return -1


def piece_at_end(text: str, literal: str, start: int = 0) -> int:
    """Start of the longest suffix of text[start:] that is a proper, non-empty prefix of
    `literal` (the literal may be arriving), or -1.

    Candidates are the places of the literal's first character among the text's last
    len(literal) - 1 characters, each checked once: no table of the literal's prefixes
    is needed, so a literal of L characters costs O(L) to declare.
    """
    size = len(text)
    lead = literal[0]
    index = text.find(lead, max(start, size - len(literal) + 1))
    while index != -1:
        if literal.startswith(text[index:]):
            return index
        index = text.find(lead, index + 1)
    return -1


def first_match(buf: str, lead: str, pattern: Any, pos: int, texts: tuple[str, ...]) -> int:
    """Start of the leftmost match of `pattern` at or after `pos`, or -1, where `pattern`
    matches exactly `texts`, which all start with the character `lead`: a memchr for it,
    then a match there, as find_literal checks places; where they lie dense, one search
    over a window (one `str.find` per text when there are at most FEW_TEXTS: on `<`-dense
    text a regex of two texts took 102 us over 80K characters, their two searches 75 us)."""
    find = buf.find
    starts = pattern.match
    size = len(buf)
    width = SPARSE
    checked, since = 0, pos
    index = find(lead, pos)
    while index != -1:
        if starts(buf, index):
            return index
        checked += 1
        if checked < DENSE:
            index = find(lead, index + 1)
            continue
        if index - since >= checked * SPARSE:
            width, checked, since = SPARSE, 0, index
            index = find(lead, index + 1)
            continue
        after = index + 1
        stop = min(size, after + width)
        found = -1
        if len(texts) <= FEW_TEXTS:
            for text in texts:
                at = find(text, after, stop)
                if at != -1 and (found == -1 or at < found):
                    found = at
        else:
            match = pattern.search(buf, after, stop)
            found = -1 if match is None else match.start()
        # From `edge` on a match may run past the window: one found there may not be the
        # leftmost (a longer text may start before it), so the places from there are checked.
        edge = stop - max(map(len, texts)) + 1
        if stop == size or (found != -1 and found < edge):
            return found
        width *= GROWTH
        index = find(lead, max(after, edge))
        checked, since = 0, index
    return -1


def earliest_piece(text: str, literals: tuple[str, ...], start: int = 0) -> int:
    """Start of the longest suffix of text[start:] that is a proper, non-empty prefix of one
    of `literals`, or -1 (`piece_at_end` of each; a plain loop, as scans call it often)."""
    found = -1
    for literal in literals:
        index = piece_at_end(text, literal, start)
        if index != -1 and (found == -1 or index < found):
            found = index
    return found


def trie_pattern(texts: Iterable[str], *, pieces: bool = False) -> str:
    """A regex source that matches exactly `texts` (with `pieces`, exactly their proper,
    non-empty prefixes), written as a trie: `<t(?:hink>|ool>)`, not `<think>|<tool>`.

    `re` tries an alternation's branches one by one at every place; the trie's branches
    part on their first character, so a place where no text starts fails at once. Over a
    4-character chunk, granite's thinking state's start texts and their pieces took 0.6 to
    1.2 us as a plain alternation (`may_start`), 0.2 to 0.26 us as a trie."""
    root: dict[str, Any] = {}
    for text in texts:
        node = root
        for char in text:
            node = node.setdefault(char, {})
        node[_WHOLE] = {}
    return _trie_branches(root, pieces)


# Marks a trie node where a whole text ends (no character is the empty string).
_WHOLE = ""


def _trie_branches(node: dict[str, Any], pieces: bool) -> str:
    branches = []
    for char in sorted(node):
        child = node[char]
        if char == _WHOLE or (pieces and not any(child)):
            continue  # the end of a text: a piece is a proper prefix
        run = char
        # Whole texts: a stretch where no text ends or parts is one literal run (a piece
        # may end anywhere, so those nest; MAX_PIECES bounds their length).
        while not pieces and len(child) == 1 and _WHOLE not in child:
            ((char, child),) = child.items()
            run += char
        rest = _trie_branches(child, pieces)
        # Where a match may stop: at every proper prefix, or where a text ends.
        ends = any(child) if pieces else _WHOLE in child
        if not rest:
            branches.append(re.escape(run))
        else:
            branches.append(f"{re.escape(run)}(?:{rest}){'?' if ends else ''}")
    return "|".join(branches)


def _no_scan(state: State, buf: str, pos: int, eos: bool, memo: Memo) -> Step:
    """The scan step of a State declared without one (only tests build such states)."""
    raise NotImplementedError(f"{state!r} has no generated scan step")


def _attempt_at(attempts: Any, buf: str, start: int) -> Callable[[float], Any]:
    """A partial match attempt at `start`, given its time limit (errors.search_bounded)."""
    return lambda wall: attempts.match(buf, start, partial=True, timeout=wall, concurrent=True)


def _without_required_literal(pattern: Any) -> Any:
    """`pattern` or`(?:pattern)|(?!)`: see RegexDelimiter.attempts. The pattern itself when
    wrapping could change anything (a verbose pattern's trailing comment would swallow
    the added text; any change of flags or groups)."""
    if pattern.flags & regex.VERBOSE:
        return pattern
    try:
        wrapped = regex.compile(f"(?:{pattern.pattern})|(?!)", pattern.flags)
    except regex.error:
        return pattern
    same = (wrapped.flags, wrapped.groups, wrapped.groupindex) == (
        pattern.flags,
        pattern.groups,
        pattern.groupindex,
    )
    return wrapped if same else pattern


class LiteralDelimiter:
    """A delimiter written as one literal or a list of literals (`open` / `close`); a list
    comes ordered longest first, as the reference tries them."""

    __slots__ = ("kind", "field", "rank", "target", "literals", "can_extend", "longest")

    def __init__(
        self,
        kind: int,
        field: str,
        literals: str | tuple[str, ...],
        *,
        rank: int,
        can_extend: bool = False,
        target: State | None = None,
    ) -> None:
        self.kind = kind
        self.field = field
        self.rank = rank  # position in the state's tie-break order
        self.target = target
        # Longest first, template order among equals: the order in which the reference's
        # alternation tries them, so the longest literal wins at a shared position. One
        # literal may come as a str, so that a module's constant reads as the template does.
        self.literals = (literals,) if isinstance(literals, str) else literals
        # True when one literal is a proper prefix of another: a complete match that ends
        # at the buffer edge could then still grow, so it stays pending.
        self.can_extend = can_extend
        self.longest = max(len(literal) for literal in self.literals)

    def match_at(self, buf: str, index: int) -> int:
        """End of the longest of these literals found at `index`, or -1."""
        for literal in self.literals:
            if buf.startswith(literal, index):
                return index + len(literal)
        return -1

    def occurs_from(self, buf: str, index: int) -> bool:
        return any(buf.find(literal, index) != -1 for literal in self.literals)

    def partial(self, buf: str, pos: int) -> int:
        """Start of the longest buffer suffix (from `pos` on) that begins one of these
        literals without completing it, or -1."""
        return earliest_piece(buf, self.literals, pos)


class RegexDelimiter:
    """A delimiter written as a regex (`open_pattern` / `close_pattern`).

    A complete match that ends at the buffer edge is pending: more text could extend it.
    `prefix` is the text every match starts with, or a tuple of texts every match starts
    with one of (one per branch), when the compiler found them: a match can then only
    start where `str.find` finds one (or, partially, in the buffer's last few characters,
    on a piece of one), so the regex engine runs only from there.
    `memo` is False for patterns the compiler could not analyse: their results are never
    reused, in case they depend on where a search starts. `repeats`, for patterns the
    compiler has shown to be quick to search on a short text (compiler.regex_profile,
    RegexProfile.cheap), is how many unbounded repeats they have: a search over at most
    SHORT_SPANS[repeats] characters, the usual one of a stream, skips the time bound,
    whose set-up (~2 us) costs more than the search itself.
    """

    __slots__ = (
        "kind",
        "field",
        "rank",
        "target",
        "pattern",
        "prefixes",
        "memo",
        "short_span",
        "linear",
        "run_char",
        "led_leads",
        "runs",
        "led_prefixes",
        "prefix_keys",
        "run_back",
        "start_only",
        "guarded",
        "looks_behind",
        "_attempts",
        "_branches",
        "_narrowing",
        "_held_match",
        "held_texts",
    )

    def __init__(
        self,
        kind: int,
        field: str,
        pattern: Any,
        *,
        rank: int,
        prefix: str | tuple[str, ...] = "",
        memo: bool = True,
        repeats: int | None = None,
        runs: tuple[Wait, ...] = (),
        led_by: str | None = None,
        start_only: bool = False,
        guarded: tuple[str, ...] = (),
        target: State | None = None,
    ) -> None:
        self.kind = kind
        self.field = field
        self.rank = rank
        self.target = target
        self.pattern = pattern
        prefixes = (prefix,) if isinstance(prefix, str) and prefix else tuple(prefix)
        # A pattern led by a run (`\s*<think>`, compiler RegexProfile.led_by): its matches
        # are a run of `led_by` and then one of its prefixes, so they do not start where a
        # prefix does (`prefixes` is then empty), and a partial one is a run and a piece of
        # a prefix (maybe empty) at the buffer's end (`run_and_piece`).
        self.prefixes = () if led_by else prefixes
        # The memo key of where each prefix occurs next (`_next_prefix`).
        self.prefix_keys = {prefix: object() for prefix in self.prefixes}
        self.led_prefixes = prefixes if led_by else ()
        # The run of `led_by` that ends at a position, read backwards from it.
        self.run_back = regex.compile(led_by, regex.DOTALL | regex.REVERSE) if led_by else None
        # Where a match or a partial one of a pattern led by a run can start: on a character
        # of the run (`run_char`, `led_by` less its `*`) or on the first of one of its texts.
        self.run_char = regex.compile(led_by[:-1], regex.DOTALL) if led_by else None
        self.led_leads = frozenset(text[0] for text in self.led_prefixes)
        # A branch can only match at the stream's first position (`^`, compiler
        # RegexProfile.start_only): `prefix` and `led_by` describe the matches elsewhere, and a
        # search from position 0 of the buffer (which is then the stream's start: past it, the
        # parser keeps at least one character of left context) searches the pattern as it is.
        self.start_only = start_only
        # Of `led_prefixes`, those only branches behind a look-behind start with (compiler
        # RegexProfile.guarded_prefixes): the look-behind may refuse a piece of one.
        self.guarded = guarded
        # Whether the pattern may hold a look-behind (a named group `(?<name>` reads as one
        # too), which can accept a place inside a run and refuse the run's start
        # (`_led_pending_at`).
        self.looks_behind = "(?<" in pattern.pattern
        self.memo = memo
        # Searches over at most this many characters run without the time bound.
        self.short_span = -1 if repeats is None else SHORT_SPANS[repeats]
        # A cheap pattern with at most one unbounded repeat: a match attempt at one place
        # takes O(n) steps at worst, so it needs no time bound however long the buffer.
        self.linear = repeats is not None and repeats <= 1
        self.runs = runs  # how a held match can wait (see `waits`)
        self._attempts: Any = None  # the pattern for partial searches (see `attempts`)
        # How to search a long buffer faster than the pattern itself (runtime.branches).
        self._branches: Any = _UNSEEN
        # Where a search of a long buffer can start (runtime.narrowing), found on first use.
        self._narrowing: Any = _UNSEEN
        # How a held match is followed a character at a time (runtime.held_match).
        self._held_match: Any = _UNSEEN
        # `State.holds` of held texts with nothing before them, by text (see there).
        self.held_texts: dict[str, bool] = {}

    def held_match(self) -> HeldMatch | None:
        """The automaton that follows this pattern's held match (runtime.held_match), or
        None; for analysed patterns only (`re`'s parser reads them as the regex engine does)."""
        held = self._held_match
        if held is _UNSEEN:
            held = HeldMatch.of(self.pattern.pattern) if self.memo else None
            self._held_match = held
        return held

    def narrowing(self) -> RunToLiteral | None:
        """The pattern's shape HEAD + C* + LITERAL, which tells where a search of a long
        buffer can start (runtime.narrowing), or None; for analysed patterns only."""
        narrowing = self._narrowing
        if narrowing is _UNSEEN:
            narrowing = self._narrowing = (
                RunToLiteral.of(self.pattern, self.runs) if self.memo else None
            )
        return narrowing

    @property
    def attempts(self) -> Any:
        """The pattern for partial searches: the same pattern, made to try its match at each
        start position without first scanning the rest of the buffer.

        `regex` checks that a required literal occurs ahead before it tries a match; when
        the literal is absent, a plain search stops at once, but a partial one (where a
        missing literal may yet arrive) rescans the rest of the buffer at every start
        position: quadratic, 1.3 s on 160K characters for a `\\s*<tool>`-led pattern. An
        alternative that never matches, `(?!)`, takes the required literal away and changes
        no match, partial or complete (tests/test_automaton.py checks this); compiled on
        first use, so that importing a parser compiles nothing more.
        """
        attempts = self._attempts
        if attempts is None:
            attempts = self._attempts = _without_required_literal(self.pattern)
        return attempts

    def search(self, buf: str, pos: int, eos: bool, limit: int, memo: Memo | None = None) -> Any:
        """(start, end, pending, match) of the next match, partial ones included unless at
        end of stream; None if there is none; IRRELEVANT if none can start at or before
        `limit` (a result that must not be reused for later positions). `memo`, the scan's
        (`next_hit`), keeps what a split pattern's parts found (Branches.search) and where its
        prefixes occur (`_next_prefix`)."""
        prefixes = self.prefixes
        if not pos and self.start_only:
            if eos and len(buf) > SPLIT_AFTER:
                return self._search_from_origin(buf, limit)
            prefixes = ()  # the stream's start, where a branch the prefixes leave out may match
        elif limit - pos < NEAR and limit < len(buf) and self.run_char is not None:
            if not self._may_start_by(buf, pos, limit):
                return IRRELEVANT
        if prefixes:
            if pos == len(buf):  # nothing left: no match, complete or partial, starts here
                return None if limit >= pos else IRRELEVANT
            # Complete matches start where a prefix occurs; partial ones may also start in
            # the last len(prefix) - 1 characters, on a piece of one.
            index = -1
            for prefix in prefixes:
                bound = limit if index == -1 else index  # only an earlier start matters
                if memo is not None and bound - pos > SPLIT_AFTER and len(prefixes) > 1:
                    found = self._next_prefix(buf, prefix, pos, bound + len(prefix), memo)
                else:
                    found = find_literal(buf, prefix, pos, bound + len(prefix))
                if found != -1:
                    index = found
            if index != -1 and self.linear:
                # The leftmost match, if it starts where the first prefix does: one match
                # attempt there, without the time bound a search of a long buffer needs
                # (`</tool_call>\s*`: 0.4 us, against 2 us for a bounded search from there
                # over 1.5K characters, 4 us over 75K).
                match = self.pattern.match(buf, index)
                if match is not None:
                    start, end = match.span()
                    return start, end, not eos and end == len(buf), match
            if index == -1 and not eos:
                index = self._piece_at_end(buf, pos)
                if index > limit:
                    index = -1
            if index == -1:
                return None if limit >= len(buf) else IRRELEVANT
            pos = index  # nothing can match before it
        # A partial search returns the same match as a plain one whenever a complete match
        # exists (tests/test_automaton.py checks this); the plain search is several times
        # cheaper, so the partial one only runs to find where a partial match starts.
        # concurrent=True: `regex` searches the str in place without holding the GIL; with
        # a timeout and without it, a search whose look-behind is unbounded costs
        # O(len(buf)) wherever it starts (measured: 215 us instead of 2 us at 46 KB).
        if len(buf) - pos <= self.short_span:
            # A short search with a cheap pattern: no time bound (RegexProfile.cheap), and
            # no look-behind, so it need not be concurrent (which costs ~0.3 us a call).
            match = self.pattern.search(buf, pos)
            if match is not None:
                start, end = match.span()
                return start, end, not eos and end == len(buf), match
            if eos:
                return None
            # A pattern led by a run would try every place of every run from `pos` on (6 us
            # over 224 characters of a call's XML): a partial match starts at the earliest in
            # the run `_partial_start` finds (a start-only branch aside, at the stream's start).
            start = self._partial_start(buf, pos) if self._led_over(buf, pos) else pos
            match = self.pattern.search(buf, start, partial=True)
            if match is None:
                return None
            start, end = match.span()
            return start, end, True, match
        pattern = self.pattern
        timeout = errors.regex_timeout(len(buf) - pos)
        start_at = pos  # where the search starts: no match starts between pos and it
        if not prefixes and self.memo and len(buf) - pos > SPLIT_AFTER:
            narrowing = self.narrowing()
            if narrowing is not None:
                start_at = narrowing.complete_from(buf, pos)
                if start_at == -1:  # its literal does not occur: no complete match
                    return None if eos else self.partial(buf, pos, limit)
            branches = self._branches
            if branches is _UNSEEN:
                branches = self._branches = split(pattern)
            if branches is not None:
                try:
                    found = branches.search(buf, start_at, timeout, memo)
                except TimeoutError:
                    found = errors.search_bounded(
                        lambda wall: branches.search(buf, start_at, wall, memo),
                        self._where(),
                        len(buf) - pos,
                    )
                if found is not None:
                    start, end, match = found
                    return start, end, not eos and end == len(buf), match
                return None if eos else self.partial(buf, pos, limit)
        elif self._led_from(pos) and not any(
            buf.find(text, pos) != -1 for text in self.led_prefixes
        ):
            # A match of a pattern led by a run holds one of its texts whole: none occurs,
            # so none is complete (and the time-bound search is not needed to tell).
            return None if eos else self._partial_search(buf, pos)
        if len(buf) - pos > SPLIT_AFTER and self._led_from(pos):
            # No split or narrowing took this pattern led by a run (look-behind branches:
            # deepseek_v4's open, searched from every place of 80K characters in 0.9 ms).
            start_at = max(start_at, self._complete_from(buf, pos))
        elif not eos and len(buf) - pos <= SHORT_SPAN:
            # A short rest (from a prefix, near the end): the partial search alone, which
            # returns the complete match if there is one, instead of the complete search
            # and then the partial one, each a bounded call (llama3_json's open, a chunk
            # with a `{` of code that its look-behind refuses: 13.6 -> 11 us).
            return self._partial_search(buf, pos, complete=True)
        try:
            match = pattern.search(buf, start_at, timeout=timeout, concurrent=True)
        except TimeoutError:
            match = errors.search_bounded(
                lambda wall: pattern.search(buf, start_at, timeout=wall, concurrent=True),
                self._where(),
                len(buf) - pos,
            )
        if match is not None:
            start, end = match.span()
            return start, end, not eos and end == len(buf), match
        if eos:
            return None
        if self.memo and not prefixes:
            return self.partial(buf, pos, limit)
        return self._partial_search(buf, pos)

    def _next_prefix(self, buf: str, prefix: str, pos: int, end: int, memo: Memo) -> int:
        """`find_literal(buf, prefix, pos, end)`, for one of several prefixes searched over a
        long stretch, with what an earlier search of the scan (`memo`) found kept: where
        the prefix occurs next from where that search started, or that it occurs nowhere
        before where it ended. Otherwise a prefix that occurs nowhere ahead is searched for
        to the end of the buffer again from every region crossing, though the others stop
        the search early (hy_v3's close, `</tool_call:` beside `</tool_call>`: parse() of
        its parallel calls took 10 times as long for 4 times the text)."""
        key = self.prefix_keys[prefix]
        known = memo.get(key)
        if known is not None and known[0] <= pos:
            _, found, searched = known
            if found >= pos:
                return found if found + len(prefix) <= end else -1
            if found == -1 and end <= searched:
                return -1
        found = find_literal(buf, prefix, pos, end)
        memo[key] = (pos, found, end)
        return found

    def _search_from_origin(self, buf: str, limit: int) -> Any:
        """`search` from the stream's first position at its end (one-shot parsing): a match
        there, the only place a start-only branch can match, or else the leftmost one past
        it, where matches start as `prefix` or `led_by` say. A search from the first
        position would try the start-only branch's alternatives at every place (llama3_json,
        whose other branches have a look-behind: 2.5 ms over 80K characters of prose)."""
        pattern = self.pattern
        try:
            match = pattern.match(buf, 0, timeout=errors.regex_timeout(len(buf)), concurrent=True)
        except TimeoutError:
            match = errors.search_bounded(
                lambda wall: pattern.match(buf, 0, timeout=wall, concurrent=True),
                self._where(),
                len(buf),
            )
        if match is not None:
            start, end = match.span()
            return start, end, False, match
        return self.search(buf, 1, True, limit)

    def next_hit(
        self, buf: str, pos: int, eos: bool, limit: int, memo: Memo
    ) -> tuple[int, int, bool, Any] | None:
        """(start, end, pending, match) of this pattern's next match, partial ones included
        unless at end of stream, or None: none is left, or none can start at or before
        `limit` (where the step's best match so far, or its held-back text, starts).

        Within one scan loop the buffer does not change, so a result that still lies ahead
        of `pos` is reused from `memo`, as is "no complete match, and no partial one up
        to here" (an int).
        """
        hit = memo.get(self, _UNSEEN) if self.memo else _UNSEEN
        if hit.__class__ is int:
            if hit >= limit:
                return None
            hit = memo[self] = self.partial(buf, max(pos, hit + 1), limit)
        elif hit is _UNSEEN or (hit is not None and hit[0] < pos):
            hit = self.search(buf, pos, eos, limit, memo)
            if hit is IRRELEVANT:
                return None
            memo[self] = hit
        if hit is None or hit.__class__ is int:
            return None
        return hit

    def partial(self, buf: str, pos: int, limit: int) -> Any:
        """For a pattern with no complete match at or after `pos`: (start, end, True, match)
        of its leftmost partial match, or None if there is none; or, when none starts at or
        before `limit`, possibly just `limit` (an int: no partial match starts up to there,
        and none is complete, which the caller may remember for later positions).

        A few start positions of a long buffer are tried one by one, each a single match
        attempt; a longer stretch, or a short rest of the buffer, takes one partial search,
        linear in the rest of the buffer.
        """
        if len(buf) - pos > SPLIT_AFTER:
            narrowing = self.narrowing()
            if narrowing is not None:  # no partial match starts before `start`
                start = narrowing.partial_from(buf, pos)
                return limit if start > limit else self._partial_narrowed(buf, start, narrowing)
        if limit - pos >= ATTEMPTS or len(buf) - pos <= SPLIT_AFTER:
            return self._partial_search(buf, pos)
        size = len(buf)
        for start in range(pos, min(limit, size) + 1):
            if start == size:
                match = self._partial_at_end(buf)
                return limit if match is None else (size, size, True, match)
            match = self._attempt(buf, start)
            if match is not None:
                return start, match.end(), True, match
        return limit

    def _partial_search(
        self, buf: str, pos: int, narrowed: bool = False, complete: bool = False
    ) -> Any:
        """(start, end, True, match) of the leftmost partial match at or after `pos`, or None.
        With `complete`, a complete match comes first (as `search` returns it, pending if
        it ends at the buffer's end): for `search` over a rest of at most SHORT_SPAN
        characters, which has not looked for one (that rest takes the last search below)."""
        rest = len(buf) - pos
        # (_partial_led is for a rest with no complete match: not one that has not looked.)
        if self.run_back is not None and rest > SPLIT_AFTER and not complete:
            found = self._partial_led(buf, pos)
            if found is not _UNSEEN:
                return found
        timeout = errors.regex_timeout(rest)
        if self.memo and rest > SHORT_SPAN:
            # A pattern with prefixes is searched from the first place a match can start;
            # split, it may still search faster than from there on (runtime.branches).
            long = rest > SPLIT_AFTER
            narrowing = None if narrowed or self.prefixes or not long else self.narrowing()
            if narrowing is not None:
                return self._partial_narrowed(buf, narrowing.partial_from(buf, pos), narrowing)
            branches = self._branches
            if branches is _UNSEEN:
                branches = self._branches = split(self.pattern)
            # On a short rest, only a pattern with a lead (`\s*<think>`) gains: its own
            # partial search tries every position of a whitespace run and rescans the
            # rest for the literal from each, while each part costs one quick search.
            if (
                branches is not None
                and branches.literal_led
                and (long or (branches.lead_led and rest > LEAD_SPAN * len(branches.parts)))
            ):
                try:
                    found = branches.partial(buf, pos, timeout)
                except TimeoutError:
                    found = errors.search_bounded(
                        lambda wall: branches.partial(buf, pos, wall),
                        self._where(),
                        len(buf) - pos,
                    )
                return None if found is None else (found[0], found[1], True, found[2])
        # The pattern itself over a short rest (its quadratic cost is then small, and its
        # cost per character lower); `attempts` over a long one.
        attempts = self.attempts if len(buf) - pos > SPLIT_AFTER else self.pattern
        if self._led_over(buf, pos):
            pos = self._partial_start(buf, pos)
        try:
            match = attempts.search(buf, pos, partial=True, timeout=timeout, concurrent=True)
        except TimeoutError:
            match = errors.search_bounded(
                lambda wall: attempts.search(buf, pos, partial=True, timeout=wall, concurrent=True),
                self._where(),
                len(buf) - pos,
            )
        if match is None:
            match = self._partial_at_end(buf)
            if match is None:
                return None
        start, end = match.span()
        if complete and not match.partial:
            return start, end, end == len(buf), match
        return start, end, True, match

    def _partial_narrowed(self, buf: str, start: int, narrowing: RunToLiteral) -> Any:
        """_partial_search from `start`, where runtime.narrowing has shown that no partial
        match starts earlier (and none is complete).

        One match attempt at a time: a search with `attempts` would look for a complete
        match at every later position before it settled for the partial one (quadratic
        over the run of C), and one with the pattern would rescan for its literal. When
        HEAD can match empty, an attempt within HEAD's width of `start` succeeds (at the
        start of C's run); each attempt before it stops within HEAD's width. Past that
        many attempts, the rest is searched as any other pattern is.
        """
        size = len(buf)
        stop = min(size, start + narrowing.width + ATTEMPTS)
        for at in range(start, stop + 1):
            if at == size:
                match = self._partial_at_end(buf)
                return None if match is None else (size, size, True, match)
            match = self._attempt(buf, at)
            if match is not None:
                return at, match.end(), True, match
        return self._partial_search(buf, stop + 1, narrowed=True)

    def _attempt(self, buf: str, start: int) -> Any:
        """The partial match of the pattern at `start`, or None: one attempt of `attempts`,
        confirmed by the pattern itself (one more pass along the run: with a lazy repeat,
        `regex` reports partial matches of `attempts` that are none), under the time bound."""
        size = len(buf)
        attempts = self.attempts
        if self._cheap_attempt(size - start):
            match = attempts.match(buf, start, partial=True)
            if match is None or attempts is self.pattern:
                return match
            return self.pattern.match(buf, start, partial=True)
        timeout = errors.regex_timeout(size - start)
        try:
            match = attempts.match(buf, start, partial=True, timeout=timeout, concurrent=True)
        except TimeoutError:
            match = errors.search_bounded(
                _attempt_at(attempts, buf, start), self._where(), size - start
            )
        if match is None or attempts is self.pattern:
            return match
        try:
            return self.pattern.match(buf, start, partial=True, timeout=timeout)
        except TimeoutError:
            return errors.search_bounded(
                _attempt_at(self.pattern, buf, start), self._where(), size - start
            )

    def _cheap_attempt(self, span: int) -> bool:
        """Whether one match attempt at one place, over `span` characters from there, runs
        without the time bound: one of a linear pattern, or one over a short span (a search
        there would: an attempt takes a factor of the span fewer steps). The bound's set-up
        costs ~1.7 us a call in `regex`, several times what the attempt does (inkling's
        message headers, held over 4-character chunks, tried three waits a chunk: 9 us)."""
        return self.linear or span <= self.short_span

    def _partial_led(self, buf: str, pos: int) -> Any:
        """_partial_search over a long buffer for a pattern led by a run, with no complete
        match at or after `pos`; _UNSEEN when more than LED_ATTEMPTS places would be tried.

        A partial match is a run of `led_by` and then one of `led_prefixes`, whole or cut
        off by the buffer's end (a piece), or a run that reaches the end: no text starts
        with a run character, so it starts in the run before an occurrence of a text, or
        in the run at the end, before the piece there. A look-behind in front of the run
        may refuse some of its places, so each place of those runs is tried, left to
        right, with one match attempt: a partial search with the pattern itself would try
        every place of the buffer (50 ms on 80K characters of deepseek_v4's prose).
        """
        assert self.run_back is not None
        size = len(buf)
        texts = self.led_prefixes
        piece = earliest_piece(buf, texts, pos)
        tail = self.run_back.match(buf, pos, size if piece == -1 else piece)
        assert tail is not None  # `R*` matches, maybe empty
        places: list[range] = []
        index = pos
        while True:
            found = -1
            for text in texts:
                at = find_literal(buf, text, index, size)
                if at != -1 and (found == -1 or at < found):
                    found = at
            if found == -1 or found >= tail.start():
                break
            run = self.run_back.match(buf, pos, found)
            places.append(range(found if run is None else run.start(), found + 1))
            if sum(map(len, places)) > LED_ATTEMPTS:
                return _UNSEEN
            index = found + 1
        places.append(range(tail.start(), size + 1))
        if sum(map(len, places)) > LED_ATTEMPTS:
            return _UNSEEN
        for place in places:
            for start in place:
                if start == size:
                    match = self._partial_at_end(buf)
                    return None if match is None else (size, size, True, match)
                match = self._attempt(buf, start)
                if match is not None:
                    return start, match.end(), True, match
        return None

    def _partial_at_end(self, buf: str) -> Any:
        """The original pattern's attempt at the end of the buffer: the one place where it
        and `attempts` differ, `regex` reporting an empty partial match there for some
        patterns that start with a look-behind or `\\b`, which `attempts` does not."""
        return self.pattern.match(buf, len(buf), partial=True)

    def waits(
        self, buf: str, hold: int, runs: bool = True, pending: bool = False
    ) -> tuple[Wait, Any] | None:
        """How this delimiter's match at `hold` can only change when some text arrives:
        the wait (runtime.waiting) and its memory, or None (with `runs` False, only a
        wait with no run: a look-ahead's literal, a JSON object). `pending`: a scan step's
        search found this delimiter's next match pending at `hold`.

        For a pattern HEAD + (a repeat of one character class) + REST: once HEAD has
        matched at `hold` and the rest of the buffer is a run of that class, the match is
        partial (or complete at the buffer's end) and stays so until REST's literal, or a
        character outside the class, arrives (HeldRun). Until then it holds everything
        from `hold` back, so no scan can change anything.
        """
        cheap = self._cheap_attempt(len(buf) - hold)
        for run in self.runs:
            if not runs and run.run is not None:
                continue
            if cheap:  # (HEAD leads the pattern: an attempt of it costs no more)
                match = run.head.match(buf, hold)
            else:
                try:
                    timeout = errors.regex_timeout(len(buf) - hold)
                    match = run.head.match(buf, hold, timeout=timeout)
                except TimeoutError:
                    continue  # not known to wait: the scan searches, under the bound
            if match is None:
                continue
            memory = run.begin(buf, match.end())
            if memory is None:
                continue
            if not (pending or run.only_held(buf, hold, match.end()) or self.pending_at(buf, hold)):
                # A match that starts inside HEAD's match may be complete, which `regex`'s
                # partial search returns before the partial one held here (`m<x` at 1 of
                # `<m<x>`, for HEAD `(?:<m<x>)?`, run `[^<]*` and LITERAL `<x`): then
                # this delimiter holds nothing at `hold`, and once another's hold ends the
                # scan commits that match. So the scan's own search decides.
                continue
            return run, memory
        return None

    def pending_at(self, buf: str, pos: int) -> bool:
        """Whether this delimiter's next match from `pos`, as a scan step finds it, is
        pending there; False when that search runs past a short bound of its own
        (HOLD_SECONDS: the scan then decides, under the parser's)."""
        if self._led_from(pos) and len(buf) - pos <= SPLIT_AFTER:
            held = self._led_pending_at(buf, pos)
            if held is not None:
                return held
        try:
            with errors.bounded_by(HOLD_SECONDS):
                hit = self.search(buf, pos, False, len(buf))
        except errors.RegexTimeout:
            return False
        return hit is not None and hit[0] == pos and hit[2]

    def _led_pending_at(self, buf: str, pos: int) -> bool | None:
        """`pending_at` for a pattern led by a run (its matches are a run and then one of its
        texts), over a rest of at most SPLIT_AFTER characters, by match attempts: one partial
        attempt at `pos`, which must reach the end, and, when that match is partial, a look
        for a complete match after `pos`, which the search would return first.

        Without a look-behind, a complete match from a place in a run makes one from the
        run's start, so one attempt at the run before each later text tells (none for a run
        back to `pos`, where the first attempt found none); with one, which may accept a
        place in a run and refuse its start, a search from where one can start
        (`_complete_from`). A held call open in 4-character chunks, asked again at each chunk
        (deepseek_v3's, 84 characters: 19.9 us by the scan's search; the two attempts, timed
        apart, 5.6 and 4.0 us).
        False when a call runs past HOLD_SECONDS; None, for the search to decide, past
        LATER_TEXTS later texts, or with nothing from `pos` on (where `attempts` may not
        take a look-behind's partial match as the pattern does)."""
        if pos == len(buf):
            return None
        try:
            match = self.attempts.match(buf, pos, partial=True, timeout=HOLD_SECONDS)
            if match is None or match.end() != len(buf):
                return False  # none, or a complete match that ends before the buffer does
            if not match.partial:
                return True
            pattern = self.pattern
            if self.looks_behind:
                start = self._complete_from(buf, pos + 1)
                return start == len(buf) or (
                    pattern.search(buf, start, timeout=HOLD_SECONDS, concurrent=True) is None
                )
            run_back = self.run_back
            assert run_back is not None
            later = 0
            for text in self.led_prefixes:
                found = buf.find(text, pos + 1)
                while found != -1:
                    run = run_back.match(buf, pos, found)  # `R*`: it matches, maybe empty
                    start = found if run is None else run.start()
                    if start != pos:
                        later += 1
                        if later > LATER_TEXTS:
                            return None
                        if pattern.match(buf, start, timeout=HOLD_SECONDS) is not None:
                            return False
                    found = buf.find(text, found + 1)
        except TimeoutError:
            return False
        return True

    def _where(self) -> str:
        """The template key of this delimiter's pattern, for error messages."""
        kind = "open_pattern" if self.kind == OPEN else "close_pattern"
        return f"fields.{self.field}.{kind}"

    def run_and_piece(self, text: str) -> int:
        """For a pattern led by a run: where its partial match at the end of `text` starts,
        when no prefix occurs in `text`: at the run before the longest piece of a prefix
        there (or before the end), or -1 if that is empty. The run cannot reach into the
        piece: no prefix starts with a run character."""
        assert self.run_back is not None
        size = len(text)
        piece = earliest_piece(text, self.led_prefixes)
        if piece == -1:
            piece = size
        run = self.run_back.match(text, 0, piece)  # `R*`: it matches, maybe empty
        start = piece if run is None else run.start()
        return -1 if start == size else start

    def _may_start_by(self, buf: str, pos: int, limit: int) -> bool:
        """Whether a match, or a partial one, of this pattern led by a run may start at or
        before `limit` (< len(buf)): at a run character, or where one of its texts occurs,
        or a piece of one ends the buffer. When the step's best match so far starts at
        `pos` (an open right after a close), that is a look or two, not a partial search."""
        leads = self.led_leads
        run_char = self.run_char
        assert run_char is not None
        size = len(buf)
        for index in range(pos, limit + 1):
            if run_char.match(buf, index) is not None:
                return True
            if buf[index] in leads:
                for text in self.led_prefixes:
                    if buf.startswith(text, index):
                        return True
                    if size - index < len(text) and text.startswith(buf[index:]):
                        return True
        return False

    def _led_from(self, pos: int) -> bool:
        """Whether the pattern's matches from `pos` are a run and then one of its texts (led
        by a run, and past the stream's first position if a branch may match only there)."""
        return self.run_back is not None and bool(pos or not self.start_only)

    def _led_over(self, buf: str, pos: int) -> bool:
        """Whether a partial search from `pos` gains by starting at `_partial_start`: led by a
        run, over more than LEAD_SPAN characters (below, the search costs less than finding
        where to start it)."""
        return len(buf) - pos > LEAD_SPAN and self._led_from(pos)

    def _complete_from(self, buf: str, pos: int) -> int:
        """For a pattern led by a run: where a complete match can start at the earliest, at
        or after `pos`. A match is a run and then one of its texts, whole, and no text
        starts with a run character: none starts before the run that ends where the first
        text occurs (or, with none, before the end, where none is complete)."""
        return self._run_before_text(buf, pos, len(buf))

    def _partial_start(self, buf: str, pos: int) -> int:
        """For a pattern led by a run: where a partial match can start at the earliest, at
        or after `pos` (see _partial_led): the run before the first occurrence of one of its
        texts, or, with none, the run before the piece of one at the buffer's end (or before
        the end)."""
        piece = earliest_piece(buf, self.led_prefixes, pos)
        return self._run_before_text(buf, pos, len(buf) if piece == -1 else piece)

    def _run_before_text(self, buf: str, pos: int, end: int) -> int:
        """Start of the run (from `pos` on) that ends where the first occurrence of one of
        the pattern's texts starts, if one starts before `end`, else at `end`."""
        assert self.run_back is not None
        size = len(buf)
        for text in self.led_prefixes:  # an occurrence that starts before `end`
            found = find_literal(buf, text, pos, min(size, end + len(text) - 1))
            if found != -1:
                end = found
        run = self.run_back.match(buf, pos, end)  # `R*`: it matches, maybe empty
        return end if run is None else run.start()

    def _piece_at_end(self, buf: str, pos: int) -> int:
        """Start of the longest buffer suffix (from `pos` on) that begins a prefix, or -1."""
        return earliest_piece(buf, self.prefixes, pos)


class State:
    """One parser state: the region text is routed to, and what it watches.

    `field` is None for the null sink (templates without an implicit field). `literals`
    and `patterns` are the watched delimiters, `watched` all of them in the reference's
    tie-break order; `literals_re` is one alternation over all the literals (built from
    them unless given); `may_start` tells whether a delimiter can begin in some text at all.
    `scan` is the generated scan step of this state (docs/design.md, "One scan step"): it
    calls the searches below (`next_literal`, `literal_at`, RegexDelimiter.next_hit,
    `literal_piece`) and decides between their answers in code written for this state.
    `feed` is the generated fast path for this state, or None when every chunk must be
    scanned; `close` the generated method that parses, stores and reports the region's
    value.
    """

    __slots__ = (
        "field",
        "dirty",
        "implicit",
        "literals",
        "watched",
        "extending",
        "literals_re",
        "lead",
        "patterns",
        "literal_reach",
        "start_texts",
        "every_literal",
        "ahead_key",
        "one_literal",
        "skip_lead",
        "skip_text",
        "skip_key",
        "starts",
        "reach",
        "leads",
        "at_end",
        "starts_or_piece",
        "shortest_start",
        "short_pieces",
        "held_pieces",
        "starts_or_held",
        "led",
        "led_back",
        "led_piece",
        "led_reach",
        "plain_pieces",
        "guarded_piece",
        "start_only",
        "quick_route",
        "store",
        "join",
        "scan",
        "fast",
        "waits_early",
        "waits_without_run",
        "broken_run",
        "held_windows",
        "close",
    )

    def __init__(
        self,
        field: str | None,
        *,
        literals: tuple[LiteralDelimiter, ...] = (),
        literals_re: Any = None,
        patterns: tuple[RegexDelimiter, ...] = (),
        plain_pieces: bool = False,
        scan: ScanStep | None = None,
        fast: bool = False,
        close: Callable[..., Any] | None,
        dirty: bool = False,
        implicit: bool = False,
        store: str = "assign",
        join: str = "",
    ) -> None:
        self.field = field
        self.dirty = dirty
        self.implicit = implicit
        self.literals = literals  # in rank order
        # Every watched delimiter in rank order, as the generated scan step unpacks them.
        self.watched: tuple[Any, ...] = tuple(
            sorted((*literals, *patterns), key=lambda delim: delim.rank)
        )
        # Literals of delimiters with can_extend: one of them matched at the buffer's end
        # may still grow into a longer one of its list, so the step holds it back.
        self.extending = frozenset(
            literal for delim in literals if delim.can_extend for literal in delim.literals
        )
        # One alternation over every watched literal, longest first (only the positions of
        # its matches are used). Derived here, not written into the generated module, so
        # that a template's literal is spelled once in its module.
        if literals_re is None and literals:
            texts = {literal for delim in literals for literal in delim.literals}
            literals_re = re.compile(
                "|".join(re.escape(text) for text in sorted(texts, key=lambda t: (-len(t), t)))
            )
        self.literals_re = literals_re
        # The first character all watched literals share, if they share one.
        leads = {literal[0] for delim in literals for literal in delim.literals}
        # Each watched literal once, and the memo key of where each occurs next (_find_each).
        self.every_literal = tuple(
            dict.fromkeys(literal for delim in literals for literal in delim.literals)
        )
        self.ahead_key = object()
        # The only watched literal, which `str.find` finds at C speed wherever its first
        # character is dense (a stream of special tokens, all led by `<`).
        self.one_literal = self.every_literal[0] if len(self.every_literal) == 1 else None
        self.lead = leads.pop() if len(leads) == 1 else None
        self.patterns = patterns
        # A partial literal match starts no earlier than this many characters from the end.
        self.literal_reach = max((delim.longest - 1 for delim in literals), default=0)
        # The texts watched delimiters start with (literals, regex prefixes), longest
        # first, when all are known and one is longer than a character (otherwise the
        # fast path's character test already says everything); `starts` finds them.
        texts = {literal for delim in literals for literal in delim.literals}
        texts.update(prefix for delim in patterns for prefix in delim.prefixes)
        texts.update(prefix for delim in patterns for prefix in delim.led_prefixes)
        known = all(delim.prefixes or delim.led_prefixes for delim in patterns) and any(
            len(text) > 1 for text in texts
        )
        # Patterns led by a run: a piece at the end may be preceded by a run they hold too.
        self.led = tuple(delim for delim in patterns if delim.run_back is not None)
        # When they share one run (as `\s*`-led patterns do), the run before the longest
        # piece of any of their prefixes is the earliest of theirs (a run cannot cross the
        # first character of a prefix): one regex finds that piece (`led_piece`, searched
        # from `led_reach` characters before the end) and one the run (`led_back`).
        self.led_back = self.led_piece = None
        self.led_reach = 0
        led_ends = ""  # (a pattern of the led texts' pieces, for `starts_or_held`)
        runs = {delim.run_back.pattern for delim in self.led if delim.run_back is not None}
        if len(runs) == 1:
            self.led_back = self.led[0].run_back
            led_texts = {prefix for delim in self.led for prefix in delim.led_prefixes}
            self.led_reach = max(len(text) - 1 for text in led_texts)
            led_pieces = {text[:end] for text in led_texts for end in range(1, len(text))}
            if sum(map(len, led_pieces)) > MAX_PIECES:
                self.led_back = None  # the loop over each pattern's prefixes, below
            elif led_pieces:
                led_ends = trie_pattern(led_texts, pieces=True)
                self.led_piece = re.compile(f"(?:{led_ends})\\Z")
        self.start_texts = (
            tuple(sorted(texts, key=lambda text: (-len(text), text))) if known else ()
        )
        self.starts = re.compile(trie_pattern(self.start_texts)) if known else None
        # A piece (a proper prefix of a start text) at the end of a chunk starts at most
        # `reach` characters from its end, on one of the `leads`. Unless the pieces are long
        # (over MAX_PIECES characters in all), one regex finds the longest piece
        # (`at_end`), and one tells a start text from a piece or neither (`starts_or_piece`):
        # a single C call for every chunk that holds a lead character.
        self.reach = max((len(text) - 1 for text in self.start_texts), default=0)
        self.leads = "".join(sorted({text[0] for text in self.start_texts}))
        self.at_end = self.starts_or_piece = None
        # Where the patterns led by a run share the run `\s*`: one search that tells a start
        # text (the `start` group) from where a scan holds back the end of a text with none
        # (`held_at_end`, three searches): a piece of a start text, or the run before a piece
        # of a led text or before the end.
        self.starts_or_held = None
        size = sum(len(text) * (len(text) - 1) // 2 for text in self.start_texts)
        if self.starts is not None and size <= MAX_PIECES:
            ends = trie_pattern(self.start_texts, pieces=True)
            if ends:
                self.at_end = re.compile(f"(?:{ends})\\Z")
                starts = f"(?P<start>{self.starts.pattern})"
                self.starts_or_piece = re.compile(f"{starts}|(?:{ends})\\Z")
                if self.led_back is not None and self.led_back.pattern == r"\s*":
                    # (A piece with no run before it is one of `ends`. With a run of one or
                    # more, every branch starts on one of a few characters, which `re` skips
                    # to: 0.3-0.6 us a search of 4-10 characters, against 0.35-0.9 with `*`.)
                    run = f"{SPACE_CLASS}+(?:{led_ends})?" if led_ends else f"{SPACE_CLASS}+"
                    self.starts_or_held = re.compile(f"{starts}|(?:{ends})\\Z|{run}\\Z")
        # A chunk shorter than every start text holds none whole, only a piece at its end;
        # when the start texts share one lead character and hold it nowhere else, a piece
        # can only begin on the chunk's last lead character: `may_start` looks that suffix
        # up in the set of pieces (4-character chunks of text dense in `<`: 0.10 us against
        # 0.2-0.3 for `starts_or_piece`). `shortest_start` is 0 where that does not hold.
        self.shortest_start = 0
        self.short_pieces: frozenset[str] = frozenset()
        if (
            self.starts is not None
            and len(self.leads) == 1
            and size <= MAX_PIECES
            and not any(self.leads in text[1:] for text in self.start_texts)
        ):
            self.shortest_start = min(map(len, self.start_texts))
            self.short_pieces = frozenset(
                text[:end] for text in self.start_texts for end in range(1, len(text))
            )
        # The first character of every start text, when all share one and every match of a
        # watched delimiter starts with one of them (none is led by a run): `skip` finds
        # the first place a match can start with one memchr pass.
        # A state watching one delimiter that starts with one text has nothing to skip for:
        # its search is that pass.
        skip_leads = {text[0] for text in self.start_texts}
        single = len(self.watched) == 1 and len(self.start_texts) == 1
        self.skip_lead = (
            skip_leads.pop()
            if len(skip_leads) == 1 and not self.led and self.starts and not single
            else None
        )
        # ... and the only start text, if there is one (delimiters that all start alike),
        # which find_literal finds: on text dense in its first character a regex of the
        # start texts cost 58 us over 80K characters, `str.find` 37 us.
        self.skip_text = self.start_texts[0] if len(self.start_texts) == 1 else None
        self.skip_key = object()
        # Whether a piece of a start text at the end of a chunk is exactly the text a scan
        # would hold back.
        self.plain_pieces = plain_pieces
        # A piece at the end that only texts behind a look-behind begin with: a look-behind
        # may refuse it, so the scan decides (Scanner._scan_feed, searching from where the
        # held-back text would start); None when there is no such piece.
        # A piece of a text that a branch without a look-behind starts with is held from the
        # run before it, as the quick route holds it; a piece of a literal or prefix is not
        # enough (held from the piece itself, not from the run).
        bare = {
            text for delim in patterns for text in delim.led_prefixes if text not in delim.guarded
        }
        refusable = {
            text[:end]
            for delim in patterns
            for text in delim.guarded
            for end in range(1, len(text))
        }
        refusable -= {text[:end] for text in bare for end in range(1, len(text))}
        self.guarded_piece = (
            re.compile(f"(?:{'|'.join(map(re.escape, sorted(refusable)))})\\Z")
            if refusable
            else None
        )
        # The pieces Regions._feed_piece and Scanner._scan_feed hold with one look-up when the
        # held-back text and a chunk make one whole (what their search would find and hold:
        # 1.24 -> 0.63 us a chunk of a tool call's close arriving in pieces, hermes): every
        # proper prefix of a start text, where pieces are plain (no start text occurs inside
        # another's proper prefix) and no start text begins another, so that no match is
        # complete in a piece and the one at its start is partial; where no piece can be
        # refused, no pattern is led by a run, and no start text holds a NUL, as the text
        # finalize() leaves held back does (every later feed must reach the scan loop).
        self.held_pieces: frozenset[str] = frozenset()
        if (
            plain_pieces
            and size <= MAX_PIECES
            and not self.led
            and self.guarded_piece is None
            and not any(
                other != text and text.startswith(other)
                for text in self.start_texts
                for other in self.start_texts
            )
            and not any("\0" in text for text in self.start_texts)
        ):
            self.held_pieces = frozenset(
                text[:end] for text in self.start_texts for end in range(1, len(text))
            )
        # Whether a pattern has a branch that can only match at the stream's first position:
        # what the fields above tell (and the fast path) then holds only past it, so the
        # scanner scans the stream's start in full (Scanner._at_origin).
        self.start_only = any(delim.start_only for delim in patterns)
        # The one search the prefiltered route of a scan step (Scanner._scan_feed) is here,
        # or None: `starts_or_piece`, or for patterns led by `\s*` `starts_or_held`, where
        # pieces are exactly what a scan holds (a start-only branch is past, as fast paths
        # run only past the stream's first position). Regions._feed_piece takes it without
        # a call, and asks `guarded_piece` only of a piece it found.
        quick = self.starts_or_held if self.led else self.starts_or_piece
        self.quick_route = quick if plain_pieces else None
        # How the field stores a value ("assign", "append" for repeats, "join"), for the
        # raw text that on_error="keep_raw" stores when the value does not parse.
        self.store = store
        self.join = join
        # The generated step, bound to this state: state.scan(buf, pos, eos, memo).
        step = getattr(scan, "__func__", scan)  # a staticmethod of the generated class
        self.scan: Callable[[str, int, bool, Memo], Step] = MethodType(
            _no_scan if step is None else step, self
        )
        # Whether the generated `feed` has a fast path for this state (Scanner._bind_feed).
        self.fast = fast
        # Whether a scan that holds text back waits on it however short it is (Scanner._wait):
        # every chunk of a state without a fast path is scanned, and a held match that only
        # a look-ahead's literal or a JSON object's close can change (a wait with no run) may
        # hold a whole tool call, each chunk of which would rescan it (glm45, a 186-character
        # call in 4-character chunks: 228 us a chunk, 3.7 with the wait).
        self.waits_early = not fast or any(
            run.run is None and run.literal for delim in patterns for run in delim.runs
        )
        # Whether a held match may wait with no run (`RegexDelimiter.waits`, runs=False).
        self.waits_without_run = any(run.run is None for delim in patterns for run in delim.runs)
        # Where a scan holds text back, when the patterns tell it without one (waiting.BrokenRun).
        self.broken_run = None if literals or not patterns else BrokenRun.of(patterns)
        # Windows a scan held all of, with no text before them, and the pattern that held
        # each (Scanner._held_window), up to HELD_TEXTS of them.
        self.held_windows: dict[str, RegexDelimiter] = {}
        self.close = close

    def __repr__(self) -> str:
        return f"<State {self.field!r}>"

    def may_start(self, text: str) -> bool:
        """Whether a watched delimiter occurs in `text`, or begins at its end."""
        if len(text) < self.shortest_start:
            return text[text.rfind(self.leads) :] in self.short_pieces
        if self.starts_or_piece is not None and len(text) <= ONE_SEARCH_SPAN:
            return self.starts_or_piece.search(text) is not None
        if self.starts is None or self.starts.search(text) is not None:
            return True
        return self.piece_at_end(text) != -1

    def held_unless_started(self, text: str) -> int | None:
        """None if a start text occurs in `text` (only a scan can tell what it starts);
        else where the text a scan holds back at the end of `text` starts, or -1 (as
        `piece_at_end`, or `held_at_end` for patterns led by a run, tell). Without such
        patterns, one search (`starts_or_piece`: a match of its `start` group is a start
        text, any other a piece at the end)."""
        find = self.starts_or_held if self.led else self.starts_or_piece
        if find is None or len(text) > ONE_SEARCH_SPAN:
            assert self.starts is not None
            if self.starts.search(text) is not None:
                return None
            return self.held_at_end(text) if self.led else self.piece_at_end(text)
        match = find.search(text)
        if match is None:
            return -1
        return None if match.lastgroup else match.start()

    def piece_at_end(self, text: str) -> int:
        """Start of the longest suffix of `text` that begins a start text, or -1.

        One regex search from `reach` characters before the end (`at_end`); for long start
        texts, a look at each place of a lead character there, left to right: the first
        that begins a start text wins.
        """
        begin = len(text) - self.reach
        if begin < 0:
            begin = 0
        if self.at_end is not None:
            match = self.at_end.search(text, begin)
            return -1 if match is None else match.start()
        found = -1
        for lead in self.leads:
            index = text.find(lead, begin, found if found != -1 else len(text))
            while index != -1:
                if self._is_piece(text[index:]):
                    found = index
                    break
                index = text.find(lead, index + 1, found if found != -1 else len(text))
        return found

    def held_at_end(self, text: str) -> int:
        """Where the text a scan holds back at the end of `text` starts, when no start text
        occurs in it (and `plain_pieces`), or -1: the longest piece of a start text, or
        earlier, the run before it (or before the end) of a pattern led by a run."""
        found = self.piece_at_end(text)
        size = len(text)
        back = self.led_back
        if back is not None:
            at_end = self.led_piece
            piece = None if at_end is None else at_end.search(text, max(0, size - self.led_reach))
            end = size if piece is None else piece.start()
            run = back.match(text, 0, end)
            start = end if run is None else run.start()
            if start < size and (found == -1 or start < found):
                found = start
            return found
        for delim in self.led:
            start = delim.run_and_piece(text)
            if start != -1 and (found == -1 or start < found):
                found = start
        return found

    def _is_piece(self, text: str) -> bool:
        """Whether `text` is a proper prefix of a start text."""
        return any(start.startswith(text) and start != text for start in self.start_texts)

    def _find(self, buf: str, pos: int, memo: dict[Any, Any]) -> int:
        """Leftmost start of any watched literal at or after `pos`, or -1."""
        literal = self.one_literal
        if literal is not None:  # (on 80K characters of prose: str.find 37 us, find_literal 9)
            return find_literal(buf, literal, pos, len(buf))
        lead = self.lead
        if lead is not None:
            return first_match(buf, lead, self.literals_re, pos, self.every_literal)
        if len(buf) - pos > SPLIT_AFTER:
            return self._find_each(buf, pos, memo)
        match = self.literals_re.search(buf, pos)
        return -1 if match is None else match.start()

    def skip(self, buf: str, pos: int, memo: Memo) -> int:
        """Where the next match of a watched delimiter can start at the earliest, complete
        or partial, from `pos` on: at the first start text, or in the last `reach`
        characters (a piece of one). Scans ask it on a long rest of the buffer (a whole
        output, in one-shot parsing): one memchr pass for all the state's start texts,
        instead of one pass for each delimiter. `pos` itself unless every match starts
        with a start text that begins with `skip_lead` (none is led by a run), and `pos` is
        past the stream's first position where the state has a start-only branch."""
        if self.skip_lead is None or (not pos and self.start_only):
            return pos
        known = memo.get(self.skip_key)
        if known is not None and known[0] <= pos <= known[1]:
            return known[1]  # nothing starts in between
        assert self.starts is not None
        if self.skip_text is not None:
            found = find_literal(buf, self.skip_text, pos, len(buf))
        else:
            found = first_match(buf, self.skip_lead, self.starts, pos, self.start_texts)
        start = max(pos, len(buf) - self.reach) if found == -1 else found
        memo[self.skip_key] = (pos, start)
        return start

    def _find_each(self, buf: str, pos: int, memo: dict[Any, Any]) -> int:
        """_find over a long buffer, for literals with different first characters: one
        find_literal per literal (memchr on its first character), each remembered while it
        lies ahead. An alternation of the literals costs the `re` engine some 3 ns a
        character; a memchr, a hundredth of that."""
        key = self.ahead_key
        ahead = memo.get(key)
        literals = self.every_literal
        if ahead is None:
            ahead = memo[key] = [-2] * len(literals)
        size = len(buf)
        found = -1
        for index, literal in enumerate(literals):
            start = ahead[index]
            if start == -2 or 0 <= start < pos:
                start = ahead[index] = find_literal(buf, literal, pos, size)
            if start != -1 and (found == -1 or start < found):
                found = start
        return found

    def next_literal(self, buf: str, pos: int, memo: Memo) -> int:
        """Leftmost start of any watched literal at or after `pos`, or -1: the state's one
        search for its literals, remembered in `memo` while it lies ahead."""
        found = memo.get(self, _UNSEEN)
        if found is _UNSEEN or pos > found >= 0:
            if len(buf) - pos <= SHORT_REST:
                match = self.literals_re.search(buf, pos)
                found = -1 if match is None else match.start()
            else:
                found = self._find(buf, pos, memo)
            memo[self] = found
        return found

    def literal_at(self, buf: str, index: int) -> str:
        """The longest watched literal at `index`, where next_literal found one."""
        match = self.literals_re.match(buf, index)
        assert match is not None, "literal_at: no watched literal there"
        return match.group()

    def literal_piece(self, buf: str, pos: int, found: int, hold: int) -> int:
        """`hold`, or the start of an earlier buffer suffix that begins a watched literal
        with no complete match from `found` (next_literal's answer) on: a literal that may
        still be arriving. Scan steps ask only when such a suffix could decide them."""
        for delim in self.literals:
            if found != -1 and (
                delim.match_at(buf, found) != -1 or delim.occurs_from(buf, found + 1)
            ):
                continue  # it has a complete match, so no partial one
            start = delim.partial(buf, pos)
            if start != -1 and start < hold:
                hold = start
        return hold

    def holder(self, buf: str, pos: int, memo: Memo) -> RegexDelimiter | None:
        """The watched pattern whose pending match held back the rest of `buf` from `pos`,
        as the scan step that ended there found it (in `memo`), or None. The scanner asks
        `holds` of it when the next chunk arrives (Scanner._still_held). A literal's piece
        needs no such help: the fast paths' quick route holds it without a scan."""
        for delim in self.patterns:
            hit = memo.get(delim)
            if hit.__class__ is tuple and hit[0] == pos and hit[2]:
                return delim
        return None

    def holds(self, delim: RegexDelimiter, buf: str, pos: int) -> bool:
        """Whether a scan step from `pos` holds back all of `buf` from there because `delim`,
        a watched pattern, has a pending match starting there.

        The step's held-back text starts at the earliest pending match, and nothing is
        committed from there on (docs/design.md, "One scan step"), so the other delimiters
        need not be searched: only `delim`, as the step searches it.

        The answer for a held text with nothing before it (`pos` 0: no left context, so no
        look-behind or `^` can tell two places apart) depends on the text alone, and one
        that the pattern's short span covers is found without a time bound; those answers
        are kept (`RegexDelimiter.held_texts`, up to HELD_TEXTS of them). A stream
        repeats its held texts: a header arriving in pieces holds the same few texts at
        each message (inkling's `<|message_model|><|content_...|>` in 4-character chunks:
        two partial match attempts, 2.2 us, on each of seven chunks of each header).
        """
        if pos or len(buf) > delim.short_span:
            return self._holds(delim, buf, pos)
        known = delim.held_texts.get(buf)
        if known is None:
            known = self._holds(delim, buf, pos)
            remember(delim.held_texts, buf, known)
        return known

    def _holds(self, delim: RegexDelimiter, buf: str, pos: int) -> bool:
        """`holds`, worked out."""
        if len(buf) - pos > delim.short_span:
            # Not cheap to search over this rest (a `\s*`-led call open of a dozen parts):
            # its one search, under a short bound of its own, where the step would search
            # three delimiters (deepseek_r1's tool-call output in 4-character chunks: 469-481
            # -> 370-375 us a stream). One that runs past the bound leaves it to the step,
            # which searches under the parser's.
            return delim.pending_at(buf, pos)
        if delim.prefixes and (pos or not delim.start_only):
            # Matches start where a prefix does: one partial match attempt at `pos` says it
            # (a tool call's header arriving in 4-character chunks: 1.3 us, against 3.3 for
            # the search), unless a prefix occurs after `pos`, where a complete match, which
            # the search prefers, may start. (`attempts`: a partial attempt of the pattern
            # itself first scans the rest for its required literal, 2.1 us.)
            match = delim.attempts.match(buf, pos, partial=True)
            if match is None or match.end() != len(buf):
                return False  # none, or a complete match that ends before the buffer does
            if not match.partial:
                return True
            for prefix in delim.prefixes:
                if buf.find(prefix, pos + 1) != -1:
                    break
            else:
                return True
        elif not delim.prefixes:
            narrowing = delim.narrowing()
            if narrowing is not None and buf.find(narrowing.literal, pos) == -1:
                # HEAD + C* + LITERAL, no LITERAL from `pos` on: no match is complete, and
                # the leftmost partial one starts at `pos` if one attempt there reaches the
                # end; one attempt where the search tried a complete match, then a partial
                # one (inkling's sink, 4-character chunks of text dense in `<`: 5.07 -> 4.61
                # us a chunk).
                match = delim._attempt(buf, pos)
                return match is not None and match.end() == len(buf)
        hit = delim.search(buf, pos, False, len(buf))
        return hit is not None and hit[0] == pos and hit[2]
