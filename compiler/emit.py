"""Render the IR and its automaton into a Python module, through Jinja2 code templates.

The render context holds only IR objects, derived identifiers and plain values; the code
templates in compiler/templates/ decide the code. Template values reach the source only
through the `q` (literal), `comment` and `ident` filters of compiler.quoting. The result
is formatted with black in-process and parsed with `ast` before anyone sees it.
"""

from __future__ import annotations

import ast
import importlib
import io
import keyword
import os
import re
import tokenize
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from functools import cached_property, lru_cache
from typing import Any

from . import __version__, parts
from .automaton import Automaton, StatePlan, Watch, build_automaton
from .ir import ContentPlan, Deferred, Field, Operation, Placeholder, Template
from .quoting import comment, identifier, module_name, quote
from .regex_profile import content_repeats
from .scan_step import ScanStep, plan_scan_step

LINE_LENGTH = 100  # keep in step with [tool.black] in pyproject.toml
# No generated line is longer than this (tests/test_generated_shape.py checks it).
MAX_LINE = 120
# Rounds of cutting long strings and comments, and black again (format_source).
WRAP_ROUNDS = 4
MIN_PIECE = 24  # characters of a string piece, at least, however deep it is indented
PIECE_BREAKS = frozenset(" |)>,;")
# A field name longer than this becomes `field<index>` in identifiers.
MAX_NAME = 40
# Above this many stop characters a fast path tests one compiled character class instead.
MAX_INLINE_STOP_CHARS = 4
_READABLE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# Exception classes a Deferred plan may raise, as written in generated code.
DEFERRED_ERRORS = {
    "AttributeError": "AttributeError",
    "KeyError": "KeyError",
    "TypeError": "TypeError",
    "ValueError": "ValueError",
    "regex.error": "regex.error",
}


@dataclass
class PlanNames:
    """Identifiers for one content plan (a field's, or a nested value parser's)."""

    plan: ContentPlan
    path: str
    prefix: str  # e.g. TOOL_CALLS or TOOL_CALLS_VALUE
    function: str | None = None  # module-level function, for value parsers
    value: PlanNames | None = None  # the nested value parser
    kinds: list[tuple[str, PlanNames]] = dataclass_field(default_factory=list)  # x-xml-inline

    @cached_property
    def part(self) -> parts.ContentPart | None:
        """The plan's registry entry; None for a Deferred plan, whose code raises."""
        return parts.content_part(self.plan)

    @cached_property
    def constants(self) -> list[tuple[parts.Constant, Any]]:
        """The module constants the plan's call reads: (constant, template value) when set."""
        part = self.part
        if part is None:
            return []
        return [
            (constant, value)
            for constant in part.constants
            if (value := parts.plan_value(self.plan, constant.attribute))
        ]

    @cached_property
    def arguments(self) -> list[tuple[str | None, str, Any]]:
        """The call's arguments after the text: (keyword or None, how to write it, value).

        "value" is a template value (written through `q`), "ident" an identifier, and
        "kinds" a list of (kind text, function identifier)."""
        part = self.part
        assert part is not None
        written: list[tuple[str | None, str, Any]] = []
        for param in parts.call_params(part):
            value = parts.plan_value(self.plan, param.attribute)
            if param.keyword is not None:
                if value == parts.plan_default(self.plan, param.attribute):
                    continue
                if param.only_if and not parts.plan_value(self.plan, param.only_if):
                    continue
            if param.render == "constant":
                suffix = next(c.suffix for c in part.constants if c.attribute == param.attribute)
                written.append((param.keyword, "ident", self.prefix + suffix))
            elif param.render == "function":
                assert self.value is not None and self.value.function is not None
                written.append((param.keyword, "ident", self.value.function))
            elif param.render == "kinds":
                written.append(
                    (param.keyword, "kinds", [(kind, names.function) for kind, names in self.kinds])
                )
            else:
                written.append((param.keyword, "value", value))
        return written

    @property
    def imports(self) -> set[tuple[str, str]]:
        """(module, name) for each name this plan's code imports."""
        part = self.part
        if part is None:
            return set()
        used = {(part.module, name) for name in part.imports}
        if any(isinstance(value, Deferred) for _, value in self.constants):
            used.add(("runtime", "Defect"))
        if any(self.repeats(pattern) is not None for pattern in self.patterns):
            used.add(("runtime.content", "cheap"))
        return used

    @property
    def patterns(self) -> list[str]:
        """The patterns of the plan's module constants."""
        found: list[str] = []
        for _, value in self.constants:
            if isinstance(value, str):
                found.append(value)
            elif not isinstance(value, Deferred):
                found.extend(value)
        return found

    @staticmethod
    def repeats(pattern: str) -> int | None:
        """The degree of a content pattern the runtime may search without the time bound
        over a short text (runtime.content.cheap), None if it is not cheap."""
        return content_repeats(pattern)

    @property
    def compiles_regex(self) -> bool:
        """Whether the plan's code compiles a pattern with `regex` (or raises regex.error)."""
        if isinstance(self.plan, Deferred):
            return self.plan.error == "regex.error"
        return any(not isinstance(value, Deferred) for _, value in self.constants)

    @property
    def has_constants(self) -> bool:
        """Whether the plan needs module constants (a compiled tag pattern, string delimiters)."""
        return bool(self.constants)

    def walk(self) -> list[PlanNames]:
        """This plan and every nested value parser, innermost last."""
        nested = ([self.value] if self.value else []) + [names for _, names in self.kinds]
        return [self] + [plan for names in nested for plan in names.walk()]


