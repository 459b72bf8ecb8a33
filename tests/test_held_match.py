"""runtime.held_match: the automaton that follows a held match says it is pending exactly
when the regex engine's partial search does, and the scanner that follows it streams as
the reference does."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import regex
from differential import assert_same_trace, compiled_trace, reference_trace
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples
from strategies import PATTERNS
from test_automaton import LED_PATTERNS

import runtime.held_match
from compiler.catalog import entry_names
from runtime.automaton import RegexDelimiter
from runtime.held_match import HeldMatch


def _catalog_patterns() -> list[str]:
    found: dict[str, None] = {}
    for name in entry_names():
        parser = importlib.import_module(f"generated.{name}").Parser
        for state in vars(parser).values():
            for delim in getattr(state, "patterns", ()):
                if isinstance(delim, RegexDelimiter) and delim.memo:
                    found.setdefault(delim.pattern.pattern)
    return list(found)


CATALOG_PATTERNS = _catalog_patterns()
SAMPLES = {pattern: samples for pattern, samples in PATTERNS}
FOLLOWED = [
    pattern
    for pattern in [*SAMPLES, *LED_PATTERNS, *CATALOG_PATTERNS]
    if HeldMatch.of(pattern) is not None
]


def _pieces(pattern: str) -> st.SearchStrategy[str]:
    """Text built of the pattern's own literals (its runs of plain characters), pieces of
    them, samples that match it, and a few characters its classes and runs match."""
    literals = [piece for piece in regex.split(r"\\.|[()\[\]?*+|{}^$]", pattern) if piece]
    near = {literal[:cut] for literal in literals for cut in range(1, len(literal))}
    generic = [" ", "\n", "x", "ab", "{", "[", "=", "`"]
    return st.sampled_from(sorted({*literals, *near, *SAMPLES.get(pattern, []), *generic}))


def _pending_at(compiled: Any, buf: str, pos: int) -> bool:
    """What the automaton stands for: the partial search from `pos` finds a partial match
    there, and no complete match starts at or after `pos`."""
    found = compiled.search(buf, pos, partial=True)
    return (
        found is not None
        and found.start() == pos
        and found.partial
        and compiled.search(buf, pos) is None
    )


def _check_every_hold(pattern: str, buf: str) -> None:
    """From each place in `buf`, followed a character at a time: each longer held text is
    asked as the scanner asks it, until the automaton hands over."""
    held = HeldMatch.of(pattern)
    assert held is not None, pattern
    compiled = regex.compile(pattern, regex.DOTALL)
    for pos in range(len(buf)):
        state = held.start(buf[:pos])
        for end in range(pos + 1, len(buf) + 1):
            state = None if state is None else held.go_on(state, buf[end - 1])
            expected = _pending_at(compiled, buf[:end], pos)
            assert (state is not None) == expected, (pattern, buf[:end], pos)
            if state is None:
                break


@given(data=st.data())
@settings(max_examples=examples(400), deadline=None)
def test_a_held_match_is_followed_while_the_partial_search_finds_it_pending(data: Any) -> None:
    pattern = data.draw(st.sampled_from(FOLLOWED), label="pattern")
    buf = "".join(data.draw(st.lists(_pieces(pattern), max_size=10), label="pieces"))
    _check_every_hold(pattern, buf)


@pytest.mark.parametrize(
    ("pattern", "buf"),
    [
        # A complete match from a later place while the held one is partial: handed over.
        (r"\s*<a>(?:<a>[^c]*c|b)", "<a><a>b"),
        (r"\s*(?:<a1>\s*)?<b1=(?P<n>\w+)>", "\n<a1> <b1=x> <b1=y>"),
        # A look-ahead that ends the pattern: pending while its text arrives, complete once
        # all of it is there.
        (r"</w>|(?=<o>\s*<f=)", "x<o> \n<f=a"),
        (r"\s*```(?:json)?\s*(?=[\[{])", " ```json\n {"),
        # Look-behinds at literals, before the hold (the left context) and in the held text,
        # where a later match completes (deepseek_v4's open has two).
        (r"<h>[^!]*!|(?<=</g>)<k>", "x</g><k><h></g><k>!"),
        (r"(?:\s*<d1>|(?<=</d2>)|(?<=/>))\s*<d3=(?P<n>\w+)>", "</d2> <d3=a> <d1></d2><d3=b>"),
        # `.*?`, the one lazy repeat followed.
        (r"<m>.*?</m>", "<m>a</m</m>b"),
    ],
)
def test_a_held_match_is_handed_over_where_the_engine_decides(pattern: str, buf: str) -> None:
    _check_every_hold(pattern, buf)


def test_what_the_automaton_does_not_follow_is_left_to_the_regex_engine() -> None:
    for pattern in (
        r"(?<=\w)b",  # a look-behind at other than a literal
        r"^<h1>",  # an anchor
        r"\bw\b",
        r"(?i)<ci>",  # a flag
        r"<y>(?!!)",  # a negative look-ahead
        r"(?=<z>)x",  # a look-ahead before more of the pattern
        r"<(?P<n>a)>(?P=n)",  # a back-reference
        r"<a>(?>b+)c",  # an atomic group
        r"<a>b*+c",  # a possessive repeat
        r"<v>\s*?x",  # a lazy repeat (but `.*?`), whose partial matches the engine reads its own way
        r"<a>[b]{1,200}",  # too many copies
        "(?:" + "|".join(f"<{n}>" for n in range(200)) + ")",  # too many positions
    ):
        assert HeldMatch.of(pattern) is None, pattern


def test_a_pattern_that_matches_the_empty_text_is_never_followed() -> None:
    held = HeldMatch.of(r"(?:<e>)?")
    assert held is not None and held.start("") is None and held.start("x") is None


def _at_start(pattern: str) -> tuple[HeldMatch, Any, int]:
    """The pattern's automaton, the pattern compiled, and its state at a hold's start."""
    held = HeldMatch.of(pattern)
    assert held is not None
    start = held.start("")
    assert start is not None
    return held, regex.compile(pattern), start


def test_past_max_states_the_automaton_hands_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime.held_match, "MAX_STATES", 3)
    held, compiled, start = _at_start(r"<a>[bc]*<d>")
    assert held.go_on(start, "<a") is not None and _pending_at(compiled, "<a", 0)
    # A fourth state is not numbered: None, where the engine finds the match pending.
    assert held.go_on(start, "<a>") is None and _pending_at(compiled, "<a>", 0)


def test_past_max_transitions_the_automaton_hands_over(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each character a stream holds adds a transition: their number is bounded too.
    monkeypatch.setattr(runtime.held_match, "MAX_TRANSITIONS", 4)
    held, compiled, start = _at_start(r"<a>[^<]*<d>")
    state = held.go_on(start, "<a>b")  # four transitions, kept
    assert state is not None and _pending_at(compiled, "<a>b", 0)
    assert held.go_on(state, "c") is None and _pending_at(compiled, "<a>bc", 0)
    assert held.go_on(start, "<a>b") == state  # (the kept ones still serve)


@pytest.mark.parametrize(
    ("name", "output"),
    [
        # A held call open whose text grows while the parser waits on it (Scanner._wake):
        # the automaton follows what arrived meanwhile before the next chunk.
        ("gpt_oss", "<|channel|>commentary to=functions.f json<|message|>hello"),
        (
            "deepseek_v3",
            "Hi.\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f"
            '\n```json\n{"a": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        ),
        (
            "kimi_k2",
            "Hi.<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
            '<|tool_call_argument_begin|>{"a": 1}<|tool_call_end|><|tool_calls_section_end|>',
        ),
    ],
)
@pytest.mark.parametrize("size", [1, 3, 4])
def test_a_followed_hold_streams_as_the_reference(name: str, output: str, size: int) -> None:
    parser = importlib.import_module(f"generated.{name}").Parser
    template = importlib.import_module(f"generated.{name}").TEMPLATE
    chunks = [output[i : i + size] for i in range(0, len(output), size)]
    assert_same_trace(
        reference_trace(template, "", chunks), compiled_trace(parser, "", chunks), name
    )
