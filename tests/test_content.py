"""Content parsers (runtime/content.py) against what they stand for, on any text."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st
from transformers.utils.chat_parsing.content_parsers import _xml_inline as reference_xml_inline

from runtime.content import parse_json, parse_xml_inline

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=5,
).map(json.dumps)
TEXTS = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=' \t\n\r\ufeff{}[]"-019.eEtfnNIaruls', max_size=12),
    st.tuples(st.sampled_from(["", " ", "\n\t", "\r", "\ufeff", "x"]), JSON_VALUES).map("".join),
    st.tuples(JSON_VALUES, st.sampled_from(["", " ", "\n", " \r\t", " x", "]", "}", "1"])).map(
        "".join
    ),
    st.sampled_from(
        ["NaN", "Infinity", "-Infinity", " null", "true", "false", "-", "I", "\ufeff1"]
    ),
)


def _loaded_or_text(text: str, strip: bool) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text.strip() if strip else text


@given(text=TEXTS, strip=st.booleans())
def test_json_allowing_non_json_is_json_loads_or_the_text(text: str, strip: bool) -> None:
    """`allow_non_json` skips json.loads on text it must refuse (runtime.content
    `_JSON_STARTS`): the answer is still json.loads's, or the text where it raises."""
    result = parse_json(text, allow_non_json=True, strip=strip)
    expected = _loaded_or_text(text, strip)
    assert json.dumps(result) == json.dumps(expected)


@given(text=TEXTS)
def test_json_is_json_loads_with_its_error(text: str) -> None:
    """parse_json calls the decoder's scanner itself (runtime.content `_decoded`): the value
    is json.loads's, and where json.loads raises, the ValueError names its message and
    position."""
    try:
        expected = json.loads(text)
    except json.JSONDecodeError as error:
        with pytest.raises(ValueError, match=re.escape(f"{error.msg} at character {error.pos}:")):
            parse_json(text)
    else:
        assert json.dumps(parse_json(text)) == json.dumps(expected)


# Tag patterns with the named groups xml-inline reads in each arrangement: key and value,
# key only (every value ""), groups a match may leave unset, and no named group at all.
TAG_PATTERNS = [
    r"<p=(?P<key>\w+)>(?P<value>.*?)</p>",
    r"<p=(?P<key>\w+)>",
    r"<p=(?:(?P<key>a)|\w)>(?:(?P<value>\d)|\w+)</p>",
    r"<(?P<value>\w)(?P<key>\w*)>",
    r"<(\w+)>",
]
TAG_TEXTS = st.lists(
    st.sampled_from(["<p=a>1</p>", "<p=b>two</p>", "<p=a>x</p>", "<ab>", "<p=", "</p>", " "]),
    max_size=6,
).map("".join)


@given(text=TAG_TEXTS, pattern=st.sampled_from(TAG_PATTERNS), merge=st.booleans())
def test_xml_inline_is_the_reference_parser(text: str, pattern: str, merge: bool) -> None:
    """parse_xml_inline reads a match's groups by number, not by name (runtime.content):
    the same dict as the reference's xml-inline parser, or the same error, whichever named
    groups the pattern has and a match sets."""
    compiled = regex.compile(pattern, regex.DOTALL)
    try:
        expected = reference_xml_inline(text, {"tag_pattern": pattern, "merge_duplicates": merge})
    except ValueError as error:
        with pytest.raises(ValueError, match=re.escape(str(error).split(" Pattern:")[0])):
            parse_xml_inline(text, compiled, merge_duplicates=merge)
    else:
        assert parse_xml_inline(text, compiled, merge_duplicates=merge) == expected
