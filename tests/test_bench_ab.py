"""bench/ab.py, `make bench-ab`: the base revision is loaded as packages of its own, and its
parsers are compared with this checkout's on the same stream, events checked equal."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from compiler.catalog import ROOT

sys.path.insert(0, str(ROOT / "bench"))
ab = importlib.import_module("ab")


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout")
def test_the_base_revision_runs_as_packages_of_its_own(tmp_path: Path) -> None:
    ab.load_base("HEAD", tmp_path)
    base = importlib.import_module("generated_base.hermes").Parser
    ours = importlib.import_module("generated.hermes").Parser
    runtime = importlib.import_module("runtime")
    base_runtime = importlib.import_module("runtime_base")
    assert base.__mro__[1] is base_runtime.CompiledParser
    assert ours.__mro__[1] is runtime.CompiledParser
    assert base_runtime.CompiledParser is not runtime.CompiledParser
    text = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\nDone.' * 20
    ratios = ab.compare(base, ours, "<|im_start|>assistant\n", text, passes=2)
    assert len(ratios) == 2 and all(ratio > 0 for ratio in ratios)
    assert base.parse(text, prefix="") == ours.parse(text, prefix="")
