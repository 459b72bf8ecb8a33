"""Installed, it works: the wheel, in a fresh virtualenv outside the repository.

Builds the wheel, installs it with its `cli` extra into a new virtualenv in a temporary
directory, and runs every CLI verb from there (no repository on the path), plus the
README's shell examples. Slow (a build and an install): marked `wheel`, run by
`make test-wheel`, which CI runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_readme import expected_output, run_shell_block, shell_examples

import generated
import templates_catalog

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding `.venv`, a fresh virtualenv with the wheel and its cli extra."""
    home = tmp_path_factory.mktemp("user")
    dist = home / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", "--quiet", "--no-deps", "-w", str(dist), str(ROOT)],
        check=True,
        timeout=600,
    )
    [wheel] = dist.glob("*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(home / ".venv")], check=True, timeout=300)
    venv_pip = [str(home / ".venv" / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*venv_pip, "install", "--quiet", f"{wheel}[cli]"], check=True, timeout=600)
    return home


def run(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The installed console script, run in `home/work` with no repository on the path."""
    work = home / "work"
    work.mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        [str(home / ".venv" / "bin" / "response-templates"), *args],
        cwd=work,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
    )


def write(home: Path, name: str, text: str) -> str:
    (home / "work").mkdir(exist_ok=True)
    (home / "work" / name).write_text(text, encoding="utf-8")
    return name


def test_the_packages_come_from_the_virtualenv(installed: Path) -> None:
    python = str(installed / ".venv" / "bin" / "python")
    script = "import cli, compiler, generated, runtime, templates_catalog; print(compiler.__file__)"
    result = subprocess.run(
        [python, "-c", script], cwd=installed, capture_output=True, text=True, check=True
    )
    assert result.stdout.startswith(str(installed / ".venv"))
    assert not result.stdout.startswith(str(ROOT))
    for module in ("cli", "compiler"):  # python -m cli / python -m compiler: the same program
        usage = subprocess.run(
            [python, "-m", module, "--help"], cwd=installed, capture_output=True, text=True
        )
        assert usage.returncode == 0 and "parse-jsonl" in usage.stdout


def test_parse(installed: Path) -> None:
    out = write(installed, "out.txt", "<think>\nGreeting.\n</think>\nHello!<|im_end|>")
    result = run(installed, "parse", "--model", "smollm3", out)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "role": "assistant",
        "thinking": "Greeting.",
        "content": "Hello!",
    }
    result = run(installed, "parse", "--model", "qwen3", "--prompt", "thinking", stdin="Hm.")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"role": "assistant", "thinking": "Hm."}
    events = run(installed, "parse", "--model", "qwen3", "--events", stdin="Hi<|im_end|>")
    assert events.returncode == 0, events.stderr
    lines = [json.loads(line) for line in events.stdout.splitlines()]
    assert lines[-1] == {"type": "message", "message": {"role": "assistant", "content": "Hi"}}
    truncated = run(installed, "parse", "--model", "smollm3", stdin='<tool_call>{"name": "f", ')
    assert truncated.returncode == 1 and truncated.stderr.count("\n") == 1


def test_parse_with_tools(installed: Path) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"properties": {}}}}]
    path = write(installed, "tools.json", json.dumps(tools))
    result = run(installed, "parse", "--model", "smollm3", "--tools", path, stdin="Hi<|im_end|>")
    assert result.returncode == 0, result.stderr
    bad = write(installed, "bad-tools.json", '{"a": 1}')
    result = run(installed, "parse", "--model", "smollm3", "--tools", bad, stdin="Hi")
    assert result.returncode == 2 and "got dict" in result.stderr


def test_parse_jsonl(installed: Path) -> None:
    lines = [
        '{"id": 7, "output": "Hi<|im_end|>"}',
        "{",
        '{"output": "<think>x</think>Yo<|im_end|>"}',
    ]
    source = write(installed, "in.jsonl", "\n".join(lines) + "\n")
    result = run(installed, "parse-jsonl", "--model", "smollm3", source, "out.jsonl")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in (installed / "work" / "out.jsonl").open()]
    assert records[0] == {"line": 1, "id": 7, "message": {"role": "assistant", "content": "Hi"}}
    assert records[1]["error"]["type"] == "JSONDecodeError"
    assert records[2]["message"] == {"role": "assistant", "thinking": "x", "content": "Yo"}
    same = run(installed, "parse-jsonl", "--model", "smollm3", source, source)
    assert same.returncode == 2 and "is the input file" in same.stderr
    assert (installed / "work" / source).read_text(encoding="utf-8").count("\n") == 3


def test_catalog_lint_check_show(installed: Path) -> None:
    names = templates_catalog.names()
    catalog = run(installed, "catalog")
    assert catalog.returncode == 0, catalog.stderr
    assert sum(line.startswith("| `") for line in catalog.stdout.splitlines()) == len(names)
    lint = run(installed, "lint")
    assert lint.returncode == 0, lint.stdout
    assert lint.stdout.splitlines()[-1] == f"lint: {len(names)} entries, 0 unwaived finding(s)"
    check = run(installed, "check")
    assert check.returncode == 0, check.stderr
    assert check.stdout == f"generated/ matches a fresh build of {len(names)} catalog entries\n"
    show = run(installed, "show", "smollm3")
    assert show.returncode == 0, show.stderr
    assert show.stdout == (ROOT / "generated" / "smollm3.py").read_text(encoding="utf-8")


def test_compile_writes_only_where_asked(installed: Path) -> None:
    refused = run(installed, "compile", "smollm3")
    assert refused.returncode == 2 and "give --out DIR" in refused.stderr
    assert run(installed, "catalog", "--write").returncode == 2
    result = run(installed, "compile", "smollm3", "--out", "mods")
    assert result.returncode == 0, result.stderr
    built = (installed / "work" / "mods" / "smollm3.py").read_text(encoding="utf-8")
    assert built == (ROOT / "generated" / "smollm3.py").read_text(encoding="utf-8")
    everything = run(installed, "compile-all", "--out", "all")
    assert everything.returncode == 0, everything.stderr
    written = {path.stem for path in (installed / "work" / "all").glob("*.py")}
    assert written == {"__init__", *generated.MODULES}


@pytest.mark.parametrize("line, code", shell_examples(), ids=lambda value: str(value)[:20])
def test_readme_shell_examples(line: int, code: str, installed: Path, tmp_path: Any) -> None:
    result = run_shell_block(code, tmp_path, installed / ".venv")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected_output(code)
