"""`make bench-ab BASE=REV`: streaming time per chunk of this checkout against revision REV,
both in one process (optional, not in `make bench`).

Separate processes on a shared machine differ by up to 30% from one run to the next (its
speed changes from second to second), more than most changes to a scan step do. Here REV's
`runtime` and `generated` are loaded beside this checkout's, as other packages
(`runtime_base`, `generated_base`, their imports rewritten), and an entry's two parsers are
fed the same stream in 4-character chunks, BLOCK chunks at a time in turn, each side's time
summed: both see the same machine. They must give the same events on every chunk.

Each stream prints the ratio this checkout / REV of each pass and their median. With REV
the checkout's own commit and no change, that reads the harness's own bias and noise: 0.90
to 1.02 over the 66 parallel-calls streams, quartiles 0.956, 0.967 and 0.980 (2 cores, 3
passes), so a change is told apart from those where it moves the whole distribution.
Workloads are bench/oneshot.py's (`outputs`): parallel calls by default, at 20K characters.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import io
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from oneshot import outputs  # noqa: E402

from compiler.catalog import entry_names  # noqa: E402

CHUNK = 4
BLOCK = 250  # chunks fed to one side before the other takes its turn
PACKAGES = ("runtime", "generated")
# An import of one of PACKAGES, in REV's sources: rewritten to the `_base` package.
IMPORT = re.compile(r"\b(from|import) (runtime|generated)\b")


def load_base(rev: str, into: Path) -> None:
    """Write REV's `runtime` and `generated` under `into` as `runtime_base` and
    `generated_base`, importing each other."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, *PACKAGES],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    for package in PACKAGES:
        (into / package).rename(into / f"{package}_base")
        for path in (into / f"{package}_base").rglob("*.py"):
            source = path.read_text(encoding="utf-8")
            path.write_text(IMPORT.sub(r"\1 \2_base", source), encoding="utf-8")
    sys.path.insert(0, str(into))


def compare(base: Any, ours: Any, prefix: str, text: str, passes: int) -> list[float]:
    """Time per chunk ours / base, one ratio a pass, after checking the two parsers give the
    same events and message (SystemExit where they do not)."""
    chunks = [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)]
    first, second = base(prefix), ours(prefix)
    for index, chunk in enumerate(chunks):
        if first.feed(chunk) != second.feed(chunk):
            raise SystemExit(f"the two parsers' events differ at chunk {index}: {chunk!r}")
    if first.finalize() != second.finalize():
        raise SystemExit("the two parsers' messages or final events differ")
    blocks = [chunks[i : i + BLOCK] for i in range(0, len(chunks), BLOCK)]
    ratios = []
    for _ in range(passes):
        feeds = [base(prefix).feed, ours(prefix).feed]
        seconds = [0.0, 0.0]
        gc.collect()
        gc.disable()
        try:
            for index, block in enumerate(blocks):
                for side in (index % 2, 1 - index % 2):  # each side first in turn
                    feed = feeds[side]
                    start = time.perf_counter()
                    for chunk in block:
                        feed(chunk)
                    seconds[side] += time.perf_counter() - start
        finally:
            gc.enable()
        ratios.append(seconds[1] / seconds[0])
    return ratios


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__)
    options.add_argument("--base", default="HEAD", help="the revision to compare with")
    options.add_argument(
        "--workload",
        default="parallel calls",
        help="a workload of bench/oneshot.py (prose, reasoning, tool calls, parallel calls...)",
    )
    options.add_argument("--size", type=int, default=20_000, help="characters of each output")
    options.add_argument("--passes", type=int, default=3)
    options.add_argument("entries", nargs="*", help="catalog entries (default: all)")
    args = options.parse_args()
    medians = []
    with tempfile.TemporaryDirectory() as into:
        load_base(args.base, Path(into))
        for name in args.entries or entry_names():
            base = importlib.import_module(f"generated_base.{name}").Parser
            ours = importlib.import_module(f"generated.{name}").Parser
            for dense in (False, True):
                found = {
                    workload: (prefix, text)
                    for workload, prefix, text in outputs(
                        name, args.size, dense, parallel=args.workload == "parallel calls"
                    )
                }
                if args.workload not in found:
                    continue
                ratios = compare(base, ours, *found[args.workload], args.passes)
                median = statistics.median(ratios)
                medians.append(median)
                print(
                    f"{name:16} {'<-dense' if dense else 'prose':8} ours/base {median:.3f}"
                    f"  ({' '.join(f'{ratio:.3f}' for ratio in ratios)})",
                    flush=True,
                )
    if medians:
        quartiles = statistics.quantiles(medians, n=4) if len(medians) > 1 else medians * 3
        print(
            f"{len(medians)} streams against {args.base}: ours/base min {min(medians):.3f},"
            f" quartiles {' '.join(f'{q:.3f}' for q in quartiles)}, max {max(medians):.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
