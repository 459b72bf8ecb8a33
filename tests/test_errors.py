"""Errors that say where: template key paths, field and offset for parse failures,
bounded regex work, and the opt-in lenient mode."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from fixtures import final_outcome, load_fixtures
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples
from strategies import chunkings

import generated.smollm3
import runtime.errors
from compiler import load_parser
from compiler.catalog import entry_names
from runtime.errors import FieldParseError, MissingFieldError, RegexTimeout

CALL = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'


def test_parse_error_names_the_field_and_where_its_region_opened() -> None:
    text = "Hi. " + CALL + "<tool_call>{not json</tool_call>"
    with pytest.raises(FieldParseError) as caught:
        generated.smollm3.Parser.parse(text, prefix="")
    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.field, error.offset) == ("tool_calls", text.index("<tool_call>{not"))
    assert "field 'tool_calls' (fields.tool_calls.content, region opened at offset" in str(error)
    assert error.key == "fields.tool_calls.content"
    assert "could not parse region as JSON" in str(error.__cause__)


# The source map: a failure names the template key whose generated code raised it.
SOURCE_MAP_CASES = [
    # (template, output, key path, exception class)
    (
        {"fields": {"x": {"open": "<x>", "close": "</x>", "content": "json"}}},
        "<x>{bad</x>",
        "fields.x.content",
        FieldParseError,
    ),
    (
        {
            "fields": {
                "x": {
                    "open": "<x>",
                    "close": "</x>",
                    "content": "json",
                    "transform": "{content.a.b}",
                }
            }
        },
        '<x>{"a": 1}</x>',
        "fields.x.transform",
        FieldParseError,
    ),
    (
        {
            "defaults": {"x": "text"},
            "fields": {"x": {"open": "<x>", "close": "</x>", "repeats": True}},
        },
        "<x>1</x>",
        "fields.x.repeats",
        AttributeError,  # the reference's class, with a note naming the key
    ),
    (
        {
            "fields": {
                "x": {
                    "open": "<x>",
                    "close": "</x>",
                    "content": "json",
                    "repeats": True,
                    "join": "-",
                }
            }
        },
        "<x>1</x><x>2</x>",
        "fields.x.join",
        FieldParseError,
    ),
]


SOURCE_MAP_CASES.append(  # a field name that is not an identifier: a quoted key
    (
        {"fields": {"tool calls": {"open": "<x>", "close": "</x>", "content": "json"}}},
        "<x>{bad</x>",
        'fields["tool calls"].content',
        FieldParseError,
    )
)


@pytest.mark.parametrize("template, output, key, error_class", SOURCE_MAP_CASES)
def test_a_failure_names_its_template_key(
    template: dict[str, Any], output: str, key: str, error_class: type[Exception]
) -> None:
    parser_class = load_parser({"start_anchor": "A:", **template})
    try:
        parser_class.parse(output, prefix="")
    except Exception as caught:
        error = caught
    else:
        pytest.fail("no error")
    assert isinstance(error, error_class)
    assert key in str(error) + "".join(getattr(error, "__notes__", []))
    # The lenient modes report it in the record's error.
    message = parser_class.parse(output, prefix="", on_error="keep_raw")
    assert message["parse_errors"][0]["error"]["key"] == key


def test_offsets_count_generated_text_and_are_negative_in_the_prefix() -> None:
    parser = generated.smollm3.Parser("<|im_start|>assistant\n<tool_call>{oops")
    parser.feed("}</tool_call>")
    with pytest.raises(FieldParseError) as caught:
        parser.finalize() if False else parser.feed("x") or parser.finalize()
    assert caught.value.offset == -len("<tool_call>{oops")


def test_offsets_hold_under_any_chunking() -> None:
    text = "abc " * 50 + "<tool_call>{bad</tool_call>"
    for size in (1, 3, 7, len(text)):
        parser = generated.smollm3.Parser("")
        with pytest.raises(FieldParseError) as caught:
            for i in range(0, len(text), size):
                parser.feed(text[i : i + size])
            parser.finalize()
        assert caught.value.offset == text.index("<tool_call>")


def test_missing_required_field_names_it() -> None:
    parser = load_parser(
        {"start_anchor": "A:", "fields": {"answer": {"open": "<a>", "optional": False}}}
    )
    with pytest.raises(MissingFieldError, match="answer") as caught:
        parser.parse("nothing", prefix="")
    assert caught.value.fields == ["answer"]


def test_other_errors_keep_their_class_with_a_note() -> None:
    parser = load_parser(
        {
            "start_anchor": "A:",
            "fields": {"x": {"open": "<x>", "content": "json", "transform": "{missing}"}},
        }
    )
    with pytest.raises(KeyError) as caught:
        parser.parse("<x>{}", prefix="")
    assert any("field 'x'" in note for note in getattr(caught.value, "__notes__", []))


def test_keep_raw_keeps_the_text_reports_it_and_goes_on() -> None:
    text = "Hi. " + CALL + "<tool_call>{not json</tool_call>Bye.<|im_end|>"
    parser = generated.smollm3.Parser("", on_error="keep_raw")
    events = parser.feed(text)
    message, final = parser.finalize()
    events += final
    errors = [event for event in events if event["type"] == "region_error"]
    assert (
        len(errors) == 1 and errors[0]["field"] == "tool_calls" and errors[0]["raw"] == "{not json"
    )
    assert errors[0]["error"]["type"] in ("ValueError", "FieldParseError")
    assert message["tool_calls"][1] == "{not json"
    assert message["parse_errors"] == [{k: v for k, v in errors[0].items() if k != "type"}]
    assert "Bye." in message["content"]


def test_keep_raw_reports_missing_required_fields_instead_of_raising() -> None:
    parser = load_parser(
        {"start_anchor": "A:", "fields": {"answer": {"open": "<a>", "optional": False}}}
    )
    message = parser.parse("nothing", prefix="", on_error="keep_raw")
    assert message["parse_errors"][0]["error"]["type"] == "MissingFieldError"


def test_default_mode_is_the_reference_behaviour() -> None:
    with pytest.raises(ValueError, match="on_error"):
        generated.smollm3.Parser("", on_error="ignore")


def test_a_runaway_regex_raises_regex_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nested quantifiers the regex module cannot shortcut: exponential on a near miss.
    parser = load_parser(
        {"start_anchor": "A:", "fields": {"x": {"open_pattern": r"(?:a|aa)+(?:b|c)\Z"}}}
    )
    monkeypatch.setattr(runtime.errors, "REGEX_TIMEOUT", 0.05)
    with pytest.raises(RegexTimeout) as caught:
        parser.parse("a" * 60 + "d", prefix="")
    assert isinstance(caught.value, TimeoutError) and "open_pattern" in str(caught.value)


# -- on_error="content": the server policy ----------------------------------------------

SERVER_CASES = [
    (name, case)
    for name in entry_names()
    for case in load_fixtures(name)["cases"]
    if isinstance(case.get("prefix", ""), str)
]


def _strip_errors(message: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in message.items() if key != "parse_errors"}


@settings(max_examples=examples(400))
@given(data=st.data())
def test_the_server_policy_never_raises_and_is_chunking_independent(data: Any) -> None:
    """Any fixture output, cut anywhere (a truncated call), parses under on_error="content"
    for every chunking, to the message one-shot parsing gives; an output that parses
    strictly gives the same message with no parse_errors."""
    name, case = data.draw(st.sampled_from(SERVER_CASES), label="case")
    parser_cls = importlib.import_module(f"generated.{name}").Parser
    output = case["output"]
    output = output[: data.draw(st.integers(0, len(output)), label="cut")]
    prefix, tools = case.get("prefix", ""), case.get("tools")
    whole = parser_cls.parse(output, prefix=prefix, tools=tools, on_error="content")
    parser = parser_cls(prefix, tools=tools, on_error="content")
    fed = 0
    for chunk in data.draw(chunkings(output), label="chunks"):
        parser.feed(chunk)
        fed += len(chunk)
        # Error offsets count from it.
        assert parser._received() == fed
    assert parser.finalize()[0] == whole
    outcome = final_outcome(parser_cls, prefix, [output], tools)
    if outcome[0] == "message":
        assert whole == outcome[1]
    else:
        assert whole["parse_errors"]


SEGMENTS = [
    "Hi there. ",
    "  \n",
    CALL,
    "<tool_call>{bad</tool_call>",
    "<tool_call>nope</tool_call>",
]


@settings(max_examples=examples(300))
@given(
    data=st.data(),
    picks=st.lists(st.sampled_from(range(len(SEGMENTS))), max_size=8),
    on_error=st.sampled_from(["keep_raw", "content"]),
)
def test_failed_regions_report_where_they_opened_under_any_chunking(
    data: Any, picks: list[int], on_error: str
) -> None:
    """Each failed call's record names the offset of its open delimiter, however the output
    is cut, also after earlier failures went back into content (Regions._recover_as_text)."""
    output, opened = "", []
    for pick in picks:
        if pick >= 3:
            opened.append(len(output))
        output += SEGMENTS[pick]
    parser = generated.smollm3.Parser("", on_error=on_error)
    fed = 0
    for chunk in data.draw(chunkings(output), label="chunks"):
        parser.feed(chunk)
        fed += len(chunk)
        assert parser._received() == fed
    message = parser.finalize()[0]
    assert [error["offset"] for error in message.get("parse_errors", [])] == opened


@pytest.mark.parametrize(
    ("output", "content"),
    [
        ("Hi <tool_call>{bad</tool_call> Bye.", "Hi <tool_call>{bad</tool_call> Bye."),
        ('<think>x</think>Hi <tool_call>{"name": "f", "argu', 'Hi <tool_call>{"name": "f", "argu'),
        (CALL + "<tool_call>nope</tool_call>", "<tool_call>nope</tool_call>"),
    ],
)
def test_a_failed_call_goes_back_into_content_as_written(output: str, content: str) -> None:
    message = generated.smollm3.Parser.parse(output, prefix="", on_error="content")
    assert message["content"] == content
    (error,) = message["parse_errors"]
    assert error["field"] == "tool_calls" and error["raw"] in output
    assert output.index(error["raw"]) == error["offset"]
    assert all(isinstance(call, dict) for call in message.get("tool_calls", []))


def test_the_server_policy_reports_the_failure_as_an_event() -> None:
    parser = generated.smollm3.Parser("", on_error="content")
    events = parser.feed("A<tool_call>{x</tool_call>B")
    events += parser.finalize()[1]
    kinds = [event["type"] for event in events]
    error = events[kinds.index("region_error")]
    assert error["recovered_as"] == "content" and error["raw"] == "<tool_call>{x</tool_call>"
    text = "".join(
        e["text"] for e in events if e["type"] == "region_chunk" and e["field"] == "content"
    )
    assert text == "A<tool_call>{x</tool_call>B"


def test_only_a_content_region_that_the_call_closed_is_resumed() -> None:
    """A content region ended by its own close delimiter stays ended: the failed call's
    text starts a new region (joined as the template joins regions)."""
    parser = load_parser(
        {
            "start_anchor": "A:",
            "fields": {
                "t": {"open": "<t>", "close": "</t>", "content": "json"},
                "c": {"close": "<E>", "content": "text", "repeats": True, "join": "|"},
            },
        }
    )
    ended = parser("", on_error="content")
    events = ended.feed("Hi<E><t>{bad</t>more") + ended.finalize()[1]
    (error,) = [event for event in events if event["type"] == "region_error"]
    assert error["resumed"] is False
    assert parser.parse("Hi<E><t>{bad</t>more", prefix="", on_error="content")["c"] == (
        "Hi|<t>{bad</t>more"
    )
    resumed = parser.parse("Hi<t>{bad</t>more", prefix="", on_error="content")
    assert resumed["c"] == "Hi<t>{bad</t>more"


ADJACENT_LISTS = "[a.b(x=1)][c.d(y=2)] and more"


def _two_cuts(text: str) -> list[list[str]]:
    return [
        [text[:first], text[first:second], text[second:]]
        for first in range(len(text) + 1)
        for second in range(first, len(text) + 1)
    ]


@pytest.mark.parametrize("name", ["pythonic", "llama4_pythonic"])
@pytest.mark.parametrize("on_error", ["raise", "keep_raw", "content"])
def test_a_region_that_fails_where_it_would_open_again_loses_no_text(
    name: str, on_error: str
) -> None:
    """Two call lists with nothing between them: the second opens where the close
    `(?<=\\)\\])\\s*` matches at once (it looks behind at the first list's end), so its region
    is empty and fails to parse. Strict mode raises there. The lenient modes record the
    failure once and go on past it (Regions._step_past_failure), so the rest is content, not
    lost after the progress rule's stop; cut anywhere, the output gives the same."""
    parser_cls = importlib.import_module(f"generated.{name}").Parser
    if on_error == "raise":
        with pytest.raises(FieldParseError) as raised:
            parser_cls.parse(ADJACENT_LISTS, prefix="")
        assert raised.value.offset == len("[a.b(x=1)]")
        return
    whole = parser_cls.parse(ADJACENT_LISTS, prefix="", on_error=on_error)
    assert whole["content"] == "[c.d(y=2)] and more"
    assert whole["tool_calls"][0]["function"] == {"name": "a.b", "arguments": {"x": 1}}
    (error,) = whole["parse_errors"]
    assert error["offset"] == len("[a.b(x=1)]") and error["raw"] == ""
    for chunks in _two_cuts(ADJACENT_LISTS):
        parser = parser_cls("", on_error=on_error)
        for chunk in chunks:
            parser.feed(chunk)
        assert parser.finalize()[0] == whole, chunks
