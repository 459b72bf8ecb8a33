"""Drive vLLM's and SGLang's parsers as their serving layers do (needs the engines venv).

vLLM: `ParserManager.get_parser` composes the named tool and reasoning parsers; one parser
per response; non-streaming: `set_prompt_token_ids` then `parse(output.text, ...)`;
streaming: `parse_delta(delta_text, delta_token_ids, request, prompt_token_ids,
finished=...)` once per generated token, the text being the incremental detokenization.
SGLang: `ReasoningParser(name).parse_non_stream` / `parse_stream_chunk`, then
`FunctionCallParser(tools, name)` on the text after the reasoning, as its chat serving does.
"""

from __future__ import annotations

import json
from typing import Any

from engine_cases import ROOT, Case, normal, tokenizer, tools_for


def token_steps(case: Case) -> tuple[list[int], list[tuple[str, list[int]]]]:
    """The prompt ids, and (delta_text, delta_ids) per generated token."""
    tok = tokenizer(case.entry)
    prompt = tok.encode(case.prefix, add_special_tokens=False) if case.prefix else []
    ids = tok.encode(case.output, add_special_tokens=False)
    steps, previous = [], ""
    for index in range(len(ids)):
        text = tok.decode(ids[: index + 1], skip_special_tokens=False)
        if text.endswith("\ufffd") and index < len(ids) - 1:
            text = previous  # an incomplete character: held back, as vLLM's detokenizer does
        steps.append((text[len(previous) :], ids[index : index + 1]))
        previous = text
    return prompt, steps


def vllm_request(case: Case) -> Any:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    tools = tools_for(case.entry) or None
    return ChatCompletionRequest(
        model="m",
        messages=[{"role": "user", "content": "x"}],
        tools=tools,
        tool_choice="auto" if tools else "none",
        skip_special_tokens=False,
    )


def vllm_parser_class(tool: str | None, reasoning: str | None, entry: str) -> Any:
    from vllm.parser.parser_manager import ParserManager

    return ParserManager.get_parser(
        tool_parser_name=tool,
        reasoning_parser_name=reasoning,
        enable_auto_tools=True,
        tokenizer=tokenizer(entry),
    )


def vllm_once(cls: Any, case: Case) -> dict[str, Any]:
    tok = tokenizer(case.entry)
    request = vllm_request(case)
    parser = cls(tok, request.tools)
    request = parser.adjust_request(request)
    prompt, _ = token_steps(case)
    parser.set_prompt_token_ids(prompt)
    reasoning, content, calls = parser.parse(case.output, request, enable_auto_tools=True)
    return normal(reasoning, content, [(call.name, call.arguments) for call in calls or ()])


def vllm_stream(cls: Any, case: Case) -> tuple[dict[str, Any], list[Any]]:
    """The merged result of a streamed response, and its DeltaMessages."""
    tok = tokenizer(case.entry)
    request = vllm_request(case)
    parser = cls(tok, request.tools)
    request = parser.adjust_request(request)
    prompt, steps = token_steps(case)
    deltas = []
    for number, (text, ids) in enumerate(steps):
        delta = parser.parse_delta(text, ids, request, prompt, finished=number == len(steps) - 1)
        if delta is not None:
            deltas.append(delta)
    return merge_vllm(deltas), deltas


def merge_vllm(deltas: list[Any]) -> dict[str, Any]:
    """Merge DeltaMessages the way an OpenAI client merges chunk deltas."""
    reasoning, content = "", ""
    calls: dict[int, list[Any]] = {}
    for delta in deltas:
        reasoning += delta.reasoning or ""
        content += delta.content or ""
        for call in delta.tool_calls or ():
            entry = calls.setdefault(call.index, [None, ""])
            if call.function is not None:
                entry[0] = entry[0] or call.function.name
                entry[1] += call.function.arguments or ""
    return normal(reasoning, content, [tuple(calls[index]) for index in sorted(calls)])


def sglang_tools(case: Case) -> list[Any]:
    from sglang.srt.entrypoints.openai.protocol import Tool

    return [Tool.model_validate(tool) for tool in tools_for(case.entry)]


def prompt_opens_thinking(case: Case) -> bool:
    """Whether the prompt ends in the thinking opener (SGLang's `force_reasoning`)."""
    template = json.loads((ROOT / "templates_catalog" / f"{case.entry}.json").read_text("utf-8"))
    opener = template["response_template"]["fields"].get("thinking", {}).get("open")
    openers = [opener] if isinstance(opener, str) else list(opener or ())
    return any(case.prefix.rstrip().endswith(text.rstrip()) for text in openers if text)


def sglang_reasoning(name: str, case: Case, stream: bool) -> Any:
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    force = True if prompt_opens_thinking(case) else None
    return ReasoningParser(name, stream_reasoning=stream, force_reasoning=force)


def sglang_once(tool: str | None, reasoning: str | None, case: Case) -> dict[str, Any]:
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    text, thinking = case.output, None
    if reasoning is not None:
        thinking, text = sglang_reasoning(reasoning, case, False).parse_non_stream(text)
    calls: list[Any] = []
    if tool is not None:
        parser = FunctionCallParser(sglang_tools(case), tool)
        if parser.has_tool_call(text):
            text, calls = parser.parse_non_stream(text)
    return normal(thinking, text, [(call.name, call.parameters) for call in calls])


def sglang_stream(tool: str | None, reasoning: str | None, case: Case) -> dict[str, Any]:
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    _, steps = token_steps(case)
    thinker = sglang_reasoning(reasoning, case, True) if reasoning else None
    caller = FunctionCallParser(sglang_tools(case), tool) if tool else None
    thinking, content = "", ""
    calls: dict[int, list[Any]] = {}

    def tool_step(text: str, end: bool = False) -> None:
        nonlocal content
        if caller is None:
            content += text
            return
        normal_text, items = (
            caller.parse_stream_chunk(text) if not end else caller.parse_stream_end()
        )
        content += normal_text
        for item in items:
            entry = calls.setdefault(item.tool_index, [None, ""])
            entry[0] = entry[0] or item.name
            entry[1] += item.parameters or ""

    for text, _ids in steps:
        if thinker is not None:
            reasoning_text, text = thinker.parse_stream_chunk(text)
            thinking += reasoning_text or ""
        tool_step(text or "")
    if thinker is not None:
        reasoning_text, text = thinker.parse_stream_end()
        thinking += reasoning_text or ""
        tool_step(text or "")
    tool_step("", end=True)
    return normal(thinking, content, [tuple(calls[index]) for index in sorted(calls)])