@dataclass
class FieldNames:
    field: Field
    slug: str
    content: PlanNames = dataclass_field(init=False)

    def __post_init__(self) -> None:
        self.content = _plan_names(
            self.field.plan, f"{self.field.path}.content_args", self.upper, None
        )

    @property
    def upper(self) -> str:
        return self.slug.upper()

    @property
    def storage(self) -> parts.StoragePart:
        return parts.STORAGE[self.field.storage]

    @property
    def state(self) -> str:
        return f"{self.upper}_STATE"

    @property
    def close(self) -> str:
        return f"_close_{self.slug}"

    @property
    def scan(self) -> str:
        return f"_scan_{self.slug}"

    def delimiter(self, kind: str) -> str:
        return f"{self.upper}_{kind.upper()}"

    def identifiers(self) -> list[str]:
        names = [self.state, self.scan, self.close]
        names.append(f"{self.upper}_STOP")
        for kind in ("open", "close"):
            base = self.delimiter(kind)
            names += [
                base,
                f"{base}_RE",
                f"{base}_RUNS",
                f"{base}_LED_BY",
                f"{base}_PREFIX",
            ]
        for plan in self.content.walk():
            constants = plan.part.constants if plan.part is not None else ()
            names += [plan.prefix + constant.suffix for constant in constants]
            if plan.function:
                names.append(plan.function)
        return names


def _plan_names(plan: ContentPlan, path: str, prefix: str, function: str | None) -> PlanNames:
    names = PlanNames(plan=plan, path=path, prefix=prefix, function=function)
    nested = getattr(plan, "value_parser", None)
    if nested is not None:
        names.value = _plan_names(
            nested, f"{path}.value_parser", f"{prefix}_VALUE", f"_{prefix.lower()}_value"
        )
    for index, (kind, kind_plan) in enumerate(getattr(plan, "kind_parsers", ())):
        # Kind texts are data: identifiers use the index, the text goes through q.
        names.kinds.append(
            (
                kind,
                _plan_names(
                    kind_plan,
                    f"{path}.kind_parsers.{kind}",
                    f"{prefix}_KIND{index}",
                    f"_{prefix.lower()}_kind{index}",
                ),
            )
        )
    return names


def derive_names(fields: tuple[Field, ...]) -> list[FieldNames]:
    """Readable identifiers per field, or index-based ones when readable ones would clash.

    Field names are data; where one must become part of an identifier it is used only if
    it is a plain ASCII name of at most MAX_NAME characters, and only if every identifier
    derived from every field stays unique. Otherwise all fields use `field<index>`, which cannot clash.
    """
    readable = [
        FieldNames(
            f,
            (
                f.name
                if _READABLE.fullmatch(f.name)
                and len(f.name) <= MAX_NAME
                and not keyword.iskeyword(f.name)
                else f"field{f.index}"
            ),
        )
        for f in fields
    ]
    if _unique(readable):
        return readable
    indexed = [FieldNames(f, f"field{f.index}") for f in fields]
    assert _unique(indexed), "index-based identifiers must be unique"
    return indexed


def _unique(names: list[FieldNames]) -> bool:
    seen: set[str] = set()
    for item in names:
        for name in item.identifiers():
            if name in seen:
                return False
            seen.add(name)
    return True


