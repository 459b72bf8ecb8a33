"""`make bench`: compiled parsers vs the reference interpreter vs the floor, in one run.

The floor is the least any pure-Python streaming parser can do per chunk: one method
call that keeps the chunk and returns one region_chunk event. Ours and the floor are
timed alternately, stream after stream, and each keeps its best run, so a noisy machine
slows both alike; the ratios are what to compare across machines, not microseconds.
One-shot parse() times, ours and the reference's, are each the best of rounds of repeated
calls (bench/timing.py). Results go to bench/results.json (or --out).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
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

import workloads  # noqa: E402
from timing import best_seconds  # noqa: E402
from transformers.utils.chat_parsing import ResponseParser, parse_response  # noqa: E402

CHUNK = 4
# Seconds a round of one-shot parse() calls lasts (bench/timing.py).
PARSE_BUDGET = 0.01
SMALL, LARGE = 80_000, 1_300_000
# Streams that run in literal-delimited states, held to 2x the floor (others to 3x). Our
# smollm3 entry closes tool calls and content on regexes that absorb surrounding
# whitespace; "ref:smollm3", the reference template compiled as is, is literal-only, as is
# "ref:cohere" (the catalog's cohere strips citations with an extension the reference lacks).
LITERAL = {"ref:smollm3", "ref:cohere"}
LITERAL_LONG_STREAMS = {"smollm3", "gpt_oss"}  # their long reasoning runs in a literal state


class Floor:
    """One method call, one kept chunk, one event dict: the cost floor per chunk."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def feed(self, text: str) -> list[dict[str, Any]]:
        self.parts.append(text)
        return [{"type": "region_chunk", "field": "content", "text": text, "dirty": False}]


def compiled(model: str) -> tuple[Any, dict[str, Any]]:
    """(Parser, template) of a catalog entry, or of a reference template (`ref:NAME`)."""
    if model.startswith("ref:"):
        from compiler import load_parser

        path = ROOT / "bench" / "reference_templates" / f"{model[4:]}.json"
        template = json.loads(path.read_text())
        return load_parser(template, name=model[4:]), template
    module = importlib.import_module(f"generated.{model}")
    return module.Parser, module.TEMPLATE


def stream_seconds(make: Callable[[], Any], chunks: list[str]) -> float:
    parser = make()
    gc.collect()
    start = time.perf_counter()
    for chunk in chunks:
        parser.feed(chunk)
    return time.perf_counter() - start


def stream_case(
    label: str, model: str, text: str, *, repeats: int, parse_repeats: int = 15
) -> dict[str, Any]:
    parser, template = compiled(model)
    chunks = [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)]
    ours = floor = float("inf")
    for _ in range(repeats):  # alternate, so both see the same machine
        floor = min(floor, stream_seconds(Floor, chunks))
        ours = min(ours, stream_seconds(lambda: parser(""), chunks))
    ref = stream_seconds(lambda: ResponseParser(template, prefix=""), chunks)
    ours_us, floor_us, ref_us = (seconds / len(chunks) * 1e6 for seconds in (ours, floor, ref))
    parse_ours = parse_ref = float("inf")
    for _ in range(parse_repeats):  # alternate here too, each in a round of calls
        parse_ours = min(
            parse_ours, best_seconds(lambda: parser.parse(text, prefix=""), PARSE_BUDGET, 1) * 1e3
        )
        parse_ref = min(
            parse_ref,
            best_seconds(lambda: parse_response(text, template, prefix=""), PARSE_BUDGET, 1) * 1e3,
        )
    return {
        "case": label,
        "model": model,
        "chars": len(text),
        "chunks": len(chunks),
        "ours_us": ours_us,
        "floor_us": floor_us,
        "reference_us": ref_us,
        "ours_over_floor": ours_us / floor_us,
        "reference_over_ours": ref_us / ours_us,
        "parse_ours_ms": parse_ours,
        "parse_reference_ms": parse_ref,
        "parse_speedup": parse_ref / parse_ours,
    }


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


