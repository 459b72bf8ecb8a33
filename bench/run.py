"""`make bench`: compiled parsers vs the reference interpreter vs the floor, in one run.

The floor is the least any pure-Python streaming parser can do per chunk: one method
call that keeps the chunk and returns one region_chunk event. Every figure is reported
next to the floor and the reference measured in the same process, so the ratios hold on
any machine; absolute microseconds do not. Results go to bench/results.json.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import platform
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from transformers.utils.chat_parsing import ResponseParser, parse_response  # noqa: E402
from workloads import (
    inkling_conversation,
    long_reasoning_then_tool_call,
    parallel_tool_calls,
)  # noqa: E402

CHUNK = 4
SMALL, LARGE = 80_000, 1_300_000
LITERAL = {
    "smollm3",
    "cohere",
    "gpt_oss",
}  # gpt_oss: the long stream is its analysis (literal) part


class Floor:
    """One method call, one kept chunk, one event dict: the cost floor per chunk."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def feed(self, text: str) -> list[dict[str, Any]]:
        self.parts.append(text)
        return [{"type": "region_chunk", "field": "content", "text": text, "dirty": False}]


def chunked(text: str) -> list[str]:
    return [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)]


def per_chunk(make: Callable[[], Any], chunks: list[str], repeats: int) -> float:
    """Best time per chunk in microseconds over `repeats` full streams."""
    best = float("inf")
    for _ in range(repeats):
        parser = make()
        gc.collect()
        start = time.perf_counter()
        for chunk in chunks:
            parser.feed(chunk)
        best = min(best, time.perf_counter() - start)
    return best / len(chunks) * 1e6


def one_shot(run: Callable[[], Any], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def peak_memory(make: Callable[[], Any], text: str) -> int:
    """tracemalloc peak while streaming `text` (chunks cut on the fly, input not counted)."""
    gc.collect()
    tracemalloc.start()
    parser = make()
    for i in range(0, len(text), CHUNK):
        parser.feed(text[i : i + CHUNK])
    parser.finalize()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def stream_case(
    label: str, model: str, text: str, *, reference: bool, repeats: int
) -> dict[str, Any]:
    parser = importlib.import_module(f"generated.{model}").Parser
    template = parser_template(model)
    chunks = chunked(text)
    ours = per_chunk(lambda: parser(""), chunks, repeats)
    floor = per_chunk(Floor, chunks, repeats)
    row: dict[str, Any] = {"case": label, "model": model, "chars": len(text), "chunks": len(chunks)}
    row.update(ours_us=ours, floor_us=floor, ours_over_floor=ours / floor)
    if reference:
        ref = per_chunk(lambda: ResponseParser(template, prefix=""), chunks, 1)
        row.update(reference_us=ref, reference_over_ours=ref / ours)
    ours_ms = one_shot(lambda: parser.parse(text, prefix=""), repeats)
    ref_ms = one_shot(lambda: parse_response(text, template, prefix=""), max(1, repeats // 2))
    row.update(parse_ours_ms=ours_ms, parse_reference_ms=ref_ms, parse_speedup=ref_ms / ours_ms)
    return row


def parser_template(model: str) -> dict[str, Any]:
    return importlib.import_module(f"generated.{model}").TEMPLATE


def subprocess_seconds(code: str) -> float:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return float(result.stdout.strip())


IMPORT_COLD = (
    "import time; t = time.perf_counter(); import generated.qwen3; print(time.perf_counter() - t)"
)
IMPORT_WARM = "import regex, runtime, time; t = time.perf_counter(); import generated.qwen3; print(time.perf_counter() - t)"
JIT_COLD = (
    "import json, time; t0 = time.perf_counter(); from compiler import load_parser; "
    "template = json.load(open('templates_catalog/gpt_oss.json'))['response_template']; "
    "t = time.perf_counter(); load_parser(template); print(time.perf_counter() - t)"
)
JIT_COLD_WITH_IMPORT = (
    "import json, time; template = json.load(open('templates_catalog/gpt_oss.json'))['response_template']; "
    "t = time.perf_counter(); from compiler import load_parser; load_parser(template); print(time.perf_counter() - t)"
)


def startup() -> dict[str, float]:
    from compiler import load_parser

    template = parser_template("gpt_oss")
    load_parser(template)
    calls = 2000
    start = time.perf_counter()
    for _ in range(calls):
        load_parser(template)
    cached = (time.perf_counter() - start) / calls
    return {
        "import_qwen3_cold_ms": min(subprocess_seconds(IMPORT_COLD) for _ in range(5)) * 1e3,
        "import_qwen3_module_ms": min(subprocess_seconds(IMPORT_WARM) for _ in range(5)) * 1e3,
        "jit_cold_ms": min(subprocess_seconds(JIT_COLD) for _ in range(3)) * 1e3,
        "jit_cold_with_import_ms": min(subprocess_seconds(JIT_COLD_WITH_IMPORT) for _ in range(3))
        * 1e3,
        "jit_cached_ms": cached * 1e3,
    }


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__)
    options.add_argument(
        "--quick", action="store_true", help="80K streams only, no reference at 1.3M"
    )
    options.add_argument("--out", default=str(ROOT / "bench" / "results.json"))
    args = options.parse_args()

    rows = []
    sizes = [SMALL] if args.quick else [SMALL, LARGE]
    for model in ("smollm3", "qwen3", "gpt_oss", "cohere"):
        for size in sizes:
            text = long_reasoning_then_tool_call(model, size)
            rows.append(
                stream_case(
                    f"long reasoning + tool call {size // 1000}K",
                    model,
                    text,
                    reference=True,
                    repeats=5 if size == SMALL else 2,
                )
            )
            print_row(rows[-1])
    for model in ("smollm3", "qwen3"):
        rows.append(
            stream_case(
                "parallel tool calls", model, parallel_tool_calls(model), reference=True, repeats=20
            )
        )
        print_row(rows[-1])
    for size in sizes:
        rows.append(
            stream_case(
                f"inkling messages {size // 1000}K",
                "inkling",
                inkling_conversation(size),
                reference=True,
                repeats=3,
            )
        )
        print_row(rows[-1])

    memory = []
    if not args.quick:
        for model in ("smollm3", "qwen3", "gpt_oss"):
            text = long_reasoning_then_tool_call(model, LARGE)
            parser = importlib.import_module(f"generated.{model}").Parser
            peak = peak_memory(lambda parser=parser: parser(""), text)
            memory.append(
                {
                    "model": model,
                    "chars": len(text),
                    "peak_bytes": peak,
                    "peak_over_input": peak / len(text),
                }
            )
            print(
                f"memory {model:8} 1.3M stream: peak {peak / 1e6:.2f} MB = {peak / len(text):.2f}x the input"
            )

    start = startup()
    for key, value in start.items():
        print(f"{key:26} {value:8.3f} ms")

    checks = evaluate(rows, memory, start)
    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    results = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "processor": platform.machine(),
        },
        "chunk_chars": CHUNK,
        "streams": rows,
        "memory": memory,
        "startup": start,
        "targets": [{"target": name, "met": ok, "detail": detail} for name, ok, detail in checks],
    }
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"wrote {Path(args.out).relative_to(ROOT) if Path(args.out).is_relative_to(ROOT) else args.out}"
    )
    return 0 if all(ok for _, ok, _ in checks) else 1


