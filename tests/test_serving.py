"""integrations.serving: the two halves the engine plugins are built on, without an engine.

The reasoning half (the thinking, then the raw text after it) followed by the tool half
(that text, parsed with the template less its thinking field) must give what the compiled
parser alone gives for the whole output under the server policy, for every catalog entry's
fixtures and any chunking; the one-shot tool half (`parse_whole`) gives what the whole-call
stream gives; and importing the package imports no engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import regex
from catalog_samples import REGEX_SAMPLES, template_literals
from engine_cases import generated_message, known_limit, repeated_thinking, squash
from fixtures import load_fixtures
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import examples
from strategies import outputs_for

import generated.smollm3
from compiler import load_parser
from compiler.catalog import load_entry
from integrations.serving import (
    CallDelta,
    Delta,
    ReasoningStream,
    ResponseStream,
    _leftmost_end,
    catalog_names,
    parse_whole,
    parser_for,
    record_call,
    shape_of,
    without_thinking,
)

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    (entry, case["name"], case.get("prefix") or "", case["output"])
    for entry in catalog_names()
    for case in json.loads((ROOT / "tests" / "fixtures" / f"{entry}.json").read_text("utf-8"))[
        "cases"
    ]
]


def summary(thinking: Any, content: Any, calls: list[tuple[Any, Any]]) -> dict[str, Any]:
    def text(value: Any) -> str:
        return value.strip() if isinstance(value, str) else ""

    parsed = [
        (name, json.loads(arguments) if isinstance(arguments, str) else arguments)
        for name, arguments in calls
    ]
    return {"thinking": text(thinking), "content": text(content), "tool_calls": parsed}


def two_halves(entry: str, prefix: str, output: str, cuts: list[int]) -> dict[str, Any]:
    pieces = [output[a:b] for a, b in zip([0, *cuts], [*cuts, len(output)], strict=True)]
    reasoning = ReasoningStream(parser_for(entry), prefix)
    tools = ResponseStream(without_thinking(parser_for(entry)), tools=None, whole=True)
    total = Delta()
    for piece in [*pieces, None]:
        step = reasoning.feed(piece) if piece is not None else reasoning.finish()
        total.reasoning += step.reasoning
        if step.content:  # the text after the thinking: the tool half's input
            merge(total, tools.feed(step.content))
    merge(total, tools.finish())
    return summary(total.reasoning, total.content, [(c.name, c.arguments) for c in total.calls])


def merge(total: Delta, step: Delta) -> None:
    total.content += step.content
    total.reasoning += step.reasoning
    for part in step.calls:
        same = [call for call in total.calls if call.index == part.index]
        if same:
            same[0].arguments += part.arguments
        else:
            total.calls.append(part)


KNOWN = [
    pytest.param(case, marks=mark) if (mark := known_limit(case[0], case[2], case[3])) else case
    for case in CASES
]


@pytest.mark.parametrize("case", KNOWN, ids=lambda case: f"{case[0]}/{case[1]}")
def test_the_two_halves_give_the_whole_message(case: tuple[str, str, str, str]) -> None:
    entry, _, prefix, output = case
    got = two_halves(entry, prefix, output, [])
    expected = generated_message(entry, prefix, output)
    assert got["tool_calls"] == expected["tool_calls"]
    assert squash(got["thinking"]) == expected["reasoning"]
    assert squash(got["content"]) == expected["content"]


@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_any_chunking_gives_the_same(data: st.DataObject) -> None:
    entry, _, prefix, output = data.draw(st.sampled_from(CASES), label="case")
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(output) - 1))), label="cuts"))
    assert two_halves(entry, prefix, output, cuts) == two_halves(entry, prefix, output, [])


@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_any_chunking_of_any_output_hands_on_the_same(data: st.DataObject) -> None:
    """As above, for outputs made of an entry's own delimiters, near misses of them and text
    (tests/strategies.py), after each of its generation prompts: whatever the output, the
    two halves give the same in one piece and in any pieces, where the thinking opens again
    later, closes empty, or begins with a prompt tail the parser held back."""
    entry = data.draw(st.sampled_from(catalog_names()), label="entry")
    template = load_entry(entry).data["response_template"]
    samples = REGEX_SAMPLES.get(entry, []) + load_fixtures(entry)["samples"]
    output = data.draw(outputs_for(template_literals(template), samples, 16), label="output")
    prompts = sorted(load_entry(entry).generation_prompt.values())
    prefix = data.draw(st.sampled_from(["", *prompts]), label="prefix")
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(output) - 1))), label="cuts"))
    assert two_halves(entry, prefix, output, cuts) == two_halves(entry, prefix, output, [])


@pytest.mark.parametrize(
    ("entry", "prefix", "output"),
    [
        # the prompt's `<think>` and newline: the parser holds the newline back (the open may
        # take more whitespace), and the thinking's text begins with it
        ("ernie", "Assistant: <think>\n", "Hm.\n</think>\n\n<response>\nIt is 4.\n</response>"),
        # the prompt's opener held whole, closed at once by the call's look-ahead
        (
            "glm47",
            "<|assistant|><think>",
            "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
        ),
        (
            "granite",
            "<|start_of_role|>assistant<|end_of_role|>Here is my thought process:",
            '<tool_call>[{"name": "f", "arguments": {}}]',
        ),
        # an empty thinking, closed or cut off: its delimiters are no content
        ("hermes", "<|im_start|>assistant\n", "<think></think>Hi."),
        ("hermes", "<|im_start|>assistant\n", "<think>"),
    ],
)
def test_the_thinking_is_found_where_the_parser_put_it(
    entry: str, prefix: str, output: str
) -> None:
    """The reasoning half hands on the text after the thinking region, found in the output as
    the parser cut it: the template's message, whole or cut anywhere (the first of these lost
    its answer, the last handed its `<think>` on as content)."""
    expected = generated_message(entry, prefix, output)
    for cuts in ([], *([cut] for cut in range(1, len(output)))):
        got = two_halves(entry, prefix, output, cuts)
        assert got["tool_calls"] == expected["tool_calls"], cuts
        assert squash(got["thinking"]) == expected["reasoning"], cuts
        assert squash(got["content"]) == expected["content"], cuts


def test_interleaved_thinking_hands_on_the_same_whole_or_cut_anywhere() -> None:
    """Where the thinking repeats, the reasoning half takes the first segment only (the
    known limit, docs/serving.md), and hands on the rest, the answer included, the same
    for the whole output in one piece (a one-shot request) as for any cut of it. A piece
    that ran on past the first segment into the next once took both as reasoning and
    handed on nothing."""
    repeated = [case for case in CASES if repeated_thinking(case[0], case[3])]
    assert repeated  # inkling's fixtures have interleaved thinking
    for entry, _, prefix, output in repeated:
        whole = two_halves(entry, prefix, output, [])
        for cut in range(1, len(output)):
            assert two_halves(entry, prefix, output, [cut]) == whole, (entry, cut)
        assert squash(whole["content"]) == generated_message(entry, prefix, output)["content"]


def test_importing_the_package_imports_no_engine() -> None:
    code = (
        "import sys, integrations, integrations.serving, integrations.transformers\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in ('vllm', 'sglang')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_call_cut_off_by_the_token_limit_is_content_in_the_tool_half() -> None:
    """ResponseStream.finish("length"): the call still open at the end is incomplete, so
    its text is content; finished without a reason, the template's parse of it stands.
    Streamed, the name and parameters already sent stay as sent, never valid JSON."""
    output = "Hi <tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    parser = without_thinking(parser_for("qwen3"))
    for whole in (True, False):
        for reason in (None, "length"):
            stream = ResponseStream(parser, whole=whole)
            delta = stream.feed(output)
            end = stream.finish(reason)
            arguments = "".join(call.arguments for call in delta.calls + end.calls)
            if reason is None:
                assert json.loads(arguments) == {"city": "Paris"}
                continue
            assert "<function=get_weather>" in delta.content + end.content
            assert "cut off" in stream.errors[0]["error"]["message"]
            if whole:
                assert not delta.calls + end.calls
            else:
                with pytest.raises(ValueError):
                    json.loads(arguments)


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "location": {"type": "string"},
                    "unit": {"type": "string"},
                },
            },
        },
    }
    for name in ("get_weather", "get_current_weather", "search")
]


def streamed_whole(parser: type[Any], text: str, tools: Any, ids: Any) -> Delta:
    """The tool half as the one-shot paths ran it before parse_whole: a whole-call stream."""
    stream = ResponseStream(parser, tools=tools, call_id=ids, whole=True)
    total = Delta()
    merge(total, stream.feed(text))
    merge(total, stream.finish())
    return total


@settings(max_examples=examples(400), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_the_one_shot_tool_half_is_the_whole_call_stream(data: st.DataObject) -> None:
    """parse_whole converts the message instead of streaming: same content, reasoning, and
    calls (index, id, name, arguments), for any fixture output, cut short or with a piece
    cut out, with or without tools, for the tool half's parser and the full one."""
    entry, _, _, output = data.draw(st.sampled_from(CASES), label="case")
    start = data.draw(st.integers(0, len(output)), label="start")
    end = data.draw(st.sampled_from([start, len(output)]), label="end")
    text = data.draw(st.sampled_from([output, output[:start] + output[end:]]), label="text")
    tools = data.draw(st.sampled_from([None, TOOLS]), label="tools")
    parser = data.draw(st.sampled_from([parser_for(entry), without_thinking(parser_for(entry))]))
    ids = lambda index: f"id-{index}"  # noqa: E731
    assert parse_whole(parser, text, tools=tools, call_id=ids) == streamed_whole(
        parser, text, tools, ids
    )


