"""`tools=`: cast tool-call arguments with the JSON schema of the tool they call.

Models often write every argument as text (`<parameter=n>3</parameter>`). When the caller
passes the tool definitions, each argument whose schema names a type is converted to it
as its region closes, as the reference does: integer, number, boolean, null, object,
array, type lists, anyOf / oneOf and `nullable`. A value that does not convert stays text.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_INFINITIES = (float("inf"), float("-inf"))

# The message field that holds tool calls, in the shape `{"function": {"name", ...}}`.
TOOL_CALLS = "tool_calls"


def tool_parameters(tools: Iterable[Any] | None) -> dict[str, dict[str, Any]]:
    """Map each tool name to its parameters' `properties` schema.

    `tools` is a list of tool schemas (`{"type": "function", "function": {"name", ...}}`,
    or the bare function object) or Python functions, as `apply_chat_template` takes
    them. Anything else is a TypeError (not a list, or an item that is neither a dict nor
    a function) or a ValueError (a schema with no function name), naming the item: the
    reference skips such tools silently, which casts nothing and hides the mistake.
    """
    if tools is None:
        return {}
    if isinstance(tools, (str, bytes, bytearray, Mapping)) or not isinstance(tools, Iterable):
        raise TypeError(
            "tools= takes a list of tool schemas (dicts) or functions, "
            f"got {type(tools).__name__}"
        )
    params: dict[str, dict[str, Any]] = {}
    for index, tool in enumerate(tools):
        if isinstance(tool, (types.FunctionType, types.MethodType)):
            tool = schema_from_callable(tool)
        if not isinstance(tool, dict):
            raise TypeError(
                f"tools[{index}]: a tool is a schema (a dict) or a function, "
                f"got {type(tool).__name__}"
            )
        function = tool.get("function", tool)
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str):
            keys = ", ".join(repr(key) for key in list(tool)[:8])
            raise ValueError(
                f"tools[{index}]: a tool schema names its function, as "
                '{"type": "function", "function": {"name": ..., "parameters": ...}}; '
                f"got an object with keys [{keys}]"
            )
        parameters = function.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, dict) else None
        params[name] = properties if isinstance(properties, dict) else {}
    return params


def schema_types(schema: Any) -> tuple[str, ...]:
    """Every JSON type a schema admits, in the order they are tried."""
    if not isinstance(schema, dict):
        return ()
    declared = schema.get("type")
    names = [declared] if isinstance(declared, str) else []
    if isinstance(declared, list):
        names.extend(name for name in declared if isinstance(name, str))
    for union in ("anyOf", "oneOf"):
        for choice in schema.get(union) or []:
            names.extend(schema_types(choice))
    if schema.get("nullable") and "null" not in names:
        names.append("null")
    return tuple(names)


def coerce_argument(raw: str, names: tuple[str, ...]) -> Any:
    """Convert `raw` to the first type in `names` it fits; keep the text if none fits."""
    for name in names:
        try:
            if name == "integer":
                try:
                    return int(raw)
                except ValueError:
                    number = float(raw)  # whole numbers written as floats, e.g. "3.0"
                    if not number.is_integer():
                        continue
                    return int(number)
            if name == "number":
                number = float(raw)
                if number != number or number in _INFINITIES:
                    continue
                return int(number) if number.is_integer() and "." not in raw else number
            if name == "boolean" and raw.strip().lower() in ("true", "1", "false", "0"):
                return raw.strip().lower() in ("true", "1")
            if name == "null" and raw.strip() in ("null", "None"):
                return None
            if name in ("object", "array"):
                decoded = json.loads(raw)
                if isinstance(decoded, dict if name == "object" else list):
                    return decoded
        except ValueError:
            continue
    return raw


def coerce_tool_calls(value: Any, params: dict[str, dict[str, Any]]) -> Any:
    """Cast the arguments of a tool call (or of each call in a list) in place."""
    if isinstance(value, list):
        return [coerce_tool_calls(item, params) for item in value]
    function = value.get("function") if isinstance(value, dict) else None
    if not isinstance(function, dict):
        return value
    name, arguments = function.get("name"), function.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return value
    properties = params.get(name)
    if properties:
        for key, argument in arguments.items():
            if key not in properties:
                continue
            names = schema_types(properties[key])
            if not names:
                continue
            if isinstance(argument, str):
                arguments[key] = coerce_argument(argument, names)
            elif isinstance(argument, list) and "array" not in names:
                # several values for one key, collected by xml-inline's merge_duplicates
                arguments[key] = [
                    coerce_argument(item, names) if isinstance(item, str) else item
                    for item in argument
                ]
    return value


# -- tools given as Python functions ------------------------------------------------------

_BASIC_TYPES: dict[Any, dict[str, Any]] = {
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    list: {"type": "array"},
    tuple: {"type": "array"},
    dict: {"type": "object"},
    Any: {},
}
_SCALAR_NAMES = {
    int: "integer",
    float: "number",
    str: "string",
    bool: "boolean",
    type(None): "null",
}


def schema_from_callable(function: Callable[..., Any]) -> dict[str, Any]:
    """A tool schema from a function's type hints (the types are all coercion needs).

    transformers additionally requires a Google-style docstring describing every argument;
    only the types matter here, so a function without one is accepted.
    """
    import inspect  # only needed for tools given as functions

    hints = typing.get_type_hints(function)
    parameters = list(inspect.signature(function).parameters.values())
    receiver = None
    if (
        parameters
        and parameters[0].name in ("self", "cls")
        and parameters[0].annotation is inspect.Parameter.empty
    ):
        receiver = parameters[0].name
    for parameter in parameters:
        if parameter.name != receiver and parameter.annotation is inspect.Parameter.empty:
            raise TypeError(
                f"tool {function.__name__}: argument {parameter.name!r} has no type hint"
            )
    properties: dict[str, Any] = {}
    for name, hint in hints.items():
        if name == receiver:
            continue
        if name == "return":
            try:
                properties[name] = _hint_schema(hint)
            except TypeError:
                pass
        else:
            properties[name] = _hint_schema(hint)
    return {
        "type": "function",
        "function": {
            "name": function.__name__,
            "parameters": {"type": "object", "properties": properties},
        },
    }


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    names = list(dict.fromkeys(_SCALAR_NAMES[type(value)] for value in values))
    return {"type": names[0] if len(names) == 1 else names, "enum": values}


def _hint_schema(hint: Any) -> dict[str, Any]:
    import enum

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is None and isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = [member.value for member in hint]
        if not values or any(type(value) not in _SCALAR_NAMES for value in values):
            raise TypeError(f"enum {hint.__name__} cannot be written as JSON scalars")
        return _enum_schema(values)
    if origin is None:
        if hint in _BASIC_TYPES:
            return dict(_BASIC_TYPES[hint])
        raise TypeError(f"cannot convert type hint {hint!r} to a JSON schema")
    if origin is typing.Union or origin is types.UnionType:
        subtypes = [_hint_schema(arg) for arg in args if arg is not type(None)]
        if len(subtypes) == 1:
            schema = subtypes[0]
        elif all(sub.keys() == {"type"} and isinstance(sub["type"], str) for sub in subtypes):
            names = sorted({sub["type"] for sub in subtypes})
            schema = {"type": names[0] if len(names) == 1 else names}
        else:
            schema = {"anyOf": subtypes}
        if type(None) in args:
            schema["nullable"] = True
        return schema
    if origin is typing.Literal and args:
        if any(type(arg) not in _SCALAR_NAMES for arg in args):
            raise TypeError("typing.Literal may only list JSON scalars")
        return _enum_schema(list(args))
    if origin is list:
        return {"type": "array", "items": _hint_schema(args[0])} if args else {"type": "array"}
    if origin is tuple:
        if not args:
            return {"type": "array"}
        if len(args) == 1 or ... in args:
            raise TypeError(f"cannot convert type hint {hint!r} to a JSON schema; use list[...]")
        return {"type": "array", "prefixItems": [_hint_schema(arg) for arg in args]}
    if origin is dict:
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = _hint_schema(args[1])
        return schema
    raise TypeError(f"cannot convert type hint {hint!r} to a JSON schema")


def require_names(value: Any) -> None:
    """Raise ValueError unless every tool call in a region's value names its function.

    The server policy (on_error="content") fails such a region, so that its text reaches
    the client as content rather than a call no one can run. A value is a call (a dict), a
    list of calls (`transform_each`, `x-extend`) or a list of such lists; a call names its
    function with a non-empty string at `function.name`.
    """
    if isinstance(value, list):
        for item in value:
            require_names(item)
        return
    function = value.get("function") if isinstance(value, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not name:
        shown = "no name" if name is None else f"name {name!r}"
        raise ValueError(f"a tool call has {shown}: it names no function to call")
