"""Format extensions (x-...): unit, property and streaming tests.

There is no reference for them, so streaming is checked against one-shot parsing: every
chunking must give the same message, and region chunks must add up to the output text.
"""

from __future__ import annotations

import json
import keyword
import warnings
from typing import Any

import pytest
import regex
from hypothesis import example, given
from hypothesis import strategies as st
from strategies import chunkings

import runtime.errors
from compiler import load_parser
from compiler.errors import TemplateError
from compiler.lint import lint
from compiler.spec import build_template, uses_extensions
from runtime.content import parse_xml_inline
from runtime.errors import RegexTimeout
from runtime.extensions import (
    as_list,
    first_of,
    json_decode,
    parse_json_stream,
    parse_pythonic,
    single_key,
    unwrap_text,
)

# -- x-pythonic --------------------------------------------------------------------------

# Names Python can write: a keyword (`[as()]`, `f(from=1)`) is not call syntax, for us as for
# the peers' pythonic parsers, which also go through `ast`.
NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,8}(\.[a-z_][a-z0-9_]{0,5})?", fullmatch=True).filter(
    lambda name: not any(keyword.iskeyword(part) for part in name.split("."))
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
CALLS = st.lists(
    st.tuples(
        NAMES,
        st.dictionaries(
            st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True).filter(
                lambda key: not keyword.iskeyword(key)
            ),
            VALUES,
            max_size=4,
        ),
    ),
    max_size=4,
)


def python_call(name: str, arguments: dict[str, Any]) -> str:
    return f"{name}(" + ", ".join(f"{key}={value!r}" for key, value in arguments.items()) + ")"


@given(calls=CALLS)
def test_pythonic_reads_back_what_python_writes(calls: list[tuple[str, dict[str, Any]]]) -> None:
    expected = [{"name": name, "arguments": arguments} for name, arguments in calls]
    listed = "[" + ", ".join(python_call(name, arguments) for name, arguments in calls) + "]"
    assert parse_pythonic(listed) == expected
    lines = "\n".join(python_call(name, arguments) for name, arguments in calls)
    assert parse_pythonic(lines, bracketed=False) == expected


def test_pythonic_json_literals_and_refusals() -> None:
    assert parse_pythonic("[f(a=true, b=null, c=[false])]") == [
        {"name": "f", "arguments": {"a": True, "b": None, "c": [False]}}
    ]
    with pytest.raises(ValueError, match="not a literal"):
        parse_pythonic("[f(a=true)]", json_literals=False)
    for bad in (
        "[f(1)]",
        "[f(**k)]",
        "[x]",
        "[f(a=open('x'))]",
        "[f(a=b'x')]",
        "[f(a=1e999)]",
        "f(a=1",
        "{}",
    ):
        with pytest.raises(ValueError):
            parse_pythonic(bad)


# Python-like expression text: names, literals, calls, brackets, operators, unpacking.
EXPRESSION_TOKENS = st.sampled_from(
    [*"f x .y ( ) [ ] { } , : = a= 1 - + 's' ** * None true 1j b'x' lambda:0 if else".split(), " "]
)


@given(tokens=st.lists(EXPRESSION_TOKENS, max_size=14))
@example(tokens=["[", "f", "(", "a=", "{", "x", ":", "1", "}", ")", "]"])  # a name as a dict key
def test_pythonic_refusals_are_the_same_each_run(tokens: list[str]) -> None:
    """Any text is read or refused with a ValueError in our words: nothing of Python's own
    that names an object's address (`<ast.Name object at 0x...>`), which would make a parse
    error differ from run to run."""
    text = "".join(tokens)
    for bracketed in (True, False):
        try:
            parse_pythonic(text, bracketed=bracketed)
        except ValueError as error:
            assert str(error).startswith("x-pythonic: "), str(error)
            assert " at 0x" not in str(error)


def test_pythonic_never_evaluates() -> None:
    with pytest.raises(ValueError):
        parse_pythonic("[f(a=__import__('os').system('false'))]")


