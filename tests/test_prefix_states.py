"""A parser built with a prefix it has seen before takes up the state a parser had after
it (runtime.parser._prefix_state) instead of scanning it again: it must behave exactly as
one that scans it, event for event and message for message, and parsers that took up one
state must not share anything they change.

Checked over random templates with random prefixes (which may open, fill and close
regions, or fail), every catalog fixture case, and two parsers from one state fed
different texts in turns; under every on_error policy.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from catalog_samples import TOOLS
from differential import accepted_parser, canon
from fixtures import ON_ERROR, load_fixtures
from hypothesis import assume, example, given
from hypothesis import strategies as st
from strategies import chunkings, outputs_for, prefixes, templates

import runtime.parser
from compiler.catalog import entry_names


@contextmanager
def scanning_prefixes() -> Iterator[None]:
    """Every parser built in the block scans its prefix itself (no state is taken up)."""
    with mock.patch.object(runtime.parser, "_prefix_state", lambda *args: None):
        yield


def _run(parser_cls: Any, prefix: str, chunks: list[str], **options: Any) -> list[Any]:
    """What a caller observes: the constructor's events, each feed's events, finalize's
    result, each ("ok", value) or ("raise", exception class and message), up to the first
    exception. Values are compared as differential.canon has them (a NaN equals a NaN)."""
    steps: list[Any] = []
    try:
        parser = parser_cls(prefix, **options)
    except Exception as error:
        return [("raise", type(error), str(error))]
    steps.append(("ok", canon(parser.initial_events)))
    actions = [lambda chunk=chunk: parser.feed(chunk) for chunk in chunks] + [parser.finalize]
    for action in actions:
        try:
            steps.append(("ok", canon(action())))
        except Exception as error:
            steps.append(("raise", type(error), str(error)))
            break
    return steps


def _taken_up(parser_cls: Any, prefix: str, chunks: list[str], **options: Any) -> list[Any]:
    """`_run` by a parser built after another one with the same prefix and options."""
    try:
        parser_cls(prefix, **options)
    except Exception:
        pass
    return _run(parser_cls, prefix, chunks, **options)


@given(data=st.data())
def test_random_templates_take_up_a_prefix_as_they_scan_it(data: Any) -> None:
    drawn = accepted_parser(data, templates())
    if drawn is None:
        return
    template, literals, samples, parser = drawn
    prefix = data.draw(prefixes(template, outputs_for(literals, samples, 4)), label="prefix")
    text = data.draw(outputs_for(literals, samples), label="output")
    chunks = data.draw(chunkings(text), label="chunks")
    on_error = data.draw(st.sampled_from(sorted(ON_ERROR)), label="on_error")
    taken_up = _taken_up(parser, prefix, chunks, on_error=on_error)
    with scanning_prefixes():
        scanned = _run(parser, prefix, chunks, on_error=on_error)
    assert taken_up == scanned


@pytest.mark.parametrize("name", entry_names())
def test_catalog_cases_take_up_a_prefix_as_they_scan_it(name: str) -> None:
    parser = importlib.import_module(f"generated.{name}").Parser
    for case in load_fixtures(name)["cases"]:
        chunks = [case["output"][i : i + 3] for i in range(0, len(case["output"]), 3)]
        for on_error in sorted(ON_ERROR):
            options = {"on_error": on_error, "tools": TOOLS}
            taken_up = _taken_up(parser, case["prefix"], chunks, **options)
            with scanning_prefixes():
                scanned = _run(parser, case["prefix"], chunks, **options)
            assert taken_up == scanned, (name, case["prefix"], on_error)


def test_a_prompt_tail_is_scanned_once() -> None:
    """qwen3's prompt tail `<think>\\n` opens the thinking region: the second parser takes
    that state up, and a tail that closes a region (whose value tools= may cast) is not
    kept (_prefix_state gives None, so each parser scans it)."""
    from generated.qwen3 import Parser

    prompt = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    runtime.parser._prefix_state.cache_clear()
    Parser(prompt + "<think>\n")
    Parser(prompt + "<think>\n")
    info = runtime.parser._prefix_state.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    assert runtime.parser._prefix_state(Parser, "<think>\n", "raise", None) is not None
    assert runtime.parser._prefix_state(Parser, "<think>\n\n</think>\n\n", "raise", None) is None


@given(data=st.data())
def test_parsers_from_one_state_share_nothing(data: Any) -> None:
    """Two parsers that took up one state, fed two cases' outputs in turns, each give what a
    parser that scanned the prefix gives."""
    name = data.draw(st.sampled_from(entry_names()), label="entry")
    parser = importlib.import_module(f"generated.{name}").Parser
    cases = [case for case in load_fixtures(name)["cases"] if case["prefix"]]
    if not cases:
        return
    first = data.draw(st.sampled_from(cases), label="first")
    prefix = first["prefix"]
    texts = [first["output"], data.draw(st.sampled_from(cases), label="second")["output"]]
    chunked = [data.draw(chunkings(text), label="chunks") for text in texts]
    with scanning_prefixes():
        expected = [_run(parser, prefix, chunks, on_error="keep_raw") for chunks in chunked]
    assume(all(step[0] == "ok" for steps in expected for step in steps))
    parser(prefix, on_error="keep_raw")  # the state to take up
    pair = [parser(prefix, on_error="keep_raw") for _ in texts]
    got: list[list[Any]] = [[("ok", canon(each.initial_events))] for each in pair]
    queues = [list(chunks) for chunks in chunked]
    while any(queues):  # in turns: each parser gets its own chunks in order
        index = data.draw(st.sampled_from([i for i, queue in enumerate(queues) if queue]))
        got[index].append(("ok", canon(pair[index].feed(queues[index].pop(0)))))
    for index, each in enumerate(pair):
        got[index].append(("ok", canon(each.finalize())))
    assert got == expected


@given(st.text("ab<", min_size=1, max_size=4), st.text("ab<", max_size=24))
@example("aa", "aaa")  # the last occurrence (at 1) overlaps the last match (at 0)
@example("aba", "abababa")
def test_a_literal_anchor_cuts_the_prefix_after_its_last_match(literal: str, prefix: str) -> None:
    """after_last_literal finds a single literal from the end; a literal that overlaps
    itself (`aa` in `aaa`) must still cut where `finditer` finds its last match, left to
    right without overlapping, as the reference finds it."""
    matches = list(re.finditer(re.escape(literal), prefix))
    expected = prefix[matches[-1].end() :] if matches else prefix
    assert runtime.parser.after_last_literal(prefix, (literal,)) == expected
