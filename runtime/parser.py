"""The base class every generated parser subclasses: the streaming contract and scan loop.

A generated module supplies the per-model parts as class attributes and methods: its
states (`START`, each with its delimiter automaton and fast path), one `_close_<field>`
method per field, the start anchor, the defaults and the required fields. This class
supplies what is the same for every model: the scan loop of docs/design.md ("One scan step"),
event routing, finalisation, and the public API.

Event-for-event compatibility with transformers 5.23.0 is the contract; the tests check
it differentially. Two things differ by design and change no event:
- the buffer is a window (held-back text plus the left context regex delimiters may look
  behind into), so a feed costs O(chunk), not O(stream);
- the progress rule below, which stops where the reference would loop forever.

Progress rule: within one feed() or finalize() call, the scan loop never revisits a
configuration (position, state, opened). The reference's next step is a function of that
configuration, so a repeat means it would cycle forever (zero-width delimiters, e.g. an
open_pattern and close_pattern that are both `$`). We stop at the repeat. The reference's
own rule, which ends the loop after a zero-width close of a region that never opened, is
the one case of this it handles itself; the text from that position on stays unrouted
there too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from . import errors
from .automaton import OPEN, HeldRun, State
from .errors import FieldParseError, MissingFieldError
from .tools import coerce_tool_calls, tool_parameters

Event = dict[str, Any]

# What a parser does when a region's body does not parse: raise (the reference's
# behaviour); keep the raw text as the field's value and report it; or, the server
# policy, route the region's raw text into the implicit field (content) and report it.
ON_ERROR = frozenset({"raise", "keep_raw", "content"})

# Held-back text this long is checked for a match that only a known text can change
# (CompiledParser._wait); shorter holds are simply rescanned.
WAIT_AFTER = 1024

# A region's chunks are joined into one block every this many chunks (see _compact).
PARTS_PER_BLOCK = 256

# finalize() stores this in `_pending`: every fast path tests `_pending` first, so any later
# feed reaches the slow path, which raises. That keeps the fast paths free of extra checks.
_FINALIZED = "\x00<finalized>"


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (list, dict, str)) and not value)


class CompiledParser:
    """Streaming parser for one response template (see the generated subclass)."""

    # Supplied by the generated subclass.
    START: ClassVar[State]
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    DEFAULT_KEYS: ClassVar[frozenset[str]] = frozenset()
    # Characters of already-routed text that regex delimiters may look behind into
    # (`^`, `\b`, look-behind); None when that cannot be bounded, so nothing is dropped.
    CONTEXT: ClassVar[int | None] = 0
    # Held-back text this long is checked for a match only a known text can change.
    WAIT_AFTER: ClassVar[int] = WAIT_AFTER

    initial_events: list[Event]

    def __init__(
        self,
        prefix: str | None = None,
        *,
        tools: Iterable[dict[str, Any] | Callable[..., Any]] | None = None,
        on_error: str = "raise",
        regex_timeout: float | None = None,
    ) -> None:
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {sorted(ON_ERROR)}, got {on_error!r}")
        if prefix is None:
            raise ValueError(
                "prefix is required: pass the chat prompt that preceded generation, because chat "
                "templates often pre-write part of the assistant message (an opening <think>, "
                'a prefill). If the generation holds the complete message, pass prefix="".'
            )
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
        if regex_timeout is not None and not (
            isinstance(regex_timeout, (int, float))
            and not isinstance(regex_timeout, bool)
            and 0 < regex_timeout < float("inf")
        ):
            raise ValueError(f"regex_timeout must be a positive number, got {regex_timeout!r}")
        # Seconds of CPU time per template-regex search (None: runtime.errors.REGEX_TIMEOUT).
        self._regex_timeout = regex_timeout
        self._tool_params = tool_parameters(tools)
        self._on_error = on_error
        self._keep_raw = on_error != "raise"
        self._errors: list[dict[str, Any]] = []  # what keep_raw recovered from
        self._output: dict[str, Any] = self._new_output()
        self._state = self.START
        self._opened = False
        self._parts: list[str] = []  # the open region's latest chunks
        self._blocks: list[str] = []  # and its earlier ones, joined PARTS_PER_BLOCK at a time
        self._captures: dict[str, Any] = {}
        self._pending = ""
        self._context = ""
        self._buf = ""
        self._pos = 0
        # Offsets count characters of generated text: the prefix's tail comes before 0.
        self._fed = 0  # characters received so far (fast paths count them too)
        self._base = 0  # offset of _buf[0]
        self._opened_at = 0  # offset where the open region opened
        # For on_error="content": the open delimiter's text, and how to take back the last
        # implicit region: (the field's value before it closed, its text, its offset).
        self._open_text = ""
        self._reopen: tuple[Any, str, int] | None = None
        # While a held match can only change when a given text arrives (RegexDelimiter.waits):
        # (literal, stop characters, the held text's last characters) and the text since.
        self._waiting: tuple[HeldRun, str] | None = None
        self._waited: list[str] = []
        self._waiting_on: Any = None  # the delimiter waited on
        self._unmatched: Any = None  # a delimiter known to have no complete match left
        self._finalized = False
        self._feed_path: Callable[[CompiledParser, str], list[Event]] = CompiledParser._scan_feed
        self.initial_events = []
        if prefix:
            with errors.bounded_by(regex_timeout):
                tail = self._after_last_anchor(prefix)
            if tail:
                self._fed = -len(tail)
                self._run(tail, self.initial_events, eos=False)
        self._bind_feed()

    # -- public API ------------------------------------------------------------------

    def feed(self, text: str) -> list[Event]:
        """Feed generated text; return the events it completes.

        The work is done by the current state's generated fast path or by the scan loop
        (`_feed_path`, a plain function: the parser holds no reference to itself).
        Anything but a str raises TypeError and changes nothing.
        """
        if text.__class__ is str:
            return self._feed_path(self, text)
        if isinstance(text, str):  # a str subclass: parse its plain-str value
            return self._feed_path(self, str(text))
        raise TypeError(f"feed() takes a str, got {type(text).__name__}")

    def finalize(self) -> tuple[dict[str, Any], list[Event]]:
        """End the stream: flush, close every open region, return (message, events)."""
        if self._finalized:
            raise RuntimeError("parser already finalized")
        if self._waiting is not None:
            # Still waiting: the literal that could complete the held match never came, so
            # at the end of stream that delimiter has no match (no need to search for one).
            if self._waiting[0].literal:
                self._unmatched = self._waiting_on
            self._wake(None)
        events: list[Event] = []
        self._run("", events, eos=True)
        output = self._output
        missing = [name for name in self.REQUIRED if name not in output]
        if missing:
            error = MissingFieldError(missing)
            if not self._keep_raw:
                raise error
            self._errors.append(
                {"field": None, "offset": None, "error": _describe(error), "raw": None}
            )
        keep = self.DEFAULT_KEYS
        output = {
            key: value for key, value in output.items() if key in keep or not _is_empty(value)
        }
        if self._errors:
            output["parse_errors"] = list(self._errors)
        self._output = output
        self._finalized = True
        self._pending = _FINALIZED
        return output, events

    @classmethod
    def parse(
        cls,
        text: str,
        *,
        prefix: str | None,
        tools: Iterable[dict[str, Any] | Callable[..., Any]] | None = None,
        on_error: str = "raise",
        regex_timeout: float | None = None,
    ) -> dict[str, Any]:
        """Parse one complete generation; return the message dict."""
        parser = cls(prefix, tools=tools, on_error=on_error, regex_timeout=regex_timeout)
        parser._feed_whole(text)
        return parser.finalize()[0]

    def _feed_whole(self, text: str) -> list[Event]:
        """`feed(text)` for a text known to be the whole generation (parse()): one scan
        over it, without first asking (as feed's fast paths do, each one pass over the
        text) whether a scan is needed, which it almost always is for a whole output.
        Same events and state as feed(text) (tests/test_oneshot.py checks it)."""
        if text.__class__ is not str or self._waiting is not None or self._finalized:
            return self.feed(text)  # the type check, and waiting on a held match
        events: list[Event] = []
        self._run(text, events, eos=False)
        return events

    # -- supplied by the generated subclass ------------------------------------------------

    def _new_output(self) -> dict[str, Any]:
        """A fresh copy of the template's `defaults`."""
        return {}

    # -- scanning --------------------------------------------------------------------

    def _after_last_anchor(self, prefix: str) -> str:
        """The prefix cut just after the last start-anchor match (whole prefix if none)."""
        raise NotImplementedError  # generated

    def _scan_feed(self, text: str) -> list[Event]:
        """The general path of feed(): scan the held-back text plus this chunk.

        Generated fast paths call it for every chunk they cannot route on their own.
        """
        if self._finalized:
            raise RuntimeError("parser already finalized")
        if self._waiting is not None and not self._wake(text):
            self._fed += len(text)
            return []
        state = self._state
        if state.starts is not None and text:
            # Two outcomes of a scan step need no scan: nothing in the text can start a
            # delimiter (route it all), or only its end can, as a piece of one (hold that).
            buf = self._pending + text
            if state.starts.search(buf) is None:
                piece = state.piece_at_end(buf)
                if piece == -1 or state.plain_tails:
                    self._base = self._fed - len(self._pending)
                    self._pos = 0
                    self._fed += len(text)
                    if piece == -1:
                        return self._route(buf, "", text)
                    return self._route(buf[:piece], buf[piece:], text)
        events: list[Event] = []
        self._run(text, events, eos=False)
        return events

    def _route(self, text: str, held: str, chunk: str) -> list[Event]:
        """Send `text` to the current region and hold `held`, as a scan step would (`text`
        + `held` is the held-back text and the new `chunk`)."""
        keep = self.CONTEXT
        if keep is None:  # the stream so far, held-back text included: add the new chunk
            self._context = _appended(self, chunk)
        elif keep:
            self._context = (self._context + text)[-keep:]
        self._pending = held
        if not text:
            return []
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
        if self.CONTEXT is None:  # the context already ends with the held-back text
            size = len(self._context) - len(self._pending)
            buf = _appended(self, text)
        else:
            size = len(self._context)
            buf = self._context + self._pending + text
        self._base = self._fed - len(self._pending) - size
        self._buf = buf
        self._pos = size
        state, opened = self._state, self._opened
        try:
            self._process(events, eos)
            if not eos and len(buf) - self._pos >= self.WAIT_AFTER:
                self._wait(buf, self._pos)
        finally:
            self._fed += len(text) if text else 0
            buf, pos = self._buf, self._pos
            self._pending = buf[pos:]
            keep = self.CONTEXT
            if keep is None:  # the whole stream, held-back text included
                self._context = buf
            elif keep:
                self._context = buf[max(0, pos - keep) : pos]
            self._buf = ""
            if self._state is not state or self._opened is not opened:
                self._bind_feed()

    def _wait(self, buf: str, hold: int) -> None:
        """Stop rescanning a long held-back stretch that only a known text can change."""
        for delim in self._state.patterns:
            run = delim.waits(buf, hold)
            if run is not None:
                self._waiting = (run, _last(buf, len(run.literal) - 1))
                self._waiting_on = delim
                return

    def _wake(self, text: str | None) -> bool:
        """While waiting: True (and back to scanning) once `text` could change the held
        match; otherwise keep it aside, in O(len(text)). None wakes unconditionally."""
        assert self._waiting is not None
        if text is not None:
            if not text:
                return False
            run, recent = self._waiting
            if not run.wakes(text, recent):
                self._waited.append(text)
                if run.literal:
                    self._waiting = (run, _last(recent + text, len(run.literal) - 1))
                return False
        waited = "".join(self._waited)
        self._pending += waited
        if self.CONTEXT is None:
            self._context = _appended(self, waited)
        self._waited = []
        self._waiting = None
        return True

    def _append_context(self, text: str) -> None:
        """Fast paths of CONTEXT None parsers: the whole stream grows by `text`."""
        self._context = _appended(self, text)

    def _bind_feed(self) -> None:
        """Point `feed` at the current state's generated fast path, if it has one.

        The implicit region's fast path only applies once it has opened: its first chunk
        must emit region_open, which only the scan loop does.
        """
        state = self._state
        fast = state.feed
        if fast is not None and (self._opened or not state.implicit):
            self._feed_path = fast
        else:
            self._feed_path = CompiledParser._scan_feed

    def _process(self, events: list[Event], eos: bool) -> None:
        """Run scan steps until nothing more can be committed (docs/design.md, "One scan step")."""
        buf = self._buf
        size = len(buf)
        memo: dict[Any, Any] = {}
        if self._unmatched is not None:
            memo[self._unmatched] = None
            self._unmatched = None
        seen_at = -1
        seen: list[tuple[State, bool]] = []
        while True:
            state = self._state
            pos = self._pos
            configuration = (state, self._opened)
            if pos != seen_at:
                seen_at = pos
                seen = [configuration]
            elif configuration in seen:
                return  # progress rule: the reference would cycle here forever
            else:
                seen.append(configuration)

            best, hold = state.scan(buf, pos, eos, memo)
            if best is not None:
                start, end, delim, match = best
                if start > pos:
                    self._accumulate(events, buf[pos:start])
                self._pos = end
                if delim.kind == OPEN:
                    self._close_current(events)
                    self._open(events, delim.target, match, start)
                else:
                    # A zero-width close of a region that never opened returns to the same
                    # configuration: the progress rule ends the call there, as the reference does.
                    self._close_current(events, buf[start:end])
                continue

            if eos:
                if pos < size:
                    self._accumulate(events, buf[pos:])
                    self._pos = size
                self._close_current(events)
                if self._opened:  # on_error="content" moved a failed region's text here
                    self._close_current(events)
                return
            if hold > pos:
                self._accumulate(events, buf[pos:hold])
                self._pos = hold
            return

    def _accumulate(self, events: list[Event], text: str) -> None:
        state = self._state
        field = state.field
        if field is None:
            return  # the null sink
        if not self._opened:
            events.append({"type": "region_open", "field": field})
            self._opened = True
            self._opened_at = self._base + self._pos
        parts = self._parts
        parts.append(text)
        if len(parts) >= PARTS_PER_BLOCK:
            self._compact()
        events.append({"type": "region_chunk", "field": field, "text": text, "dirty": state.dirty})

    def _open(self, events: list[Event], state: State, match: Any, start: int) -> None:
        self._state = state
        self._opened_at = self._base + start
        if self._on_error == "content":
            self._open_text = self._buf[start : self._pos]
        if match is None:
            self._captures = {}
        else:
            self._captures = {
                key: value for key, value in match.groupdict().items() if value is not None
            }
        self._parts = []
        self._blocks = []
        self._opened = True
        events.append({"type": "region_open", "field": state.field})

    def _close_current(self, events: list[Event], closing: str = "") -> None:
        """Close the open region (if any) and return to the start state. `closing` is the
        text of the close delimiter that ended it ("" at end of stream)."""
        if self._opened:
            state = self._state
            if self._keep_raw:
                if self._close_keeping_raw(state, events, closing):
                    return  # on_error="content": the implicit region took the raw text
            else:
                try:
                    state.close(self, events)  # type: ignore[misc]
                except Exception as error:
                    located = self._locate(error, state)
                    if located is error:
                        raise
                    raise located from error
        self._state = self.START
        self._captures = {}
        self._parts = []
        self._blocks = []
        self._opened = False

    def _locate(self, error: Exception, state: State) -> Exception:
        """The error, saying which field failed and where its region opened: a
        FieldParseError (a ValueError) for plain ValueErrors, else the same error with a
        note, so that the exception class stays the reference's."""
        if type(error) is ValueError:
            return FieldParseError(state.field or "", self._opened_at, error)
        if hasattr(error, "add_note"):  # Python 3.11+
            error.add_note(
                f"while closing field {state.field!r}, whose region opened at offset {self._opened_at}"
            )
        return error

    def _close_keeping_raw(self, state: State, events: list[Event], closing: str) -> bool:
        """on_error="keep_raw" or "content": a body that does not parse is kept as its raw
        text, as the field's value, or (content) as text of the implicit region, which is
        then left open for the text that follows. True in that last case."""
        raw = self._body()
        field = state.field
        assert field is not None
        implicit = self.START
        content_mode = self._on_error == "content"
        if content_mode and state is implicit:
            before = self._output.get(field, _MISSING)
            if isinstance(before, list):
                before = list(before)  # appends to it may happen in place
        try:
            state.close(self, events)  # type: ignore[misc]
            if content_mode:
                # Only an implicit region that an open closed (no close text of its own)
                # can be taken back: the failed region's text then follows it directly.
                adjacent = state is implicit and not closing
                self._reopen = (before, raw, self._opened_at) if adjacent else None
            return False
        except Exception as error:  # recovering from any failure is the point of this mode
            described = _describe(error)
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
            elif state.store == "join" and output.get(field) is not None:
                output[field] = output[field] + state.join + raw
            else:
                output[field] = raw
        except (AttributeError, TypeError):  # defaults of another type: keep the text anyway
            output[field] = raw
        events.append({"type": "region_close", "field": field, "value": raw})
        return False

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
        self._parts = []
        self._blocks = []
        self._opened = False
        if implicit.field is None:  # no implicit field: the text is reported, not kept
            return
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

    def _compact(self) -> None:
        """Join the region's small chunks into one block.

        A long region arrives as hundreds of thousands of small chunks; kept as separate
        strings they would cost some fifty bytes each. Blocks keep memory near the text's
        own size, and each character is copied once more, not once per chunk.
        """
        self._blocks.append("".join(self._parts))
        self._parts = []

    def _body(self) -> str:
        """The open region's whole text, kept as one part: a close that raises leaves the
        region as it was, as the reference does, and a later close sees the same text."""
        parts = self._parts
        if not self._blocks and len(parts) == 1:
            return parts[0]
        self._blocks.append("".join(parts))
        body = "".join(self._blocks)
        self._blocks = []
        self._parts = [body]
        return body

    def _coerce(self, value: Any) -> Any:
        """Cast tool-call arguments with the tools' JSON schemas, when tools were given."""
        if self._tool_params:
            return coerce_tool_calls(value, self._tool_params)
        return value


