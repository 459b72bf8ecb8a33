"""The vLLM plugin against the real vllm package (make test-engines, in .venv-engines).

Skipped where vllm is not importable (the main .venv does not install it). The parsers are
driven as vLLM's serving layer drives them (tests/engine_drivers.py); the outputs are the
catalog fixtures, tokenized by an offline tokenizer with each format's special tokens.
bench/engines.py lists every disagreement with vLLM's own parsers, classified.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("vllm", reason="vllm is not installed here: run `make test-engines`")

from engine_cases import (
    COUNTERPARTS,
    Case,
    cases,
    generated_message,
    known_limits,
    normal,
    squash,
    tools_for,
)
from engine_drivers import (
    merge_vllm,
    token_steps,
    vllm_once,
    vllm_parser_class,
    vllm_request,
    vllm_stream,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import examples

import integrations.vllm
from integrations.openai import template_of
from integrations.serving import catalog_names, parser_for, without_thinking

CASES = [case for entry in COUNTERPARTS for case in cases(entry)]
# Every catalog entry: our pair through vLLM's serving layer, whatever the peers support.
ALL_CASES = [case for entry in catalog_names() for case in cases(entry)]


def without_cut_calls(result: dict) -> dict:
    """A streamed result less the calls whose arguments do not parse: a call that failed after
    its first fragments went out, which a client keeps as sent (the one-shot path sends each
    call whole, so it has none; its raw text is content in both)."""
    calls = [
        call
        for call in result["tool_calls"]
        if not (isinstance(call[1], dict) and "<unparsable>" in call[1])  # (or JSON not an object)
    ]
    return {**result, "tool_calls": calls}


def ours(entry: str) -> object:
    return vllm_parser_class(f"rtc-{entry}", f"rtc-{entry}", entry)


def test_every_catalog_entry_resolves_by_name_after_importing_the_plugin() -> None:
    from vllm.parser.parser_manager import ParserManager
    from vllm.reasoning import ReasoningParser, ReasoningParserManager
    from vllm.tool_parsers import ToolParser, ToolParserManager

    ToolParserManager.import_tool_parser("integrations.vllm")
    names = catalog_names()
    assert "qwen3_coder" in names
    for entry in names:
        tool = ToolParserManager.get_tool_parser(f"rtc-{entry}")
        reasoning = ReasoningParserManager.get_reasoning_parser(f"rtc-{entry}")
        assert issubclass(tool, ToolParser) and issubclass(reasoning, ReasoningParser)
        assert tool.source == entry == reasoning.source
    composed = ParserManager.get_parser(
        tool_parser_name="rtc-qwen3_coder",
        reasoning_parser_name="rtc-qwen3_coder",
        enable_auto_tools=True,
    )
    assert composed is not None and composed.tool_parser_cls.source == "qwen3_coder"


def test_register_takes_any_template() -> None:
    from vllm.tool_parsers import ToolParserManager

    template = {
        "fields": {
            "thinking": {"open": "<r>", "close": "</r>"},
            "tool_calls": {"open": "<call>", "close": "</call>", "content": "json"},
            "content": {},
        }
    }
    integrations.vllm.register(template, "rtc-test-inline")
    assert ToolParserManager.get_tool_parser("rtc-test-inline").source is template


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda case: f"{case.entry}/{case.name}")
def test_streamed_deltas_merge_to_the_one_shot_result(case: Case) -> None:
    cls = ours(case.entry)
    merged, deltas = vllm_stream(cls, case)
    assert without_cut_calls(merged) == vllm_once(cls, case)
    ids: dict[int, str] = {}
    for delta in deltas:
        for call in delta.tool_calls:
            if call.id is not None:  # the first delta of a call: id and name, once
                assert call.index not in ids and call.function.name
                ids[call.index] = call.id
            else:
                assert call.index in ids  # later deltas: fragments of a call already named
    assert sorted(ids) == list(range(len(ids)))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_any_grouping_of_the_tokens_streams_the_same(data: st.DataObject) -> None:
    """vLLM hands the parser as many tokens per step as the engine produced (speculative
    decoding, slow clients): any grouping merges to the same result."""
    case = data.draw(st.sampled_from(CASES), label="case")
    prompt, steps = token_steps(case)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(steps) - 1))), label="cuts"))
    groups = [steps[a:b] for a, b in zip([0, *cuts], [*cuts, len(steps)], strict=True)]
    groups = [group for group in groups if group]
    cls = ours(case.entry)
    request = vllm_request(case)
    parser = cls(tokenizer_of(case), request.tools)
    request = parser.adjust_request(request)
    deltas = []
    for number, group in enumerate(groups):
        text = "".join(piece for piece, _ in group)
        ids = [token for _, piece_ids in group for token in piece_ids]
        last = number == len(groups) - 1
        delta = parser.parse_delta(text, ids, request, prompt, finished=last)
        if delta is not None:
            deltas.append(delta)
    assert without_cut_calls(merge_vllm(deltas)) == vllm_once(cls, case)


def tokenizer_of(case: Case) -> object:
    from engine_cases import tokenizer

    return tokenizer(case.entry)


@pytest.mark.parametrize(
    "case", known_limits(ALL_CASES), ids=lambda case: f"{case.entry}/{case.name}"
)
def test_one_shot_result_is_the_compiled_parsers_message(case: Case) -> None:
    """Through vLLM's two-phase split, the message is what the parser alone makes of the
    output under the server policy (less what the prompt itself wrote, see generated_message).
    Interleaved thinking is the known limit (docs/serving.md): the streamed and one-shot
    results still agree on it (above)."""
    tools = tools_for(case.entry) or None
    expected = generated_message(case.entry, case.prefix, case.output, tools)
    got = vllm_once(ours(case.entry), case)
    assert [(name, value) for name, value in got["tool_calls"]] == expected["tool_calls"]
    assert squash(got["reasoning"]) == expected["reasoning"]
    assert squash(got["content"]) == expected["content"]


# -- SGLang ---------------------------------------------------------------------------


def sglang_available() -> bool:
    try:
        import integrations.sglang  # noqa: F401
    except ImportError:
        return False
    return True


needs_sglang = pytest.mark.skipif(not sglang_available(), reason="sglang is not installed here")
SGLANG_CASES = [case for entry, names in COUNTERPARTS.items() if names[2] for case in cases(entry)]


@needs_sglang
def test_every_catalog_entry_is_an_sglang_detector_after_the_plugin_hook() -> None:
    from sglang.srt.function_call.base_format_detector import BaseFormatDetector
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import BaseReasoningFormatDetector, ReasoningParser

    import integrations.sglang as plugin

    plugin.register_all()  # what SGLang's load_plugins() calls through the entry point
    for entry in catalog_names():
        tool = FunctionCallParser.ToolCallParserEnum[f"rtc-{entry}"]
        reasoning = ReasoningParser.DetectorMap[f"rtc-{entry}"]
        assert issubclass(tool, BaseFormatDetector) and tool.source == entry
        assert issubclass(reasoning, BaseReasoningFormatDetector) and reasoning.source == entry
    parser = FunctionCallParser([], "rtc-qwen3_coder")
    assert parser.detector.has_tool_call("<tool_call>\n<function=f>")
    assert not parser.detector.has_tool_call("no call here")


@needs_sglang
@pytest.mark.parametrize("case", SGLANG_CASES, ids=lambda case: f"{case.entry}/{case.name}")
def test_sglang_stream_and_one_shot_agree_and_match_vllm_plugin(case: Case) -> None:
    from engine_drivers import sglang_once, sglang_stream

    name = f"rtc-{case.entry}"
    once = sglang_once(name, name, case)
    assert without_cut_calls(sglang_stream(name, name, case)) == once
    if not case.prefix.rstrip().endswith(("<think>", "[THINK]")):  # both see the prompt
        assert once == vllm_once(ours(case.entry), case)


def test_the_plugin_file_path_works_too() -> None:
    """vLLM imports a plugin file under its base name, `vllm`: the file puts vLLM back."""
    import subprocess
    import sys
    from pathlib import Path

    path = Path(integrations.vllm.__file__)
    script = f"""
