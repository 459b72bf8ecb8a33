"""Hypothesis strategies: templates, model outputs built from their delimiters, chunkings.

Outputs are sequences of fragments that matter to a parser: whole delimiters, near-miss
prefixes of them, strings that match (or almost match) regex delimiters, bodies that do
and do not parse, unicode and whitespace. Small shared alphabets make delimiters overlap
and collide, which is where scanners go wrong.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from hypothesis import strategies as st

# -- chunkings --------------------------------------------------------------------------


@st.composite
def chunkings(draw: Any, text: str) -> list[str]:
    """Whole, one character at a time, or random cuts; sometimes with empty feeds."""
    mode = draw(st.sampled_from(["whole", "chars", "cuts", "cuts", "cuts"]))
    if mode == "whole":
        chunks = [text]
    elif mode == "chars":
        chunks = list(text)
    else:
        cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=12)))
        bounds = [0, *cuts, len(text)]
        chunks = [text[a:b] for a, b in itertools.pairwise(bounds)]
    if draw(st.booleans()):
        positions = draw(st.lists(st.integers(0, len(chunks)), max_size=3))
        for position in sorted(positions, reverse=True):
            chunks.insert(position, "")
    return chunks


# -- text fragments -----------------------------------------------------------------------

TEXT = [
    "hello",
    " ",
    "\n",
    "  \n ",
    "x",
    "42",
    " 3.5 ",
    "true",
    "False",
    "é",
    "日本語",
    "🙂",
    "\u2028",
    "a\rb",
    "\t",
    # Whitespace to str.isspace that regex's \s does not match, and wide whitespace that it
    # does: a run of them may or may not lead a pattern (Scanner._feed_run).
    "\x1c",
    " \u3000",
    "<",
    ">",
    "|",
    "</",
    "\\",
    '"',
]
BODIES = [
    '{"a": 1}',
    '{"name": "f", "arguments": {"x": "y", "n": 2}}',
    '{"name": "get", "args": {"city": "Paris"}}',
    '[{"tool_name": "t", "parameters": {"q": 1}}]',
    "[1, 2]",
    '{"a":',
    "not json",
    "{a: 1, b: 'x'}",
    "NaN",
    "<p=a>1</p><p=b>two</p>",
    "<k>v</k>",
    "name: alice\nage: 30",
    "k=v;q=1",
    "\x01",
]


def fragments_for(literals: list[str], regex_samples: list[str]) -> st.SearchStrategy[str]:
    """Fragments built from a template's own delimiters plus generic text and bodies."""
    near = sorted({literal[:cut] for literal in literals for cut in range(1, len(literal))})
    options = [st.sampled_from(TEXT), st.sampled_from(BODIES)]
    if literals:
        options.append(st.sampled_from(sorted(set(literals))))
    if near:
        options.append(st.sampled_from(near))
    if regex_samples:
        options.append(st.sampled_from(sorted(set(regex_samples))))
    return st.one_of(*options)


def outputs_for(
    literals: list[str], regex_samples: list[str], max_size: int = 14
) -> st.SearchStrategy[str]:
    return st.lists(fragments_for(literals, regex_samples), max_size=max_size).map("".join)


# -- templates -----------------------------------------------------------------------------

