"""Content parsers that generated `_close_<field>` methods call with baked-in arguments.

text, int, float and bool are one expression each and are written inline by the
compiler. The structured parsers live here; every argument arrives already resolved
(truthiness applied, patterns compiled at import), so a call does no template lookups.
Their results and exceptions are those of the reference's parsers for the same input.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NoReturn

import regex

from . import errors
from .automaton import SHORT_SPANS

ValueParser = Callable[[Any], Any]

# Placeholders for strings lifted out by `string_delims`, made of control characters no
# model writes; a body that contains them is refused rather than mis-parsed.
_LIFT_OPEN, _LIFT_CLOSE = "\x01", "\x02"
_BARE_KEY = regex.compile(r"(?<=[{,])(\w+):")
# The C scanner json.loads runs, called directly (see _decoded); typeshed leaves it out.
_SCAN_JSON: Callable[[str, int], tuple[Any, int]]
_SCAN_JSON = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_JSON_SPACE = " \t\n\r"


class Defect:
    """A template value the reference accepts at load time but fails on when used.

    The compiler turns such values into a Defect, so that the generated parser raises the
    same exception class at the same step instead of refusing the template. It is
    callable (as a broken `value_parser`) and raisable (as broken `string_delims`);
    `truthy` keeps the truth value of the original template value.
    """

    __slots__ = ("error", "message", "truthy")

    def __init__(self, error: type[Exception], message: str, *, truthy: bool = True) -> None:
        self.error = error
        self.message = message
        self.truthy = truthy

    def __bool__(self) -> bool:
        return self.truthy

    def __call__(self, raw: Any) -> NoReturn:
        raise self.error(self.message)


# The content-parser patterns the compiler found cheap (`cheap`), each with the most
# characters a search with it runs over without the time bound.
_SHORT_SPAN: dict[Any, int] = {}


def cheap(pattern: Any, *, repeats: int) -> Any:
    """`pattern`, recorded as cheap of degree `repeats`: one match attempt over n characters
    takes O(n^repeats) steps (compiler.regex_profile.RegexProfile.repeats), so a search
    over at most SHORT_SPANS[repeats] characters needs no time bound, as for delimiters
    (runtime.automaton). Generated modules wrap such content-parser patterns in it."""
    span = SHORT_SPANS[repeats]
    _SHORT_SPAN[pattern] = min(span, _SHORT_SPAN.get(pattern, span))
    return pattern


def bounded(method: Callable[..., Any], where: str, size: int, *args: Any) -> Any:
    """`method(*args)`, a template regex's method over `size` characters, under the time
    bound (runtime.errors) unless the pattern is `cheap` and the text short enough: the
    bound's set-up in `regex` (~2.5 us) costs more than such a search (~0.5 us for a short
    value); an iterator's matches are collected."""
    if size <= _SHORT_SPAN.get(getattr(method, "__self__", None), -1):
        result = method(*args)
        return result if isinstance(result, str) else list(result)

    def call(timeout: float) -> Any:
        result = method(*args, timeout=timeout)
        return result if isinstance(result, str) else list(result)

    return errors.search_bounded(call, where, size)


def parse_json(
    text: str,
    *,
    unquoted_keys: bool = False,
    string_delims: tuple[Any, ...] | Defect = (),
    allow_non_json: bool = False,
    strip: bool = True,
) -> Any:
    """JSON, with the dialect knobs of the `json` content parser.

    `string_delims` holds one compiled `OPEN(.*?)CLOSE` pattern per custom string
    delimiter pair. `strip` applies to the raw-text fallback of `allow_non_json`.
    """
    working = text
    if string_delims or unquoted_keys or isinstance(string_delims, Defect):
        working = _in_json(text, unquoted_keys, string_delims)
    start = len(working) - len(working.lstrip(_JSON_SPACE))
    if allow_non_json and (start == len(working) or working[start] not in _JSON_STARTS):
        # The raw-text fallback without json.loads raising first: a failed decode costs
        # several microseconds (its error message), and most XML argument values are text.
        # Every value json.loads decodes starts with one of _JSON_STARTS.
        return text.strip() if strip else text
    try:
        return _decoded(working, start)
    except json.JSONDecodeError as error:
        if allow_non_json:
            return text.strip() if strip else text
        after = "" if working == text else " (after the dialect transforms)"
        raise ValueError(
            f"json parser could not parse region as JSON{after}: {error.msg} at character "
            f"{error.pos}: {errors.excerpt(working, error.pos)}"
        ) from error


