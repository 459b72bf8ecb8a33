r"""The window and the scan loop: what a parser holds back, and how it finds delimiters.

A parser routes generated text to the open region of its current state. This half of
it decides where regions open and close: it keeps the held-back text (`_pending`: text
that may still be, or begin, a delimiter), the left context regex delimiters may look
behind into, and runs the scan loop of docs/design.md ("One scan step") over them. It
hands what it finds to hooks that runtime.regions implements: text for the region
(`_accumulate`, or `_chunk` when it is open), a region opening (`_open`) and the open
region closing (`_close_current`); `_received()` counts the characters received, some of
which only the regions' chunks hold (see `_fed`).

Two things differ from the reference by design and change no event:
- the buffer is a window (held-back text plus the left context regex delimiters may look
  behind into), so a feed costs O(chunk), not O(stream);
- the progress rule below, which stops where the reference would loop forever.

Progress rule: within one feed() or finalize() call, the scan loop never revisits a
configuration (position, state, whether its region opened, and where). The reference's next
step is a function of that configuration, so a repeat means it would cycle forever
(zero-width delimiters, e.g. an open_pattern and close_pattern that are both `$`). We stop
at the repeat. Where the region opened is part of it: a region that closes here and one
that then opens and closes here, empty, differ in what their close parses, and the second
may fail where the first did not (a close `(?<=\})\s*` after `{"a": 1}{`). The
reference's own rule, which ends the loop after a zero-width close of a region that never
opened, is the one case of this it handles itself; the text from that position on stays
unrouted there too. In the lenient modes a region that fails with no text at all (a
zero-width open and close) would make such a cycle: the scan moves on past the
character where it opened instead (Regions._step_past_failure), so that no text is lost.
"""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

from . import errors
from .automaton import OPEN, RegexDelimiter, State, remember
from .held_match import STOP
from .waiting import BrokenRun, Wait

Event = dict[str, Any]

# The pattern whose pending match held text back, as the last scan found it, and how far
# its HeldMatch followed that text (Scanner._held_by).
HeldBy = tuple[State, RegexDelimiter, int, int]
# Held-back text this long is checked for a match that only a known text can change
# (Scanner._wait); shorter holds are simply rescanned.
WAIT_AFTER = 256

# The runs of spaces and newlines, up to 8 characters ("" too), that a generated fast path
# holds back at the end of a chunk, or sends on with the next one, itself (docs/design.md,
# "Patterns led by a run"): in a state whose patterns are led by `\s*`, a third of the
# 4-character chunks of prose end in a space, and a set lookup is the cheapest exact test.
# Other held-back text or whitespace goes to Regions._feed_piece or Scanner._feed_run.
SPACE_RUNS = frozenset(
    "".join(run) for size in range(9) for run in itertools.product(" \n", repeat=size)
)

# A scan step over a rest of the buffer longer than this first asks where a match can start
# (State.skip): one pass over the rest for all the state's delimiters.
SKIP_AFTER = 256

# finalize() stores this in `_pending`: every fast path sends a chunk to the slow path while
# `_pending` is set (or holds anything but spaces and newlines, where runs are held), so any
# later feed reaches the slow path, which raises. That keeps the fast paths free of extra checks.
_FINALIZED = "\x00<finalized>"