from vllm.tool_parsers import ToolParserManager
ToolParserManager.import_tool_parser({str(path)!r})
import sys, vllm
from vllm.parser.parser_manager import ParserManager
assert vllm.__file__.endswith("__init__.py"), vllm.__file__
assert sys.modules["vllm"] is vllm and vllm.tool_parsers.ToolParserManager is ToolParserManager
cls = ParserManager.get_parser(tool_parser_name="rtc-hermes", enable_auto_tools=True)
print(cls.tool_parser_cls.source)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "hermes"


def test_rtc_compiles_the_served_tokenizers_template() -> None:
    """`rtc` alone: the tokenizer's `response_template` (here hermes's, a catalog match)."""
    import copy

    from engine_cases import tokenizer

    case = next(case for case in cases("hermes") if "two parallel" in case.name)
    served = copy.deepcopy(tokenizer("hermes"))
    served.response_template = template_of(parser_for("hermes"))
    from vllm.parser.parser_manager import ParserManager

    def compose(tok: object) -> Any:
        return ParserManager.get_parser(
            tool_parser_name="rtc",
            reasoning_parser_name="rtc",
            enable_auto_tools=True,
            tokenizer=tok,
        )

    cls = compose(served)
    request = vllm_request(case)
    parser = cls(served, request.tools)
    parser.set_prompt_token_ids(served.encode(case.prefix, add_special_tokens=False))
    reasoning, content, calls = parser.parse(case.output, request, enable_auto_tools=True)
    got = normal(reasoning, content, [(call.name, call.arguments) for call in calls or ()])
    assert got == vllm_once(ours("hermes"), case)
    assert len(got["tool_calls"]) == 2
    with pytest.raises(TypeError, match="response_template"):  # at server start
        compose(tokenizer("hermes"))


