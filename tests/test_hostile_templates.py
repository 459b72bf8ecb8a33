"""Hostile templates: text that tries to become code in the generated module.

Every string a template can carry (field names, literals, patterns, defaults, transform
keys and values, content_args) is filled with adversarial text: quotes, triple quotes,
backslashes, line breaks that end comments (\\r, \\u2028), NUL, Jinja syntax and Python
that would leave a canary in `builtins` if it ever ran. The compiled module must parse,
import without running any of it, embed the template unchanged, and parse output exactly
as the reference does.
"""

from __future__ import annotations

import builtins
import types
from typing import Any

import regex
from differential import check
from fixtures import final_outcome
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples
from strategies import chunkings
from transformers.utils.chat_parsing.response_templates import load_response_template

from compiler import compile_source, load_parser
from compiler.errors import TemplateError

CANARY = "RTC_CANARY"
PAYLOAD = f"__import__('builtins').__setattr__('{CANARY}', 1)"
ADVERSARIAL = [
    '"',
    "'",
    '"""',
    "'''",
    "\\",
    "\\'",
    "\r",
    "\n",
    "\r\n",
    "\x00",
    "\u2028",
    "\u0085",
    "\x0c",
    "#",
    "{{",
    "}}",
    "{%",
    "%}",
    "{#",
    "{{ 7 * 7 }}",
    "{% raw %}",
    PAYLOAD,
    f'"); {PAYLOAD}; ("',
    f"'''; {PAYLOAD}; '''",
    f'"""\n{PAYLOAD}\n"""',
    f"\r{PAYLOAD}",
    f"\u2028{PAYLOAD}",
    f"# coding: latin-1\n{PAYLOAD}",
    f"{{{{ {PAYLOAD} }}}}",
    "__init__",
    "class",
    "None",
    "self",
    "_state",
    "feed",
    "START",
    "SINK",
    "日本語",
    "🙂",
]
TEXT = st.sampled_from(ADVERSARIAL) | st.lists(
    st.sampled_from(ADVERSARIAL), min_size=2, max_size=3
).map("".join)


@st.composite
def hostile_templates(draw: Any) -> tuple[dict[str, Any], list[str]]:
    """A template the reference accepts, with adversarial text everywhere it can go."""
    names = draw(st.lists(TEXT, min_size=1, max_size=3, unique=True))
    literals: list[str] = []
    fields: dict[str, Any] = {}
    for index, name in enumerate(names):
        field: dict[str, Any] = {}
        if index or draw(st.booleans()):
            opener = draw(TEXT)
            literals.append(opener)
            if draw(st.booleans()):
                field["open"] = opener
            else:
                field["open_pattern"] = regex.escape(opener)
        if draw(st.booleans()):
            closer = draw(TEXT)
            literals.append(closer)
            field["close"] = [closer, draw(TEXT)] if draw(st.booleans()) else closer
        kind = draw(st.sampled_from(["text", "json", "xml-inline", "kv-lines"]))
        field["content"] = kind
        if kind == "json":
            field["content_args"] = {
                "string_delims": [[draw(TEXT), draw(TEXT)]],
                "allow_non_json": True,
            }
        elif kind == "xml-inline":
            key = regex.escape(draw(TEXT))
            field["content_args"] = {"tag_pattern": f"(?P<key>{key})=(?P<value>[^;]*);"}
        elif kind == "kv-lines":
            field["content_args"] = {
                "line_sep": draw(TEXT),
                "kv_sep": draw(TEXT),
                "strip": draw(st.booleans()),
            }
        if draw(st.booleans()):
            field["transform"] = {
                draw(TEXT): draw(TEXT),
                "value": "{content}",
                draw(TEXT): [draw(TEXT), 1, None],
            }
        if draw(st.booleans()):
            field["repeats"] = True
        fields[name] = field
    if not any("open" not in f and "open_pattern" not in f for f in fields.values()):
        pass  # no implicit field: text outside regions is dropped
    elif sum("open" not in f and "open_pattern" not in f for f in fields.values()) > 1:
        first = next(n for n, f in fields.items() if "open" not in f and "open_pattern" not in f)
        fields = {first: fields[first]} | {
            n: f for n, f in fields.items() if "open" in f or "open_pattern" in f
        }
    anchor = draw(TEXT)
    template = {
        "defaults": {draw(TEXT): draw(TEXT), "role": draw(TEXT)},
        "start_anchor": anchor,
        "fields": fields,
    }
    return template, [*literals, anchor]


