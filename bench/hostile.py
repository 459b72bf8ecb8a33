r"""`make bench-hostile`: time per chunk on hostile outputs must not grow with the stream.

Each case is fed in 4-character chunks at two or three sizes; a linear parser spends the
same time per chunk at every size (growth ~1). The reference interpreter is timed on the
smaller sizes only, where its growth already shows. Then the shapes that used to be
super-linear (held matches ending in a class repeat, long literal delimiters, regexes with
\p{..} or POSIX classes, unbounded look-behind) are fed whole streams of 1, 2, 4 and 8 MB:
linear means x2 per doubling (target: within 30%), each size timed as the best of two runs.
Last, every catalog entry streams one of its own tool calls with a string argument grown from
2K to 8K characters: a call is held until it closes, and a parser that searches the held call
again for every chunk costs 4x more per chunk at 4x the size (target: at most 2x).
Results go to bench/hostile.json.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import itertools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

import workloads  # noqa: E402
from fixtures import load_fixtures  # noqa: E402
from transformers.utils.chat_parsing import ResponseParser  # noqa: E402

from compiler.catalog import entry_names  # noqa: E402

CHUNK = 4
ROUNDS = 2  # runs per size of the linearity cases
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


LONG_LITERAL = "".join(chr(0x41 + (i * 7) % 26) for i in range(2000))
PROSE_LINE = "some prose words, 12 < 13 here\n"


def _jit(template: dict[str, Any]) -> Any:
    from compiler import load_parser

    return load_parser(template)


# label -> (parser class factory, text of n characters)
LINEAR: dict[str, tuple[Callable[[], Any], Callable[[int], str]]] = {
    "whitespace run after <tool_call> (qwen3 open)": (
        lambda: importlib.import_module("generated.qwen3").Parser,
        lambda n: "<tool_call>" + " " * n,
    ),
    "whitespace run after </tool_call> (smollm3 close)": (
        lambda: importlib.import_module("generated.smollm3").Parser,
        lambda n: '<tool_call>{"name": "f", "arguments": {}}</tool_call>' + " \n" * (n // 2),
    ),
    "name run after call: (gemma4 open)": (
        lambda: importlib.import_module("generated.gemma4").Parser,
        lambda n: "<|tool_call>call:" + "a" * n,
    ),
    "whitespace run after <think> (ernie open)": (
        lambda: importlib.import_module("generated.ernie").Parser,
        lambda n: "<think>" + " " * n,
    ),
    "2000-character literal delimiters, near misses": (
        lambda: _jit(
            {
                "start_anchor": "A:",
                "fields": {"x": {"open": "<" + LONG_LITERAL, "close": "</" + LONG_LITERAL}},
            }
        ),
        lambda n: (("<" + LONG_LITERAL[:1000] + " filler ") * (n // 1008 + 1))[:n],
    ),
    "delimiter with \\p{L}": (
        lambda: _jit(
            {"start_anchor": "A:", "fields": {"x": {"open_pattern": r"<x>\p{L}", "close": "</x>"}}}
        ),
        lambda n: (PROSE_LINE * (n // len(PROSE_LINE) + 1))[:n],
    ),
    "delimiter with a POSIX class": (
        lambda: _jit(
            {
                "start_anchor": "A:",
                "fields": {"x": {"open_pattern": r"<x>[[:alpha:]]+:", "close": "</x>"}},
            }
        ),
        lambda n: (PROSE_LINE * (n // len(PROSE_LINE) + 1))[:n],
    ),
    "unbounded look-behind (?<=\\n\\s*)": (
        lambda: _jit(
            {
                "start_anchor": "A:",
                "fields": {"x": {"open_pattern": r"(?<=\n\s*)<x>", "close": "</x>"}},
            }
        ),
        lambda n: (PROSE_LINE * (n // len(PROSE_LINE) + 1))[:n],
    ),
}


def stream_seconds(parser_cls: Any, text: str) -> float:
    parser = parser_cls("")
    gc.collect()
    start = time.perf_counter()
    for i in range(0, len(text), CHUNK):
        parser.feed(text[i : i + CHUNK])
    try:
        parser.finalize()
    except ValueError:
        pass  # an unclosed structured region: only the time matters here
    return time.perf_counter() - start


def growth_rows(
    cases: dict[str, tuple[Callable[[], Any], Callable[[int], str]]], sizes: list[int]
) -> list[dict[str, Any]]:
    rows = []
    for label, (make, build) in cases.items():
        parser_cls = make()
        # The best of ROUNDS runs per size: one slow moment of a shared machine in a single
        # run reads as growth (0.13 / 0.30 / 0.41 / 0.68 s once for a linear case).
        seconds = [
            min(stream_seconds(parser_cls, build(size)) for _ in range(ROUNDS)) for size in sizes
        ]
        ratios = [b / a for a, b in itertools.pairwise(seconds)]
        row = {
            "case": label,
            "chars": sizes,
            "seconds": seconds,
            "ratio_per_doubling": ratios,
            "linear": all(1.4 <= ratio <= 2.6 for ratio in ratios),
        }
        rows.append(row)
        print(
            f"{label:52} "
            + " ".join(f"{s:7.2f}s" for s in seconds)
            + "  x"
            + " x".join(f"{r:.2f}" for r in ratios)
            + ("" if row["linear"] else "  NOT LINEAR")
        )
    return rows


def literal_compile_rows() -> list[dict[str, Any]]:
    """Build cost of a template whose delimiters are one long literal: linear in L."""
    from compiler import compile_source

    rows = []
    for length in (1000, 2000, 4000, 8000):
        literal = "".join(chr(0x41 + (i * 7) % 26) for i in range(length))
        template = {"start_anchor": "A:", "fields": {"x": {"open": "<" + literal}}}
        start = time.perf_counter()
        source = compile_source(template, "long_literal")
        seconds = time.perf_counter() - start
        rows.append({"literal_chars": length, "seconds": seconds, "source_chars": len(source)})
        print(
            f"compile, literal of {length:5} chars: {seconds:.2f} s, {len(source)} chars of source"
        )
    return rows


# Sizes of the grown argument in the long-call rows, and the most per-chunk growth between them.
CALL_SIZES = (2 * KB, 8 * KB)
CALL_GROWTH = 2.0


def call_with_argument(name: str) -> tuple[str, str, str] | None:
    """(prefix, output, argument) of a fixture case of entry `name` whose tool call has a
    string argument written once in the output (None if no case has one)."""
    for case in load_fixtures(name)["cases"]:
        if "error" in case or "on_error" in case:
            continue
        for call in case["expected"].get("tool_calls") or []:
            arguments = call.get("function", {}).get("arguments")
            if not isinstance(arguments, dict):
                continue
            for value in arguments.values():
                if isinstance(value, str) and len(value) >= 3 and case["output"].count(value) == 1:
                    return case["prefix"], case["output"], value
    return None


def long_call_rows() -> list[dict[str, Any]]:
    """Per entry, a tool call whose string argument is grown to each of CALL_SIZES (words of
    plain text), streamed in 4-character chunks: time per chunk at each size."""
    rows = []
    for name in entry_names():
        found = call_with_argument(name)
        if found is None:
            continue
        prefix, output, argument = found
        parser_cls = importlib.import_module(f"generated.{name}").Parser
        us = []
        for size in CALL_SIZES:
            grown = ("abc def " * (size // 8 + 1))[: size - 1] + "x"
            text = output.replace(argument, grown)
            message = parser_cls.parse(text, prefix=prefix)
            if grown not in json.dumps(message.get("tool_calls"), ensure_ascii=False):
                raise AssertionError(f"{name}: the grown argument is not in the parsed call")
            start = functools.partial(parser_cls, prefix)
            us.append(min(per_chunk_us(start, text) for _ in range(ROUNDS)))
        growth = us[-1] / us[0]
        rows.append(
            {"entry": name, "chars": list(CALL_SIZES), "us_per_chunk": us, "growth": growth}
        )
        print(
            f"{name:16} a call with {CALL_SIZES[0] // KB}K / {CALL_SIZES[-1] // KB}K of argument: "
            + " / ".join(f"{u:7.2f}" for u in us)
            + f" us/chunk (x{growth:.2f})"
            + ("" if growth <= CALL_GROWTH else "  NOT LINEAR")
        )
    return rows


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
    options.add_argument(
        "--sizes-mb", default="1,2,4,8", help="stream sizes of the linearity cases, in MB"
    )
    args = options.parse_args()
    sizes = [int(float(mb) * KB * KB) for mb in args.sizes_mb.split(",")]
    print(f"linearity: whole streams of {args.sizes_mb} MB in {CHUNK}-character chunks")
    linear = growth_rows(LINEAR, sizes)
    compiles = literal_compile_rows()
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
    calls = long_call_rows()
    Path(args.out).write_text(
        json.dumps(
            {
                "cases": results,
                "long_stream": long_row,
                "linearity": linear,
                "long_literal_compile": compiles,
                "long_calls": calls,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
