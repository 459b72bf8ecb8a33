"""The end of a stream in one pass: `finalize(text)`, and so `parse()`, over a whole output.

`scan_to_end(parser, text, events)` does what `Scanner._run(text, events, eos=True)`
does, the scan loop of docs/design.md at the end of the stream, with the same scan steps
in the same order, the same events and the same message. At the end of the stream no
match is partial or pending, so a step commits its best match or routes the rest; this
loop writes out the regions' bookkeeping that the general loop reaches through its hooks
(`_accumulate`, `_chunk`, `_open`, `_close_current`, `_drop_parts`, `_received`): on a
whole output, one call per region crossing instead of ten (hermes, 16 parallel calls in
one shot: see docs/design.md, "One-shot parsing"). A close that fails goes through the
same code as in the general loop (`Regions._close_keeping_raw`, `Regions._close_or_raise`).
tests/test_oneshot.py checks that the two loops give the same events, message and errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import errors, regions, scanner
from .automaton import OPEN
from .scanner import Event
from .tools import TOOL_CALLS

if TYPE_CHECKING:
    from .regions import Regions

__all__ = ["scan_to_end"]


def scan_to_end(parser: Regions, text: str, events: list[Event]) -> None:
    """Scan the held-back text plus `text` as the end of the stream, under the parser's
    regex time bound: `parser._run(text, events, eos=True)`, in one pass."""
    if parser._regex_timeout is None:
        _scan(parser, text, events)
    else:
        with errors.bounded_by(parser._regex_timeout):
            _scan(parser, text, events)


def _scan(p: Regions, text: str, events: list[Event]) -> None:
    buf, size0 = p._open_window(text)  # left context, held-back text, the text
    # `_received()` stays the same while the loop runs (a chunk moves text from `_fed`
    # to `_parts`, a drop moves it back): a region opening at buffer index i opened at
    # stream offset `origin + i`.
    origin = p._received() + p._base
    p._held_by = None
    p._settled = False
    size = len(buf)
    # (read here, not imported: tests shrink them, differential.shrunk_thresholds)
    skip_after, per_block = scanner.SKIP_AFTER, regions.PARTS_PER_BLOCK
    memo: dict[object, object] = {}
    if p._unmatched is not None:  # (as Scanner._process: a held match that never completed)
        memo[p._unmatched] = None
        p._unmatched = None
    start_state = p.START
    lenient = p._on_error != "raise"
    content_mode = p._on_error == "content"
    truncated = p._truncated
    state, opened, parts = p._state, p._opened, p._parts
    pos = size0
    # The progress rule (runtime.scanner): the configurations seen at this position.
    seen_at = -1
    seen: list[tuple[object, bool, int]] = []
    try:
        while True:
            configuration = (state, opened, p._opened_at if opened else -1)
            if pos != seen_at:
                seen_at = pos
                seen = [configuration]
            elif configuration in seen:
                return
            else:
                seen.append(configuration)

            if (
                size - pos <= skip_after
                and state.starts is not None
                and not state.start_only
                and state.starts.search(buf, pos) is None
            ):
                best = None  # a short rest where no start text occurs (as Scanner._process)
            else:
                # On a long rest, the searches of a state with patterns start where a match
                # can (State.skip); a state of literals only searches for them from `pos`
                # (State.next_literal), so asking first would search twice.
                scan_from = pos
                if size - pos > skip_after and state.patterns:
                    scan_from = state.skip(buf, pos, memo)
                best, _ = state.scan(buf, scan_from, True, memo)
            if best is not None:
                start, end, delim, match = best
            else:
                start = end = size
            field = state.field
            if start > pos and field is not None:  # the text before it, to the region
                piece = buf[pos:start]
                if not opened:
                    events.append({"type": "region_open", "field": field})
                    opened = p._opened = True
                    p._opened_at = origin + pos
                parts.append(piece)
                p._fed -= len(piece)
                if len(parts) >= per_block:
                    p._compact()
                    parts = p._parts
                events.append(
                    {"type": "region_chunk", "field": field, "text": piece, "dirty": state.dirty}
                )
            pos = p._pos = end
            if best is None or delim.kind != OPEN:  # a close, or the end: close the region
                # A region with no text at all (opened where this zero-width close is) that
                # fails: lenient modes step past it (as Scanner._process does).
                empty = start == end and opened and p._opened_at == origin + start
                failures = len(p._errors)
                if opened:
                    # A tool call cut off at the end (finalize(truncated=True)) fails.
                    cut = (
                        truncated
                        and start == end == size
                        and field == TOOL_CALLS
                        and state is not start_state
                    )
                    if not lenient:
                        p._close_or_raise(state, events, cut)
                    elif p._close_keeping_raw(state, events, buf[start:end], cut):
                        # on_error="content": the implicit region took the raw text and
                        # stays open; at the end it closes (as Scanner._process does).
                        if best is None:
                            p._close_current(events)
                            return
                        if empty and len(p._errors) > failures:
                            p._step_past_failure(events, buf)
                            pos = p._pos
                        state, opened, parts = p._state, p._opened, p._parts
                        continue
                parts = p._parts  # (the close may have joined the chunks: Regions._body)
                if parts:
                    p._fed += sum(map(len, parts))
                state = p._state = start_state
                p._captures = {}
                parts = p._parts = []
                p._blocks = []
                opened = p._opened = False
                if best is None:
                    return
                if empty and len(p._errors) > failures:  # (on_error="keep_raw")
                    p._step_past_failure(events, buf)
                    pos, opened, parts = p._pos, p._opened, p._parts
                continue
            # An open: the implicit region (or the sink) closes, the field's region opens.
            if opened:
                if lenient:  # (never taken back into the implicit region: it is that region)
                    p._close_keeping_raw(state, events, "", False)
                else:
                    p._close_or_raise(state, events, False)
                parts = p._parts
                if parts:
                    p._fed += sum(map(len, parts))
                parts = p._parts = []
                p._blocks = []
            state = p._state = delim.target
            p._opened_at = origin + start
            if content_mode:
                p._open_text = buf[start:end]
            if match is None:
                p._captures = {}
            else:
                p._captures = {
                    key: value for key, value in match.groupdict().items() if value is not None
                }
            opened = p._opened = True
            events.append({"type": "region_open", "field": state.field})
    finally:
        p._close_window(size0)  # as Scanner._scan leaves it (at the end nothing waits)
        p._bind_feed()
