"""`make bench-batch`: records per second for parse-jsonl, Ray Data and Dask on one corpus.

The corpus is 100,000 JSON lines (--records): the smollm3 fixture records cycled, each
with an id, and one line in 200 malformed, so the error path is in the mix. Each engine
parses the whole file with every core of this machine and its output is checked against
parse-jsonl's, line for line; the time is wall time from the call to the last result in
the driver's hands (engine start-up is reported apart: `ray.init`, the Dask cluster).
Results go to bench/batch.json (or --out). A shared, noisy machine slows all alike; the
ratios are what to compare across machines.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fixtures import load_fixtures  # noqa: E402

MODEL = "smollm3"
OPTIONS: dict[str, Any] = {"tools_field": "tools", "default_prefix": "<|im_start|>assistant\n"}


def write_corpus(path: Path, records: int) -> None:
    cases = load_fixtures(MODEL)["cases"]
    with path.open("w", encoding="utf-8") as file:
        for index in range(records):
            if index % 200 == 199:
                file.write(f'{{"id": {index}, "output": "truncated\n')
                continue
            case = cases[index % len(cases)]
            record = {"id": index, "output": case["output"], "prefix": case["prefix"]}
            if "tools" in case:
                record["tools"] = case["tools"]
            file.write(json.dumps(record, ensure_ascii=False) + "\n")


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_parse_jsonl(corpus: Path, out: Path, jobs: int) -> float:
    command = [sys.executable, "-m", "cli", "parse-jsonl", "--model", MODEL, "--tools-field"]
    command += ["tools", "--jobs", str(jobs), "--no-progress", str(corpus), str(out)]
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def run_ray(corpus: Path, workers: int, blocksize: int) -> tuple[float, float, list[str]]:
    import ray

    start = time.perf_counter()
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    started = time.perf_counter() - start
    try:
        from integrations import ray as ray_integration

        start = time.perf_counter()
        rows = ray_integration.parse_jsonl(corpus, model=MODEL, blocksize=blocksize, **OPTIONS)
        results = rows.take_all()
        elapsed = time.perf_counter() - start
    finally:
        ray.shutdown()
    results.sort(key=lambda row: row["line"])
    return started, elapsed, [row["result"] for row in results]


def run_dask(corpus: Path, workers: int, blocksize: int) -> tuple[float, float, list[str]]:
    import distributed

    from integrations import dask as dask_integration

    start = time.perf_counter()
    cluster = distributed.LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = distributed.Client(cluster)
    started = time.perf_counter() - start
    try:
        start = time.perf_counter()
        lines = dask_integration.parse_jsonl(
            corpus, model=MODEL, blocksize=blocksize, **OPTIONS
        ).compute()
        elapsed = time.perf_counter() - start
    finally:
        client.close()
        cluster.close()
    return started, elapsed, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "batch.json")
    args = parser.parse_args()
    workers = cores()
    results: dict[str, Any] = {
        "records": args.records,
        "cores": workers,
        "python": platform.python_version(),
        "machine": platform.machine(),
        # Other work on the machine slows every engine: the load averages when the run began.
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "engines": {},
    }
    with tempfile.TemporaryDirectory() as directory:
        corpus = Path(directory) / "corpus.jsonl"
        write_corpus(corpus, args.records)
        size = corpus.stat().st_size
        blocksize = max(1 << 16, size // (4 * workers))  # a few blocks per worker
        results["bytes"] = size
        expected_path = Path(directory) / "parse-jsonl.jsonl"
        for jobs in (1, workers):
            elapsed = run_parse_jsonl(corpus, expected_path, jobs)
            results["engines"][f"parse-jsonl --jobs {jobs}"] = {
                "seconds": round(elapsed, 2),
                "records_per_second": round(args.records / elapsed),
            }
            print(f"parse-jsonl --jobs {jobs}: {args.records / elapsed:,.0f} records/s", flush=True)
        expected = expected_path.read_text(encoding="utf-8").splitlines()
        assert len(expected) == args.records
        for name, run in (("ray", run_ray), ("dask", run_dask)):
            try:
                started, elapsed, lines = run(corpus, workers, blocksize)
            except ModuleNotFoundError as error:
                results["engines"][name] = {"skipped": f"not installed: {error.name}"}
                print(f"{name}: skipped ({error.name} not installed)", flush=True)
                continue
            assert lines == expected, f"{name} differs from parse-jsonl"
            results["engines"][name] = {
                "startup_seconds": round(started, 2),
                "seconds": round(elapsed, 2),
                "records_per_second": round(args.records / elapsed),
                "blocksize": blocksize,
            }
            print(f"{name}: {args.records / elapsed:,.0f} records/s (start-up {started:.1f} s)")
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
