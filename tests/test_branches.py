"""runtime.branches finds what the pattern's own search finds: span and named groups.

Patterns are drawn from pieces that stress the split (leading `\\s*`, top-level and nested
alternations, look-arounds, lazy and possessive repeats, classes holding `|` and `(`),
and from every regex delimiter of the catalog; buffers from a small alphabet rich in
whitespace and delimiter characters, with the catalog's own samples mixed in.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import regex
from catalog_samples import REGEX_SAMPLES
from fixtures import load_fixtures
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples

import runtime.automaton
from compiler.catalog import entry_names
from runtime.automaton import IRRELEVANT, RegexDelimiter
from runtime.branches import split

PIECES = [
    "\\s*",
    "\\s+",
    " *",
    "<a>",
    "<b>",
    "a",
    "(?:<a>\\s*)?",
    "(?P<n>[^\\s<]+)",
    "(?=<b>)",
    "(?=<b>|x)",
    "(?!a)",
    "[|(]",
    "(?:a|<b>)",
    ".*?",
    "\\n?",
    "x*+",
    "(?<=a)",
    "\\b",
    "$",
    "\\Z",
    "(?i)",
    "|",
    "|",
]
ALPHABET = " \n\t\u3000ab<>x|(/"


WORDS = ["<a>", "<b>", "a", "x", " ", "  ", "\n", "\t", "\u3000", "|", "(", "<", ">"]


def catalog_patterns() -> list[tuple[Any, list[str]]]:
    """(pattern, the samples of its entry) for every regex delimiter of the catalog."""
    found = []
    for name in entry_names():
        module = importlib.import_module(f"generated.{name}")
        samples = REGEX_SAMPLES.get(name, []) + load_fixtures(name)["samples"]
        for value in vars(module.Parser).values():
            for delim in getattr(value, "patterns", ()):
                if isinstance(delim, RegexDelimiter):
                    found.append((delim.pattern, samples))
    return found


CATALOG = catalog_patterns()


def catalog_delimiters() -> list[tuple[RegexDelimiter, list[str]]]:
    """(delimiter, the samples of its entry) for every regex delimiter of the catalog."""
    found = []
    for name in entry_names():
        module = importlib.import_module(f"generated.{name}")
        samples = REGEX_SAMPLES.get(name, []) + load_fixtures(name)["samples"]
        for value in vars(module.Parser).values():
            for delim in getattr(value, "patterns", ()):
                if isinstance(delim, RegexDelimiter):
                    found.append((delim, samples))
    return found


DELIMITERS = catalog_delimiters()


def outcome(match: Any, start: int | None = None) -> Any:
    if match is None:
        return None
    named = {key: value for key, value in match.groupdict().items() if value is not None}
    return (match.start() if start is None else start, match.end(), named)


def check(pattern: Any, buf: str, pos: int) -> None:
    """Branches.search gives the pattern's match; Branches.partial, when there is none
    and it applies, the start and end of the pattern's partial one."""
    branches = split(pattern)
    if branches is None:
        return
    found = branches.search(buf, pos, 10.0)
    ours = None if found is None else outcome(found[2], found[0])
    expected = pattern.search(buf, pos)
    assert ours == outcome(expected), (pattern.pattern, buf, pos)
    if expected is None and branches.literal_led:
        partial = branches.partial(buf, pos, 10.0)
        theirs = pattern.search(buf, pos, partial=True)
        assert (None if partial is None else partial[:2]) == (
            None if theirs is None else theirs.span()
        ), ("partial", pattern.pattern, buf, pos)


@given(
    pieces=st.lists(st.sampled_from(PIECES), min_size=1, max_size=6),
    words=st.lists(st.one_of(st.sampled_from(WORDS), st.text(ALPHABET, max_size=3)), max_size=8),
    data=st.data(),
)
def test_split_search_matches_the_pattern(pieces: list[str], words: list[str], data: Any) -> None:
    buf = "".join(words)
    try:
        pattern = regex.compile("".join(pieces), regex.DOTALL)
    except regex.error:
        return
    check(pattern, buf, data.draw(st.integers(0, len(buf))))


@given(entry=st.sampled_from(CATALOG), data=st.data())
def test_split_search_matches_catalog_patterns(entry: tuple[Any, list[str]], data: Any) -> None:
    pattern, samples = entry
    parts = data.draw(st.lists(st.sampled_from([*samples, *WORDS]), max_size=6))
    buf = "".join(parts)
    check(pattern, buf, data.draw(st.integers(0, len(buf))))


