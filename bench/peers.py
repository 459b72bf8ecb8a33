"""Our parsers vs vLLM's and SGLang's own, in each engine's serving layer (make bench-peers).

Same outputs for all; each side driven as its server drives it (tests/engine_drivers.py):
streamed in chunks of about 4 characters (whole tokens of an offline tokenizer, grouped
until the chunk's text has 4 characters or more, ids included), and one-shot, each timed
from the parser's construction (one per request, as the servers make them). "ours" is
the rtc-NAME plugin in that engine's own serving path, so the ratios compare the parsers,
not the engines. For each workload the answers are checked to agree (reasoning, content,
tool calls by name and parsed arguments); then per-chunk and one-shot times (the median
of alternating rounds: on a shared machine one round now and then takes ten times as long,
which a mean would report) and the ratio peer / ours (above 1: ours is faster). Where the
answers differ, the output says whether ours agrees with the other engine's own parser and
with the template's message (the compiled parser under the server policy), which tells
which side is the odd one.

    .venv-engines/bin/python bench/peers.py > bench/peers.txt
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "tests")]
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

from engine_cases import Case, generated_message, normal, squash, tokenizer  # noqa: E402
from engine_drivers import merge_vllm, vllm_parser_class, vllm_request  # noqa: E402

ROUNDS = 7
CHUNK = 4
QWEN_PROMPT = "<|im_start|>user\nHelp.<|im_end|>\n<|im_start|>assistant\n"


def _sentence(index: int) -> str:
    return f"Step {index}: the value is {index * 7 % 13}, so the total grows by {index % 5}. "


def _hermes_call(index: int) -> str:
    call = {"name": "get_weather", "arguments": {"city": f"City {index}", "days": index % 7}}
    return f"<tool_call>\n{json.dumps(call)}\n</tool_call>\n"


def _coder_call(index: int) -> str:
    return (
        "<tool_call>\n<function=write_file>\n"
        f"<parameter=path>\nsrc/module_{index}.py\n</parameter>\n"
        f"<parameter=content>\ndef f{index}(x):\n    return x * {index}\n</parameter>\n"
        "</function>\n</tool_call>\n"
    )


# name -> (catalog entry, vLLM tool, vLLM reasoning, SGLang tool, SGLang reasoning, output)
WORKLOADS: dict[str, tuple[str, str, str | None, str, str | None, str]] = {
    "long reasoning (20k chars)": (
        "hermes",
        "hermes",
        "qwen3",
        "hermes",
        "qwen3",
        "<think>\n" + "".join(_sentence(i) for i in range(260)) + "</think>\n\nThe total is 520.",
    ),
    "hermes tool call": (
        "hermes",
        "hermes",
        "qwen3",
        "hermes",
        "qwen3",
        "<think>\nOne call.\n</think>\n\nLet me check.\n" + _hermes_call(1),
    ),
    "hermes parallel calls (16)": (
        "hermes",
        "hermes",
        None,
        "hermes",
        None,
        "Checking all of them.\n" + "".join(_hermes_call(i) for i in range(16)),
    ),
    "qwen3_coder XML calls (8)": (
        "qwen3_coder",
        "qwen3_coder",
        None,
        "qwen3_coder",
        None,
        "Writing the files.\n" + "".join(_coder_call(i) for i in range(8)),
    ),
}


def chunks(entry: str, output: str) -> tuple[list[int], list[tuple[str, list[int]]]]:
    """Prompt ids, and (text, ids) chunks of whole tokens with at least CHUNK characters."""
    tok = tokenizer(entry)
    ids = tok.encode(output, add_special_tokens=False)
    steps: list[tuple[str, list[int]]] = []
    previous, start = "", 0
    for index in range(len(ids)):
        text = tok.decode(ids[: index + 1], skip_special_tokens=False)
        if text.endswith("\ufffd") and index < len(ids) - 1:
            continue
        if len(text) - len(previous) >= CHUNK or index == len(ids) - 1:
            steps.append((text[len(previous) :], ids[start : index + 1]))
            previous, start = text, index + 1
    return tok.encode(QWEN_PROMPT, add_special_tokens=False), steps


def vllm_sides(entry: str, tool: str, reasoning: str | None) -> dict[str, Any]:
    return {
        "ours": vllm_parser_class(f"rtc-{entry}", f"rtc-{entry}" if reasoning else None, entry),
        "vLLM": vllm_parser_class(tool, reasoning, entry),
    }


def run_vllm(
    cls: Any, case: Case, steps: Any, prompt: list[int]
) -> tuple[dict, dict, float, float]:
    tok = tokenizer(case.entry)
    request = vllm_request(case)
    began = time.perf_counter()
    parser = cls(tok, request.tools)
    request = parser.adjust_request(request)
    deltas = []
    for number, (text, ids) in enumerate(steps):
        delta = parser.parse_delta(text, ids, request, prompt, finished=number == len(steps) - 1)
        if delta is not None:
            deltas.append(delta)
    streamed = time.perf_counter() - began
    began = time.perf_counter()
    parser = cls(tok, request.tools)
    parser.set_prompt_token_ids(prompt)
    reasoning, content, calls = parser.parse(case.output, request, enable_auto_tools=True)
    once = time.perf_counter() - began
    result = normal(reasoning, content, [(call.name, call.arguments) for call in calls or ()])
    return merge_vllm(deltas), result, streamed, once


def run_sglang(
    tool: str, reasoning: str | None, case: Case, steps: Any
) -> tuple[dict, dict, float, float]:
    from engine_drivers import prompt_opens_thinking, sglang_tools
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    tools = sglang_tools(case)
    # SGLang's server knows this from the chat template; the driver reads it from the
    # catalog file, which is not the parsers' work, so it is not timed.
    force = True if prompt_opens_thinking(case) else None

    def sglang_reasoning(stream: bool) -> Any:
        return ReasoningParser(reasoning, stream_reasoning=stream, force_reasoning=force)

    began = time.perf_counter()
    thinker = sglang_reasoning(True) if reasoning else None
    caller = FunctionCallParser(tools, tool)
    thinking, content = "", ""
    calls: dict[int, list[Any]] = {}

    def tool_step(text: str, end: bool = False) -> None:
        nonlocal content
        normal_text, items = caller.parse_stream_end() if end else caller.parse_stream_chunk(text)
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
    streamed = time.perf_counter() - began
    merged = normal(thinking, content, [tuple(calls[index]) for index in sorted(calls)])

    began = time.perf_counter()
    text, once_thinking = case.output, None
    if reasoning is not None:
        once_thinking, text = sglang_reasoning(False).parse_non_stream(text)
    parser = FunctionCallParser(tools, tool)
    found: list[Any] = []
    if parser.has_tool_call(text):
        text, found = parser.parse_non_stream(text)
    once = time.perf_counter() - began
    result = normal(once_thinking, text, [(call.name, call.parameters) for call in found])
    return merged, result, streamed, once


def as_template(result: dict[str, Any]) -> dict[str, Any]:
    """A result in generated_message's form (whitespace collapsed)."""
    return {
        "reasoning": squash(result["reasoning"]),
        "content": squash(result["content"]),
        "tool_calls": result["tool_calls"],
    }


