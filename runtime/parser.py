"""The parser every generated module subclasses: the streaming contract and public API.

A generated module supplies the per-model parts as class attributes and methods: its
states (`START`, each with its delimiter automaton and fast path), one `_close_<field>`
method per field, the start anchor, the defaults and the required fields. The two halves
of the work are its bases: runtime.scanner finds the delimiters (the held-back window
and the scan loop), runtime.regions keeps the regions' text and the message. This class
is what callers use: feed(), finalize(), parse(), open_region().

Event-for-event compatibility with transformers 5.23.0 is the contract; the tests check
it differentially (docs/design.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable
from typing import Any, cast

from . import errors
from .automaton import RegexDelimiter, State
from .errors import MissingFieldError
from .oneshot import scan_to_end
from .regions import ON_ERROR, OpenRegion, Regions, _describe, _is_empty
from .scanner import _FINALIZED, Event
from .waiting import HeldObject, HeldRun

__all__ = ["CompiledParser", "Event", "OpenRegion", "after_last_literal", "after_last_match"]


class CompiledParser(Regions):
    """Streaming parser for one response template (see the generated subclass)."""

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
        self._start_scanning(regex_timeout)
        self._start_regions(tools, on_error)
        self.initial_events = []
        if prefix:
            if regex_timeout is None:  # the default bound, as _run leaves it
                after_anchor = self._after_last_anchor(prefix)
            else:
                with errors.bounded_by(regex_timeout):
                    after_anchor = self._after_last_anchor(prefix)
            if after_anchor:
                kind = cast(Hashable, type(self))  # (to mypy a class's __hash__ is a method)
                state = _prefix_state(kind, after_anchor, on_error, regex_timeout)
                if state is None:
                    self._fed = -len(after_anchor)
                    self._run(after_anchor, self.initial_events, eos=False)
                else:
                    self._resume(state)
        self._bind_feed()

    def _resume(self, state: PrefixState) -> None:
        """Take up where a parser with the same prefix was after it (`_prefix_state`)."""
        attributes, containers, events = state
        # One by one: reading __dict__ would give the parser a dict of its own, and every
        # attribute read would slow down (see docs/design.md, "Attributes of a parser").
        for name, value in attributes:
            setattr(self, name, value)
        for name, kind, items in containers:
            setattr(self, name, kind(items))
        self.initial_events = [dict(event) for event in events]

    # -- public API ------------------------------------------------------------------

    def feed(self, text: str) -> list[Event]:
        """Feed generated text; return the events it completes.

        A generated parser's `feed` runs the current state's fast path (`_fast`, set by
        Scanner._bind_feed) on a str, written into that method so that a chunk going
        straight into a region costs one call, and `_scan_feed` (the scan loop) on the rest
        of them; it calls this one for anything else, the type check. Anything but a str
        raises TypeError and changes nothing.
        """
        if text.__class__ is str:
            return self._scan_feed(text)
        if isinstance(text, str):  # a str subclass: parse its plain-str value
            return self.feed(str(text))
        raise TypeError(f"feed() takes a str, got {type(text).__name__}")

    def finalize(
        self, text: str = "", *, truncated: bool = False
    ) -> tuple[dict[str, Any], list[Event]]:
        """End the stream: flush, close every open region, return (message, events).

        `text` is the stream's last text, if it comes with its end (a whole output, as
        parse() has it): `finalize(text)` gives what `feed(text)` then `finalize()` give,
        the same message and the same events, except that the text may come in other
        region_chunk pieces. It is scanned once, as the end of the stream, where nothing is
        pending (no partial match can grow), so no step searches for partial matches.

        `truncated=True` says the output was cut off (a server's finish_reason "length"):
        a tool call whose region is still open at the end, with no close text of its own,
        is then incomplete and fails like a body that does not parse (raises, or under
        on_error="content" goes into content), even if what arrived of it parses.
        """
        if self._finalized:
            raise RuntimeError("parser already finalized")
        events: list[Event] = []
        if text and (text.__class__ is not str or self._waiting is not None):
            events = self.feed(text)  # the type check, and a held match waiting on a text
            text = ""
        self._truncated = truncated
        if self._waiting is not None:
            # Still waiting: the literal that could complete the held match never came, so
            # at the end of stream that delimiter has no match (no need to search for one:
            # no other match could be complete when the wait began, RegexDelimiter.waits).
            wait, _, delim = self._waiting
            if wait.literal:
                self._unmatched = delim
            self._wake(None)
        scan_to_end(self, text, events)  # Scanner._run(text, events, eos=True), in one pass
        output = self._output
        missing = [name for name in self.REQUIRED if name not in output]
        if missing:
            error = MissingFieldError(missing)
            if self._on_error == "raise":
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
        self._fed -= len(_FINALIZED)  # (not received: `_received()` stays the count)
        return output, events

    def open_region(self) -> OpenRegion | None:
        """The region open after the text fed so far (None between regions, and once
        finalized): which field, its open delimiter's captures, its close code.

        Streaming adapters read a tool call's name and arguments from it before the call
        closes (integrations.openai, integrations.call_arguments).
        """
        state = self._state
        if not self._opened or self._finalized or state.field is None:
            return None
        return OpenRegion(state.field, dict(self._captures), state.close)  # type: ignore[arg-type]

    @property
    def held_back(self) -> str:
        """The text received that no event has carried yet ("" once finalized): held back
        while it may still start or complete a delimiter. After the prefix, the prompt's tail
        that the output's first events carry in a region's text, or a delimiter takes."""
        return "" if self._finalized else self._pending

    @property
    def tool_parameters(self) -> dict[str, dict[str, Any]]:
        """The `tools=` schemas this parser casts arguments with: tool name -> properties."""
        return self._tool_params

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
        """Parse one complete generation; return the message dict.

        The text is scanned once, as the end of the stream (`finalize(text)`): the same
        message as feed(text) then finalize() (tests/test_oneshot.py checks it).
        """
        parser = cls(prefix, tools=tools, on_error=on_error, regex_timeout=regex_timeout)
        return parser.finalize(text)[0]


# A parser's scan state after its prefix: attributes with immutable values (name, value);
# lists and dicts (name, list or dict, items), each parser given its own; the initial events.
PrefixState = tuple[
    tuple[tuple[str, Any], ...], tuple[tuple[str, type, tuple[Any, ...]], ...], tuple[Event, ...]
]

# How many prefix states are kept, over all parser classes (least recently used dropped).
PREFIX_STATES = 256

# Set by the constructor, not by the prefix: never part of a prefix state.
_OWN = frozenset({"_tool_params", "_on_error", "_regex_timeout", "_output", "_errors"})
# Values a prefix state shares between parsers as they are: nothing changes them in place.
_SHARED = (str, int, bool, float, type(None), State, RegexDelimiter, HeldRun, HeldObject)


@functools.lru_cache(maxsize=PREFIX_STATES)
def _prefix_state(
    cls: type[CompiledParser], after_anchor: str, on_error: str, regex_timeout: float | None
) -> PrefixState | None:
    """The state of a `cls` parser after the prefix text `after_anchor` (what follows the
    start anchor), for parsers built with the same text and options to take up; None when
    one is not enough (they then scan it themselves).

    A server builds a parser per request, with the same prompt tail (`<think>\n`, a prefill)
    each time; scanning it cost 10-20 us of a parser's construction (qwen3, deepseek_r1, ernie).
    A prefix that closed a region (whose value `tools=` may cast), set a parse error, or left
    state that is not plain data or lists of it, is not kept.
    """
    parser = _started(cls, on_error, regex_timeout)
    parser.initial_events = []
    parser._fed = -len(after_anchor)
    try:
        parser._run(after_anchor, parser.initial_events, eos=False)
    except Exception:  # the constructor scans it again, and raises the same
        return None
    if (
        parser._errors
        or parser._output != parser._new_output()
        or any(event["type"] == "region_close" for event in parser.initial_events)
    ):
        return None
    start = vars(_started(cls, on_error, regex_timeout))
    attributes: dict[str, Any] = {}
    containers: list[tuple[str, type, tuple[Any, ...]]] = []
    for name, value in vars(parser).items():
        if name in _OWN or name == "initial_events":
            continue
        kind = value.__class__
        if name in start and start[name].__class__ is kind and start[name] == value:
            continue  # as a new parser has it
        items = tuple(value.items()) if kind is dict else value
        if kind in (list, dict, tuple) and not all(_shared(item) for item in items):
            return None
        if kind is list or kind is dict:
            containers.append((name, kind, tuple(items)))
        elif _shared(value):
            attributes[name] = value
        else:
            return None
    return tuple(attributes.items()), tuple(containers), tuple(parser.initial_events)


def _started(cls: type[CompiledParser], on_error: str, regex_timeout: float | None) -> Any:
    """A `cls` parser as its constructor sets it up, before the prefix."""
    parser = cls.__new__(cls)
    parser._start_scanning(regex_timeout)
    parser._start_regions(None, on_error)
    return parser


def _shared(value: Any) -> bool:
    """Whether parsers can share `value` as it is: nothing changes it in place."""
    if value.__class__ is tuple:
        return all(_shared(item) for item in value)
    return isinstance(value, _SHARED)


def after_last_literal(prefix: str, literals: tuple[str, ...]) -> str:
    """What follows the last start-anchor match, for a literal anchor (longest first).

    Matches are found left to right without overlapping, as `finditer` on the reference's
    alternation finds them; with no match the whole prefix is kept.
    """
    if len(literals) == 1:
        # The last occurrence is the last match unless an occurrence overlaps it (a literal
        # that overlaps itself): the one before it is the only one that can. Two searches
        # from the end, instead of one per match (a chat prompt: 0.9 -> 0.3 us).
        literal = literals[0]
        last = prefix.rfind(literal)
        if last == -1:
            return prefix
        before = prefix.rfind(literal, 0, last + len(literal) - 1)
        if before == -1 or before + len(literal) <= last:
            return prefix[last + len(literal) :]
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