LITERALS = [
    "<a>",
    "</a>",
    "<b>",
    "</b>",
    "<a",
    "a>",
    "<|x|>",
    "[X]",
    "<ab>",
    "ab",
    "a",
    "<p=a>",
    "\n",
    "</p>",
]
# Patterns whose branches are read apart: a branch that matches only at the stream's first
# position (RegexProfile.start_only), or a run behind look-behinds (RegexProfile.led_guarded).
ANCHORED: list[tuple[str, list[str]]] = [
    # Past the first position, the other branches' texts tell where a match can start (xlam, ernie).
    (r"(?:^\s*|<x1>\s*)(?=\[)", ["[", "  [", "<x1> [", "<x1>", " "]),
    (r"(?:\A|<s2>)", ["<s2>"]),
    (r"^<h1>", ["<h1>"]),
    # Under MULTILINE, `^` also matches after a newline: not start-only.
    (r"(?m)(?:^|<s3>)x", ["\nx", "<s3>x", "x"]),
    # Led by a run behind look-behinds (RegexProfile.led_guarded, deepseek_v4), with and
    # without a branch whose run has none, and after a start-only branch.
    (
        r"(?:\s*<d1>|(?<=</d2>)|(?<=/>))\s*<d3=(?P<n>\w+)>",
        ["<d1> <d3=a>", "</d2> <d3=b>", "/><d3=c>", " <d", "</d2>", " ", "</d2>\n<d"],
    ),
    (r"(?:(?<=\n)|(?<=>))\s*<d4>", ["\n <d4>", "> <d4>", " <d4>", ">  ", "\n"]),
    (r"(?:^|(?<=;))\s*<d5>", [" <d5>", "; <d5>", "<d5>", ";", " "]),
]
# (pattern, strings that match it, whether it has named groups)
PATTERNS: list[tuple[str, list[str]]] = [
    (r"<f=(?P<name>\w+)>", ["<f=get>", "<f=a_b>", "<f=>"]),
    (r"\s*<t>", [" <t>", "\n<t>", "<t>"]),
    (r"(?:^|<s>)", ["<s>"]),
    (r"\n?</r>", ["\n</r>", "</r>"]),
    (r"$", ["\n"]),
    (r"\Z", [""]),
    (r"(?<=\n)<l>", ["\n<l>", "<l>"]),
    (r"<m>.*?</m>", ["<m>xx</m>", "<m>"]),
    (r"<c\d+>", ["<c1>", "<c42>"]),
    (r"x+", ["x", "xxx"]),
    (r"\bw\b", [" w ", "w"]),
    (r"(?:<a>)?[^<]*<k>", ["<a>zz<k>", "q<k>"]),
    (r"<(?P<tag>[ab])>", ["<a>", "<b>"]),
    (r"(?=<z>)", ["<z>"]),
    # A look-ahead behind look-behinds: a match starts where the look-ahead's literal does
    # (llama3_json's `(?<=\}\s*;?\s*)(?=\{...)`, pythonic's `(?=\[...)`).
    (r"(?:<p6>\s*|(?<=\}\s*))(?=\{\w)", ["<p6> {a", "} {b", "}{", "{c", "<p6>"]),
    (r"(?<=[;)])(?=\[X)", [";[X", ")[X]", "[X", ";["]),
    # A close that looks behind at the text before it: after a zero-width open it matches
    # at once where the last region ended (runtime.scanner, "Progress rule").
    (r"(?<=\})\s*", ["}", "} ", "{a}{", "}\n"]),
    (r"<y>(?!!)", ["<y>", "<y>!"]),
    (r"(?i)<ci>", ["<CI>", "<ci>"]),
    (r"\p{Lu}+:", ["AB:", "É:"]),
    (r"<g>|<gg>", ["<g>", "<gg>"]),
    # Alternations whose branches have different literal prefixes (one per branch, a
    # look-ahead branch counting with its content's):
    (r"</w>|(?=<o>\s*<f=)", ["</w>", "<o> <f=", "<o>\n<f", "<o>x"]),
    (r"<k1>|\n<j2>\s*", ["<k1>", "\n<j2>  ", "\n<j"]),
    # An open that looks ahead to its close (glm45): it waits for the text both end with.
    (r"<o2>\s*(?P<n>\w+)(?=(?:(?!<o2>).)*?</o2>)", ["<o2> ab", "<o2>a</o2>", "<o2>x<o2>y"]),
    (r"<(?P<n>\w+)\|(?P<v>\d*)>", ["<ab|12>", "<x|>"]),
    (r"(?:<e>)?", ["<e>"]),
    (r"(?<=a)b", ["ab", "b"]),
    # Held matches that wait on a run of one class (RegexDelimiter.waits):
    (r"</t>\s*", ["</t>", "</t>  \n", "</t> x"]),
    (r"<h>\s*<i=(?P<n>\w+)>", ["<h> <i=ab>", "<h>\n\n<i=", "<h>  <i=a b>"]),
    (r"<u>call:(?P<n>[\w.-]+)", ["<u>call:a.b-c", "<u>call:", "<u>call:x y"]),
    (r"<v>\s*?x", ["<v>  x", "<v> y x"]),
    (r"<q>[a<]*<", ["<q>aa<", "<q>a<a", "<q>"]),
    # Led by a run (RegexProfile.led_by): held as the run and a piece of a prefix.
    (r"\s*(?:<a1>\s*)?<b1=(?P<n>\w+)>", [" <a1> <b1=x>", "<b1=y>", "\n<a1><b1=", "  <a"]),
    (r"\s*(?:<e1>|<e2>)", ["  <e1>", "<e2>", " \n<e", " "]),
    (r"[ \t]*<p1>", [" \t<p1>", "<p1>", "\t<p", " "]),
    # ... by a text that ends in a piece of itself ("```" ends in "``", deepseek_r1's close).
    (r"\s*```\s*<e3>", ["\n```<e3>", "```", " ``", "\n```\n<e", "``"]),
    # A look-behind that cannot be bounded: the parser keeps the whole stream.
    (r"(?<=\n\s*)<w>", ["\n  <w>", "\n<w>", "x <w>"]),
    *ANCHORED,
]
FIELD_NAMES = [
    "thinking",
    "content",
    "tool_calls",
    "a",
    "b b",
    "é",
    "class",
    "__init__",
    "x.y",
    "START",
]


