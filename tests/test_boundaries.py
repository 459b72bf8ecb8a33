"""The reference is a test oracle only, and the run time needs nothing but `regex`."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from compiler.catalog import ROOT, entry_names

PACKAGES = ("compiler", "runtime", "generated")


@pytest.mark.parametrize("package", PACKAGES)
def test_no_source_imports_transformers(package: str) -> None:
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(
                name.split(".")[0] == "transformers" for name in names
            ), f"{path} imports transformers"


RUN_EVERYTHING = f"""
import importlib, sys
import compiler, runtime
from compiler import load_parser, compile_source
for name in {entry_names()!r}:
    module = importlib.import_module("generated." + name)
    module.Parser.parse("<think>x</think>hello", prefix="")
load_parser(module.TEMPLATE)
print(",".join(sorted(m for m in sys.modules if m.split(".")[0] in ("transformers", "torch", "numpy"))))
"""

GENERATED_ONLY = """
import sys
from generated.smollm3 import Parser
from generated.qwen3 import Parser as Qwen
Parser.parse("<think>x</think>hello", prefix="")
Qwen.parse("<tool_call><function=f><parameter=a>1</parameter></tool_call>", prefix="")
heavy = [m for m in ("jinja2", "black", "transformers", "compiler") if m in sys.modules]
print(",".join(heavy))
"""


def test_nothing_imports_transformers_at_run_time() -> None:
    result = subprocess.run(
        [sys.executable, "-c", RUN_EVERYTHING], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_generated_modules_need_only_the_runtime() -> None:
    result = subprocess.run(
        [sys.executable, "-c", GENERATED_ONLY], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