def main() -> None:
    logging.disable(logging.WARNING)
    import integrations.sglang
    import integrations.vllm  # noqa: F401

    print("# make bench-peers: our rtc-NAME plugins vs the engines' own parsers, same outputs,")
    print(
        f"# {CHUNK}-character chunks, median of {ROUNDS} alternating rounds, parser construction included;"
    )
    print("# ratio = peer time / our time (above 1: ours is faster)")
    for label, (entry, v_tool, v_reason, s_tool, s_reason, output) in WORKLOADS.items():
        case = Case(entry, label, QWEN_PROMPT, output)
        prompt, steps = chunks(entry, output)
        print(f"\n## {label}: {len(output)} chars, {len(steps)} chunks")
        sides = vllm_sides(entry, v_tool, v_reason)
        # side -> (streamed answer, one-shot answer, streamed times, one-shot times)
        measured: dict[str, tuple[dict, dict, list[float], list[float]]] = {}
        for _ in range(ROUNDS):  # alternate the sides, round by round
            results = [(name, run_vllm(cls, case, steps, prompt)) for name, cls in sides.items()]
            name = f"rtc-{entry}"
            for side, args in (
                ("ours-sglang", (name, name if s_reason else None)),
                ("SGLang", (s_tool, s_reason)),
            ):
                results.append((side, run_sglang(*args, case, steps)))
            for side, (streamed, once, stream_time, once_time) in results:
                kept = measured.setdefault(side, (streamed, once, [], []))
                kept[2].append(stream_time)
                kept[3].append(once_time)
        template = generated_message(entry, QWEN_PROMPT, output)
        for ours, peer in (("ours", "vLLM"), ("ours-sglang", "SGLang")):
            mine, theirs = measured[ours], measured[peer]
            agree = "agree" if mine[0] == theirs[0] and mine[1] == theirs[1] else "DIFFER"
            keys = [key for key in mine[1] if mine[1][key] != theirs[1][key]]
            keys += [f"stream:{key}" for key in mine[0] if mine[0][key] != theirs[0][key]]
            per_ours = statistics.median(mine[2]) / len(steps) * 1e6
            per_peer = statistics.median(theirs[2]) / len(steps) * 1e6
            once_ours = statistics.median(mine[3]) * 1e6
            once_peer = statistics.median(theirs[3]) * 1e6
            for key in keys:
                mode, field = key.split(":") if ":" in key else ("once", key)
                index = 0 if mode == "stream" else 1
                print(
                    f"  {key}: ours {mine[index][field]!r:.120} | {peer} {theirs[index][field]!r:.120}"
                )
            if keys:  # which side is the odd one: ours against the other engine and the template
                other = measured["SGLang" if peer == "vLLM" else "vLLM"]
                same_other = all(mine[i] == other[i] for i in (0, 1))
                same_template = all(as_template(mine[i]) == template for i in (0, 1))
                print(
                    f"  ours, streamed and one-shot, = {'SGLang' if peer == 'vLLM' else 'vLLM'}'s "
                    f"own parser: {'yes' if same_other else 'no'}; = the template's message "
                    f"(compiled parser, server policy): {'yes' if same_template else 'no'}"
                )
            print(
                f"{peer:7} answers {agree}{' ' + str(keys) if keys else ''}; per chunk: ours "
                f"{per_ours:.1f} us, {peer} {per_peer:.1f} us, ratio {per_peer / per_ours:.2f}; "
                f"one-shot: ours {once_ours:.0f} us, {peer} {once_peer:.0f} us, "
                f"ratio {once_peer / once_ours:.2f}"
            )


if __name__ == "__main__":
    main()
