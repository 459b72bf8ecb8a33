"""The parse commands of the CLI (parse, parse-jsonl, catalog) and integrations.batch under them."""

from __future__ import annotations

import functools
import io
import json
import math
import multiprocessing
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures import load_fixtures

from cli.app import main
from compiler import catalog_index, spec
from compiler.catalog import ROOT, entry_names, load_entry
from compiler.errors import TemplateError
from integrations import batch

MODEL = "smollm3"


def strict_cases(model: str) -> list[dict[str, Any]]:
    """The fixture cases parsed with the default policy: what the CLI and integrations.batch give
    (cases with an `on_error` policy are checked by tests/test_catalog_fixtures.py)."""
    return [case for case in load_fixtures(model)["cases"] if "on_error" not in case]


FIRST_CASES = [
    (name, next(case for case in strict_cases(name) if "expected" in case))
    for name in entry_names()
    if any("expected" in case for case in strict_cases(name))
]


def case_named(model: str, name: str) -> dict[str, Any]:
    return next(case for case in load_fixtures(model)["cases"] if case["name"] == name)


def raised(model: str, case: dict[str, Any]) -> str:
    """The name of the class the parser raises on a case: what error records must say.

    Asked of the parser, since it may raise a subclass of the fixture's class (a
    located ValueError, say)."""
    try:
        batch.get_parser(model).parse(
            case["output"], prefix=case["prefix"], tools=case.get("tools")
        )
    except Exception as error:
        if "error" in case:
            assert case["error"] in {cls.__name__ for cls in type(error).__mro__}
        return type(error).__name__
    raise AssertionError(f"the parser does not raise on {case['output']!r}")


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        check=False,
        timeout=300,
    )


def write_case(tmp_path: Path, case: dict[str, Any]) -> list[str]:
    """The case's output and prefix as files (verbatim); the parse options that use them."""
    (tmp_path / "output.txt").write_bytes(case["output"].encode("utf-8"))
    (tmp_path / "prefix.txt").write_bytes(case["prefix"].encode("utf-8"))
    options = ["--prefix-file", str(tmp_path / "prefix.txt")]
    if "tools" in case:
        (tmp_path / "tools.json").write_text(json.dumps(case["tools"]), encoding="utf-8")
        options += ["--tools", str(tmp_path / "tools.json")]
    return [*options, str(tmp_path / "output.txt")]


# -- parse ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, case", FIRST_CASES, ids=[f"{name}-{case['name']}" for name, case in FIRST_CASES]
)
def test_parse_gives_the_fixture_message(
    model: str, case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["parse", "--model", model, *write_case(tmp_path, case)]) == 0
    assert json.loads(capsys.readouterr().out) == case["expected"]


def test_parse_casts_arguments_with_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = case_named(
        "qwen3",
        "schema: python-style True becomes a bool, numeric text for a string param stays a number",
    )
    assert main(["parse", "--model", "qwen3", *write_case(tmp_path, case)]) == 0
    assert json.loads(capsys.readouterr().out) == case["expected"]