def _no_canary() -> None:
    assert not hasattr(builtins, CANARY), "template text was executed"


@given(data=st.data())
def test_hostile_template_compiles_to_inert_code(data: Any) -> None:
    template, literals = data.draw(hostile_templates())
    try:
        load_response_template(template)
    except (ValueError, TypeError):
        try:
            compile_source(template, "hostile", format=False)
        except TemplateError:
            return
        raise AssertionError("the reference rejects this template, so must we") from None
    source = compile_source(template, "hostile", source="<hostile>", format=False)
    lines = source.splitlines()
    assert lines[0].startswith("# @generated") and lines[1].startswith(
        "# Compiled from"
    ), "lines 1-2 are fixed"
    module = types.ModuleType("hostile")
    exec(compile(source, "<hostile>", "exec"), module.__dict__)
    _no_canary()
    assert module.TEMPLATE == template
    parser = load_parser(template)
    output = "".join(
        data.draw(st.lists(st.sampled_from([*literals, "a", "k=v;", "x: 1", "{}"]), max_size=8))
    )
    check(template, parser, "", data.draw(chunkings(output)))
    check(template, parser, literals[-1] + output[:3], [output[3:]])
    _no_canary()


@settings(max_examples=examples(40))
@given(template=hostile_templates())
def test_hostile_template_formats_with_black(template: Any) -> None:
    """The formatted module (what `make compile` writes) is just as inert."""
    template = template[0]
    try:
        load_response_template(template)
    except (ValueError, TypeError):
        return
    source = compile_source(template, "hostile", source="<hostile>")
    exec(compile(source, "<hostile>", "exec"), types.ModuleType("hostile").__dict__)
    _no_canary()


def test_the_canary_would_catch_execution() -> None:
    """The check above can fail: running the payload does leave the canary."""
    exec(PAYLOAD)
    try:
        assert hasattr(builtins, CANARY)
    finally:
        delattr(builtins, CANARY)


@st.composite
def hostile_extension_templates(draw: Any) -> dict[str, Any]:
    """Templates using every extension, with adversarial text in each string they carry."""
    kind = draw(TEXT)
    tag = regex.escape(draw(TEXT))
    return {
        "defaults": {draw(TEXT): draw(TEXT)},
        "start_anchor": draw(TEXT),
        "fields": {
            draw(TEXT): {
                "open": "<<a>>",
                "close": "<</a>>",
                "content": "x-xml-inline",
                "content_args": {
                    "tag_pattern": f"(?P<key>{tag})(?P<kind>{regex.escape(kind)})?=(?P<value>[^;]*);",
                    "kind_parsers": {kind: {"name": "json", "args": {"allow_non_json": True}}},
                },
                "transform": {draw(TEXT): {"x-first": ["{content." + "k}", draw(TEXT)]}},
            },
            draw(TEXT): {
                "open": "<<b>>",
                "content": "x-json-stream",
                "content_args": {"separators": [draw(TEXT)], "skip_invalid": True},
                "x-extend": True,
                "transform": {"x-each": ["{content}", {draw(TEXT): {"x-json-decode": "{item}"}}]},
            },
            draw(TEXT): {
                "open": "<<c>>",
                "close": "<</c>>",
                "content": "x-pythonic",
                "transform": {
                    "x-each": ["{content}", {"x-single-key": {draw(TEXT): "{item.name}"}}]
                },
            },
        },
    }


@given(template=hostile_extension_templates(), data=st.data())
def test_hostile_extension_template_compiles_to_inert_code(template: Any, data: Any) -> None:
    source = compile_source(template, "hostile", source="<hostile>", format=False)
    module = types.ModuleType("hostile")
    exec(compile(source, "<hostile>", "exec"), module.__dict__)
    _no_canary()
    assert module.TEMPLATE == template
    parser = load_parser(template)
    output = "".join(
        data.draw(
            st.lists(
                st.sampled_from(
                    [
                        "<<a>>",
                        "<</a>>",
                        "<<b>>",
                        "<<c>>",
                        "<</c>>",
                        '{"x": 1}',
                        "[f(a=1)]",
                        "k=v;",
                        "a",
                    ]
                ),
                max_size=8,
            )
        )
    )

    chunks = data.draw(chunkings(output))
    assert final_outcome(parser, "", chunks) == final_outcome(parser, "", [output])
    _no_canary()
