"""The runtime API an application uses, and the JIT."""

from __future__ import annotations

import copy
import json
import linecache
import traceback
from pathlib import Path

import pytest

import generated.qwen3
import generated.smollm3
from compiler import compile_source, load_parser
from compiler.catalog import load_entry


def test_one_shot_parse() -> None:
    message = generated.smollm3.Parser.parse(
        '<think>plan</think><tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>Done.<|im_end|>',
        prefix="<|im_start|>assistant\n",
    )
    assert message == {
        "role": "assistant",
        "thinking": "plan",
        "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}],
        "content": "Done.",
    }


def test_streaming_loop() -> None:
    parser = generated.qwen3.Parser(prefix="<|im_start|>assistant\n<think>\n")
    events = list(parser.initial_events)
    for chunk in [
        "Let me",
        " check.</think>\n<tool_",
        "call>\n<function=get_weather>\n<parameter=city>\nParis\n",
        "</parameter>\n</function>\n</tool_call>",
    ]:
        events += parser.feed(chunk)
    message, final = parser.finalize()
    events += final
    assert message == {
        "role": "assistant",
        "thinking": "Let me check.",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
            }
        ],
    }
    # The newline between </think> and <tool_call> is a (blank) content region of its own.
    assert [(e["type"], e["field"]) for e in events if e["type"] != "region_chunk"] == [
        ("region_open", "thinking"),
        ("region_close", "thinking"),
        ("region_open", "content"),
        ("region_close", "content"),
        ("region_open", "tool_calls"),
        ("region_close", "tool_calls"),
    ]
    thinking = "".join(
        e["text"] for e in events if e["type"] == "region_chunk" and e["field"] == "thinking"
    )
    assert thinking == "\nLet me check."


def test_prefix_is_required_and_empty_opts_out() -> None:
    with pytest.raises(ValueError, match="prefix is required"):
        generated.smollm3.Parser()
    with pytest.raises(ValueError, match="prefix is required"):
        generated.smollm3.Parser(prefix=None)
    assert generated.smollm3.Parser(prefix="").initial_events == []


def test_feed_and_finalize_raise_after_finalize() -> None:
    parser = generated.smollm3.Parser(prefix="")
    parser.feed("<think>a")
    feed_before = parser.feed  # a bound fast path, taken before finalize
    parser.finalize()
    with pytest.raises(RuntimeError):
        parser.feed("x")
    with pytest.raises(RuntimeError):
        feed_before("x")
    with pytest.raises(RuntimeError):
        parser.finalize()


def test_tools_coerce_arguments_by_schema() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}}},
            },
        }
    ]
    text = "<tool_call><function=f><parameter=n>7</parameter><parameter=ok>true</parameter><parameter=s>x</parameter></function></tool_call>"
    message = generated.qwen3.Parser.parse(text, prefix="", tools=tools)
    assert message["tool_calls"][0]["function"]["arguments"] == {"n": 7, "ok": True, "s": "x"}


def test_tools_given_as_functions() -> None:
    def f(n: int, ok: bool | None = None) -> str:
        return ""

    text = '<tool_call><function=f><parameter=n>7</parameter><parameter=ok>"1"</parameter></function></tool_call>'
    message = generated.qwen3.Parser.parse(text, prefix="", tools=[f])
    assert message["tool_calls"][0]["function"]["arguments"] == {"n": 7, "ok": True}


def test_module_exposes_its_template() -> None:
    assert generated.qwen3.TEMPLATE == load_entry("qwen3").data["response_template"]


def test_jit_caches_by_template_hash() -> None:
    template = copy.deepcopy(generated.smollm3.TEMPLATE)
    first = load_parser(template)
    assert load_parser(copy.deepcopy(template)) is first
    template["fields"]["thinking"]["close"] = "</thinking>"
    assert load_parser(template) is not first


def test_jit_source_is_in_linecache_for_tracebacks() -> None:
    parser = load_parser(
        {"start_anchor": "A:", "fields": {"n": {"open": "<n>", "close": "</n>", "content": "int"}}},
        name="counter",
    )
    with pytest.raises(ValueError) as caught:
        parser.parse("<n>not a number</n>", prefix="")
    rendered = "".join(traceback.format_exception(caught.value))
    assert "<response-template counter sha256:" in rendered
    assert "content = int(self._body().strip())" in rendered
    frames = traceback.extract_tb(caught.value.__cause__.__traceback__)
    generated = [
        frame for frame in frames if frame.filename.startswith("<response-template counter")
    ]
    assert generated and linecache.getlines(generated[-1].filename)
    assert generated[-1].line == "content = int(self._body().strip())"


def test_inputs_template_catalog_entry_and_tokenizer_config(tmp_path: Path) -> None:
    template = generated.smollm3.TEMPLATE
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"model_max_length": 8192, "response_template": template}))
    entry = load_entry("smollm3").data
    parsers = {
        load_parser(template),
        load_parser(entry),
        load_parser(config),
        load_parser(str(config)),
    }
    assert len(parsers) == 1
    assert compile_source(config, "smollm3").count(f"# Source: {config} (sha256:") == 1


def test_compile_source_returns_the_module_text() -> None:
    text = compile_source(generated.smollm3.TEMPLATE, "smollm3")
    assert text.startswith("# @generated by response-template-compiler")
    assert "class Parser(CompiledParser):" in text


def test_open_region_says_which_region_is_open_and_what_its_open_captured() -> None:
    parser = generated.qwen3.Parser("")
    assert parser.open_region() is None
    parser.feed("Hi <tool_call>\n<function=get_weather>\n<parameter=city>\nPa")
    region = parser.open_region()
    assert region is not None
    assert (region.field, region.captures) == ("tool_calls", {"name": "get_weather"})
    assert region.close is generated.qwen3.Parser.TOOL_CALLS_STATE.close
    parser.feed("ris\n</parameter>\n</function>\n</tool_call>\nDone")
    assert parser.open_region() is not None and parser.open_region().field == "content"
    parser.finalize()
    assert parser.open_region() is None
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
            },
        }
    ]
    assert generated.qwen3.Parser("", tools=tools).tool_parameters == {
        "f": {"n": {"type": "integer"}}
    }