def test_the_one_shot_tool_half_streams_where_the_message_differs() -> None:
    # smollm3's content has no `repeats`: its message keeps the last region only, while the
    # stream sends both; and a string default is in the message, never in the stream.
    # parse_whole gives the stream's answer in both cases.
    ids = lambda index: f"id-{index}"  # noqa: E731
    parser = generated.smollm3.Parser
    assert "content" in shape_of(parser).single
    got = parse_whole(parser, "first<think>x</think>second", call_id=ids)
    assert got.content == "firstsecond"
    assert got == streamed_whole(parser, "first<think>x</think>second", None, ids)
    template = {
        "start_anchor": "<s>",
        "fields": {"content": {"open": "<c>", "close": "</c>", "content": "text"}},
        "defaults": {"content": "(none)"},
    }
    defaulted = load_parser(template)
    assert shape_of(defaulted).text_defaults
    for text in ("", "<c>hi</c>"):
        assert parse_whole(defaulted, text, call_id=ids) == streamed_whole(
            defaulted, text, None, ids
        )
    assert parse_whole(defaulted, "").content == ""


def test_the_one_shot_tool_half_keeps_each_requests_tools() -> None:
    # The same parser class, two requests: only the one whose tools type `days` casts it.
    parser = without_thinking(parser_for("hermes"))
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"days": "3"}}\n</tool_call>'
    typed = parse_whole(parser, text, tools=TOOLS)
    untyped = parse_whole(parser, text)
    assert json.loads(typed.calls[0].arguments) == {"days": 3}
    assert json.loads(untyped.calls[0].arguments) == {"days": "3"}