def print_row(row: dict[str, Any]) -> None:
    ref = (
        f" ref {row['reference_us']:7.2f} us ({row['reference_over_ours']:6.1f}x ours)"
        if "reference_us" in row
        else ""
    )
    print(
        f"{row['model']:8} {row['case']:34} ours {row['ours_us']:6.3f} us/chunk = {row['ours_over_floor']:4.2f}x floor"
        f" ({row['floor_us']:.3f}){ref} | parse {row['parse_ours_ms']:8.2f} ms vs {row['parse_reference_ms']:8.2f} ms"
        f" ({row['parse_speedup']:5.1f}x)"
    )


def evaluate(
    rows: list[dict[str, Any]], memory: list[dict[str, Any]], start: dict[str, float]
) -> list[tuple[str, bool, str]]:
    checks = []
    for row in rows:
        limit = 2.0 if row["model"] in LITERAL and "reasoning" in row["case"] else 3.0
        checks.append(
            (
                f"{row['model']} {row['case']}: <= {limit:g}x floor",
                row["ours_over_floor"] <= limit,
                f"{row['ours_over_floor']:.2f}x",
            )
        )
        checks.append(
            (
                f"{row['model']} {row['case']}: parse >= 3x reference",
                row["parse_speedup"] >= 3,
                f"{row['parse_speedup']:.1f}x",
            )
        )
    by_case = {
        (row["model"], row["case"].rsplit(" ", 1)[0]): row
        for row in rows
        if row["chars"] > 1_000_000
    }
    for row in rows:
        big = by_case.get((row["model"], row["case"].rsplit(" ", 1)[0]))
        if big is not None and big is not row and row["chars"] < 1_000_000:
            growth = big["ours_us"] / row["ours_us"]
            checks.append(
                (
                    f"{row['model']} {row['case'].rsplit(' ', 1)[0]}: 1.3M/80K per chunk <= 1.25",
                    growth <= 1.25,
                    f"{growth:.2f}",
                )
            )
    for item in memory:
        checks.append(
            (
                f"{item['model']} peak memory < 3x input",
                item["peak_over_input"] < 3,
                f"{item['peak_over_input']:.2f}x",
            )
        )
    checks.append(
        (
            "import generated.qwen3 < 5 ms (module, runtime loaded)",
            start["import_qwen3_module_ms"] < 5,
            f"{start['import_qwen3_module_ms']:.2f} ms",
        )
    )
    checks.append(
        (
            "JIT load_parser cold < 100 ms",
            start["jit_cold_ms"] < 100,
            f"{start['jit_cold_ms']:.1f} ms",
        )
    )
    checks.append(
        (
            "JIT load_parser cached < 0.1 ms",
            start["jit_cached_ms"] < 0.1,
            f"{start['jit_cached_ms'] * 1e3:.1f} us",
        )
    )
    return checks


if __name__ == "__main__":
    sys.exit(main())
