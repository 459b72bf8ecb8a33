"""Format extensions: content parsers and transform operations named `x-...`.

The v1 format cannot express a few families' output (docs: README, "Extensions"). These
are the general pieces they need, each usable by any template; a template that uses one
is no longer plain v1 (transformers cannot load it), and `compiler.spec.uses_extensions`
says which it uses.

Content parsers (structured, so their region chunks are dirty):
- `x-pythonic`: Python call syntax, `[f(a=1, b='x'), g()]` or one call per line.
- `x-json-stream`: several JSON values one after another, with optional separators.
- `x-unwrap`: text in which each piece of inline markup (a regex match) is replaced by the
  text it wraps (its `text` group), e.g. citation spans.
- `x-xml-inline`: xml-inline whose value parser is chosen per tag by the pattern's `kind`
  group (`kind_parsers`); it runs `runtime.content.parse_xml_inline`.
Field option:
- `"x-extend": true`: each region's value (a list) extends the field's list, so several
  blocks of calls in one turn give one list (where `repeats` would nest them).
Transform operations (a dict with that single key, wherever a transform value goes):
- `{"x-json-decode": VALUE}`: a string holding JSON is decoded (else kept).
- `{"x-single-key": VALUE}`: `{NAME: ARGS}` becomes `{"name": NAME, "arguments": ARGS}`.
- `{"x-first": [VALUE, ...]}`: the first value whose placeholders all resolve.
- `{"x-each": [LIST, VALUE]}`: VALUE for each element of LIST, which VALUE names `{item}`.
- `{"x-as-list": VALUE}`: a list stays as it is; any other value becomes a one-element list.
"""

from __future__ import annotations

import ast
import json
import warnings
from collections.abc import Callable
from typing import Any

import regex

from . import errors
from .content import bounded

_JSON_LITERALS = {"true": True, "false": False, "null": None}


def parse_pythonic(
    text: str, *, bracketed: bool = True, json_literals: bool = True, accept_json: bool = False
) -> list[dict[str, Any]]:
    """Tool calls written as Python calls; arguments are Python (or JSON) literals.

    `bracketed`: the body is one list of calls; otherwise one call per non-empty line.
    `accept_json`: a body that is JSON instead (an object or a list of objects with
    "name" and "arguments" or "parameters") is read as the same calls.
    Nothing is evaluated: literals go through `ast.literal_eval` node by node.
    """
    source = text.strip()
    if accept_json and source[:1] in "[{":
        try:
            decoded = json.loads(source)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, (dict, list)):
            return [
                _json_call(item) for item in (decoded if isinstance(decoded, list) else [decoded])
            ]
    if bracketed:
        try:
            tree = _expression(source)
        except SyntaxError as error:
            raise ValueError(
                f"x-pythonic: not Python call syntax: {error.msg}: {errors.excerpt(text)}"
            ) from None
        if not isinstance(tree, ast.List):
            raise ValueError(
                f"x-pythonic: expected a list of calls [f(...), ...]: {errors.excerpt(text)}"
            )
        calls = tree.elts
    else:
        calls = []
        for line in source.splitlines():
            if line.strip():
                try:
                    calls.append(_expression(line.strip()))
                except SyntaxError as error:
                    raise ValueError(
                        f"x-pythonic: not a Python call: {error.msg}\nLine: {line!r}"
                    ) from None
    return [_call(node, json_literals) for node in calls]


