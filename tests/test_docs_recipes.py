"""The "Beyond one machine" recipes of docs/cli.md run as written, as scripts.

Each Python block of that section is saved as a script and run in a fresh directory that
holds a small `generations.jsonl` (with a malformed line); it must print its `#>` lines and
write `parsed.jsonl` equal to what `parse-jsonl` writes for the same file. The Ray and Dask
recipes are skipped only when their extra is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "cli.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
GENERATIONS = "\n".join(
    [
        '{"id": "a", "output": "Hello!<|im_end|>"}',
        "not json",
        '{"prefix": "<|im_start|>assistant\\n<think>\\n", "output": "2+2=4\\n</think>\\n\\n4<|im_end|>"}',
    ]
)


def recipes() -> list[tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Beyond one machine") :]
    found = []
    for match in BLOCK.finditer(section):
        heading = section[: match.start()].rsplit("\n### ", 1)[-1].split("\n", 1)[0]
        found.append((heading, match.group(1)))
    return found


def test_every_engine_has_a_recipe() -> None:
    assert [heading for heading, _ in recipes()] == [
        "multiprocessing (one machine)",
        "Ray Data",
        "Dask",
    ]


NEEDS = {"Ray Data": "ray.data", "Dask": "distributed"}


@pytest.mark.parametrize("heading, code", recipes(), ids=lambda value: str(value)[:16])
def test_recipe_runs_as_written(heading: str, code: str, tmp_path: Path) -> None:
    needed = NEEDS.get(heading)
    if needed and importlib.util.find_spec(needed.split(".")[0]) is None:
        pytest.skip(f"{needed} is not installed (the {needed.split('.')[0]} extra)")
    (tmp_path / "generations.jsonl").write_text(GENERATIONS + "\n", encoding="utf-8")
    expected = tmp_path / "expected.jsonl"
    cli = [sys.executable, "-m", "cli", "parse-jsonl", "--model", "qwen3", "--no-progress"]
    subprocess.run([*cli, "generations.jsonl", str(expected)], cwd=tmp_path, check=True)
    (tmp_path / "recipe.py").write_text(code, encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "recipe.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    printed = [line for line in result.stdout.splitlines() if line.strip()]
    assert printed == [line[3:] for line in code.splitlines() if line.startswith("#> ")]
    assert (tmp_path / "parsed.jsonl").read_text(encoding="utf-8") == expected.read_text(
        encoding="utf-8"
    )