def test_parse_reads_stdin_and_a_prefix_argument(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    case = case_named("qwen3", "thinking prompt: reasoning then answer")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(case["output"].encode())))
    assert main(["parse", "--model", "qwen3", "--prefix", case["prefix"], "-"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == case["expected"]
    assert "\u00d7" in out  # non-ASCII is written as is (ensure_ascii=False)


def test_parse_defaults_to_the_generation_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # qwen3's prompts end with its start anchor, so the default prompt stands in for them.
    plain = case_named("qwen3", "plain answer")
    (tmp_path / "plain.txt").write_text(plain["output"], encoding="utf-8")
    assert main(["parse", "--model", "qwen3", str(tmp_path / "plain.txt")]) == 0
    assert json.loads(capsys.readouterr().out) == plain["expected"]

    thinking = case_named("qwen3", "thinking prompt: untagged output is all reasoning")
    (tmp_path / "thinking.txt").write_text(thinking["output"], encoding="utf-8")
    # Without the thinking prompt the untagged text is content, with it reasoning.
    assert main(["parse", "--model", "qwen3", str(tmp_path / "thinking.txt")]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "role": "assistant",
        "content": thinking["output"],
    }
    args = ["parse", "--model", "qwen3", "--prompt", "thinking", str(tmp_path / "thinking.txt")]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out) == thinking["expected"]

    assert main(["parse", "--model", "qwen3", "--prompt", "nope", str(tmp_path / "plain.txt")]) == 2
    assert "no generation_prompt 'nope'" in capsys.readouterr().err


def test_parse_help_says_where_the_default_prefix_comes_from(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["parse", "--help"])
    assert 'generation_prompt["default"]' in " ".join(capsys.readouterr().out.split())


def test_parse_events_end_with_the_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = case_named("qwen3", "thinking prompt: reasoning then answer")
    assert main(["parse", "--model", "qwen3", "--events", *write_case(tmp_path, case)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[-1] == {"type": "message", "message": case["expected"]}
    # Initial events (the prompt opened <think>), one feed, the final events: as the API gives them.
    parser = batch.get_parser("qwen3")(case["prefix"])
    expected = [*parser.initial_events, *parser.feed(case["output"])]
    _, final = parser.finalize()
    assert lines[:-1] == [*expected, *final]
    assert lines[0] == {"type": "region_open", "field": "thinking"}
    assert {line["type"] for line in lines[:-1]} == {"region_open", "region_chunk", "region_close"}


def test_parse_reports_a_parser_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = case_named(MODEL, "truncated call JSON fails at finalize")
    assert main(["parse", "--model", MODEL, *write_case(tmp_path, case)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: {raised(MODEL, case)}: ")


def test_parse_rejects_an_unknown_model_or_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["parse", "--model", "no_such_model", "--prefix", "", "-"]) == 2
    assert "unknown model 'no_such_model'" in capsys.readouterr().err
    assert main(["parse", "--model", MODEL, "--prefix", "", str(tmp_path / "missing")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_reader_that_stops_early_ends_the_command_quietly() -> None:
    """`... --events | head -1`: once the reader closes the pipe, the command stops with a
    shell's status for SIGPIPE (141) and writes no error (it is not the parser's)."""
    call = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n'
    output = "Calls.\n" + call * 5000  # events far beyond a pipe's buffer
    command = [sys.executable, "-m", "cli", "parse", "--model", MODEL, "--prefix", "", "--events"]
    with subprocess.Popen(
        command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(output.encode())
        process.stdin.close()
        first = json.loads(process.stdout.readline())
        process.stdout.close()
        assert process.stderr is not None
        errors = process.stderr.read().decode()
        status = process.wait(timeout=300)
    assert first["type"] == "region_open"
    assert (status, errors) == (141, "")


def test_parse_in_a_subprocess(tmp_path: Path) -> None:
    case = case_named(MODEL, "content then two calls on separate lines")
    result = run_cli("parse", "--model", MODEL, *write_case(tmp_path, case))
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(result.stdout) == case["expected"]

    result = run_cli(
        "parse",
        "--model",
        MODEL,
        "--prefix",
        case["prefix"],
        "--events",
        stdin=case["output"].encode(),
    )
    assert result.returncode == 0, result.stderr.decode()
    lines = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert lines[-1] == {"type": "message", "message": case["expected"]}
    assert all(line["type"].startswith("region_") for line in lines[:-1])


# -- parse-jsonl ----------------------------------------------------------------------


@pytest.fixture
def jsonl(tmp_path: Path) -> tuple[Path, dict[int, Any]]:
    """A JSON-lines file of fixture records and bad lines; what each line should give."""
    cases = strict_cases(MODEL)
    lines: list[str] = []
    expected: dict[int, Any] = {}

    def add(line: str, outcome: Any) -> None:
        lines.append(line)
        expected[len(lines)] = outcome

    for index, case in enumerate(cases):
        outcome = (
            ("error", raised(MODEL, case)) if "error" in case else ("message", case["expected"])
        )
        # Records with an id get it back in their result: (kind, value, id).
        add(json.dumps({"id": f"case-{index}", **case}, ensure_ascii=False), (*outcome, index))
        if index == 1:
            add('{"output": "Hi<|im_end|>", "prefix": ', ("error", "JSONDecodeError"))
        if index == 3:
            add(json.dumps({"prefix": case["prefix"], "text": "x"}), ("error", "KeyError"))
        if index == 5:
            truncated = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
            record = {"output": truncated, "prefix": ""}
            add(json.dumps(record), ("error", raised(MODEL, {**record, "error": "ValueError"})))
    add("", ("error", "JSONDecodeError"))
    add("[1, 2]", ("error", "TypeError"))
    # No prefix field: the entry's default prompt is used.
    add(
        json.dumps({"output": "Bye.<|im_end|>"}),
        ("message", {"role": "assistant", "content": "Bye."}),
    )
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert sum(outcome[0] == "error" for outcome in expected.values()) >= 5
    return path, expected


def check_results(text: str, expected: dict[int, Any]) -> None:
    records = [json.loads(line) for line in text.splitlines()]
    assert [record["line"] for record in records] == list(range(1, len(expected) + 1))
    for record in records:
        want = expected[record["line"]]
        if len(want) > 2:
            assert list(record)[:2] == ["line", "id"] and record.pop("id") == f"case-{want[2]}"
        if want[0] == "message":
            assert record == {"line": record["line"], "message": want[1]}
        else:
            assert set(record) == {"line", "error"}, record
            assert record["error"]["type"] == want[1], record
            assert isinstance(record["error"]["message"], str) and record["error"]["message"]


def test_parse_jsonl_keeps_every_line_in_order(
    jsonl: tuple[Path, dict[int, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, expected = jsonl
    out = tmp_path / "out.jsonl"
    args = ["parse-jsonl", "--model", MODEL, "--tools-field", "tools", str(path), str(out)]
    assert main([*args, "--jobs", "1"]) == 0
    check_results(out.read_text(encoding="utf-8"), expected)
    errors = sum(outcome[0] == "error" for outcome in expected.values())
    assert f"{len(expected)} lines, {errors} errors" in capsys.readouterr().err


def test_parse_jsonl_error_records_name_the_line(
    jsonl: tuple[Path, dict[int, Any]], tmp_path: Path
) -> None:
    path, expected = jsonl
    out = tmp_path / "out.jsonl"
    assert main(["parse-jsonl", "--model", MODEL, str(path), str(out), "--jobs", "1"]) == 0
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    # Fixture cases 0 and 1, then the invalid line; cases 2 and 3, then the line without an
    # output; cases 4 and 5, then the output the parser raises on.
    assert records[2] == {"line": 3, "error": records[2]["error"]}
    assert records[2]["error"]["type"] == "JSONDecodeError"
    assert records[2]["error"]["message"].endswith("line 1 column 38 (char 37)")
    assert records[5] == {
        "line": 6,
        "error": {"type": "KeyError", "message": "record has no 'output' field"},
    }
    assert records[8]["line"] == 9 and records[8]["error"]["type"] == expected[9][1]
    assert "could not parse region as JSON" in records[8]["error"]["message"]
    assert records[9] == {
        "line": 10,
        "id": "case-6",
        "message": strict_cases(MODEL)[6]["expected"],
    }


def test_parse_jsonl_jobs_do_not_change_the_output(
    jsonl: tuple[Path, dict[int, Any]], tmp_path: Path
) -> None:
    path, expected = jsonl
    outputs = []
    for jobs, chunk in (("1", "256"), ("2", "2"), ("2", "1")):
        out = tmp_path / f"out-{jobs}-{chunk}.jsonl"
        args = ["parse-jsonl", "--model", MODEL, "--tools-field", "tools", str(path), str(out)]
        assert main([*args, "--jobs", jobs, "--chunk-size", chunk, "--no-progress"]) == 0
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    check_results(outputs[1].decode("utf-8"), expected)


def test_parse_jsonl_progress_lines_when_stderr_is_not_a_terminal(
    jsonl: tuple[Path, dict[int, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, expected = jsonl
    out = tmp_path / "out.jsonl"
    args = ["parse-jsonl", "--model", MODEL, str(path), str(out), "--jobs", "1"]
    assert main([*args, "--chunk-size", "4", "--progress-interval", "0"]) == 0
    lines = capsys.readouterr().err.splitlines()
    # One plain line per chunk (interval 0), no carriage returns, then the summary.
    assert len(lines) == -(-len(expected) // 4) + 1 and "\r" not in "".join(lines)
    assert lines[0].startswith("parse-jsonl: 4 lines, ") and "%), " in lines[0]
    assert lines[-2].startswith(f"parse-jsonl: {len(expected)} lines") and "(100%)" in lines[-2]
    assert lines[-1].endswith(f"-> {out}")
    assert main([*args, "--no-progress"]) == 0
    assert capsys.readouterr().err.splitlines() == [lines[-1]]


def test_parse_jsonl_draws_a_bar_on_a_terminal(
    jsonl: tuple[Path, dict[int, Any]], tmp_path: Path
) -> None:
    pty = pytest.importorskip("pty")
    pytest.importorskip("tqdm")
    path, expected = jsonl
    out = tmp_path / "out.jsonl"
    parent, child = pty.openpty()
    fcntl = pytest.importorskip("fcntl")
    termios = pytest.importorskip("termios")
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "parse-jsonl",
            "--model",
            MODEL,
            "--tools-field",
            "tools",
            str(path),
            str(out),
        ],
        cwd=ROOT,
        stderr=child,
        check=False,
        timeout=300,
    )
    os.close(child)
    err = b""
    while True:
        try:
            data = os.read(parent, 1 << 16)
        except OSError:  # the other end is closed
            break
        if not data:
            break
        err += data
    os.close(parent)
    assert result.returncode == 0
    text = err.decode("utf-8")
    # tqdm's bar: the description, a percentage and the bar drawn with |, redrawn with \r.
    assert "parse-jsonl: 100%|" in text and "\r" in text
    assert f"{len(expected)} lines" in text
    check_results(out.read_text(encoding="utf-8"), expected)


def test_parse_jsonl_in_a_subprocess(jsonl: tuple[Path, dict[int, Any]], tmp_path: Path) -> None:
    path, expected = jsonl
    out = tmp_path / "out.jsonl"
    # All cores by default; stdin and stdout work too.
    result = run_cli("parse-jsonl", "--model", MODEL, "--tools-field", "tools", str(path), str(out))
    assert result.returncode == 0, result.stderr.decode()
    check_results(out.read_text(encoding="utf-8"), expected)
    assert result.stderr.decode().strip().startswith(f"parse-jsonl: {len(expected)} lines")
    piped = run_cli(
        "parse-jsonl",
        "--model",
        MODEL,
        "--tools-field",
        "tools",
        "--jobs",
        "2",
        "-",
        "-",
        stdin=path.read_bytes(),
    )
    assert piped.returncode == 0, piped.stderr.decode()
    assert piped.stdout == out.read_bytes()


def test_parse_jsonl_rejects_an_unknown_model(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text("{}\n", encoding="utf-8")
    args = ["parse-jsonl", "--model", "no_such_model", "--prefix", ""]
    assert main([*args, str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl")]) == 2
    assert not (tmp_path / "out.jsonl").exists()


# -- catalog --------------------------------------------------------------------------


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| `")]


def test_catalog_lists_every_entry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog"]) == 0
    rows = table_rows(capsys.readouterr().out)
    names = entry_names()
    assert [row.split("|")[1].strip() for row in rows] == [f"`{name}`" for name in names]
    for row, name in zip(rows, names, strict=True):
        cells = row.split(" | ")
        assert cells[-2] == f"{len(load_fixtures(name)['cases'])}"
        for model in load_entry(name).data["models"][: catalog_index.MAX_MODELS]:
            assert model in row
    qwen3 = rows[names.index("qwen3")]
    assert "**thinking**: `<think>` … *re* `</think>\\|(?=<tool…all>\\s*<function=)`" in qwen3
    assert "*re* `<\\\\|im_end\\\\|>.*`" in qwen3  # GFM-escaped pipes of the regex <\|im_end\|>


def test_catalog_in_a_subprocess() -> None:
    result = run_cli("catalog")
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode("utf-8") == catalog_index.index()
    assert len(table_rows(result.stdout.decode("utf-8"))) == len(entry_names())


def test_catalog_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "README.md"
    monkeypatch.setattr(catalog_index, "README", target)
    assert main(["catalog", "--write"]) == 0
    captured = capsys.readouterr()
    assert target.read_text(encoding="utf-8") == captured.out == catalog_index.index()
    assert f"wrote {target.as_posix()}" in captured.err


def test_catalog_format_column(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        spec,
        "uses_extensions",
        lambda template: ["ext_a", "ext_b"] if "thinking" in template["fields"] else [],
    )
    rows = dict(zip(entry_names(), table_rows(catalog_index.index()), strict=True))
    assert " | ext_a, ext_b | " in rows["qwen3"]
    assert " | v1 | " in rows["jamba"]  # no thinking field
    monkeypatch.delattr(spec, "uses_extensions")  # before another developer adds it: v1
    assert all(" | v1 | " in row for row in table_rows(catalog_index.index()))


def test_catalog_malformed_column(tmp_path: Path) -> None:
    """The last column shows an entry's "malformed" key, strict then server; — when absent."""
    (tmp_path / "templates_catalog").mkdir()
    base = {key: value for key, value in load_entry("smollm3").data.items() if key != "malformed"}
    documented = {"strict": "raises", "server": "the call's <tool_call> | joins content"}
    for name, extra in (("plain", {}), ("documented", {"malformed": documented})):
        entry = {**base, **extra}
        path = tmp_path / "templates_catalog" / f"{name}.json"
        path.write_text(json.dumps(entry), encoding="utf-8")
    rows = dict(
        zip(["documented", "plain"], table_rows(catalog_index.index(tmp_path)), strict=True)
    )
    assert rows["documented"].endswith(
        " | *strict*: raises<br>*server*: the call's &lt;tool_call&gt; \\| joins content |"
    )
    assert rows["plain"].endswith(" | — |")


@pytest.mark.parametrize(
    ("malformed", "message"),
    [
        ("raises", "malformed: must be an object"),
        ({"lenient": "x"}, "malformed: must be an object with keys among ['strict', 'server']"),
        ({"strict": " "}, "malformed.strict: must be a non-empty string"),
    ],
)
def test_catalog_entry_rejects_a_bad_malformed_key(
    tmp_path: Path, malformed: object, message: str
) -> None:
    (tmp_path / "templates_catalog").mkdir()
    entry = {**load_entry("smollm3").data, "malformed": malformed}
    (tmp_path / "templates_catalog" / "bad.json").write_text(json.dumps(entry), encoding="utf-8")
    with pytest.raises(TemplateError, match=re.escape(message)):
        load_entry("bad", tmp_path)


def test_code_spans_survive_backticks_and_pipes() -> None:
    assert catalog_index._code("a|b") == "`a\\|b`"
    assert catalog_index._code("```json") == "```` ```json ````"
    assert catalog_index._visible("<response>\n") == "<response>\\n"
    shortened = catalog_index._shorten("x" * 100)
    assert len(shortened) == catalog_index.MAX_DELIMITER and "…" in shortened


def test_existing_commands_are_still_there(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in (
        "compile",
        "compile-all",
        "check",
        "show",
        "lint",
        "catalog",
        "parse",
        "parse-jsonl",
    ):
        assert command in out


def test_console_script_entry() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"]["response-templates"] == "cli.app:main"


# -- integrations.batch, as engines call it --------------------------------------------------


def test_parse_record_never_raises_for_a_bad_record() -> None:
    good = case_named(MODEL, "reasoning then answer")
    assert batch.parse_record(good, model=MODEL) == {"message": good["expected"]}
    bad = [
        ([1], "TypeError"),
        ({"prefix": ""}, "KeyError"),
        ({"output": 3, "prefix": ""}, "TypeError"),
        ({"output": "x", "prefix": 3}, "TypeError"),
        ({"output": "x"}, "KeyError"),  # no prefix and no default
        (
            {"output": '<tool_call>{"name": ', "prefix": ""},
            raised(MODEL, {"output": '<tool_call>{"name": ', "prefix": "", "error": "ValueError"}),
        ),
        ({"output": "x", "prefix": "", "tools": "nope"}, "TypeError"),
    ]
    for record, kind in bad:
        result = batch.parse_record(record, model=MODEL, tools_field="tools")
        assert list(result) == ["error"] and result["error"]["type"] == kind, (record, result)
    assert batch.parse_record({"output": "Hi"}, model=MODEL, default_prefix="") == {
        "message": {"role": "assistant", "content": "Hi"}
    }
    with pytest.raises(batch.UnknownModel):
        batch.parse_record(good, model="no_such_model")
    with pytest.raises(batch.UnknownModel):
        batch.get_parser("../etc")


def test_parse_batch_columnar_like_map_batches() -> None:
    cases = strict_cases(MODEL)
    # Ray Data / pandas hand columns over as sequences (numpy arrays, Series); tuples here.
    columns = {
        "id": tuple(range(len(cases) + 2)),
        "output": (*(case["output"] for case in cases), "Bye.<|im_end|>", None),
        "prefix": (*(case["prefix"] for case in cases), math.nan, ""),
        "tools": (*(case.get("tools") for case in cases), None, None),
    }
    result = batch.parse_batch(columns, model=MODEL, tools_field="tools", default_prefix="")
    assert list(result) == ["id", "output", "prefix", "tools", "message", "error"]
    assert result["id"] == list(columns["id"])
    assert all(len(values) == len(cases) + 2 for values in result.values())
    for case, message, error in zip(
        cases, result["message"][: len(cases)], result["error"][: len(cases)], strict=True
    ):
        if "error" in case:
            assert message is None and error["type"] == raised(MODEL, case)
        else:
            assert message == case["expected"] and error is None
    assert result["message"][-2] == {"role": "assistant", "content": "Bye."}  # NaN prefix: default
    assert result["message"][-1] is None and result["error"][-1]["type"] == "KeyError"

    as_json = batch.parse_batch(
        columns, model=MODEL, tools_field="tools", default_prefix="", as_json=True
    )
    assert [None if text is None else json.loads(text) for text in as_json["message"]] == result[
        "message"
    ]
    assert all(text is None or isinstance(text, str) for text in as_json["error"])

    no_output = batch.parse_batch({"id": [1, 2]}, model=MODEL)
    assert [error["type"] for error in no_output["error"]] == ["KeyError", "KeyError"]
    assert batch.parse_batch({}, model=MODEL) == {"message": [], "error": []}


def test_parse_batch_with_numpy_columns() -> None:
    # Ray Data's default batch format: a dict of numpy arrays (numpy.str_ values, None in
    # object columns).
    np = pytest.importorskip("numpy")
    batch_in = {
        "id": np.arange(3),
        "output": np.array(["Hi<|im_end|>", "<think>x</think>Yo<|im_end|>", "y"]),
        "prefix": np.array(["", None, 7], dtype=object),
    }
    result = batch.parse_batch(batch_in, model=MODEL, default_prefix="", as_json=True)
    assert [json.loads(text) if text else None for text in result["message"]] == [
        {"role": "assistant", "content": "Hi"},
        {"role": "assistant", "thinking": "x", "content": "Yo"},
        None,
    ]
    assert json.loads(result["error"][2])["type"] == "TypeError"  # prefix 7 is not a string
    assert list(result["id"]) == [0, 1, 2]


def test_parse_records_with_a_process_pool() -> None:
    records = strict_cases(MODEL) * 3
    chunks = [records[i : i + 4] for i in range(0, len(records), 4)]
    work = functools.partial(batch.parse_records, model=MODEL, tools_field="tools")
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = [result for chunk in pool.map(work, chunks) for result in chunk]
    assert results == batch.parse_records(records, model=MODEL, tools_field="tools")
    for record, result in zip(records, results, strict=True):
        if "error" in record:
            assert result["error"]["type"] == raised(MODEL, record)
        else:
            assert result == {"message": record["expected"]}


def test_batch_needs_no_compiler() -> None:
    script = (
        "import sys\n"
        "from integrations.batch import parse_batch\n"
        "out = parse_batch({'output': ['Hi<|im_end|>'], 'prefix': ['']}, model='smollm3')\n"
        "assert out['message'] == [{'role': 'assistant', 'content': 'Hi'}], out\n"
        "print(','.join(m for m in ('compiler', 'jinja2', 'black') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


# -- installed use: safety of the output, bounded errors, what gets imported -------------


def test_parse_jsonl_refuses_to_write_onto_its_input(
    jsonl: tuple[Path, dict[int, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = jsonl
    before = path.read_bytes()
    alias = tmp_path / "alias.jsonl"
    os.link(path, alias)  # another name for the same file
    for output in (str(path), str(alias), str(tmp_path / "." / path.name)):
        assert main(["parse-jsonl", "--model", MODEL, str(path), output]) == 2
        assert "is the input file" in capsys.readouterr().err
    assert path.read_bytes() == before


def test_parse_jsonl_replaces_the_output_only_when_done(
    jsonl: tuple[Path, dict[int, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, expected = jsonl
    out = tmp_path / "out.jsonl"
    out.write_text("previous results\n", encoding="utf-8")
    out.chmod(0o640)
    real = batch.parse_jsonl_chunk
    calls = []

    def failing(lines: Any, **options: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the run is interrupted half-way
        return real(lines, **options)

    monkeypatch.setattr(batch, "parse_jsonl_chunk", failing)
    args = ["parse-jsonl", "--model", MODEL, "--jobs", "1", "--chunk-size", "3", "--no-progress"]
    with pytest.raises(KeyboardInterrupt):
        main([*args, str(path), str(out)])
    assert out.read_text(encoding="utf-8") == "previous results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]  # no temp left
    monkeypatch.setattr(batch, "parse_jsonl_chunk", real)
    assert main([*args, "--tools-field", "tools", str(path), str(out)]) == 0
    check_results(out.read_text(encoding="utf-8"), expected)
    assert out.stat().st_mode & 0o777 == 0o640  # the replaced file keeps its permissions
    assert main([*args, str(path), os.devnull]) == 0  # a device is written, not replaced
    assert Path(os.devnull).is_char_device()


def test_errors_on_stderr_are_one_bounded_line(tmp_path: Path) -> None:
    huge = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "' + "Paris\n" * 200_000
    (tmp_path / "out.txt").write_text(huge, encoding="utf-8")
    result = run_cli("parse", "--model", MODEL, "--prefix", "", str(tmp_path / "out.txt"))
    assert result.returncode == 1
    err = result.stderr.decode("utf-8")
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert len(err) <= 600, len(err)
    from cli.common import one_line

    assert one_line("a\nb") == "a\\nb"
    cut = one_line("x" * 10_000 + "END")
    assert len(cut) <= 520 and cut.endswith("END") and "characters]" in cut


def test_bad_tools_are_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "out.txt").write_text("Hi<|im_end|>", encoding="utf-8")
    for tools, message in (
        ({"a": 1}, "got dict"),
        ("hello", "got str"),
        ([1, 2], "tools[0]: a tool is a schema (a dict) or a function, got int"),
        ([{"type": "function", "function": {}}], "tools[0]: a tool schema names its function"),
    ):
        (tmp_path / "tools.json").write_text(json.dumps(tools), encoding="utf-8")
        args = ["parse", "--model", MODEL, "--tools", str(tmp_path / "tools.json")]
        assert main([*args, str(tmp_path / "out.txt")]) == 2
        assert message in capsys.readouterr().err
        with pytest.raises((TypeError, ValueError), match=re.escape(message)):
            batch.get_parser(MODEL).parse("Hi<|im_end|>", prefix="", tools=tools)


def test_parse_imports_no_compiler(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text("<think>x</think>Hi<|im_end|>", encoding="utf-8")
    (tmp_path / "in.jsonl").write_text('{"output": "Hi<|im_end|>"}\n', encoding="utf-8")
    script = (
        "import sys\n"
        "from cli.app import main\n"
        f"assert main(['parse', '--model', 'smollm3', {str(tmp_path / 'out.txt')!r}]) == 0\n"
        f"assert main(['parse-jsonl', '--model', 'smollm3', '--jobs', '1', "
        f"{str(tmp_path / 'in.jsonl')!r}, {str(tmp_path / 'out.jsonl')!r}]) == 0\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('compiler', 'jinja2', 'black', 'transformers'))\n"
        "print('LOADED', loaded)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "LOADED []"


def test_missing_build_extra_is_named(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "sys.modules['jinja2'] = None  # as if jinja2 were not installed\n"
        "from compiler import load_parser\n"
        "try:\n"
        "    load_parser({'start_anchor': 'A', 'fields': {'content': {}}})\n"
        "except ModuleNotFoundError as error:\n"
        "    print(error.name, '|', error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "jinja2 | compiling a template needs jinja2, which is not installed: "
        "pip install 'response-template-compiler[build]'"
    )


def test_build_commands_fail_without_catalog_data(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import templates_catalog

    monkeypatch.setattr(templates_catalog, "names", lambda: [])  # as if the JSON were not shipped
    for command in (["lint"], ["catalog"], ["check"], ["compile-all"]):
        assert main(command) == 2
        assert "package data is missing" in capsys.readouterr().err


def test_compile_from_an_installed_package_needs_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from compiler import catalog

    monkeypatch.setattr(catalog, "in_checkout", lambda: False)
    assert main(["compile", MODEL]) == 2
    assert "give --out DIR" in capsys.readouterr().err
    assert main(["catalog", "--write"]) == 2
    capsys.readouterr()
    assert main(["compile", MODEL, "--out", str(tmp_path / "mods")]) == 0
    written = tmp_path / "mods" / f"{MODEL}.py"
    assert capsys.readouterr().out == f"wrote {written.as_posix()}\n"
    assert written.read_text(encoding="utf-8") == (ROOT / "generated" / f"{MODEL}.py").read_text(
        encoding="utf-8"
    )
    assert main(["compile", MODEL, "--out", str(tmp_path / "mods")]) == 0
    assert capsys.readouterr().out == "up to date\n"


def test_model_may_be_a_hugging_face_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.txt"
    out.write_text('Hi <tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>')
    assert main(["parse", "--model", "Qwen/Qwen3-8B", str(out)]) == 0
    message = json.loads(capsys.readouterr().out)
    assert message["tool_calls"][0]["function"] == {"name": "f", "arguments": {"a": 1}}
    assert main(["parse", "--model", "Nobody/NoSuchModel-7B", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "NoSuchModel" in error


def test_regex_timeout_reaches_the_parser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from compiler import load_parser

    runaway = load_parser(
        {"start_anchor": "A:", "fields": {"x": {"open_pattern": r"(?:a|aa)+(?:b|c)\Z"}}}
    )
    monkeypatch.setattr(batch, "get_parser", lambda model: runaway)
    out = tmp_path / "out.txt"
    out.write_text("a" * 60 + "d")
    args = ["parse", "--model", MODEL, "--prefix", "", "--regex-timeout", "0.05", str(out)]
    assert main(args) == 1
    error = capsys.readouterr().err
    assert "RegexTimeout" in error and "fields.x.open_pattern" in error
    assert main([*args[:5], "--regex-timeout", "-1", str(out)]) == 2
