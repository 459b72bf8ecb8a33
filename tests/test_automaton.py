"""One scan step, exhaustively: each state's generated step against the reference's rule.

The reference decides a scan step with one `regex` partial search per watched delimiter
(docs/design.md, "One scan step"). `reference_step` restates that rule directly; a
generated step reaches the same decision with a joint literal search, an if/elif in tie
order, hold-back tables and memoised results. Random delimiter sets over a tiny alphabet, with every buffer up to five
characters and every position, make ties, overlaps, prefixes and partial matches common.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import re
from collections.abc import Iterator
from typing import Any

import pytest
import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st
from profiles import examples

import runtime.automaton
import runtime.errors
from compiler.catalog import entry_names
from compiler.ir import Delimiter
from compiler.jit import load_parser
from compiler.regex_profile import (
    UNKNOWN,
    Run,
    _head,
    _matches,
    content_repeats,
    parse,
    profile,
)
from runtime.automaton import CLOSE, OPEN, LiteralDelimiter, RegexDelimiter, State, trie_pattern
from runtime.errors import RegexTimeout
from runtime.waiting import HeldObject, PendingObject

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
    # Start-only branches (RegexProfile.start_only), not under MULTILINE, and a pattern that
    # only matches at the start; a run led by look-behinds (RegexProfile.led_guarded).
    "(?:^a*|<)(?=b)",
    "(?m)(?:^|<)b",
    "^ab",
    "(?:\\Ab|<a)",
    "(?:a*<|(?<=b))a*<b",
    # Outside the analysable subset (recursion), read by their heads (regex_profile._head).
    "<(a(?1)?b)",
    "(?:<|^|(?<=a))(?=b)(b(?1)?<)",
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


def _delimiter(draw: Any, key: str) -> dict[str, Any]:
    """A random `open`/`close` (literals) or `open_pattern`/`close_pattern` of a template."""
    if draw(st.integers(0, 2)):
        literals = list(
            dict.fromkeys(draw(st.lists(st.sampled_from(LITERALS), min_size=1, max_size=3)))
        )
        return {key: literals[0] if len(literals) == 1 else literals}
    return {f"{key}_pattern": draw(st.sampled_from(PATTERNS))}


@st.composite
def scan_templates(draw: Any) -> dict[str, Any]:
    """Templates whose states watch random delimiters: explicit fields f, g, h (an open and
    a close each) and perhaps an implicit field k (a close)."""
    names = draw(st.lists(st.sampled_from(["f", "g", "h"]), min_size=1, max_size=3, unique=True))
    fields = {name: {**_delimiter(draw, "open"), **_delimiter(draw, "close")} for name in names}
    if draw(st.booleans()):
        fields["k"] = _delimiter(draw, "close")
    return {"start_anchor": "\x00", "fields": fields}


def watched_in(template: dict[str, Any], state: Any) -> list[tuple[int, str, Any, Delimiter]]:
    """What `state` watches, from the template itself, in the reference's terms."""
    fields = template["fields"]
    if state.field is not None and state.field != "k":
        keys = [(CLOSE, state.field)]
    else:
        keys = [(OPEN, name) for name in fields if name != "k"]
        keys += [(CLOSE, "k")] if "k" in fields else []
    watched = []
    for kind, name in sorted(keys):
        key = "open" if kind == OPEN else "close"
        value = fields[name].get(key)
        if value is not None:
            literals = (value,) if isinstance(value, str) else tuple(value)
            spec = Delimiter(path=name, literals=literals)
            source = "|".join(regex.escape(text) for text in spec.ordered)
        else:
            spec = Delimiter(path=name, literals=None, pattern=fields[name][f"{key}_pattern"])
            source = spec.pattern
        watched.append((kind, name, regex.compile(source, regex.DOTALL), spec))
    return watched


@given(template=scan_templates())
@settings(deadline=None)
def test_generated_scan_steps_match_the_reference_rule(template: dict[str, Any]) -> None:
    """Every state's generated scan step, on every buffer up to five characters and every
    position, against the rule restated by `reference_step`."""
    parser = load_parser(template, name="scan-steps")
    states = [value for value in vars(parser).values() if isinstance(value, State)]
    assert parser.START in states
    for state in states:
        watched = watched_in(template, state)
        assert [(d.kind, d.field) for d in state.watched] == [(k, n) for k, n, _, _ in watched]
        for buf in BUFFERS:
            memo: dict[Any, Any] = {}
            for pos in range(
                len(buf) + 1
            ):  # increasing positions share one memo, as a scan loop does
                for eos in (False, True):
                    hit, hold = state.scan(buf, pos, eos, memo if not eos else {})
                    ours = None if hit is None else (hit[0], hit[1], hit[2].field, hit[2].kind)
                    expected, expected_hold = reference_step(watched, buf, pos, eos)
                    assert ours == expected, f"{state} buf={buf!r} pos={pos} eos={eos}"
                    if ours is None and not eos:  # held-back text only matters when nothing commits
                        assert hold == expected_hold, f"{state} buf={buf!r} pos={pos}"


@given(template=scan_templates())
@settings(deadline=None)
def test_a_pattern_that_holds_the_rest_makes_the_step_hold_it(template: dict[str, Any]) -> None:
    """`State.holds` (the scanner's check of a chunk that arrives while a pattern's match is
    held, Scanner._still_held) against the state's own scan step: when it says a pattern
    holds the rest, the step commits nothing and holds all of it; and it says so for the
    pattern `State.holder` names after a step that held the rest for its pending match
    (of a pattern not cheap to search too, whose search then runs under a bound of its own:
    on these short buffers it does not reach it)."""
    parser = load_parser(template, name="held-rest")
    states = [value for value in vars(parser).values() if isinstance(value, State)]
    for state in states:
        for buf in BUFFERS:
            for pos in range(len(buf)):
                memo: dict[Any, Any] = {}
                step = state.scan(buf, pos, False, memo)
                holder = state.holder(buf, pos, memo) if step == (None, pos) else None
                if holder is not None:
                    assert state.holds(holder, buf, pos), f"{state} {holder} buf={buf!r}"
                for delim in state.patterns:
                    held = state.holds(delim, buf, pos)
                    # (a second ask may be answered from RegexDelimiter.held_texts)
                    assert state.holds(delim, buf, pos) is held is state._holds(delim, buf, pos)
                    if held:
                        assert step == (None, pos), f"{state} {delim} buf={buf!r} pos={pos}"