def _has_groups(pattern: str) -> bool:
    return "(?P<" in pattern


@st.composite
def delimiters(draw: Any, *, allow_pattern: bool = True) -> tuple[str, Any, list[str]]:
    """(key kind, value, regex samples): a literal, a literal list, or a pattern."""
    choice = draw(
        st.sampled_from(
            ["literal", "literal", "list", "pattern"] if allow_pattern else ["literal", "list"]
        )
    )
    if choice == "literal":
        return "literal", draw(st.sampled_from(LITERALS)), []
    if choice == "list":
        return "literal", draw(st.lists(st.sampled_from(LITERALS), min_size=1, max_size=3)), []
    pattern, samples = draw(st.sampled_from(PATTERNS))
    return "pattern", pattern, samples


@st.composite
def content_specs(draw: Any) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            ["text", "text", "int", "float", "bool", "json", "json", "xml-inline", "kv-lines"]
        )
    )
    spec: dict[str, Any] = {"content": kind} if kind != "text" or draw(st.booleans()) else {}
    args: dict[str, Any] = {}
    if draw(st.integers(0, 9)) == 0:
        spec["content_args"] = draw(
            st.sampled_from([None, [], "x", 3])
        )  # the reference fails at close
        return spec
    if draw(st.booleans()):
        args["strip"] = draw(st.sampled_from([True, False, 0, "no"]))
    if kind == "json":
        if draw(st.booleans()):
            args["unquoted_keys"] = True
        if draw(st.booleans()):
            args["allow_non_json"] = True
        if draw(st.integers(0, 3)) == 0:
            args["string_delims"] = draw(
                st.sampled_from([[["'", "'"]], [["<q>", "</q>"], ["'", "'"]], ["ab"], "x", None, 5])
            )
    elif kind == "xml-inline":
        tag = draw(
            st.sampled_from(
                [
                    r"<p=(?P<key>\w+)>(?P<value>.*?)</p>",
                    r"<(?P<key>\w+)>(?P<value>.*?)</(?P=key)>",
                    r"<p=(?P<key>\w+)>",  # no value group: each value is ""
                    r"<p=(?:(?P<key>a)|\w)>(?:(?P<value>\d)|\w+)</p>",  # groups left unset
                    r"<(\w+)>",
                    "(",
                    None,
                ]
            )
        )
        if tag is not None:
            args["tag_pattern"] = tag
        if draw(st.booleans()):
            args["merge_duplicates"] = True
        if draw(st.booleans()):
            args["value_parser"] = draw(
                st.sampled_from(
                    [
                        {"name": "json", "args": {"allow_non_json": True}},
                        {"name": "int"},
                        {},
                        {"name": "nope"},
                        "json",
                    ]
                )
            )
    elif kind == "kv-lines":
        if draw(st.booleans()):
            args["line_sep"] = draw(st.sampled_from([";", "\n", None, ""]))
        if draw(st.booleans()):
            args["kv_sep"] = draw(st.sampled_from(["=", ":", ""]))
        if draw(st.booleans()):
            args["value_parser"] = draw(
                st.sampled_from([{"name": "int"}, {"name": "json", "args": {"allow_non_json": 1}}])
            )
    if args or draw(st.booleans()):
        spec["content_args"] = args
    return spec


