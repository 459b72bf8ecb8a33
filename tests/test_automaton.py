"""One scan step, exhaustively: runtime.State.scan against the reference's decision rule.

The reference decides a scan step with one `regex` partial search per watched delimiter
(docs/design.md, "One scan step"). `reference_step` restates that rule directly; the runtime
reaches the same decision with a joint literal search, hold-back tables and memoised
results. Random delimiter sets over a tiny alphabet, with every buffer up to five
characters and every position, make ties, overlaps, prefixes and partial matches common.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import regex
from hypothesis import given
from hypothesis import strategies as st

import runtime.automaton
from compiler.ir import Delimiter
from compiler.regex_profile import profile
from runtime.automaton import CLOSE, OPEN, LiteralDelimiter, RegexDelimiter, State

ALPHABET = "ab<"
BUFFERS = [
    "".join(chars) for size in range(6) for chars in itertools.product(ALPHABET, repeat=size)
]
LITERALS = ["a", "b", "<", "ab", "ba", "<a", "a<", "<ab", "aba", "b<a", "<ab<"]
PATTERNS = [
    "a+",
    "<a?",
    "(?:ab)+<",
    "b$",
    "(?=a)",
    "a(?!b)",
    "(?<=b)a",
    "<.*?<",
    "(?:^|<)b",
    "ab|a",
    "<ab?<",
    "ab<.*",
    "\\ba<",
]


def reference_step(
    watched: list[tuple[int, str, Any, Delimiter]], buf: str, pos: int, eos: bool
) -> Any:
    """The reference's scan step, restated: one regex search per delimiter.

    Returns (the committed match as (start, end, field, kind), or None; where held-back text
    starts). The second matters only when nothing is committed.
    """
    best_key = None
    best = None
    hold = len(buf)
    for kind, name, pattern, spec in watched:
        m = pattern.search(buf, pos) if eos else pattern.search(buf, pos, partial=True)
        if m is None:
            continue
        grows = m.end() == len(buf) and (
            m.start() == m.end() or spec.literals is None or spec.can_extend
        )
        if not eos and (m.partial or grows):
            hold = min(hold, m.start())
            continue
        key = (m.start(), -(m.end() - m.start()), kind, name)
        if best_key is None or key < best_key:
            best_key, best = key, (m.start(), m.end(), name, kind)
    if best is not None and best[0] >= hold:
        best = None
    return best, hold


@st.composite
def watch_sets(draw: Any) -> list[tuple[int, str, Any, Delimiter]]:
    names = draw(
        st.lists(st.sampled_from(["f", "g", "h", "k"]), min_size=1, max_size=4, unique=True)
    )
    watched = []
    for name in names:
        kind = draw(st.sampled_from([OPEN, CLOSE]))
        if draw(st.integers(0, 2)):
            literals = tuple(
                dict.fromkeys(draw(st.lists(st.sampled_from(LITERALS), min_size=1, max_size=3)))
            )
            spec = Delimiter(path=name, literals=literals)
        else:
            spec = Delimiter(path=name, literals=None, pattern=draw(st.sampled_from(PATTERNS)))
        source = (
            "|".join(regex.escape(s) for s in spec.ordered)
            if spec.literals is not None
            else spec.pattern
        )
        watched.append((kind, name, regex.compile(source, regex.DOTALL), spec))
    watched.sort(key=lambda item: (item[0], item[1]))
    return watched


def build_state(watched: list[tuple[int, str, Any, Delimiter]]) -> State:
    literals, patterns = [], []
    for rank, (kind, name, _, spec) in enumerate(watched):
        if spec.literals is not None:
            literals.append(
                LiteralDelimiter(
                    kind,
                    name,
                    spec.ordered,
                    rank=rank,
                    can_extend=spec.can_extend,
                )
            )
        else:
            prof = profile(spec.pattern)
            patterns.append(
                RegexDelimiter(
                    kind,
                    name,
                    regex.compile(spec.pattern, regex.DOTALL),
                    rank=rank,
                    prefix=prof.literal_prefix,
                    memo=prof.analysed,
                )
            )
    every = {literal for delim in literals for literal in delim.literals}
    literals_re = (
        re.compile("|".join(re.escape(s) for s in sorted(every, key=len, reverse=True)))
        if every
        else None
    )
    return State(
        "f",
        literals=tuple(literals),
        literals_re=literals_re,
        patterns=tuple(patterns),
        feed=None,
        close=None,
    )


@given(watched=watch_sets())
def test_scan_step_matches_the_reference_rule(
    watched: list[tuple[int, str, Any, Delimiter]],
) -> None:
    state = build_state(watched)
    for buf in BUFFERS:
        memo: dict[Any, Any] = {}
        for pos in range(len(buf) + 1):  # increasing positions share one memo, as a scan loop does
            for eos in (False, True):
                hit, hold = state.scan(buf, pos, eos, memo if not eos else {})
                ours = None if hit is None else (hit[0], hit[1], hit[2].field, hit[2].kind)
                expected, expected_hold = reference_step(watched, buf, pos, eos)
                assert ours == expected, f"buf={buf!r} pos={pos} eos={eos}"
                if ours is None and not eos:  # held-back text only matters when nothing commits
                    assert hold == expected_hold, f"buf={buf!r} pos={pos}"


BUFFER_ALPHABET = "ab<>c|1 "


@given(
    pattern=st.sampled_from(
        [*PATTERNS, r"a.*?b", r"(a|ab)(c|bcd)(d*)", r"\s*<t>", r"(?:<a>)?[^<]*<k>", r"(?P<x>a+)b?"]
    ),
    buf=st.text(BUFFER_ALPHABET, max_size=10),
    data=st.data(),
)
def test_partial_search_prefers_the_complete_match(pattern: str, buf: str, data: Any) -> None:
    """RegexDelimiter relies on this: with a complete match anywhere, a partial search
    returns exactly the plain search's match; without one, only a partial match or None."""
    compiled = regex.compile(pattern, regex.DOTALL)
    pos = data.draw(st.integers(0, len(buf)))
    plain = compiled.search(buf, pos)
    partial = compiled.search(buf, pos, partial=True)
    if plain is None:
        assert partial is None or partial.partial
    else:
        assert partial is not None and not partial.partial
        assert (partial.span(), partial.groupdict()) == (plain.span(), plain.groupdict())


