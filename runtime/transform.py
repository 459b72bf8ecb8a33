"""Helpers for compiled `transform` templates.

The compiler turns a transform into a Python expression that builds the output shape
directly. Placeholders become calls here, which raise the reference's exception classes
when a name is not in scope (KeyError) or a dotted path cannot be followed (ValueError).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def lookup(scope: dict[str, Any], name: str) -> Any:
    """The value of placeholder `{name}`: a named capture or, under transform_each, an item key."""
    try:
        return scope[name]
    except KeyError:
        raise KeyError(
            f"transform placeholder '{{{name}}}' is not defined. Available: {sorted(scope)}"
        ) from None


def dig(value: Any, path: str, *keys: str) -> Any:
    """Follow the dotted part of placeholder `{path}` into `value`."""
    for key in keys:
        if not isinstance(value, dict):
            raise ValueError(
                f"transform placeholder '{{{path}}}' cannot index into {type(value).__name__} at '{key}'"
            )
        if key not in value:
            raise ValueError(
                f"transform placeholder '{{{path}}}' is missing key '{key}'. Available: {sorted(value)}"
            )
        value = value[key]
    return value


def each_item(content: Any, field: str) -> Iterator[dict[str, Any]]:
    """The records `transform_each` reshapes, checked one by one as they are reached."""
    if not isinstance(content, list):
        raise ValueError(
            f"Field {field!r}: transform_each requires the parsed content to be a list, got {type(content).__name__}."
        )
    for item in content:
        if not isinstance(item, dict):
            raise ValueError(
                f"Field {field!r}: transform_each requires each list element to be a dict, got {type(item).__name__}."
            )
        yield item
