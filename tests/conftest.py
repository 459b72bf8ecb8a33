from __future__ import annotations

from typing import Any

import profiles  # noqa: F401  (registers and loads the hypothesis profile)
import pytest
from differential import CASES


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
