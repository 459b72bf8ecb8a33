"""The registry of template parts: one declarative entry per content parser, transform
operation and storage mode a template can name, v1 and extensions (`x-...`).

The compiler reads everything about a part from its entry: validation and lowering
(compiler.spec), the code that calls it and the names that code imports (compiler.emit,
compiler/templates/parts.j2), and which extensions a template uses. Adding an extension
is one entry here plus one runtime function (docs/design.md, "Template parts registry").

An entry holds:
- its name; a name starting with `x-` is an extension (a template using one is not
  plain v1, and transformers cannot load it);
- its argument schema. An extension's arguments are ours to define, so they are checked
  strictly at build time, each mistake a TemplateError naming its key path. The reference
  reads a v1 part's arguments leniently (a malformed value fails when a region closes,
  see compiler.content), so for v1 parts the schema documents the keys it reads;
- its lowering into the IR;
- the runtime function generated code calls (imported from `module`, where it is defined),
  and how the call is written from the lowered plan;
- for storage modes, how a parsed value is stored, and how the raw text of a region that
  does not parse is stored in the lenient modes (`on_error="keep_raw"`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from . import content, extensions
from .errors import TemplateError
from .ir import ContentPlan, Deferred, ExtensionContent, Operation, Placeholder, Template

Lowering = Callable[[dict[str, Any], str], ContentPlan]
Check = Callable[[dict[str, Any], str], None]


@dataclass(frozen=True)
class Arg:
    """One key of a part's arguments: the JSON types it accepts, its default (the value
    the runtime function assumes when the call leaves it out), and whether it is required."""

    types: type | tuple[type, ...]
    default: Any = None
    required: bool = False

    @property
    def type_name(self) -> str:
        return " or ".join(kind.__name__ for kind in self._types)

    def accepts(self, value: Any) -> bool:
        """Whether `value` has a declared type; true and false are not numbers here."""
        if isinstance(value, bool) and bool not in self._types:
            return False
        return isinstance(value, self._types)

    @property
    def _types(self) -> tuple[type, ...]:
        return self.types if isinstance(self.types, tuple) else (self.types,)


@dataclass(frozen=True)
class Param:
    """One argument of the generated call, read from the plan's attribute `attribute`.

    `keyword` None: a positional argument, always written. A keyword argument is written
    only when its value differs from the plan's default for it (generated calls stay
    short), and, with `only_if`, only when that plan attribute is true.
    `render` says how the value is written: "value" as a Python literal, "constant" as
    the module constant holding its compiled form (see Constant), "function" as the
    function of a nested value parser, "kinds" as a dict of kind text -> such function.
    """

    attribute: str
    keyword: str | None = None
    render: str = "value"
    only_if: str | None = None


@dataclass(frozen=True)
class Constant:
    """A module constant compiled, at import, from the plan attribute `attribute` when it
    is set: "regex" is one pattern, "patterns" a tuple of them (or a Defect, when the
    reference fails on the template value at run time). Its name is PREFIX + `suffix`."""

    attribute: str
    suffix: str
    kind: str = "regex"


@dataclass(frozen=True)
class ContentPart:
    """A content parser: the `content` of a field, or the `name` of a nested value parser."""

    name: str
    args: Mapping[str, Arg]
    # The plan for these arguments at this key path; None: ExtensionContent holding the
    # checked arguments, each passed to the function as a keyword when not the default.
    lower: Lowering | None = None
    # For an extension lowered to ExtensionContent: what its schema cannot say.
    check: Check | None = None
    function: str | None = None  # the runtime function, None for an inline expression
    module: str = "runtime.content"  # where `function` is defined
    call: tuple[Param, ...] = ()
    constants: tuple[Constant, ...] = ()
    # An expression of the (already stripped) region text {text}, instead of a call.
    inline: str | None = None
    # Whether region chunks are part of the final value (region_chunk dirty=False).
    streamable: bool = False

    @property
    def extension(self) -> bool:
        return self.name.startswith("x-")

    @property
    def imports(self) -> tuple[str, ...]:
        """The names a module calling this part imports from `module` (always needed)."""
        return (self.function,) if self.function else ()


@dataclass(frozen=True)
class OperationPart:
    """A transform operation, written {NAME: ARGUMENT} wherever a transform value goes.

    `form` is the shape of ARGUMENT and of the call: "value" one transform value, passed
    to the function; "candidates" a non-empty list of values, passed as functions that
    build each (so the function decides which to build); "each" [LIST, VALUE], VALUE
    built for each element `{item}` of the function's result for LIST.
    """

    name: str
    function: str
    module: str = "runtime.extensions"
    form: str = "value"

    @property
    def extension(self) -> bool:
        return self.name.startswith("x-")

    @property
    def imports(self) -> tuple[str, ...]:
        return (self.function,)


@dataclass(frozen=True)
class StoragePart:
    """How a region's value is stored in the field's output.

    `key` is the field key that selects it (None for the default, "assign"); an extension
    mode is selected by `KEY: true`, and `KEY` must be a boolean. `form`: the
    generated store, "assign", "append" (a list of values), "join" (strings joined by the
    field's `join`), or "call": output = function(previous or None, value, field name).
    `raw_store`: how on_error="keep_raw" stores a region's raw text ("assign", "append"
    or "join"), the `store` of the field's runtime State. The generated store sits under
    a comment naming `key` (runtime.source_map reads it).
    """

    name: str
    key: str | None
    form: str
    raw_store: str
    function: str | None = None
    module: str = "runtime.regions"

    @property
    def extension(self) -> bool:
        return self.name.startswith("x-")

    @property
    def imports(self) -> tuple[str, ...]:
        return (self.function,) if self.function else ()


def _scalar(kind: str) -> Lowering:
    return lambda args, path: content.lower_scalar(kind, args)


_STRIP = Arg(bool, True)
_VALUE_PARSER = Arg(dict)  # {"name": PARSER, "args": {...}}, a v1 content parser

CONTENT: dict[str, ContentPart] = {
    # -- v1: the reference's parsers, read leniently -----------------------------------
    "text": ContentPart(
        "text", {"strip": _STRIP}, _scalar("text"), inline="{text}", streamable=True
    ),
    "int": ContentPart(
        "int", {"strip": _STRIP}, _scalar("int"), inline="int({text})", streamable=True
    ),
    "float": ContentPart(
        "float", {"strip": _STRIP}, _scalar("float"), inline="float({text})", streamable=True
    ),
    "bool": ContentPart(
        "bool",
        {"strip": _STRIP},
        _scalar("bool"),
        inline='{text}.lower() in ("true", "1")',
        streamable=True,
    ),
    "json": ContentPart(
        "json",
        {
            "unquoted_keys": Arg(bool, False),
            "string_delims": Arg(list, []),
            "allow_non_json": Arg(bool, False),
            "strip": _STRIP,
        },
        content.lower_json,
        function="parse_json",
        call=(
            Param("unquoted_keys", "unquoted_keys"),
            Param("string_delims", "string_delims", render="constant"),
            Param("allow_non_json", "allow_non_json"),
            Param("strip", "strip", only_if="allow_non_json"),
        ),
        constants=(Constant("string_delims", "_STRING_DELIMS", kind="patterns"),),
    ),
    "xml-inline": ContentPart(
        "xml-inline",
        {
            "tag_pattern": Arg(str, required=True),
            "value_parser": _VALUE_PARSER,
            "merge_duplicates": Arg(bool, False),
        },
        content.lower_xml_inline,
        function="parse_xml_inline",
        call=(
            Param("tag_pattern", render="constant"),
            Param("value_parser", "value_parser", render="function"),
            Param("kind_parsers", "kind_parsers", render="kinds"),
            Param("merge_duplicates", "merge_duplicates"),
            Param("ends_with", "ends_with"),
        ),
        constants=(Constant("tag_pattern", "_TAG_RE"),),
    ),
    "kv-lines": ContentPart(
        "kv-lines",
        {
            "line_sep": Arg(str, "\n"),
            "kv_sep": Arg(str, ":"),
            "strip": _STRIP,
            "value_parser": _VALUE_PARSER,
        },
        content.lower_kv_lines,
        function="parse_kv_lines",
        call=(
            Param("line_sep", "line_sep"),
            Param("kv_sep", "kv_sep"),
            Param("strip", "strip"),
            Param("value_parser", "value_parser", render="function"),
        ),
    ),
    # -- extensions (runtime/extensions.py), checked strictly --------------------------
    "x-pythonic": ContentPart(
        "x-pythonic",
        {
            "bracketed": Arg(bool, True),
            "json_literals": Arg(bool, True),
            "accept_json": Arg(bool, False),
        },
        function="parse_pythonic",
        module="runtime.extensions",
    ),
    "x-json-stream": ContentPart(
        "x-json-stream",
        {"separators": Arg(list, ()), "skip_invalid": Arg(bool, False)},
        check=extensions.check_json_stream,
        function="parse_json_stream",
        module="runtime.extensions",
    ),
    "x-xml-inline": ContentPart(
        "x-xml-inline",
        {
            "tag_pattern": Arg(str, required=True),
            "value_parser": _VALUE_PARSER,
            "kind_parsers": Arg(dict, {}),
            "merge_duplicates": Arg(bool, False),
        },
        extensions.lower_xml_inline,
        function="parse_xml_inline",
        call=(
            Param("tag_pattern", render="constant"),
            Param("value_parser", "value_parser", render="function"),
            Param("kind_parsers", "kind_parsers", render="kinds"),
            Param("merge_duplicates", "merge_duplicates"),
            Param("ends_with", "ends_with"),
        ),
        constants=(Constant("tag_pattern", "_TAG_RE"),),
    ),
    "x-unwrap": ContentPart(
        "x-unwrap",
        {"pattern": Arg(str, required=True), "strip": _STRIP},
        check=extensions.check_unwrap,
        function="unwrap_text",
        module="runtime.extensions",
        call=(Param("pattern", render="constant"), Param("strip", "strip")),
        constants=(Constant("pattern", "_UNWRAP_RE"),),
    ),
}

OPERATIONS: dict[str, OperationPart] = {
    "x-json-decode": OperationPart("x-json-decode", "json_decode"),
    "x-single-key": OperationPart("x-single-key", "single_key"),
    "x-first": OperationPart("x-first", "first_of", form="candidates"),
    "x-each": OperationPart("x-each", "each_of", form="each"),
    "x-as-list": OperationPart("x-as-list", "as_list"),
}

STORAGE: dict[str, StoragePart] = {
    "assign": StoragePart("assign", None, form="assign", raw_store="assign"),
    "repeats": StoragePart("repeats", "repeats", form="append", raw_store="append"),
    "join": StoragePart(
        "join",
        "join",
        form="join",
        raw_store="join",
        function="join_text",
    ),
    "x-extend": StoragePart(
        "x-extend",
        "x-extend",
        form="call",
        raw_store="append",
        function="extend_list",
        module="runtime.extensions",
    ),
}


def v1_content_parsers() -> list[str]:
    """The content parsers the reference knows, sorted (its error messages list them)."""
    return sorted(name for name, part in CONTENT.items() if not part.extension)


def is_v1_content(name: Any) -> bool:
    """Whether `name` is a v1 content parser; TypeError if it is unhashable (a list...),
    as the reference's dict lookup raises."""
    return name in CONTENT and not CONTENT[name].extension


