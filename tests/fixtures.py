"""Catalog fixtures: tests/fixtures/NAME.json, one file per catalog entry.

    {
      "samples": ["strings that match the entry's regex delimiters (for property tests)"],
      "cases": [
        {
          "name": "two parallel calls",
          "covers": ["several_tool_calls"],
          "prefix": "<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n",
          "generation_prompt": "thinking",              # optional, see below
          "output": "raw model output",
          "tools": [optional tool schemas],
          "on_error": "content",                       # optional; "raise" when absent
          "expected": {"role": "assistant", ...}      # or
          "error": "ValueError"                        # the exception a caller sees
        }
      ]
    }

`covers` tags the situations each entry must show (see COVERAGE).

`generation_prompt` names one of the entry's generation prompts: the case's prefix is then
the conversation before it, and `load_fixtures` appends the prompt (so a case written for a
"thinking" prompt fails when the entry has none, and follows the entry when it changes).

`on_error` is the parser's policy for a region that does not parse: absent (strict, the
default of `Parser.parse`), "content" (the server policy: the failed call's raw text joins
the content and the rest of the message survives) or "keep_raw". Under a recovering
policy the expected message lists what was recovered from in `parse_errors`, each record
`{"field", "offset", "error": "TYPE", "raw"}`: the error is named by its exception type
only, because its message is wording, not behaviour (see `comparable`). A case that
expects `parse_errors` must fail under the strict policy, or it would show no recovery.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

from compiler.catalog import load_entry

FIXTURES = Path(__file__).parent / "fixtures"

COVERAGE = {
    "several_tool_calls": "two or more tool calls in one output",
    "content_around_calls": "content before, between or after tool calls",
    "reasoning_unterminated": "reasoning without its end tag",
    "truncated": "output cut off in the middle of a region",
    "unicode_arguments": "non-ASCII text in tool-call arguments",
    "empty_arguments": "a tool call with no arguments",
}


def load_fixtures(name: str) -> dict[str, Any]:
    path = FIXTURES / f"{name}.json"
    if not path.exists():
        return {"samples": [], "cases": []}
    data = json.loads(path.read_text(encoding="utf-8"))
    for case in data["cases"]:
        if "generation_prompt" in case:
            prompts = load_entry(name).generation_prompt
            if case["generation_prompt"] not in prompts:
                raise KeyError(
                    f"{name}: case {case['name']!r} uses generation_prompt "
                    f"{case['generation_prompt']!r}, which the entry does not have"
                )
            case["prefix"] += prompts[case["generation_prompt"]]
    return data


def required_coverage(template: dict[str, Any]) -> set[str]:
    """The coverage tags that apply to a template: tool tags need tool_calls, and so on."""
    fields = template.get("fields", {})
    tags = set(COVERAGE)
    if "tool_calls" not in fields:
        tags -= {
            "several_tool_calls",
            "content_around_calls",
            "unicode_arguments",
            "empty_arguments",
        }
    if "thinking" not in fields:
        tags -= {"reasoning_unterminated"}
    return tags


ON_ERROR = ("raise", "content", "keep_raw")


def case_on_error(case: dict[str, Any]) -> str:
    """The case's policy for a region that does not parse ("raise" when it names none)."""
    on_error = case.get("on_error", "raise")
    if on_error not in ON_ERROR:
        raise ValueError(f"case {case.get('name')!r}: on_error must be one of {ON_ERROR}")
    return str(on_error)


def comparable(message: Any) -> Any:
    """The message with each parse_errors record's error reduced to its exception type."""
    if not isinstance(message, dict) or "parse_errors" not in message:
        return message
    records = [
        {**record, "error": record["error"]["type"]} if isinstance(record, dict) else record
        for record in message["parse_errors"]
    ]
    return {**message, "parse_errors": records}


def final_outcome(
    parser_cls: Any, prefix: str, chunks: list[str], tools: Any = None, on_error: str = "raise"
) -> tuple[str, Any]:
    """("message", the finalized message), or ("error", the exception class) when any step
    raised: what a caller sees after feeding `chunks`."""
    try:
        parser = parser_cls(prefix, tools=tools, on_error=on_error)
        for chunk in chunks:
            parser.feed(chunk)
        return "message", parser.finalize()[0]
    except Exception as error:  # the class is the observation
        return "error", type(error)


def fixture_chunkings(text: str, seed: str) -> list[list[str]]:
    """Every kind of chunking the differential tests use, chosen deterministically."""
    rng = random.Random(seed)
    chunkings = [[text], list(text)]
    for size in (2, 3, 4, 7):
        chunkings.append([text[i : i + size] for i in range(0, len(text), size)] or [""])
    for _ in range(6):
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(1, 12))))
        bounds = [0, *cuts, len(text)]
        chunks = [text[a:b] for a, b in itertools.pairwise(bounds)]
        for _ in range(rng.randint(0, 3)):
            chunks.insert(rng.randint(0, len(chunks)), "")
        chunkings.append(chunks)
    return chunkings
