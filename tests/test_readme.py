"""The README's examples run as written, and print what the README says they print.

Python blocks run in a fresh namespace each; shell blocks run when they show output. A
`#> ` line under a statement is a line that the block must print, in order.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from offline_tokenizer import smollm3_tokenizer

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(language: str) -> list[tuple[int, str]]:
    text = README.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start()) + 1, match.group(2))
        for match in BLOCK.finditer(text)
        if match.group(1) == language
    ]


def expected_output(code: str) -> list[str]:
    return [line[3:] for line in code.splitlines() if line.startswith("#> ")]


def test_the_readme_has_examples_to_run() -> None:
    assert len(blocks("python")) >= 5
    assert any(expected_output(code) for _, code in blocks("sh"))


@pytest.mark.parametrize("line, code", blocks("python"), ids=lambda value: str(value)[:20])
def test_python_example(line: int, code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    namespace: dict[str, Any] = {"__name__": f"readme_line_{line}"}
    if "tokenizer" in code:  # the transformers example: a real tokenizer, built offline
        namespace["tokenizer"] = smollm3_tokenizer(
            ["<|im_start|>assistant\n", "<think>\nEasy.\n</think>\nHello!<|im_end|>"]
        )
    monkeypatch.chdir(ROOT)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, f"README.md:{line}", "exec"), namespace)
    assert printed.getvalue().splitlines() == expected_output(code)


@pytest.mark.parametrize(
    "line, code",
    [(line, code) for line, code in blocks("sh") if expected_output(code)],
    ids=lambda value: str(value)[:20],
)
def run_shell_block(code: str, directory: Path, venv: Path) -> subprocess.CompletedProcess[str]:
    """Run a shell block as pasted in the README's setup: in `directory`, which holds the
    virtualenv as `.venv` (a link to `venv`), as a repository checkout does after `make`."""
    link = directory / ".venv"
    if not link.exists():
        link.symlink_to(venv, target_is_directory=True)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def shell_examples() -> list[tuple[int, str]]:
    return [(line, code) for line, code in blocks("sh") if expected_output(code)]


@pytest.mark.parametrize("line, code", shell_examples(), ids=lambda value: str(value)[:20])
def test_shell_example(line: int, code: str, tmp_path: Path) -> None:
    result = run_shell_block(code, tmp_path, Path(sys.prefix))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected_output(code)