def storage_keys() -> frozenset[str]:
    """The field keys of extension storage modes (v1's `repeats` and `join` are FIELD_KEYS)."""
    return frozenset(part.key for part in STORAGE.values() if part.extension and part.key)


def content_part(plan: ContentPlan) -> ContentPart | None:
    """The entry that lowered `plan`; None for a Deferred plan (a template defect)."""
    return None if isinstance(plan, Deferred) else CONTENT[plan.part]


# -- lowering ---------------------------------------------------------------------------


def lower_content(name: str, args: Any, path: str) -> ContentPlan:
    """The plan of content parser `name` called with `args` (at key path `path`)."""
    part = CONTENT[name]
    if not part.extension:
        if not isinstance(args, dict):  # the reference's args.get raises AttributeError
            return Deferred("AttributeError", f"{path}: must be an object, got {args!r}")
        assert part.lower is not None, name
        return part.lower(args, path)
    check_args(name, part.args, args, path)
    if part.lower is not None:
        return part.lower(args, path)
    if part.check is not None:
        part.check(args, path)
    return ExtensionContent(
        part=name,
        arguments=tuple(
            (key, _frozen(args.get(key, arg.default))) for key, arg in part.args.items()
        ),
    )


def _frozen(value: Any) -> Any:
    """A JSON array as a tuple: plans are frozen, and the call passes it as one."""
    return tuple(value) if isinstance(value, list) else value