def check_in_order(pattern: Any, buf: str, positions: list[int]) -> None:
    """Branches.search from each position in turn, with one memo over the buffer as a scan
    keeps it (each part's match reused from an earlier search where it still lies ahead),
    gives the pattern's match from each."""
    branches = split(pattern)
    if branches is None:
        return
    memo: dict[Any, Any] = {}
    for pos in sorted(positions):
        found = branches.search(buf, pos, 10.0, memo)
        ours = None if found is None else outcome(found[2], found[0])
        assert ours == outcome(pattern.search(buf, pos)), (pattern.pattern, buf, pos)


@given(
    pieces=st.lists(st.sampled_from(PIECES), min_size=1, max_size=6),
    words=st.lists(st.one_of(st.sampled_from(WORDS), st.text(ALPHABET, max_size=3)), max_size=8),
    data=st.data(),
)
def test_split_searches_in_order_share_their_parts_matches(
    pieces: list[str], words: list[str], data: Any
) -> None:
    buf = "".join(words)
    try:
        pattern = regex.compile("".join(pieces), regex.DOTALL)
    except regex.error:
        return
    check_in_order(pattern, buf, data.draw(st.lists(st.integers(0, len(buf)), max_size=6)))


@given(entry=st.sampled_from(CATALOG), data=st.data())
def test_catalog_split_searches_in_order_share_their_parts_matches(
    entry: tuple[Any, list[str]], data: Any
) -> None:
    pattern, samples = entry
    buf = "".join(data.draw(st.lists(st.sampled_from([*samples, *WORDS]), max_size=8)))
    check_in_order(pattern, buf, data.draw(st.lists(st.integers(0, len(buf)), max_size=6)))


def test_catalog_whitespace_led_patterns_split() -> None:
    """The slow shape this exists for is recognised in the catalog (all but patterns that
    match empty, where REST could start anywhere)."""
    led = [
        pattern
        for pattern, _ in CATALOG
        if pattern.pattern.startswith("\\s*") and pattern.match("") is None
    ]
    assert led and all(split(pattern) is not None for pattern in led)


def test_groups_at_the_start_split_into_their_branches() -> None:
    r"""`(?:A|B)S` is searched as `AS|BS`, `(?:A)?S` as `AS|S` (xlam's open: four literal-led
    branches, not a match attempt at every position; mimo_v2_flash's: two, after `\s*`);
    not when another quantifier applies to the group."""
    xlam = regex.compile(
        r"(?:^\s*|```(?:json)?\s*|\[TOOL_CALLS\]\s*|<tool_call>\s*)(?=\[\s*\{)", regex.DOTALL
    )
    branches = split(xlam)
    assert branches is not None and branches.literal_led
    assert [part[4] for part in branches.parts] == ["", "```", "[TOOL_CALLS]", "<tool_call>"]
    mimo = regex.compile(r"\s*(?:<tool_call>\s*)?<function=(?P<name>[^>\n]+)>", regex.DOTALL)
    branches = split(mimo)
    assert branches is not None and branches.literal_led
    assert [part[4] for part in branches.parts] == ["<tool_call>", "<function="]
    for source in (r"(?:<a>|<b>)+x", r"(?:<a>|<b>){2}", r"(?:<a>)??x", r"(?:<a>)*x"):
        assert split(regex.compile(source)) is None, source


TIES = [
    r"a|ab",
    r"\s*<a>|\s*<a>x",
    r"\s*(?P<n><a>)|(?P<m>\s*<a>)",
    r"x|\s*<a>",
    r"\s*(?:<a>|<b>)",
    r"(?=<b>)|\s*<b>",
    r"<a>\s*|\s*<a>",
    r"(?=<b>|x)<|\s*x",
    r"\s*(?=<a>|<b>)<",
    r"<a>?x|\s*x",
    r"\n?</a>|<a>\n?",
    r"(?:^|<a>\s*)",
    r" *<a>| ?<b>",
    r"(?:^\s*|<a>\s*)(?=x)",
    r"(?:a|<a>)x",
    r"(?:<a>|<a>x)\s*x",
    r"(?:\s*<a>| ?<b>)(?=x|<a>)",
    r"\s*(?:<a>\s*)?<b>",
    r"(?:<a>)?(?:<b>\s*)?x",
    r"\s*(?:<a>|<b>)?x",
    r"(?:<a>|<b>)(?P<n>x|\s)",
]


