"""Entry metadata backed by behaviour: a `thinking` prompt puts the parser inside the reasoning
block, and the documented malformed-call policy has server-policy fixtures."""

from __future__ import annotations

import importlib

import pytest
from fixtures import load_fixtures

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


@pytest.mark.parametrize("name", entry_names())
def test_entries_document_and_test_malformed_calls(name: str) -> None:
    """Each entry says what becomes of a call that does not parse under the strict and the
    server policy, and an entry with tool calls shows the server policy in fixtures: a
    truncated call at the end, and a malformed call among several."""
    entry = load_entry(name).data
    assert set(entry.get("malformed", {})) == {"strict", "server"}, name
    if "tool_calls" not in entry["response_template"]["fields"]:
        return
    server = [case for case in load_fixtures(name)["cases"] if case.get("on_error") == "content"]
    assert any("truncated" in case.get("covers", []) for case in server), name
