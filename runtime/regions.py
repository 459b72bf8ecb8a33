"""Regions and values: the text a parser routes to each field, and what it stores.

The other half of a parser (runtime.scanner finds the delimiters): a region's text is
kept as chunks joined in blocks (`_compact`), and at its close the field's generated close
code parses, transforms and stores its value and reports it as an event. The lenient
modes live here: `on_error="keep_raw"` keeps a failed region's raw text as the field's
value; `on_error="content"`, the server policy, routes it into the implicit field as text
(docs/design.md, part 3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from .automaton import ONE_SEARCH_SPAN, State
from .errors import FieldParseError
from .scanner import Event, Scanner, _appended
from .source_map import key_of
from .tools import TOOL_CALLS, coerce_tool_calls, require_names, tool_parameters

# What a parser does when a region's body does not parse: raise (the reference's
# behaviour); keep the raw text as the field's value and report it; or, the server
# policy, route the region's raw text into the implicit field (content) and report it.
ON_ERROR = frozenset({"raise", "keep_raw", "content"})

# A region's chunks are joined into one block every this many chunks (see _compact).
PARTS_PER_BLOCK = 256


@dataclass(frozen=True)
class OpenRegion:
    """A region still open after the text fed so far (see `CompiledParser.open_region`)."""

    field: str
    captures: dict[str, Any]  # the named groups its open delimiter captured
    # The field's generated close code, `close(parser, events)`: integrations.call_arguments runs it
    # on a trial object to see what a prefix of the body parses to.
    close: Callable[..., None]


class Regions(Scanner):
    """The open region's text, the message so far, and the lenient modes."""

    # Supplied by the generated subclass.
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    DEFAULT_KEYS: ClassVar[frozenset[str]] = frozenset()

    def _start_regions(
        self, tools: Iterable[dict[str, Any] | Callable[..., Any]] | None, on_error: str
    ) -> None:
        """No region open and the template's defaults as the message."""
        self._tool_params = tool_parameters(tools)
        self._on_error = on_error
        self._errors: list[dict[str, Any]] = []  # what the lenient modes recovered from
        self._output: dict[str, Any] = self._new_output()
        self._parts: list[str] = []  # the open region's latest chunks
        self._blocks: list[str] = []  # and its earlier ones, joined PARTS_PER_BLOCK at a time
        self._captures: dict[str, Any] = {}  # the open delimiter's named groups
        self._opened_at = 0  # offset where the open region opened
        # For on_error="content": the open delimiter's text, and how to take back the last
        # implicit region: (the field's value before it closed, its text, its offset).
        self._open_text = ""
        self._reopen: tuple[Any, str, int] | None = None

    def _new_output(self) -> dict[str, Any]:
        """A fresh copy of the template's `defaults`."""
        return {}

    def _accumulate(self, events: list[Event], text: str) -> None:
        field = self._state.field
        if field is None:
            return  # the null sink
        if not self._opened:
            events.append({"type": "region_open", "field": field})
            self._opened = True
            self._opened_at = self._received() + self._base + self._pos
        events.append(self._chunk(text))

    def _chunk(self, text: str) -> Event:
        state = self._state
        parts = self._parts
        parts.append(text)
        self._fed -= len(text)  # counted as received: now it is in `_parts`
        if len(parts) >= PARTS_PER_BLOCK:
            self._compact()
        return {"type": "region_chunk", "field": state.field, "text": text, "dirty": state.dirty}

    def _feed_piece(self, text: str) -> list[Event]:
        """`_scan_feed` for a chunk that a generated fast path does not route itself: one
        after held-back text, or one a watched delimiter may start in.

        On text dense in `<` (code, HTML, math) that is one chunk in eight, and mostly
        `_scan_feed`'s prefiltered route: no start text in the held-back text and the chunk,
        which go to the open region less a piece of one at their end, held back. Where that
        route is one search (`State.quick_route`), it is taken here without another call
        (4-character chunks dense in `<`, smollm3's thinking: 0.61 to 0.58 us a chunk);
        before it, a longer piece of a start text is held with one look-up
        (State.held_pieces), and where it finds a start text, the scan is entered directly
        (`Scanner._scan_chunk`). Anything else goes to `_scan_feed`, before anything
        changes. A bounded left context is brought up to date from the region's chunks when
        read (`Scanner._left_context`), so the routed text needs no other place (xlam and
        ernie, 4-character chunks of content dense in `<`: 0.52-0.60 to 0.43 us a chunk,
        0.48-0.49 to 0.40); the whole stream (CONTEXT None) grows by the chunk here
        (llama3_json, a chunk after a held `<`: 3.1 to about 1.2 us, timed around the call).
        """
        state = self._state
        buf = self._pending + text
        if text and buf in state.held_pieces and self._waiting is None and self.CONTEXT is not None:
            # A longer piece of a start text: held back, as the search below would hold it.
            self._pending = buf
            return []
        find = state.quick_route
        if (
            find is None
            or not text
            or len(buf) > ONE_SEARCH_SPAN
            or not self._opened
            # (at the stream's start a `^` branch may match: State.start_only)
            or (self.CONTEXT and not self._context and self._at_origin())
            or (self.CONTEXT is None and self._at_origin())
            or self._held_by is not None
            or self._waiting is not None
            or self._finalized
        ):
            return self._scan_feed(text)
        match = find.search(buf)
        if match is None:
            routed = buf
            self._pending = ""
        elif match.lastgroup:  # a start text: only a scan can tell what it starts
            if state.broken_run is not None and self.CONTEXT == 0:
                return self._scan_feed(text)  # (which may route a broken run without one)
            return self._scan_chunk(state, text)
        else:  # a piece of one at the end (or a run before it, or before the end), held back
            held = match.start()
            guarded = state.guarded_piece
            if guarded is not None and guarded.search(buf, held) is not None:
                return self._scan_feed(text)  # a piece a look-behind may refuse: a scan decides
            routed = buf[:held]
            self._pending = buf[held:]
        if self.CONTEXT is None:  # the whole stream, held-back text included, grows by the chunk
            self._context = _appended(self, text)
        if not routed:
            return []
        # `_chunk`, written out: calling it gave back half of the gain (0.575 -> 0.588 us).
        parts = self._parts
        parts.append(routed)
        if len(parts) >= PARTS_PER_BLOCK:
            self._compact()
        return [
            {"type": "region_chunk", "field": state.field, "text": routed, "dirty": state.dirty}
        ]

    def _open(self, events: list[Event], state: State, match: Any, start: int) -> None:
        self._state = state
        self._opened_at = self._received() + self._base + start
        if self._on_error == "content":
            self._open_text = self._buf[start : self._pos]
        if match is None:
            self._captures = {}
        else:
            self._captures = {
                key: value for key, value in match.groupdict().items() if value is not None
            }
        self._drop_parts()
        self._opened = True
        events.append({"type": "region_open", "field": state.field})

    def _close_current(self, events: list[Event], closing: str = "", cut: bool = False) -> None:
        """Close the open region (if any) and return to the start state. `closing` is the
        text of the close delimiter that ended it ("" at end of stream); `cut`: the output
        ended there, cut off (finalize(truncated=True)), which fails a tool call."""
        if self._opened:
            state = self._state
            cut = cut and state.field == TOOL_CALLS and state is not self.START
            if self._on_error != "raise":  # the lenient modes keep the raw text
                if self._close_keeping_raw(state, events, closing, cut):
                    return  # on_error="content": the implicit region took the raw text
            else:
                self._close_or_raise(state, events, cut)
        self._state = self.START
        self._captures = {}
        self._drop_parts()
        self._opened = False

    def _close_or_raise(self, state: State, events: list[Event], cut: bool) -> None:
        """on_error="raise": run the field's close code; a failure is raised located
        (`_locate`), and the region stays open with its text."""
        try:
            if cut:
                raise ValueError(_CUT_OFF)
            state.close(self, events)  # type: ignore[misc]
        except Exception as error:
            located = self._locate(error, state)
            if located is error:
                raise
            raise located from error

    def _locate(self, error: Exception, state: State) -> Exception:
        """The error, saying which field failed, the template key whose code failed, and
        where its region opened: a FieldParseError (a ValueError) for plain ValueErrors,
        else the same error with a note, so that the exception class stays the reference's."""
        key = self._key_of(error, state)
        if type(error) is ValueError:
            return FieldParseError(state.field or "", self._opened_at, error, key)
        if hasattr(error, "add_note"):  # Python 3.11+
            where = f" ({key})" if key else ""
            error.add_note(
                f"while closing field {state.field!r}{where}, whose region opened at offset "
                f"{self._opened_at}"
            )
        return error

    def _key_of(self, error: BaseException, state: State) -> str | None:
        """The template key path of the generated code that raised `error` (source_map)."""
        close = state.close
        return key_of(error, close.__globals__) if close is not None else None

    def _close_keeping_raw(
        self, state: State, events: list[Event], closing: str, cut: bool
    ) -> bool:
        """on_error="keep_raw" or "content": a body that does not parse is kept as its raw
        text, as the field's value, or (content) as text of the implicit region, which is
        then left open for the text that follows. True in that last case.

        Under "content" (the server policy) a tool call that parses but names no function
        fails too: its region's value is undone and its text goes into content.
        """
        raw = self._body()
        field = state.field
        assert field is not None
        implicit = self.START
        content_mode = self._on_error == "content"
        if content_mode and state is implicit:
            before = self._output.get(field, _MISSING)
            if isinstance(before, list):
                before = list(before)  # appends to it may happen in place
        checked = content_mode and field == TOOL_CALLS and state is not implicit
        if checked:
            stored = self._output.get(field, _MISSING)
            # The calls stored before this region (`repeats` and x-extend add to one list).
            count = len(stored) if isinstance(stored, list) else -1
        try:
            if cut:
                raise ValueError(_CUT_OFF)
            state.close(self, events)  # type: ignore[misc]
            if checked:
                try:
                    require_names(events[-1]["value"])
                except ValueError:
                    events.pop()  # the region_close the close code sent
                    _restore(self._output, field, stored, count)
                    raise
            if content_mode:
                # Only an implicit region that an open closed (no close text of its own)
                # can be taken back: the failed region's text then follows it directly.
                adjacent = state is implicit and not closing
                self._reopen = (before, raw, self._opened_at) if adjacent else None
            return False
        except Exception as error:  # recovering from any failure is the point of this mode
            described = _describe(error, self._key_of(error, state))
        if content_mode and state is not implicit:
            self._recover_as_text(events, field, described, self._open_text + raw + closing)
            return implicit.field is not None
        record = {"field": field, "offset": self._opened_at, "error": described, "raw": raw}
        self._errors.append(record)
        events.append({"type": "region_error", **record})
        output = self._output
        try:
            if state.store == "append":
                output.setdefault(field, []).append(raw)
            elif state.store == "join":
                join_text(output, field, state.join, raw)
            else:
                output[field] = raw
        except (AttributeError, TypeError):  # defaults of another type: keep the text anyway
            output[field] = raw
        events.append({"type": "region_close", "field": field, "value": raw})
        return False

    def _step_past_failure(self, events: list[Event], buf: str) -> None:
        r"""on_error="keep_raw" or "content", after a close that failed a region with no text
        at all: a zero-width open and a zero-width close at one place, such as
        pythonic's `[a.b(x=1)][c.d(y=2)]`, whose second list opens where the close
        `(?<=\)\])\s*` matches at once, looking behind at the first list's end. The scan is
        back where that region opened, in the implicit region (or the null sink), where
        the same open matches again and the region fails again: the progress rule would
        stop the scan there, and the rest of the output would reach no region. The
        character there goes to the implicit region as text instead (the null sink drops
        it), and the scan goes on after it. Whatever came before, the failure and this
        step come at the same place, so the chunking does not change where the text goes.
        Nothing is left to step past at the end of the buffer: there the scan ends."""
        pos = self._pos
        if pos < len(buf):
            self._accumulate(events, buf[pos])
            self._pos = pos + 1

    def _recover_as_text(
        self, events: list[Event], field: str, described: dict[str, str], text: str
    ) -> None:
        """on_error="content": the failed region's text becomes text of the implicit region,
        as if the model had written it as plain text. When the implicit region closed just
        because this region opened, that region is taken back (its stored value undone)
        and goes on with this text, so "Hi <tool_call>{bad" gives content "Hi <tool_call>{bad"
        whatever the field's store mode; its region_close event stays as it was sent."""
        implicit = self.START
        undo, self._reopen = self._reopen, None
        if implicit.field is None:
            undo = None
        record = {"field": field, "offset": self._opened_at, "error": described, "raw": text}
        self._errors.append(record)
        # `resumed`: the text goes on with the implicit region this region's opening closed.
        events.append(
            {
                "type": "region_error",
                **record,
                "recovered_as": implicit.field,
                "resumed": undo is not None,
            }
        )
        self._state = implicit
        self._captures = {}
        self._drop_parts()
        self._opened = False
        if implicit.field is None:  # no implicit field: the text is reported, not kept
            return
        if not text and undo is None:  # a region with no text (an empty open and close)
            return  # gives the implicit region none: it does not open for it
        offset = self._opened_at
        self._accumulate(events, text)
        self._opened_at = offset
        if undo is not None:
            before, earlier, self._opened_at = undo
            if before is _MISSING:
                self._output.pop(implicit.field, None)
            else:
                self._output[implicit.field] = before
            self._parts.insert(0, earlier)
            self._fed -= len(earlier)

    def _compact(self) -> None:
        """Join the region's small chunks into one block.

        A long region arrives as hundreds of thousands of small chunks; kept as separate
        strings they would cost some fifty bytes each. Blocks keep memory near the text's
        own size, and each character is copied once more, not once per chunk.
        """
        if self.CONTEXT:  # (a fast path may call it: the context takes up the chunks first)
            self._left_context()
        block = "".join(self._parts)
        self._blocks.append(block)
        self._parts = []
        self._context_count = 0
        self._fed += len(block)

    def _drop_parts(self) -> None:
        """Empty the region's text (its characters stay received)."""
        parts = self._parts
        if parts:
            self._fed += sum(map(len, parts))
            self._parts = []
        self._blocks = []

    def _received(self) -> int:
        # Regions keep the chunks a fast path did not count in `_parts` (Scanner._fed).
        return self._fed + sum(map(len, self._parts)) + len(self._pending)

    def _body(self) -> str:
        """The open region's whole text, kept as one part: a close that raises leaves the
        region as it was, as the reference does, and a later close sees the same text."""
        parts = self._parts
        if not self._blocks and len(parts) == 1:
            return parts[0]
        latest = "".join(parts)
        self._blocks.append(latest)
        body = "".join(self._blocks)
        self._blocks = []
        self._parts = [body]
        self._fed -= len(body) - len(latest)  # the earlier blocks' text is in `_parts` now
        return body

    def _coerce(self, value: Any) -> Any:
        """Cast tool-call arguments with the tools' JSON schemas, when tools were given."""
        if self._tool_params:
            return coerce_tool_calls(value, self._tool_params)
        return value


