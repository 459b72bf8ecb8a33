"""Errors that say where: template key paths, field and offset for parse failures,
bounded regex work, and the opt-in lenient mode."""

from __future__ import annotations

import pytest

import generated.smollm3
import runtime.errors
from compiler import load_parser
from runtime.errors import FieldParseError, MissingFieldError, RegexTimeout

CALL = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'


def test_parse_error_names_the_field_and_where_its_region_opened() -> None:
    text = "Hi. " + CALL + "<tool_call>{not json</tool_call>"
    with pytest.raises(FieldParseError) as caught:
        generated.smollm3.Parser.parse(text, prefix="")
    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.field, error.offset) == ("tool_calls", text.index("<tool_call>{not"))
    assert "field 'tool_calls' (region opened at offset" in str(error)
    assert "could not parse region as JSON" in str(error.__cause__)


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
