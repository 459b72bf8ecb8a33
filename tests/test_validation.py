"""Template validation: the reference's accept/reject rules, with key paths in messages."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import templates
from transformers.utils.chat_parsing.response_templates import load_response_template

from compiler import compile_source
from compiler.errors import TemplateError, TemplateTypeError
from compiler.spec import build_template, load

BASE: dict[str, Any] = {
    "start_anchor": "<s>",
    "fields": {
        "x": {"open": "<x>", "close": "</x>"},
        "content": {"close": "<end>"},
    },
}


def variant(**changes: Any) -> dict[str, Any]:
    """BASE with dotted-path changes; a value of ... deletes the key."""
    template = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = template
        for key in parents:
            node = node[key]
        if value is ...:
            del node[last]
        else:
            node[last] = value
    return template


REJECTED = [
    ("not an object", ["a list"], "response_template: must be an object"),
    ("unsupported version", variant(version=2), "version: unsupported"),
    ("unknown top-level key", variant(extra=1), "response_template: unknown keys ['extra']"),
    ("defaults not an object", variant(defaults=[]), "defaults: must be an object"),
    ("no fields", variant(fields={}), "fields: must be a non-empty object"),
    ("fields not an object", variant(fields=[]), "fields: must be a non-empty object"),
    ("field not an object", variant(fields__x=3), "fields.x: must be an object"),
    ("unknown field key", variant(fields__x__colour="red"), "fields.x: unknown keys ['colour']"),
    (
        "unknown content parser",
        variant(fields__x__content="yaml"),
        "fields.x.content: unknown content parser 'yaml'",
    ),
    (
        "open and open_pattern",
        variant(fields__x__open_pattern="<x>"),
        "fields.x: cannot specify both 'open'",
    ),
    (
        "close and close_pattern",
        variant(fields__x__close_pattern="</x>"),
        "fields.x: cannot specify both 'close'",
    ),
    (
        "empty open list",
        variant(fields__x__open=[]),
        "fields.x.open: list must contain at least one literal",
    ),
    (
        "non-string in open list",
        variant(fields__x__open=["<x>", 1]),
        "fields.x.open: list must contain only strings",
    ),
    (
        "open of the wrong type",
        variant(fields__x__open=3),
        "fields.x.open: must be a string or a list",
    ),
    ("open null", variant(fields__x__open=None), "fields.x.open: must be a string or a list"),
    ("empty open literal", variant(fields__x__open=""), "fields.x.open: literals cannot be empty"),
    (
        "empty close literal in a list",
        variant(fields__x__close=["</x>", ""]),
        "fields.x.close: literals cannot be empty",
    ),
    (
        "invalid open_pattern",
        variant(fields__x__open=..., fields__x__open_pattern="(unclosed"),
        "fields.x.open_pattern: invalid regex",
    ),
    (
        "invalid close_pattern",
        variant(fields__x__close=..., fields__x__close_pattern="[a-"),
        "fields.x.close_pattern: invalid regex",
    ),
    (
        "join not a string",
        variant(fields__x__join=1, fields__x__repeats=True),
        "fields.x.join: must be a string",
    ),
    (
        "join without repeats",
        variant(fields__x__join=""),
        "fields.x.join: requires 'repeats': true",
    ),
    (
        "transform_each not a boolean",
        variant(fields__x__transform_each=1),
        "fields.x.transform_each: must be a boolean",
    ),
    (
        "transform_each without transform",
        variant(fields__x__transform_each=True),
        "fields.x.transform_each: is set",
    ),
    (
        "placeholder mixed with text",
        variant(fields__x__transform={"function": {"name": "call {name}"}}),
        "fields.x.transform.function.name: transform string 'call {name}' mixes",
    ),
    (
        "named group without transform",
        variant(fields__x__open=..., fields__x__open_pattern="<x=(?P<name>\\w+)>"),
        "fields.x: open_pattern/close_pattern declare named groups ['name']",
    ),
    (
        "two implicit fields",
        variant(fields__x__open=...),
        "fields: at most one field may omit 'open'",
    ),
    (
        "no start anchor",
        variant(start_anchor=...),
        "must define 'start_anchor' or 'start_anchor_pattern'",
    ),
    (
        "both start anchors",
        variant(start_anchor_pattern="<s>"),
        "cannot specify both 'start_anchor'",
    ),
    (
        "empty start anchor list",
        variant(start_anchor=[]),
        "start_anchor: list must contain at least one literal",
    ),
    (
        "invalid start_anchor_pattern",
        variant(start_anchor=..., start_anchor_pattern="("),
        "start_anchor_pattern: invalid regex",
    ),
    (
        "quoted field name",
        variant(fields={"tool calls": {"open": ""}}),
        'fields["tool calls"].open: literals cannot be empty',
    ),
]

REJECTED_AS_TYPE_ERROR = [
    ("unhashable content parser", variant(fields__x__content=["json"]), "fields.x.content"),
    (
        "non-string open_pattern",
        variant(fields__x__open=..., fields__x__open_pattern=5),
        "fields.x.open_pattern",
    ),
    (
        "null close_pattern",
        variant(fields__x__close=..., fields__x__close_pattern=None),
        "fields.x.close_pattern",
    ),
]


@pytest.mark.parametrize("label, template, message", REJECTED, ids=[case[0] for case in REJECTED])
def test_rejected_like_the_reference(label: str, template: Any, message: str) -> None:
    with pytest.raises(ValueError):
        load_response_template(template)
    with pytest.raises(TemplateError) as caught:
        build_template(template)
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "label, template, path", REJECTED_AS_TYPE_ERROR, ids=[c[0] for c in REJECTED_AS_TYPE_ERROR]
)
def test_type_errors_keep_their_class(label: str, template: Any, path: str) -> None:
    with pytest.raises(TypeError):
        load_response_template(template)
    with pytest.raises(TemplateTypeError) as caught:
        build_template(template)
    assert str(caught.value).startswith(path)


ACCEPTED = [
    ("version 1.0", variant(version=1.0)),
    ("duplicate literals", variant(fields__x__open=["<x>", "<x>", "<y>"])),
    ("content_args not an object (fails only at close)", variant(fields__x__content_args=None)),
    (
        "unknown value_parser (fails only at close)",
        variant(
            fields__x__content="kv-lines",
            fields__x__content_args={"value_parser": {"name": "nope"}},
        ),
    ),
    ("repeats of any truthiness", variant(fields__x__repeats="yes", fields__x__join="")),
    (
        "close_pattern groups reach no transform",
        variant(
            fields__x__close=...,
            fields__x__close_pattern="(?P<g></x>)",
            fields__x__transform="{content}",
        ),
    ),
    ("magic-looking literal 'eos' is a literal", variant(fields__content__close="eos")),
]


@pytest.mark.parametrize("label, template", ACCEPTED, ids=[case[0] for case in ACCEPTED])
def test_accepted_like_the_reference(label: str, template: Any) -> None:
    load_response_template(template)
    build_template(template)


def test_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps({"response_template": variant(fields__x__open_pattern="(")}))
    with pytest.raises(TemplateError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}: fields.x: cannot specify both")


def test_nan_is_refused_with_a_reason() -> None:
    """The one documented divergence: a generated module can only embed plain literals."""
    template = variant(defaults={"score": float("nan")})
    load_response_template(template)
    with pytest.raises(TemplateError, match=r"defaults\.score: nan cannot be embedded"):
        build_template(template)


JSON_VALUES = st.sampled_from(
    [None, 0, 1, True, False, "", "x", "(", "<x>", [], ["<x>"], [1], {}, {"a": 1}, 1.5]
)


@st.composite
def mutated_templates(draw: Any) -> Any:
    template = copy.deepcopy(draw(templates())[0])
    for _ in range(draw(st.integers(1, 3))):
        node: Any = template
        while isinstance(node, dict) and node and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(node, key=str)))
            if not isinstance(node[key], dict):
                break
            node = node[key]
        if not isinstance(node, dict):
            continue
        action = draw(st.sampled_from(["set", "delete", "add"]))
        keys = sorted(node, key=str)
        if action == "add" or not keys:
            node[
                draw(
                    st.sampled_from(
                        ["open", "close_pattern", "join", "transform", "content", "bogus"]
                    )
                )
            ] = draw(JSON_VALUES)
        elif action == "delete":
            del node[draw(st.sampled_from(keys))]
        else:
            node[draw(st.sampled_from(keys))] = draw(JSON_VALUES)
    return template


@given(template=mutated_templates())
def test_accepts_exactly_what_the_reference_accepts(template: Any) -> None:
    try:
        load_response_template(template)
    except Exception as error:
        with pytest.raises(TemplateError) as caught:
            build_template(template)
        assert isinstance(
            caught.value, type(error)
        ), f"reference raised {type(error).__name__}: {error}"
        return
    compile_source(template, "mutant", format=False)
