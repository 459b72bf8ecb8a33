"""Every example of the response-template spec (transformers' response-parsing docs), through
compiled parsers.

Each asserts the result the spec documents and, as everywhere, the reference's trace.
"""

from __future__ import annotations

from typing import Any

import pytest
from differential import check
from transformers.utils.chat_parsing.response_templates import load_response_template

from compiler import load_parser
from compiler.errors import TemplateError
from compiler.spec import build_template

SMOLLM: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>", "content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close": "<|im_end|>", "content": "text"},
    },
}
GREET = {"type": "function", "function": {"name": "greet_user", "arguments": {"greeting": "Hi!"}}}


def parse(template: dict[str, Any], text: str, prefix: str = "") -> dict[str, Any]:
    parser = load_parser(template)
    check(template, parser, prefix, [text])
    check(template, parser, prefix, list(text))
    return parser.parse(text, prefix=prefix)


def test_writing_a_response_template_smollm() -> None:
    text = '<think>\nI should greet the user\n</think>\n<tool_call>{"name": "greet_user", "arguments": {"greeting": "Hi!"}}</tool_call>'
    assert parse(SMOLLM, text) == {
        "role": "assistant",
        "thinking": "I should greet the user",
        "tool_calls": [GREET],
    }


def test_typical_event_stream() -> None:
    parser = load_parser(SMOLLM)("")
    events = []
    for chunk in [
        "<think>I should ",
        "greet the user</think>",
        '<tool_call>{"name": "greet_user", ',
        '"arguments": {"greeting": "Hi!"}}',
        "</tool_call>",
    ]:
        events += parser.feed(chunk)
    message, final = parser.finalize()
    assert events + final == [
        {"type": "region_open", "field": "thinking"},
        {"type": "region_chunk", "field": "thinking", "text": "I should ", "dirty": False},
        {"type": "region_chunk", "field": "thinking", "text": "greet the user", "dirty": False},
        {"type": "region_close", "field": "thinking", "value": "I should greet the user"},
        {"type": "region_open", "field": "tool_calls"},
        {
            "type": "region_chunk",
            "field": "tool_calls",
            "text": '{"name": "greet_user", ',
            "dirty": True,
        },
        {
            "type": "region_chunk",
            "field": "tool_calls",
            "text": '"arguments": {"greeting": "Hi!"}}',
            "dirty": True,
        },
        {"type": "region_close", "field": "tool_calls", "value": GREET},
    ]
    assert message["tool_calls"] == [GREET]


def test_multi_turn_prefix_keeps_only_the_last_assistant_turn() -> None:
    prefix = (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
        "<|im_start|>user\nAgain?<|im_end|>\n<|im_start|>assistant\n"
    )
    parser = load_parser(SMOLLM)(prefix)
    assert parser.initial_events == []
    assert parse(SMOLLM, "Sure.<|im_end|>", prefix) == {"role": "assistant", "content": "Sure."}


def test_prefilled_thinking_block_lands_in_initial_events() -> None:
    parser = load_parser(SMOLLM)("<|im_start|>assistant\n<think>")
    assert parser.initial_events == [{"type": "region_open", "field": "thinking"}]
    assert parse(SMOLLM, "hmm</think>ok", "<|im_start|>assistant\n<think>") == {
        "role": "assistant",
        "thinking": "hmm",
        "content": "ok",
    }


def test_basic_types_int() -> None:
    template = {
        "start_anchor": "A:",
        "fields": {"count": {"open": "<n>", "close": "</n>", "content": "int"}},
    }
    assert parse(template, "<n> 42 </n>") == {"count": 42}


def test_json_unquoted_keys() -> None:
    template = {
        "start_anchor": "A:",
        "fields": {
            "args": {
                "open": "<args>",
                "close": "</args>",
                "content": "json",
                "content_args": {"unquoted_keys": True},
            }
        },
    }
    assert parse(template, '<args>{city: "London"}</args>') == {"args": {"city": "London"}}


QWEN_TOOL_CALLS = {
    "open_pattern": r"<tool_call>\s*<function=(?P<name>\w+)>",
    "close": "</tool_call>",
    "repeats": True,
    "content": "xml-inline",
    "content_args": {
        "tag_pattern": r"<parameter=(?P<key>\w+)>\s*(?P<value>.*?)\s*</parameter>",
        "value_parser": {"name": "json", "args": {"allow_non_json": True}},
    },
    "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
}


