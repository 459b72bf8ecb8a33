"""Lower a field's `content` and `content_args` into a ContentPlan.

The reference reads content_args only when a region closes, and never validates them at
load time. A malformed value (content_args that is not an object, an unknown
value_parser, an invalid tag_pattern...) therefore loads fine and fails at the first
close. Such values become `Deferred` plans: the generated parser raises the reference's
exception class at that same step, and the lint reports the defect at build time.
Truthiness is applied here, once: `"strip": 0` means no strip, as in the reference.
"""

from __future__ import annotations

from typing import Any

import regex

from .ir import (
    CONTENT_PARSERS,
    ContentPlan,
    Deferred,
    JsonContent,
    KvLinesContent,
    TextContent,
    XmlInlineContent,
)
from .regex_profile import literal_suffix

SCALAR_PARSERS = ("text", "int", "float", "bool")
# The exception classes a Deferred plan may name; anything else fails the build.
DEFERRABLE = frozenset({"AttributeError", "KeyError", "TypeError", "ValueError"})


def lower_content(kind: str, args: Any, path: str) -> ContentPlan:
    """The plan for content parser `kind` called with `args` (template key path `path`)."""
    if not isinstance(args, dict):
        return Deferred("AttributeError", f"{path}: must be an object, got {args!r}")
    strip = bool(args.get("strip", True))
    if kind in SCALAR_PARSERS:
        return TextContent(kind=kind, strip=strip)
    if kind == "json":
        return JsonContent(
            unquoted_keys=bool(args.get("unquoted_keys", False)),
            string_delims=_string_delims(args.get("string_delims", []), f"{path}.string_delims"),
            allow_non_json=bool(args.get("allow_non_json")),
            strip=strip,
        )
    if kind == "xml-inline":
        tag_pattern = args.get("tag_pattern")
        if tag_pattern is None:
            return Deferred("ValueError", f"{path}.tag_pattern: required by the xml-inline parser")
        try:
            regex.compile(tag_pattern, regex.DOTALL)
        except regex.error as error:
            return Deferred("regex.error", f"{path}.tag_pattern: invalid regex: {error}")
        except TypeError as error:
            return Deferred("TypeError", f"{path}.tag_pattern: {error}")
        return XmlInlineContent(
            tag_pattern=tag_pattern,
            value_parser=_value_parser(args.get("value_parser"), f"{path}.value_parser"),
            merge_duplicates=bool(args.get("merge_duplicates", False)),
            ends_with=literal_suffix(tag_pattern),
        )
    assert kind == "kv-lines", kind
    return KvLinesContent(
        line_sep=args.get("line_sep", "\n"),
        kv_sep=args.get("kv_sep", ":"),
        strip=strip,
        value_parser=_value_parser(args.get("value_parser"), f"{path}.value_parser"),
    )


def _value_parser(spec: Any, path: str) -> ContentPlan | None:
    """The nested parser of xml-inline / kv-lines values: {"name": ..., "args": ...}."""
    if spec is None:
        return None
    if not isinstance(spec, dict):
        return Deferred("AttributeError", f"{path}: must be an object, got {spec!r}")
    name = spec.get("name", "text")
    args = spec.get("args", {})
    try:
        known = name in CONTENT_PARSERS
    except TypeError:  # unhashable: the reference's dict lookup raises TypeError
        return Deferred("TypeError", f"{path}.name: unknown content parser {name!r}")
    if not known:
        return Deferred("KeyError", f"{path}.name: unknown content parser {name!r}")
    return lower_content(name, args, f"{path}.args")


def _string_delims(spec: Any, path: str) -> tuple[str, ...] | Deferred:
    """One `OPEN(.*?)CLOSE` pattern per pair, built the way the reference builds them."""
    try:
        return tuple(regex.escape(open_) + r"(.*?)" + regex.escape(close) for open_, close in spec)
    except Exception as error:
        if type(error).__name__ not in DEFERRABLE:
            raise
        return Deferred(type(error).__name__, f"{path}: {error}", truthy=bool(spec))