# -- x-json-stream ------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@given(
    values=st.lists(JSON_VALUES, max_size=5),
    separator=st.sampled_from([" ", "\n", ";", "; ", "<|python_tag|>"]),
)
def test_json_stream_reads_back_concatenated_values(values: list[Any], separator: str) -> None:
    text = separator.join(json.dumps(value) for value in values)
    assert parse_json_stream(text, separators=(";", "<|python_tag|>")) == values


def test_json_stream_invalid_stretches() -> None:
    text = '{"a": 1}\nnot json here\n{"b": 2}'
    with pytest.raises(ValueError, match="x-json-stream"):
        parse_json_stream(text)
    assert parse_json_stream(text, skip_invalid=True) == [{"a": 1}, {"b": 2}]


# -- x-xml-inline -------------------------------------------------------------------------

DSML_TAG = (
    r'<｜DSML｜parameter name="(?P<key>[^"]+)"(?: string="(?P<kind>true|false)")?>'
    r"(?P<value>.*?)</｜DSML｜parameter>"
)
DSML = {
    "start_anchor": "<｜Assistant｜>",
    "fields": {
        "tool_calls": {
            "open_pattern": r'\s*<｜DSML｜invoke name="(?P<name>[^"]+)">',
            "close": "</｜DSML｜invoke>",
            "repeats": True,
            "content": "x-xml-inline",
            "content_args": {
                "tag_pattern": DSML_TAG,
                "kind_parsers": {"false": {"name": "json", "args": {"allow_non_json": True}}},
            },
            "transform": {
                "type": "function",
                "function": {"name": "{name}", "arguments": "{content}"},
            },
        },
        "content": {"close": "<｜end▁of▁sentence｜>"},
    },
}


def dsml_parameter(key: str, value: Any) -> str:
    if isinstance(value, str):
        return f'<｜DSML｜parameter name="{key}" string="true">{value}</｜DSML｜parameter>'
    return f'<｜DSML｜parameter name="{key}" string="false">{json.dumps(value)}</｜DSML｜parameter>'


PARAMETER_KEYS = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
PARAMETER_TEXT = st.text(st.characters(blacklist_characters="<"), max_size=10)


@given(
    calls=st.lists(
        st.tuples(
            NAMES,
            st.dictionaries(PARAMETER_KEYS, st.one_of(PARAMETER_TEXT, JSON_VALUES), max_size=3),
        ),
        max_size=3,
    ),
    data=st.data(),
)
def test_xml_inline_kinds_choose_the_value_parser(
    calls: list[tuple[str, dict[str, Any]]], data: Any
) -> None:
    """string="true" keeps the raw text (even "5" or "null"); string="false" decodes JSON."""
    parser = load_parser(DSML)
    output = "Checking." + "".join(
        f'\n<｜DSML｜invoke name="{name}">\n'
        + "\n".join(dsml_parameter(key, value) for key, value in arguments.items())
        + "\n</｜DSML｜invoke>"
        for name, arguments in calls
    )
    expected = [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]
    assert parser.parse(output, prefix="").get("tool_calls", []) == expected
    streaming = parser("")
    for chunk in data.draw(chunkings(output)):
        streaming.feed(chunk)
    assert streaming.finalize()[0].get("tool_calls", []) == expected


def test_xml_inline_untyped_tags_use_the_value_parser() -> None:
    pattern = regex.compile(DSML_TAG, regex.DOTALL)
    text = '<｜DSML｜parameter name="a">7</｜DSML｜parameter><｜DSML｜parameter name="b" string="false">7</｜DSML｜parameter>'
    assert parse_xml_inline(text, pattern, kind_parsers={"false": json.loads}) == {"a": "7", "b": 7}
    assert parse_xml_inline(text, pattern, value_parser=int, kind_parsers={"true": str}) == {
        "a": 7,
        "b": 7,
    }


