"""Regression tests for the streaming core's hardening (each failed before its fix).

- a cached `feed = parser.feed` behaves as `parser.feed(...)`, and a parser is freed
  without the cyclic GC;
- a chunk that is not a str raises TypeError and changes nothing;
- a region kept in blocks (PARTS_PER_BLOCK chunks) keeps its text after a caught error;
- template-level failures are TemplateErrors, lone surrogates included;
- the JIT cache gives one class per template under concurrency and is a bounded LRU;
- the regex time bound counts CPU time, is set per parser, and names what to change;
  parse failures share `ParseError` and have bounded one-line messages.
"""

from __future__ import annotations

import gc
import importlib
import linecache
import math
import threading
import time
import weakref
from typing import Any

import pytest
import regex
from differential import check, shrunk_thresholds
from fixtures import load_fixtures
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples
from strategies import chunkings

import compiler.jit
import generated.hermes
import generated.qwen3
import generated.smollm3
import runtime
import runtime.errors
from compiler import load_parser
from compiler.catalog import entry_names, load_entry
from compiler.errors import TemplateError
from runtime.content import parse_xml_inline
from runtime.errors import (
    FieldParseError,
    MissingFieldError,
    ParseError,
    RegexTimeout,
    search_bounded,
)
from runtime.regions import join_text

NAMES = entry_names()
CASES = [
    (name, case)
    for name in NAMES
    for case in load_fixtures(name)["cases"]
    if "expected" in case and isinstance(case.get("prefix", ""), str)
]
BAD_CHUNKS = [b"<think>", 1, ["</think>"], {"a": 1}, None, 1.5, bytearray(b"x")]


def observe(parser_cls: Any, prefix: str, chunks: list[Any], tools: Any, cached: bool) -> Any:
    """Every feed's events (or exception class) and the finalize result."""
    parser = parser_cls(prefix, tools=tools)
    feed = parser.feed
    steps: list[Any] = [parser.initial_events]
    for chunk in chunks:
        try:
            steps.append(feed(chunk) if cached else parser.feed(chunk))
        except Exception as error:  # the class is the observation
            steps.append(type(error))
    try:
        steps.append(parser.finalize())
    except Exception as error:
        steps.append(type(error))
    return steps


# -- 1. a stable feed -------------------------------------------------------------------


@settings(max_examples=examples(300))
@given(data=st.data())
def test_a_cached_feed_behaves_as_parser_feed(data: Any) -> None:
    name, case = data.draw(st.sampled_from(CASES), label="case")
    parser_cls = importlib.import_module(f"generated.{name}").Parser
    chunks = data.draw(chunkings(case["output"]), label="chunks")
    tools = case.get("tools")
    expected = observe(parser_cls, case.get("prefix", ""), chunks, tools, cached=False)
    assert observe(parser_cls, case.get("prefix", ""), chunks, tools, cached=True) == expected
    if not isinstance(expected[-1], type):
        assert expected[-1][0] == case["expected"]


def test_a_cached_feed_follows_the_state() -> None:
    parser = generated.smollm3.Parser("<|im_start|>assistant\n")
    feed = parser.feed
    for chunk in [
        "<think>plan",
        "</think>",
        '<tool_call>{"name": "f", "arguments": {}}',
        "</tool_call>ok",
    ]:
        feed(chunk)
    message, _ = parser.finalize()
    assert message["thinking"] == "plan" and message["content"] == "ok"
    assert message["tool_calls"][0]["function"]["name"] == "f"


@pytest.mark.parametrize("name", ["smollm3", "qwen3", "gpt_oss", "hermes"])
def test_a_parser_dropped_mid_stream_is_freed_without_the_cyclic_gc(name: str) -> None:
    parser_cls = importlib.import_module(f"generated.{name}").Parser
    gc.collect()
    gc.disable()
    try:
        parser = parser_cls("")
        for chunk in ["<think>a", "b</think>x", "<tool_call>{", '"a"']:
            parser.feed(chunk)
        alive = weakref.ref(parser)
        del parser
        assert alive() is None, "the parser is kept alive by a reference cycle"
    finally:
        gc.enable()


