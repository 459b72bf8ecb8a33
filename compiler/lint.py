"""Template lint: shapes that parse correctly but cost time, or cannot do what they say.

Rules (each finding names its rule and the template key path):

- `backtracking` (warning): a pattern with a catastrophic-backtracking shape, a repeat
  nested in an unbounded repeat, or overlapping alternatives / adjacent repeats that can
  consume the same characters. Such patterns can take exponential or quadratic time on
  hostile output; the runtime bounds each search with a timeout, but the template
  should not need it.
- `prefix-open` (warning): one open delimiter is a prefix of another, so the scan holds
  back text until it knows which one the model is writing.
- `zero-width-open` (warning): an open_pattern that can match the empty string opens its
  region without consuming anything, possibly at every position.
- `unused-group` (warning): a named group no transform placeholder reads. Groups in a
  close_pattern never reach a transform (the reference only keeps the open's captures).
- `deferred-failure` (error): content_args the reference accepts but fails on at every
  region close (see compiler.content).
- `unanalysed-pattern` (info): a pattern outside the subset compiler.regex_profile reads;
  it is searched on every scan and keeps the whole stream as left context if needed.

A catalog entry may waive a finding with a reason, under "lint_waivers":
{"RULE PATH": "why this is fine"}. `make check` fails on findings that are neither waived
nor info.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import regex

from . import parts
from .ir import Deferred, Delimiter, Field, Template
from .regex_profile import nullable, parse, profile, sre

ERROR, WARNING, INFO = "error", "warning", "info"
_UNBOUNDED = 1 << 16  # repeats with a larger maximum count as unbounded


@dataclass(frozen=True)
class Finding:
    rule: str
    path: str
    message: str
    severity: str = WARNING

    @property
    def key(self) -> str:
        """How a waiver names this finding."""
        return f"{self.rule} {self.path}"

    def __str__(self) -> str:
        return f"{self.severity}: {self.path}: {self.message} [{self.rule}]"


def lint(template: Template) -> list[Finding]:
    findings: list[Finding] = []
    for field in template.fields:
        for delimiter in (field.open, field.close):
            if delimiter is not None and delimiter.pattern is not None:
                findings += _pattern_findings(delimiter)
        findings += _group_findings(field)
        findings += _deferred_findings(field.plan, f"{field.path}.content_args")
    findings += _prefix_open_findings(template)
    if template.start_anchor.pattern is not None:
        findings += _pattern_findings(template.start_anchor)
    return findings


def lint_entry(name: str) -> tuple[list[Finding], dict[str, str]]:
    """The findings for a catalog entry, and the entry's waivers."""
    from .catalog import load_entry
    from .spec import build_template

    entry = load_entry(name)
    template = build_template(entry.data["response_template"], source=entry.path.as_posix())
    return lint(template), entry.data.get("lint_waivers", {})


def unwaived(findings: list[Finding], waivers: dict[str, str]) -> list[Finding]:
    """Findings that fail a check: not info, and not waived with a reason."""
    return [f for f in findings if f.severity != INFO and not waivers.get(f.key)]


# -- patterns --------------------------------------------------------------------------


def _pattern_findings(delimiter: Delimiter) -> list[Finding]:
    assert delimiter.pattern is not None
    path = delimiter.path
    tree = parse(delimiter.pattern)
    if tree is None:
        searched = (
            "always searched"
            if profile(delimiter.pattern).first_chars is None
            else "searched where its analysable head can start"
        )
        return [
            Finding(
                "unanalysed-pattern",
                path,
                f"outside the analysable regex subset; {searched}",
                INFO,
            )
        ]
    findings = [Finding("backtracking", path, shape) for shape in _backtracking_shapes(list(tree))]
    if path.endswith("open_pattern") and nullable(list(tree)):
        findings.append(Finding("zero-width-open", path, "can match the empty string"))
    return findings


def _backtracking_shapes(items: list[Any], inside_repeat: bool = False) -> list[str]:
    shapes: list[str] = []
    previous_repeat: Any = None
    for op, av in items:
        if op in _REPEATS:
            _, high, body = av
            unbounded = high >= _UNBOUNDED
            if unbounded and inside_repeat:
                shapes.append("a repeat nested inside an unbounded repeat")
            if unbounded and previous_repeat is not None and _overlap(previous_repeat, list(body)):
                shapes.append("adjacent unbounded repeats that can consume the same characters")
            if unbounded and any(_branches_overlap(a) for a in _branches(list(body))):
                shapes.append("an unbounded repeat over alternatives that can match the same text")
            shapes += _backtracking_shapes(list(body), inside_repeat or unbounded)
            previous_repeat = list(body) if unbounded else None
            continue
        if op not in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
            previous_repeat = None
        for child in _children(op, av):
            shapes += _backtracking_shapes(child, inside_repeat)
    return list(dict.fromkeys(shapes))


_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT}


