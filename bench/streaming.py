"""`make bench-streaming`: time per 4-character chunk of every catalog entry's parser, fed
each workload of bench/oneshot.py (prose, reasoning, model-opened think, tool calls) in
the entry's own format, as plain prose and as prose dense in `<` (a `<` every ten
characters or so: code, HTML, math), at 80K and 1.3M characters (part of `make bench`).

Each row is our time per chunk over the floor's (bench/run.py's `Floor`: one method call,
one kept chunk, one event dict), the two timed alternately in the same run. Targets
(issue 11): at most 2x the floor on prose, at most 3x on `<`-dense text and on parallel tool
calls (the workload "parallel calls": the entry's tool-call case again and again, each with
a short piece of prose, bench/oneshot._repeated_calls), at both sizes. Results go to
bench/streaming.json.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from oneshot import outputs  # noqa: E402
from run import CHUNK, Floor  # noqa: E402

from compiler.catalog import entry_names  # noqa: E402

SIZES = (80_000, 1_300_000)
ROUNDS = {80_000: 7, 1_300_000: 3}
TARGET = {"prose": 2.0, "<-dense": 3.0}
PARALLEL_TARGET = 3.0


def stream_seconds(parser: Any, chunks: list[str]) -> float:
    feed = parser.feed
    gc.collect()
    start = time.perf_counter()
    for chunk in chunks:
        feed(chunk)
    return time.perf_counter() - start


def row(name: str, kind: str, workload: str, size: int, prefix: str, text: str) -> dict[str, Any]:
    parser = importlib.import_module(f"generated.{name}").Parser
    chunks = [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)]
    ours = floor = float("inf")
    for _ in range(ROUNDS[size]):  # alternate, so both see the same machine
        floor = min(floor, stream_seconds(Floor(), chunks))
        ours = min(ours, stream_seconds(parser(prefix), chunks))
    return {
        "entry": name,
        "text": kind,
        "workload": workload,
        "size": size,
        "chars": len(text),
        "chunks": len(chunks),
        "ours_us": ours / len(chunks) * 1e6,
        "floor_us": floor / len(chunks) * 1e6,
        "over_floor": ours / floor,
    }


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__)
    options.add_argument("--out", default=str(ROOT / "bench" / "streaming.json"))
    options.add_argument("--quick", action="store_true", help="80K outputs only")
    options.add_argument("entries", nargs="*", help="catalog entries (default: all)")
    args = options.parse_args()
    sizes = SIZES[:1] if args.quick else SIZES
    rows: list[dict[str, Any]] = []
    for name in args.entries or entry_names():
        for kind, dense in (("prose", False), ("<-dense", True)):
            for size in sizes:
                for workload, prefix, text in outputs(name, size, dense=dense, parallel=True):
                    rows.append(row(name, kind, workload, size, prefix, text))
                    item = rows[-1]
                    print(
                        f"{name:15} {kind:8} {workload:19} {size // 1000:5}K "
                        f"ours {item['ours_us']:6.3f} us/chunk = {item['over_floor']:5.2f}x floor",
                        flush=True,
                    )
    checks = []
    for item in rows:
        limit = PARALLEL_TARGET if item["workload"] == "parallel calls" else TARGET[item["text"]]
        label = (
            f"{item['entry']} {item['text']} {item['workload']} {item['size'] // 1000}K: "
            f"<= {limit:g}x the floor"
        )
        checks.append((label, item["over_floor"] <= limit, f"{item['over_floor']:.2f}x"))
    failed = [check for check in checks if not check[1]]
    for name, _ok, detail in failed:
        print(f"FAIL  {name}: {detail}")
    print(f"{len(checks) - len(failed)} of {len(checks)} targets met")
    results = {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "chunk_chars": CHUNK,
        "rows": rows,
        "targets": [{"target": name, "met": ok, "measured": detail} for name, ok, detail in checks],
    }
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