def test_vllm_serve_argument_checks_accept_the_names() -> None:
    """What `vllm serve` runs on its arguments before starting (the start itself needs a GPU:
    here vLLM's argument parser stops at "Failed to infer device type")."""
    from argparse import Namespace
    from types import SimpleNamespace

    from vllm.entrypoints.common.cli_args import init_parser_plugin, validate_api_server_args

    def args(tool: str, reasoning: str) -> Namespace:
        return Namespace(
            tool_parser_plugin="integrations.vllm",
            reasoning_parser_plugin="integrations.vllm",
            enable_auto_tool_choice=True,
            tool_call_parser=tool,
            structured_outputs_config=SimpleNamespace(reasoning_parser=reasoning),
        )

    init_parser_plugin(args("rtc-qwen3_coder", "rtc-qwen3_coder"))
    validate_api_server_args(args("rtc-qwen3_coder", "rtc-qwen3_coder"))
    validate_api_server_args(args("rtc-gpt_oss", "rtc-deepseek_r1"))
    with pytest.raises(KeyError, match="rtc-no_such_entry"):
        validate_api_server_args(args("rtc-no_such_entry", "rtc-qwen3"))


@needs_sglang
def test_sglang_plugin_entry_point_registers_before_argument_parsing() -> None:
    """`sglang serve` runs load_plugins() (the sglang.srt.plugins entry points), then takes
    its --tool-call-parser / --reasoning-parser choices from the registries."""
    import subprocess
    import sys

    script = """
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang.srt.server_args import _reasoning_parser_choices, _tool_call_parser_choices
print("rtc-qwen3_coder" in _tool_call_parser_choices(), "rtc-kimi_k2" in _reasoning_parser_choices())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["True", "True"]


# -- what the plugins keep per class, and what stays per request -----------------------------

WEATHER_OUTPUT = (
    "<think>\nTwo calls.\n</think>\n\nChecking.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}\n'
    "</tool_call>\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "days": "5"}}\n'
    "</tool_call>\n"
)


def weather_tools(days_type: str) -> list[dict[str, Any]]:
    properties = {"city": {"type": "string"}, "days": {"type": days_type}}
    parameters = {"type": "object", "properties": properties}
    return [{"type": "function", "function": {"name": "get_weather", "parameters": parameters}}]


def weather_days(result: dict[str, Any]) -> list[Any]:
    return [arguments.get("days") for _, arguments in result["tool_calls"]]


def vllm_weather(cls: Any, days_type: str, chunk: int | None) -> Any:
    """A request with its own tools, one shot (chunk None) or streamed in `chunk`-character
    pieces: a generator, so that several requests can be stepped in turn."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    request = ChatCompletionRequest(
        model="m",
        messages=[{"role": "user", "content": "x"}],
        tools=weather_tools(days_type),
        tool_choice="auto",
        skip_special_tokens=False,
    )
    parser = cls(tokenizer_of(Case("hermes", "w", "", WEATHER_OUTPUT)), request.tools)
    request = parser.adjust_request(request)
    if chunk is None:
        parser.set_prompt_token_ids([])
        reasoning, content, calls = parser.parse(WEATHER_OUTPUT, request, enable_auto_tools=True)
        yield normal(reasoning, content, [(call.name, call.arguments) for call in calls or ()])
        return
    pieces = [WEATHER_OUTPUT[at : at + chunk] for at in range(0, len(WEATHER_OUTPUT), chunk)]
    deltas = []
    for number, piece in enumerate(pieces):
        delta = parser.parse_delta(piece, [], request, [], finished=number == len(pieces) - 1)
        if delta is not None:
            deltas.append(delta)
        yield None
    yield merge_vllm(deltas)