def test_a_held_match_whose_check_runs_out_of_time_is_left_to_the_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """State.holds searches a pattern that is not cheap (deepseek_r1's `\\s*`-led call open),
    or tries its match attempts (RegexDelimiter._led_pending_at), under a bound of its own
    (HOLD_SECONDS); a search or attempt that runs past it leaves the chunk to the scan
    step, which gives the same events. (Here every such search and attempt runs out of
    time, and the pattern's HeldMatch is taken away: where it follows the hold, and where
    it stops, Scanner._still_held does not ask `holds`.)"""
    parser_class = importlib.import_module("generated.deepseek_r1").Parser
    text = (
        "Let me check.\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_date"
        "\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>"
    )
    chunks = [text[index : index + 4] for index in range(0, len(text), 4)]

    def stream() -> list[Any]:
        parser = parser_class("")
        events = [parser.feed(chunk) for chunk in chunks]
        return [*events, parser.finalize()]

    expected = stream()
    search = RegexDelimiter.search
    timed_out = []

    def out_of_time(delim: RegexDelimiter, *args: Any) -> Any:
        if runtime.errors._BOUND.get() == runtime.automaton.HOLD_SECONDS:
            timed_out.append(delim)
            raise RegexTimeout(delim._where(), runtime.automaton.HOLD_SECONDS)
        return search(delim, *args)

    class OutOfTime:
        """A delimiter's `attempts` whose attempts under HOLD_SECONDS run out of time."""

        def __init__(self, delim: RegexDelimiter, pattern: Any) -> None:
            self.delim, self.pattern = delim, pattern

        def match(self, *args: Any, **options: Any) -> Any:
            if options.get("timeout") == runtime.automaton.HOLD_SECONDS:
                timed_out.append(self.delim)
                raise TimeoutError
            return self.pattern.match(*args, **options)

        def search(self, *args: Any, **options: Any) -> Any:
            return self.pattern.search(*args, **options)

    attempts = RegexDelimiter.attempts
    monkeypatch.setattr(RegexDelimiter, "held_match", lambda delim: None)
    monkeypatch.setattr(RegexDelimiter, "search", out_of_time)
    monkeypatch.setattr(
        RegexDelimiter,
        "attempts",
        property(lambda delim: OutOfTime(delim, attempts.fget(delim))),  # type: ignore[attr-defined]
    )
    assert stream() == expected and timed_out
    assert expected[-1][0]["tool_calls"][0]["function"]["name"] == "get_date"


def test_a_pattern_being_matched_holds_the_rest() -> None:
    """The cases the property above is about do occur: a partial match, and a complete match
    that may grow; text that ends them, or a match that starts later, does not hold."""
    start = load_parser(
        {"start_anchor": "\x00", "fields": {"g": {"open_pattern": "a+b<"}}}, name="held-rest"
    ).START
    (pattern,) = start.patterns
    assert start.holds(pattern, "aab", 0) and start.scan("aab", 0, False, {}) == (None, 0)
    assert start.holds(pattern, "aab<", 0) and start.scan("aab<", 0, False, {}) == (None, 0)
    assert not start.holds(pattern, "aab<x", 0) and not start.holds(pattern, "abb", 0)
    assert not start.holds(pattern, "xaab", 0) and start.holds(pattern, "xaab", 1)


def counted_scans(monkeypatch: pytest.MonkeyPatch, name: str) -> tuple[Any, list[str]]:
    """Catalog entry `name`'s Parser class, and the chunks that went to its `_scan_feed`
    since last cleared."""
    parser_class = importlib.import_module(f"generated.{name}").Parser
    scans: list[str] = []
    scan_feed = parser_class._scan_feed

    def counted(parser: Any, text: str) -> Any:
        scans.append(text)
        return scan_feed(parser, text)

    monkeypatch.setattr(parser_class, "_scan_feed", counted)
    return parser_class, scans


@pytest.fixture
def qwen3_scans(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[str]]:
    return counted_scans(monkeypatch, "qwen3")


