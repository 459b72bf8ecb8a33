"""The shape of generated code, as a reviewer reads it: no line over MAX_LINE characters,
and a template change of one literal shows up as a diff of a few lines.

Derived data (the alternation of a state's literals, the tuple around a single literal)
is built at run time from the named constants, so a literal is spelled twice in its
module: its constant and the TEMPLATE copy.
"""

from __future__ import annotations

import copy
import difflib
import tokenize
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import examples
from strategies import templates
from test_hostile_templates import hostile_extension_templates, hostile_templates
from transformers.utils.chat_parsing.response_templates import load_response_template

from compiler import compile_source, load_parser
from compiler.catalog import ROOT, entry_names, load_entry
from compiler.emit import LINE_LENGTH, MAX_LINE, format_source, wrap_long_lines
from compiler.errors import TemplateError
from compiler.quoting import quote

# Entries whose literal delimiters are changed one at a time.
LITERAL_ENTRIES = ("smollm3", "qwen3", "gpt_oss", "hermes")
MAX_CHANGED = 4


def long_lines(source: str) -> list[str]:
    return [line for line in source.split("\n") if len(line) > MAX_LINE]


# -- line length ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", entry_names())
def test_no_catalog_module_line_is_over_the_limit(name: str) -> None:
    source = (ROOT / "generated" / f"{name}.py").read_text(encoding="utf-8")
    assert long_lines(source) == []


def _compiled(template: Any) -> str | None:
    """The formatted module for a template the reference accepts, else None."""
    try:
        load_response_template(template)
        return compile_source(template, "shape", source="<shape>")
    except (ValueError, TypeError, TemplateError):
        return None


@settings(max_examples=examples(30), suppress_health_check=[HealthCheck.too_slow])
@given(drawn=hostile_templates())
def test_no_line_is_over_the_limit_for_hostile_templates(drawn: Any) -> None:
    template = drawn[0]
    source = _compiled(template)
    if source is None:
        return
    assert long_lines(source) == []
    namespace: dict[str, Any] = {}
    exec(compile(source, "<shape>", "exec"), namespace)
    assert namespace["TEMPLATE"] == template  # the cut strings are the same values


@settings(max_examples=examples(20), suppress_health_check=[HealthCheck.too_slow])
@given(template=hostile_extension_templates())
def test_no_line_is_over_the_limit_for_hostile_extension_templates(template: Any) -> None:
    source = compile_source(template, "shape", source="<shape>")
    assert long_lines(source) == []
    namespace: dict[str, Any] = {}
    exec(compile(source, "<shape>", "exec"), namespace)
    assert namespace["TEMPLATE"] == template


@settings(max_examples=examples(30), suppress_health_check=[HealthCheck.too_slow])
@given(drawn=templates())
def test_no_line_is_over_the_limit_for_random_templates(drawn: Any) -> None:
    source = _compiled(drawn[0])
    if source is not None:
        assert long_lines(source) == []


@given(
    text=st.text(min_size=MAX_LINE, max_size=400),
    raw=st.booleans(),
    depth=st.integers(0, 12),
)
def test_a_long_string_is_cut_into_pieces_of_the_same_value(
    text: str, raw: bool, depth: int
) -> None:
    literal = quote(text, raw=raw)  # r"..." where that spells the same string
    source = "X = " + "[" * depth + literal + "]" * depth + "\n"
    formatted = format_source(source)
    assert long_lines(formatted) == []
    namespace: dict[str, Any] = {}
    exec(compile(formatted, "<s>", "exec"), namespace)
    value: Any = namespace["X"]
    for _ in range(depth):
        value = value[0]
    assert value == text


def test_long_comments_are_wrapped_and_short_lines_left_alone() -> None:
    comment = "# " + " ".join(["word"] * 40) + "\n"
    wrapped = wrap_long_lines("def f() -> None:\n    " + comment + "    pass\n")
    assert long_lines(wrapped) == [] and wrapped.count("# word") > 1
    short = 'X = "' + "a" * (LINE_LENGTH - 10) + '"\n'
    assert wrap_long_lines(short) == short


def test_a_long_field_name_is_not_an_identifier() -> None:
    name = "field_name_" * 12
    template = {
        "start_anchor": "<s>",
        "fields": {name: {"open": "<x>", "close": "</x>"}, "content": {}},
    }
    source = compile_source(template, "long")
    assert long_lines(source) == []
    assert f"_feed_{name}" not in source
    assert load_parser(template).parse("a<x>b</x>", prefix="")[name] == "b"


# -- one literal changed -------------------------------------------------------------------


def body_lines(source: str) -> list[str]:
    """The module without its provenance header (the comment lines before the docstring)."""
    lines = source.splitlines()
    start = 0
    while lines[start].startswith("#"):
        start += 1
    return lines[start:]


def changed_lines(before: str, after: str) -> int:
    """Lines the diff of two modules changes, header excluded: max(removed, added)."""
    removed = added = 0
    diff = difflib.unified_diff(body_lines(before), body_lines(after), lineterm="", n=0)
    for line in diff:
        if line.startswith(("---", "+++", "@@")):
            continue
        removed += line.startswith("-")
        added += line.startswith("+")
    return max(removed, added)


def literal_changes(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, changed template) for each literal delimiter, changed two ways: inside
    (`</think>` -> `</thinking>`) and at its first character (`</think>` -> `@/think>`,
    which changes what the fast path watches for)."""
    for field, spec in template["fields"].items():
        for kind in ("open", "close"):
            value = spec.get(kind)
            items = [value] if isinstance(value, str) else value or []
            for index, literal in enumerate(items):
                for new in (literal[:-1] + "ing" + literal[-1], "@" + literal[1:]):
                    changed = copy.deepcopy(template)
                    if isinstance(value, str):
                        changed["fields"][field][kind] = new
                    else:
                        changed["fields"][field][kind][index] = new
                    yield f"fields.{field}.{kind}[{index}] {literal!r} -> {new!r}", changed


@pytest.mark.parametrize("name", LITERAL_ENTRIES)
def test_one_literal_change_changes_few_lines(name: str) -> None:
    template = load_entry(name).data["response_template"]
    before = compile_source(template, name)
    counts = {
        label: changed_lines(before, compile_source(changed, name))
        for label, changed in literal_changes(template)
    }
    assert counts, f"{name} has no literal delimiter"
    assert all(count >= 2 for count in counts.values())  # the constant and the TEMPLATE copy
    assert {label: n for label, n in counts.items() if n > MAX_CHANGED} == {}


def test_a_literal_is_spelled_in_its_constant_and_the_template_only() -> None:
    source = (ROOT / "generated" / "smollm3.py").read_text(encoding="utf-8")
    strings = [
        token.string
        for token in tokenize.generate_tokens(iter(source.splitlines(keepends=True)).__next__)
        if token.type == tokenize.STRING
    ]
    assert strings.count('"</think>"') == 2
    assert "re.compile" not in source  # the state's literal alternation is built at run time


def test_changed_lines_counts_a_real_change() -> None:
    before = "# header\nA = 1\nB = 2\nC = 3\n"
    assert changed_lines(before, "# other\nA = 1\nB = 5\nC = 3\n") == 1
    assert changed_lines(before, "# header\nA = 1\nB = 2\nC = 3\nD = 4\nE = 5\n") == 2
    assert changed_lines(before, before.replace("# header", "# other")) == 0