@pytest.mark.parametrize(
    "args, message",
    [
        ({}, r"content_args\.tag_pattern: required by x-xml-inline"),
        ({"tag_pattern": "(?P<value>.*)"}, r"tag_pattern: needs a named group 'key'"),
        ({"tag_pattern": "(?P<key>a)(", "kind_parsers": {}}, r"tag_pattern: invalid regex"),
        (
            {"tag_pattern": "(?P<key>a)", "kind_parsers": {"x": {"name": "json"}}},
            r"needs a named group 'kind'",
        ),
        (
            {"tag_pattern": "(?P<key>a)(?P<kind>b)", "kind_parsers": {"b": {"name": "yaml"}}},
            r"kind_parsers\.b\.name: unknown content parser",
        ),
        (
            {"tag_pattern": "(?P<key>a)", "value_parser": {"name": "xml-inline"}},
            r"value_parser: .*tag_pattern: required",
        ),
        (
            {"tag_pattern": "(?P<key>a)", "value_parser": {"nam": "json"}},
            r"value_parser: must be an object",
        ),
        (
            {"tag_pattern": "(?P<key>a)", "value_parser": {"name": ["json"]}},
            r"value_parser\.name: unknown content parser",
        ),
    ],
)
def test_xml_inline_arguments_fail_at_build_time(args: dict[str, Any], message: str) -> None:
    """What v1 xml-inline defers to the first close, the extension refuses at build time."""
    template = {
        "start_anchor": "A",
        "fields": {"t": {"open": "[", "content": "x-xml-inline", "content_args": args}},
    }
    with pytest.raises(TemplateError, match=message):
        build_template(template)


# -- transform operations ---------------------------------------------------------------


def test_operations() -> None:
    assert json_decode('{"a": [1]}') == {"a": [1]}
    assert json_decode("not json") == "not json"
    assert json_decode({"a": 1}) == {"a": 1}
    assert single_key({"f": {"x": 1}}) == {"name": "f", "arguments": {"x": 1}}
    with pytest.raises(ValueError):
        single_key({"f": 1, "g": 2})
    assert first_of(lambda: {}["missing"], lambda: 2) == 2
    with pytest.raises(KeyError):
        first_of(lambda: {}["missing"], lambda: {}["also"])


# -- templates that use them ------------------------------------------------------------

PYTHONIC = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "fields": {
        "tool_calls": {
            "open": "<|python_start|>",
            "close": "<|python_end|>",
            "content": "x-pythonic",
            "transform_each": True,
            "transform": {
                "type": "function",
                "function": {"name": "{name}", "arguments": "{arguments}"},
            },
        },
        "content": {"close": "<|eot|>"},
    },
}
JSON_STREAM = {
    "defaults": {"role": "assistant"},
    "start_anchor": "assistant:",
    "fields": {
        "tool_calls": {
            "open": "<|python_tag|>",
            "content": "x-json-stream",
            "content_args": {"separators": [";", "<|python_tag|>"]},
            "transform_each": True,
            "transform": {
                "type": "function",
                "function": {
                    "name": "{name}",
                    "arguments": {
                        "x-json-decode": {"x-first": ["{parameters}", "{arguments}", {}]}
                    },
                },
            },
        },
        "content": {},
    },
}
SINGLE_KEY = {
    "start_anchor": "A:",
    "fields": {
        "tool_calls": {
            "open": "<|tools_prefix|>",
            "close": "<|tools_suffix|>",
            "content": "json",
            "transform_each": True,
            "transform": {"type": "function", "function": {"x-single-key": "{content}"}},
        },
        "content": {},
    },
}


def test_uses_extensions_tells_extension_templates_from_v1() -> None:
    assert uses_extensions(PYTHONIC) == ["x-pythonic"]
    assert uses_extensions(DSML) == ["x-xml-inline"]
    assert uses_extensions(JSON_STREAM) == ["x-first", "x-json-decode", "x-json-stream"]
    apertus = {
        "start_anchor": "A",
        "fields": {"t": {"transform": {"x-each": ["{content}", {"x-single-key": "{item}"}]}}},
    }
    assert uses_extensions(apertus) == ["x-each", "x-single-key"]
    assert uses_extensions(build_template(apertus)) == ["x-each", "x-single-key"]
    # Read from the lowered template: an invalid one is refused, not half-read.
    with pytest.raises(TemplateError, match="start_anchor"):
        uses_extensions({key: value for key, value in apertus.items() if key != "start_anchor"})
    assert (
        uses_extensions(
            {"start_anchor": "A", "fields": {"c": {"transform": {"x-json-decode": 1, "k": 2}}}}
        )
        == []
    )