def _in_json(text: str, unquoted_keys: bool, string_delims: tuple[Any, ...] | Defect) -> str:
    """The text with the dialect's strings and bare keys written as JSON's (parse_json)."""
    if string_delims and (_LIFT_OPEN in text or _LIFT_CLOSE in text):
        raise ValueError(
            "json: input contains reserved sentinel characters (\\x01/\\x02); cannot parse safely."
        )
    if isinstance(string_delims, Defect):
        string_delims(text)
    working = text
    lifted: list[str] = []
    for pattern in string_delims:

        def lift(match: Any) -> str:
            lifted.append(match.group(1))
            return f"{_LIFT_OPEN}{len(lifted) - 1}{_LIFT_CLOSE}"

        working = bounded(pattern.sub, "json string_delims", len(working), lift, working)
    if unquoted_keys:
        working = _BARE_KEY.sub(_quoted_key, working)
    for index, value in enumerate(lifted):
        working = working.replace(f"{_LIFT_OPEN}{index}{_LIFT_CLOSE}", json.dumps(value))
    return working


def _quoted_key(match: Any) -> str:
    """An unquoted key `key:` as `"key":` (a function: `regex` parses a template string
    such as `"\\1":` again on every call)."""
    return f'"{match.group(1)}":'


def _decoded(text: str, start: int) -> Any:
    """json.loads(text), where text[start] is its first character after JSON whitespace.

    The decoder's C scanner, called directly: json.loads costs about 1 us more per value
    (1.26 against 0.29 us for `3`) in its checks and two whitespace regexes. Anything
    the scanner does not take whole goes to json.loads, which raises its own error; the
    scanner raises json.loads's errors from inside a value itself.
    """
    try:
        value, end = _SCAN_JSON(text, start)
    except StopIteration:
        return json.loads(text)
    if end != len(text) and text[end:].strip(_JSON_SPACE):
        return json.loads(text)  # "Extra data"
    return value


# The first characters of every value json.loads decodes (`NaN`, `Infinity` and
# `-Infinity` included).
_JSON_STARTS = frozenset('{["-0123456789tfnNI')


def parse_xml_inline(
    text: str,
    tag_pattern: Any,
    *,
    value_parser: ValueParser | None = None,
    merge_duplicates: bool = False,
    kind_parsers: dict[str, ValueParser] | None = None,
    ends_with: str = "",
) -> dict[str, Any]:
    """A flat run of tags into a dict: the `key` and `value` groups of each tag match.

    `kind_parsers` (extension x-xml-inline) picks the value parser by the text of the
    tag's `kind` group; a tag without a listed kind uses `value_parser`. `ends_with` is
    text every tag match ends with: no match reaches past its last occurrence, so the
    search stops there (linear time on unclosed tags, which a lazy value would otherwise
    scan to the end from each one).
    """
    out: dict[str, Any] = {}
    end = len(text)
    if ends_with:
        last = text.rfind(ends_with)
        end = 0 if last == -1 else last + len(ends_with)
    # The groups by number: `groups()` costs a fifth of `groupdict()` (0.2 against 1 us).
    numbers = tag_pattern.groupindex
    key_at, value_at, kind_at = numbers.get("key"), numbers.get("value"), numbers.get("kind")
    for match in bounded(tag_pattern.finditer, "xml-inline tag_pattern", end, text, 0, end):
        groups = match.groups()
        key = None if key_at is None else groups[key_at - 1]
        if key is None:
            raise ValueError(
                f"xml-inline: tag_pattern must have a named group 'key'. Pattern: {tag_pattern.pattern}"
            )
        raw = "" if value_at is None else groups[value_at - 1]
        parser = (
            kind_parsers.get((None if kind_at is None else groups[kind_at - 1]) or "", value_parser)
            if kind_parsers
            else value_parser
        )
        value = raw if parser is None else parser(raw)
        if key in out and merge_duplicates:
            if not isinstance(out[key], list):
                out[key] = [out[key]]
            out[key].append(value)
        else:
            out[key] = value
    return out


def parse_kv_lines(
    text: str,
    *,
    line_sep: Any = "\n",
    kv_sep: Any = ":",
    strip: bool = True,
    value_parser: ValueParser | None = None,
) -> dict[str, Any]:
    """`key<kv_sep>value` pairs, one per `line_sep`; lines without kv_sep are skipped."""
    out: dict[str, Any] = {}
    for line in text.split(line_sep):
        if strip:
            line = line.strip()
        if not line or kv_sep not in line:
            continue
        key, value = line.split(kv_sep, 1)
        if strip:
            key, value = key.strip(), value.strip()
        out[key] = value if value_parser is None else value_parser(value)
    return out
