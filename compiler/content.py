"""Lower the v1 content parsers' `content_args` into ContentPlans (compiler.parts names
which function lowers which parser).

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
    ContentPlan,
    Deferred,
    JsonContent,
    KvLinesContent,
    TextContent,
    XmlInlineContent,
)
from .regex_profile import literal_suffix

# The exception classes a Deferred plan may name; anything else fails the build.
DEFERRABLE = frozenset({"AttributeError", "KeyError", "TypeError", "ValueError"})


def lower_scalar(kind: str, args: dict[str, Any]) -> ContentPlan:
    """text, int, float, bool."""
    return TextContent(kind=kind, strip=bool(args.get("strip", True)))


def lower_json(args: dict[str, Any], path: str) -> ContentPlan:
    return JsonContent(
        unquoted_keys=bool(args.get("unquoted_keys", False)),
        string_delims=_string_delims(args.get("string_delims", []), f"{path}.string_delims"),
        allow_non_json=bool(args.get("allow_non_json")),
        strip=bool(args.get("strip", True)),
    )


def lower_xml_inline(args: dict[str, Any], path: str) -> ContentPlan:
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


def lower_kv_lines(args: dict[str, Any], path: str) -> ContentPlan:
    return KvLinesContent(
        line_sep=args.get("line_sep", "\n"),
        kv_sep=args.get("kv_sep", ":"),
        strip=bool(args.get("strip", True)),
        value_parser=_value_parser(args.get("value_parser"), f"{path}.value_parser"),
    )


def _value_parser(spec: Any, path: str) -> ContentPlan | None:
    """The nested parser of xml-inline / kv-lines values: {"name": ..., "args": ...}."""
    from . import parts  # the registry imports this module: look it up when used

    if spec is None:
        return None
    if not isinstance(spec, dict):
        return Deferred("AttributeError", f"{path}: must be an object, got {spec!r}")
    name = spec.get("name", "text")
    args = spec.get("args", {})
    try:
        known = parts.is_v1_content(name)
    except TypeError:  # unhashable: the reference's dict lookup raises TypeError
        return Deferred("TypeError", f"{path}.name: unknown content parser {name!r}")
    if not known:
        return Deferred("KeyError", f"{path}.name: unknown content parser {name!r}")
    return parts.lower_content(name, args, f"{path}.args")


def _string_delims(spec: Any, path: str) -> tuple[str, ...] | Deferred:
    """One `OPEN(.*?)CLOSE` pattern per pair, built the way the reference builds them."""
    try:
        return tuple(regex.escape(open_) + r"(.*?)" + regex.escape(close) for open_, close in spec)
    except Exception as error:
        if type(error).__name__ not in DEFERRABLE:
            raise
        return Deferred(type(error).__name__, f"{path}: {error}", truthy=bool(spec))
