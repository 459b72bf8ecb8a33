"""One-shot `Parser.parse()` runs its own path (`finalize(text)`: the text scanned once, as
the end of the stream): it must give what feeding the whole text and then finalize() give,
the same message or the same exception, and the same events but for where text is cut into
region_chunk pieces; and the reference's message.

Checked over every catalog fixture case under every on_error policy, over generated
outputs of every catalog entry, and over random templates, each also with the parsers'
internal thresholds shrunk (differential.shrunk_thresholds), so that short texts take the
paths long ones take (split regex searches, partial searches, literal probing).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import pytest
from catalog_samples import REGEX_SAMPLES, TOOLS, template_literals
from differential import accepted_parser, canon, reference_trace, shrunk_thresholds
from fixtures import ON_ERROR, load_fixtures
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples
from strategies import chunkings, outputs_for, prefixes, templates

from compiler import load_parser
from compiler.catalog import entry_names, load_entry
from compiler.spec import uses_extensions
from runtime import parser as parser_module


def _steps(parser_cls: Any, prefix: str, text: str, whole: bool, **options: Any) -> list[Any]:
    """What a caller observes: constructor events, then the feed's events and finalize's
    result (`whole`: finalize(text)'s result), each as ("ok", value) or ("raise",
    exception class), up to the first exception (values as they are, not `canon`'s)."""
    steps: list[Any] = []
    try:
        parser = parser_cls(prefix, **options)
    except Exception as error:
        return [("raise", type(error))]
    steps.append(("ok", parser.initial_events))
    actions = (
        [lambda: parser.finalize(text)] if whole else [lambda: parser.feed(text), parser.finalize]
    )
    for action in actions:
        try:
            steps.append(("ok", action()))
        except Exception as error:
            steps.append(("raise", type(error)))
            break
    return steps


def _joined(events: list[Any]) -> list[Any]:
    """The events with consecutive region_chunks of one region joined into one."""
    joined: list[Any] = []
    for event in events:
        last = joined[-1] if joined else None
        if (
            last is not None
            and event["type"] == last["type"] == "region_chunk"
            and (event["field"], event.get("dirty")) == (last["field"], last.get("dirty"))
        ):
            joined[-1] = {**last, "text": last["text"] + event["text"]}
        else:
            joined.append(event)
    return joined


def check_oneshot(parser_cls: Any, prefix: str, text: str, **options: Any) -> list[Any]:
    """The steps of feed(text) + finalize(), returned; finalize(text) asserted to give the
    same message and events (text chunks joined), or to raise the same exception class;
    and parse() to give that message (or raise that class)."""
    streamed = _steps(parser_cls, prefix, text, False, **options)
    whole = _steps(parser_cls, prefix, text, True, **options)
    assert canon(whole[0]) == canon(streamed[0]), (prefix, text)
    last = streamed[-1]
    if len(streamed) == 1 or last[0] == "raise":
        expected: Any = last
    else:
        message, final = last[1]
        expected = ("ok", (message, _joined(streamed[1][1] + final)))
    got = whole[-1]
    if len(whole) > 1 and got[0] == "ok":
        got = ("ok", (got[1][0], _joined(got[1][1])))
    assert canon(got) == canon(expected), (prefix, text)
    try:
        parsed: Any = ("ok", parser_cls.parse(text, prefix=prefix, **options))
    except Exception as error:
        parsed = ("raise", type(error))
    message_or_raise = expected if expected[0] == "raise" else ("ok", expected[1][0])
    assert canon(parsed) == canon(message_or_raise), (prefix, text)
    return [(kind, canon(value) if kind == "ok" else value) for kind, value in streamed]


def check_with_reference(
    template: Any, parser_cls: Any, prefix: str, text: str, tools: Any
) -> None:
    reference = reference_trace(template, prefix, [text], tools)
    if any(step[0] == "hang" for step in reference):
        # The reference loops forever here (see differential.py): where ours stops (the
        # progress rule, per scan loop) defines nothing the two ways must agree on; a
        # zero-width open and close at `^` stop one place fed whole, another fed and ended.
        return
    ours = check_oneshot(parser_cls, prefix, text, tools=tools)
    compared = reference[: len(ours)]
    for mine, theirs in zip(ours, compared, strict=True):
        if theirs[0] == "raise":
            assert mine[0] == "raise" and issubclass(mine[1], theirs[1]), (prefix, text)
        else:
            assert mine == theirs, (prefix, text)


CASES = [
    (name, case, on_error)
    for name in entry_names()
    for case in load_fixtures(name)["cases"]
    for on_error in ON_ERROR
]


@pytest.mark.parametrize("shrunk", [False, True])
def test_fixture_cases_parse_one_shot_as_streamed(shrunk: bool) -> None:
    for name, case, on_error in CASES:
        parser = importlib.import_module(f"generated.{name}").Parser
        tools = case.get("tools")
        if shrunk:
            with shrunk_thresholds(parser):
                check_oneshot(
                    parser, case["prefix"], case["output"], tools=tools, on_error=on_error
                )
        else:
            check_oneshot(parser, case["prefix"], case["output"], tools=tools, on_error=on_error)


def catalog_case(name: str, data: Any) -> tuple[Any, Any, str, str, Any]:
    """(template, Parser, output, prefix, tools) drawn for a catalog entry: an output in its
    format, and one of its generation prompts (or none)."""
    entry = load_entry(name)
    template = entry.data["response_template"]
    parser = importlib.import_module(f"generated.{name}").Parser
    literals = template_literals(template)
    samples = REGEX_SAMPLES.get(name, []) + load_fixtures(name)["samples"]
    text = data.draw(outputs_for(literals, samples, max_size=20), label="output")
    prefix = data.draw(
        st.sampled_from(["", *sorted(entry.generation_prompt.values())]), label="prefix"
    )
    tools = data.draw(st.sampled_from([None, TOOLS]), label="tools")
    return template, parser, text, prefix, tools


def random_case(data: Any) -> tuple[Any, Any, str, str] | None:
    """(template, Parser, output, prefix) of a random template the reference loads."""
    drawn = accepted_parser(data, templates())
    if drawn is None:
        return None
    template, literals, samples, parser = drawn
    text = data.draw(outputs_for(literals, samples), label="output")
    prefix = data.draw(
        st.one_of(st.just(""), prefixes(template, outputs_for(literals, samples, 3))),
        label="prefix",
    )
    return template, parser, text, prefix


def maybe_shrunk(data: Any, parser: Any) -> AbstractContextManager[None]:
    """The parsers' thresholds shrunk (differential.shrunk_thresholds), or left, as drawn."""
    return shrunk_thresholds(parser) if data.draw(st.booleans(), label="shrunk") else nullcontext()


@pytest.mark.parametrize("name", entry_names())
@given(data=st.data())
def test_catalog_outputs_parse_one_shot_as_streamed(name: str, data: Any) -> None:
    template, parser, text, prefix, tools = catalog_case(name, data)
    with maybe_shrunk(data, parser):
        if uses_extensions(template):  # no reference loads these: against streamed only
            check_oneshot(parser, prefix, text, tools=tools)
        else:
            check_with_reference(template, parser, prefix, text, tools)


@given(data=st.data())
def test_random_templates_parse_one_shot_as_streamed(data: Any) -> None:
    case = random_case(data)
    if case is None:
        return
    template, parser, text, prefix = case
    with maybe_shrunk(data, parser):
        check_with_reference(template, parser, prefix, text, None)


def test_a_case_the_reference_loops_on_is_not_compared() -> None:
    """Drawn by the deep profile: a zero-width open and close at `^`, where the reference
    loops forever, fed whole and fed then ended stop in different places. Nothing defines
    them, so check_with_reference leaves the case out before it compares the two."""
    template = {
        "start_anchor": "<|s|>",
        "fields": {
            "thinking": {
                "open_pattern": "(?:^|<s>)",
                "close_pattern": "(?:^|<s>)",
                "repeats": True,
            },
            "content": {"open": "<a>"},
        },
    }
    parser = load_parser(template)
    assert any(step[0] == "hang" for step in reference_trace(template, "", ["<s>"], None))
    check_with_reference(template, parser, "", "<s>", None)


_ADDRESS = re.compile(r"at 0x[0-9a-fA-F]+")


@contextmanager
def general_loop() -> Iterator[None]:
    """finalize() through the general scan loop (`Scanner._run(text, events, eos=True)`)
    instead of runtime.oneshot's."""

    def run(parser: Any, text: str, events: list[Any]) -> None:
        parser._run(text, events, eos=True)

    original = parser_module.scan_to_end
    parser_module.scan_to_end = run
    try:
        yield
    finally:
        parser_module.scan_to_end = original


def _ending(
    parser_cls: Any, prefix: str, chunks: list[str], text: str, truncated: bool, **options: Any
) -> Any:
    """What a parser fed `chunks` gives at finalize(text, truncated=...): the message and
    the events exactly as they come (or the exception, class and message), as a repr, and
    the characters it counts as received."""
    try:
        parser = parser_cls(prefix, **options)
        for chunk in chunks:
            parser.feed(chunk)
    except Exception:
        return None  # the stream failed before its end: nothing of the end to compare
    try:
        result: Any = ("ok", parser.finalize(text, truncated=truncated))
    except Exception as error:
        result = ("raise", type(error), str(error))
    # (an object's address in a message, as ast's errors give, differs from run to run)
    return _ADDRESS.sub("at 0x...", repr(result)), parser._received()


def check_ending(parser_cls: Any, prefix: str, output: str, data: Any, **options: Any) -> None:
    """finalize's one-pass loop gives exactly what the general loop gives: the same events
    (not only joined alike), message, errors and count, under every on_error policy, cut
    off or not, for the whole output at the end or a rest after streamed chunks."""
    cut = data.draw(st.integers(0, len(output)), label="streamed up to")
    chunks = data.draw(chunkings(output[:cut]), label="chunks") if cut else []
    on_error = data.draw(st.sampled_from(ON_ERROR), label="on_error")
    truncated = data.draw(st.booleans(), label="truncated")
    args = (parser_cls, prefix, chunks, output[cut:], truncated)
    one_pass = _ending(*args, on_error=on_error, **options)
    with general_loop():
        general = _ending(*args, on_error=on_error, **options)
    assert one_pass == general, (prefix, chunks, output[cut:])


@pytest.mark.parametrize("name", entry_names())
@given(data=st.data())
def test_catalog_outputs_end_alike_through_either_loop(name: str, data: Any) -> None:
    _, parser, output, prefix, tools = catalog_case(name, data)
    with maybe_shrunk(data, parser):
        check_ending(parser, prefix, output, data, tools=tools)


@given(data=st.data())
def test_random_templates_end_alike_through_either_loop(data: Any) -> None:
    case = random_case(data)
    if case is None:
        return
    _, parser, output, prefix = case
    with maybe_shrunk(data, parser):
        check_ending(parser, prefix, output, data)


@pytest.mark.parametrize("name", entry_names())
@given(data=st.data())
@settings(max_examples=examples(40))
def test_lenient_modes_give_one_message_however_the_output_is_cut(name: str, data: Any) -> None:
    """Under on_error="keep_raw" and "content" an output in the entry's format gives, fed in
    any chunks, the message parse() gives: recovering from a failed region, whatever its
    text, neither depends on the chunking nor loses the text after it."""
    _, parser, output, prefix, tools = catalog_case(name, data)
    on_error = data.draw(st.sampled_from(["keep_raw", "content"]), label="on_error")
    whole = parser.parse(output, prefix=prefix, tools=tools, on_error=on_error)
    streamed = parser(prefix, tools=tools, on_error=on_error)
    for chunk in data.draw(chunkings(output), label="chunks"):
        streamed.feed(chunk)
    assert streamed.finalize()[0] == whole