class Scanner:
    """The held-back window and the scan loop of a parser (see the module docstring)."""

    # Supplied by the generated subclass.
    START: ClassVar[State]
    # Characters of already-routed text that regex delimiters may look behind into
    # (`^`, `\b`, look-behind); None when that cannot be bounded, so nothing is dropped.
    # A bounded context is brought up to date when it is read (`_left_context`): generated
    # fast paths add a chunk to the region, not to it.
    CONTEXT: ClassVar[int | None] = 0
    # Held-back text this long is checked for a match only a known text can change.
    WAIT_AFTER: ClassVar[int] = WAIT_AFTER
    # The open region's latest chunks, and what the lenient modes recovered from
    # (runtime.regions keeps them).
    _parts: list[str]
    _errors: list[dict[str, Any]]
    _opened_at: int  # (where the open region opened)

    def _start_scanning(self, regex_timeout: float | None) -> None:
        """The window of a parser nothing has been fed to, in its start state."""
        # Seconds of CPU time per template-regex search (None: runtime.errors.REGEX_TIMEOUT).
        self._regex_timeout = regex_timeout
        self._state = self.START
        self._opened = False  # whether the current state's region has opened
        self._pending = ""  # held-back text
        self._context = ""  # routed text regex delimiters may look behind into
        # With a bounded context: how many of the region's chunks (`_parts`) it holds; the
        # chunks after them were routed since, by fast paths (`_left_context` adds them).
        self._context_count = 0
        self._buf = ""  # during a scan: context + held-back text + the new text
        self._pos = 0  # during a scan: where in _buf routing has got to
        # Offsets count characters of generated text: the prefix after its anchor is negative.
        # Characters received so far, less those held back (`_pending`) and those of the open
        # region's latest chunks, which runtime.regions keeps (`_parts`): a generated fast
        # path appends a chunk there, or holds back a run of whitespace or sends it on, and
        # counts nothing (8% of a prose chunk's time); `_received()` adds them back.
        self._fed = 0
        # During a scan: the offset of _buf[0], less _received() (which a scan's routing
        # does not change), so that a region opening need not count the chunks.
        self._base = 0
        # While a held match can only change when a given text arrives (RegexDelimiter.waits):
        # (the wait, its memory, the delimiter; see runtime.waiting) and the text since.
        self._waiting: tuple[Wait, Any, Any] | None = None
        self._waited: list[str] = []
        self._unmatched: Any = None  # a delimiter known to have no complete match left
        self._truncated = False  # finalize(truncated=True): the output was cut off
        # (state, delimiter, follow, followed) when the last scan held text back for that
        # delimiter's pending match (State.holder): the next chunk first asks whether it
        # still does (and clears it when not). `follow` is where the delimiter's HeldMatch
        # is once it followed the first `followed` characters of the held text (STOP where
        # `followed` is 0: it has not started).
        self._held_by: HeldBy | None = None
        # Whether the last scan loop ran to its end: a scan of the same text (an empty
        # chunk) would then decide nothing new. Not after the progress rule stopped it, or
        # an error cut it short: the reference's next scan goes on from there.
        self._settled = False
        self._finalized = False
        # The state whose fast path the generated `feed` runs (the current state, when it
        # has one that applies; see _bind_feed), or None: every chunk goes to _scan_feed.
        self._fast: State | None = None

    def _after_last_anchor(self, prefix: str) -> str:
        """The prefix cut just after the last start-anchor match (whole prefix if none)."""
        raise NotImplementedError  # generated

    def _scan_feed(self, text: str) -> list[Event]:
        """The general path of feed(): scan the held-back text plus this chunk.

        Generated fast paths call it for every chunk they cannot route on their own.
        """
        if self._finalized:
            raise RuntimeError("parser already finalized")
        if not text and self._settled:
            # An empty chunk (engines send one per token that only another parser uses):
            # the held-back text was scanned as it is, and that scan's decisions stand.
            return []
        waiting = self._waiting
        if waiting is not None:
            # A wait whose run only its stop character ends (HeldRun.quiet) is told without
            # a call: a chunk without it is kept aside, one with it wakes the parser.
            quiet = waiting[0].quiet
            if quiet is None:
                woken = self._wake(text)
            elif quiet in text:
                woken = self._wake(None)
            else:
                self._waited.append(text)
                woken = False
            if not woken:
                self._fed += len(text)
                return []
        held_by = self._held_by
        if held_by is not None:
            if held_by[0] is self._state and self._still_held(held_by, text):
                return []
            # The match no longer holds: what this chunk leaves held back, no pattern holds
            # (until a scan says so), and the fast paths' quick route applies again (a tool
            # call's body after its open held a piece of the close: 2.9 to 1 us a chunk).
            self._held_by = None
        state = self._state
        broken = state.broken_run
        if broken is not None and text and self.CONTEXT == 0:
            # (After `_still_held`: a held message header of inkling's that goes on takes one
            # search there, where the broken run could only hand it to the scan.)
            settled = self._route_broken_run(broken, text)
            if settled is not None:
                return settled
        buf = self._pending + text
        if (
            text
            and buf in state.held_pieces
            and self.CONTEXT is not None
            and not (state.start_only and self._at_origin())
        ):
            # A longer piece of a start text (State.held_pieces): held back, as the route
            # below holds it, without its search (an implicit region that has not opened,
            # which has no fast path: `<to` after a tool call's close, hermes, 2.2 us).
            self._pending = buf
            return []
        if (
            state.starts is not None
            and text
            and not (state.start_only and self._at_origin())
            # (a held match that began with a start text: the search would find that)
            and not (held_by is not None and self._pending.startswith(state.start_texts))
        ):
            # Two outcomes of a scan step need no scan: nothing in the text can start a
            # delimiter (route it all), or only its end can, as a piece of one, or a run
            # that leads one (hold that; a run long enough to wait on goes to the scan,
            # which waits on it).
            piece = self._held_unscanned(state, buf)
            if piece is not None:
                routed, held = (buf, "") if piece == -1 else (buf[:piece], buf[piece:])
                # Into an open region, in one call (a bounded left context takes the chunk
                # up when it is read: `_left_context`).
                if self._opened and self.CONTEXT is not None:
                    self._pending = held
                    if not routed:
                        return []
                    self._fed += len(routed)  # (received: `_chunk` moves it to `_parts`)
                    return [self._chunk(routed)]
                self._base = -len(buf)
                self._pos = 0
                return self._route(routed, held, text)
        return self._scan_chunk(state, text)

    def _scan_chunk(self, state: State, text: str) -> list[Event]:
        """The scan of `_scan_feed`, once no shorter route applies (`state` is the current
        one): a window held before is held again without it (`State.held_windows`).
        Regions._feed_piece enters here when its search found a start text in the held-back
        text and the chunk, which `_scan_feed` would search for again."""
        events: list[Event] = []
        window = self._held_window(state, text)
        if window is not None:
            holder = state.held_windows.get(window)
            if holder is not None:  # a scan of this window held all of it: so would this one
                self._pending = window
                self._held_by = (state, holder, STOP, 0)
                self._settled = True
                return events
        if self._regex_timeout is None:  # (`_run`, one call less)
            self._scan(text, events, eos=False)
        else:
            self._run(text, events, eos=False)
        if (
            window is not None
            and not events
            and self._state is state
            and self._held_by is not None
            and self._waiting is None
            and self._settled
            and len(self._pending) == len(window)
        ):
            remember(state.held_windows, window, self._held_by[1])
        return events

    def _route_broken_run(self, broken: BrokenRun, text: str) -> list[Event] | None:
        """A scan of the held-back text and `text` where the state's patterns tell what it
        holds without one (waiting.BrokenRun): route up to there, hold the rest, and wait
        on it as the scan would (`_scan`, `_wait`). None, changing nothing, when only the
        scan can tell."""
        buf = self._pending + text
        found = broken.hold(buf)
        if found is None:
            return None
        hold, run = found
        self._held_by = None
        self._settled = True
        state = self._state
        if state.field is None:  # the null sink: _route, which routes nothing here
            self._pending = buf[hold:]
            self._fed += hold
            events: list[Event] = []
        else:
            self._base = -len(buf)
            self._pos = 0
            events = self._route(buf[:hold], buf[hold:], text)
        if run and (len(buf) - hold >= self.WAIT_AFTER or (state.waits_early and not state.fast)):
            self._waiting = (broken.wait, "", state.patterns[0])
        return events

    def _held_window(self, state: State, text: str) -> str | None:
        """The window a scan of `text` runs over, the held-back text and `text`, when what
        that scan holds depends on the window's text alone, else None. So it does with no
        left context (CONTEXT 0: no look-behind, `^` or `\\b`) and no delimiter known to
        have no match left (`_unmatched`). A scan that holds all of such a window for a
        pattern, starting no wait, is remembered (`State.held_windows`): the same window
        later is held for the same pattern without a scan. Inkling's message headers in
        4-character chunks: the first chunk, `<|me`, and the one where the thinking open's
        match outlasts the text open's, `hink`, cost 10 and 17 us a scan, and a header
        repeats at each message."""
        pending = self._pending
        if (
            self.CONTEXT != 0
            or self._unmatched is not None
            or state.start_only
            or len(pending) + len(text) >= self.WAIT_AFTER
        ):
            return None
        return pending + text

    def _held_unscanned(self, state: State, text: str) -> int | None:
        """Where a scan step of `state` from the start of `text` holds back its end, when
        telling needs no scan: -1 when it holds nothing (and, committing nothing, routes it
        all), else where the held-back text starts: a piece of a start text, or a run that
        leads one. None when only a scan can tell: a start text occurs, a piece a
        look-behind may refuse (State.guarded_piece), a run long enough to wait on, or
        pieces that are not what a scan holds (State.plain_pieces)."""
        piece = state.held_unless_started(text)
        if piece is None or piece == -1:
            return piece
        if not state.plain_pieces or (state.led and len(text) - piece >= self.WAIT_AFTER):
            return None
        guarded = state.guarded_piece
        if guarded is not None and guarded.search(text, piece) is not None:
            return None
        return piece

    def _still_held(self, held_by: HeldBy, text: str) -> bool:
        """Hold `text` too, and say so, when a scan of the held-back text plus `text` would
        hold back all of it: the delimiter of `held_by` (`_held_by`) still has a pending
        match where the held-back text starts (State.holds). A delimiter spanning several
        chunks (`<tool_call>` then a function name, in 4-character chunks) then costs one
        search per chunk, not a scan step; one whose HeldMatch follows it, a look-up per
        character (deepseek_v3's call open, over twenty 4-character chunks: two bounded
        regex calls a chunk otherwise). Only for a short hold after a scan that ran to its
        end, and a bounded left context (the buffer is built as `_scan` builds it)."""
        pending = self._pending
        if (
            not text
            or not pending
            or not self._settled
            or self.CONTEXT is None
            or len(pending) + len(text) >= self.WAIT_AFTER
        ):
            return False
        state, delim, follow, followed = held_by
        size = len(pending) + len(text)
        # Past the pattern's short span, where `holds` would search under the time bound, the
        # pattern's HeldMatch follows the match, if it has one (within the span, `holds`
        # searches without the bound and keeps the answers for held texts it was asked about:
        # a stream repeats its call opens).
        held = delim.held_match() if size > delim.short_span else None
        if held is not None:
            # From the hold's start (after the left context, which look-behinds read), or from
            # where it was, over what the held text grew by without it (a wait's text,
            # `_wake`), and then over `text`.
            found = held.start(self._left_context()) if not followed else follow
            if found is not None and followed != len(pending):
                found = held.go_on(found, pending[followed:])
            if found is not None:
                found = held.go_on(found, text)
            if found is None:
                # It stopped: a match completed, the held one broke, or a bound was reached.
                # The scan decides (asking `holds` first cost a bounded search that the scan
                # then mostly did again: about 15 us at deepseek_v3's completed call open).
                return False
            self._held_by = (state, delim, found, size)
            self._pending = pending + text
            return True
        context = self._left_context()
        if not state.holds(delim, context + pending + text, len(context)):
            return False
        pending += text
        self._pending = pending
        if state.waits_early and state.waits_without_run:
            # As the scan that held it would, wait on the hold once only a known text can
            # change it (`_scan`): a wait that could not start when the hold began (glm45's
            # `\s*<tool_call>\s*NAME...` held from `\n<tool_call>`, before the name) starts
            # here, or each chunk of the call would search the growing hold again (10.6 to
            # 1.8 us a chunk over glm45's calls: docs/design.md, "Waiting on a held match").
            # Not on a run: a hold that goes on is mostly a delimiter arriving, which no
            # run's wait can start on (inkling's message headers: 3 of 3.5 us a chunk), and
            # one that is a run waits from WAIT_AFTER on. So only in a state with a wait
            # that has no run (inkling's, whose waits all do: 0.6 us a held chunk).
            context = self._left_context()
            self._wait(context + pending, len(context), False, runs=False)
        return True

    def _feed_run(self, text: str) -> list[Event]:
        r"""The fast path's rest, in a state whose patterns are led by a run of `\s`
        (`StatePlan.holds_space_runs`), for a chunk in which no start text occurs or begins
        at its end, that follows held-back text or ends in whitespace.

        No start text begins with whitespace, so held-back text of spaces and newlines is a
        run that may lead a match (or text an interrupted scan left, which no start text
        can begin in either), and what a scan holds back of it plus the chunk is the run
        at their end: the rest goes to the region. Anything else goes to the scan: other
        held-back text, a run ending in whitespace other than space and newline (to
        `str.isspace` some characters are whitespace that `\s` does not match, which a
        scan would route), and a run long enough to wait on.
        """
        held = self._pending
        routed = self._hold_run(text)
        if routed is not None:
            return self._route(routed, self._pending, text)
        if (
            (held and (self._waiting is not None or held.strip(" \n")))
            or text.strip(" \n")
            or len(held) + len(text) >= self.WAIT_AFTER
        ):
            return self._scan_feed(text)
        return self._route("", held + text, text)  # all of it a run of spaces and newlines

    def _hold_run(self, text: str) -> str | None:
        """`_feed_run` where a chunk holds more than a run: the text for the region (the
        held-back run and the chunk, less the run of spaces and newlines at its end, which
        is now held back instead), or None, changing nothing, for `_feed_run` to decide.
        (Generated fast paths do the same for runs in SPACE_RUNS, inline.)"""
        held = self._pending
        if held and (self._waiting is not None or held.strip(" \n")):
            return None
        kept = text.rstrip(" \n")
        if not kept or kept[-1].isspace() or len(text) - len(kept) >= self.WAIT_AFTER:
            return None
        self._pending = text[len(kept) :]
        return held + kept if held else kept

    def _route(self, text: str, held: str, chunk: str) -> list[Event]:
        """Send `text` to the current region and hold `held`, as a scan step would (`text`
        + `held` is the held-back text and the new `chunk`)."""
        keep = self.CONTEXT
        if keep is None:  # the stream so far, held-back text included: add the new chunk
            self._context = _appended(self, chunk)
        elif keep and self._state.field is None:  # the null sink keeps no chunks to add later
            self._context = (self._left_context() + text)[-keep:]
        self._pending = held
        if not text:
            return []
        self._fed += len(text)  # (received: `_chunk` moves what reaches a region to `_parts`)
        events: list[Event] = []
        opened = self._opened
        self._accumulate(events, text)
        if self._opened is not opened:
            self._bind_feed()
        return events

    def _run(self, text: str, events: list[Event], eos: bool) -> None:
        """Scan the held-back text plus `text`, under this parser's regex time bound."""
        if self._regex_timeout is None:
            self._scan(text, events, eos)
        else:
            with errors.bounded_by(self._regex_timeout):
                self._scan(text, events, eos)

    def _scan(self, text: str, events: list[Event], eos: bool) -> None:
        buf, size = self._open_window(text)
        state, opened = self._state, self._opened
        try:
            self._process(events, eos)
            held = len(buf) - self._pos
            if not eos and held and (held >= self.WAIT_AFTER or self._state.waits_early):
                self._wait(buf, self._pos, held >= self.WAIT_AFTER)
        finally:
            self._close_window(size)
            if self._state is not state or self._opened is not opened or state.start_only:
                self._bind_feed()

    def _open_window(self, text: str) -> tuple[str, int]:
        """The buffer a scan runs over, left context + held-back text + `text`, set as
        `_buf` with the scan position (`_pos`) where the context ends; returns both."""
        if self.CONTEXT is None:  # the context already ends with the held-back text
            size = len(self._context) - len(self._pending)
            buf = _appended(self, text)
        else:
            context = self._left_context() if self.CONTEXT else ""
            size = len(context)
            buf = context + self._pending + text
        self._base = -len(self._pending) - size
        self._buf = buf
        self._pos = size
        return buf, size

    def _close_window(self, size: int) -> None:
        """After a scan over the window `_open_window` set (its context `size` long): the
        text routed (held back before, or new) counts as received and leaves `_pending`
        (`_chunk` took back out what it moved to `_parts`); the rest is held back; the
        left context is kept for the next scan."""
        buf, pos = self._buf, self._pos
        self._fed += pos - size
        self._pending = buf[pos:]
        keep = self.CONTEXT
        if keep is None:  # the whole stream, held-back text included
            self._context = buf
        elif keep:
            self._context = buf[max(0, pos - keep) : pos]
            self._context_count = len(self._parts)
        self._buf = ""

    def _wait(self, buf: str, hold: int, long: bool, runs: bool = True) -> None:
        """Stop rescanning a held-back stretch that only a known text can change: a `long`
        one, or a shorter one where the state waits early (State.waits_early: in a state
        with a fast path, only a wait with no run (a look-ahead's literal, a JSON object's
        close), as the fast path holds short runs itself; in one without, every chunk comes
        here, and any wait spares each a rescan: inkling's sink, 4-character chunks of
        prose, 1.26 -> 1.14 us a chunk). With `runs` False, never a wait on a run.

        The pattern whose pending match the scan (or `_still_held`) found holding the text
        (`_held_by`) is known to be pending there; another is asked (RegexDelimiter.waits)."""
        state = self._state
        runs = runs and (long or not state.fast)
        held_by = self._held_by
        holder = None if held_by is None else held_by[1]
        for delim in state.patterns:
            found = delim.waits(buf, hold, runs, pending=delim is holder)
            if found is not None:
                self._waiting = (*found, delim)
                return

    def _wake(self, text: str | None) -> bool:
        """While waiting: True (and back to scanning) once `text` could change the held
        match; otherwise keep it aside, in O(len(text)). None wakes unconditionally."""
        assert self._waiting is not None
        if text is not None:
            if not text:
                return False
            wait, memory, delim = self._waiting
            memory = wait.follow(text, memory)
            if memory is not None:
                self._waited.append(text)
                self._waiting = (wait, memory, delim)
                return False
        waited = "".join(self._waited)
        self._pending += waited
        self._fed -= len(waited)  # (counted while set aside: held back now)
        if self.CONTEXT is None:
            self._context = _appended(self, waited)
        self._waited = []
        self._waiting = None
        return True

    def _left_context(self) -> str:
        """The left context: with CONTEXT > 0, the last CONTEXT characters routed (with
        None or 0, `_context` as it is).

        Fast paths (and the routes that append a chunk, `_feed_piece`, `_scan_feed`,
        `_route`) do not keep it: they add the chunk to the open region, and
        `(context + chunk)[-CONTEXT:]` on every chunk cost deepseek_v4 (CONTEXT 15) a fifth
        of its time per chunk of prose. Between scans the region's chunks (`_parts`) only grow
        by appends, so the context is `_context` and then the chunks after the first
        `_context_count`; `_compact`, which a fast path may call, takes them up before it
        joins them, and a scan sets both at its end (whatever it did to `_parts`: only a scan
        opens, closes or drops a region). The null sink keeps no chunks: its fast path and
        `_route` keep its context as they go.
        """
        keep = self.CONTEXT
        parts = self._parts
        count = self._context_count
        if keep and count != len(parts):
            self._context = (self._context + "".join(parts[count:]))[-keep:]
            self._context_count = len(parts)
        return self._context

    def _bind_feed(self) -> None:
        """Let `feed` run the current state's generated fast path, if it has one.

        The implicit region's fast path only applies once it has opened: its first chunk
        must emit region_open, which only the scan loop does.
        """
        state = self._state
        if (
            state.fast
            and (self._opened or not state.implicit)
            and not (state.start_only and self._at_origin())
        ):
            self._fast = state
        else:
            self._fast = None

    def _at_origin(self) -> bool:
        """Whether nothing has been routed or consumed yet: the scan position is the stream's
        first position, where a `^` branch of a pattern may match (State.start_only). Past it
        the left context holds at least a character (CONTEXT >= 1 with a `^`), or, with no
        bound, the routed stream."""
        if self.CONTEXT is None:  # the context holds the held-back text too
            return len(self._context) == len(self._pending)
        return not self._left_context()

    def _process(self, events: list[Event], eos: bool) -> None:
        """Run scan steps until nothing more can be committed (docs/design.md, "One scan step")."""
        buf = self._buf
        size = len(buf)
        memo: dict[Any, Any] = {}
        if self._unmatched is not None:
            memo[self._unmatched] = None
            self._unmatched = None
        seen_at = -1
        seen: list[tuple[State, bool, int]] = []
        committed = False  # whether a step of this loop committed a match
        self._settled = False
        self._held_by = None  # set again below if this scan holds text for a pattern
        while True:
            state = self._state
            pos = self._pos
            # (A region is told by where it opened: one that ends here and one that opens
            # and ends here are not the same, and only the second may fail to parse.)
            opened = self._opened
            configuration = (state, opened, self._opened_at if opened else -1)
            if pos != seen_at:
                seen_at = pos
                seen = [configuration]
            elif configuration in seen:
                return  # progress rule: the reference would cycle here forever
            else:
                seen.append(configuration)

            if pos == size and not eos:
                # Nothing left to scan: any match from here would end at the buffer's end,
                # which more text could extend (pending), so the step would commit nothing.
                self._settled = True
                return
            if committed and not eos and state.starts is not None and not state.start_only:
                # The rest of a chunk after an open or a close (`6>\n<` after a call's
                # header, `\nChe` after `</tool_call>`): where no start text occurs in it,
                # the step is `_scan_feed`'s prefiltered route, one search (0.25 us against
                # 2.5 us for smollm3's content step, three delimiters).
                piece = self._held_unscanned(state, buf[pos:])
                if piece is not None:
                    hold = size if piece == -1 else pos + piece
                    if hold > pos:
                        self._accumulate(events, buf[pos:hold])
                        self._pos = hold
                    self._settled = True
                    return
            if (
                eos
                and size - pos <= SKIP_AFTER
                and state.starts is not None
                and not state.start_only
                and state.starts.search(buf, pos) is None
            ):
                # At the end of the stream, a short rest in which no start text occurs (the
                # text after an output's last delimiter): no match, and no partial one to
                # hold, so the step commits nothing; one search instead of one for each
                # delimiter (parse() of 5 characters of qwen3 content: 6.3 -> 4.4 us).
                best, hold = None, size
            else:
                # On a long rest of the buffer, the step's searches start where a match can.
                scan_from = pos if size - pos <= SKIP_AFTER else state.skip(buf, pos, memo)
                best, hold = state.scan(buf, scan_from, eos, memo)
            if best is not None:
                start, end, delim, match = best
                if start > pos:
                    self._accumulate(events, buf[pos:start])
                self._pos = end
                if delim.kind == OPEN:
                    if self._opened:  # (`_open` sets all that closing nothing would)
                        self._close_current(events)
                    self._open(events, delim.target, match, start)
                else:
                    # A zero-width close of a region that never opened returns to the same
                    # configuration: the progress rule ends the call there, as the reference does.
                    # One at the very end of a truncated output closes what was cut off.
                    cut = eos and self._truncated and start == end == size
                    # A region with no text at all: opened where this zero-width close is.
                    empty = (
                        start == end and self._opened_at == self._received() + self._base + start
                    )
                    failures = len(self._errors)
                    self._close_current(events, buf[start:end], cut=cut)
                    if empty and len(self._errors) > failures:  # it failed: lenient modes
                        self._step_past_failure(events, buf)
                committed = True
                continue

            if eos:
                if pos < size:
                    self._accumulate(events, buf[pos:])
                    self._pos = size
                self._close_current(events, cut=self._truncated)
                if self._opened:  # on_error="content" moved a failed region's text here
                    self._close_current(events)
                return
            if hold > pos:
                self._accumulate(events, buf[pos:hold])
                self._pos = hold
            holder = state.holder(buf, hold, memo) if hold < size else None
            self._held_by = None if holder is None else (state, holder, STOP, 0)
            self._settled = True
            return

    # -- what the scan finds, handed to runtime.regions ----------------------------------

    def _accumulate(self, events: list[Event], text: str) -> None:
        """Route `text` to the current state's region (opening it if it is not open)."""
        raise NotImplementedError

    def _chunk(self, text: str) -> Event:
        """Route `text` to the open region, which is a field's: its region_chunk event."""
        raise NotImplementedError

    def _step_past_failure(self, events: list[Event], buf: str) -> None:
        """After a lenient close that failed a region with no text at all: move the scan
        past the place where it opened."""
        raise NotImplementedError

    def _received(self) -> int:
        """Characters received so far: `_fed` and the chunks fast paths did not count."""
        raise NotImplementedError

    def _open(self, events: list[Event], state: State, match: Any, start: int) -> None:
        """Open `state`'s region: its open delimiter matched at `start` of the buffer."""
        raise NotImplementedError

    def _close_current(self, events: list[Event], closing: str = "", cut: bool = False) -> None:
        """Close the open region, if any, and return to the start state."""
        raise NotImplementedError


def _appended(parser: Scanner, text: str) -> str:
    """The parser's left context with `text` after it, taking the context from the parser.

    With no other reference to the context string, CPython grows it in place (amortised
    O(len(text))) instead of copying it: a parser whose look-behind cannot be bounded
    (CONTEXT None) keeps the whole stream, held-back text included, in linear time.
    """
    context = parser._context
    parser._context = ""
    context += text
    return context
