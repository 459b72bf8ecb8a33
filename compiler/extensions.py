"""Format extensions: which a template uses, and their validation into the IR.

Extensions are content parsers, transform operations and a field option named `x-...`
(see runtime/extensions.py for what each does). Unlike v1 content_args, which the reference
reads leniently, extension arguments are ours to define, so they are checked strictly
at build time and a mistake is a TemplateError naming its key path.
"""

from __future__ import annotations

from typing import Any

import regex

from .content import lower_content
from .errors import TemplateError
from .ir import (
    CONTENT_PARSERS,
    EXTENSION_FIELD_KEYS,
    EXTENSION_OPERATIONS,
    EXTENSION_PARSERS,
    ContentPlan,
    Deferred,
    JsonStreamContent,
    PythonicContent,
    UnwrapContent,
    XmlInlineContent,
)
from .regex_profile import literal_suffix

PARSER_ARGS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "x-pythonic": {"bracketed": bool, "json_literals": bool, "accept_json": bool},
    "x-json-stream": {"separators": list, "skip_invalid": bool},
    "x-xml-inline": {
        "tag_pattern": str,
        "value_parser": dict,
        "kind_parsers": dict,
        "merge_duplicates": bool,
    },
    "x-unwrap": {"pattern": str, "strip": bool},
}


def is_operation(node: Any) -> bool:
    """Whether a transform node is an extension operation ({"x-NAME": argument})."""
    return isinstance(node, dict) and len(node) == 1 and next(iter(node)) in EXTENSION_OPERATIONS


def uses_extensions(spec: Any) -> list[str]:
    """The extensions a template dict uses, sorted; [] for plain v1."""
    used: set[str] = set()
    fields = spec.get("fields") if isinstance(spec, dict) else None
    for field in (fields or {}).values() if isinstance(fields, dict) else ():
        if not isinstance(field, dict):
            continue
        content = field.get("content")
        if isinstance(content, str) and content in EXTENSION_PARSERS:
            used.add(content)
        used |= EXTENSION_FIELD_KEYS & set(field)
        used |= _operations(field.get("transform"))
    return sorted(used)


def _operations(node: Any) -> set[str]:
    if is_operation(node):
        name, argument = next(iter(node.items()))
        return {name} | _operations(argument)
    if isinstance(node, dict):
        return {op for value in node.values() for op in _operations(value)}
    if isinstance(node, list):
        return {op for value in node for op in _operations(value)}
    return set()


def lower_extend(field: dict[str, Any], path: str) -> bool:
    """x-extend: the field's value is one list that every region's list extends, for
    formats that may write several blocks of calls in one turn."""
    extend = field.get("x-extend", False)
    if not isinstance(extend, bool):
        raise TemplateError(f"{path}.x-extend", f"must be a boolean, got {extend!r}")
    if extend and (field.get("repeats") or "join" in field):
        raise TemplateError(f"{path}.x-extend", "replaces 'repeats' and 'join': use one of them")
    return extend


def lower_extension_content(kind: str, args: Any, path: str) -> ContentPlan:
    if not isinstance(args, dict):
        raise TemplateError(path, f"must be an object, got {args!r}")
    allowed = PARSER_ARGS[kind]
    for key, value in args.items():
        if key not in allowed:
            raise TemplateError(
                f"{path}.{key}", f"not an argument of {kind}; known: {sorted(allowed)}"
            )
        if not isinstance(value, allowed[key]):
            raise TemplateError(f"{path}.{key}", f"must be a {allowed[key].__name__}, got {value!r}")  # type: ignore[union-attr]
    if kind == "x-pythonic":
        return PythonicContent(
            bracketed=args.get("bracketed", True),
            json_literals=args.get("json_literals", True),
            accept_json=args.get("accept_json", False),
        )
    if kind == "x-xml-inline":
        return _xml_inline(args, path)
    if kind == "x-unwrap":
        return _unwrap(args, path)
    separators = args.get("separators", [])
    if not all(isinstance(item, str) and item for item in separators):
        raise TemplateError(f"{path}.separators", "must be a list of non-empty strings")
    return JsonStreamContent(
        separators=tuple(separators), skip_invalid=args.get("skip_invalid", False)
    )


def _unwrap(args: dict[str, Any], path: str) -> UnwrapContent:
    """x-unwrap: `pattern` matches one piece of inline markup (e.g. a citation); its named
    group `text`, when it has one, is the text the markup wraps, which is kept."""
    if "pattern" not in args:
        raise TemplateError(f"{path}.pattern", "required by x-unwrap")
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
    return UnwrapContent(pattern=args["pattern"], strip=args.get("strip", True))


def _xml_inline(args: dict[str, Any], path: str) -> XmlInlineContent:
    """xml-inline whose value parser may depend on each tag: the text of the pattern's
    `kind` group picks one of `kind_parsers` (e.g. DeepSeek's string="true|false")."""
    if "tag_pattern" not in args:
        raise TemplateError(f"{path}.tag_pattern", "required by x-xml-inline")
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
    )


def _strict_value_parser(spec: Any, path: str) -> Any:
    """A nested v1 parser {"name": ..., "args": ...}; what v1 would defer to run time fails here."""
    if spec is None:
        return None
    if not isinstance(spec, dict) or set(spec) - {"name", "args"}:
        raise TemplateError(path, 'must be an object {"name": PARSER, "args": {...}}')
    name = spec.get("name", "text")
    if not isinstance(name, str) or name not in CONTENT_PARSERS:
        raise TemplateError(
            f"{path}.name", f"unknown content parser {name!r}; known: {sorted(CONTENT_PARSERS)}"
        )
    plan = lower_content(name, spec.get("args", {}), f"{path}.args")
    for nested in _nested_plans(plan):
        if isinstance(nested, Deferred):
            raise TemplateError(path, nested.message)
    return plan


def _nested_plans(plan: ContentPlan | None) -> list[Any]:
    if plan is None:
        return []
    found: list[Any] = [plan]
    found += _nested_plans(getattr(plan, "value_parser", None))
    string_delims = getattr(plan, "string_delims", ())
    if isinstance(string_delims, Deferred):
        found.append(string_delims)
    return found