# -- 2. bad chunks ------------------------------------------------------------------------


@settings(max_examples=examples(200))
@given(data=st.data())
def test_a_bad_chunk_raises_type_error_and_changes_nothing(data: Any) -> None:
    name, case = data.draw(st.sampled_from(CASES), label="case")
    parser_cls = importlib.import_module(f"generated.{name}").Parser
    chunks = data.draw(chunkings(case["output"]), label="chunks")
    bad = data.draw(st.sampled_from(BAD_CHUNKS), label="bad")
    at = data.draw(st.integers(0, len(chunks)), label="at")
    prefix, tools = case.get("prefix", ""), case.get("tools")
    # Shrunk thresholds: the bad chunk also arrives while a long match is held (waiting).
    with shrunk_thresholds(parser_cls):
        clean = observe(parser_cls, prefix, chunks, tools, cached=True)
        dirty = observe(parser_cls, prefix, [*chunks[:at], bad, *chunks[at:]], tools, cached=True)
    assert dirty[at + 1] is TypeError
    assert dirty[: at + 1] + dirty[at + 2 :] == clean


def test_a_str_subclass_is_parsed_as_its_text() -> None:
    class Tagged(str):
        pass

    parser = generated.smollm3.Parser("")
    parser.feed(Tagged("<think>a</think>b"))
    message, _ = parser.finalize()
    assert message["thinking"] == "a" and message["content"] == "b"
    assert type(message["content"]) is str


@pytest.mark.parametrize("prefix", [b"", 1, ["<|im_start|>assistant\n"], {"a": 1}])
def test_a_prefix_that_is_not_a_str_raises_type_error(prefix: Any) -> None:
    with pytest.raises(TypeError, match="prefix must be a str"):
        generated.smollm3.Parser(prefix)


# -- 3. text kept after a caught error ---------------------------------------------------


@pytest.mark.parametrize(("pieces", "shrunk"), [(300, False), (3, True)])
def test_a_region_in_many_chunks_keeps_its_text_after_a_caught_error(
    pieces: int, shrunk: bool
) -> None:
    """The close fails (the JSON is not complete yet); the reference keeps the region and
    its text, so the rest of the JSON and a second close give a call. 300 chunks pass
    PARTS_PER_BLOCK (256; 2 when shrunk), where the region's text is kept in blocks."""
    head = '{"name": "write", "arguments": {"text": "' + "y" * pieces + '", "n": '
    body = [head[: len(head) - pieces + 1], *head[len(head) - pieces + 1 :]]
    assert len(body) == pieces
    chunks = ["<tool_call>", *body, "</tool_call>", "1}}", "</tool_call>", "ok"]
    template = load_entry("hermes").data["response_template"]
    if shrunk:
        with shrunk_thresholds(generated.hermes.Parser):
            check(template, generated.hermes.Parser, "", chunks)
    else:
        check(template, generated.hermes.Parser, "", chunks)


# -- 4. template-level failures ----------------------------------------------------------


def test_a_lone_surrogate_in_a_template_loads_as_in_the_reference() -> None:
    template = {"start_anchor": "A:", "fields": {"x": {"open": "\ud83d", "close": "!"}}}
    check(template, load_parser(template), "", ["a\ud83dbc", "!d"])


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_a_template_error_with_its_key_path(number: float) -> None:
    template = {"start_anchor": "A:", "fields": {"x": {"open": "<", "default": number}}}
    with pytest.raises(TemplateError) as caught:
        load_parser(template)
    assert caught.value.path.startswith("response_template.fields.x")


# -- 5. the JIT cache --------------------------------------------------------------------