def _expression(source: str) -> ast.expr:
    """The syntax tree of one expression. Model text is data: the warnings Python gives
    for code (an invalid escape such as '\\<' in a string) are not ours to print."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source, mode="eval").body


def _json_call(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise ValueError(f"x-pythonic: a JSON call needs a string 'name', got {item!r:.80}")
    arguments = item.get("arguments", item.get("parameters", {}))
    return {"name": item["name"], "arguments": arguments}


def _call(node: ast.expr, json_literals: bool) -> dict[str, Any]:
    if not isinstance(node, ast.Call):
        raise ValueError(f"x-pythonic: expected a call, got {ast.dump(node)[:80]}")
    if node.args:
        raise ValueError(f"x-pythonic: {_name(node.func)}() takes keyword arguments only")
    arguments = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise ValueError("x-pythonic: **kwargs are not literal arguments")
        arguments[keyword.arg] = _literal(keyword.value, json_literals)
    return {"name": _name(node.func), "arguments": arguments}


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    raise ValueError("x-pythonic: a call's function must be a (dotted) name")


def _literal(node: ast.expr, json_literals: bool) -> Any:
    """A JSON-compatible value from a literal node; true/false/null too if allowed."""
    if json_literals and isinstance(node, ast.Name) and node.id in _JSON_LITERALS:
        return _JSON_LITERALS[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item, json_literals) for item in node.elts]
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise ValueError("x-pythonic: **mappings are not literal dict entries")
        keys = [_evaluated(key, "dict key") for key in node.keys if key is not None]
        if not all(isinstance(key, str) for key in keys):
            raise ValueError("x-pythonic: dict keys must be strings")
        return {
            key: _literal(value, json_literals)
            for key, value in zip(keys, node.values, strict=True)
        }
    value = _evaluated(node, "value")
    if value is not None and not isinstance(value, (str, int, float, bool)):
        raise ValueError(f"x-pythonic: {type(value).__name__} values have no JSON form")
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise ValueError("x-pythonic: non-finite numbers have no JSON form")
    return value


def _evaluated(node: ast.expr, what: str) -> Any:
    """`ast.literal_eval` of one node, refused in our words: its own message names the
    node's object and address (`<ast.Name object at 0x...>`), which differ from run to run."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(f"x-pythonic: not a literal {what}: {ast.dump(node)[:80]}") from None


def parse_json_stream(
    text: str, *, separators: tuple[str, ...] = (), skip_invalid: bool = False
) -> list[Any]:
    """JSON values one after another: whitespace and `separators` may come between them.

    With `skip_invalid`, a stretch that is not JSON is skipped up to the next line; else
    it raises ValueError, as the json content parser does.
    """
    decoder = json.JSONDecoder()
    values: list[Any] = []
    index, size = 0, len(text)
    while True:
        while index < size:
            if text[index].isspace():
                index += 1
                continue
            for separator in separators:
                if text.startswith(separator, index):
                    index += len(separator)
                    break
            else:
                break
        if index >= size:
            return values
        try:
            value, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError as error:
            if not skip_invalid:
                raise ValueError(
                    f"x-json-stream: not JSON at character {index}: {error.msg}: "
                    f"{errors.excerpt(text, index)}"
                ) from None
            newline = text.find("\n", index)
            index = size if newline == -1 else newline + 1
            continue
        values.append(value)


def unwrap_text(text: str, pattern: regex.Pattern[str], *, strip: bool = True) -> str:
    """x-unwrap: every match of `pattern` replaced by its `text` group ("" when the pattern
    has none or it did not take part), then stripped like the text parser.

    Matches do not overlap and are found left to right, so markup nested inside a kept
    `text` group is kept verbatim; text between matches is never changed.
    """
    keep = "text" in pattern.groupindex
    result = bounded(
        pattern.sub,
        "x-unwrap pattern",
        len(text),
        lambda match: (match.group("text") or "") if keep else "",
        text,
    )
    return result.strip() if strip else result


def extend_list(previous: Any, value: Any, field: str) -> list[Any]:
    """x-extend: a region's list of values added to the field's list so far."""
    if not isinstance(value, list):
        raise ValueError(
            f"Field {field!r}: 'x-extend' requires each region to give a list, got {type(value).__name__}"
        )
    if previous is None:
        return list(value)  # a copy: the region_close event keeps this region's own list
    previous.extend(value)  # like repeats' append: a non-list default raises AttributeError
    return previous


def json_decode(value: Any) -> Any:
    """x-json-decode: a string holding a JSON value becomes that value; anything else stays."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def single_key(value: Any) -> dict[str, Any]:
    """x-single-key: {NAME: ARGS} becomes {"name": NAME, "arguments": ARGS}."""
    if not isinstance(value, dict) or len(value) != 1:
        raise ValueError(f"x-single-key: expected an object with one key, got {value!r:.80}")
    ((name, arguments),) = value.items()
    return {"name": name, "arguments": arguments}


def first_of(*candidates: Callable[[], Any]) -> Any:
    """x-first: the first candidate whose placeholders resolve (missing key or path: next)."""
    for candidate in candidates[:-1]:
        try:
            return candidate()
        except (KeyError, ValueError):
            continue
    return candidates[-1]()


def as_list(value: Any) -> list[Any]:
    """x-as-list: a list as it is, any other value as a one-element list, for formats whose
    body is either one item or an array of them (one call, or several)."""
    return value if isinstance(value, list) else [value]


def each_of(items: Any) -> list[Any]:
    """x-each: the list whose elements a transform value is built for."""
    if not isinstance(items, list):
        raise ValueError(f"x-each: expected a list, got {type(items).__name__}")
    return items