@dataclass
class StateContext:
    plan: StatePlan
    names: FieldNames | None  # None for the null sink
    constant: str
    fast: bool  # whether `feed` has a fast path for it (else every chunk is scanned)
    stop: str | None  # constant holding a compiled stop-character class, if used
    # Whether the fast path asks the state if a start text occurs (State.may_start): the
    # texts are all known, and the character test alone would send too much to the scan.
    starts: bool
    scan: ScanStep  # the generated scan step

    @property
    def stop_pattern(self) -> str:
        chars = self.plan.stop_chars or ()
        return "[" + "".join(re.escape(char) for char in chars) + "]"

    @property
    def literal_watches(self) -> list[tuple[int, Watch]]:
        """(rank, watch) for literal delimiters; rank is the reference's tie-break order."""
        return [
            (rank, watch)
            for rank, watch in enumerate(self.plan.watches)
            if watch.delimiter.is_literal
        ]

    @property
    def pattern_watches(self) -> list[tuple[int, Watch]]:
        return [
            (rank, watch)
            for rank, watch in enumerate(self.plan.watches)
            if not watch.delimiter.is_literal
        ]


def _build_dependency(module: str) -> Any:
    """Import a build dependency (jinja2, black); without it, say which extra brings it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
        raise ModuleNotFoundError(
            f"compiling a template needs {module}, which is not installed: "
            "pip install 'response-template-compiler[build]'",
            name=module,
        ) from None


@lru_cache(maxsize=1)
def _environment() -> Any:
    jinja2 = _build_dependency("jinja2")

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("compiler", "templates"),
        bytecode_cache=_bytecode_cache(jinja2),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    builtins = env.filters
    env.filters = {
        "q": quote,
        "comment": comment,
        "ident": identifier,
        "module_name": module_name,
        "join": _join,
        "char_list": _char_list,
        # text-shaping builtins, only ever applied to compiler-made strings
        "length": builtins["length"],
        "sort": builtins["sort"],
        "trim": builtins["trim"],
        "trim_end": str.rstrip,
        "upper": builtins["upper"],
    }
    env.tests.update(
        operation=lambda value: isinstance(value, Operation),
        placeholder=lambda value: isinstance(value, Placeholder),
        dict=lambda value: isinstance(value, dict),
        list=lambda value: isinstance(value, list),
    )
    return env


def _bytecode_cache(jinja2: Any) -> Any:
    """Keep compiled code templates between processes (~0.1 s to compile them otherwise).

    In $RTC_CACHE_DIR, else ~/.cache/response-template-compiler; none if not writable.
    Jinja keys entries by the templates' source, so an edited template is recompiled.
    """
    directory = os.environ.get("RTC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "response-template-compiler",
    )
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(
        directory, pattern=f"jinja2-{jinja2.__version__}-%s.cache"
    )


def _char_list(chars: Any) -> str:
    """Characters for a comment: each as an escaped repr, joined with "or"."""
    return " or ".join(ascii(char) for char in sorted(chars))


def _join(items: Any, separator: str = "") -> str:
    """Join already-rendered code fragments (registered as the only `join`)."""
    return separator.join(items)


def render(template: Template, *, source: str, regenerate: str | None) -> str:
    """The module's source, as rendered (before formatting)."""
    automaton = build_automaton(template)
    field_names = derive_names(template.fields)
    by_field = {item.field.name: item for item in field_names}
    states = [_state_context(plan, by_field) for plan in automaton.states]
    state_of = {
        item.plan.field.name: item
        for item in states
        if item.plan.field is not None and not item.plan.implicit
    }
    start = states[-1]
    return (
        _environment()
        .get_template("module.py.j2")
        .render(
            version=__version__,
            source=source,
            sha256=template.sha256,
            regenerate=regenerate,
            template=template,
            automaton=automaton,
            fields=field_names,
            by_field=by_field,
            states=states,
            # The start state first: most text of most outputs arrives in it.
            fast_states=sorted(
                (state for state in states if state.fast), key=lambda state: state is not start
            ),
            state_of=state_of,
            start=start,
            deferred_errors=DEFERRED_ERRORS,
            operations=parts.OPERATIONS,
            profiles={
                w.delimiter.pattern: w.profile
                for st in automaton.states
                for w in st.watches
                if w.profile
            },
            uses_regex=_needs_regex(template, field_names),
            uses_re=any(item.stop for item in states),
            required=tuple(f.name for f in template.fields if not f.optional),
            default_keys=set(template.defaults),
            runtime_imports=_runtime_imports(template, automaton, field_names, states),
        )
    )


