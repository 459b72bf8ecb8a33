"""How the benchmarks time one call: the best per-call time over rounds of repeated calls.

A call timed alone right after `gc.collect()` runs with cold caches: the collection walks
every object and evicts the parser's code and data. That adds a roughly fixed time (about
0.1 ms on this project's machine, measured on an 80K-character parse), which hides most
of a fast parser's time and little of a slow one's, so ratios between the two shrink. A
round of repeated calls measures the call itself; the best round is the quietest one.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any


def best_seconds(run: Callable[[], Any], budget: float = 0.05, rounds: int = 5) -> float:
    """Best per-call time of `run`: one call, then `rounds` rounds, each repeating it for
    about `budget` seconds (a call longer than that runs once a round)."""
    gc.collect()
    start = time.perf_counter()
    run()
    once = time.perf_counter() - start
    number = max(1, int(budget / max(once, 1e-7)))
    best = once
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            run()
        best = min(best, (time.perf_counter() - start) / number)
    return best