_CUT_OFF = "the output was cut off (truncated) before the tool call's close delimiter"


def _restore(output: dict[str, Any], field: str, stored: Any, count: int) -> None:
    """Undo the store of one region's value: `stored` was the field's value before it,
    `count` that value's length when it was a list (the store may have added to it)."""
    if stored is _MISSING:
        output.pop(field, None)
    elif output.get(field) is stored and isinstance(stored, list):
        del stored[count:]
    else:
        output[field] = stored


_MISSING: Any = object()  # a field with no value yet


def _describe(error: BaseException, key: str | None = None) -> dict[str, str]:
    """A parse_errors record's `error`: the exception's class and message, and the
    template key path whose code raised it, when known."""
    described = {"type": type(error).__name__, "message": str(error)}
    if key:
        described["key"] = key
    return described


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (list, dict, str)) and not value)


def require_str(value: Any, field: str) -> str:
    """`join` concatenates strings only."""
    if not isinstance(value, str):
        raise ValueError(
            f"Field {field!r}: 'join' requires each match to parse to a string, got {type(value).__name__}."
        )
    return value


def join_text(output: dict[str, Any], field: str, join: str, value: Any) -> None:
    """`join`: a region's string added to the field's text so far, after `join`.

    The output's reference to that text is dropped first, so that `+=` finds the text
    referenced once and CPython extends it in place, as it does a string built up in a
    local variable: a new copy of the whole text at each region made a field joined over
    thousands of regions quadratic (1,000 regions of 300 characters: 75 ms, 0.3 ms in
    place; parse() of 1.3M characters of parallel calls). A text of another type (a
    template's default) is added to as before, and raises the same error, unchanged."""
    text = require_str(value, field)
    previous = output.get(field)
    if previous is None:
        output[field] = text
    elif previous.__class__ is not str:
        output[field] = previous + join + text
    else:
        output[field] = ""  # (its place in the output's order kept)
        previous += join + text
        output[field] = previous
