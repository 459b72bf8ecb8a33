"""Never hang: zero-width delimiters on which the reference can loop forever."""

from __future__ import annotations

from typing import Any

from differential import ReferenceHang, check, reference_trace
from hypothesis import given
from hypothesis import strategies as st
from strategies import chunkings

from compiler import load_parser
from runtime import CompiledParser, State
from runtime import parser as parser_module

ZERO_WIDTH = ["$", r"\Z", "(?=x)", "^", "(?:^|x)", "x*", "", r"\b", "(?<=\n)", "(?:<a>)?"]


def test_dollar_open_and_close_terminates_where_the_reference_loops() -> None:
    template = {"start_anchor": "S", "fields": {"f": {"open_pattern": "$", "close_pattern": "$"}}}
    reference = reference_trace(template, "", ["a\n"])
    assert reference[1][0] == "hang", "the reference is expected to loop on this template"
    parser = load_parser(template)("")
    # The reference repeats open/close forever; we stop at the first repeated configuration
    # (position 1, inside f): the events are the start of the reference's endless stream.
    events = parser.feed("a\n")
    assert events == [
        {"type": "region_open", "field": "f"},
        {"type": "region_close", "field": "f", "value": ""},
        {"type": "region_open", "field": "f"},
    ]
    assert [event["type"] for event in parser.feed("")] == ["region_close", "region_open"]
    message, _ = parser.finalize()
    assert message == {}


@st.composite
def zero_width_templates(draw: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name in draw(
        st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True)
    ):
        field: dict[str, Any] = {}
        if name != "c":
            field["open_pattern"] = draw(st.sampled_from(ZERO_WIDTH))
        if draw(st.booleans()):
            field["close_pattern"] = draw(st.sampled_from([*ZERO_WIDTH, "x", "\n"]))
        if draw(st.booleans()):
            field["repeats"] = True
        fields[name] = field
    return {"start_anchor": "S", "fields": fields}


@given(data=st.data())
def test_zero_width_templates_terminate_and_match_until_the_reference_loops(data: Any) -> None:
    template = data.draw(zero_width_templates())
    parser = load_parser(template)
    text = data.draw(
        st.lists(st.sampled_from(["x", "\n", "a", " ", "<a>", "y"]), max_size=8).map("".join)
    )
    prefix = data.draw(st.sampled_from(["", "S", "Sx\n", "x"]))
    check(template, parser, prefix, data.draw(chunkings(text)))


def test_reference_hang_is_detected_not_waited_for() -> None:
    """The budget guard itself: a hang surfaces as ReferenceHang with the events so far."""
    template = {
        "start_anchor": "S",
        "fields": {"f": {"open_pattern": "$", "close_pattern": "$", "repeats": True}},
    }
    steps = reference_trace(template, "", ["a\n"])
    assert steps[1][0] == "hang"
    assert issubclass(ReferenceHang, Exception)


@given(data=st.data())
def test_scan_steps_are_bounded_by_positions_times_configurations(data: Any) -> None:
    """Termination, counted: one feed or finalize runs at most one scan step per
    (position, state, opened) configuration, whatever the template and chunking (the scan
    loop of a feed, Scanner._process, and finalize's, runtime.oneshot.scan_to_end)."""
    template = data.draw(zero_width_templates())
    parser_cls = load_parser(template)
    states = [value for value in vars(parser_cls).values() if isinstance(value, State)]
    steps: list[int] = []
    original_scans = {state: state.scan for state in states}
    original_process = CompiledParser._process
    original_to_end = parser_module.scan_to_end

    def counting(scan: Any) -> Any:
        def counting_scan(*args: Any) -> Any:
            steps[-1] += 1
            return scan(*args)

        return counting_scan

    def bounded_process(self: CompiledParser, events: Any, eos: bool) -> None:
        steps.append(0)
        positions = len(self._buf) - self._pos + 1
        original_process(self, events, eos)
        assert steps[-1] <= positions * 2 * len(states), (steps[-1], positions, len(states))

    def bounded_to_end(self: CompiledParser, text: str, events: Any) -> None:
        steps.append(0)
        positions = len(self._pending) + len(text) + 1
        original_to_end(self, text, events)
        assert steps[-1] <= positions * 2 * len(states), (steps[-1], positions, len(states))

    for state, scan in original_scans.items():
        state.scan = counting(scan)
    CompiledParser._process = bounded_process  # type: ignore[method-assign]
    parser_module.scan_to_end = bounded_to_end
    try:
        text = data.draw(
            st.lists(st.sampled_from(["x", "\n", "a", " ", "<a>", "y"]), max_size=10).map("".join)
        )
        parser = parser_cls(data.draw(st.sampled_from(["", "S", "Sx\n"])))
        for chunk in data.draw(chunkings(text)):
            parser.feed(chunk)
        parser.finalize()
    finally:
        for state, scan in original_scans.items():
            state.scan = scan
        CompiledParser._process = original_process  # type: ignore[method-assign]
        parser_module.scan_to_end = original_to_end
    assert steps, "the scan loop ran"