def check_args(name: str, schema: Mapping[str, Arg], args: Any, path: str) -> None:
    """An extension's arguments against its schema: an object, only known keys, each of
    the declared type, required ones present. A mistake names its key path."""
    if not isinstance(args, dict):
        raise TemplateError(path, f"must be an object, got {args!r}")
    for key, value in args.items():
        if key not in schema:
            raise TemplateError(
                f"{path}.{key}", f"not an argument of {name}; known: {sorted(schema)}"
            )
        if not schema[key].accepts(value):
            raise TemplateError(
                f"{path}.{key}", f"must be a {schema[key].type_name}, got {value!r}"
            )
    for key, arg in schema.items():
        if arg.required and key not in args:
            raise TemplateError(f"{path}.{key}", f"required by {name}")


def lower_storage(spec: dict[str, Any], path: str) -> tuple[str, str | None]:
    """The field's storage mode and its `join` separator (None unless "join")."""
    for part in STORAGE.values():
        if not part.extension or part.key not in spec:
            continue
        value = spec[part.key]
        if not isinstance(value, bool):
            raise TemplateError(f"{path}.{part.key}", f"must be a boolean, got {value!r}")
        if value and (spec.get("repeats") or "join" in spec):
            raise TemplateError(
                f"{path}.{part.key}", "replaces 'repeats' and 'join': use one of them"
            )
        if value:
            return part.name, None
    join = spec.get("join")
    if join is not None and not isinstance(join, str):
        raise TemplateError(f"{path}.join", f"must be a string, got {type_name(join)}")
    if join is not None and not spec.get("repeats", False):
        raise TemplateError(f"{path}.join", "requires 'repeats': true")
    if join is not None:
        return "join", join
    return ("repeats" if spec.get("repeats", False) else "assign"), None