def test_single_key_objects() -> None:
    # transform_each unpacks each element into scope; a whole-element value needs {content}
    # from a non-each transform, so reshape with x-single-key over a plain json array here.
    template = dict(SINGLE_KEY)
    template["fields"] = dict(SINGLE_KEY["fields"])
    template["fields"]["tool_calls"] = {
        "open": "<|tools_prefix|>",
        "close": "<|tools_suffix|>",
        "content": "json",
        "repeats": True,
        "transform": {"type": "function", "function": {"x-single-key": "{content}"}},
    }
    message = load_parser(template).parse(
        'ok<|tools_prefix|>{"get": {"city": "Oslo"}}<|tools_suffix|>', prefix=""
    )
    assert message["tool_calls"] == [
        {"type": "function", "function": {"name": "get", "arguments": {"city": "Oslo"}}}
    ]


def test_extension_arguments_are_checked_strictly() -> None:
    bad = {
        "start_anchor": "A",
        "fields": {"t": {"open": "[", "content": "x-pythonic", "content_args": {"brackets": 1}}},
    }
    with pytest.raises(
        TemplateError, match=r"fields\.t\.content_args\.brackets: not an argument of x-pythonic"
    ):
        build_template(bad)
    bad = {"start_anchor": "A", "fields": {"t": {"open": "[", "content": "x-yaml"}}}
    with pytest.raises(TemplateError, match="unknown content parser 'x-yaml'"):
        build_template(bad)
    bad = {"start_anchor": "A", "fields": {"t": {"open": "[", "transform": {"x-first": []}}}}
    with pytest.raises(TemplateError, match=r"transform\.x-first: must be a non-empty list"):
        build_template(bad)


@st.composite
def pythonic_outputs(draw: Any) -> str:
    pieces = []
    for _ in range(draw(st.integers(0, 3))):
        pieces.append(draw(st.sampled_from(["Sure. ", "Let me check.\n", "é🙂 ", ""])))
        calls = draw(CALLS.filter(bool))
        pieces.append(
            "<|python_start|>[" + ", ".join(python_call(n, a) for n, a in calls) + "]<|python_end|>"
        )
    return "".join(pieces) + draw(st.sampled_from(["", "Done.", "Done.<|eot|>"]))


@given(data=st.data())
def test_streaming_an_extension_template_gives_the_one_shot_message(data: Any) -> None:
    parser = load_parser(PYTHONIC)
    output = data.draw(pythonic_outputs())
    expected = parser.parse(output, prefix="")
    streaming = parser("")
    events = list(streaming.initial_events)
    for chunk in data.draw(chunkings(output)):
        events += streaming.feed(chunk)
    message, final = streaming.finalize()
    assert message == expected
    chunks = "".join(event["text"] for event in events + final if event["type"] == "region_chunk")
    delimiters = ("<|python_start|>", "<|python_end|>", "<|eot|>")
    stripped = output
    for delimiter in delimiters:
        stripped = stripped.replace(delimiter, "")
    assert chunks == stripped, "region chunks are the output, delimiters removed"
    tool_chunks = [
        e for e in events + final if e["type"] == "region_chunk" and e["field"] == "tool_calls"
    ]
    assert all(e["dirty"] for e in tool_chunks)


@given(data=st.data())
def test_json_stream_template_streams_like_one_shot(data: Any) -> None:
    parser = load_parser(JSON_STREAM)
    calls = data.draw(
        st.lists(
            st.tuples(NAMES, st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=2)),
            max_size=3,
        )
    )
    key = data.draw(st.sampled_from(["parameters", "arguments"]))
    body = "; ".join(json.dumps({"name": name, key: args}) for name, args in calls)
    output = ("Here. <|python_tag|>" + body) if calls else "Nothing to call."
    expected = parser.parse(output, prefix="")
    streaming = parser("")
    for chunk in data.draw(chunkings(output)):
        streaming.feed(chunk)
    assert streaming.finalize()[0] == expected
    if calls:
        assert [call["function"] for call in expected["tool_calls"]] == [
            {"name": n, "arguments": a} for n, a in calls
        ]


