"""runtime.narrowing: searches of HEAD + C* + LITERAL patterns start late, find the same.

A pattern such as inkling's `(?:<\\|message_model\\|>)?[^<]*<\\|content_text\\|>` can start
almost anywhere, and `regex` runs `[^<]*` from every start position: quadratic over text
with few `<`. RegexDelimiter narrows where its searches start (runtime.narrowing); these
tests check that the narrowed searches find what the pattern's own searches find, and
that a long valid output no longer meets the time bound.
"""

from __future__ import annotations

from typing import Any

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

import runtime.automaton
from compiler.regex_profile import profile
from generated.inkling import Parser as Inkling
from runtime.automaton import OPEN, RegexDelimiter
from runtime.narrowing import RunToLiteral, head_width
from runtime.waiting import HeldRun

HEADS = [
    "",
    "(?:<a>)?",
    "a?",
    "\\n",
    "(?P<h>x|<a>)?",
    "(?<=a)",
    "\\b",
    "(?:ab){0,2}",
    "b",
    "(?:<k)?",
    "^",
]
RUNS = ["[^<]*", "[^<]+", "a*", "[ab]*?", "\\s*", "([^<\\n]*)", "[^k]*"]
LITERALS = ["<k>", "<a<k>", "<k", "<<k>", "\n<k>", "k>"]
ALPHABET = "<ak>b\n x"
WORDS = ["<k>", "<a>", "<a<k>", "<", "a", "k", ">", "b", "\n", " ", "x", "aaaa", "<<"]


def delimiter(source: str) -> RegexDelimiter:
    """The delimiter a generated module declares for `source` (its runs from the compiler)."""
    runs = tuple(HeldRun(*run[:3]) for run in profile(source).runs)
    return RegexDelimiter(OPEN, "f", regex.compile(source, regex.DOTALL), rank=0, runs=runs)


def found(hit: Any) -> Any:
    """A search result as (start, end, pending, named groups)."""
    if hit is None or isinstance(hit, int):
        return hit
    start, end, pending, match = hit
    return start, end, pending, match.groupdict()


def expected(pattern: Any, buf: str, pos: int, eos: bool) -> Any:
    """What the pattern's own searches give, as RegexDelimiter.search reports it."""
    match = pattern.search(buf, pos)
    if match is None and not eos:
        match = pattern.search(buf, pos, partial=True)
        if match is None:
            return None
        return match.start(), match.end(), True, match.groupdict()
    if match is None:
        return None
    return match.start(), match.end(), not eos and match.end() == len(buf), match.groupdict()


def test_the_shape_is_read_from_the_runs_of_whole_patterns() -> None:
    assert head_width("(?:<\\|message_model\\|>)?") == 17
    assert head_width("b*") is None and head_width("\\p{L}") is None
    narrowing = delimiter("(?:<a>)?[^<]*<k>").narrowing()
    assert isinstance(narrowing, RunToLiteral)
    assert (narrowing.literal, narrowing.width) == ("<k>", 3)
    assert delimiter("b*[^<]*<k>").narrowing() is None  # HEAD of unbounded width
    assert delimiter("(?:<a>)?[^<]*k>").narrowing() is None  # the run may hold k
    assert delimiter("(?:<a>)?[^<]*").narrowing() is None  # no literal after the run
    assert delimiter("(?:<a>)?.*<k>").narrowing() is None  # any character
    plain = RegexDelimiter(OPEN, "f", regex.compile("(?:<a>)?[^<]*<k>", regex.DOTALL), rank=0)
    assert plain.narrowing() is None  # no runs given: nothing is known


@given(
    head=st.sampled_from(HEADS),
    run=st.sampled_from(RUNS),
    literal=st.sampled_from(LITERALS),
    words=st.lists(st.one_of(st.sampled_from(WORDS), st.text(ALPHABET, max_size=3)), max_size=10),
    data=st.data(),
)
def test_narrowed_searches_find_the_patterns_match(
    head: str, run: str, literal: str, words: list[str], data: Any
) -> None:
    """search() and partial() with narrowing (SPLIT_AFTER 0: every buffer is long) give
    the leftmost complete match, else the leftmost partial one, of the pattern itself;
    partial() may instead promise that none starts up to its limit."""
    source = head + run + regex.escape(literal)
    delim = delimiter(source)
    pattern = delim.pattern
    if delim.narrowing() is None and "?" in run:
        return  # `regex` finds partial matches of `attempts` with a lazy lead that are none
    buf = "".join(words)
    pos = data.draw(st.integers(0, len(buf)))
    eos = data.draw(st.booleans())
    saved = runtime.automaton.SPLIT_AFTER
    runtime.automaton.SPLIT_AFTER = 0
    try:
        hit = delim.search(buf, pos, eos, len(buf))
        if isinstance(hit, int):  # none starts up to the limit, the buffer's end
            hit = None
        assert found(hit) == expected(pattern, buf, pos, eos), (source, buf, pos, eos)
        if pattern.search(buf, pos) is None:
            limit = data.draw(st.integers(pos, len(buf)))
            bounded = delim.partial(buf, pos, limit)
            partial = pattern.search(buf, pos, partial=True)
            if isinstance(bounded, int):
                assert bounded == limit and (partial is None or partial.start() > limit)
            else:
                want = None if partial is None else (*partial.span(), True, partial.groupdict())
                assert found(bounded) == want, (source, buf, pos, limit)
    finally:
        runtime.automaton.SPLIT_AFTER = saved


def test_catalog_patterns_of_this_shape_are_narrowed() -> None:
    """inkling's three opens are the catalog's patterns of this shape."""
    opens = [delim for delim in Inkling.SINK.patterns if isinstance(delim, RegexDelimiter)]
    assert len(opens) == 3 and all(delim.narrowing() is not None for delim in opens)


@pytest.mark.parametrize("size", [200_000])
def test_a_long_output_with_few_lead_characters_parses_within_a_small_bound(size: int) -> None:
    """Without narrowing, each search runs `[^<]*` from every start position: some 10^10
    steps on these outputs, far past a 0.5 s bound of CPU time. With it, a few runs."""
    prose = "word " * (size // 5)
    message = Inkling.parse(prose, prefix="", regex_timeout=0.5)
    assert message == {"role": "assistant"}
    output = f"{prose}<|message_model|><|content_text|>Hi<|end_message|>{prose}<|content_te"
    message = Inkling.parse(output, prefix="", regex_timeout=0.5)
    assert message == {"role": "assistant", "content": "Hi"}
    streamed = Inkling("", regex_timeout=0.5)
    for start in range(0, len(output), size // 4):
        streamed.feed(output[start : start + size // 4])
    assert streamed.finalize()[0] == message
