"""Load a response template and validate it into the IR.

Accepts a bare template dict, a catalog entry or a tokenizer_config.json (both hold the
template under "response_template"), or the path of a JSON file holding either. The
rules are those of transformers 5.23.0: a template is accepted here exactly when the
reference accepts it, and a rejection names the key path at fault. Values the reference
accepts but fails on later (malformed content_args) are lowered to `Deferred` plans by
`compiler.content`, not rejected.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import regex

from . import parts
from .errors import TemplateError, TemplateTypeError
from .ir import Delimiter, Field, Operation, Placeholder, Template

TOP_LEVEL_KEYS = frozenset(
    {"version", "defaults", "fields", "start_anchor", "start_anchor_pattern"}
)
FIELD_KEYS = frozenset(
    {
        "open",
        "open_pattern",
        "close",
        "close_pattern",
        "content",
        "content_args",
        "repeats",
        "join",
        "optional",
        "transform",
        "transform_each",
    }
)
# A transform string that is exactly one placeholder; \w is Unicode-aware, as in the reference.
PLACEHOLDER = regex.compile(r"\{(\w+(?:\.\w+)*)\}")
_SIMPLE_NAME = regex.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def read_template(source: Any) -> tuple[Any, str | None]:
    """The template dict inside `source`, and a label naming where it came from.

    `source` is a template dict, a dict holding one under "response_template" (catalog
    entry, tokenizer config), or the path of a JSON file holding either.
    """
    label = None
    if isinstance(source, (str, Path)):
        label = str(source)
        try:
            source = json.loads(Path(source).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            raise TemplateError("", f"cannot read template: {error}", source=label) from error
    if isinstance(source, dict) and "response_template" in source:
        return source["response_template"], label
    return source, label


def template_sha256(template: Any) -> str:
    """A stable hash of the template as JSON; key order is kept because it is meaningful.

    A template that is not JSON data (NaN, infinities, keys that are not strings) raises
    the TemplateError validation gives it, with its key path. Lone surrogates are valid
    JSON string content ("\\ud83d"), so they are hashed as UTF-8 with surrogatepass.
    """
    try:
        encoded = json.dumps(template, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (ValueError, TypeError) as error:
        _require_finite(template, "response_template")
        raise TemplateError("", f"not JSON data: {error}") from error
    return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()


def uses_extensions(template: Any) -> list[str]:
    """The format extensions a template uses; [] for plain v1, which transformers loads.

    Read from the lowered IR (`template` is a Template, or a template dict, which is
    validated first: an invalid one raises TemplateError)."""
    if not isinstance(template, Template):
        template = build_template(template)
    return parts.extensions_used(template)


def field_path(name: str) -> str:
    """The key path of a field, quoting names that are not plain identifiers."""
    if _SIMPLE_NAME.fullmatch(name):
        return f"fields.{name}"
    return f"fields[{json.dumps(name, ensure_ascii=True)}]"


def build_template(spec: Any, *, source: str | None = None) -> Template:
    """Validate `spec` (a template dict) and build its IR; raise TemplateError if invalid."""
    try:
        return _build(spec)
    except TemplateError as error:
        raise (error.at(source) if source else error) from None


def load(source: Any) -> Template:
    """read_template + build_template."""
    spec, label = read_template(source)
    return build_template(spec, source=label)


# -- validation, in the reference's order -----------------------------------------------


_type_name = parts.type_name


def _build(spec: Any) -> Template:
    if not isinstance(spec, dict):
        raise TemplateError("response_template", f"must be an object, got {_type_name(spec)}")
    version = spec.get("version", 1)
    if version != 1:
        raise TemplateError("version", f"unsupported response_template version {version!r}")
    unknown = set(spec) - TOP_LEVEL_KEYS
    if unknown:
        raise TemplateError("response_template", f"unknown keys {sorted(unknown)}")
    defaults = spec.get("defaults", {})
    if not isinstance(defaults, dict):
        raise TemplateError("defaults", f"must be an object, got {_type_name(defaults)}")
    fields_spec = spec.get("fields", {})
    if not isinstance(fields_spec, dict) or not fields_spec:
        raise TemplateError("fields", "must be a non-empty object")
    for name in fields_spec:
        if not isinstance(name, str):
            raise TemplateError("fields", f"field names must be strings, got {name!r}")

    fields = tuple(
        _build_field(index, name, raw) for index, (name, raw) in enumerate(fields_spec.items())
    )
    implicit = [field for field in fields if field.implicit]
    if len(implicit) > 1:
        names = ", ".join(field.name for field in implicit)
        raise TemplateError(
            "fields",
            f"at most one field may omit 'open'/'open_pattern' (the implicit field); found: {names}",
        )
    anchor = _delimiter(spec, "", "start_anchor", "start_anchor_pattern")
    if anchor is None:
        raise TemplateError(
            "response_template", "must define 'start_anchor' or 'start_anchor_pattern'"
        )
    _require_finite(spec, "response_template")
    return Template(
        fields=fields,
        implicit=implicit[0] if implicit else None,
        defaults=defaults,
        start_anchor=anchor,
        raw=spec,
        sha256=template_sha256(spec),
    )


def _build_field(index: int, name: str, spec: Any) -> Field:
    path = field_path(name)
    if not isinstance(spec, dict):
        raise TemplateError(path, f"must be an object, got {_type_name(spec)}")
    unknown = set(spec) - FIELD_KEYS - parts.storage_keys()
    if unknown:
        raise TemplateError(path, f"unknown keys {sorted(unknown)}")
    content = spec.get("content", "text")
    try:
        known = content in parts.CONTENT
    except TypeError:  # unhashable: the reference's dict lookup raises TypeError
        raise TemplateTypeError(f"{path}.content", f"unknown content parser {content!r}") from None
    if not known:
        raise TemplateError(
            f"{path}.content",
            f"unknown content parser {content!r}; available: {parts.v1_content_parsers()}",
        )
    open_ = _delimiter(spec, path, "open", "open_pattern")
    close = _delimiter(spec, path, "close", "close_pattern")
    storage, join = parts.lower_storage(spec, path)
    transform = spec.get("transform")
    transform_each = spec.get("transform_each", False)
    if not isinstance(transform_each, bool):
        raise TemplateError(
            f"{path}.transform_each", f"must be a boolean, got {_type_name(transform_each)}"
        )
    if transform_each and transform is None:
        raise TemplateError(f"{path}.transform_each", "is set but the field has no 'transform'")
    if transform is not None:
        transform = _lower_transform(transform, f"{path}.transform")
    else:
        groups = sorted(_named_groups(open_) | _named_groups(close))
        if groups:
            raise TemplateError(
                path,
                f"open_pattern/close_pattern declare named groups {groups} but the field has no 'transform'; "
                "captures only reach the output through a transform",
            )
    return Field(
        name=name,
        index=index,
        path=path,
        open=open_,
        close=close,
        content=content,
        plan=parts.lower_content(content, spec.get("content_args", {}), f"{path}.content_args"),
        storage=storage,
        join=join,
        optional=bool(spec.get("optional", True)),
        transform=transform,
        transform_each=transform_each,
        dirty=not parts.CONTENT[content].streamable,
    )


def _delimiter(
    spec: dict[str, Any], path: str, literal_key: str, pattern_key: str
) -> Delimiter | None:
    prefix = f"{path}." if path else ""
    if literal_key in spec and pattern_key in spec:
        raise TemplateError(
            path or "response_template", f"cannot specify both '{literal_key}' and '{pattern_key}'"
        )
    if literal_key in spec:
        where = prefix + literal_key
        raw = spec[literal_key]
        if isinstance(raw, str):
            literals = [raw]
        elif isinstance(raw, list):
            if not raw:
                raise TemplateError(where, "list must contain at least one literal")
            if not all(isinstance(item, str) for item in raw):
                raise TemplateError(where, "list must contain only strings")
            literals = list(dict.fromkeys(raw))
        else:
            raise TemplateError(
                where, f"must be a string or a list of strings, got {_type_name(raw)}"
            )
        if "" in literals:
            raise TemplateError(where, "literals cannot be empty strings")
        return Delimiter(path=where, literals=tuple(literals))
    if pattern_key in spec:
        where = prefix + pattern_key
        pattern = spec[pattern_key]
        try:
            regex.compile(pattern, regex.DOTALL)
        except regex.error as error:
            raise TemplateError(where, f"invalid regex: {error}") from None
        except TypeError as error:
            raise TemplateTypeError(where, f"must be a regex string: {error}") from None
        return Delimiter(path=where, literals=None, pattern=pattern)
    return None


def _named_groups(delimiter: Delimiter | None) -> set[str]:
    if delimiter is None or delimiter.pattern is None:
        return set()
    return set(regex.compile(delimiter.pattern, regex.DOTALL).groupindex)


def _lower_transform(node: Any, path: str, in_each: bool = False) -> Any:
    """Copy a transform tree, turning whole-string placeholders into Placeholder leaves
    and extension operations ({"x-NAME": argument}) into Operation nodes."""
    if parts.is_operation(node):
        ((name, argument),) = node.items()
        where = f"{path}.{name}"
        parts.check_operation(name, argument, where)
        form = parts.OPERATIONS[name].form
        if form == "value":
            return Operation(name, _lower_transform(argument, where, in_each))
        # A list of values; under "each", the second one is built per element {item}.
        loops = [in_each, True] if form == "each" else [in_each] * len(argument)
        return Operation(
            name,
            [
                _lower_transform(item, f"{where}[{i}]", loop)
                for i, (item, loop) in enumerate(zip(argument, loops, strict=True))
            ],
        )
    if isinstance(node, dict):
        return {
            key: _lower_transform(value, f"{path}.{key}", in_each) for key, value in node.items()
        }
    if isinstance(node, list):
        return [
            _lower_transform(value, f"{path}[{index}]", in_each) for index, value in enumerate(node)
        ]
    if not isinstance(node, str):
        return node
    whole = PLACEHOLDER.fullmatch(node)
    if whole:
        root, *keys = whole.group(1).split(".")
        return Placeholder(
            path=whole.group(1), root=root, keys=tuple(keys), loop=in_each and root == "item"
        )
    if PLACEHOLDER.search(node):
        raise TemplateError(
            path,
            f"transform string {node!r} mixes a {{placeholder}} with literal text; use a whole-string "
            'placeholder (e.g. "{content}") or a plain literal',
        )
    return node


def _require_finite(value: Any, path: str) -> None:
    """Refuse NaN and infinities: a generated module can only embed plain literals."""
    if isinstance(value, float) and not math.isfinite(value):
        raise TemplateError(path, f"{value!r} cannot be embedded in a generated module")
    if isinstance(value, dict):
        for key, item in value.items():
            _require_finite(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _require_finite(item, f"{path}[{index}]")