def test_each_builds_a_value_per_element() -> None:
    template = {
        "start_anchor": "A:",
        "fields": {
            "tool_calls": {
                "open": "<|tools_prefix|>",
                "close": "<|tools_suffix|>",
                "content": "json",
                "transform": {
                    "x-each": [
                        "{content}",
                        {"type": "function", "function": {"x-single-key": "{item}"}},
                    ]
                },
            },
            "content": {},
        },
    }
    text = 'Hi<|tools_prefix|>[{"get": {"city": "Oslo"}}, {"ping": {}}]<|tools_suffix|>'
    assert load_parser(template).parse(text, prefix="")["tool_calls"] == [
        {"type": "function", "function": {"name": "get", "arguments": {"city": "Oslo"}}},
        {"type": "function", "function": {"name": "ping", "arguments": {}}},
    ]


def test_pythonic_accepts_json_calls_when_asked() -> None:
    assert parse_pythonic('[{"name": "f", "parameters": {"a": 1}}]', accept_json=True) == [
        {"name": "f", "arguments": {"a": 1}}
    ]
    assert parse_pythonic('{"name": "g", "arguments": {}}', accept_json=True) == [
        {"name": "g", "arguments": {}}
    ]
    assert parse_pythonic("[f(a=1)]", accept_json=True) == [{"name": "f", "arguments": {"a": 1}}]


def test_pythonic_is_silent_about_escapes_in_model_text() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse_pythonic(r"[f(a='\<b>')]") == [{"name": "f", "arguments": {"a": "\\<b>"}}]


# -- x-extend ----------------------------------------------------------------------------

# PYTHONIC, where a turn may hold several blocks of calls (and the text between them).
BLOCKS = {
    **PYTHONIC,
    "fields": {
        "tool_calls": {**PYTHONIC["fields"]["tool_calls"], "x-extend": True},
        "content": {"repeats": True, "join": " "},
    },
}


@given(blocks=st.lists(CALLS, min_size=1, max_size=3), data=st.data())
def test_extend_concatenates_the_blocks_of_one_turn(blocks: list[Any], data: Any) -> None:
    """Every block's calls, in order, in one flat list, under any chunking."""
    output = " then ".join(
        "<|python_start|>[" + ", ".join(python_call(n, a) for n, a in calls) + "]<|python_end|>"
        for calls in blocks
    )
    expected = [
        {"type": "function", "function": {"name": n, "arguments": a}}
        for calls in blocks
        for n, a in calls
    ]
    parser = load_parser(BLOCKS)
    streaming = parser("")
    events = []
    for chunk in data.draw(chunkings(output)):
        events += streaming.feed(chunk)
    message, final = streaming.finalize()
    assert message.get("tool_calls", []) == expected
    closes = [
        e["value"]
        for e in events + final
        if e["type"] == "region_close" and e["field"] == "tool_calls"
    ]
    assert [len(value) for value in closes] == [
        len(calls) for calls in blocks
    ], "each close gives its own block"


def test_extend_needs_lists_and_stands_alone() -> None:
    template = {"start_anchor": "A", "fields": {"t": {"open": "[", "close": "]", "x-extend": True}}}
    with pytest.raises(ValueError, match="'x-extend' requires each region to give a list, got str"):
        load_parser(template).parse("[a]", prefix="")
    assert uses_extensions(template) == ["x-extend"]
    for bad, message in [
        ({"x-extend": "yes"}, r"fields\.t\.x-extend: must be a boolean"),
        (
            {"x-extend": True, "repeats": True},
            r"fields\.t\.x-extend: replaces 'repeats' and 'join'",
        ),
        ({"x-extend": True, "repeats": True, "join": ","}, r"x-extend: replaces"),
    ]:
        with pytest.raises(TemplateError, match=message):
            build_template({"start_anchor": "A", "fields": {"t": {"open": "[", **bad}}})


