"""`make bench-hostile`: time per chunk on hostile outputs must not grow with the stream.

Each case is fed in 4-character chunks at two or three sizes; a linear parser spends the
same time per chunk at every size (growth ~1). The reference interpreter is timed on the
smaller sizes only, where its growth already shows. Results go to bench/hostile.json.
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
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import workloads  # noqa: E402
from transformers.utils.chat_parsing import ResponseParser  # noqa: E402

CHUNK = 4
KB = 1024


def filler(size: int) -> str:
    """Prose without any '<', the first character of every delimiter below."""
    return workloads.reasoning(size).replace("<", "lt")


CASES: dict[str, tuple[str, Callable[[int], str]]] = {
    "open delimiter, no close (smollm3 <think>)": ("smollm3", lambda n: "<think>\n" + filler(n)),
    "open tool call, no close (qwen3)": (
        "qwen3",
        lambda n: "<tool_call>\n<function=f>\n<parameter=a>\n" + filler(n),
    ),
    "gpt_oss header repeated, no <|message|>": (
        "gpt_oss",
        lambda n: ("<|channel|>commentary to=functions.x " * (n // 37 + 1))[:n],
    ),
    "gpt_oss header then prose, no <|message|>": (
        "gpt_oss",
        lambda n: "<|channel|>commentary to=functions.get_weather " + filler(n),
    ),
    "inkling: no message header at all": ("inkling", filler),
    "text after the end of turn (smollm3 <|im_end|>)": (
        "smollm3",
        lambda n: "Done.<|im_end|>" + filler(n),
    ),
}


def per_chunk_us(make: Callable[[], Any], text: str) -> float:
    parser = make()
    gc.collect()
    start = time.perf_counter()
    for i in range(0, len(text), CHUNK):
        parser.feed(text[i : i + CHUNK])
    parser.finalize()
    return (time.perf_counter() - start) / (len(text) / CHUNK) * 1e6


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__)
    options.add_argument("--out", default=str(ROOT / "bench" / "hostile.json"))
    options.add_argument("--long-mb", type=int, default=10, help="size of the long-stream case")
    args = options.parse_args()
    results = []
    for label, (model, build) in CASES.items():
        module = importlib.import_module(f"generated.{model}")
        row: dict[str, Any] = {"case": label, "model": model, "ours_us": {}, "reference_us": {}}
        for size in (256 * KB, 1024 * KB):
            row["ours_us"][size] = per_chunk_us(lambda m=module: m.Parser(""), build(size))
        for size in (16 * KB, 64 * KB):
            template = module.TEMPLATE
            row["reference_us"][size] = per_chunk_us(
                lambda t=template: ResponseParser(t, prefix=""), build(size)
            )
        ours = row["ours_us"]
        ref = row["reference_us"]
        row["ours_growth_1M_over_256K"] = ours[1024 * KB] / ours[256 * KB]
        row["reference_growth_64K_over_16K"] = ref[64 * KB] / ref[16 * KB]
        results.append(row)
        print(
            f"{label:48} ours {ours[256 * KB]:6.2f} us/chunk at 256K, {ours[1024 * KB]:6.2f} at 1M"
            f" (x{row['ours_growth_1M_over_256K']:.2f}) | reference {ref[16 * KB]:7.2f} at 16K,"
            f" {ref[64 * KB]:7.2f} at 64K (x{row['reference_growth_64K_over_16K']:.2f})"
        )

    size = args.long_mb * KB * KB
    text = workloads.long_reasoning_then_tool_call("smollm3", size)
    parser = importlib.import_module("generated.smollm3").Parser("")
    gc.collect()
    start = time.perf_counter()
    for i in range(0, len(text), CHUNK):
        parser.feed(text[i : i + CHUNK])
    message = parser.finalize()[0]
    seconds = time.perf_counter() - start
    small = per_chunk_us(
        lambda: importlib.import_module("generated.smollm3").Parser(""), text[: 256 * KB]
    )
    long_row = {
        "case": f"{args.long_mb} MB reasoning stream (smollm3)",
        "chars": len(text),
        "seconds": seconds,
        "us_per_chunk": seconds / (len(text) / CHUNK) * 1e6,
        "us_per_chunk_first_256K": small,
        "tool_calls": len(message.get("tool_calls", [])),
    }
    print(
        f"{long_row['case']}: {seconds:.2f} s, {long_row['us_per_chunk']:.3f} us/chunk"
        f" (first 256K alone: {small:.3f} us/chunk)"
    )
    Path(args.out).write_text(
        json.dumps({"cases": results, "long_stream": long_row}, indent=2) + "\n"
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