@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_long_output_fed_whole_hands_on_what_one_parse_of_it_does(data: st.DataObject) -> None:
    """ReasoningStream.feed of a long text parses it piece by piece and stops parsing where
    the thinking ends: the same reasoning and handed-on text as one parse of all of it (a
    stream whose pieces are never cut), in one feed or after a few small chunks."""
    entry, _, prefix, output = data.draw(st.sampled_from(CASES), label="case")
    repeat = data.draw(st.integers(1, 40), label="repeat")
    thinking = shape_of(parser_for(entry)).template["fields"].get("thinking")
    opener = thinking.get("open") if isinstance(thinking, dict) else None
    if isinstance(opener, str) and opener in output:  # a long thinking: its text repeated
        at = output.index(opener) + len(opener)
        end = output.find("<", at)
        end = len(output) if end < 0 else end
        output = output[:at] + output[at:end] * repeat + output[end:]
    else:
        output = output * repeat
    lead = data.draw(st.integers(0, 12), label="lead")  # streamed before the long text
    results = []
    for piece in (ReasoningStream.PIECE, len(output) + 1):
        stream = ReasoningStream(parser_for(entry), prefix)
        stream.PIECE = piece  # the second never cuts: one parse of the long text
        steps = [stream.feed(output[:lead]), stream.feed(output[lead:]), stream.finish()]
        reasoning = "".join(step.reasoning for step in steps)
        results.append((reasoning, "".join(step.content for step in steps), stream.saw_thinking))
    assert results[0] == results[1]


@given(
    parts=st.lists(
        st.tuples(st.integers(0, 3), st.none() | st.sampled_from(["f", "g"]), st.text(max_size=5))
    )
)
def test_an_engine_parser_records_each_calls_arguments_as_sent(parts: list[Any]) -> None:
    """`record_call` (the plugins' bookkeeping for their engines): for each call index, the
    arguments sent so far, in both places the engines read them, and the first name sent;
    earlier strings handed out are left as they were (the arguments grow in place only when
    nothing else holds them)."""
    streamed: list[str] = []
    previous: list[dict[str, Any]] = []
    seen: list[str] = []
    for index, name, arguments in parts:
        record_call(streamed, previous, CallDelta(index, name=name, arguments=arguments))
        seen.append(streamed[index])  # a reference held elsewhere, as an engine may hold one
    size = max((index + 1 for index, _, _ in parts), default=0)
    assert streamed == ["".join(a for i, _, a in parts if i == index) for index in range(size)]
    names = [next((n for i, n, _ in parts if i == index and n), None) for index in range(size)]
    assert previous == [{"name": n, "arguments": a} for n, a in zip(names, streamed, strict=True)]
    grown: dict[int, str] = {}
    for (index, _, arguments), held in zip(parts, seen, strict=True):
        grown[index] = grown.get(index, "") + arguments
        assert held == grown[index]


@given(
    text=st.text("<ab/>", max_size=40),
    literals=st.lists(st.text("<ab/>", min_size=1, max_size=4), min_size=1, max_size=3),
    start=st.integers(0, 40),
)
def test_the_open_literals_are_found_as_their_regex_finds_them(
    text: str, literals: list[str], start: int
) -> None:
    """ReasoningStream tells whether the thinking opens again with str.find for a literal
    open (`_leftmost_end`): where the regex of the alternation (the first literal that
    matches at the leftmost place) ends its match, or -1."""
    found = regex.compile("|".join(map(regex.escape, literals))).search(text, min(start, len(text)))
    expected = -1 if found is None else found.end()
    assert _leftmost_end(text, tuple(literals), min(start, len(text))) == expected