def test_extend_keeps_raw_text_in_lenient_mode() -> None:
    parser = load_parser(BLOCKS)
    message = parser.parse(
        "<|python_start|>[f(a=1)]<|python_end|><|python_start|>[oops(<|python_end|>",
        prefix="",
        on_error="keep_raw",
    )
    assert message["tool_calls"] == [
        {"type": "function", "function": {"name": "f", "arguments": {"a": 1}}},
        "[oops(",
    ]
    assert message["parse_errors"][0]["field"] == "tool_calls"


# -- x-unwrap ---------------------------------------------------------------------------

CITATION = r"<co(?::[^>]*)?>(?P<text>.*?)</co(?::[^>]*)?>"
PLAIN = st.text(st.characters(blacklist_characters="<"), max_size=12)  # never starts markup
CITED = st.text(st.characters(blacklist_characters="<"), min_size=1, max_size=8)
SOURCES = st.from_regex(r": ?[0-9]:\[[0-9](,[0-9])?\]", fullmatch=True)


@given(pieces=st.lists(st.tuples(PLAIN, CITED, SOURCES), max_size=4), tail=PLAIN)
def test_unwrap_keeps_the_wrapped_text_and_drops_the_markup(
    pieces: list[tuple[str, str, str]], tail: str
) -> None:
    pattern = regex.compile(CITATION, regex.DOTALL)
    marked = "".join(f"{before}<co>{cited}</co{sources}>" for before, cited, sources in pieces)
    plain = "".join(before + cited for before, cited, _ in pieces)
    assert unwrap_text(marked + tail, pattern, strip=False) == plain + tail
    assert unwrap_text(marked + tail, pattern) == (plain + tail).strip()
    assert unwrap_text(plain + tail, pattern, strip=False) == plain + tail, "no markup: unchanged"


def test_unwrap_without_a_text_group_removes_each_match() -> None:
    pattern = regex.compile(r"\[\d+\]")
    assert unwrap_text("Paris[1] is big[2].", pattern) == "Paris is big."
    optional = regex.compile(r"<b>(?P<text>[^<]*)</b>|<br/>")
    assert unwrap_text("a<br/>b <b>c</b>", optional) == "ab c"


def test_a_backtracking_unwrap_pattern_fails_on_its_time_bound() -> None:
    """The pattern comes from the template: its search runs under the regex time bound."""
    pattern = regex.compile(r"(a|aa)+c")
    with runtime.errors.bounded_by(0.05), pytest.raises(RegexTimeout, match="x-unwrap"):
        unwrap_text("a" * 40 + "b", pattern)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "pattern: required by x-unwrap"),
        ({"pattern": "("}, "pattern: invalid regex"),
        ({"pattern": "x*"}, "pattern: must not match the empty string"),
        ({"pattern": "(?P<kept>x)"}, "pattern: only the named group 'text' is used"),
        ({"pattern": "x", "keep": "text"}, "keep: not an argument of x-unwrap"),
    ],
)
def test_unwrap_arguments_fail_at_build_time(args: dict[str, Any], message: str) -> None:
    template = {"start_anchor": "A", "fields": {"c": {"content": "x-unwrap", "content_args": args}}}
    with pytest.raises(TemplateError, match=regex.escape(f"fields.c.content_args.{message}")):
        build_template(template)


UNWRAP = {
    "start_anchor": "<|CHATBOT|>",
    "fields": {
        "thinking": {
            "open": "<|THINK|>",
            "close": "<|/THINK|>",
            "content": "x-unwrap",
            "content_args": {"pattern": CITATION},
        },
        "content": {
            "close": "<|END|>",
            "content": "x-unwrap",
            "content_args": {"pattern": CITATION, "strip": False},
        },
    },
}


