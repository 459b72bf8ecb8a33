"""The intermediate representation: a validated template as frozen dataclasses.

`compiler.spec` builds it from the template dict; `compiler.automaton` and
`compiler.emit` read it. Nothing downstream looks at the raw dict again, except to embed
it verbatim as the module's TEMPLATE constant.

    Template
      fields: Field ...           in template order
        open / close: Delimiter   literals or a regex, with its key path
        plan: ContentPlan         TextContent | JsonContent | XmlInlineContent
                                  | KvLinesContent | PythonicContent
                                  | JsonStreamContent | UnwrapContent | Deferred
        transform: transform tree (JSON values, Placeholder leaves, Operation nodes)
      start_anchor: Delimiter
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias


@dataclass(frozen=True)
class Delimiter:
    """An open, close or start anchor: literal strings, or one regex pattern."""

    path: str
    literals: tuple[str, ...] | None  # deduplicated, in template order
    pattern: str | None = None

    @property
    def is_literal(self) -> bool:
        return self.literals is not None

    @property
    def ordered(self) -> tuple[str, ...]:
        """Literals longest first (stable): the order the reference's alternation tries."""
        assert self.literals is not None
        return tuple(sorted(self.literals, key=len, reverse=True))

    @property
    def can_extend(self) -> bool:
        """Whether one literal is a proper prefix of another (a match could still grow)."""
        literals = self.literals or ()
        return any(a != b and a.startswith(b) for a in literals for b in literals)


@dataclass(frozen=True)
class Deferred:
    """A template value the reference accepts at load time but fails on when it is used.

    `error` names the exception class it raises then ("AttributeError", "regex.error"...);
    `truthy` is the truth value of the original template value, which the reference
    tests before it fails.
    """

    error: str
    message: str
    truthy: bool = True


@dataclass(frozen=True)
class TextContent:
    """text, int, float or bool: strip (or not), then convert."""

    kind: str
    strip: bool = True


@dataclass(frozen=True)
class JsonContent:
    unquoted_keys: bool = False
    # The `OPEN(.*?)CLOSE` regex for each string delimiter pair, or the failure to make them.
    string_delims: tuple[str, ...] | Deferred = ()
    allow_non_json: bool = False
    strip: bool = True


@dataclass(frozen=True)
class XmlInlineContent:
    tag_pattern: str
    value_parser: ContentPlan | None = None
    merge_duplicates: bool = False
    # Extension x-xml-inline: the value parser for each text of the pattern's `kind` group.
    kind_parsers: tuple[tuple[str, ContentPlan], ...] = ()
    # Text every tag match ends with (regex_profile.literal_suffix): the scan stops at its
    # last occurrence, so unclosed tags after it cost nothing.
    ends_with: str = ""


@dataclass(frozen=True)
class KvLinesContent:
    line_sep: Any = "\n"  # any JSON value: the reference uses it as given
    kv_sep: Any = ":"
    strip: bool = True
    value_parser: ContentPlan | None = None


@dataclass(frozen=True)
class PythonicContent:
    """Extension x-pythonic: tool calls in Python call syntax."""

    bracketed: bool = True
    json_literals: bool = True
    accept_json: bool = False


@dataclass(frozen=True)
class JsonStreamContent:
    """Extension x-json-stream: JSON values one after another."""

    separators: tuple[str, ...] = ()
    skip_invalid: bool = False


@dataclass(frozen=True)
class UnwrapContent:
    """Extension x-unwrap: text with inline markup replaced by the text it wraps."""

    pattern: str  # each match becomes its `text` group ("" without one)
    strip: bool = True


ContentPlan: TypeAlias = (
    "TextContent | JsonContent | XmlInlineContent | KvLinesContent | PythonicContent | JsonStreamContent | UnwrapContent | Deferred"
)

CONTENT_PARSERS = frozenset({"text", "int", "float", "bool", "json", "xml-inline", "kv-lines"})
# Extensions beyond v1 (runtime/extensions.py); a template using one is not plain v1.
EXTENSION_PARSERS = frozenset({"x-pythonic", "x-json-stream", "x-xml-inline", "x-unwrap"})
EXTENSION_OPERATIONS = frozenset(
    {"x-json-decode", "x-single-key", "x-first", "x-each", "x-as-list"}
)
EXTENSION_FIELD_KEYS = frozenset({"x-extend"})
# Content parsers whose chunks are part of the final value (region_chunk dirty=False).
STREAMABLE = frozenset({"text", "int", "float", "bool"})


@dataclass(frozen=True)
class Placeholder:
    """A whole-string `{root.key...}` in a transform."""

    path: str
    root: str
    keys: tuple[str, ...]
    loop: bool = False  # {item} inside an x-each value: the element, not a scope lookup


@dataclass(frozen=True)
class Operation:
    """An extension transform operation, written {"x-NAME": argument} (argument lowered)."""

    name: str
    argument: Any


@dataclass(frozen=True)
class Field:
    name: str
    index: int
    path: str  # "fields.thinking", or fields["tool calls"] for names that need quoting
    open: Delimiter | None
    close: Delimiter | None
    content: str
    plan: ContentPlan
    repeats: bool
    join: str | None
    optional: bool
    transform: Any  # transform tree with Placeholder leaves; None when absent
    transform_each: bool
    # Extension x-extend: each region's value is a list that extends the field's list.
    extend: bool = False

    @property
    def implicit(self) -> bool:
        return self.open is None

    @property
    def dirty(self) -> bool:
        return self.content not in STREAMABLE


@dataclass(frozen=True)
class Template:
    fields: tuple[Field, ...]
    implicit: Field | None
    defaults: dict[str, Any]
    start_anchor: Delimiter
    raw: dict[str, Any]
    sha256: str