def step_all(runs: list[Any]) -> list[Any]:
    """Step interleaved requests in turn until each has its result."""
    results: list[Any] = [None] * len(runs)
    while any(result is None for result in results):
        for index, run in enumerate(runs):
            if results[index] is None:
                results[index] = next(run)
    return results


@pytest.mark.parametrize("chunk", [None, 1, 4, 7])
def test_vllm_requests_of_one_parser_class_keep_their_own_tools(chunk: int | None) -> None:
    """The parser classes and templates are resolved once per name; the tools are each
    request's: interleaved requests with different schemas cast `days` each their way."""
    cls = ours("hermes")
    typed, untyped, typed_again = step_all(
        [vllm_weather(cls, kind, chunk) for kind in ("integer", "string", "integer")]
    )
    assert weather_days(typed) == weather_days(typed_again) == [3, 5]
    assert weather_days(untyped) == ["3", "5"]
    assert typed["reasoning"] == untyped["reasoning"] == "Two calls."


def test_vllm_concurrent_requests_give_what_each_gives_alone() -> None:
    from concurrent.futures import ThreadPoolExecutor

    cls = ours("hermes")
    jobs = [(kind, chunk) for kind in ("integer", "string") for chunk in (None, 3, 5)] * 4
    alone = {job: step_all([vllm_weather(cls, *job)])[0] for job in set(jobs)}
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda job: step_all([vllm_weather(cls, *job)])[0], jobs))
    assert together == [alone[job] for job in jobs]


def sglang_weather(days_type: str, chunk: int | None) -> Any:
    """As vllm_weather, through SGLang's ReasoningParser and FunctionCallParser."""
    from sglang.srt.entrypoints.openai.protocol import Tool
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    tools = [Tool.model_validate(tool) for tool in weather_tools(days_type)]
    thinker = ReasoningParser("rtc-hermes", stream_reasoning=chunk is not None)
    caller = FunctionCallParser(tools, "rtc-hermes")
    if chunk is None:
        thinking, text = thinker.parse_non_stream(WEATHER_OUTPUT)
        found: list[Any] = []
        if caller.has_tool_call(text):
            text, found = caller.parse_non_stream(text)
        yield normal(thinking, text, [(call.name, call.parameters) for call in found])
        return
    thinking, content = "", ""
    calls: dict[int, list[Any]] = {}

    def tool_step(normal_text: str, items: list[Any]) -> None:
        nonlocal content
        content += normal_text
        for item in items:
            entry = calls.setdefault(item.tool_index, [None, ""])
            entry[0] = entry[0] or item.name
            entry[1] += item.parameters or ""

    for at in range(0, len(WEATHER_OUTPUT), chunk):
        reasoning_text, text = thinker.parse_stream_chunk(WEATHER_OUTPUT[at : at + chunk])
        thinking += reasoning_text or ""
        tool_step(*caller.parse_stream_chunk(text or ""))
        yield None
    reasoning_text, text = thinker.parse_stream_end()
    thinking += reasoning_text or ""
    tool_step(*caller.parse_stream_chunk(text or ""))
    tool_step(*caller.parse_stream_end())
    yield normal(thinking, content, [tuple(calls[index]) for index in sorted(calls)])


