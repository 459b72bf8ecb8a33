"""The intermediate representation: a validated template as frozen dataclasses.

`compiler.spec` builds it from the template dict; `compiler.automaton` and
`compiler.emit` read it. Nothing downstream looks at the raw dict again, except to embed
it verbatim as the module's TEMPLATE constant.

    Template
      fields: Field ...           in template order
        open / close: Delimiter   literals or a regex, with its key path
        plan: ContentPlan         TextContent | JsonContent | XmlInlineContent
                                  | KvLinesContent | ExtensionContent | Deferred
        storage: str              assign | repeats | join | x-extend
        transform: transform tree (JSON values, Placeholder leaves, Operation nodes)
      start_anchor: Delimiter

Each plan's `part`, each Operation's `name` and each field's `storage` name the
compiler.parts registry entry that lowered it and says how it becomes code.
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

    @property
    def part(self) -> str:
        """The registry entry (compiler.parts) this plan was lowered by."""
        return self.kind


@dataclass(frozen=True)
class JsonContent:
    unquoted_keys: bool = False
    # The `OPEN(.*?)CLOSE` regex for each string delimiter pair, or the failure to make them.
    string_delims: tuple[str, ...] | Deferred = ()
    allow_non_json: bool = False
    strip: bool = True
    part: str = "json"


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
    part: str = "xml-inline"  # or "x-xml-inline", whose arguments are checked strictly


@dataclass(frozen=True)
class KvLinesContent:
    line_sep: Any = "\n"  # any JSON value: the reference uses it as given
    kv_sep: Any = ":"
    strip: bool = True
    value_parser: ContentPlan | None = None
    part: str = "kv-lines"


@dataclass(frozen=True)
class ExtensionContent:
    """An extension content parser (x-pythonic, x-json-stream, x-unwrap...): its registry
    entry, and its checked arguments in schema order (JSON arrays as tuples)."""

    part: str
    arguments: tuple[tuple[str, Any], ...] = ()


ContentPlan: TypeAlias = (
    "TextContent | JsonContent | XmlInlineContent | KvLinesContent | ExtensionContent | Deferred"
)


@dataclass(frozen=True)
class Placeholder:
    """A whole-string `{root.key...}` in a transform."""

    path: str
    root: str
    keys: tuple[str, ...]
    loop: bool = False  # {item} inside an x-each value: the element, not a scope lookup


@dataclass(frozen=True)
class Operation:
    """A transform operation, written {"x-NAME": argument} (argument lowered); its
    registry entry (compiler.parts.OPERATIONS) says how it is written and called."""

    name: str
    argument: Any


@dataclass(frozen=True)
class Field:
    name: str
    index: int
    path: str  # "fields.thinking", or fields["tool calls"] for names that need quoting
    open: Delimiter | None
    close: Delimiter | None
    content: str  # the content parser's name, a key of compiler.parts.CONTENT
    plan: ContentPlan
    # How a region's value is stored: a key of compiler.parts.STORAGE ("assign",
    # "repeats", "join", "x-extend").
    storage: str
    join: str | None  # the separator of "join"
    optional: bool
    transform: Any  # transform tree with Placeholder leaves; None when absent
    transform_each: bool
    # Whether region chunks are not part of the final value (structured content).
    dirty: bool

    @property
    def implicit(self) -> bool:
        return self.open is None


@dataclass(frozen=True)
class Template:
    fields: tuple[Field, ...]
    implicit: Field | None
    defaults: dict[str, Any]
    start_anchor: Delimiter
    raw: dict[str, Any]
    sha256: str
