"""Shared by the engine tests and bench/engines.py: the catalog entries with a vLLM / SGLang
counterpart, their outputs, an offline tokenizer for each, and how to compare results.

The outputs are the entries' fixture cases (tests/fixtures/NAME.json), with the end-of-turn
token the engine stops on cut off, as an engine's `output.text` has it. The tokenizer is a
byte-level BPE trained on those texts whose special tokens are the delimiters the texts and
the template use, so that the engines' parsers find the token ids they look up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import regex

ROOT = Path(__file__).resolve().parent.parent

# entry -> (vLLM tool parser, vLLM reasoning parser, SGLang detector, SGLang reasoning parser).
# From the engines' registries and the formats the entries describe; None: no counterpart.
COUNTERPARTS: dict[str, tuple[str | None, str | None, str | None, str | None]] = {
    "hermes": ("hermes", "qwen3", "hermes", "qwen3"),
    "qwen3": ("qwen3_coder", "qwen3", "qwen3_coder", "qwen3"),
    "qwen3_coder": ("qwen3_coder", None, "qwen3_coder", None),
    "deepseek_v3": ("deepseek_v3", None, "deepseekv3", None),
    "deepseek_r1": ("deepseek_v3", "deepseek_r1", "deepseekv3", "deepseek-r1"),
    "deepseek_v31": ("deepseek_v31", "deepseek_v3", "deepseekv31", "deepseek-v3"),
    "llama3_json": ("llama3_json", None, "llama3", None),
    "mistral": ("mistral", "mistral", "mistral", "mistral"),
    "glm45": ("glm45", "glm45", "glm45", "glm45"),
    "glm47": ("glm47", "glm45", "glm47", "glm45"),
    "kimi_k2": ("kimi_k2", "kimi_k2", "kimi_k2", "kimi_k2"),
    "pythonic": ("pythonic", None, "pythonic", None),
    "llama4_pythonic": ("llama4_pythonic", None, "pythonic", None),
    "minimax_m2": ("minimax_m2", "minimax_m2", "minimax-m2", "minimax"),
    "seed_oss": ("seed_oss", "seed_oss", None, None),
    "step3": ("step3", "step3", "step3", "step3"),
    "internlm": ("internlm", None, "interns1", None),
    "granite4": ("granite4", None, None, None),
    "olmo3": ("olmo3", "olmo3", None, None),
    "ernie": ("ernie45", "ernie45", None, None),
    "hunyuan_a13b": ("hunyuan_a13b", "hunyuan_a13b", "hunyuan", "hunyuan"),
    "lfm2": ("lfm2", None, "lfm2", None),
    "xlam": ("xlam", None, None, None),
    "jamba": ("jamba", None, None, None),
    "phi4_mini": ("phi4_mini_json", None, None, None),
    "gigachat3": ("gigachat3", None, "gigachat3", None),
    "longcat": ("longcat", None, None, None),
}

# Text the engine stops on (an end-of-turn token): not part of an engine's output text.
STOPS = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "</s>",
    "<|end▁of▁sentence|>",
    "<|endoftext|>",
    "<|user|>",
    "<|observation|>",
    "[e~[",
    "<|end_of_text|>",
    "<|return|>",
    "<|call|>",
    "<eos>",
)
SPECIAL = regex.compile(
    r"<\|[^|<>\s]{1,40}\|>|<｜[^｜]{1,40}｜>|\[[A-Z_/]{2,20}\]|</?[a-z_:]{2,20}>"
)


@dataclass
class Case:
    entry: str
    name: str
    prefix: str
    output: str


def cases(entry: str) -> list[Case]:
    data = json.loads((ROOT / "tests" / "fixtures" / f"{entry}.json").read_text("utf-8"))
    result = []
    for case in data["cases"]:
        output = case["output"]
        for stop in STOPS:
            if output.endswith(stop):
                output = output[: -len(stop)]
                break
        if output:
            result.append(Case(entry, case["name"], case.get("prefix") or "", output))
    return result


def _literals(template: Any) -> set[str]:
    text = json.dumps(template, ensure_ascii=False).replace("\\\\", "\\")
    text = regex.sub(r"\\(.)", r"\1", text)
    return set(SPECIAL.findall(text))


@cache
def tokenizer(entry: str) -> Any:
    """A transformers fast tokenizer for `entry`'s texts, built offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    texts = [text for case in cases(entry) for text in (case.prefix, case.output)]
    template = json.loads((ROOT / "templates_catalog" / f"{entry}.json").read_text("utf-8"))
    specials = set(_literals(template))
    for text in texts:
        specials.update(SPECIAL.findall(text))
    specials.update(STOPS)
    model = Tokenizer(models.BPE())
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    model.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=sorted(specials),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    model.train_from_iterator(texts * 3, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=model, clean_up_tokenization_spaces=False, eos_token="<|im_end|>"
    )