def _needs_regex(template: Template, fields: list[FieldNames]) -> bool:
    """Whether the module compiles patterns (a literal-only template never imports regex)."""
    delimiters = [
        delim for f in template.fields for delim in (f.open, f.close) if delim is not None
    ]
    if any(delim.pattern is not None for delim in [*delimiters, template.start_anchor]):
        return True
    return any(plan.compiles_regex for names in fields for plan in names.content.walk())


def _state_context(plan: StatePlan, by_field: dict[str, FieldNames]) -> StateContext:
    names = by_field[plan.field.name] if plan.field is not None else None
    # Field-derived names start with a letter, so the sink's underscore names cannot clash.
    prefix = names.upper if names is not None else "_SINK"
    stop_chars = plan.stop_chars
    fast = stop_chars is not None
    stop = None
    if stop_chars is not None and len(stop_chars) > MAX_INLINE_STOP_CHARS:
        stop = f"{prefix}_STOP"
    scan = plan_scan_step(
        plan,
        names.scan if names is not None else "_scan_outside_regions",
        {name: item.slug for name, item in by_field.items()},
        {
            watch.delimiter.path: by_field[watch.field.name].delimiter(watch.kind)
            for watch in plan.watches
            if watch.delimiter.is_literal
        },
    )
    return StateContext(
        plan=plan,
        names=names,
        constant=names.state if names is not None else "SINK",
        fast=fast,
        stop=stop,
        starts=bool(fast and plan.start_texts),
        scan=scan,
    )


def _runtime_imports(
    template: Template, automaton: Automaton, fields: list[FieldNames], states: list[StateContext]
) -> list[tuple[str, list[str]]]:
    """(module, names) for each module the generated code imports from: the runtime's core
    from `runtime`, each part's function from the module its registry entry names."""
    core = {"CompiledParser", "Event", "Memo", "State", "Step"}
    if any(state.scan.shape == "general" for state in states):
        core.add("Hit")
    if any(state.fast and state.names is not None for state in states):
        core.add("PARTS_PER_BLOCK")
    if automaton.context is not None and any(
        state.fast and state.plan.holds_space_runs for state in states
    ):
        core.add("SPACE_RUNS")
    for state in states:
        for watch in state.plan.watches:
            core.add(watch.kind.upper())
            core.add("LiteralDelimiter" if watch.delimiter.is_literal else "RegexDelimiter")
            for run in watch.profile.runs if watch.profile is not None else ():
                core.add("HeldObject" if run.json_object else "HeldRun")
    core.add("after_last_literal" if template.start_anchor.is_literal else "after_last_match")
    used = {("runtime", name) for name in core}
    for names in fields:
        f = names.field
        for plan in names.content.walk():
            used |= plan.imports
        storage = parts.STORAGE[f.storage]
        used.update((storage.module, name) for name in storage.imports)
        if f.transform_each:
            used.add(("runtime", "each_item"))
        for placeholder in parts.placeholders(f.transform):
            if not placeholder.loop and (f.transform_each or placeholder.root != "content"):
                used.add(("runtime", "lookup"))
            if placeholder.keys:
                used.add(("runtime", "dig"))
        for operation in parts.operations(f.transform):
            entry = parts.OPERATIONS[operation.name]
            used.update((entry.module, name) for name in entry.imports)
    modules: dict[str, list[str]] = {}
    for module, name in sorted(used):
        modules.setdefault(module, []).append(name)
    # isort's order: modules by name; in each, CONSTANTS, then Classes, then functions
    return [
        (
            module,
            sorted(
                names,
                key=lambda name: (0 if name.isupper() else 1 if name[0].isupper() else 2, name),
            ),
        )
        for module, names in sorted(modules.items())
    ]


def format_source(source: str) -> str:
    """black, in-process, with the project's settings; then long strings and comments are
    cut into pieces black can lay out, so that no line is longer than MAX_LINE.

    black splits code at brackets but never splits a string or a comment, and templates
    hold long patterns and literals (and, hostile ones, long field names). A string on a
    long line becomes an implicit concatenation of pieces, `("..." "...")`, the same value;
    black then puts each piece on its own line. Pieces that land deeper than expected are
    cut again, a few rounds at most.
    """
    black = _build_dependency("black")

    mode = black.Mode(line_length=LINE_LENGTH, target_versions={black.TargetVersion.PY310})
    text = black.format_str(source, mode=mode)
    for _ in range(WRAP_ROUNDS):
        wrapped = wrap_long_lines(text)
        if wrapped == text:
            break
        text = black.format_str(wrapped, mode=mode)
    return text