def subprocess_seconds(code: str) -> float:
    """What `code` prints, run in a new interpreter that reads and writes bytecode caches,
    as an installed package has them (pip compiles a wheel's modules when it installs
    it), even where PYTHONDONTWRITEBYTECODE is set: compiling generated/qwen3.py from
    source took 2 ms of its 6 ms import. Callers take the best of several runs, the
    first of which may write the cache."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, env=env
    )
    return float(result.stdout.strip())


TIMED = "import time; t = time.perf_counter(); {body}; print(time.perf_counter() - t)"
IMPORT_COLD = TIMED.format(body="import generated.qwen3")
IMPORT_MODULE = "import regex, runtime; " + TIMED.format(body="import generated.qwen3")
LOAD_TEMPLATE = "import json; template = json.load(open('templates_catalog/gpt_oss.json'))['response_template']; "
JIT_COLD = (
    LOAD_TEMPLATE
    + "from compiler import load_parser; "
    + TIMED.format(body="load_parser(template)")
)
JIT_COLD_WITH_IMPORT = LOAD_TEMPLATE + TIMED.format(
    body="from compiler import load_parser; load_parser(template)"
)


def startup() -> dict[str, float]:
    from compiler import load_parser

    template = compiled("gpt_oss")[1]
    load_parser(template)
    calls = 2000
    start = time.perf_counter()
    for _ in range(calls):
        load_parser(template)
    cached = (time.perf_counter() - start) / calls
    return {
        "import_qwen3_cold_ms": min(subprocess_seconds(IMPORT_COLD) for _ in range(5)) * 1e3,
        "import_qwen3_module_ms": min(subprocess_seconds(IMPORT_MODULE) for _ in range(5)) * 1e3,
        "jit_cold_ms": min(subprocess_seconds(JIT_COLD) for _ in range(5)) * 1e3,
        "jit_cold_with_import_ms": min(subprocess_seconds(JIT_COLD_WITH_IMPORT) for _ in range(5))
        * 1e3,
        "jit_cached_ms": cached * 1e3,
    }


def print_row(row: dict[str, Any]) -> None:
    print(
        f"{row['model']:11} {row['case']:30} ours {row['ours_us']:6.3f} us/chunk = {row['ours_over_floor']:4.2f}x"
        f" floor ({row['floor_us']:.3f}) | reference {row['reference_us']:6.2f} us = {row['reference_over_ours']:5.1f}x"
        f" ours | parse {row['parse_ours_ms']:8.2f} ms vs {row['parse_reference_ms']:8.2f} ms"
        f" = {row['parse_speedup']:5.1f}x"
    )


def evaluate(
    rows: list[dict[str, Any]], memory: list[dict[str, Any]], start: dict[str, float]
) -> list[Any]:
    checks = []
    for row in rows:
        literal = row["model"] in LITERAL or (
            row["model"] in LITERAL_LONG_STREAMS and "reasoning" in row["case"]
        )
        limit = 2.0 if literal and "dense" not in row["case"] else 3.0
        name = f"{row['model']} {row['case']}"
        checks.append(
            (
                f"{name}: <= {limit:g}x floor",
                row["ours_over_floor"] <= limit,
                f"{row['ours_over_floor']:.2f}x",
            )
        )
        checks.append(
            (
                f"{name}: parse >= 3x reference",
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
        if big is not None and row["chars"] < 1_000_000:
            growth = big["ours_us"] / row["ours_us"]
            name = f"{row['model']} {row['case'].rsplit(' ', 1)[0]}: 1.3M/80K per chunk <= 1.25"
            checks.append((name, growth <= 1.25, f"{growth:.2f}"))
    for item in memory:
        ratio = item["peak_over_input"]
        checks.append((f"{item['model']} peak memory < 3x input", ratio < 3, f"{ratio:.2f}x"))
    module_ms = start["import_qwen3_module_ms"]
    checks.append(
        (
            "import generated.qwen3 < 5 ms (regex and runtime loaded)",
            module_ms < 5,
            f"{module_ms:.2f} ms",
        )
    )
    checks.append(
        (
            "JIT load_parser cold < 100 ms",
            start["jit_cold_ms"] < 100,
            f"{start['jit_cold_ms']:.1f} ms",
        )
    )
    cached_us = start["jit_cached_ms"] * 1e3
    checks.append(("JIT load_parser cached < 0.1 ms", cached_us < 100, f"{cached_us:.1f} us"))
    return checks


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__)
    options.add_argument("--quick", action="store_true", help="80K streams only")
    options.add_argument("--out", default=str(ROOT / "bench" / "results.json"))
    args = options.parse_args()

    rows = []
    sizes = [SMALL] if args.quick else [SMALL, LARGE]
    for model in ("smollm3", "ref:smollm3", "qwen3", "gpt_oss", "ref:cohere"):
        for size in sizes:
            text = workloads.long_reasoning_then_tool_call(model.removeprefix("ref:"), size)
            label = f"long reasoning + tool call {size // 1000}K"
            # Many rounds: on a shared machine only the quietest one measures the code. The
            # reference, ~100x slower, runs once.
            rows.append(stream_case(label, model, text, repeats=21 if size == SMALL else 7))
            print_row(rows[-1])
    for model in ("smollm3", "ref:smollm3", "qwen3", "gpt_oss", "ref:cohere"):
        for size in sizes:
            text = workloads.long_reasoning_then_tool_call(
                model.removeprefix("ref:"), size, dense=True
            )
            label = f"<-dense reasoning + tool call {size // 1000}K"
            rows.append(stream_case(label, model, text, repeats=21 if size == SMALL else 7))
            print_row(rows[-1])
    for model in ("smollm3", "ref:smollm3", "qwen3"):
        text = workloads.parallel_tool_calls(model.removeprefix("ref:"))
        rows.append(stream_case("parallel tool calls", model, text, repeats=120))
        print_row(rows[-1])
    for size in sizes:
        text = workloads.inkling_conversation(size)
        rows.append(
            stream_case(
                f"messages {size // 1000}K",
                "inkling",
                text,
                repeats=9 if size == SMALL else 5,
                parse_repeats=2,
            )
        )
        print_row(rows[-1])

    memory = []
    if not args.quick:
        for model in ("smollm3", "qwen3", "gpt_oss"):
            text = workloads.long_reasoning_then_tool_call(model, LARGE)
            parser = compiled(model)[0]
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
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "chunk_chars": CHUNK,
        "streams": rows,
        "memory": memory,
        "startup": start,
        "targets": [{"target": name, "met": ok, "measured": detail} for name, ok, detail in checks],
    }
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