def tools_for(entry: str) -> list[dict[str, Any]]:
    """A tool for every function name the entry's fixtures call, arguments unconstrained."""
    data = json.loads((ROOT / "tests" / "fixtures" / f"{entry}.json").read_text("utf-8"))
    names: set[str] = set()
    for case in data["cases"]:
        for call in (case.get("expected") or {}).get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                names.add(function["name"])
    return [
        {
            "type": "function",
            "function": {"name": name, "parameters": {"type": "object", "properties": {}}},
        }
        for name in sorted(names)
    ]


def normal(reasoning: Any, content: Any, calls: list[tuple[str | None, str]]) -> dict[str, Any]:
    """A result in the form both sides are compared in: text stripped, arguments parsed."""
    parsed = []
    for name, arguments in calls:
        try:  # an empty string is no JSON either: a call whose arguments never came
            value = json.loads(arguments)
        except ValueError:
            value = {"<unparsable>": arguments}
        parsed.append((name, value))
    return {
        "reasoning": (reasoning or "").strip(),
        "content": (content or "").strip(),
        "tool_calls": parsed,
    }


def repeated_thinking(entry: str, output: str) -> bool:
    """A template whose thinking repeats (interleaved), and an output with two segments:
    the reasoning half ends at the first segment's close (a known limit, docs/serving.md)."""
    import importlib

    template = json.loads((ROOT / "templates_catalog" / f"{entry}.json").read_text("utf-8"))
    thinking = template["response_template"]["fields"].get("thinking") or {}
    if not thinking.get("repeats"):
        return False
    parser = importlib.import_module(f"generated.{entry}").Parser("", on_error="content")
    events = [*parser.feed(output), *parser.finalize()[1]]
    opened = [e for e in events if e["type"] == "region_open" and e["field"] == "thinking"]
    return len(opened) > 1


def known_limit(entry: str, prefix: str, output: str) -> Any:
    """The pytest mark of a case a known limit fails (a strict xfail), or None."""
    import pytest

    if repeated_thinking(entry, output):
        return pytest.mark.xfail(strict=True, reason="repeated thinking: docs/serving.md")
    return None


def known_limits(all_cases: list[Case]) -> list[Any]:
    """Cases as pytest params, those of a known limit marked (see known_limit)."""
    import pytest

    params = []
    for case in all_cases:
        mark = known_limit(case.entry, case.prefix, case.output)
        params.append(pytest.param(case, marks=mark) if mark is not None else case)
    return params


def generated_message(entry: str, prefix: str, output: str, tools: Any = None) -> dict[str, Any]:
    """What a server sends for `output`: the compiled parser's message under the server
    policy, less the text the prompt itself put in a region (a thinking or content region
    the prompt opened and wrote into is the prompt's, not the model's: for such a field, the
    text of the parser's chunks of the output). Whitespace collapsed (`squash`)."""
    import importlib

    parser = importlib.import_module(f"generated.{entry}").Parser(
        prefix, tools=tools, on_error="content"
    )
    prompt_wrote = {
        event["field"] for event in parser.initial_events if event["type"] == "region_chunk"
    }
    events = parser.feed(output)
    message, last = parser.finalize()
    texts = {"thinking": "", "content": ""}
    for event in [*events, *last]:
        if event["type"] == "region_chunk" and event["field"] in texts:
            texts[event["field"]] += event["text"]
    for name, key in (("thinking", "thinking"), ("content", "content")):
        value = message.get(key)
        if name not in prompt_wrote and isinstance(value, str):
            texts[name] = value  # the message's value (transforms, joins) when all generated
    calls = message.get("tool_calls") or []
    calls = [call for item in calls for call in (item if isinstance(item, list) else [item])]
    return {
        "reasoning": squash(texts["thinking"]) if isinstance(message.get("thinking"), str) else "",
        "content": squash(texts["content"]) if isinstance(message.get("content"), str) else "",
        "tool_calls": [
            (call["function"]["name"], call["function"].get("arguments", {}))
            for call in calls
            if isinstance(call, dict) and isinstance(call.get("function"), dict)
        ],
    }


def squash(text: str | None) -> str:
    return " ".join((text or "").split())