def test_xml_inline_qwen() -> None:
    template = {"start_anchor": "A:", "fields": {"tool_calls": QWEN_TOOL_CALLS}}
    text = "<tool_call><function=get_weather><parameter=city>London</parameter><parameter=units>celsius</parameter></function></tool_call>"
    assert parse(template, text) == {
        "tool_calls": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "arguments": {"city": "London", "units": "celsius"},
                },
            }
        ]
    }


def test_kv_lines_example_as_written_is_rejected() -> None:
    """The spec's kv-lines example uses empty delimiters, which the loader refuses."""
    template = {
        "start_anchor": "A:",
        "fields": {"metadata": {"open": "", "close": "", "content": "kv-lines"}},
    }
    with pytest.raises(ValueError):
        load_response_template(template)
    with pytest.raises(TemplateError, match=r"fields\.metadata\.open: literals cannot be empty"):
        build_template(template)


@pytest.mark.parametrize(
    "value_parser, expected",
    [(None, {"name": "alice", "age": "30"}), ({"name": "int"}, None)],
)
def test_kv_lines(value_parser: Any, expected: Any) -> None:
    args = {} if value_parser is None else {"value_parser": value_parser}
    template = {
        "start_anchor": "A:",
        "fields": {
            "metadata": {
                "open": "<m>",
                "close": "</m>",
                "content": "kv-lines",
                "content_args": args,
            }
        },
    }
    if expected is None:  # "alice" is not an int: the value parser fails at close
        parser = load_parser(template)
        check(template, parser, "", ["<m>name: alice\nage: 30</m>"])
        with pytest.raises(ValueError):
            parser.parse("<m>name: alice\nage: 30</m>", prefix="")
        assert parse(template, "<m>age: 30</m>") == {"metadata": {"age": 30}}
    else:
        assert parse(template, "<m>name: alice\nage: 30</m>") == {"metadata": expected}


def test_transform_gpt_oss_name_from_the_header() -> None:
    template = {
        "start_anchor": "<|start|>assistant",
        "fields": {
            "tool_calls": {
                "open_pattern": r"<\|channel\|>commentary to=functions\.(?P<name>\w+).*?<\|message\|>",
                "close": "<|call|>",
                "repeats": True,
                "content": "json",
                "transform": {
                    "type": "function",
                    "function": {"name": "{name}", "arguments": "{content}"},
                },
            }
        },
    }
    text = '<|channel|>commentary to=functions.get_current_weather <|constrain|>json<|message|>{"location": "San Francisco, CA"}<|call|>'
    assert parse(template, text)["tool_calls"] == [
        {
            "type": "function",
            "function": {
                "name": "get_current_weather",
                "arguments": {"location": "San Francisco, CA"},
            },
        }
    ]


def test_transform_each_cohere() -> None:
    template = {
        "start_anchor": "A:",
        "fields": {
            "tool_calls": {
                "open": "<|START_ACTION|>",
                "close": "<|END_ACTION|>",
                "content": "json",
                "transform_each": True,
                "transform": {
                    "type": "function",
                    "function": {"name": "{tool_name}", "arguments": "{parameters}"},
                },
            }
        },
    }
    text = (
        '<|START_ACTION|>[{"tool_name": "greet_user", "parameters": {"greeting": "Hi!"}},'
        ' {"tool_name": "search", "parameters": {"query": "weather tomorrow"}}]<|END_ACTION|>'
    )
    assert parse(template, text)["tool_calls"] == [
        GREET,
        {
            "type": "function",
            "function": {"name": "search", "arguments": {"query": "weather tomorrow"}},
        },
    ]


def test_repeats_collects_parallel_tool_calls() -> None:
    text = '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {}}</tool_call>'
    calls = parse(SMOLLM, text)["tool_calls"]
    assert [call["function"]["name"] for call in calls] == ["a", "b"]


def test_optional_false_raises_when_missing() -> None:
    template = {
        "start_anchor": "A:",
        "fields": {"answer": {"open": "<a>", "close": "</a>", "optional": False}},
    }
    parser = load_parser(template)
    check(template, parser, "", ["no answer here"])
    with pytest.raises(ValueError, match=r"answer"):
        parser.parse("no answer here", prefix="")


def test_prefix_is_required() -> None:
    parser = load_parser(SMOLLM)
    with pytest.raises(ValueError, match="prefix"):
        parser(None)
    with pytest.raises(ValueError, match="prefix"):
        parser.parse("x", prefix=None)
