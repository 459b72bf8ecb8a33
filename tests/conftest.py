from __future__ import annotations

import os
from typing import Any

from differential import CASES
from hypothesis import HealthCheck, settings

# Example counts: "default" for `make test`; HYPOTHESIS_PROFILE=deep for long runs.
settings.register_profile(
    "default",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile(
    "deep", max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if CASES["count"]:
        terminalreporter.write_line(
            f"differential: {CASES['count']} (template, output, chunking) cases matched transformers 5.23.0"
        )