def test_a_tool_calls_body_goes_through_no_scan(qwen3_scans: tuple[Any, list[str]]) -> None:
    """A tool call's body in 4-character chunks, after the chunk that completes its open
    (`c>\n<`, whose rest after the open holds a piece of `</tool_call>`), goes through no
    `_scan_feed` until the close arrives: the rest after the open takes the prefiltered
    route (Scanner._held_unscanned) and names no pattern as holding it. (A scan step there
    named the close pattern, which stayed named through the body and sent every chunk
    that held or followed a `<` through `_scan_feed` and a search.)"""
    parser_class, scans = qwen3_scans
    body = "<parameter=q>\nitem\n</parameter>\n<parameter=n>\n3\n</parameter>\n</function>\n"
    text = f"Hi.\n<tool_call>\n<function=abc>\n{body}</tool_call>"
    parser = parser_class("")
    scanned = []  # whether each chunk went through `_scan_feed`
    for index in range(0, len(text), 4):
        scans.clear()
        parser.feed(text[index : index + 4])
        scanned.append(bool(scans))
    start = text.index("<function=abc>\n<") + len("<function=abc>\n<")
    assert text[start - 4 : start] == "c>\n<" and scanned[start // 4 - 1]
    assert not any(scanned[start // 4 : text.index("</tool_call>") // 4]), scanned
    assert parser.finalize()[0]["tool_calls"][0]["function"] == {
        "name": "abc",
        "arguments": {"q": "item", "n": 3},
    }


def test_a_hold_that_ended_is_forgotten(qwen3_scans: tuple[Any, list[str]]) -> None:
    """A scan that ends holding a piece for a pattern (`<` after a `<tool_call>` that
    opened nothing) names it; the chunk that ends the hold clears the name, so the chunks
    after it are the fast path's again (it used to stay named until the next scan)."""
    parser_class, scans = qwen3_scans
    parser = parser_class("")
    parser.feed("Hi <tool_call>x <")
    chunks = ["abc", "a <b", "c <", "d", "e<f"]
    sent = []
    for chunk in chunks:
        scans.clear()
        parser.feed(chunk)
        sent.append(bool(scans))
    assert sent == [True, False, False, False, False]
    assert parser.finalize()[0]["content"] == "Hi <tool_call>x <abca <bc <de<f"


def test_a_chunk_after_a_held_piece_takes_the_quick_route_with_the_whole_stream_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """llama3_json keeps the whole stream as its left context (CONTEXT None: its look-behind
    `(?<=\\}\\s*;?\\s*)` is unbounded). A chunk after a held `<` (a piece of `<|python_tag|>`)
    takes Regions._feed_piece's quick route, not `_scan_feed` (3.1 -> about 1.2 us such a
    chunk dense in `<`), and the context still is the stream: a `{"name"` after a `}` then
    opens a call, as the one-shot parse has it."""
    parser_class, scans = counted_scans(monkeypatch, "llama3_json")
    prefix = "<|start_header_id|>assistant<|end_header_id|>\n\n"
    parser = parser_class(prefix)
    parser.feed("if a ")  # (the scan opens the content region)
    sent = []
    for chunk in ["<", "b: x", " = 1", " <", "y> }", " "]:
        scans.clear()
        parser.feed(chunk)
        sent.append(bool(scans))
        assert parser._context.endswith(parser._pending)
    assert sent == [False] * 6
    assert parser._context == "if a <b: x = 1 <y> } "
    call = '{"name": "f", "parameters": {}}'
    for index in range(0, len(call), 4):
        parser.feed(call[index : index + 4])
    message = parser.finalize()[0]
    assert message == parser_class.parse("if a <b: x = 1 <y> } " + call, prefix=prefix)
    assert message["tool_calls"][0]["function"] == {"name": "f", "arguments": {}}


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


def test_a_single_literal_may_be_given_as_a_str() -> None:
    single = LiteralDelimiter(OPEN, "f", "<tool_call>", rank=0)
    listed = LiteralDelimiter(OPEN, "f", ("<tool_call>",), rank=0)
    assert single.literals == listed.literals == ("<tool_call>",)
    assert single.longest == listed.longest == len("<tool_call>")
    state = State("f", literals=(single,), close=None)
    assert state.literal_reach == len("<tool_call>") - 1  # how far back a partial one starts
    assert state.literals_re.pattern == re.escape("<tool_call>")


def test_the_literal_alternation_tries_longer_literals_first() -> None:
    state = State(
        "f",
        literals=(
            LiteralDelimiter(OPEN, "a", "<a", rank=0),
            LiteralDelimiter(CLOSE, "b", ("<ab>", "<a|"), rank=1),
        ),
        close=None,
    )
    assert state.literals_re.pattern == "|".join(map(re.escape, ["<ab>", "<a|", "<a"]))
    assert state.literals_re.search("x<ab>").group() == "<ab>"


@given(
    literals=st.lists(st.text("<|/ab", min_size=2, max_size=6), min_size=1, max_size=4),
    text=st.text("<|/ab x", max_size=40),  # both sides of ONE_SEARCH_SPAN
    small=st.booleans(),
)
def test_piece_at_end_is_the_longest_suffix_that_begins_a_start_text(
    literals: list[str], text: str, small: bool
) -> None:
    """State.piece_at_end (one pass over lead characters, a set of pieces or startswith for
    long literals) equals its definition: the leftmost index whose suffix is a proper
    prefix of some start text."""
    state = State(
        "x",
        literals=(LiteralDelimiter(CLOSE, "x", tuple(sorted(set(literals), key=len)), rank=0),),
        literals_re=re.compile("|".join(map(re.escape, literals))),
        close=None,
    )
    if not state.start_texts:
        return  # only one-character texts: the fast path's character test says it all
    if small:  # as for start texts longer than MAX_PIECES in all
        state.at_end = state.starts_or_piece = None
    may_start = any(start in text for start in state.start_texts)
    expected = min(
        (
            index
            for index in range(len(text))
            for start in state.start_texts
            if start.startswith(text[index:]) and start != text[index:]
        ),
        default=-1,
    )
    assert state.piece_at_end(text) == expected
    assert state.may_start(text) == (may_start or expected != -1)
    assert state.held_unless_started(text) == (None if may_start else expected)


@given(
    literals=st.lists(st.text("|/ab", min_size=1, max_size=5), min_size=1, max_size=4),
    text=st.text("<|/ab x", max_size=6),
)
def test_may_start_on_a_chunk_shorter_than_every_start_text(literals: list[str], text: str) -> None:
    """State.may_start on a chunk shorter than every start text, where the start texts hold
    their one lead character only first (a look-up of the suffix from the last `<`), equals
    its definition: a suffix of the chunk is a proper prefix of a start text."""
    texts = tuple(sorted({"<" + literal for literal in literals}, key=len))
    state = State("x", literals=(LiteralDelimiter(CLOSE, "x", texts, rank=0),), close=None)
    assert state.shortest_start == len(texts[0])
    expected = any(
        start.startswith(text[index:]) and start != text[index:]
        for index in range(len(text))
        for start in texts
    ) or any(start in text for start in texts)
    assert state.may_start(text) == expected


# (SPARSE, DENSE, GROWTH): windows from two characters on, after one place checked or more.
WINDOWS = [(2, 1, 2), (3, 1, 2), (2, 2, 4), (3, 3, 2), (8, 3, 4), (512, 3, 4)]


@given(
    literals=st.lists(
        st.sampled_from(["<", "<a", "<<", "<ab", "<a<", "</b", "<<ab"]), min_size=1, max_size=3
    ),
    text=st.lists(st.sampled_from(["<", "<<", "<a", "<ab", "a", "b/", " "]), max_size=50),
    skipped=st.integers(0, 8),
    cut=st.integers(0, 8),
)
@example(literals=["<<ab", "<ab", "<a"], text=["<<", "<ab"], skipped=0, cut=0)  # one runs past
@example(literals=["<<ab", "<a"], text=["<<", "<<ab"], skipped=0, cut=0)  # two in one window
def test_probing_and_windowed_searches_find_the_leftmost_match(
    literals: list[str], text: list[str], skipped: int, cut: int
) -> None:
    """find_literal and first_match (memchr probes, then windows that grow) give what one
    search gives, wherever candidates lie close or far and windows end in a match."""
    buf = "".join(text)
    start = min(skipped, len(buf))
    end = max(start, len(buf) - cut)
    pattern = re.compile(trie_pattern(literals))
    match = pattern.search(buf, start)
    leftmost = -1 if match is None else match.start()
    texts = tuple(dict.fromkeys(literals))
    automaton = runtime.automaton
    saved = automaton.SPARSE, automaton.DENSE, automaton.GROWTH, automaton.FEW_TEXTS
    try:
        for automaton.SPARSE, automaton.DENSE, automaton.GROWTH in WINDOWS:
            for literal in literals:
                assert automaton.find_literal(buf, literal, start, end) == buf.find(
                    literal, start, end
                )
            for automaton.FEW_TEXTS in (0, len(texts)):  # a regex, or a search per text
                assert automaton.first_match(buf, "<", pattern, start, texts) == leftmost
    finally:
        automaton.SPARSE, automaton.DENSE, automaton.GROWTH, automaton.FEW_TEXTS = saved


CHEAP = [
    r"</tool_call>\s*",
    r"\s*(?:<tool_call>\s*)?<function=(?P<name>[^>\n]+)>",
    r"</think>|(?=<tool_call>\s*<function=)",
    r"<\|im_end\|>.*",
    r"^\s*",
    r'<a k="(?P<k>[^"]*)" t="[^"]*">(?P<v>.*?)</a>',
    r"[^<]*<[^<]*<[^<]*<[^<]*<",
]
COSTLY = [
    r"(a|aa)+c",  # a repeated group: exponential on "aaa...b"
    r"(a+)+b",
    r"(?:ab)*c",
    r"\s*\s*\s*\s*x",  # four overlapping unbounded repeats: O(n^4) per start
    r"(?<=\n\s*)x",  # a look-behind reads text before the searched span
    r"(x)\1",
]


def test_start_only_branches_and_look_behind_led_runs_are_read_apart() -> None:
    """Past the stream's first position a `^` (or `\\A`) branch cannot match, so the other
    branches' texts prefilter the pattern there (not under MULTILINE, where `^` matches
    after any newline); a look-behind in front of a run can only refuse a match, so every
    match of `(?:\\s*<a>|(?<=</b>))\\s*<c>` is a run and then one of its texts."""
    ernie = profile(r"(?:^|<think>\s*)")
    assert ernie.start_only and ernie.literal_prefixes == ("<think>",)
    assert ernie.first_chars == frozenset("<") and ernie.lookbehind == 1
    xlam = profile(r"(?:^\s*|<t>\s*|\[T\]\s*)(?=\[)")
    assert xlam.start_only and xlam.literal_prefixes == ("<t>", "[T]")
    assert profile(r"(?:\A|<a>)").literal_prefixes == ("<a>",)
    multiline = profile(r"(?m)(?:^|<a>)")
    assert not multiline.start_only and multiline.first_chars is None
    assert not profile(r"(?:(?m:^)|<a>)").start_only  # a scoped flag: not read apart
    dead = profile(r"^<h>")  # no match past the first position
    assert dead.start_only and dead.first_chars == frozenset() and not dead.literal_prefixes
    guarded = profile(r"(?:\s*<a>|(?<=</b>)|(?<=/>))\s*<c=(?P<n>\w+)>")
    assert (guarded.led_by, guarded.led_prefixes) == (r"\s*", ("<a>", "<c="))
    assert guarded.led_guarded and guarded.led_bare and not guarded.start_only
    only_guarded = profile(r"(?:(?<=\n)|(?<=>))\s*<d>")
    assert only_guarded.led_guarded and not only_guarded.led_bare
    after_start = profile(r"(?:^|(?<=;))\s*<d>")
    assert after_start.start_only and after_start.led_prefixes == ("<d>",)
    assert not profile(r"(?:\s*<a>|(?<=b)<c>)").led_by  # a branch without the run
    # Prefixes, some behind look-behinds: a piece of a text only those start with may be
    # refused, a piece of another is a partial match.
    prefixed = profile(r"(?:<a>\s*|(?<=\})(?=\{))")
    assert prefixed.prefix_guarded and not prefixed.prefix_at_start
    assert prefixed.guarded_prefixes == ("{",)
    shared = profile(r"<ab>|(?<=x)<ac>|<ac>")
    assert shared.prefix_guarded and shared.guarded_prefixes == ()
    assert not profile(r"<a>|\b<c>").prefix_guarded  # an assertion that is no look-behind
    assert not profile(r"<a>|<c>").prefix_guarded  # nothing guarded: prefix_at_start


def test_a_pattern_outside_the_subset_is_read_by_its_head() -> None:
    """A pattern the analysis cannot read (llama3_json's recursive open) is prefiltered by
    its longest leading part that it reads, ending before a top-level group: every match
    starts with a match of that part. Not with a top-level `|` (the rest could match on
    its own), nor with a global flag after it (which changes the whole pattern)."""
    recursive = r'(?:<\|p\|>\s*|^\s*|(?<=\}\s*))(?=\{")(?P<c>(?&o))(?(DEFINE)(?P<o>\{(?&o)?\}))'
    head = r'(?:<\|p\|>\s*|^\s*|(?<=\}\s*))(?=\{")'
    assert _head(recursive) == head and parse(recursive) is None
    known = profile(recursive)
    assert known.first_chars == frozenset("<{") and known.start_only and not known.analysed
    assert known.lookbehind is None and not known.cheap and not known.runs
    assert profile(r"<a>(?P<v>b(?&v)?c)").literal_prefixes == ("<a>",)
    assert _head(r"<a>(?P<v>b(?&v)?c)|d") is None
    assert _head(r"<a>(?P<v>b(?&v)?c)(?i)") is None
    assert _head(r"[(]<a>(?&v)") == r"[(]<a>" and _head(r"[]a(]<b>(?&v)") == r"[]a(]<b>"
    assert profile(r"(?&v)(?P<v>a)") is UNKNOWN  # nothing before the first group
    # Past the start, a match starts at `<|p|>` or where the look-ahead does, at `{"`.
    assert known.literal_prefixes == ("<|p|>", '{"')


def test_a_look_ahead_gives_its_texts() -> None:
    """A match of an alternative that starts with a look-ahead (behind look-behinds, which
    can only refuse a position) starts where the look-ahead's content matches, so it has
    that content's texts; any other alternative without a text leaves the pattern none."""
    assert profile(r"(?=\[[A-Za-z_]\w*\()").literal_prefixes == ("[",)  # pythonic
    assert profile(r"(?<=[;)])(?=\[X)").literal_prefixes == ("[X",)
    granite = profile(r"</r>\s*|<\|e\|>|(?=<\|t\|>|<t>)")
    assert granite.literal_prefixes == ("</r>", "<|e|>", "<|t|>", "<t>")
    assert profile(r"(?:<a>|(?<=\}))(?=\{)").literal_prefixes == ("<a>", "{")
    assert profile(r"(?:<a>|(?<=\}))(?!\{)x").literal_prefixes == ("<a>", "x")
    assert profile(r"(?:<a>|(?<=\}))(?!\{)").literal_prefixes == ()  # where any text is not
    assert profile(r"(?:<a>|(?<=\}))(?=\s*\{)").literal_prefixes == ()  # a run first


def test_llama3_json_streams_a_call_after_a_brace_of_content() -> None:
    """llama3_json's open is outside the analysable subset; read by its head, a match
    starts on '<' (`<|python_tag|>`) or '{' (behind `}` and a look-behind): a '{' chunk of
    content goes to the scan, which opens the call there, as one-shot parsing does."""
    import generated.llama3_json

    parser_cls = generated.llama3_json.Parser
    output = 'Sure: {"a": 1} {"name": "f", "parameters": {"x": 2}}'
    parser = parser_cls("")
    for char in output:
        parser.feed(char)
    message, _ = parser.finalize()
    assert message == parser_cls.parse(output, prefix="")
    assert message["tool_calls"][0]["function"]["name"] == "f"


def test_cheap_patterns_are_the_ones_with_few_one_character_repeats() -> None:
    """A pattern is cheap (searched over short texts without the time bound) only with at
    most three unbounded repeats, each of one character, and no look-behind or
    back-reference."""
    assert [profile(pattern).cheap for pattern in CHEAP] == [True] * len(CHEAP)
    assert [profile(pattern).cheap for pattern in COSTLY] == [False] * len(COSTLY)


# (pattern, degree): one match attempt takes O(n^degree) steps, a search O(n^(degree + 1)).
DEGREES = [
    # A repeat that stops where its rest goes on (`[^"]*` before `"`) gives back only
    # characters the rest fails on at once: it adds no factor, only its own O(n).
    (r'[^"]*"[^"]*"', 1),
    (r"[^<]*<[^<]*<[^<]*<[^<]*<", 1),
    (r'<a k="(?P<k>[^"]*)">(?P<v>.*?)</a>', 1),
    # ... but once after a repeat that can end in many places, it is reached from each.
    (r"(?P<v>.*?)=[^=]*=", 2),
    (r".*?a.*?b", 2),
    (r"[a-z]*[0-9]*x", 2),  # x may continue the first run
    (r"<p=(?P<key>\w+)>\s*(?P<value>.*?)\s*</p>", 3),
    # Where the characters are not known for sure, nothing is taken to stop: inside a
    # case-insensitive group [a-z] matches B, and \P{L} (read as \W) matches 5.
    (r"(?i:[a-z]*B)x*", 2),
    (r"\P{L}*5\d*", 2),
    (r"\s*\s*\s*\s*x", None),
]


@pytest.mark.parametrize(("pattern", "degree"), DEGREES)
def test_the_degree_counts_the_repeats_that_can_end_in_many_places(
    pattern: str, degree: int | None
) -> None:
    assert profile(pattern).repeats == degree
    assert content_repeats(pattern) == degree


def test_a_content_pattern_that_names_a_group_twice_is_profiled() -> None:
    """kimi_k3's tag pattern names `key` and `value` in both branches, which the stdlib
    parser refuses: names are dropped for the degree (and kept in a class)."""
    tag = (
        r'<a k="(?P<key>[^"]*)"(?: t="s")?(?P<value>>.*?</a>)'
        r'|<a k="(?P<key>[^"]*)" t="[^"]*">(?P<value>.*?)</a>'
    )
    assert profile(tag).repeats is None  # not read as a delimiter
    assert content_repeats(tag) == 1
    assert content_repeats(r"[(?P<x>]*(?P<y>x)x*") == 2  # x may continue the class's run


CLASSES = [r"[^\"]", r"[a-z0-9_]", r"\s", r"[^\s>]", r"\d", r"[^\W\d]", "x", r"[^x]", r"\W", "."]


@given(source=st.sampled_from(CLASSES), char=st.characters())
def test_the_class_test_agrees_with_the_engine(source: str, char: str) -> None:
    """_matches, which decides that a repeat stops, answers as `regex` does, or not at all."""
    ((op, av),) = list(parse(source))
    known = _matches(op, av, char)
    if known is not None:
        assert known == (regex.fullmatch(source, char, regex.DOTALL) is not None)


def test_a_costly_pattern_keeps_its_time_bound_on_a_short_text() -> None:
    # 32 characters are enough for (a|aa)+c to backtrack for seconds; not cheap, so the
    # search runs under the bound and raises instead.
    delim = RegexDelimiter(CLOSE, "x", regex.compile(r"(a|aa)+c"), rank=0)
    buf = "a" * 31 + "b"
    with runtime.errors.bounded_by(0.05), pytest.raises(RegexTimeout, match=r"fields\.x"):
        delim.search(buf, 0, True, len(buf))


@given(pattern=st.sampled_from(CHEAP), text=st.text("<>/a_=\n tcolfunimkd|", max_size=40))
def test_cheap_search_finds_what_the_bounded_search_finds(pattern: str, text: str) -> None:
    compiled = regex.compile(pattern, regex.DOTALL)
    cheap = RegexDelimiter(CLOSE, "x", compiled, rank=0, repeats=profile(pattern).repeats)
    bounded = RegexDelimiter(CLOSE, "x", compiled, rank=0)
    for eos in (False, True):
        for pos in range(len(text) + 1):
            got = cheap.search(text, pos, eos, len(text))
            want = bounded.search(text, pos, eos, len(text))
            assert (got is None) == (want is None)
            if got is not None:
                assert got[:3] == want[:3]


def _streamed_waiting(name: str, text: str, rest: str) -> dict[str, Any]:
    """The message of a `name` parser fed `text` in 4-character chunks, then `rest`: the
    one-shot parse's. Fed `text`, the parser must wait on its hold, not search it again."""
    parser_cls = importlib.import_module(f"generated.{name}").Parser
    parser = parser_cls("")
    for index in range(0, len(text), 4):
        parser.feed(text[index : index + 4])
    assert parser._waiting is not None  # held, not searched again
    parser.feed(rest)
    message, _ = parser.finalize()
    assert message == parser_cls.parse(text + rest, prefix="")
    return message  # type: ignore[no-any-return]


def test_an_open_that_looks_ahead_to_its_close_waits_for_it() -> None:
    """glm45 opens a call only once `</tool_call>` is in sight, with no `<tool_call>` before
    it: the held call's match stays partial until one of the two arrives, so the parser
    waits for `tool_call>`, which both end with, instead of searching the call again for
    every chunk."""
    pattern = r"\s*<tool_call>\s*(?P<name>[^\s<]+)\s*(?=(?:(?!<tool_call>).)*?</tool_call>)"
    assert profile(pattern).runs == (
        Run(r"\s*<tool_call>\s*(?P<name>[^\s<]+)\s*", None, "tool_call>"),
        Run("", r"\s*", ""),  # led by a run: held whitespace waits for a non-space
    )
    assert profile(r"<a>(?=.*?</a>)").runs == (Run("<a>", None, "</a>"),)
    assert profile(r"<a>(?=(?:(?!<b>).)*?</a>)").runs == (Run("<a>", None, ">"),)
    assert profile(r"<a>(?=(?:(?!<b>).)*?</a>x)").runs == ()  # nothing both end with
    assert profile(r"<a>(?=x.*y)").runs == ()

    call = "<tool_call>get\n<arg_key>a</arg_key>\n<arg_value>" + "x " * 2000
    message = _streamed_waiting("glm45", call, "</arg_value>\n</tool_call>")
    assert message["tool_calls"][0]["function"]["arguments"] == {"a": "x " * 2000}


# llama3_json's open: a head, then a call of a recursive group that matches a JSON object.
JSON_HEAD = r'(?:<\|python_tag\|>\s*|^\s*|(?<=\}\s*;?\s*))(?=\{\s*"name")'
JSON_OBJECT = r'\{(?:[^{}"]++|"(?:[^"\\]++|\\.)*+"|(?&obj))*+\}'
JSON_CALL = JSON_HEAD + "(?P<call>(?&obj))(?(DEFINE)(?P<obj>" + JSON_OBJECT + "))"


def test_a_pending_json_object_waits_for_a_closing_brace() -> None:
    """Only a `}` can complete a pending object (or, with the head matched, end it): the
    parser waits for one instead of searching the call again for every chunk, and waits
    again after a `}` that closed a nested object (before: a 5.6 KB call in 4-character
    chunks took 1.5 s, 874 us a chunk)."""
    assert profile(JSON_CALL).runs == (Run(JSON_HEAD, None, "}", True, '"name"'),)
    assert profile(JSON_CALL.replace("*+\\}", "*\\}")).runs == ()  # only the known idiom
    # A look-around that may see past the held object's `{` or a later one's `}`: no wait
    # (HeldObject.follow could not tell from the held text where a second match begins).
    for before, after in (("(?<=\\}", "(?<=[{}]"), ('\\s*"name"', '[^"]*"name"'), ("(?=", "(?!")):
        assert profile(JSON_CALL.replace(before, after, 1)).runs == ()
    call = '{"name": "f", "parameters": {"o": {"p": [1]}, "s": "' + "x = {1} " * 500
    message = _streamed_waiting("llama3_json", call, '"}}')
    assert message["tool_calls"][0]["function"]["arguments"]["s"] == "x = {1} " * 500


@given(text=st.text('{}"\\ a\n', max_size=24), cut=st.integers(0, 32))
@example(text=': "\\"{"}', cut=10)  # an escaped quote: the string goes on
@example(text=': "\\\\"}', cut=11)  # an escaped backslash: the quote ends the string
@example(text=': {"b": "}"}}', cut=9)  # a nested object, a brace in a string
def test_a_held_json_object_wakes_where_its_pattern_completes(text: str, cut: int) -> None:
    """The fact the wait rests on (runtime.waiting.HeldObject): once the head has matched,
    the object's pattern stays pending until exactly the `}` the wait wakes on, over the
    text received whole or in two parts."""
    pattern = regex.compile(JSON_CALL, regex.DOTALL)
    wait = HeldObject(JSON_HEAD)
    buf = '{"name"' + text
    for end in range(len('{"name"'), len(buf) + 1):
        found = pattern.match(buf[:end], partial=True)
        assert found is not None
        whole = wait.begin(buf[:end], 0)
        assert (whole is None) is not found.partial
        split = min(cut, end)
        before = wait.begin(buf[:split], 0) if split else PendingObject(0, 0, "")
        after = None if before is None else wait.follow(buf[split:end], before)
        assert after == whole


@pytest.mark.parametrize(
    ("name", "text", "waits"),
    [
        # A call held by the look-ahead waits at once, however short (State.waits_early)...
        ("glm45", "Hi\n<tool_call>get\n<arg_key>a</arg_key>", True),
        # ... also when a chunk ends right after `<tool_call>`, before the name the wait
        # needs: the chunks after it find the call still held, and wait then;
        ("glm45", "abc.\n<tool_call>get\n<arg_key>a</arg_key>", True),
        # ... a short run of whitespace, which the fast path holds itself, does not;
        ("glm45", "Hi there \n", False),
        # in a state with no fast path (inkling's sink: `[^<]*` leads its opens) a hold a
        # scan leaves waits;
        ("inkling", "Some text before a region", True),
        # ... and so does a message header followed by a run: its pieces are held without a
        # scan (waiting.BrokenRun), and the scan of the whole header waits on the run after it.
        ("inkling", "<|message_model|>Some text before its kind", True),
    ],
)
def test_which_short_holds_wait(name: str, text: str, waits: bool) -> None:
    """A held-back stretch shorter than WAIT_AFTER waits only where that spares rescans:
    after a scan in a state without a fast path, or when only a look-ahead's literal can
    change it. Waiting or not, the message is the one-shot parse's."""
    parser = importlib.import_module(f"generated.{name}").Parser("")
    for index in range(0, len(text), 4):
        parser.feed(text[index : index + 4])
    assert len(parser._pending) < parser.WAIT_AFTER
    assert (parser._waiting is not None) is waits
    more = "</tool_call>" if name == "glm45" else "<|content_text|>hi<|end_message|>"
    parser.feed(more)
    assert parser.finalize()[0] == parser.parse(text + more, prefix="")


def test_a_header_seen_before_is_held_without_a_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inkling's message header arrives in 4-character chunks, held while the three opens
    it may start are told apart. What the first message's scans held (State.held_windows)
    and what `State.holds` answered (RegexDelimiter.held_texts) hold the next message's
    header without a scan, up to the chunk that completes it; the message is the one-shot
    parse's."""
    parser_cls = importlib.import_module("generated.inkling").Parser
    for state in (value for value in vars(parser_cls).values() if isinstance(value, State)):
        state.held_windows.clear()
        for delim in state.patterns:
            delim.held_texts.clear()
    scans: list[str] = []
    scan = parser_cls._scan

    def counted(self: Any, text: str, events: list[Any], eos: bool) -> None:
        scans.append(text)
        scan(self, text, events, eos)

    monkeypatch.setattr(parser_cls, "_scan", counted)
    header = "<|message_model|><|content_thinking|>"
    message = header + "Hm.<|end_message|>"
    chunks = [message[index : index + 4] for index in range(0, len(message), 4)]
    held = len(header) // 4  # the chunks before the one that completes the header
    parser = parser_cls("")
    for chunk in chunks[:held]:
        parser.feed(chunk)
    assert scans  # the first header is scanned
    for chunk in chunks[held:]:
        parser.feed(chunk)
    scans.clear()
    for chunk in chunks[:held]:
        assert parser.feed(chunk) == []
    assert scans == []
    for chunk in chunks[held:]:
        parser.feed(chunk)
    assert parser.finalize()[0] == parser_cls.parse(message * 2, prefix="")


# Plain text such as a tool call's arguments hold: words, spaces, newlines, quotes, brackets.
PLAIN = 'Let me write(x = 1, y = "two")\nand then [a, b] (c) {d: 1} more words here ' * 4


@pytest.mark.parametrize("name", entry_names())
def test_plain_text_is_held_only_where_the_parser_waits_on_it(name: str) -> None:
    """A catalog pattern with a pending match far back in plain text holds all of it, and a
    scan searches all of it again for every chunk (quadratic streaming), unless the parser
    waits on that match (RegexDelimiter.waits). Before its look-behind's run was made
    possessive, llama4_pythonic's close made `regex` report a pending match from the first
    whitespace on: 1.9 ms a chunk with 8K of a call's argument."""
    parser = importlib.import_module(f"generated.{name}").Parser
    states = [value for value in vars(parser).values() if isinstance(value, State)]
    for state in states:
        for delim in state.patterns:
            found = delim.pattern.search(PLAIN, 0, partial=True)
            if found is None or not found.partial or found.start() >= len(PLAIN) - 40:
                continue
            assert delim.waits(PLAIN, found.start()) is not None, (state, delim.pattern.pattern)


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


LED_PATTERNS = [
    r"\s*<t>",
    r"\s*(?:<a>\s*)?<b>\s*(?P<n>[^\s`<]+)\s*```",
    r"(?:(?<=\n)|(?<=>))\s*<d>",  # a look-behind that accepts places inside the run
    r"(?:(?<=\n)|(?<=>))\s*<d>x*y",  # and a text that may be followed by more
    r"(?:\s*<a>|(?<=</b>)|(?<=/>))\s*<c=(?P<n>\w+)>",  # deepseek_v4's shape
    r"[ \t]*<p1>",
    r"\s*<a>[ab]*?<k>",  # a lazy repeat after the text
    r"\s*```\s*<e>",  # a text that ends with a piece of itself (deepseek_r1's close)
    # A partial match at `<a><a>b` from 0 and a complete one from 3; and at `<a><a>x \n<a>b`,
    # a complete one from a place inside a run whose start the look-behind refuses.
    r"\s*<a>(?:<a>[^c]*c|b)",
    r"\s*<a><a>[^c]*c|(?<=\n)\s*<a>b",
]


# The patterns' texts, pieces of them, runs and other text: buffers built of these hold
# whole texts and pieces far more often than random characters would ("```" seldom occurs
# in random text, and it ends in its own piece "``").
LED_FRAGMENTS = [
    *(" ", "\n", "\t", "  ", "x", "y", "ab", "b", "=", "/>", "</b>", ">", "name"),
    *("<t>", "<a>", "<b>", "<c=", "<d>", "<e>", "<k>", "<p1>", "```"),
    *("<", "<t", "<a", "<c", "<p", "``", "`"),
]
# A pattern, a buffer and (drawn from `data`) a position in it.
LED_CASES = {
    "pattern": st.sampled_from(LED_PATTERNS),
    "buf": st.lists(st.sampled_from(LED_FRAGMENTS), max_size=8).map("".join),
    "data": st.data(),
}


def led_delimiter(pattern: str, repeats: int | None = None) -> RegexDelimiter:
    """A RegexDelimiter for a pattern led by a run, as the compiler declares one."""
    known = profile(pattern)
    assert known.led_by, pattern
    compiled = regex.compile(pattern, regex.DOTALL)
    return RegexDelimiter(
        CLOSE,
        "f",
        compiled,
        rank=0,
        prefix=known.led_prefixes,
        led_by=known.led_by,
        repeats=repeats,
    )


@contextlib.contextmanager
def lead_span(value: int) -> Iterator[None]:
    """runtime.automaton.LEAD_SPAN set to `value` (0: as on a rest longer than it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runtime.automaton, "LEAD_SPAN", value)
        yield


@given(**LED_CASES)
def test_a_led_patterns_partial_search_tries_the_runs_before_its_texts(
    pattern: str, buf: str, data: Any
) -> None:
    """On a long buffer, a pattern led by a run finds its partial match by trying each
    place of the runs before its texts and at the end (RegexDelimiter._partial_led, here
    called on short ones): the leftmost partial match of the pattern itself."""
    delimiter = led_delimiter(pattern)
    compiled = delimiter.pattern
    pos = data.draw(st.integers(0, len(buf)))
    if compiled.search(buf, pos) is not None:
        return  # partial searches only run when no complete match is left
    expected = compiled.search(buf, pos, partial=True)
    found = delimiter._partial_led(buf, pos)
    assert (None if found is None else found[:3]) == (
        None if expected is None else (*expected.span(), True)
    )


@given(**LED_CASES)
def test_a_led_patterns_short_search_starts_at_the_first_run_that_can_lead(
    pattern: str, buf: str, data: Any
) -> None:
    """A short search of a pattern led by a run starts its partial search in the run
    before its first text, or before the piece at the end (RegexDelimiter._partial_start):
    the same answer as the pattern's own search from `pos`."""
    delimiter = led_delimiter(pattern, repeats=0)
    compiled = delimiter.pattern
    pos = data.draw(st.integers(0, len(buf)))
    match = compiled.search(buf, pos) or compiled.search(buf, pos, partial=True)
    expected = None if match is None else (*match.span(), match.end() == len(buf))
    with lead_span(0):
        found = delimiter.search(buf, pos, False, len(buf))
    assert (None if found is None else found[:3]) == expected


@given(**LED_CASES)
def test_a_led_pattern_near_the_best_match_so_far_is_ruled_out_by_a_look(
    pattern: str, buf: str, data: Any
) -> None:
    """Where a step's best match so far starts at most NEAR places from `pos`, a pattern
    led by a run is ruled out by a look at each place up to it (RegexDelimiter.
    _may_start_by): when the look says none can start there, no match and no partial match
    of the pattern itself starts there; and the search says so (IRRELEVANT) or finds
    the same as the pattern's own search."""
    delimiter = led_delimiter(pattern)
    compiled = delimiter.pattern
    if not buf:
        return
    pos = data.draw(st.integers(0, len(buf) - 1))
    limit = data.draw(st.integers(pos, min(len(buf) - 1, pos + runtime.automaton.NEAR - 1)))
    match = compiled.search(buf, pos) or compiled.search(buf, pos, partial=True)
    if not delimiter._may_start_by(buf, pos, limit):
        assert match is None or match.start() > limit, (buf, pos, limit)
    found = delimiter.search(buf, pos, False, limit)
    if found is runtime.automaton.IRRELEVANT:
        assert match is None or match.start() > limit, (buf, pos, limit)
    else:
        expected = None if match is None else (*match.span(), match.end() == len(buf))
        assert (None if found is None else found[:3]) == expected


@given(**LED_CASES, later_texts=st.sampled_from([0, 1, 4, 64]))
def test_a_led_patterns_pending_match_is_told_by_attempts_as_by_its_search(
    pattern: str, buf: str, data: Any, later_texts: int
) -> None:
    """`pending_at` for a pattern led by a run (RegexDelimiter._led_pending_at: a partial
    attempt at `pos`, then attempts at the runs before later texts, or a search where a
    look-behind may accept a place inside a run) says what the pattern's own search from
    `pos` says: its leftmost complete match, or else its leftmost partial one, starts at
    `pos` and reaches the buffer's end. With few later texts allowed, or nothing from `pos`
    on, the search decides."""
    delimiter = led_delimiter(pattern)
    compiled = delimiter.pattern
    pos = data.draw(st.integers(0, len(buf)))
    match = compiled.search(buf, pos) or compiled.search(buf, pos, partial=True)
    expected = match is not None and match.start() == pos and match.end() == len(buf)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runtime.automaton, "LATER_TEXTS", later_texts)
        attempted = delimiter._led_pending_at(buf, pos)
        assert delimiter.pending_at(buf, pos) == expected
    assert attempted in (None, expected)
    if later_texts == 64 and pos < len(buf):
        assert attempted == expected


@pytest.mark.parametrize(
    ("pattern", "buf", "held"),
    [
        (r"\s*<a>(?:<a>[^c]*c|b)", "<a><a>", True),  # partial from 0, and from 3
        (r"\s*<a>(?:<a>[^c]*c|b)", "<a><a>b", False),  # complete from 3
        (r"\s*<a>(?:<a>[^c]*c|b)", " \n<a><a>x", True),  # from the run at 0
        (r"\s*<a><a>[^c]*c|(?<=\n)\s*<a>b", "<a><a>x \n<a>", True),
        # complete from 9, inside the run at 7 that the look-behind refuses
        (r"\s*<a><a>[^c]*c|(?<=\n)\s*<a>b", "<a><a>x \n<a>b", False),
    ],
)
def test_a_led_pattern_is_pending_where_no_later_match_is_complete(
    pattern: str, buf: str, held: bool
) -> None:
    """The cases of the property above that its random buffers seldom hold: a held match
    with a later one complete, which the search returns first, also from inside a run."""
    delimiter = led_delimiter(pattern)
    assert delimiter._led_pending_at(buf, 0) is held
    assert delimiter.pending_at(buf, 0) is held


def test_a_led_partial_match_may_start_before_a_whole_text() -> None:
    """A partial match that holds one of the pattern's texts whole starts in the run before
    that text, not at the end of the buffer, also where the text ends in a piece of itself."""
    delimiter = led_delimiter(LED_PATTERNS[1], repeats=0)
    ends_in_piece = led_delimiter(r"\s*```\s*<e>", repeats=0)  # "```" ends in the piece "``"
    with lead_span(0):
        for buf, start in ((" <b> nam", 0), ("x <a> <b> n", 1), ("x<b> n <b>", 6)):
            assert delimiter.search(buf, 0, False, len(buf))[:3] == (start, len(buf), True), buf
        assert ends_in_piece.search("x\n```", 0, False, 5)[:3] == (1, 5, True)


def test_a_led_partial_match_may_start_inside_the_run() -> None:
    """A look-behind in front of the run may refuse the run's first place and accept a
    later one (`(?<=\n)` after a space): every place of the run is tried."""
    pattern = r"(?:(?<=\n)|(?<=>))\s*<d>x*y"
    known = profile(pattern)
    compiled = regex.compile(pattern, regex.DOTALL)
    delimiter = RegexDelimiter(
        CLOSE, "f", compiled, rank=0, prefix=known.led_prefixes, led_by=known.led_by
    )
    for buf in ("a \n <d>x", "a\n <d>x", "a \n <d", "<d>q \n "):
        expected = compiled.search(buf, 0, partial=True)
        assert expected is not None and expected.start() > buf.index("\n") - 1
        found = delimiter._partial_led(buf, 0)
        assert found is not None and found[:3] == (*expected.span(), True), buf


# Patterns a long search narrows: led by a run, some behind look-behinds (deepseek_v4's
# open), or with a start-only branch (llama3_json's open, its recursion cut down).
NARROWED_PATTERNS = [
    *LED_PATTERNS,
    r"(?:^|(?<=;))\s*<d>",
    r"(?:^a*|<)(?=b)",
    r"(?:\Ab|<a)",
    r"(?:<t>\s*|^\s*|(?<=\}\s*;?\s*))(?=\{\s*a)(\{(?:[^{}]|(?1))*\})",
]
NARROWED_FRAGMENTS = [*LED_FRAGMENTS, "{", "}", ";", "a", "b", "<", "{ a}"]


def declared(pattern: str) -> RegexDelimiter:
    """A RegexDelimiter for `pattern` with what the compiler declares of it (no HeldRuns)."""
    known = profile(pattern)
    return RegexDelimiter(
        CLOSE,
        "f",
        regex.compile(pattern, regex.DOTALL),
        rank=0,
        prefix=known.literal_prefixes or known.led_prefixes,
        led_by=known.led_by,
        memo=known.analysed,
        start_only=known.start_only,
        guarded=known.guarded_prefixes,
    )


@given(
    pattern=st.sampled_from(NARROWED_PATTERNS),
    buf=st.lists(st.sampled_from(NARROWED_FRAGMENTS), max_size=10).map("".join),
    eos=st.booleans(),
    pos=st.integers(0, 40),
)
@example(pattern=LED_PATTERNS[4], buf="x</b> \n<c=ab>", eos=True, pos=0)
@example(pattern=NARROWED_PATTERNS[-4], buf="a; <d>", eos=True, pos=0)
@example(pattern=NARROWED_PATTERNS[-2], buf="b<a", eos=True, pos=0)
@example(pattern=NARROWED_PATTERNS[-1], buf=" { a}; {a}", eos=True, pos=0)
def test_a_long_search_starts_where_a_match_can(
    pattern: str, buf: str, eos: bool, pos: int
) -> None:
    """On a long buffer a search starts past the places no match can start at: for a
    pattern led by a run, the run before the first of its texts (_complete_from); at the
    end of the stream, from its first position, past the start-only branch's one place
    (_search_from_origin). Either way it finds the pattern's own leftmost match."""
    delimiter = declared(pattern)
    compiled = delimiter.pattern
    pos = min(pos, len(buf))
    match = compiled.search(buf, pos)
    if match is None and not eos:
        match = compiled.search(buf, pos, partial=True)
    expected = None if match is None else (*match.span(), not eos and match.end() == len(buf))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runtime.automaton, "SPLIT_AFTER", 0)  # as on a long buffer
        found = delimiter.search(buf, pos, eos, len(buf))
    if found is None and expected == (len(buf), len(buf), True):
        return  # an empty partial match at the end holds nothing back: the same as none
    assert (None if found is None else found[:3]) == expected


# Texts over a few characters, so that they share prefixes, end inside each other and part.
_TRIE_TEXTS = st.lists(st.text("<a|b>.\\", min_size=1, max_size=6), min_size=1, max_size=6)


@given(_TRIE_TEXTS, st.text("<a|b>.\\z", max_size=7))
def test_a_trie_pattern_matches_its_texts_and_their_pieces(texts: list[str], word: str) -> None:
    """The trie-shaped alternations the states search (starts, pieces at the end) match the
    same strings as the plain alternation of the texts, and of their proper prefixes."""
    pieces = {text[:end] for text in texts for end in range(1, len(text))}
    assert bool(re.fullmatch(trie_pattern(texts), word)) == (word in texts)
    piece_source = trie_pattern(texts, pieces=True)
    assert bool(piece_source and re.fullmatch(piece_source, word)) == (word in pieces)
    assert (piece_source == "") == (not pieces)


def test_a_trie_pattern_keeps_a_long_text_one_run() -> None:
    """A stretch of a text where no other text ends or parts is one literal, not nested
    groups (2000 of them would be past what `re` compiles)."""
    literal = "<" + "a" * 2000
    assert trie_pattern([literal, "<b>"]) == "<(?:" + "a" * 2000 + "|b>)"


def test_a_long_literal_builds_no_table_of_its_prefixes() -> None:
    """A 2000-character literal has ~2M characters of prefixes: the state checks pieces with
    startswith instead of a regex over them (which took 3 s to compile)."""
    literal = "<" + "a" * 2000
    state = State("x", literals=(LiteralDelimiter(CLOSE, "x", literal, rank=0),), close=None)
    assert state.at_end is None and state.starts_or_piece is None
    assert state.piece_at_end("text " + literal[:1500]) == len("text ")
    assert state.may_start("x" + literal[:10]) and not state.may_start("xa<b")


def test_every_regex_whitespace_character_is_whitespace_to_str_isspace() -> None:
    """The fast path of a state watching a pattern led by `\\s*` finds the whitespace at the
    end of a chunk with `text.rstrip()` (compiler.automaton.LED_BY_SPACE), which strips what
    `str.isspace` calls whitespace: that must hold for every character `regex` matches with
    `\\s`."""
    space = regex.compile(r"\s")
    missed = [
        code
        for code in range(0x110000)
        if not 0xD800 <= code <= 0xDFFF and space.match(chr(code)) and not chr(code).isspace()
    ]
    assert missed == []


def test_the_space_class_is_what_regex_matches_with_backslash_s() -> None:
    """State.starts_or_held searches with `re`, whose `\\s` is str.isspace's: SPACE_CLASS
    stands for the `regex` module's `\\s`, which the templates' patterns use."""
    space = regex.compile(r"\s")
    spaces = re.compile(runtime.automaton.SPACE_CLASS)
    differ = [
        code
        for code in range(0x110000)
        if bool(space.match(chr(code))) != bool(spaces.match(chr(code)))
    ]
    assert differ == []


def _led_states() -> list[tuple[str, State]]:
    """(entry, state) of every catalog state that holds a `\\s*` run in one search."""
    found = []
    for name in entry_names():
        parser = importlib.import_module(f"generated.{name}").Parser
        found += [
            (f"{name}.{state.field}", state)
            for state in vars(parser).values()
            if isinstance(state, State) and state.starts_or_held is not None
        ]
    return found


@pytest.mark.parametrize(("name", "state"), _led_states(), ids=lambda item: str(item))
@settings(max_examples=examples(150), deadline=None)
@given(data=st.data())
def test_one_search_holds_what_the_run_and_the_pieces_hold(
    name: str, state: State, data: Any
) -> None:
    """For a state whose patterns are led by `\\s*`, `starts_or_held` (one search, which
    Regions._feed_piece routes a chunk by) tells what the searches it stands for tell: a
    start text (`starts`), else where a scan holds back the end (`held_at_end`: the longest
    piece of a start text, or the run before a piece of a led text or before the end)."""
    texts = state.start_texts
    words = [text[:end] for text in texts for end in range(1, len(text) + 1)]
    part = st.one_of(
        st.sampled_from(words),
        st.sampled_from([" ", "\n", "\t", "\xa0", "\u3000", "\x1c", "  "]),
        st.text("ab<>|/", min_size=1, max_size=3),
    )
    text = "".join(data.draw(st.lists(part, max_size=6)))[: runtime.automaton.ONE_SEARCH_SPAN]
    expected = None if state.starts.search(text) else state.held_at_end(text)
    assert state.held_unless_started(text) == expected, name


def test_a_run_that_leads_a_pattern_waits_when_long() -> None:
    """deepseek_r1's content watches `\\s*`-led patterns: a long run of whitespace is held
    (it may lead the tool calls' open), and waits instead of being searched again for
    every chunk (before: 64K spaces in 4-character chunks took 46 s)."""
    assert profile(r"\s*<think>").runs == (Run("", r"\s*", "<think>"),)
    text = "Answer:" + " \n" * 5000
    message = _streamed_waiting("deepseek_r1", text, "done")
    assert message["content"] == "Answer:" + " \n" * 5000 + "done"