def wrap_long_lines(text: str) -> str:
    """Cut the strings and comments of lines over MAX_LINE into pieces about LINE_LENGTH
    wide (one round). On a long line the longest strings are cut first, until what would
    stay on the line fits."""
    lines = io.StringIO(text).readlines()  # the rows tokenize counts
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    # The provenance header (the comment lines the module starts with) stays whole: its
    # lines are read as they are, and it names the source path its caller gave.
    header = next((row for row, line in enumerate(lines, 1) if not line.startswith("#")), 1)
    by_row: dict[int, list[int]] = {}
    for index, token in enumerate(tokens):
        row = token.start[0]
        if (
            header <= row <= len(lines)
            and token.end[0] == row
            and _width(lines[row - 1]) > MAX_LINE
        ):
            by_row.setdefault(row, []).append(index)
    edits: list[tuple[int, int, int, str]] = []  # (row, start col, end col, replacement)
    for row, indexes in by_row.items():
        line = lines[row - 1]
        indent = len(line) - len(line.lstrip())
        width = max(MIN_PIECE, LINE_LENGTH - indent - 8)
        strings = [i for i in indexes if tokens[i].type == tokenize.STRING]
        comments = [i for i in indexes if tokens[i].type == tokenize.COMMENT]
        if comments and not line[: tokens[comments[0]].start[1]].strip():
            token = tokens[comments[0]]
            edits.append(
                (
                    row,
                    token.start[1],
                    token.end[1],
                    _wrap_comment(token.string, width, token.start[1]),
                )
            )
            continue
        remaining = _width(line)
        for index in sorted(strings, key=lambda i: -len(tokens[i].string)):
            token = tokens[index]
            if remaining <= MAX_LINE:
                break
            size = len(token.string)
            pieces = _string_pieces(token.string, min(width, max(MIN_PIECE, size // 2 + 2)))
            if pieces is None:
                continue
            remaining -= size
            joined = " ".join(pieces)
            neighbours = (tokens[index - 1].type, tokens[index + 1].type)
            # A string already in an implicit concatenation just gains pieces; parentheses
            # around it would end the concatenation there.
            if tokenize.STRING not in neighbours:
                joined = f"({joined})"
            edits.append((row, token.start[1], token.end[1], joined))
    for row, start, end, replacement in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:start] + replacement + line[end:]
    return "".join(lines)


def _width(line: str) -> int:
    return len(line.rstrip("\r\n"))


def _wrap_comment(comment_text: str, width: int, col: int) -> str:
    """A standalone comment as several comment lines, each about `width` wide."""
    body = comment_text[1:].strip()
    chunks = []
    while len(body) > width:
        cut = body.rfind(" ", width // 2, width)
        cut = width if cut == -1 else cut
        chunks.append(body[:cut].rstrip())
        body = body[cut:].lstrip()
    chunks.append(body)
    return ("\n" + " " * col).join(f"# {chunk}" for chunk in chunks)


def _string_pieces(literal: str, width: int) -> list[str] | None:
    """Python literals, each at most about `width` long, whose concatenation is the value
    of `literal`; None for a literal that is not a plain str (bytes, f-strings, triple
    quotes) or too short to cut."""
    prefix = literal[: len(literal) - len(literal.lstrip("rRbBuUfF"))].lower()
    if prefix not in ("", "r") or literal.lstrip("rR").startswith(('"""', "'''")):
        return None
    value = ast.literal_eval(literal)
    pieces = []
    start = 0
    while start < len(value):
        end = start
        size = 0
        while end < len(value) and size + _cost(value[end]) <= width - 3:
            size += _cost(value[end])
            end += 1
        end = max(end, start + 1)
        if end < len(value):
            # Prefer ending a piece after a separator, when one is in its last quarter.
            for cut in range(end, start + (end - start) * 3 // 4, -1):
                if value[cut - 1] in PIECE_BREAKS:
                    end = cut
                    break
        pieces.append(quote(value[start:end], raw=prefix == "r"))
        start = end
    return pieces if len(pieces) > 1 else None


def _cost(char: str) -> int:
    """Characters `char` takes inside a quoted literal."""
    return len(repr(char)) - 2


def check_source(source: str, label: str) -> None:
    """Refuse to hand out source that does not parse."""
    ast.parse(source, filename=label)
