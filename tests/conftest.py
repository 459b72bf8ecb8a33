from __future__ import annotations

import os
from typing import Any

import pytest
from differential import CASES
from hypothesis import HealthCheck, settings

# Example counts: "ci" for `make test` (the default), "deep" for `make test-full`.
settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile(
    "deep", max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_sessionfinish(session: Any) -> None:
    """Under pytest-xdist, each worker hands its count of differential cases back."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["differential_cases"] = CASES["count"]


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_testnodedown(node: Any, error: Any) -> None:
    CASES["count"] += node.workeroutput.get("differential_cases", 0)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if CASES["count"]:
        terminalreporter.write_line(
            f"differential: {CASES['count']} (template, output, chunking) cases matched transformers 5.23.0"
        )