@st.composite
def transforms(draw: Any, captures: list[str], each: bool) -> Any:
    names = ["content", "content.a", "content.name", "missing", *captures]
    if each:
        names += ["tool_name", "parameters", "a", "name"]
    leaf = st.one_of(
        st.sampled_from([f"{{{name}}}" for name in names]),
        st.sampled_from(["function", "", 3, None, True, "{{", "a{b"]),
    )
    tree = st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(
                st.sampled_from(["type", "function", "name", "arguments"]), inner, max_size=3
            ),
        ),
        max_leaves=6,
    )
    return draw(tree)


@st.composite
def templates(draw: Any) -> tuple[dict[str, Any], list[str], list[str]]:
    """(template, literal delimiters, regex samples) for a template the reference accepts."""
    names = draw(st.lists(st.sampled_from(FIELD_NAMES), min_size=1, max_size=4, unique=True))
    implicit_index = draw(st.one_of(st.none(), st.integers(0, len(names) - 1)))
    literals: list[str] = []
    samples: list[str] = []
    fields: dict[str, Any] = {}

    def note(kind: str, value: Any, pattern_samples: list[str]) -> None:
        if kind == "literal":
            literals.extend([value] if isinstance(value, str) else value)
        else:
            samples.extend(pattern_samples)

    for index, name in enumerate(names):
        field: dict[str, Any] = {}
        groups: list[str] = []
        if index != implicit_index:
            kind, value, pattern_samples = draw(delimiters())
            field["open" if kind == "literal" else "open_pattern"] = value
            note(kind, value, pattern_samples)
            if kind == "pattern" and _has_groups(value):
                groups += [g for g in ("name", "tag", "n", "v") if f"(?P<{g}>" in value]
        if draw(st.integers(0, 4)) > 0:
            kind, value, pattern_samples = draw(delimiters())
            field["close" if kind == "literal" else "close_pattern"] = value
            note(kind, value, pattern_samples)
            if kind == "pattern" and _has_groups(value):
                groups += [g for g in ("name", "tag", "n", "v") if f"(?P<{g}>" in value]
        field.update(draw(content_specs()))
        if draw(st.integers(0, 2)) == 0:
            field["repeats"] = draw(st.sampled_from([True, 1, "yes"]))
            if draw(st.booleans()):
                field["join"] = draw(st.sampled_from(["", "\n", "|"]))
        if draw(st.integers(0, 5)) == 0:
            field["optional"] = draw(st.sampled_from([False, 0, None]))
        if groups or draw(st.integers(0, 2)) == 0:
            each = field.get("content") == "json" and draw(st.booleans())
            field["transform"] = draw(transforms(groups, each))
            if field["transform"] is None:
                field["transform"] = "{content}"
            if each:
                field["transform_each"] = True
        fields[name] = field

    template: dict[str, Any] = {"fields": fields}
    anchor_kind = draw(st.sampled_from(["literal", "list", "pattern"]))
    if anchor_kind == "literal":
        template["start_anchor"] = draw(st.sampled_from(["<|s|>", "<a>", "A:", "\n"]))
    elif anchor_kind == "list":
        template["start_anchor"] = draw(
            st.lists(st.sampled_from(["<|s|>", "<a>", "A:", "A:<a>"]), min_size=1, max_size=3)
        )
    else:
        template["start_anchor_pattern"] = draw(
            st.sampled_from([r"<\|s\|>", r"A:\s*", r"(?:<a>)+"])
        )
    defaults = draw(
        st.sampled_from(
            [None, {}, {"role": "assistant"}, {"role": "assistant", names[0]: ""}, {names[0]: []}]
        )
    )
    if defaults is not None:
        template["defaults"] = defaults
    return template, literals, samples


