"""Differential testing against the reference interpreter (transformers 5.23.0).

A trace is everything a caller can observe: `initial_events` (or the constructor's
exception), the result of every feed() (events, or the exception class), the result of
finalize(), and what feed/finalize do after that. `check` runs the reference and a
compiled parser over the same prefix and chunks and asserts the traces are the same,
with exception classes compared by subclass (ours may be more specific).

The reference loops forever on some zero-width templates. It runs here with a budget of
scan steps per call; when the budget runs out, the compiled parser must have finished
that same call, with the events the reference had emitted so far as a prefix of ours
reversed: ours stop at the first repeated configuration, so they are a prefix of what the
reference emitted before the budget ran out.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from transformers.utils.chat_parsing import ResponseParser
from transformers.utils.chat_parsing.response_templates import load_response_template

import runtime.automaton
import runtime.regions
import runtime.scanner
from compiler import load_parser
from runtime import CompiledParser
from runtime.automaton import State

CASES = {"count": 0}  # (template, output, chunking) cases checked, reported by conftest


class ReferenceHang(Exception):
    def __init__(self, events: list[dict[str, Any]]) -> None:
        super().__init__("reference exceeded its scan budget")
        self.events = events


class BudgetedReference(ResponseParser):
    """The reference, stopped when one call runs more scan steps than any finite run needs."""

    def _process(self, events: list[dict[str, Any]], eos: bool) -> None:
        self._budget = (len(self._buffer) - self._pos + 2) * (2 * len(self._spec.fields) + 4) + 50
        self._events_so_far = events
        super()._process(events, eos)

    def _scan(self, watch: Any, eos: bool) -> Any:
        self._budget -= 1
        if self._budget < 0:
            raise ReferenceHang(list(self._events_so_far))
        return super()._scan(watch, eos)


def canon(value: Any) -> Any:
    """A comparable form: types kept (1, 1.0, True differ), dict order kept, NaN equal."""
    if isinstance(value, dict):
        return ("dict", [(canon(k), canon(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [canon(v) for v in value])
    if isinstance(value, tuple):
        return ("tuple", [canon(v) for v in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


def _step(action: Any) -> tuple[str, Any]:
    try:
        return ("ok", canon(action()))
    except ReferenceHang as hang:
        return ("hang", canon(hang.events))
    except Exception as error:
        return ("raise", type(error))


def trace(
    make: Any, chunks: Sequence[str], window: Callable[[Any, str, int], None] | None = None
) -> list[tuple[str, Any]]:
    """The trace of a parser `make()` builds, fed `chunks`. With `window`, each feed that
    returns also checks the parser's window: `window(parser, chunks so far joined, count)`."""
    steps: list[tuple[str, Any]] = []
    holder: list[Any] = []

    def construct() -> Any:
        holder.append(make())
        return holder[0].initial_events

    steps.append(_step(construct))
    if steps[-1][0] != "ok":
        return steps
    parser = holder[0]
    for count, chunk in enumerate(chunks, 1):
        steps.append(_step(lambda chunk=chunk: parser.feed(chunk)))
        if steps[-1][0] == "hang":
            return steps
        if window is not None and steps[-1][0] == "ok":
            window(parser, "".join(chunks[:count]), count)
    steps.append(_step(parser.finalize))
    if steps[-1][0] == "ok":
        steps.append(_step(lambda: parser.feed("more")))
        steps.append(_step(parser.finalize))
    return steps


def reference_trace(
    template: Any, prefix: Any, chunks: Sequence[str], tools: Any = None
) -> list[tuple[str, Any]]:
    return trace(lambda: BudgetedReference(template, prefix=prefix, tools=tools), chunks)


def compiled_trace(
    parser_cls: Any, prefix: Any, chunks: Sequence[str], tools: Any = None
) -> list[tuple[str, Any]]:
    return trace(lambda: parser_cls(prefix, tools=tools), chunks, _check_window(prefix))


def _check_window(prefix: str) -> Callable[[Any, str, int], None]:
    """Checks of a compiled parser's window after a feed: it counts every character fed
    as received (error offsets count from it), and its left context is the routed
    stream's last CONTEXT characters (the whole stream with CONTEXT None), however the
    fast paths left it (Scanner._left_context)."""

    def check_window(parser: Any, fed: str, count: int) -> None:
        received = parser._received()
        assert received == len(fed), f"{received} characters counted, {len(fed)} fed"
        keep = parser.CONTEXT
        if not keep and keep is not None:
            return
        stream = parser._after_last_anchor(prefix) + fed
        routed = len(stream) - sum(map(len, parser._waited))  # (set aside while waiting)
        if keep is None:  # held-back text included
            assert parser._context == stream[:routed], f"left context after chunk {count}"
            return
        routed -= len(parser._pending)
        context = copy.copy(parser)._left_context()  # (as it reads it: the parser unchanged)
        assert (
            context == stream[:routed][-keep:]
        ), f"left context after chunk {count}: {context!r}, routed {stream[:routed][-keep:]!r}"

    return check_window


