"""JIT-compiled parsers of generated templates, against transformers 5.23.0."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from differential import accepted_parser, check, reference_trace, shrunk_thresholds
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples
from strategies import (
    anchored_templates,
    broken_run_templates,
    chunkings,
    outputs_for,
    prefixes,
    templates,
)
from transformers.utils.chat_parsing.response_templates import load_response_template

import runtime.automaton
from compiler import load_parser
from compiler.catalog import load_entry
from compiler.errors import TemplateError
from runtime.automaton import State


@given(data=st.data())
def test_generated_template_matches_reference(data: Any) -> None:
    check_drawn(data, templates())


@given(data=st.data())
@settings(max_examples=examples(300))
def test_start_only_and_look_behind_led_patterns_match_reference(data: Any) -> None:
    """Patterns read apart (a `^` branch that is dead past the stream's first position, a
    run behind look-behinds), in the start state, whatever else the template watches."""
    check_drawn(data, anchored_templates())


@given(data=st.data())
@settings(max_examples=examples(300))
def test_runs_a_chunk_breaks_are_held_as_the_reference_holds_them(data: Any) -> None:
    """Opens that are all HEAD + [^B]* + LITERAL (inkling's sink): where a scan holds
    their text back is told without one (runtime.waiting.BrokenRun), chunk by chunk,
    with the parser's thresholds as they are and shrunk (every hold waits)."""
    drawn = accepted_parser(data, broken_run_templates())
    assert drawn is not None
    template, literals, samples, parser = drawn
    assert parser.START.broken_run is not None, "the template has the shape"
    for round_ in range(2):
        output = data.draw(outputs_for(literals, samples, 20), label=f"output{round_}")
        prefix = data.draw(
            st.one_of(st.just(""), prefixes(template, outputs_for(literals, samples, 3))),
            label="prefix",
        )
        chunks = data.draw(chunkings(output), label="chunks")
        check(template, parser, prefix, chunks)
        with shrunk_thresholds(parser):
            check(template, parser, prefix, chunks)


def test_a_complete_match_inside_a_held_piece_is_found() -> None:
    """`<m\nx` is a piece of HEAD's literal `<m\nx>`, and holds a complete LITERAL `\nx`
    after its first break: `regex` returns that complete match before the earlier partial
    one, so the reference routes `<` and holds from `m`. A held piece with a break after
    its first goes to the scan (waiting.BrokenRun.hold)."""
    template = {
        "start_anchor": "<|s|>",
        "fields": {
            "content": {"repeats": True},
            "thinking": {"open_pattern": "(?:<m\nx>)?[^<\n]*\nx", "close": "<|e|>"},
        },
    }
    parser = load_parser(template)
    assert parser.START.broken_run is not None
    for output in ("<m\nx", "a<m\nx", "<m\nxy<|e|>", "<m\n"):
        for cut in range(len(output) + 1):
            check(template, parser, "", [output[:cut], output[cut:]])


@pytest.mark.parametrize("thinking_open", ["(?:<m<x>)?[^<]*<x", "(?:<m<x>)?[^<]*(?=<)"])
def test_a_match_inside_a_waiting_head_is_found(thinking_open: str) -> None:
    """Fed `<m<x>`, both opens hold it all from 0 (HEAD `(?:<m<x>)?` and a run), and the
    thinking open's partial search returns a complete match that starts inside HEAD's
    match (`m<x` at 1; `m` with a look-ahead for `<` and no literal). So the parser must
    not wait on that open's held match: once the tool-call open no longer holds from 0
    (`z` ends its run) the reference opens the thinking there, and at the end of the
    stream too (the deep profile found the second; RegexDelimiter.waits)."""
    template = {
        "start_anchor": "<m<x>",
        "fields": {
            "content": {"repeats": True},
            "thinking": {"open_pattern": thinking_open, "close": "<|e|>", "repeats": True},
            "tool_calls": {
                "open_pattern": "(?:<m<x>)?[^<z]*<\\|a\\|>",
                "close": "<|e|>",
                "repeats": True,
                "content": "json",
            },
        },
    }
    parser = load_parser(template)
    for output in ("<m<x>", "<m<x>z", "<m<x>ab", "a<m<x>yz", "<m<x>z<|e|>"):
        for cut in range(len(output) + 1):
            check(template, parser, "", [output[:cut], output[cut:]])
        check(template, parser, "", [output[:5], output[5:-1], output[-1:]])
        assert parser.parse(output, prefix="").get("thinking")


def check_drawn(data: Any, drawn_templates: Any) -> None:
    """A drawn template's parser against the reference, on three drawn outputs."""
    template, literals, samples = data.draw(drawn_templates, label="template")
    try:
        load_response_template(template)
    except (ValueError, TypeError) as error:
        with pytest.raises(type(error)):
            load_parser(template)
        with pytest.raises(TemplateError):
            load_parser(template)
        return
    parser = load_parser(template)
    for round_ in range(3):
        output = data.draw(outputs_for(literals, samples), label=f"output{round_}")
        prefix = data.draw(
            st.one_of(st.just(""), prefixes(template, outputs_for(literals, samples, 3))),
            label="prefix",
        )
        chunks = data.draw(chunkings(output), label="chunks")
        check(template, parser, prefix, chunks)


@given(data=st.data())
@settings(max_examples=examples(200))
def test_windows_a_parser_saw_before_match_reference(data: Any) -> None:
    """A parser class remembers windows a scan held all of (State.held_windows) and the
    answers of `State.holds` (RegexDelimiter.held_texts), for any stream of it to reuse:
    an output repeated within a stream, chunked the same each time, and then that stream
    again, meet the same windows again, and must give the reference's events."""
    accepted = accepted_parser(data, templates())
    if accepted is None:
        return
    template, literals, samples, parser = accepted
    output = data.draw(outputs_for(literals, samples), label="output")
    chunks = data.draw(chunkings(output), label="chunks")
    # Each memory forgets all it holds once it is full: after every entry, or as shipped.
    kept = data.draw(st.sampled_from([1, runtime.automaton.HELD_TEXTS]), label="kept")
    saved = runtime.automaton.HELD_TEXTS
    runtime.automaton.HELD_TEXTS = kept
    try:
        for _ in range(2):
            check(template, parser, "", chunks * 3)
    finally:
        runtime.automaton.HELD_TEXTS = saved


@given(data=st.data())
def test_shrunk_thresholds_change_no_event(data: Any) -> None:
    """Parsers stop rescanning a held match that only a known text can change
    (CompiledParser._wait), join a region's chunks into blocks, and probe literal
    candidates before a full search. With every threshold tiny (waiting on every hold,
    however short), they must give the reference's events exactly."""
    check_shrunk(data, templates())


@given(data=st.data())
def test_shrunk_thresholds_change_no_event_on_patterns_read_apart(data: Any) -> None:
    """As above, for a start state watching a start-only or look-behind-led pattern: every
    scan step then skips ahead to the first start text (State.skip), which must not skip
    a `^` branch at the stream's first position."""
    check_shrunk(data, anchored_templates())


def check_shrunk(data: Any, drawn_templates: Any) -> None:
    """A drawn template's parser, with every threshold shrunk, against the reference."""
    drawn = accepted_parser(data, drawn_templates)
    if drawn is None:
        return
    template, literals, samples, parser = drawn
    output = data.draw(
        outputs_for(literals, [*samples, "<m>abc", "zz q", "<a>" + "x" * 20], 20), label="output"
    )
    with shrunk_thresholds(parser):
        check(template, parser, "", data.draw(chunkings(output), label="chunks"))


@pytest.mark.parametrize("chunks", [[" <d5><a>"], [" <d5>", "x<a>"], ["<d5><a>;", " <d5>"]])
def test_shrunk_thresholds_find_a_start_only_branch_complete(chunks: list[str]) -> None:
    """Found by the deep profile: with SPLIT_AFTER 0, the short partial search from the
    stream's first position (which returns a complete match first) took the route for a
    rest known to hold none (RegexDelimiter._partial_led), reported ` <d5>` pending, and the
    feed held back everything the reference had opened and closed."""
    template = {
        "start_anchor": "@@",
        "fields": {"t": {"open_pattern": r"(?:^|(?<=;))\s*<d5>", "close": "<a>"}},
    }
    parser = load_parser(template)
    with shrunk_thresholds(parser):
        check(template, parser, "", chunks)


@pytest.mark.parametrize("chunks", [[" "], ["  "], [" ", " "]])
def test_where_the_reference_loops_at_the_end_ours_stops_on_its_path(chunks: list[str]) -> None:
    """A zero-width open and close at `^` make the reference's finalize loop forever (the
    deep profile drew one): ours must stop, its events the first of the reference's.
    (`check` compared finalize's (message, events) pair itself with the events.)"""
    template = {
        "start_anchor": "<|s|>",
        "fields": {
            "thinking": {"open": "<a>"},
            "content": {"open_pattern": "(?:^|<s>)", "close_pattern": "(?:^|<s>)"},
            # (holds a leading space: the loop then starts at the end)
            "tool_calls": {"open_pattern": r"(?:^\s*|<x1>\s*)(?=\[)"},
        },
    }
    parser = load_parser(template)
    reference = reference_trace(template, "", chunks)
    assert any(step[0] == "hang" for step in reference), "the case no longer loops"
    check(template, parser, "", chunks)


# Patterns led by a run behind look-behinds, or prefixes some of them behind look-behinds
# (RegexProfile.prefix_guarded, llama3_json's open), with words that refuse or satisfy
# them, and literal opens that may share a piece with their texts.
GUARDED_RUNS = [
    (r"(?:<g1>\s*|(?<=\}\s*))(?=\{\s*\"n)", ["}", " ", "{", '{"n', '"n', "<g1>", "<g", "x"]),
    (r"(?:<d1>|(?<=</d2>)<d3=)(?P<n>\w+)>", ["</d2>", "<d3=a>", "<d3", "<d1>b>", "<d", "x", " "]),
    (r"(?:(?<=\n)|(?<=>))\s*<d4>", ["\n", ">", " ", "  ", "x", "<d4>", "<d"]),
    (
        r"(?:\s*<d1>|(?<=</d2>)|(?<=/>))\s*<d3=(?P<n>\w+)>",
        [" ", "\n ", "x", "</d2>", "/>", "<d1>", "<d3=a>", "<d", "<d3"],
    ),
]
SHARED_PIECES = ["<d3=q", "<d4x", "<d1x"]


@given(data=st.data())
def test_runs_behind_look_behinds_are_held_as_the_reference_holds_them(data: Any) -> None:
    """A run at the end of a chunk is held only when a branch can still match from it: a
    look-behind in front of the run may refuse it (RegexProfile.led_guarded), and the fast
    path holds runs itself only when a branch without one would hold them anyway."""
    pattern, words = data.draw(st.sampled_from(GUARDED_RUNS), label="pattern")
    template = {
        "fields": {
            "t": {"open_pattern": pattern, "close": "</t>", "transform": "{content}"},
            "c": {},
        },
        "start_anchor": "<|s|>",
    }
    if data.draw(st.booleans(), label="literal open"):
        literal = data.draw(st.sampled_from(SHARED_PIECES), label="literal")
        template["fields"]["u"] = {"open": literal, "close": "</u>"}
        words = [*words, literal, "</u>"]
    output = "".join(data.draw(st.lists(st.sampled_from([*words, "</t>"]), max_size=12)))
    check(template, load_parser(template), "", data.draw(chunkings(output), label="chunks"))


def test_a_start_only_branch_is_not_skipped_at_the_first_position() -> None:
    """A scan over a long rest of the buffer skips ahead to the first start text
    (State.skip): at the stream's first position a `\\A` branch may match before it."""
    template = {
        "fields": {"t": {"open_pattern": r"(?:\A|<s>)", "close": "</t>"}, "c": {"close": "<a>"}},
        "start_anchor": "<|s|>",
    }
    parser = load_parser(template)
    outputs = ["x</t>y<s>z", "x" * 300 + "</t>y<s>z<a>", " " * 300]
    for output in outputs:
        for chunks in ([output], [output[:2], output[2:]]):
            check(template, parser, "", chunks)
            with shrunk_thresholds(parser):
                check(template, parser, "", chunks)


def test_a_piece_a_look_behind_may_refuse_is_scanned_even_if_a_literal_shares_it() -> None:
    """`<d3` begins the guarded text `<d3=` and the literal `<d3=q`: the literal holds it from
    the piece, the guarded branch (if its look-behind allows) from the run before it, so
    which one the scan holds depends on the look-behind (State.guarded_piece)."""
    template = {
        "fields": {
            "t": {
                "open_pattern": r"(?:\s*<d1>|(?<=</d2>)|(?<=/>))\s*<d3=(?P<n>\w+)>",
                "close": "</t>",
                "transform": "{content}",
            },
            "c": {},
            "u": {"open": "<d3=q", "close": "</u>"},
        },
        "start_anchor": "<|s|>",
    }
    parser = load_parser(template)
    for chunks in (["x", " <d3"], ["x <d3", "y"], ["</d2>", " ", "<d3", "=a>"], ["x", " <d3=q"]):
        check(template, parser, "", chunks)


# llama3_json's open: a whole JSON object, matched through a recursive group.
JSON_CALL = load_entry("llama3_json").data["response_template"]["fields"]["tool_calls"][
    "open_pattern"
]
JSON_PIECES = ['{"name": "f", "parameters": {', '"a": ', '{"b": [1]}', '"s\\"}{"', '"x\\\\"']
JSON_PIECES += [", ", "}", "{", '"', "\\", "abc ", "\n", "<|python_tag|>", ";", "é"]
# llama3_json's call open, with a close and an implicit field: the JSON-object wait's template.
JSON_CALL_TEMPLATE = {
    "fields": {
        "call": {
            "open_pattern": JSON_CALL,
            "close_pattern": r"\s*(?:;\s*)?",
            "transform": "{call}",
        },
        "c": {},
    },
    "start_anchor": "<|s|>",
}


def test_a_later_complete_object_ends_the_wait_on_an_earlier_one() -> None:
    """The reference holds from the later complete object (`{"name": "f", "parameters": {}}`,
    after `}`) once its last `}` arrives, and routes the text before it: the wait on the
    earlier object, still open, wakes at that `}` (found by the deep profile)."""
    output = '{"name": "f", "parameters": {{"b": [1]}{"name": "f", "parameters": {}}'
    check(JSON_CALL_TEMPLATE, load_parser(JSON_CALL_TEMPLATE), "", list(output))


@given(data=st.data())
def test_a_pending_json_object_is_held_as_the_reference_holds_it(data: Any) -> None:
    """A pending match of the object waits for a `}` (runtime.waiting.HeldObject), also once `}` closed
    nested objects before it; with waits on every hold (shrunk thresholds), streamed in any
    chunks, the events are the reference's."""
    template = JSON_CALL_TEMPLATE
    parser = load_parser(template)
    pieces = data.draw(st.lists(st.sampled_from(JSON_PIECES), max_size=16), label="pieces")
    output = "".join(pieces)
    chunks = data.draw(chunkings(output), label="chunks")
    with shrunk_thresholds(parser):
        check(template, parser, "", chunks)
    check(template, parser, "", chunks)


# Zero-width opens where a look-behind close ends the region before (pythonic, llama3_json).
ADJACENT_FRAGMENTS = ['{"a": 1}', "{}", "{", "}", " ", ";", "x", '{"b": [2]}', "\n"]


@given(data=st.data())
@settings(max_examples=examples(300))
def test_a_region_opening_where_the_last_one_closed_ends_as_the_reference_ends_it(
    data: Any,
) -> None:
    """An open `(?=\\{)` and a close that looks behind at `}`: after `{"a": 1}`, the close
    that ends a region also matches at once in the next one, which opens where the first
    closed. That region is empty: its JSON fails where the reference's does, in the same
    feed, however the output is cut (the progress rule tells the two regions apart by
    where they opened); with text content the reference loops, and ours stops on its path."""
    close = data.draw(st.sampled_from([r"(?<=\})\s*", r"(?<=\})", r"(?<=\})\s*;?"]), label="close")
    content = data.draw(st.sampled_from(["json", "text"]), label="content")
    template = {
        "start_anchor": "<s>",
        "fields": {
            "tool_calls": {
                "open_pattern": r"(?=\{)",
                "close_pattern": close,
                "content": content,
                "repeats": True,
            },
            "content": {},
        },
    }
    parser = load_parser(template)
    fragments = st.lists(st.sampled_from(ADJACENT_FRAGMENTS), max_size=8)
    output = data.draw(fragments.map("".join), label="output")
    check(template, parser, "", data.draw(chunkings(output), label="chunks"))


# Templates for pieces of start texts that arrive over several chunks (State.held_pieces).
PIECE_TEMPLATES = [
    # Start texts apart: every state holds its pieces itself.
    {
        "start_anchor": "<|s|>",
        "fields": {
            "content": {"repeats": True},
            "thinking": {"open": "<t>", "close": "</t>"},
            "a": {"open": "<ab>", "close": "</ab>"},
        },
    },
    # `<a` begins `<ab>` (a complete start text inside a piece of another), and a pattern led
    # by a run of whitespace: the start state leaves its pieces to the scan.
    {
        "start_anchor": "<|s|>",
        "fields": {
            "content": {"repeats": True},
            "thinking": {"open": "<a", "close": "</a>"},
            "a": {"open_pattern": "\\s*<ab>", "close": "</ab>"},
        },
    },
]
PIECE_OUTPUTS = ["x<ab>y</ab>z", "x<t>y</t>", "x<a b</a>", "<ab", "x<a", "a \n<ab>b</ab> c", " <a"]


@pytest.mark.parametrize("template", PIECE_TEMPLATES)
def test_pieces_of_start_texts_are_held_as_the_reference_holds_them(template: Any) -> None:
    """A chunk that makes the held-back text a longer piece of a start text is held by
    `_feed_piece` or `_scan_feed` with one look-up (State.held_pieces) where no match can be
    complete in a piece: every split of these outputs in two and three chunks, against the
    reference."""
    parser = load_parser(template)
    assert any(state.held_pieces for state in vars(parser).values() if isinstance(state, State))
    for output in PIECE_OUTPUTS:
        cuts = range(1, len(output))
        for bounds in [*itertools.combinations(cuts, 1), *itertools.combinations(cuts, 2)]:
            ends = (0, *bounds, len(output))
            check(template, parser, "", [output[a:b] for a, b in itertools.pairwise(ends)])