def _last(text: str, count: int) -> str:
    """The last `count` characters of `text` (none for count <= 0)."""
    return text[len(text) - count :] if count > 0 else ""


_MISSING: Any = object()  # a field with no value yet


def _appended(parser: CompiledParser, text: str) -> str:
    """The parser's left context with `text` after it, taking the context from the parser.

    With no other reference to the context string, CPython grows it in place (amortised
    O(len(text))) instead of copying it: a parser whose look-behind cannot be bounded
    (CONTEXT None) keeps the whole stream, held-back text included, in linear time.
    """
    context = parser._context
    parser._context = ""
    context += text
    return context


def _describe(error: BaseException) -> dict[str, str]:
    return {"type": type(error).__name__, "message": str(error)}


def after_last_literal(prefix: str, literals: tuple[str, ...]) -> str:
    """What follows the last start-anchor match, for a literal anchor (longest first).

    Matches are found left to right without overlapping, as `finditer` on the reference's
    alternation finds them; with no match the whole prefix is kept.
    """
    end = None
    pos = 0
    # Next occurrence of each literal at or after `pos`; -1 once it has none left.
    ahead = [prefix.find(literal, 0) for literal in literals]
    while True:
        start = -1
        length = 0
        for index, literal in enumerate(literals):
            found = ahead[index]
            if found != -1 and found < pos:
                found = ahead[index] = prefix.find(literal, pos)
            if found != -1 and (start == -1 or found < start):
                start, length = found, len(literal)
        if start == -1:
            return prefix if end is None else prefix[end:]
        end = pos = start + length


def after_last_match(prefix: str, pattern: Any) -> str:
    """What follows the last match of a `start_anchor_pattern` (the whole prefix if none)."""
    end = None
    matches = errors.search_bounded(
        lambda timeout: list(pattern.finditer(prefix, timeout=timeout)),
        "start_anchor_pattern",
        len(prefix),
    )
    if matches:
        end = matches[-1].end()
    return prefix if end is None else prefix[end:]


def require_str(value: Any, field: str) -> str:
    """`join` concatenates strings only."""
    if not isinstance(value, str):
        raise ValueError(
            f"Field {field!r}: 'join' requires each match to parse to a string, got {type(value).__name__}."
        )
    return value