@st.composite
def prefixes(draw: Any, template: dict[str, Any], fragments: st.SearchStrategy[str]) -> str:
    """Prefixes that hold zero, one or several anchors and may end inside a region."""
    anchor = template.get("start_anchor", "<|s|>")
    anchors = anchor if isinstance(anchor, list) else [anchor]
    if "start_anchor_pattern" in template:
        anchors = ["<|s|>", "A:  ", "<a><a>"]
    pieces = draw(st.lists(st.one_of(st.sampled_from(anchors), fragments), max_size=6))
    return "".join(pieces)


@st.composite
def anchored_templates(draw: Any) -> tuple[dict[str, Any], list[str], list[str]]:
    """templates() with one more field whose open (watched in the start state) is one of
    ANCHORED: a start-only branch or a run behind look-behinds, so that the start state's
    fast path, quick route and prefilters meet such a pattern at and after the first
    position."""
    template, literals, samples = draw(templates())
    pattern, pattern_samples = draw(st.sampled_from(ANCHORED))
    name = draw(st.sampled_from([name for name in FIELD_NAMES if name not in template["fields"]]))
    field: dict[str, Any] = {"open_pattern": pattern}
    if draw(st.booleans()):
        close = draw(st.sampled_from(LITERALS))
        field["close"] = close
        literals.append(close)
    template["fields"][name] = field
    return template, literals, [*samples, *pattern_samples]


@st.composite
def broken_run_templates(draw: Any) -> tuple[dict[str, Any], list[str], list[str]]:
    """Templates whose start state's opens are all HEAD + [^B]* + LITERAL, with one HEAD
    (empty, or an optional literal) and one run, each literal starting with a break (a
    character of B): the shape runtime.waiting.BrokenRun reads (inkling's sink). Samples
    are pieces of HEAD's literal, breaks and runs, so outputs break runs everywhere."""
    breaks = draw(st.sampled_from(["<", "<\n", "<[", "|"]))
    first, last = breaks[0], breaks[-1]
    opener = draw(st.sampled_from(["", first + "|m|>", first + "m" + last + "x>", last + "h"]))
    head = f"(?:{re.escape(opener)})?" if opener else ""
    run = "[^" + "".join("\\" + char if char in "\\]^-[" else char for char in breaks) + "]*"
    names = draw(
        st.lists(
            st.sampled_from(["content", "thinking", "tool_calls"]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    kinds = [first + "|a|>", first + "|ab|>", last + "b>", first + "|a", first + last, last + "x"]
    literals: list[str] = []
    fields: dict[str, Any] = {}
    implicit = draw(st.booleans()) and len(names) > 1
    for index, name in enumerate(names):
        field: dict[str, Any] = {}
        if not (implicit and index == 0):
            literal = draw(st.sampled_from(kinds))
            literals.append(literal)
            field["open_pattern"] = head + run + re.escape(literal)
            close = draw(st.sampled_from(["<|e|>", "</x>", "\n\n", first + "e"]))
            field["close"] = close
            literals.append(close)
        field["repeats"] = True
        if name == "tool_calls":
            field["content"] = "json"
        fields[name] = field
    template = {"fields": fields, "start_anchor": opener or "<|s|>"}
    if opener:
        literals.append(opener)
    samples = [breaks, first * 2, "xy", " z", '{"a": 1}'] + [
        opener[:cut] for cut in range(1, len(opener))
    ]
    return template, literals, samples