def _children(op: Any, av: Any) -> list[list[Any]]:
    if op is sre.SUBPATTERN:
        return [list(av[-1])]
    if op is sre.BRANCH:
        return [list(alternative) for alternative in av[1]]
    if op in (sre.ASSERT, sre.ASSERT_NOT):
        return [list(av[1])]
    return []


_CATEGORIES = {"CATEGORY_DIGIT": "DIGIT", "CATEGORY_SPACE": "SPACE", "CATEGORY_WORD": "WORD"}


def _first_kinds(items: list[Any]) -> set[str]:
    """What a match of `items` can start with: characters, DIGIT / SPACE / WORD, or ANY."""
    kinds: set[str] = set()
    for op, av in items:
        if op is sre.LITERAL:
            return kinds | {chr(av)}
        if op is sre.IN:
            for item_op, item_av in av:
                if item_op is sre.LITERAL:
                    kinds.add(chr(item_av))
                elif item_op is sre.CATEGORY and str(item_av).split(".")[-1] in _CATEGORIES:
                    kinds.add(_CATEGORIES[str(item_av).split(".")[-1]])
                else:
                    kinds.add("ANY")
            return kinds
        if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
            continue
        if op in _REPEATS:
            kinds |= _first_kinds(list(av[2]))
            if av[0] > 0:
                return kinds
            continue
        if op is sre.SUBPATTERN:
            kinds |= _first_kinds(list(av[-1]))
            if not nullable(list(av[-1])):
                return kinds
            continue
        if op is sre.BRANCH:
            for alternative in av[1]:
                kinds |= _first_kinds(list(alternative))
            return kinds
        return kinds | {"ANY"}
    return kinds


def _compatible(a: str, b: str) -> bool:
    if "ANY" in (a, b) or a == b:
        return True
    tests = {"DIGIT": str.isdigit, "SPACE": str.isspace, "WORD": lambda c: c.isalnum() or c == "_"}
    if a in tests and b in tests:
        return {a, b} == {"DIGIT", "WORD"}
    if a in tests:
        return tests[a](b)
    if b in tests:
        return tests[b](a)
    return False


def _overlap(left: list[Any], right: list[Any]) -> bool:
    return any(_compatible(a, b) for a in _first_kinds(left) for b in _first_kinds(right))


def _branches(items: list[Any]) -> list[Any]:
    """Alternations at the top of a sequence, looking through groups."""
    found = []
    for op, av in items:
        if op is sre.BRANCH:
            found.append(av)
        elif op is sre.SUBPATTERN:
            found += _branches(list(av[-1]))
    return found


def _branches_overlap(av: Any) -> bool:
    alternatives = [list(alternative) for alternative in av[1]]
    if any(nullable(alternative) for alternative in alternatives):
        return True  # one way to match nothing, another to match something: ambiguous
    for index, first in enumerate(alternatives):
        for second in alternatives[index + 1 :]:
            if _overlap(first, second):
                return True
    return False


# -- fields ----------------------------------------------------------------------------


def _groups(delimiter: Delimiter | None) -> list[str]:
    if delimiter is None or delimiter.pattern is None:
        return []
    return sorted(regex.compile(delimiter.pattern, regex.DOTALL).groupindex)


def _group_findings(field: Field) -> list[Finding]:
    used = {placeholder.root for placeholder in parts.placeholders(field.transform)}
    findings = []
    for name in _groups(field.open):
        if name not in used:
            findings.append(Finding("unused-group", f"{field.open.path}", f"named group {name!r} is not used"))  # type: ignore[union-attr]
    for name in _groups(field.close):
        findings.append(
            Finding("unused-group", f"{field.close.path}", f"named group {name!r}: close captures never reach a transform")  # type: ignore[union-attr]
        )
    return findings


def _deferred_findings(plan: Any, path: str) -> list[Finding]:
    """A plan (or nested value parser) whose every close raises, as the reference's does."""
    findings = []
    for where, nested in parts.plan_paths(plan, path):
        if isinstance(nested, Deferred):
            message = f"every close raises {nested.error}: {nested.message}"
            findings.append(Finding("deferred-failure", where, message, ERROR))
        elif isinstance(deferred := getattr(nested, "string_delims", None), Deferred):
            message = f"every close raises {deferred.error}"
            findings.append(Finding("deferred-failure", f"{where}.string_delims", message, ERROR))
    return findings


def _prefix_open_findings(template: Template) -> list[Finding]:
    starts: list[tuple[str, str]] = []  # (text every match starts with, path)
    for field in template.fields:
        if field.open is None:
            continue
        if field.open.literals is not None:
            starts += [(literal, field.open.path) for literal in field.open.literals]
        else:
            prefixes = profile(field.open.pattern or "").literal_prefixes
            starts += [(prefix, field.open.path) for prefix in prefixes]
    findings = []
    for text, path in starts:
        for other, other_path in starts:
            if other != text and other.startswith(text) and other_path != path:
                findings.append(
                    Finding(
                        "prefix-open", path, f"{text!r} is a prefix of {other!r} ({other_path})"
                    )
                )
    return findings