@needs_sglang
@pytest.mark.parametrize("chunk", [None, 1, 4, 7])
def test_sglang_requests_of_one_detector_class_keep_their_own_tools(chunk: int | None) -> None:
    typed, untyped, typed_again = step_all(
        [sglang_weather(kind, chunk) for kind in ("integer", "string", "integer")]
    )
    assert weather_days(typed) == weather_days(typed_again) == [3, 5]
    assert weather_days(untyped) == ["3", "5"]
    assert typed["reasoning"] == untyped["reasoning"] == "Two calls."


@needs_sglang
@pytest.mark.parametrize("case", CASES, ids=str)
def test_sglang_one_shot_questions_answer_as_a_fresh_detector_would(case: Case) -> None:
    """SGLang's one-shot path asks has_tool_call (twice) and then parses the same text;
    the detector keeps its parse without tools for the next question (RtcDetector._whole).
    Every answer, with the request's tools or none, is what a new detector gives."""
    from engine_drivers import sglang_tools
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    name = f"rtc-{case.entry}"
    tools = sglang_tools(case)
    text = case.output

    def answer(detector: Any, typed: bool) -> Any:
        result = detector.detect_and_parse(text, tools if typed else [])
        return result.normal_text, [(c.tool_index, c.name, c.parameters) for c in result.calls]

    def fresh() -> Any:
        return FunctionCallParser(tools, name).detector

    kept = fresh()
    asked = kept.has_tool_call(text)
    assert asked == fresh().has_tool_call(text) == kept.has_tool_call(text)
    assert answer(kept, True) == answer(fresh(), True)
    assert answer(kept, False) == answer(fresh(), False)
    assert answer(kept, True) == answer(fresh(), True)


@needs_sglang
def test_sglang_concurrent_requests_give_what_each_gives_alone() -> None:
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(kind, chunk) for kind in ("integer", "string") for chunk in (None, 3, 5)] * 4
    alone = {job: step_all([sglang_weather(*job)])[0] for job in set(jobs)}
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda job: step_all([sglang_weather(*job)])[0], jobs))
    assert together == [alone[job] for job in jobs]


@needs_sglang
def test_each_registered_name_keeps_its_own_template() -> None:
    """Detector set-up is kept per detector class, and `register` makes a class per name and
    source: two templates registered under two names, or one name registered again with
    another template, never share it."""
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    import integrations.sglang as plugin

    plugin.register("hermes", "rtc-test-a")
    plugin.register("qwen3_coder", "rtc-test-b")
    first = FunctionCallParser([], "rtc-test-a").detector
    second = FunctionCallParser([], "rtc-test-b").detector
    assert first.parser is without_thinking(parser_for("hermes"))
    assert second.parser is without_thinking(parser_for("qwen3_coder"))
    assert first.has_tool_call('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>')
    assert second.has_tool_call("<function=f>") and not first.has_tool_call("<function=f>")
    plugin.register("mistral", "rtc-test-a")  # the same name, another template
    again = FunctionCallParser([], "rtc-test-a").detector
    assert again.parser is without_thinking(parser_for("mistral"))
    assert FunctionCallParser([], "rtc-test-b").detector.parser is second.parser
    assert ReasoningParser("rtc-test-a").detector.parser is parser_for("mistral")
    assert ReasoningParser("rtc-test-b").detector.parser is parser_for("qwen3_coder")


def test_engine_tools_give_the_parser_what_their_model_dump_gives() -> None:
    """tool_dicts reads an engine tool's function name and parameters instead of dumping the
    model: the parser's tool schemas are the same, for every entry's tools, vLLM's and
    SGLang's tool classes."""
    from integrations.serving import tool_dicts
    from runtime.tools import tool_parameters

    kinds = [lambda case: vllm_request(case).tools or []]
    if sglang_available():
        from engine_drivers import sglang_tools

        kinds.append(sglang_tools)
    checked = 0
    for entry in COUNTERPARTS:
        case = Case(entry, "tools", "", "")
        for kind in kinds:
            tools = kind(case)
            dumped = [tool.model_dump(exclude_none=True) for tool in tools]
            assert tool_parameters(tool_dicts(tools) or []) == tool_parameters(dumped)
            checked += bool(tools)
    assert checked >= len(COUNTERPARTS)
