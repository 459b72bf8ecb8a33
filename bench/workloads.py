"""Deterministic model outputs for the benchmark, in each catalog model's real format."""

from __future__ import annotations

import random

WORDS = (
    "the of and to in is that for it as was with be by on not this are or from at which but have an they you "
    "were there one all we their so if then check value first because result step answer consider number case "
    "function call weather city user wants maybe let me think again wait actually compute total"
).split()


def reasoning(size: int, seed: int = 0) -> str:
    """Prose of about `size` characters, with newlines and the odd `<` as in real reasoning."""
    rng = random.Random(seed)
    out: list[str] = []
    length = 0
    while length < size:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18)))
        if rng.random() < 0.02:
            sentence += " so x < y"
        piece = sentence.capitalize() + (".\n" if rng.random() < 0.2 else ". ")
        out.append(piece)
        length += len(piece)
    return "".join(out)[:size]


# Bits of code, HTML and math: text dense in `<`, the first character of most delimiters.
MARKUP = (
    "if (a < b && c <= d) {",
    '<div class="x">',
    "</div>",
    "x << 2",
    "for i in range(n): if i < k:",
    "<br/>",
    "a<b",
    "<= 3",
    "<span>text</span>",
    "$x < y$",
    "<t>",
    "</",
)


def markup(size: int, seed: int = 0) -> str:
    """Prose of about `size` characters with a `<` every ten characters or so."""
    rng = random.Random(seed)
    out: list[str] = []
    length = 0
    while length < size:
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        piece = f"{words} {rng.choice(MARKUP)}" + ("\n" if rng.random() < 0.2 else " ")
        out.append(piece)
        length += len(piece)
    return "".join(out)[:size]


def long_reasoning_then_tool_call(model: str, size: int, dense: bool = False) -> str:
    """Reasoning of `size` characters (prose, or `<`-dense markup), then one tool call."""
    body = markup(size) if dense else reasoning(size)
    if model == "smollm3":
        return (
            f"<think>\n{body}\n</think>\n"
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
        )
    if model == "qwen3":
        return (
            f"<think>\n{body}\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
            "</parameter>\n</function>\n</tool_call><|im_end|>"
        )
    if model == "gpt_oss":
        return (
            f"<|channel|>analysis<|message|>{body}<|end|><|start|>assistant<|channel|>commentary "
            'to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>'
        )
    if model == "cohere":
        return (
            f"<|START_THINKING|>{body}<|END_THINKING|><|START_ACTION|>"
            '[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}]<|END_ACTION|>'
        )
    raise ValueError(model)


def parallel_tool_calls(model: str, calls: int = 8) -> str:
    rng = random.Random(1)
    out = []
    for index in range(calls):
        out.append(reasoning(rng.randint(100, 400), seed=index) + "\n")
        if model == "smollm3":
            out.append(
                f'<tool_call>\n{{"name": "lookup_{index}", "arguments": {{"q": "item {index}", "n": {index}}}}}\n</tool_call>\n'
            )
        elif model == "qwen3":
            out.append(
                f"<tool_call>\n<function=lookup_{index}>\n<parameter=q>\nitem {index}\n</parameter>\n"
                f"<parameter=n>\n{index}\n</parameter>\n</function>\n</tool_call>\n"
            )
        else:
            raise ValueError(model)
    return "".join(out) + ("<|im_end|>" if model == "smollm3" else "")


def inkling_conversation(size: int) -> str:
    """Messages whose headers are regex opens that can start anywhere."""
    out = []
    length = 0
    index = 0
    while length < size:
        thought = reasoning(2000, seed=index)
        answer = reasoning(300, seed=index + 1000)
        piece = (
            f"<|message_model|><|content_thinking|>{thought}<|end_message|>"
            f"<|message_model|><|content_text|>{answer}<|end_message|>"
            f'<|message_model|><|content_invoke_tool_json|>{{"name": "f{index}", "args": {{"a": {index}}}}}<|end_message|>'
        )
        out.append(piece)
        length += len(piece)
        index += 1
    return "".join(out)