def test_split_search_on_every_short_buffer() -> None:
    """Ties between branches, and whitespace runs before REST, exhaustively."""
    tokens = [" ", "\n", "<a>", "<b>", "x", "a"]
    buffers = [""]
    for _ in range(4):
        buffers = [buf + token for buf in buffers for token in ["", *tokens]]
    for source in TIES:
        pattern = regex.compile(source, regex.DOTALL)
        assert split(pattern) is not None, source
        for buf in set(buffers):
            for pos in range(len(buf) + 1):
                check(pattern, buf, pos)


def _as_reported(pattern: Any, buf: str, pos: int, eos: bool) -> Any:
    """What the reference's searches find, as RegexDelimiter.search reports it: the
    leftmost complete match (pending if it ends at the buffer's end), else, unless at the
    end of the stream, the leftmost partial one."""
    match = pattern.search(buf, pos)
    pending = not eos and match is not None and match.end() == len(buf)
    if match is None and not eos:
        match, pending = pattern.search(buf, pos, partial=True), True
    return None if match is None else (*outcome(match), pending)


@settings(max_examples=examples(1000))
@given(entry=st.sampled_from(DELIMITERS), data=st.data())
def test_catalog_delimiters_search_as_their_patterns(
    entry: tuple[RegexDelimiter, list[str]], data: Any
) -> None:
    """Every catalog delimiter's search (prefixes, split branches, narrowing, partial
    attempts) finds what its pattern finds: with SPLIT_AFTER 0 every buffer is long; with
    SHORT_SPAN and LEAD_SPAN 0 every buffer is short, and split when the pattern has a lead."""
    delim, samples = entry
    buf = "".join(data.draw(st.lists(st.sampled_from([*samples, *WORDS]), max_size=6)))
    pos = data.draw(st.integers(0, len(buf)))
    eos = data.draw(st.booleans())
    module = runtime.automaton
    saved = module.SPLIT_AFTER, module.SHORT_SPAN, module.LEAD_SPAN
    if data.draw(st.booleans()):
        module.SPLIT_AFTER = 0
    else:
        module.SPLIT_AFTER, module.SHORT_SPAN, module.LEAD_SPAN = 10_000, 0, 0
    try:
        hit = delim.search(buf, pos, eos, len(buf))
    finally:
        module.SPLIT_AFTER, module.SHORT_SPAN, module.LEAD_SPAN = saved
    ours = None if hit is None or isinstance(hit, int) else (*outcome(hit[3], hit[0]), hit[2])
    if ours is not None:
        ours = (ours[0], hit[1], ours[2], ours[3])  # the span the parser uses
    expected = _as_reported(delim.pattern, buf, pos, eos)
    # A pending match that starts at the buffer's end holds nothing back: the same as none.
    end = (len(buf), len(buf))
    ours, expected = (
        None if found is None or (found[3] and found[:2] == end) else found
        for found in (ours, expected)
    )
    assert ours == expected, (delim.pattern.pattern, buf, pos, eos)


@settings(max_examples=examples(300))
@given(entry=st.sampled_from(DELIMITERS), data=st.data())
def test_catalog_delimiters_searched_in_order_with_one_memo_find_what_each_search_finds(
    entry: tuple[RegexDelimiter, list[str]], data: Any
) -> None:
    """A scan's searches from later and later places share its memo (where each prefix of a
    delimiter occurs next, RegexDelimiter._next_prefix; what a split pattern's parts found,
    Branches.search): each finds what the same search finds with nothing kept. With
    SPLIT_AFTER 0, every stretch counts as long."""
    delim, samples = entry
    buf = "".join(data.draw(st.lists(st.sampled_from([*samples, *WORDS]), max_size=8)))
    eos = data.draw(st.booleans())
    places = sorted(data.draw(st.lists(st.integers(0, len(buf)), min_size=1, max_size=6)))
    memo: dict[Any, Any] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runtime.automaton, "SPLIT_AFTER", 0)
        for pos in places:
            limit = data.draw(st.integers(pos, len(buf)))
            alone, kept = (
                (
                    found
                    if found is None or found is IRRELEVANT or isinstance(found, int)
                    else found[:3]
                )
                for found in (
                    delim.search(buf, pos, eos, limit),
                    delim.search(buf, pos, eos, limit, memo),
                )
            )
            assert kept == alone, (delim.pattern.pattern, buf, pos, limit)
