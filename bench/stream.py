"""`make bench-stream`: time per chunk of the streaming adapters over one long region.

A coding agent's call can carry a whole file in one argument, and a reasoning model can
think for a million characters. Each case is one such region, grown to 256 KB and to 1 MB,
fed in 4-character chunks: the bare parser, the OpenAI stream (integrations.openai) with
calls sent whole at their close and with argument fragments, and the engines' reasoning
half (integrations.serving.ReasoningStream, which the vLLM and SGLang plugins run), also
in 40-character deltas (times per delta). A linear stream spends the same time per chunk at
both sizes (growth ~1; a stream that copies what it has so far on each chunk grows about
4x). Results go to bench/stream.json; a growth over MAX_GROWTH fails.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from integrations.openai import CompletionStream  # noqa: E402
from integrations.serving import ReasoningStream  # noqa: E402

CHUNK = 4
KB = 1024
SOURCE = 'def f(x):\n    """Say "é" x times."""\n    return "é" * x  # <b>\n'
THOUGHT = "Step 7: the value is 10, so x < y and the total grows by 2. "
MAX_GROWTH = 1.5


def code(size: int) -> str:
    return (SOURCE * (size // len(SOURCE) + 1))[:size]


def thought(size: int) -> str:
    return (THOUGHT * (size // len(THOUGHT) + 1))[:size]


CASES: dict[str, tuple[str, Callable[[int], str]]] = {
    "JSON call, one long string argument (hermes)": (
        "hermes",
        lambda n: "<tool_call>"
        + json.dumps({"name": "write", "arguments": {"path": "a.py", "content": code(n)}})
        + "</tool_call>",
    ),
    "XML call, one long parameter (qwen3_coder)": (
        "qwen3_coder",
        lambda n: "<tool_call>\n<function=write>\n<parameter=path>\na.py\n</parameter>\n"
        f"<parameter=content>\n{code(n)}\n</parameter>\n</function>\n</tool_call>",
    ),
    "Long reasoning, then the answer (hermes)": (
        "hermes",
        lambda n: f"<think>\n{thought(n)}\n</think>\n\nThe total is 520.<|im_end|>",
    ),
}


def per_chunk_us(
    feed: Callable[[str], Any], finish: Callable[[], Any], text: str, chunk: int = CHUNK
) -> float:
    gc.collect()
    start = time.perf_counter()
    for i in range(0, len(text), chunk):
        feed(text[i : i + chunk])
    finish()
    return (time.perf_counter() - start) / (len(text) / chunk) * 1e6


def timed(model: str, mode: str, text: str) -> float:
    parser_class = importlib.import_module(f"generated.{model}").Parser
    if mode == "parser":
        parser = parser_class("", on_error="content")
        return per_chunk_us(parser.feed, parser.finalize, text)
    if mode.startswith("reasoning"):  # "reasoning 40": deltas of 40 characters
        reasoning = ReasoningStream(parser_class)
        chunk = int(mode.split()[1]) if " " in mode else CHUNK
        return per_chunk_us(reasoning.feed, reasoning.finish, text, chunk)
    stream = CompletionStream(parser_class, "", tool_args=mode)
    return per_chunk_us(stream.feed, stream.finish, text)


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__)
    options.add_argument("--out", default=str(ROOT / "bench" / "stream.json"))
    args = options.parse_args()
    results = []
    failed = []
    for label, (model, build) in CASES.items():
        row: dict[str, Any] = {"case": label, "model": model}
        for mode in ("parser", "whole", "fragments", "reasoning", "reasoning 40"):
            # Each size the best of three runs: one slow moment of a shared machine reads as growth.
            small, large = (
                min(timed(model, mode, build(size)) for _ in range(3))
                for size in (256 * KB, 1024 * KB)
            )
            row[mode] = {"us_per_chunk_256K": small, "us_per_chunk_1M": large}
            row[mode]["growth"] = large / small
            print(
                f"{label:46} {mode:12} {small:6.2f} us/chunk at 256K, {large:6.2f} at 1M"
                f" (x{large / small:.2f})"
            )
            if large / small > MAX_GROWTH:
                failed.append(f"{label} {mode}: x{large / small:.2f}")
        results.append(row)
    for item in failed:
        print(f"FAIL  not linear: {item}")
    Path(args.out).write_text(json.dumps({"cases": results}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