def assert_same_trace(
    expected: list[tuple[str, Any]], actual: list[tuple[str, Any]], context: str = ""
) -> None:
    for index, (ref, ours) in enumerate(zip(expected, actual, strict=False)):
        where = f"step {index} {context}"
        if ref[0] == "raise":
            assert (
                ours[0] == "raise"
            ), f"{where}: reference raised {ref[1].__name__}, ours gave {ours[1]!r}"
            assert issubclass(
                ours[1], ref[1]
            ), f"{where}: reference raised {ref[1].__name__}, ours {ours[1].__name__}"
        elif ref[0] == "hang":
            assert (
                ours[0] == "ok"
            ), f"{where}: reference loops forever here; ours must finish, gave {ours!r}"
            value = ours[1]
            if value[0] == "tuple":  # finalize's (message, events): its events
                value = value[1][1]
            ours_events = value[1]
            ref_events = ref[1][1]
            assert (
                ours_events == ref_events[: len(ours_events)]
            ), f"{where}: events diverge before the reference's loop"
            return
        else:
            assert ours == ref, f"{where}:\n reference: {ref!r}\n ours:      {ours!r}"
    assert len(expected) == len(
        actual
    ), f"{context}: traces differ in length: {expected!r} vs {actual!r}"


def check(
    template: Any, parser_cls: Any, prefix: Any, chunks: Sequence[str], tools: Any = None
) -> None:
    expected = reference_trace(template, prefix, chunks, tools)
    actual = compiled_trace(parser_cls, prefix, chunks, tools)
    assert_same_trace(expected, actual, f"prefix={prefix!r} chunks={list(chunks)!r}")
    CASES["count"] += 1


def accepted_parser(data: Any, drawn: Any) -> tuple[Any, list[str], list[str], Any] | None:
    """(template, literals, regex samples, compiled Parser class) of a template drawn from
    `drawn` (strategies.templates and the like) that the reference loads; None for one it
    refuses (the example then checks nothing more)."""
    template, literals, samples = data.draw(drawn, label="template")
    try:
        load_response_template(template)
    except (ValueError, TypeError):
        return None
    return template, literals, samples, load_parser(template)


@contextmanager
def shrunk_thresholds(parser_cls: Any) -> Iterator[None]:
    """Set the parsers' internal thresholds tiny, so that short texts exercise what long
    ones reach: waiting on every hold (CompiledParser.WAIT_AFTER), joining a region's
    chunks into blocks every two (PARTS_PER_BLOCK, also read by the generated module of
    `parser_cls`), searching for a literal over windows from two characters on wherever
    two candidates in a row lie within four (SPARSE, DENSE), one partial search instead
    of single attempts (ATTEMPTS), split regex searches on every buffer (SPLIT_AFTER),
    every partial search of a pattern led by a run first asking where one can start
    (LEAD_SPAN), and every scan step first asking where a match can start (SKIP_AFTER)."""
    generated = _module_globals(parser_cls)
    automaton = runtime.automaton
    saved = (
        CompiledParser.WAIT_AFTER,
        runtime.regions.PARTS_PER_BLOCK,
        generated.get("PARTS_PER_BLOCK"),
        (automaton.DENSE, automaton.SPARSE, automaton.ATTEMPTS, automaton.SPLIT_AFTER),
        runtime.scanner.SKIP_AFTER,
        automaton.LEAD_SPAN,
    )
    CompiledParser.WAIT_AFTER = 1
    runtime.regions.PARTS_PER_BLOCK = 2
    if "PARTS_PER_BLOCK" in generated:
        generated["PARTS_PER_BLOCK"] = 2
    automaton.DENSE, automaton.SPARSE, automaton.ATTEMPTS, automaton.SPLIT_AFTER = 2, 2, 1, 0
    runtime.scanner.SKIP_AFTER = -1
    automaton.LEAD_SPAN = 0
    try:
        yield
    finally:
        CompiledParser.WAIT_AFTER, runtime.regions.PARTS_PER_BLOCK = saved[:2]
        if "PARTS_PER_BLOCK" in generated:
            generated["PARTS_PER_BLOCK"] = saved[2]
        automaton.DENSE, automaton.SPARSE, automaton.ATTEMPTS, automaton.SPLIT_AFTER = saved[3]
        runtime.scanner.SKIP_AFTER = saved[4]
        automaton.LEAD_SPAN = saved[5]


@contextmanager
def followed_holds(parser_cls: Any) -> Iterator[None]:
    """Give every pattern of `parser_cls` no short span (RegexDelimiter.short_span), so that
    every hold its HeldMatch can follow is followed from the second chunk on (within the
    span, Scanner._still_held asks the regex engine); its searches then all run under
    the time bound, which changes no answer."""
    patterns = {
        delim
        for state in vars(parser_cls).values()
        if isinstance(state, State)
        for delim in state.patterns
    }
    saved = {delim: delim.short_span for delim in patterns}
    for delim in patterns:
        delim.short_span = -1
    try:
        yield
    finally:
        for delim, span in saved.items():
            delim.short_span = span


def _module_globals(parser_cls: Any) -> dict[str, Any]:
    """The namespace of the module that defines `parser_cls` (JIT modules included)."""
    for value in vars(parser_cls).values():
        if hasattr(value, "__globals__"):
            return value.__globals__  # type: ignore[no-any-return]
    return {}