def test_threads_loading_one_template_get_one_class() -> None:
    template = {"start_anchor": "A:", "fields": {"x": {"open": f"<{time.time_ns()}>"}}}
    barrier = threading.Barrier(16)
    classes: list[type] = []

    def load() -> None:
        barrier.wait()
        classes.append(load_parser(template))

    threads = [threading.Thread(target=load) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(classes) == 16 and len({id(cls) for cls in classes}) == 1


def test_the_jit_cache_is_a_bounded_lru_that_drops_linecache_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(compiler.jit, "CACHE_SIZE", 2)
    stamp = time.time_ns()
    templates = [
        {"start_anchor": "A:", "fields": {"x": {"open": f"<{stamp}-{i}>"}}} for i in range(3)
    ]
    first = load_parser(templates[0])
    load_parser(templates[1])
    assert load_parser(templates[0]) is first  # a hit: now the most recently used
    third = load_parser(templates[2])  # evicts templates[1], the least recently used
    assert list(compiler.jit._CACHE.values())[-2:] == [
        (first, source_name(first)),
        (third, source_name(third)),
    ]
    assert load_parser(templates[0]) is first
    second = load_parser(templates[1])  # rebuilt; evicts templates[2]
    assert source_name(first) in linecache.cache and source_name(second) in linecache.cache
    assert source_name(third) not in linecache.cache
    assert load_parser(templates[2]) is not third


def source_name(parser_cls: Any) -> str:
    return str(parser_cls._close_x.__code__.co_filename)


# -- 7. parse failures and the regex time bound ------------------------------------------


RUNAWAY = {"start_anchor": "A:", "fields": {"x": {"open_pattern": r"(?:a|aa)+(?:b|c)\Z"}}}


def test_every_parse_failure_is_a_parse_error() -> None:
    assert issubclass(FieldParseError, ParseError) and issubclass(FieldParseError, ValueError)
    assert issubclass(MissingFieldError, ParseError) and issubclass(MissingFieldError, ValueError)
    assert issubclass(RegexTimeout, ParseError) and issubclass(RegexTimeout, TimeoutError)
    with pytest.raises(ParseError):
        generated.hermes.Parser.parse('<tool_call>{"name": "f", "argu', prefix="")


def test_a_parse_error_message_is_one_bounded_line() -> None:
    big = '<tool_call>{"name": "write", "arguments": {"text": "' + "x\n" * 500_000
    with pytest.raises(FieldParseError) as caught:
        generated.hermes.Parser.parse(big, prefix="")
    message = str(caught.value)
    assert "\n" not in message and len(message) < 600
    assert "tool_calls" in message and "offset 0" in message
    lenient = generated.hermes.Parser.parse(big, prefix="", on_error="keep_raw")
    assert lenient["parse_errors"][0]["raw"] == big[len("<tool_call>") :]
    assert len(lenient["parse_errors"][0]["error"]["message"]) < 600


def test_the_time_bound_is_per_parser_and_says_how_to_raise_it() -> None:
    parser_cls = load_parser(RUNAWAY)
    with pytest.raises(RegexTimeout) as caught:
        parser_cls.parse("a" * 60 + "d", prefix="", regex_timeout=0.05)
    message = str(caught.value)
    assert "fields.x.open_pattern" in message and "regex_timeout=" in message
    assert caught.value.seconds < 0.1


@pytest.mark.parametrize("bound", [0, -1, math.nan, math.inf, True, "1"])
def test_a_bad_time_bound_is_refused(bound: Any) -> None:
    with pytest.raises(ValueError, match="regex_timeout"):
        generated.qwen3.Parser("", regex_timeout=bound)


def test_wall_clock_time_spent_waiting_does_not_count() -> None:
    """An attempt that hits the wall-clock limit without using the CPU time (the machine
    was busy) is retried with a doubled limit; only CPU time raises. The first attempt is
    not measured: it is run again, measured, with the same limit."""
    walls: list[float] = []

    def slowed_down(timeout: float) -> str:
        walls.append(timeout)
        if len(walls) < 3:
            time.sleep(timeout)  # sleeping uses no CPU time
            raise TimeoutError
        return "done"

    with runtime.errors.bounded_by(0.01):
        assert search_bounded(slowed_down, "fields.x.open_pattern", 0) == "done"
    assert walls == [0.01, 0.01, 0.02]

    def busy(timeout: float) -> str:
        deadline = time.thread_time() + timeout
        while time.thread_time() < deadline:
            pass
        raise TimeoutError

    with runtime.errors.bounded_by(0.01), pytest.raises(RegexTimeout, match=r"fields\.y"):
        search_bounded(busy, "fields.y.close_pattern", 0)


TAG = regex.compile(r"<p=(?P<key>\w+)>\s*(?P<value>.*?)\s*</p>", regex.DOTALL)


@given(
    st.lists(st.sampled_from(["<p=a>", "<p=b>", " ", "x", "</p>", "<p", "\n", "p>"]), max_size=30)
)
def test_xml_inline_stopping_at_the_last_close_finds_the_same_tags(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert parse_xml_inline(text, TAG, ends_with="</p>") == parse_xml_inline(text, TAG)


def test_a_10_mb_qwen3_call_parses_while_16_threads_parse() -> None:
    def call(size: int) -> tuple[str, str]:
        value = ("def f(x):\n    return [x, {'<b>': 1}]  # note\n" * (size // 44 + 1))[:size]
        return (
            "I will write it.<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n"
            f"</parameter>\n<parameter=content>\n{value}\n</parameter>\n</function>\n</tool_call>",
            value.strip(),
        )

    jobs = [call(10_000_000)] + [call(1_000_000)] * 15
    results: list[Any] = [None] * len(jobs)

    def parse(index: int) -> None:
        text, _ = jobs[index]
        try:
            message = generated.qwen3.Parser.parse(text, prefix="")
            results[index] = message["tool_calls"][0]["function"]["arguments"]["content"]
        except Exception as error:  # reported below with the thread's index
            results[index] = error

    threads = [threading.Thread(target=parse, args=(index,)) for index in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index, (_, expected) in enumerate(jobs):
        assert results[index] == expected, f"thread {index}: {results[index]!r:.200}"


def test_an_empty_chunk_after_a_settled_scan_runs_no_scan_step() -> None:
    """Engines feed one empty chunk per token another parser took (SGLang's tool half
    during reasoning). Once a scan loop has run to its end, scanning the same held-back
    text again decides nothing new, so an empty chunk costs no scan step and gives no
    event (the differential suite checks the events against the reference, whose rescan
    after an error or a cycle does route text). Every fixture, in 3-character chunks."""
    checked = 0
    steps = [0]

    def counting(scan: Any) -> Any:
        def counting_scan(*args: Any) -> Any:
            steps[0] += 1
            return scan(*args)

        return counting_scan

    for name, fixture in CASES:
        module = importlib.import_module(f"generated.{name}")
        parser = module.Parser(fixture.get("prefix", ""), on_error="content")
        states = [v for v in vars(module.Parser).values() if isinstance(v, runtime.State)]
        originals = {state: state.scan for state in states}
        try:
            for state, scan in originals.items():
                state.scan = counting(scan)
            output = fixture["output"]
            for start in range(0, len(output), 3):
                parser.feed(output[start : start + 3])
                if parser._settled:
                    before = steps[0]
                    assert parser.feed("") == [], (name, start)
                    assert steps[0] == before, (name, start)
                    checked += 1
        finally:
            for state, scan in originals.items():
                state.scan = scan
    assert checked > len(CASES)  # most chunks of most fixtures leave a settled scan


@given(
    pieces=st.lists(st.text("ab \n", max_size=4), max_size=6),
    join=st.sampled_from(["", "\n", "\n\n"]),
    default=st.sampled_from([None, "x", ["a list"]]),
)
def test_a_joined_field_is_added_to_in_place_as_by_concatenation(
    pieces: list[str], join: str, default: Any
) -> None:
    """`join` storage (runtime.regions.join_text, which extends the field's text in place):
    the same text as concatenating copies, the field keeping its place among the output's
    keys; a default of another type raises as concatenation does and is left as it was."""
    output: dict[str, Any] = {"field": default, "after": 1}
    expected = default
    for piece in pieces:
        if expected is None:
            expected = piece
        elif isinstance(expected, str):
            expected = expected + join + piece
        else:
            with pytest.raises(TypeError):
                join_text(output, "field", join, piece)
            assert output == {"field": default, "after": 1}
            return
        join_text(output, "field", join, piece)
    assert output == {"field": expected, "after": 1} and list(output) == ["field", "after"]
    with pytest.raises(ValueError, match="'join' requires"):
        join_text(output, "field", join, 3)