ATTEMPT_PATTERNS = [
    *PATTERNS,
    r"a.*?b",
    r"(a|ab)(c|bcd)(d*)",
    r"\s*<t>",
    r"\s*(?:<a>\s*)?<b>\s*(?P<n>[^\s`<]+)\s*```",
    r"\s*(?:<\|c\||<1>)",
    r"(?:<a>)?[^<]*<k>",
    r"(?P<x>a+)b?",
    r"(?<=a)\s*<t>",
]


@given(
    pattern=st.sampled_from(ATTEMPT_PATTERNS),
    buf=st.text(BUFFER_ALPHABET + "<>`t", max_size=12),
    data=st.data(),
)
def test_partial_searches_find_the_original_patterns_match(
    pattern: str, buf: str, data: Any
) -> None:
    """RegexDelimiter's partial searches run `attempts`, the pattern with a never-matching
    alternative (so that `regex` does not rescan the buffer for a required literal at every
    start position). They must find what a partial search of the pattern itself finds:
    the leftmost partial match, or, from `partial`, also the promise that none starts up
    to the limit."""
    compiled = regex.compile(pattern, regex.DOTALL)
    delimiter = RegexDelimiter(CLOSE, "f", compiled, rank=0)
    assert delimiter.attempts is not compiled, "the wrapped pattern compiles for every pattern here"
    pos = data.draw(st.integers(0, len(buf)))
    if compiled.search(buf, pos) is not None:
        return  # partial searches only run when no complete match is left
    expected = compiled.search(buf, pos, partial=True)
    expected_hit = None if expected is None else (*expected.span(), True)
    found = delimiter._partial_search(buf, pos)
    assert (None if found is None else found[:3]) == expected_hit
    limit = data.draw(st.integers(pos, len(buf)))
    saved = runtime.automaton.SPLIT_AFTER
    runtime.automaton.SPLIT_AFTER = 0  # single attempts, as on a long buffer
    try:
        bounded = delimiter.partial(buf, pos, limit)
    finally:
        runtime.automaton.SPLIT_AFTER = saved
    if isinstance(bounded, int):
        assert bounded == limit and (expected is None or expected.start() > limit)
    else:
        assert (None if bounded is None else bounded[:3]) == expected_hit
