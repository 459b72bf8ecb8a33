"""Generation prompts: a `thinking` prompt puts the parser inside the reasoning block."""

from __future__ import annotations

import importlib

import pytest

from compiler.catalog import entry_names, load_entry

# Entries whose models can have the opening reasoning tag written before the output starts.
REASONING_MODES = ["granite", "hunyuan_a13b", "kimi_k2", "minimax_m2", "seed_oss"]
THINKING = [name for name in entry_names() if "thinking" in load_entry(name).generation_prompt]


@pytest.mark.parametrize("name", REASONING_MODES)
def test_reasoning_models_have_a_thinking_prompt(name: str) -> None:
    assert "thinking" in load_entry(name).generation_prompt


@pytest.mark.parametrize("name", THINKING)
def test_output_after_a_thinking_prompt_is_reasoning(name: str) -> None:
    """Untagged text right after the `thinking` prompt is reasoning, whether or not it ends
    (after any reasoning the prompt itself wrote, such as Seed-OSS's budget reflection). For the
    entries whose models write the opening tag themselves, the same text after the `default`
    prompt is not reasoning (ERNIE, by contrast, reads untagged output as reasoning anyway)."""
    parser = importlib.import_module(f"generated.{name}").Parser
    prompts = load_entry(name).generation_prompt
    output = "Step one: 北京 is 2 + 2"
    message = parser.parse(output, prefix=prompts["thinking"])
    assert message.get("thinking", "").endswith(output), message
    assert "content" not in message and "tool_calls" not in message
    if name in REASONING_MODES and prompts["default"] != prompts["thinking"]:
        assert output not in parser.parse(output, prefix=prompts["default"]).get("thinking", "")
