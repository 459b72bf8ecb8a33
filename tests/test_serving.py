"""integrations.serving: the two halves the engine plugins are built on, without an engine.

The reasoning half (the thinking, then the raw text after it) followed by the tool half
(that text, parsed with the template less its thinking field) must give what the compiled
parser alone gives for the whole output under the server policy, for every catalog entry's
fixtures and any chunking; and importing the package imports no engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_cases import generated_message, known_limit, squash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from integrations.serving import (
    Delta,
    ReasoningStream,
    ResponseStream,
    catalog_names,
    parser_for,
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


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_any_chunking_gives_the_same(data: st.DataObject) -> None:
    entry, _, prefix, output = data.draw(st.sampled_from(CASES), label="case")
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(output) - 1))), label="cuts"))
    assert two_halves(entry, prefix, output, cuts) == two_halves(entry, prefix, output, [])


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
