"""The only ways template data reaches generated source.

`quote` writes a JSON-like value as a Python literal and proves it round-trips through
`ast.literal_eval`, so no template string can become code. `comment` makes text safe for
a `#` comment: printable ASCII or an escaped repr, never a line break (a bare `\\r` ends a
comment). `identifier` checks names the compiler derived. The Jinja environment in
`compiler.emit` registers exactly these three filters.
"""

from __future__ import annotations

import ast
import keyword
import math
from typing import Any


class QuotingError(ValueError):
    """A value that cannot be written as a Python literal."""


def quote(value: Any, *, raw: bool = False) -> str:
    """`value` as a Python literal; `raw=True` prefers r"..." for a regex pattern when that
    spells the same string (no quotes, line breaks or other control characters)."""
    text = _raw(value) if raw and isinstance(value, str) else None
    if text is None:
        text = _literal(value)
    if not _same(ast.literal_eval(text), value):
        raise QuotingError(f"literal does not round-trip: {value!r}")
    return text


def _raw(value: str) -> str | None:
    trailing = len(value) - len(value.rstrip("\\"))
    if '"' in value or trailing % 2 or not all(" " <= char <= "~" for char in value):
        return None
    return f'r"{value}"'


def _literal(value: Any) -> str:
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuotingError(f"{value!r} has no Python literal")
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    if isinstance(value, tuple):
        items = [_literal(item) for item in value]
        return f"({items[0]},)" if len(items) == 1 else "(" + ", ".join(items) + ")"
    if isinstance(value, (set, frozenset)):
        if not value:
            raise QuotingError("an empty set has no literal; write frozenset()")
        return "{" + ", ".join(_literal(item) for item in sorted(value)) + "}"
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise QuotingError("only string keys can be quoted")
        return (
            "{"
            + ", ".join(f"{_literal(key)}: {_literal(item)}" for key, item in value.items())
            + "}"
        )
    raise QuotingError(f"cannot quote a {type(value).__name__}")


def _same(left: Any, right: Any) -> bool:
    """Equal, with the same types all the way down (1 == True == 1.0 is not enough)."""
    if type(left) is not type(right):
        return isinstance(left, set) and isinstance(right, frozenset) and left == right
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, (list, tuple)):
        return len(left) == len(right) and all(
            _same(a, b) for a, b in zip(left, right, strict=True)
        )
    if isinstance(left, float):
        return left == right and math.copysign(1.0, left) == math.copysign(1.0, right)
    return bool(left == right)


def comment(value: Any) -> str:
    """Text for a `#` comment: printable ASCII as is, anything else as an escaped repr."""
    text = str(value)
    if all(" " <= char <= "~" for char in text):
        return text
    return ascii(text)


def identifier(name: str) -> str:
    """A name the compiler derived; refuse anything that is not a plain identifier."""
    if not (name.isidentifier() and name.isascii()) or keyword.iskeyword(name):
        raise QuotingError(f"not a safe identifier: {name!r}")
    return name


def module_name(name: str) -> str:
    """A dotted module path from the parts registry; refuse anything else."""
    for part in name.split("."):
        identifier(part)
    return name
