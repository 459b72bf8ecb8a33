"""Checks and lowering of the extension content parsers that need more than their schema.

Extensions are content parsers, transform operations and a storage mode named `x-...`
(compiler.parts lists them; runtime/extensions.py does what each says). compiler.parts
checks an extension's arguments against its schema before these functions run; they add
the checks a schema cannot say (a regex that compiles, the groups it must name), each a
TemplateError naming its key path.
"""

from __future__ import annotations

from typing import Any

import regex

from .errors import TemplateError
from .ir import ContentPlan, Deferred, XmlInlineContent
from .regex_profile import literal_suffix


def check_json_stream(args: dict[str, Any], path: str) -> None:
    """x-json-stream: `separators` may come between values (besides whitespace)."""
    if not all(isinstance(item, str) and item for item in args.get("separators", [])):
        raise TemplateError(f"{path}.separators", "must be a list of non-empty strings")


def check_unwrap(args: dict[str, Any], path: str) -> None:
    """x-unwrap: `pattern` matches one piece of inline markup (e.g. a citation); its named
    group `text`, when it has one, is the text the markup wraps, which is kept."""
    try:
        compiled = regex.compile(args["pattern"], regex.DOTALL)
    except regex.error as error:
        raise TemplateError(f"{path}.pattern", f"invalid regex: {error}") from None
    if compiled.match(""):
        raise TemplateError(f"{path}.pattern", "must not match the empty string")
    if set(compiled.groupindex) - {"text"}:
        raise TemplateError(
            f"{path}.pattern",
            f"only the named group 'text' is used, got {sorted(compiled.groupindex)}",
        )


def lower_xml_inline(args: dict[str, Any], path: str) -> ContentPlan:
    """xml-inline whose value parser may depend on each tag: the text of the pattern's
    `kind` group picks one of `kind_parsers` (e.g. DeepSeek's string="true|false")."""
    try:
        groups = regex.compile(args["tag_pattern"], regex.DOTALL).groupindex
    except regex.error as error:
        raise TemplateError(f"{path}.tag_pattern", f"invalid regex: {error}") from None
    if "key" not in groups:
        raise TemplateError(f"{path}.tag_pattern", "needs a named group 'key'")
    kinds = args.get("kind_parsers", {})
    if kinds and "kind" not in groups:
        raise TemplateError(
            f"{path}.tag_pattern", "needs a named group 'kind' to choose among kind_parsers"
        )
    return XmlInlineContent(
        tag_pattern=args["tag_pattern"],
        value_parser=_strict_value_parser(args.get("value_parser"), f"{path}.value_parser"),
        merge_duplicates=args.get("merge_duplicates", False),
        kind_parsers=tuple(
            (kind, _strict_value_parser(spec, f"{path}.kind_parsers.{kind}"))
            for kind, spec in sorted(kinds.items())
        ),
        ends_with=literal_suffix(args["tag_pattern"]),
        part="x-xml-inline",
    )


def _strict_value_parser(spec: Any, path: str) -> Any:
    """A nested v1 parser {"name": ..., "args": ...}; what v1 would defer to run time fails here."""
    from . import parts  # the registry imports this module: look it up when used

    if spec is None:
        return None
    if not isinstance(spec, dict) or set(spec) - {"name", "args"}:
        raise TemplateError(path, 'must be an object {"name": PARSER, "args": {...}}')
    name = spec.get("name", "text")
    if not isinstance(name, str) or not parts.is_v1_content(name):
        raise TemplateError(
            f"{path}.name",
            f"unknown content parser {name!r}; known: {parts.v1_content_parsers()}",
        )
    plan = parts.lower_content(name, spec.get("args", {}), f"{path}.args")
    for nested in parts.plans(plan):
        defect = nested if isinstance(nested, Deferred) else getattr(nested, "string_delims", ())
        if isinstance(defect, Deferred):
            raise TemplateError(path, defect.message)
    return plan
