"""Run-time support for compiled response parsers.

Generated modules subclass `CompiledParser` and declare their automaton with the classes
of `runtime.automaton`; the content parsers, transform helpers and tool-schema coercion
they call live in the sibling modules. Only `regex` is required at run time.
"""

from .automaton import (
    CLOSE,
    OPEN,
    Hit,
    LiteralDelimiter,
    Memo,
    RegexDelimiter,
    State,
    Step,
)
from .content import Defect, parse_json, parse_kv_lines, parse_xml_inline
from .extensions import (
    as_list,
    each_of,
    extend_list,
    first_of,
    json_decode,
    parse_json_stream,
    parse_pythonic,
    single_key,
    unwrap_text,
)
from .parser import CompiledParser, Event, after_last_literal, after_last_match
from .regions import PARTS_PER_BLOCK, join_text, require_str
from .scanner import SPACE_RUNS
from .transform import dig, each_item, lookup
from .waiting import HeldObject, HeldRun

__all__ = [
    "CLOSE",
    "OPEN",
    "PARTS_PER_BLOCK",
    "SPACE_RUNS",
    "CompiledParser",
    "Defect",
    "Event",
    "HeldObject",
    "HeldRun",
    "Hit",
    "LiteralDelimiter",
    "Memo",
    "RegexDelimiter",
    "State",
    "Step",
    "after_last_literal",
    "after_last_match",
    "as_list",
    "dig",
    "each_item",
    "each_of",
    "extend_list",
    "first_of",
    "join_text",
    "json_decode",
    "lookup",
    "parse_json",
    "parse_json_stream",
    "parse_kv_lines",
    "parse_pythonic",
    "parse_xml_inline",
    "require_str",
    "single_key",
    "unwrap_text",
]