def type_name(value: Any) -> str:
    """A template value's JSON type, as validation messages name it."""
    return {dict: "object", list: "array", str: "string", type(None): "null", bool: "boolean"}.get(
        type(value), type(value).__name__
    )


def is_operation(node: Any) -> bool:
    """Whether a transform node is an operation ({"x-NAME": argument})."""
    return isinstance(node, dict) and len(node) == 1 and next(iter(node)) in OPERATIONS


def check_operation(name: str, argument: Any, path: str) -> None:
    """The argument's shape against the operation's form."""
    form = OPERATIONS[name].form
    if form == "candidates" and (not isinstance(argument, list) or not argument):
        raise TemplateError(path, "must be a non-empty list")
    if form == "each" and (not isinstance(argument, list) or len(argument) != 2):
        raise TemplateError(
            path, "must be a list [LIST, VALUE], VALUE built for each element {item}"
        )


# -- reading the IR ---------------------------------------------------------------------


def plans(plan: ContentPlan | None) -> Iterator[ContentPlan]:
    """`plan` and every nested value parser's plan."""
    for _, nested in plan_paths(plan, ""):
        yield nested


def plan_paths(plan: ContentPlan | None, path: str) -> Iterator[tuple[str, ContentPlan]]:
    """(key path, plan) for `plan` at `path` and every nested value parser, outermost
    first: `PATH.value_parser`, and x-xml-inline's `PATH.kind_parsers.KIND`."""
    if plan is None:
        return
    yield path, plan
    yield from plan_paths(getattr(plan, "value_parser", None), f"{path}.value_parser")
    for kind, nested in getattr(plan, "kind_parsers", ()):
        yield from plan_paths(nested, f"{path}.kind_parsers.{kind}")


def placeholders(node: Any) -> Iterator[Placeholder]:
    """Every placeholder in a lowered transform tree, operations' arguments included."""
    if isinstance(node, Placeholder):
        yield node
    elif isinstance(node, Operation):
        yield from placeholders(node.argument)
    elif isinstance(node, dict):
        for value in node.values():
            yield from placeholders(value)
    elif isinstance(node, list):
        for value in node:
            yield from placeholders(value)


def operations(node: Any) -> Iterator[Operation]:
    """Every operation in a lowered transform tree, outermost first."""
    if isinstance(node, Operation):
        yield node
        yield from operations(node.argument)
    elif isinstance(node, dict):
        for value in node.values():
            yield from operations(value)
    elif isinstance(node, list):
        for value in node:
            yield from operations(value)


def extensions_used(template: Template) -> list[str]:
    """The extensions a lowered template uses, sorted; [] for plain v1."""
    used: set[str] = set()
    for f in template.fields:
        for plan in plans(f.plan):
            part = content_part(plan)
            if part is not None and part.extension:
                used.add(part.name)
        if STORAGE[f.storage].extension:
            used.add(f.storage)
        used |= {op.name for op in operations(f.transform) if OPERATIONS[op.name].extension}
    return sorted(used)


def plan_value(plan: ContentPlan, attribute: str) -> Any:
    """The value of one of a plan's arguments (a plan attribute)."""
    if isinstance(plan, ExtensionContent):
        return dict(plan.arguments)[attribute]
    return getattr(plan, attribute)


def plan_default(plan: ContentPlan, attribute: str) -> Any:
    """The value the runtime function assumes when the call leaves the argument out: the
    IR class's default (the entry's schema default for ExtensionContent)."""
    if isinstance(plan, ExtensionContent):
        return CONTENT[plan.part].args[attribute].default
    defaults = {item.name: item.default for item in dataclasses.fields(plan)}
    return defaults[attribute]


def call_params(part: ContentPart) -> tuple[Param, ...]:
    """The call's parameters: the entry's own, or one keyword per schema argument."""
    if part.call or part.inline is not None:
        return part.call
    return tuple(Param(key, key) for key in part.args)
