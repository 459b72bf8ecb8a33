"""Strings that match (or nearly match) the regex delimiters of catalog entries, and tools.

Literal delimiters are read from the templates themselves; regex ones need examples.
"""

from __future__ import annotations

from typing import Any

REGEX_SAMPLES: dict[str, list[str]] = {
    "qwen3": [
        "<tool_call>\n<function=get_weather>\n",
        "<tool_call><function=f>",
        "<tool_call> <function=",
        "<parameter=city>\nLondon\n</parameter>\n",
        "<parameter=n>3</parameter>",
        "</function>\n",
    ],
    "llama3_json": [
        # A call right after a `}` of content: its open matches behind a look-behind, on
        # a '{' (regex_profile._by_head).
        'Sure: {"a": 1} {"name": "f", "parameters": {"x": 2}}',
        'x};{"name": "g"}',
    ],
    "gpt_oss": [
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
        "<|channel|>commentary to=functions.f<|message|>",
        "<|channel|>commentary to=functions.",
        "<|start|>assistant",
        '{"location": "Paris"}',
    ],
    "ernie": ["<think>\n", "<think>", "\n</response>", "<response>\n"],
    "gemma4": [
        "<|tool_call>call:get_weather",
        "<|tool_call>call:",
        '<|"|>Paris<|"|>',
        "{city:",
        ",n:3}",
    ],
    "inkling": [
        "<|message_model|><|content_thinking|>",
        "<|message_model|>x<|content_text|>",
        "abc<|content_text|>",
        "<|content_invoke_tool_json|>",
        '{"name": "f", "args": {"a": 1}}',
        "<|message_model|>",
    ],
}

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "n": {"type": "integer"},
                    "x": {"type": ["number", "null"]},
                    "flag": {"type": "boolean"},
                    "a": {"anyOf": [{"type": "object"}, {"type": "array"}], "nullable": True},
                },
            },
        },
    },
    {
        "type": "function",
        "function": {"name": "f", "parameters": {"properties": {"a": {"type": "integer"}}}},
    },
]


def template_literals(template: dict[str, Any]) -> list[str]:
    """Every literal delimiter and anchor of a template."""
    found: list[str] = []

    def add(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list):
            found.extend(item for item in value if isinstance(item, str))

    for field in template.get("fields", {}).values():
        add(field.get("open"))
        add(field.get("close"))
    add(template.get("start_anchor"))
    return found