@given(data=st.data())
def test_unwrap_template_streams_like_one_shot(data: Any) -> None:
    parser = load_parser(UNWRAP)
    assert uses_extensions(UNWRAP) == ["x-unwrap"]
    pieces = data.draw(st.lists(st.tuples(PLAIN, CITED, SOURCES), max_size=3))
    marked = "".join(f"{before}<co>{cited}</co{sources}>" for before, cited, sources in pieces)
    plain = "".join(before + cited for before, cited, _ in pieces)
    think = data.draw(PLAIN)
    output = f"<|THINK|>{think}<co>src</co: 0:[1]><|/THINK|>{marked}<|END|>"
    expected = parser.parse(output, prefix="")
    assert expected.get("thinking") == ((think + "src").strip() or None)
    assert expected.get("content") == (plain or None)
    streaming = parser("")
    events = list(streaming.initial_events)
    for chunk in data.draw(chunkings(output)):
        events += streaming.feed(chunk)
    message, final = streaming.finalize()
    assert message == expected
    chunks = [e for e in events + final if e["type"] == "region_chunk"]
    assert all(e["dirty"] for e in chunks), "chunks hold markup the value drops"


# -- x-as-list --------------------------------------------------------------------------

OBJECT_OR_ARRAY = {
    "start_anchor": "A",
    "fields": {
        "tool_calls": {
            "open": "<TOOLCALL>",
            "close": "</TOOLCALL>",
            "content": "json",
            "transform": {
                "x-each": [
                    {"x-as-list": "{content}"},
                    {"type": "function", "function": {"name": "{item.name}"}},
                ]
            },
        },
        "content": {"content": "text"},
    },
}


@given(value=JSON_VALUES)
def test_as_list_wraps_anything_but_a_list(value: Any) -> None:
    wrapped = as_list(value)
    assert wrapped == (value if isinstance(value, list) else [value])
    assert as_list(wrapped) == wrapped, "idempotent"


@given(names=st.lists(NAMES, min_size=1, max_size=4), bare=st.booleans())
def test_as_list_reads_one_object_or_an_array_alike(names: list[str], bare: bool) -> None:
    parser = load_parser(OBJECT_OR_ARRAY)
    assert uses_extensions(OBJECT_OR_ARRAY) == ["x-as-list", "x-each"]
    calls = [{"name": name} for name in names]
    body = json.dumps(calls[0]) if bare else json.dumps(calls)
    message = parser.parse(f"<TOOLCALL>{body}</TOOLCALL>", prefix="")
    expected = calls[:1] if bare else calls
    assert [call["function"] for call in message["tool_calls"]] == expected


def test_lint_sees_the_captures_an_operation_reads() -> None:
    """A capture read only inside an x-... operation is used (lint's unused-group)."""
    template = {
        "start_anchor": "A",
        "fields": {
            "tool_calls": {
                "open_pattern": r"<call (?P<body>\{[^}]*\})(?P<spare>x?)>",
                "close": "</call>",
                "transform": {"x-as-list": {"x-json-decode": "{body}"}},
            }
        },
    }
    findings = [(f.rule, f.message) for f in lint(build_template(template))]
    assert ("unused-group", "named group 'spare' is not used") in findings
    assert not any("'body'" in message for _, message in findings)


def test_lint_finds_a_nested_value_parser_whose_every_close_raises() -> None:
    """lint walks nested plans with the registry's walk (parts.plan_paths): a v1 value
    parser whose string_delims cannot be built defers its failure to every close, as the
    reference does, and lint names the nested key."""
    template = {
        "start_anchor": "A",
        "fields": {
            "tool_calls": {
                "open": "<call>",
                "close": "</call>",
                "content": "xml-inline",
                "content_args": {
                    "tag_pattern": r"<(?P<key>\w+)>(?P<value>.*?)</(?P=key)>",
                    "value_parser": {"name": "json", "args": {"string_delims": 5}},
                },
            }
        },
    }
    findings = [(f.rule, f.path, f.severity) for f in lint(build_template(template))]
    assert (
        "deferred-failure",
        "fields.tool_calls.content_args.value_parser.string_delims",
        "error",
    ) in findings
